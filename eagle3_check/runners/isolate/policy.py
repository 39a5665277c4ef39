"""Which runners run in their own process, and what a report keeps of one that did.

`wants_isolation(spec, isolate, in_process)` is the one rule every route applies (check, the suites,
the gate, golden verify, --workers, the pytest plugin), from the `--runner` value alone, before
anything imports the plug-in.
"""

from __future__ import annotations

import pickle

from eagle3_check.errors import InputError


def pickled_ok(build) -> None:
    """The builder must reach the child: a one-line error when it does not pickle."""
    try:
        pickle.dumps(build)
    except Exception as e:  # noqa: BLE001
        raise InputError(f"the program builder {build!r:.60} ({type(e).__name__})", "a picklable builder",
                         "pass a module-level function or a functools.partial of one") from None


def wants_isolation(spec: str, isolate: bool = False, in_process: bool = False) -> bool:
    """Does `--runner spec` run in its own process? A plug-in (`module:factory`) does unless
    `--in-process`; our own runners (reference, device) only with `--isolate`; a binary is a process already."""
    from eagle3_check.runners.plugin import ALIASES
    from eagle3_check.runners.seam import kind_of

    if kind_of(spec).program_file:
        return False
    if isolate:
        return True
    return not in_process and spec not in ALIASES and spec not in ALIASES.values()


def isolation_info(runner) -> dict | None:
    """What a report keeps of an isolated run: the processes started and each request's output; of a
    runner binary, what held its processes in (runners/isolate/binary_sandbox.py); else None."""
    if not getattr(runner, "isolated", False):
        protections = getattr(runner, "protections", None)  # a binary (runners/binary/runner.ExecRunner)
        return {"runner": runner.spec, "protections": protections} if protections else None
    members = getattr(runner, "members", [runner])
    return {"runner": runner.spec, "processes": runner.children, "output": runner.records(),
            "protections": next((m.protections for m in members if m.protections), None)}
