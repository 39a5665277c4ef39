"""A run that crashes is a FAIL verdict for its request, never a traceback or a "user error".

A plug-in runner's `run()` may raise anything (ZeroDivisionError, a torch shape error) or
return something that is not a `RunResult`; a program may break the contract during a run
(`ContractViolation`). These are findings about the code under test, so `check`, the edge
suites, the gate and `golden verify` report them as a failed request with the reason (type
and first line of the message) and go on judging the other requests; exit code 1.
Options found wrong before any work (prompt length, flags) stay errors (exit 2).

The runner under test is isolated from what judges it (`guarded_run`): it gets its own deep
copy of the options and of a prompt given as ids (a runner that sets `max_new_tokens = 1` on
them changes nothing the verdict reads), and its own copy of the tokenizer (`runner_tokenizer`, one per
runner: a runner that replaces `decode` or adds tokens cannot change the harness's decode); `sys.exit()` inside it is a crash, not the end of
the harness; what it prints to stdout is captured (stdout carries `--json`) and fails the
request with the text in the reason; a RunResult whose tokens, prompt ids, accepted counts,
rounds or K are not Python ints (float, numpy, tensor) fails with the offending field; a run
that takes longer than its limit (`watchdog.TimeLimited`; the CLI gives plug-ins 300 s) fails with
the request and the limit named (runners/watchdog.py: worker thread, abandoned).
"""

from __future__ import annotations

import copy
import threading
import weakref

from eagle3_check.errors import Eagle3CheckError
from eagle3_check.runners.result import RunResult
from eagle3_check.runners.shared_output import run_output
from eagle3_check.runners.watchdog import (
    RequestTimeout,
    limit_flag,
    run_limited,
    stray_threads,
    with_limit,
)
from eagle3_check.tokenizer import Tokenizer
from eagle3_check.untrusted import bounded

CRASHED = "crashed"  # the stop reason of the empty RunResult that stands in for a crashed run


class RunCrash(Exception):
    """A run that did not produce a RunResult; `str()` is the one-line reason for the report."""


def crash_reason(e: BaseException) -> str:
    """'crashed: ZeroDivisionError: division by zero' (first line of the message, at most 300 chars);
    a contract violation or other harness error keeps its own one-line message."""
    first = (str(e).splitlines() or [""])[0][:300]
    if isinstance(e, RunCrash):  # already a reason (an isolated runner's)
        return str(e)[:600]
    if isinstance(e, KeyboardInterrupt):
        return ("crashed: the runner raised KeyboardInterrupt; expected a RunResult from run(). "
                "Fix: return or raise an ordinary exception")
    if isinstance(e, SystemExit):
        return (f"crashed: the runner called sys.exit({e.code!r}) (SystemExit); expected a RunResult from run(). "
                "Fix: return or raise instead of exiting")
    if isinstance(e, Eagle3CheckError):
        return f"{type(e).__name__}: {first}"
    return f"crashed: {type(e).__name__}: {first}" if first else f"crashed: {type(e).__name__}"


