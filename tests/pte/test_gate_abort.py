"""A `.pte` whose method section is corrupt ends the ExecuTorch runtime's process (SIGABRT from a
UnicodeDecodeError thrown into C++ while it logs the method): `gate` loads it in a child process
first (program/pte_probe.py), so its report and JUnit are still written, with the load FAIL;
`check`, `run` and `golden record/verify` with --pte (in-process or through a runner binary) load
through the same probe, so the file is one error line and exit 2, as other bad input."""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cli_child import result_of, run_commands

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


ROOT = Path(__file__).resolve().parents[2]
PTE_GOLDEN = "golden/tiny-llama__pte__cpu__float32__k4__n48.json"
FAKE = "exec:fixtures/fake_runners/fake_seed_runner"
COMMANDS = [  # (id, argv after the subcommand with {bad} for the file, {tmp} for a scratch dir)
    ("check", ["check", "--pte", "{bad}", "--max-new-tokens", "4"]),
    ("check-suite", ["check", "--pte", "{bad}", "--suite", "budget"]),
    ("check-exec", ["check", "--pte", "{bad}", "--max-new-tokens", "4", "--runner", FAKE]),
    ("run", ["run", "--pte", "{bad}", "--prompt", "hi", "--max-new-tokens", "4"]),
    ("golden-record", ["golden", "record", "--pte", "{bad}", "--only", "capital", "--dir", "{tmp}"]),
    ("golden-verify", ["golden", "verify", PTE_GOLDEN, "--pte", "{bad}", "--no-baseline"]),
    ("golden-verify-exec", ["golden", "verify", PTE_GOLDEN, "--pte", "{bad}", "--runner", FAKE]),
]


@pytest.fixture(scope="module")
def bad_pte(pte_path, tmp_path_factory):
    return _corrupt(pte_path, tmp_path_factory.mktemp("abort") / "bad.pte")


# Every command in one child process (tests/cli_child.py: one Python start and one import of the CLI and the
# runtime instead of one each, ~2 s a command), each `main(argv)` with its own fd 1 and fd 2 and exit status,
# and the probe's per-file memo cleared before it, so each command probes the file in a child of its own, as
# in a process of its own. A command that loaded the file in-process would end this child (rc -6): it and
# the commands after it then fail, naming the child's end.
@pytest.fixture(scope="module")
def commands_run(bad_pte, tmp_path_factory) -> tuple[dict, str]:
    """The results of COMMANDS on the corrupt file, all in one child (cli_child.run_commands)."""
    todo = []
    for rid, argv in COMMANDS:
        tmp = tmp_path_factory.mktemp(f"abort-{rid}")
        todo.append((rid, [a.format(bad=bad_pte, tmp=tmp) for a in argv], {}, ""))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHON": sys.executable}
    return run_commands(todo, env=env, cwd=ROOT, timeout=900,
                        before="from eagle3_check.program import pte_probe\npte_probe._SEEN.clear()")


@pytest.mark.shared("gate-abort-commands")  # one work unit under -n 2 --dist loadgroup: one child runs them all
@pytest.mark.parametrize("rid", [c[0] for c in COMMANDS])
def test_a_pte_that_aborts_the_runtime_is_one_error_line(bad_pte, commands_run, rid):
    """In a process of its own (one child for all the commands): were the probe skipped, the in-process
    load would end it (rc -6)."""
    p = result_of(commands_run, rid)
    assert p["returncode"] == 2, (p["returncode"], p["stderr"][-2000:])
    lines = p["stderr"].strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p["stderr"], p["stderr"][-2000:]
    assert lines[0].startswith(f"error: --pte {bad_pte}: the ExecuTorch runtime ended the process while loading it "
                               "(signal SIGABRT"), lines[0]
    assert "Fix: re-export it with `eagle3-check export`" in lines[0], lines[0]
    assert not p["stdout"].strip(), p["stdout"][-500:]  # no partial report
