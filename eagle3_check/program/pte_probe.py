"""Load a `.pte` once in a child process before loading it here: a corrupt file can abort the runtime.

ExecuTorch 1.5.1 ends the whole process (C++ `terminate`, no Python exception) on some corrupt
method sections: it logs the method's bytes through pybind11, a non-UTF-8 byte raises inside the
logger, and the exception escapes into C++. `gate` must still write its report and JUnit with
that failure in them, so it loads the program (every method and the metadata) in a child first
(`probe_load`): a child that dies, by a signal or an error exit, gives the load's FAIL reason;
one that succeeds lets the gate load the program in-process. The result is kept per file
(path, size, mtime), so `--all-k` and the load check probe once.

`check --pte`, `run --pte`, `golden record/verify --pte` load through `load_probed`: a child that
died is one `InputError` line naming the file and the fix (exit 2, as other bad input); a child
that ended with the harness's own error leaves it to the in-process load, which raises the same
error with its type. The child costs one Python start, the runtime's import and one load; this
process imports the runtime meanwhile, so on a machine with a free core the wait is mostly hidden
(measured: docs/reliability.md, "Hostile input").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from eagle3_check.errors import InputError

PROBE_TIMEOUT_S = 600.0
_CODE = (
    "import sys\n"
    "from eagle3_check.errors import Eagle3CheckError\n"
    "from eagle3_check.program.pte_backend import PteBackend\n"
    "try:\n"
    "    PteBackend(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None).metadata()\n"
    "except Eagle3CheckError as e:\n"
    "    print(f'error: {e}', file=sys.stderr)\n"
    "    sys.exit(2)\n"
    "print('loaded')\n"
)
_SEEN: dict[tuple, str | InputError | None] = {}


def _probeable(p: Path) -> bool:
    """A missing, special or empty file is not probed: `PteBackend`'s own one-line error names it
    (before executorch is even imported)."""
    return p.is_file() and p.stat().st_size > 0


def _key(p: Path) -> tuple:
    st = p.stat()
    return (str(p.resolve()), st.st_size, st.st_mtime_ns)


def _probe(path: str | Path, timeout: float, data_path: str | Path | None,
           meanwhile: Callable[[], object] | None = None) -> str | InputError | None:
    """None: loads; an InputError: the child died or hung; a str: the child's own one-line error.
    `meanwhile` runs in this process while the child loads (the child is killed if it raises)."""
    p = Path(path)
    key = (*_key(p), str(data_path))
    if key not in _SEEN:
        child = _start(p, data_path)
        if meanwhile is not None:
            try:
                meanwhile()
            except BaseException:
                child.kill()
                child.communicate()
                raise
        _SEEN[key] = _finish(child, p, timeout)
    return _SEEN[key]


def _start(p: Path, data_path: str | Path | None) -> subprocess.Popen:
    """The child that loads `p` (every method, the metadata), started and left running."""
    root = str(Path(__file__).resolve().parents[2])  # the directory holding the eagle3_check package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-c", _CODE, str(p), *([str(data_path)] if data_path else [])],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def _finish(proc: subprocess.Popen, p: Path, timeout: float) -> str | InputError | None:
    """Waits for the child (killed after `timeout` s) and reads how it ended."""
    try:
        out, err_bytes = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return InputError(f"--pte {p}: loading it took longer than {timeout:g} s in a child process",
                          "a program that loads", "check the file (re-export it with `eagle3-check export`)")
    err = err_bytes.decode("utf-8", "replace").strip().splitlines()
    last = next((line for line in reversed(err) if line.strip()), "")
    if proc.returncode == 0 and out.strip().endswith(b"loaded"):
        return None
    if proc.returncode == 2 and last.startswith("error: "):
        return last.removeprefix("error: ")  # the harness's own one-line error about the file
    how = f"signal {signal.Signals(-proc.returncode).name}" if proc.returncode < 0 else f"exit code {proc.returncode}"
    return InputError(f"--pte {p}: the ExecuTorch runtime ended the process while loading it ({how}: "
                      f"{last[:160] or 'no message'})", "a program whose methods load",
                      "re-export it with `eagle3-check export`; the file is corrupt")


def probe_load(path: str | Path, timeout: float = PROBE_TIMEOUT_S, data_path: str | Path | None = None,
               meanwhile: Callable[[], object] | None = None) -> str | None:
    """None if the `.pte` (with its `.ptd`, when given) loads (every method, the metadata) in a child
    process; else the one-line reason: the child's own error, or how it died (signal, exit code)
    with the end of its stderr. A path `_probeable` turns down is not probed. `meanwhile` runs here
    while the child loads (the gate imports the runtime and transformers: the second core's work)."""
    if not _probeable(Path(path)):
        return None
    why = _probe(path, timeout, data_path, meanwhile)
    return None if why is None else str(why)


def load_probed(path: str | Path, data_path: str | Path | None = None, timeout: float = PROBE_TIMEOUT_S):
    """`PteBackend(path, data_path)`, probed in a child first: a program whose load ends the
    process (or hangs) is an `InputError` naming the file and the fix, never a dead harness."""
    from eagle3_check.program.pte_backend import PteBackend, _runtime

    if _probeable(Path(path)):
        # this process imports the runtime (most of the cost) while the child loads the file
        why = _probe(path, timeout, data_path, meanwhile=_runtime)
        if isinstance(why, InputError):
            raise why
    return PteBackend(path, data_path)
