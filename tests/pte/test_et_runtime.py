"""`program/et_runtime.py`: executorch.runtime's load and run calls without its import of the
exporter. The same program answers the same inputs bit for bit through both, and a process that
loads and runs a `.pte` through `PteBackend` never imports `executorch.exir`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from executorch.runtime import Runtime  # noqa: E402

from eagle3_check.program import et_runtime  # noqa: E402

pytestmark = pytest.mark.pte
ROOT = Path(__file__).resolve().parents[2]


def test_same_methods_metadata_and_outputs_as_executorch_runtime(pte_path):
    ours, theirs = et_runtime.load_program(pte_path), Runtime.get().load_program(pte_path)
    assert ours.method_names == theirs.method_names and "prefill" in ours.method_names
    for name in sorted(ours.method_names):
        assert str(ours.metadata(name)) == str(theirs.metadata(name)), name
        assert str(ours.load_method(name).metadata) == str(theirs.load_method(name).metadata), name
    assert ours.load_method("prefill") is ours.load_method("prefill")  # loaded once, kept
    for name in sorted(n for n in ours.method_names if n.startswith("get_")):
        assert ours.load_method(name).execute([]) == theirs.load_method(name).execute([]), name
    toks, pos = torch.tensor([[2, 40, 41, 42, 43, 44, 45]]), torch.arange(7)  # [1, T], [T]
    a = ours.load_method("prefill").execute([toks, pos])
    b = theirs.load_method("prefill").execute([toks, pos])
    assert len(a) == len(b) == 2 and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))  # exact: one runtime


def test_a_pte_run_in_a_fresh_process_never_imports_the_exporter(pte_path):
    """One prefill in a child that starts bare: `executorch.exir` (what `import executorch.runtime`
    would pull in) is never imported, and the run answers as it does here."""
    code = (
        "import json, sys, torch\n"
        "from eagle3_check.program.pte_backend import PteBackend\n"
        "p = PteBackend(sys.argv[1])\n"
        "nxt, feat = p.prefill(torch.tensor([[2, 40, 41, 42]]), torch.arange(4))\n"
        "print(json.dumps({'next': nxt.tolist(), 'exir': sorted(m for m in sys.modules if m.startswith('executorch.exir')),"
        " 'runtime': 'executorch.runtime' in sys.modules}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(pte_path)], capture_output=True, text=True, cwd=ROOT,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    from eagle3_check.program.pte_backend import PteBackend

    here, _ = PteBackend(pte_path).prefill(torch.tensor([[2, 40, 41, 42]]), torch.arange(4))
    assert got == {"next": here.tolist(), "exir": [], "runtime": False}
