"""Issue 47's plug-in attacks (tests/runners/isolate/test_hostile_isolation.py: the harness's memory,
fd 1, signals, the repository, a detached grandchild, floods) on `gate --runner module:factory`: the
gate's `.pte` over the pipe, the harness a subprocess. The plug-in answers as the reference runner
does, so the runner's checks pass: the attack changes neither the exit code nor the gate's report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from test_hostile_isolation import ATTACKS, HEAD, NEEDS_ROOT, ROOT, _alive, mark

pytestmark = pytest.mark.pte


@pytest.mark.parametrize("attack", list(ATTACKS), ids=[f"{a}-gate" for a in ATTACKS])
def test_an_attack_from_the_runner_changes_nothing_on_the_gate(attack, pte_path, tmp_path):
    if attack in NEEDS_ROOT and os.geteuid() != 0:
        pytest.skip("the uid drop needs a root harness (CI runs as root)")
    module = f"{attack.replace('-', '_')}_gate"
    (tmp_path / f"{module}.py").write_text(HEAD + ATTACKS[attack])
    report, prompts = tmp_path / "gate.json", tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}]}))
    target = report if attack == "setsid-grandchild-rewrites-outputs" else tmp_path / "golden" / "pwned.json"
    target.parent.mkdir(exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TARGET": str(target), "MARK": mark(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    p = subprocess.run([sys.executable, "-m", "eagle3_check.cli", "gate", "--pte", str(pte_path), "--prompts",
                        str(prompts), "--max-new-tokens", "6", "--suite", "none", "--runner", f"{module}:make",
                        "--report", str(report), "--no-progress"], capture_output=True, text=True, env=env,
                       timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]  # the runner is correct: the gate passes
    assert "Traceback" not in p.stderr and '{"passed": true}' not in p.stdout
    data = json.loads(report.read_text())
    checks = {c["name"]: c["status"] for c in data["checks"]}
    assert data["passed"] is True and checks["runner vs self reference"] == "pass", checks
    if os.geteuid() == 0:
        prot = data["info"]["isolation"]["protections"]
        assert prot["other_user"] and prot["no_new_privs"] and prot["own_session"], prot
    if attack == "write-into-the-repository":
        assert not target.exists()
    if attack == "setsid-grandchild-rewrites-outputs":
        before = report.read_bytes()
        time.sleep(4)  # its `sleep 3` would have ended: the report is still the harness's
        assert report.read_bytes() == before
        assert _alive(mark(tmp_path)) == []
