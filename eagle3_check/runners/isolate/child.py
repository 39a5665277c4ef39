"""The runner's own process: `python -m eagle3_check.runners.isolate.child REQUEST_FD REPLY_FD`.

It reads a setup frame (a pickle from the harness: the program builder and the runner spec),
builds the program and the tokenizer, says "built", imports the plug-in and calls its factory,
says "ready", then answers one request frame at a time: the runner runs on a `RecordingProgram`
over the child's program, with the child's own tokenizer and copy of the options, and the reply
is the RunResult and the call log as plain JSON (`wire`), or the reason of the crash. A runner
that leaves threads running after `run()` returns is told apart (`threads_left`): the parent
fails that request and starts a fresh child, so a stray thread never blames the next request.

fd 1 and fd 2 are a pipe to the harness (what the runner prints lands in its request's record);
fd 0 is /dev/null. Whatever the plug-in patches here (the reference, the verdict, the audits)
patches only this process: none of them runs here.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback


def _reason(e: BaseException) -> str:
    from eagle3_check.runners.crash import crash_reason

    return crash_reason(e)  # KeyboardInterrupt included: the runner's own, this request's failure


def preload() -> None:
    """What the child's own code imports after the drop (from a checkout the account may not reach)."""
    import eagle3_check.program.contract  # noqa: F401
    import eagle3_check.runners.crash  # noqa: F401
    import eagle3_check.runners.instrument  # noqa: F401
    import eagle3_check.runners.isolate.declared  # noqa: F401
    import eagle3_check.runners.isolate.remote  # noqa: F401
    import eagle3_check.runners.plugin  # noqa: F401
    import eagle3_check.runners.result  # noqa: F401


def serve(rfd: int, wfd: int) -> int:
    from eagle3_check.runners.isolate import wire

    payload = wire.read_frame_blocking(rfd)
    if payload is None:
        return 0
    import pickle

    setup = pickle.loads(payload)
    if setup.get("sandbox"):  # not root: a PID namespace of its own, while it has one thread
        from eagle3_check.runners.isolate.sandbox import early

        early(setup["sandbox"])
    from eagle3_check.errors import Eagle3CheckError
    from eagle3_check.runners.isolate.remote import error_parts

    try:  # no builder: the harness's program, call by call (runners/isolate/remote.py)
        program, tokenizer = setup["build"]() if setup["build"] is not None else (None, None)
    except Eagle3CheckError as e:
        wire.send_json(wfd, {"error": str(e), "raised": error_parts(e), "stage": "build"})
        return 0
    wire.send_json(wfd, {"built": True})
    if setup.get("sandbox"):  # another user, its own session, limits, a private dir (runners/isolate/sandbox.py)
        from eagle3_check.runners.isolate.sandbox import enter

        preload()
        try:
            enter(setup["sandbox"], setup["spec"])
        except OSError as e:
            wire.send_json(wfd, {"crash": f"the runner's process could not be closed in ({e})", "stage": "load"})
            return 0
    from eagle3_check.runners.isolate.declared import declarations
    from eagle3_check.runners.plugin import load_runner

    try:
        runner = load_runner(setup["spec"])
        said = declarations(runner, setup.get("profile"))  # read in the parent as in process (runners/profiles.py)
    except Eagle3CheckError as e:
        wire.send_json(wfd, {"error": str(e), "raised": error_parts(e), "stage": "load"})
        return 0
    except BaseException as e:  # noqa: BLE001 - the plug-in's import or factory: a verdict in the parent
        wire.send_json(wfd, {"crash": _reason(e), "stage": "load"})
        return 0
    wire.send_json(wfd, {"ready": type(runner).__name__, **said})
    return _requests(rfd, wfd, runner, program, tokenizer)


def _requests(rfd: int, wfd: int, runner, program, tokenizer) -> int:
    import pickle

    from eagle3_check.runners.instrument import RecordingProgram
    from eagle3_check.runners.isolate import wire
    from eagle3_check.runners.isolate.remote import RemoteProgram, error_parts
    from eagle3_check.runners.result import RunResult

    while True:
        payload = wire.read_frame_blocking(rfd)
        if payload is None:
            return 0
        req = pickle.loads(payload)
        if req.get("bye"):
            return 0
        remote = req.get("remote")
        if remote is not None:  # the harness's program of this request, call by call
            if "tokenizer" in req:  # sent when it changed
                tokenizer = req["tokenizer"]
            rec = RemoteProgram(rfd, wfd, remote["metadata"], remote["owned"], remote["rows"])
        else:
            rec = RecordingProgram(program)
        before = set(threading.enumerate())
        try:
            run = runner.run(rec, tokenizer, req["prompt"], req["options"])
        except BaseException as e:  # noqa: BLE001 - whatever the code under test raises is a finding
            sys.stdout.flush()
            _close(rec)
            wire.send_json(wfd, {"crash": _reason(e), "raised": error_parts(e)})
            continue
        sys.stdout.flush()
        left = [t.name for t in threading.enumerate() if t not in before and t.is_alive()]  # before the close
        _close(rec)  # (which ends a thread's next call)
        if not isinstance(run, RunResult):
            wire.send_json(wfd, {"crash": f"contract violated: the runner's run() returned {type(run).__name__}; "
                                 "expected an eagle3_check.runners.loop.RunResult. Fix: return RunResult(...) from run()"})
            continue
        reply = {"run": wire.run_plain(run), "threads_left": left}
        if remote is None:
            reply["log"] = wire.calls_plain(rec)
        wire.send_json(wfd, reply)


def _close(program) -> None:
    if hasattr(program, "close"):
        program.close()  # a RemoteProgram: a thread calling it after run() gets an error, never a frame


def main(argv: list[str]) -> int:
    rfd, wfd = int(argv[0]), int(argv[1])
    try:
        return serve(rfd, wfd)
    except BaseException:  # noqa: BLE001 - the harness reads the tail of our output
        traceback.print_exc()
        return 3


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no atexit of the plug-in's, no thread join: the parent decides what is done
