"""A `.pte` whose method section is corrupt ends the ExecuTorch runtime's process (SIGABRT from a
UnicodeDecodeError thrown into C++ while it logs the method): `gate` loads it in a child process
first (program/pte_probe.py), so its report and JUnit are still written, with the load FAIL."""

from __future__ import annotations

import json
import random
import shutil
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.cli import main  # noqa: E402
from eagle3_check.program.pte_probe import probe_load  # noqa: E402
from eagle3_check.program.sidecar import sidecar_path, write_sidecar  # noqa: E402

pytestmark = pytest.mark.pte


def _corrupt(src, dst, at: float = 0.5, n: int = 4000, seed: int = 0):
    """`src` with `n` random bytes at `at` of its length (the method section, past the verified header)."""
    data = bytearray(src.read_bytes())
    rng, start = random.Random(seed), int(len(data) * at)
    for i in range(n):
        data[start + i] = rng.randrange(256)
    dst.write_bytes(bytes(data))
    write_sidecar(dst, json.loads(sidecar_path(src).read_text()))  # a sidecar that describes the bad file
    return dst


def test_gate_reports_a_pte_whose_method_aborts_the_runtime(pte_path, tmp_path, capsys):
    bad = _corrupt(pte_path, tmp_path / "bad.pte")
    why = probe_load(bad)
    assert why and "ended the process while loading it (signal SIGABRT" in why, why  # what the probe is for
    report, junit = tmp_path / "r.json", tmp_path / "j.xml"
    rc = main(["gate", "--pte", str(bad), "--report", str(report), "--junit", str(junit), "--suite", "none",
               "--all-k", "--max-new-tokens", "4"])
    assert rc == 1, capsys.readouterr().err
    checks = {c["name"]: c for c in json.loads(report.read_text())["checks"]}
    assert checks["load"]["status"] == "fail" and "SIGABRT" in checks["load"]["message"]
    assert all(c["status"] == "skip" for name, c in checks.items() if name != "load")
    assert any("SIGABRT" in (f.get("message") or "") for f in ET.parse(junit).getroot().iter("failure"))


def test_the_probe_passes_the_good_export(pte_path, tmp_path):
    good = tmp_path / "good.pte"
    shutil.copy(pte_path, good)
    assert probe_load(good) is None
