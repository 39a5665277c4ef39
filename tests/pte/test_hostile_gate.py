"""Issue 47's plug-in attacks (tests/runners/isolate/test_hostile_isolation.py: the harness's memory,
fd 1, signals, the repository, a detached grandchild, floods), all in one plug-in, on `gate --runner
module:factory`: the gate's `.pte` over the pipe, the harness a subprocess. The plug-in answers as the
reference runner does, so the runner's checks pass: the attacks change neither the exit code nor the
gate's report, leave no process behind and write nothing beside the goldens."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from test_hostile_isolation import ALL, HEAD, code_of, harness_env, outlived

pytestmark = pytest.mark.pte


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop needs a root harness (CI runs as root)")
def test_every_attack_from_the_runner_changes_nothing_on_the_gate(pte_path, tmp_path):
    module = "all_attacks_gate"
    (tmp_path / f"{module}.py").write_text(HEAD + code_of(ALL))
    report, prompts = tmp_path / "gate.json", tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}]}))
    p = subprocess.run([sys.executable, "-m", "eagle3_check.cli", "gate", "--pte", str(pte_path), "--prompts",
                        str(prompts), "--max-new-tokens", "6", "--suite", "none", "--runner", f"{module}:make",
                        "--report", str(report), "--no-progress"], capture_output=True, text=True,
                       env=harness_env(tmp_path, report), timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]  # the runner is correct: the gate passes
    assert "Traceback" not in p.stderr and '{"passed": true}' not in p.stdout
    data = json.loads(report.read_text())
    checks = {c["name"]: c["status"] for c in data["checks"]}
    assert data["passed"] is True and checks["runner vs self reference"] == "pass", checks
    prot = data["info"]["isolation"]["protections"]
    assert prot["other_user"] and prot["no_new_privs"] and prot["own_session"], prot
    assert not (tmp_path / "golden" / "pwned.json").exists()
    assert not outlived(tmp_path, report)
