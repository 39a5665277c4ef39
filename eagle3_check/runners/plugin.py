"""Plug-in runners: `module:factory` names a runner someone else wrote.

A factory is any callable (a class, a function) that takes no arguments and returns an
object with `run(program, tokenizer, prompt, options) -> RunResult` (the `PluginRunner`
protocol in runners/result.py; `runners.in_process.InProcess` makes it the one runner seam).
`eagle3-check check --runner module:factory` judges that runner exactly as it judges ours; `reference`
is short for `eagle3_check.runners.loop:ReferenceRunner`.

    load_runner("reference")                             # ReferenceRunner()
    load_runner("my_pkg.runners:make_runner")            # my_pkg.runners.make_runner()
    load_runner("eagle3_check.mutants:accept_off_by_one")  # a seeded mutant
    load_runner("exec:./eagle3_speculator_runner")        # a runner binary (runners/binary/runner.py)
"""

from __future__ import annotations

import difflib
import importlib

from eagle3_check.errors import InputError
from eagle3_check.runners.result import PluginRunner
from eagle3_check.runners.seam import kind_of

ALIASES = {
    "reference": "eagle3_check.runners.loop:ReferenceRunner",
    "device": "eagle3_check.runners.device_loop:DeviceRunner",  # data on the program's device (CUDA)
}
FIX_FORMAT = "pass --runner module:factory, e.g. --runner eagle3_check.runners.loop:ReferenceRunner"


def check_spec(spec: str) -> str:
    """The `module:factory` a `--runner` value names (an alias resolved), its form checked before any
    import (an isolated runner's child imports it later); else a one-line error."""
    spec = ALIASES.get(spec, spec)
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"--runner {spec!r}", "module:factory (or 'reference')", FIX_FORMAT)
    return spec


def load_runner(spec: str) -> PluginRunner:
    """Imports `module`, calls `factory()` and checks the result has a callable `run`.
    `exec:PATH [ARGS]` is a runner binary instead (`runners.binary.runner.ExecRunner`, judged by `jobs.check.binary`)."""
    if kind_of(spec).program_file:  # a runner binary is a kind of runner: runners.binary, imported on use
        from eagle3_check.runners.binary.runner import ExecRunner

        return ExecRunner(spec)
    spec = check_spec(spec)
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise InputError(
            f"--runner {spec!r}: module '{module_name}' cannot be imported ({e.__class__.__name__}: {e})",
            "an importable Python module",
            "install the module or put its directory on PYTHONPATH",
        ) from None
    factory = getattr(module, attr, None)
    if factory is None:
        names = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n, None))]
        close = difflib.get_close_matches(attr, names, n=1)
        hint = f"did you mean '{module_name}:{close[0]}'?" if close else FIX_FORMAT
        raise InputError(f"--runner {spec!r}: '{module_name}' has no '{attr}'", "a factory in that module", hint)
    if not callable(factory):
        raise InputError(f"--runner {spec!r}: '{attr}' is a {type(factory).__name__}",
                         "a callable factory returning a runner", FIX_FORMAT)
    try:
        runner = factory()
    except TypeError as e:
        raise InputError(f"--runner {spec!r}: calling {attr}() failed ({e})",
                         "a factory that takes no arguments", "wrap the runner in a no-argument factory") from None
    if not callable(getattr(runner, "run", None)):
        raise InputError(
            f"--runner {spec!r}: {attr}() returned a {type(runner).__name__} without run()",
            "an object with run(program, tokenizer, prompt, options) -> RunResult",
            "give the runner a run method (see the Runner protocol in eagle3_check/runners/loop.py)",
        )
    return runner
