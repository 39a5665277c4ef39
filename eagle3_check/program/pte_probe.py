"""Load a `.pte` once in a child process before loading it here: a corrupt file can abort the runtime.

ExecuTorch 1.5.1 ends the whole process (C++ `terminate`, no Python exception) on some corrupt
method sections: it logs the method's bytes through pybind11, a non-UTF-8 byte raises inside the
logger, and the exception escapes into C++. `gate` must still write its report and JUnit with
that failure in them, so it loads the program (every method and the metadata) in a child first
(`probe_load`): a child that dies, by a signal or an error exit, gives the load's FAIL reason;
one that succeeds lets the gate load the program in-process. The result is kept per file
(path, size, mtime), so `--all-k` and the load check probe once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

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
_SEEN: dict[tuple, str | None] = {}


def _key(p: Path) -> tuple:
    st = p.stat()
    return (str(p.resolve()), st.st_size, st.st_mtime_ns)


def probe_load(path: str | Path, timeout: float = PROBE_TIMEOUT_S, data_path: str | Path | None = None) -> str | None:
    """None if the `.pte` (with its `.ptd`, when given) loads (every method, the metadata) in a child
    process; else the one-line reason: the child's own error, or how it died (signal, exit code)
    with the end of its stderr."""
    p = Path(path)
    key = (*_key(p), str(data_path))
    if key in _SEEN:
        return _SEEN[key]
    root = str(Path(__file__).resolve().parents[2])  # the directory holding the eagle3_check package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.run([sys.executable, "-c", _CODE, str(p), *([str(data_path)] if data_path else [])], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        why = f"--pte {p}: loading it took longer than {timeout:g} s in a child process"
    else:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        last = next((line for line in reversed(err) if line.strip()), "")
        if proc.returncode == 0 and proc.stdout.strip().endswith(b"loaded"):
            why = None
        elif proc.returncode == 2 and last.startswith("error: "):
            why = last.removeprefix("error: ")
        else:
            how = (f"signal {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
                   else f"exit code {proc.returncode}")
            why = (f"--pte {p}: the ExecuTorch runtime ended the process while loading it ({how}: "
                   f"{last[:160] or 'no message'}); expected a program whose methods load. "
                   "Fix: re-export it with `eagle3-check export`; the file is corrupt")
    _SEEN[key] = why
    return why
