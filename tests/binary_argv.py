"""What a runner binary's argv names, as the harness gives it (runners/isolate/binary_sandbox.py): a file
the binary's account can reach is given by its path; one it cannot (as root the binary runs as `nobody`,
and pytest's tmp dirs are 0700) by a descriptor, `/proc/self/fd/N/NAME` or `/proc/self/fd/N`.
Used by tests/pte/test_exec_data_path_pte.py and tests/pte/test_pytest_plugin_pte.py."""

from __future__ import annotations

from pathlib import Path


def gives(argv: list[str], flag: str, path: str | Path) -> bool:
    """Does `argv` pass `path` as `flag`? Example: gives(["--data_path=/proc/self/fd/5/m.ptd"], "--data_path",
    "/tmp/x/m.ptd") -> True; gives(["--data_path=/tmp/y/n.ptd"], "--data_path", "/tmp/x/m.ptd") -> False."""
    lent = f"{flag}=/proc/self/fd/"
    return any(a == f"{flag}={path}" or (a.startswith(lent) and (a.endswith("/" + Path(path).name) or
                                                                 a[len(lent):].isdigit())) for a in argv)
