"""`IsolatedRunner`: a runner (`module:factory`, or ours with `--isolate`) run in its own process.

The harness never imports the plug-in: a child (`runners.isolate.child`) builds its own copy of the
program with the builder it is given, imports the plug-in, and answers requests; this side sends
each request, reads the reply (plain JSON, validated by `wire`) and hands the run and its call
log to the judging code as if the runner had run here: the call log fills the harness's own
`RecordingProgram`, so every audit reads it as before.

Every way out of the child is a verdict (`RunCrash`, the request's FAIL) naming the reason, the
exit status and the tail of its output: an exit (any code) or a signal during a request, a
protocol violation, threads left running, a timeout (its process tree killed; the limit holds
within a second). A fresh child answers the remaining requests. A child that dies before it is
ready (at the plug-in's import, in its factory) fails every request with that reason, without a
retry; a plug-in the child cannot find (`load_runner`'s one-line error) is still a user error.

What the child writes on fd 1 and fd 2 is read into the record of the request it was written
during (or after: until the next one starts), bounded (`proc.BoundedOutput`): `records()` is
what a report keeps of it.
"""

from __future__ import annotations

import os
import sys
import time

from eagle3_check.errors import InputError
from eagle3_check.runners.crash import RunCrash
from eagle3_check.runners.isolate import wire
from eagle3_check.runners.isolate.process import EXIT_WAIT_S, Child, ChildGone, status_line
from eagle3_check.runners.proc import BoundedOutput

BUILD_LIMIT_S = 1800.0  # building the program in the child (a real model on CPU: minutes)
TAIL_CHARS = 600  # output tail in a reason line


