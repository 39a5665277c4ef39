"""Issue 30's fault probes on `gate --runner module:factory` (the other routes:
tests/runners/isolate/test_isolation_routes.py): the plug-in runs in its own process, called with the gate's own
`.pte` over the pipe; whatever it does, its request checks fail, the exit code is 1 and the
report and JUnit are on disk."""

from __future__ import annotations

import json

import pytest
from test_isolation_probes import HEADER, PROBES
from test_isolation_routes import BROKE

from eagle3_check.cli import main

pytestmark = pytest.mark.pte


@pytest.mark.parametrize("probe", list(BROKE), ids=list(BROKE))
def test_gate_route(probe, pte_path, tmp_path, monkeypatch, capsys):
    code, factory, _ = PROBES[probe]
    name = f"gate_{probe.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(HEADER + code)
    monkeypatch.syspath_prepend(str(tmp_path))
    prompts, report, junit = tmp_path / "p.json", tmp_path / "report.json", tmp_path / "gate.xml"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}]}))
    rc = main(["gate", "--pte", str(pte_path), "--prompts", str(prompts), "--max-new-tokens", "6", "--suite", "none",
               "--runner", f"{name}:{factory}", "--report", str(report), "--junit", str(junit), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err, err[-2000:]
    data = json.loads(report.read_text())
    assert data["passed"] is False and data["info"]["isolation"]["runner"] == f"{name}:{factory}"
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["runner vs self reference"]["status"] == "fail", checks["runner vs self reference"]
    assert BROKE[probe] in json.dumps(checks["runner vs self reference"])
    assert junit.is_file() and "<failure" in junit.read_text()