def guarded_run(runner, program, tokenizer, prompt, options, what: str = "") -> RunResult:
    """`runner.run(...)` on its own copy of `options` (and of `prompt` when it is ids), stdout
    captured, within the runner's time limit (`what` names the request in a timeout); any
    exception or SystemExit, a timeout, a non-RunResult return, output on stdout or a field of
    the wrong type is turned into `RunCrash` with the one-line reason."""
    if getattr(runner, "isolated", False):  # its own process (runners.isolate.runner): a crash there is its RunCrash
        own = prompt if isinstance(prompt, str) else list(prompt)
        run = runner.run_named(program, tokenizer, own, copy.deepcopy(options), what or "?")
        problem = type_problem(run)
        if problem:
            raise RunCrash(f"contract violated: {problem}")
        return bounded(run)
    flag = limit_flag(runner)
    runner, seconds = with_limit(runner)
    own_options = copy.deepcopy(options)  # the caller's options stay what the verdict judges
    own_tokenizer = runner_tokenizer(runner, tokenizer)  # its own copy: the harness decodes with the original
    own_prompt = list(prompt) if isinstance(prompt, (list, tuple)) else prompt
    name = what or (repr(prompt[:40]) if isinstance(prompt, str) else f"of {len(own_prompt)} ids")
    before = set(threading.enumerate())
    try:
        with run_output() as (printed, raw):  # stdout is the report's channel (--json); runners/shared_output.py
            run = run_limited(lambda prog: runner.run(prog, own_tokenizer, own_prompt, own_options), program,
                              seconds, name, flag)
    except RequestTimeout as e:
        raise RunCrash(str(e)) from None
    except KeyboardInterrupt as e:
        from eagle3_check.runners.interrupt import signalled

        if signalled():  # Ctrl-C of the harness: every route stops (and writes what it judged)
            raise
        raise RunCrash(crash_reason(e)) from e  # the runner's own: this request's failure
    except (Exception, SystemExit) as e:  # noqa: BLE001 - whatever the code under test raises is a finding
        raise RunCrash(crash_reason(e)) from e
    finally:
        left = stray_threads(before)  # marked: what they print later is dropped, never the next request's
    if not isinstance(run, RunResult):
        raise RunCrash(f"contract violated: the runner's run() returned {type(run).__name__}; expected an "
                       "eagle3_check.runners.loop.RunResult. Fix: return RunResult(...) from run() (see the Runner protocol)")
    if left and not type(runner).__module__.startswith("eagle3_check."):  # ours: a torch pool thread is not a finding
        names = ", ".join(t.name[:40] for t in left[:3])
        raise RunCrash(f"contract violated: the runner left {len(left)} thread(s) running after run() returned "
                       f"({names}); expected run() to finish its work. Fix: join the threads before returning")
    if raw.size and not printed.getvalue():  # os.write(1, ...) or sys.__stdout__: below sys.stdout
        raise RunCrash(f"contract violated: the runner wrote {raw.size} bytes to file descriptor 1, which carries "
                       f"the report (--json): {raw.bytes()[:200]!r}. Fix: log to stderr")
    if printed.getvalue():
        text = printed.getvalue()
        raise RunCrash(f"contract violated: the runner wrote {len(text)} characters to stdout, which carries the "
                       f"report (--json): {text[:200]!r}. Fix: log to stderr")
    problem = type_problem(run)
    if problem:
        raise RunCrash(f"contract violated: {problem}")
    return bounded(run)  # its free text within the report's bounds (untrusted.py)


_OWN_TOKENIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # runner -> {id: (hf, its copy)}


def runner_tokenizer(runner, tokenizer):
    """The runner's own copy of `tokenizer`: a fresh wrapper (EOS ids, config) per request over the
    runner's own copy of the HF tokenizer, re-parsed once per runner and vocabulary (seconds on a
    262k vocab; the suites' EOS variants share it). What the runner mutates is its own, never the
    harness's."""
    if not isinstance(tokenizer, Tokenizer):
        return copy.deepcopy(tokenizer)
    try:
        own = _OWN_TOKENIZERS.setdefault(runner, {})
    except TypeError:  # a runner that cannot be weakly referenced or hashed: a copy per request
        return tokenizer.copy()
    hf = tokenizer._tok
    if id(hf) not in own:
        if len(own) >= 4:  # a runner judged on a few vocabularies: keep the last few
            own.pop(next(iter(own)))
        own[id(hf)] = (hf, tokenizer.copy()._tok)  # the original kept alive: its id is not reused
    return tokenizer.copy(hf=own[id(hf)][1])


def _not_int(x) -> bool:
    return type(x) is not int  # bool, float, numpy and tensor scalars are not token ids


def type_problem(run: RunResult) -> str | None:
    """The first RunResult field that does not hold Python ints where ints are due, else None.

    E.g. tokens = [5, 7.0] -> "RunResult.tokens[1] is float (7.0); expected a Python int"."""
    for name in ("rounds", "k", "max_new"):
        v = getattr(run, name)
        if _not_int(v):
            return f"RunResult.{name} is {type(v).__name__} ({v!r:.40}); expected a Python int. Fix: int(...) it"
    for name in ("tokens", "prompt_ids", "accepted"):
        seq = getattr(run, name)
        if not isinstance(seq, list):
            return (f"RunResult.{name} is {type(seq).__name__}; expected a list of Python ints. "
                    f"Fix: return .tolist() / list(...) of ints")
        i = next((i for i, t in enumerate(seq) if _not_int(t)), None)
        if i is not None:
            return (f"RunResult.{name}[{i}] is {type(seq[i]).__name__} ({seq[i]!r:.40}); expected a Python int. "
                    f"Fix: return .tolist() / int(...) ids")
    return None


def crashed_run(prompt_ids: list[int], k: int, max_new: int) -> RunResult:
    """The empty RunResult that stands in for a crashed run in a report (no tokens, no rounds)."""
    return RunResult(prompt_ids=list(prompt_ids), tokens=[], text="", rounds=0, accepted=[], tau=0.0,
                     stop_reason=CRASHED, k=k, max_new=max_new)