class IsolatedRunner:
    """A runner in a child process (see the module doc). `build` is a picklable no-argument callable
    returning (program, tokenizer): the child calls it; None: the child has no program of its own and
    each request's program is the harness's, called over the pipe (runners/isolate/remote.py: the suites, the
    gate, golden verify, the pytest plugin). `spec` is the `--runner` value. One more request at any
    time (a shrinker's smaller one): `run(program, tokenizer, prompt, options)`, as any runner."""

    isolated = True  # guarded_run hands this runner its request by name (run_named), in this thread

    def __init__(self, spec: str, build, timeout: float | None = None, flag: str = "--request-timeout",
                 profile: str | None = None):
        self.spec, self.build, self.timeout, self.flag = spec, build, timeout, flag
        self.given_profile = profile  # --runner-profile: the child's runner runs by it (runners/isolate/declared.py)
        self._declared: tuple[str | None, str] | None = None  # (profile, how found), from the ready message
        self.protections: dict | None = None  # what closed the last child in (runners/isolate/sandbox.observed)
        self.child: Child | None = None
        self.dead: str | None = None  # why no child can answer (it died before it was ready)
        self._records: list[dict] = []
        self._queue: list[tuple] = []  # requests to send ahead (`expect`)
        self._pending: tuple | None = None  # (name, prompt, options, deadline) sent, not yet answered
        self.children = 0  # children started
        self.remote = build is None  # the harness's program, call by call
        self.twin = None  # the harness's copy of the child's own program: a request on another goes remote
        self._over_pipe = self.remote  # the request in flight: on the harness's program, call by call
        self._tokenizer = None  # the tokenizer the child holds (remote: sent when it changes)
        self._raised: BaseException | None = None  # the program's error in this request (remote)
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}

    # --- the child's life ---------------------------------------------------------------------------

    def start(self) -> None:
        """Starts a child now (it builds while the harness builds its own side); what it prints before
        its first request is the record of its start."""
        if self.child is None and self.dead is None:
            self.child = Child({"build": self.build, "spec": self.spec, "profile": self.given_profile}, self.env)
            self.children += 1
            self._tokenizer = None  # a fresh child holds none yet
            self._ready = False
            self._sink(f"start of process {self.children}")

    def _sink(self, what: str) -> None:
        """A new record; the child's output goes into it from now on."""
        if self.child is not None:
            self.child.drain()  # what is there belongs to the record before
        self._records.append({"request": what, "process": self.children, "out": BoundedOutput(16 * 1024, 16 * 1024)})
        if self.child is not None:
            self.child.output = self._records[-1]["out"]

    def ready(self) -> None:
        """Waits for the child to be ready; a plug-in it cannot load is an InputError (exit 2), a child
        that dies meanwhile marks every request failed (`dead`)."""
        self.start()
        if self.dead or self._ready:
            return
        child = self.child
        limit = BUILD_LIMIT_S
        try:
            while True:
                msg = child.next_message(time.monotonic() + limit)
                if "built" in msg:
                    limit = self.timeout or BUILD_LIMIT_S  # import + factory: the request limit
                    continue
                if "ready" in msg:
                    from eagle3_check.runners.isolate.declared import profile_of

                    try:
                        self._declared = profile_of(msg, self.given_profile)
                    except wire.WireError as e:
                        raise ChildGone(f"protocol violated: {e}") from None
                    from eagle3_check.runners.isolate.sandbox import observed

                    self.protections = observed(child.proc.pid, child.sandbox)  # read from /proc, not its word
                    self._ready = True
                    return
                if "error" in msg:
                    self._stop()
                    raise child_error(msg)
                if "crash" in msg:
                    self.dead = f"{str(msg['crash'])[:400]} (at the plug-in's import or in its factory)"
                    self._stop()
                    return
                raise ChildGone(f"protocol violated: unexpected message {sorted(msg)[:4]}")
        except TimeoutError:
            self.dead = f"timeout: the runner's process was not ready within {limit:g} s (at import or in its factory)"
        except ChildGone as e:
            code = child.exit_code(EXIT_WAIT_S)
            self.dead = f"crashed: the runner's process ended before its first request ({status_line(code)}; {e})"
        tail = self._tail(child)
        self._stop()
        self.dead += tail

    @property
    def profile(self) -> str | None:
        """The profile the runner runs by, as its child said when ready (None: it declares none, or
        its process died first); `runners.profiles.declared` reads it as it reads an in-process runner's."""
        if self._declared is None and self.dead is None:
            self.ready()
        return self._declared[0] if self._declared else None

    @profile.setter
    def profile(self, name: str) -> None:  # runners.profiles.declare: the next child is given it
        if name != self.given_profile:
            self.given_profile, self._declared = name, None
            self._queue = []
            self._stop()

    @property
    def profile_found(self) -> str:
        if self._declared is None and self.dead is None:
            self.ready()
        if self._declared:
            return self._declared[1]
        return "the newest: the runner's process ended before it declared a profile"

    @profile_found.setter
    def profile_found(self, how: str) -> None:
        pass  # computed from the child's ready message

    def _tail(self, child: Child) -> str:
        child.drain(0.2)
        text = child.output.last(TAIL_CHARS).strip()
        return f"; output tail: {text!r}" if text else "; no output"

    def _stop(self) -> None:
        self._pending = None
        if self.child is not None:
            self.child.kill()
            self.child = None

    def close(self) -> None:
        """Says bye (the child exits), ends its tree; output after the last request goes to its record.
        A child still busy with a request (Ctrl-C of the harness) is killed at once."""
        if self.child is not None and self._pending is not None:
            self._stop()
        if self.child is not None:
            self.child.send({"bye": True})
            self.child.exit_code(2.0)
            self._stop()

    def records(self) -> list[dict]:
        """Per request (and per process start): its name, the process (1-based) that ran it, and its
        output on fd 1 and 2 (head, tail, bytes); the records with no output are left out."""
        return [{"request": r["request"], "process": r["process"], "output": r["out"].to_json()}
                for r in self._records if r["out"].size]

    # --- one request ----------------------------------------------------------------------------

    def run(self, program, tokenizer, prompt, options):
        """The Runner protocol (a route that calls `run` itself: an error case, a shrinker's extra
        request): the runner's own project error (OptionError, ...) is raised as that error, every
        other way out as RunCrash."""
        try:
            return self.run_named(program, tokenizer, prompt, options, f"{len(self._records) + 1}")
        except RunCrash as e:
            from eagle3_check.errors import Eagle3CheckError

            if isinstance(e.__cause__, Eagle3CheckError):
                raise e.__cause__ from None
            raise

    def expect(self, requests: list[tuple[str, object]], options) -> None:
        """The requests that will come, in order ((name, prompt) each, one `options`): each is sent as
        soon as the child has answered the one before, so the child runs request i + 1 while the
        harness judges request i. A request that comes out of this order is sent when it comes."""
        if not self.remote:  # a remote request needs the harness's program: sent when it comes
            self._queue = [(what, prompt, options) for what, prompt in requests]

    def set_twin(self, program) -> None:
        """`program` is the harness's copy of what the child builds (check's prompt set): requests on it
        run on the child's own program; on any other, over the pipe."""
        from eagle3_check.runners.watchdog import root_of

        self.twin = root_of(program)

    def remote_for(self, program) -> bool:
        """Does a request on `program` go over the pipe? Always without a builder; with one, when the
        program is not the harness's twin of the child's own (a shrinker's smaller program, say)."""
        if self.remote:
            return True
        from eagle3_check.runners.watchdog import root_of

        return self.twin is not None and program is not None and root_of(program) is not self.twin

    def _send(self, what: str, prompt, options, program=None, tokenizer=None) -> None:
        self._sink(f"request {what}")
        req = {"prompt": prompt, "options": options}
        self._over_pipe = self.remote_for(program)
        if self._over_pipe:
            from eagle3_check.runners.isolate.remote import owns_outputs

            md = program.metadata()
            req["remote"] = {"metadata": md, "owned": owns_outputs(program),
                             "rows": int(md.get("get_max_seq_len", 1) or 1)}
            if tokenizer is not self._tokenizer:
                req["tokenizer"], self._tokenizer = tokenizer, tokenizer
            self._raised = None
        self.child.send(req)
        limit = self.timeout  # the limit runs from when the child gets the request
        self._pending = (what, prompt, options, time.monotonic() + (limit if limit is not None else 10**9))

    def _prefetch(self) -> None:
        queue = self._queue
        if queue and self.child is not None and self.dead is None and self._ready:
            self._send(*queue.pop(0))

    def run_named(self, program, tokenizer, prompt, options, what: str):
        """One request in the child: the RunResult (validated) and, into `program` (the harness's
        RecordingProgram), its call log. Raises RunCrash with the reason."""
        pending = self._pending
        if pending and ((pending[1], pending[2]) != (prompt, options) or self.remote_for(program)):
            self._queue, self._pending = [], None
            self._stop()  # its answer to another request is not this one's
            pending = None
        self.ready()
        if self.dead:
            raise RunCrash(f"not run: {self.dead}")
        if pending is None:
            queue = self._queue
            if queue and (queue[0][1], queue[0][2]) == (prompt, options):
                what = queue.pop(0)[0]
            self._send(what, prompt, options, program, tokenizer)
        what, _, _, deadline = self._pending
        self._pending = None
        child, limit = self.child, self.timeout
        try:
            msg = child.next_message(deadline)
            while self._over_pipe and "call" in msg:  # the runner calls the harness's program
                msg = self._serve(child, program, msg, deadline)
        except KeyboardInterrupt:  # Ctrl-C of the harness: the child's work is not wanted
            self._queue = []
            self._stop()
            raise
        except TimeoutError:
            tail = self._tail(child)
            self._stop()
            raise RunCrash(f"timeout: request {what} timed out after {limit:g} s ({self.flag} {limit:g}); the "
                           f"runner's process was killed{tail}. Fix: make the runner return within the limit "
                           f"or pass a larger {self.flag}") from None
        except ChildGone as e:
            code = child.exit_code(EXIT_WAIT_S)
            tail = self._tail(child)
            self._stop()
            raise RunCrash(f"crashed: the runner's process ended during request {what} ({status_line(code)}; {e}); "
                           f"expected a RunResult{tail}") from None
        child.drain()
        run = self._judgeable(msg, program, tokenizer)
        self._prefetch()  # the next request runs in the child while this one is judged
        return run

    def _serve(self, child: Child, program, msg: dict, deadline: float) -> dict:
        """One call of the runner on the harness's program (runners/isolate/remote.py), answered; the next message."""
        from eagle3_check.runners.isolate.remote import serve_call

        try:
            reply = serve_call(program, msg)
        except wire.WireError as e:
            raise ChildGone(f"protocol violated: {e}") from None
        self._raised = reply.pop("error", None) or self._raised
        child.send(reply)
        return child.next_message(deadline)

    def _judgeable(self, msg: dict, program, tokenizer):
        if "crash" in msg:
            from eagle3_check.errors import Eagle3CheckError
            from eagle3_check.runners.isolate.remote import rebuild_error

            cause = self._raised if isinstance(self._raised, Eagle3CheckError) else None
            if cause is None and isinstance(msg.get("raised"), list) and len(msg["raised"]) == 4:
                got = rebuild_error(msg["raised"])  # the runner's own OptionError, ... (an error case expects it)
                cause = got if isinstance(got, Eagle3CheckError) else None
            raise RunCrash(str(msg["crash"])[:600]) from cause
        if msg.get("threads_left"):
            names = [str(n)[:40] for n in msg["threads_left"]][:3]
            self._stop()  # a fresh child for the next request: the thread must not blame it
            raise RunCrash(f"contract violated: the runner left {len(msg['threads_left'])} thread(s) running "
                           f"after run() returned ({', '.join(names)}); expected run() to finish its work. "
                           "Fix: join the threads before returning")
        if set(msg) != ({"run", "threads_left"} if self._over_pipe else {"run", "log", "threads_left"}):
            self._stop()
            raise RunCrash(f"protocol violated: the runner's process sent {sorted(msg)[:5]}; expected a run")
        vocab = None
        try:
            from eagle3_check.program.contract import read_metadata

            vocab = read_metadata(program.metadata()).vocab_size
        except Exception:  # noqa: BLE001 - a program without a readable vocab size: the tokenizer's
            vocab = None
        vocab = vocab or getattr(tokenizer, "vocab_size", None)
        try:
            run = wire.run_from_plain(msg["run"], vocab)
            calls, refused = ([], []) if self._over_pipe else wire.calls_from_plain(msg["log"])
        except wire.WireError as e:
            raise RunCrash(f"contract violated: {e}") from None
        if not self._over_pipe and hasattr(program, "calls"):  # the harness's RecordingProgram: the audits read the child's log
            program.calls.extend(calls)
            program.refused.extend(refused)
        return run


def child_error(msg: dict) -> InputError:
    """The one-line error the runner's process raised while building or loading the runner, passed on
    in its own words (its value, what was expected, its fix), never wrapped in a second "expected"."""
    from eagle3_check.errors import Eagle3CheckError
    from eagle3_check.runners.isolate.remote import rebuild_error

    got = rebuild_error(msg.get("raised"))
    if isinstance(got, Eagle3CheckError):
        return InputError(got.what, got.expected, got.fix)
    return InputError(str(msg["error"])[:500], "a runner its own process can load", "fix what the message names")
