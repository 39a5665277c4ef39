"""Usage errors, `check --list`, `fixtures list` and `--help` finish before torch is imported (issue 32).

Every route runs through `eagle3_check.cli.main` in one fresh interpreter, in order; after each the
child records whether torch (or transformers, executorch) is in `sys.modules` and the exit code,
so a route that imports torch is named even though the later routes then see it loaded too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from refusals import REFUSALS, materialise

from eagle3_check import preflight
from eagle3_check.errors import InputError, OptionError

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "executorch")
MISSING = "/nonexistent-e3c/dir"

# (id, argv, want): 0 for a listing (exit 0); else a usage error: exit 2, one line on stderr holding `want`
ROUTES = [
    ("help", ["--help"], 0),
    ("check-help", ["check", "--help"], 0),
    ("check-list", ["check", "--list"], 0),
    ("check-list-json", ["check", "--list", "--json"], 0),
    ("fixtures-list", ["fixtures", "list"], 0),
    ("fixtures-list-json", ["fixtures", "list", "--json"], 0),
    ("target-without-draft", ["check", "--target", str(ROOT / "fixtures" / "tiny-llama" / "target")], "--draft not given"),
    ("draft-without-target", ["run", "--prompt", "Hi", "--draft", str(ROOT / "fixtures" / "tiny-llama")], "--target not given"),
    ("fixture-with-target", ["export", "-o", "/tmp/x.pte", "--fixture", "tiny-llama", "--target", str(ROOT),
                             "--draft", str(ROOT)], "--fixture with --target"),
    ("junit-dir-missing", ["check", "--fixture", "tiny-llama", "--junit", f"{MISSING}/x.xml"], "--junit"),
    ("gate-junit-dir-missing", ["gate", "--pte", str(ROOT / "pyproject.toml"), "--junit", f"{MISSING}/x.xml"], "--junit"),
    ("html-dir-missing", ["check", "--fixture", "tiny-llama", "--html", f"{MISSING}/x.html"], "--html"),
    ("export-output-dir-missing", ["export", "-o", f"{MISSING}/x.pte"], "-o "),
    ("golden-html-dir-missing", ["golden", "verify", "--html", f"{MISSING}/x.html"], "--html"),
    ("device-unknown", ["check", "--fixture", "tiny-llama", "--device", "tpu"], "--device tpu"),
    ("k-out-of-range", ["run", "--fixture", "tiny-llama", "--prompt", "Hi", "-k", "8"], "chain length K = 8"),
    ("k-out-of-range-default-program", ["check", "-k", "8"], "chain length K = 8"),  # smollm2-135m's spec, unconverted
    ("unknown-flag", ["check", "--fixture", "tiny-llama", "--max-new-token", "3"], "did you mean --max-new-tokens"),
    ("fixture-unknown", ["check", "--fixture", "tiny-lama"], "unknown fixture"),
    ("suite-unknown", ["check", "--suite", "contxt"], "unknown suite"),
    ("prompt-ids-with-workers", ["check", "--fixture", "tiny-llama", "--workers", "2", "--prompt-ids", "2,5"],
     "--prompt-ids with --workers"),
    ("shrink-golden-verify-binary", ["golden", "verify", "--runner", "exec:/bin/true", "--pte", str(ROOT / "pyproject.toml"),
                                     "--shrink"], "--shrink with golden verify --runner exec:"),
    ("runner-template-without-data-path", ["check", "--pte", str(ROOT / "pyproject.toml"), "--data-path",
                                           str(ROOT / "pyproject.toml"), "--runner", "exec:/bin/true {model_path}"],
     "no {data_path} placeholder"),
    ("prompt-ids-with-suite", ["check", "--suite", "stop-set", "--prompt-ids", "2,5"], "--prompt-ids with --suite"),
    # every output path (issue 30 item 5): a missing directory, a directory where a file goes, a file in the way
    ("gate-report-dir-missing", ["gate", "--pte", str(ROOT / "pyproject.toml"), "--report", f"{MISSING}/r.json"],
     "--report"),
    ("gate-report-is-a-directory", ["gate", "--pte", str(ROOT / "pyproject.toml"), "--report", str(ROOT)],
     "is a directory"),
    ("gate-html-dir-missing", ["gate", "--pte", str(ROOT / "pyproject.toml"), "--html", f"{MISSING}/x.html"], "--html"),
    ("check-junit-is-a-directory", ["check", "--junit", str(ROOT)], "is a directory"),
    ("report-html-dir-missing", ["report", "--check", str(ROOT / "pyproject.toml"), "--html", f"{MISSING}/x.html"],
     "--html"),
    ("draft-export-dir-missing", ["draft", "export", str(ROOT / "fixtures" / "tiny-llama" / "draft"), "-o",
                                  f"{MISSING}/d"], "-o "),
    ("draft-train-dir-missing", ["draft", "train", "--target", str(ROOT / "fixtures" / "tiny-llama" / "target"),
                                 "-o", f"{MISSING}/d"], "-o "),
    ("golden-baseline-dir-missing", ["golden", "baseline", "--baseline", f"{MISSING}/b.json"], "--baseline"),
    ("shrink-dir-under-a-file", ["check", "--shrink", "--shrink-dir", str(ROOT / "pyproject.toml" / "repro")],
     "--shrink-dir"),
    ("golden-record-dir-under-a-file", ["golden", "record", "--dir", str(ROOT / "pyproject.toml" / "g")], "--dir"),
    ("fixtures-root-under-a-file", ["fixtures", "build", "tiny-llama", "--root", str(ROOT / "pyproject.toml" / "fx")],
     "--root"),
    # an absurd config dimension, read as JSON (the target's: the fixture's config.json with hidden_size 10^6)
    ("config-dimension-absurd", ["run", "--prompt", "Hi", "--target", "HUGE_TARGET", "--draft",
                                 str(ROOT / "fixtures" / "tiny-llama" / "draft")], "hidden_size = 1000000"),
]
ROUTES += REFUSALS  # issue 52's refusals (tests/refusals.py: the one list), their files written in `outcomes`
if not preflight.cuda_driver_present():  # with a driver the flag is valid and the run goes on to torch
    ROUTES += [("device-cuda-no-driver", ["check", "--fixture", "tiny-llama", "--device", "cuda"], "a CUDA device"),
               ("device-cuda-fixtures-build", ["fixtures", "build", "tiny-llama", "--device", "cuda:0"], "a CUDA device"),
               ("device-cuda-mutants", ["mutants", "--device", "cuda"], "a CUDA device")]

CHILD = """
import contextlib, io, json, sys
from eagle3_check.cli import main
out = {}
for rid, argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
    heavy = sorted(m for m in sys.modules if m.split('.')[0] in HEAVY_NAMES and '.' not in m)
    out[rid] = {"rc": rc, "heavy": heavy, "stderr": err.getvalue()}
print(json.dumps(out))
""".replace("HEAVY_NAMES", repr(HEAVY))


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    huge = tmp_path_factory.mktemp("huge") / "target"
    shutil.copytree(ROOT / "fixtures" / "tiny-llama" / "target", huge)
    cfg = json.loads((huge / "config.json").read_text())
    (huge / "config.json").write_text(json.dumps({**cfg, "hidden_size": 1_000_000}))
    written = {r: argv for r, argv, _ in materialise(tmp_path_factory.mktemp("refusals"))}
    routes = [(r, written.get(r) or [str(huge) if a == "HUGE_TARGET" else a for a in argv]) for r, argv, _ in ROUTES]
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(routes)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("rid", "want"), [pytest.param(r, w, id=r) for r, _, w in ROUTES])
def test_route_finishes_before_torch(outcomes, rid, want):
    got = outcomes[rid]
    if want == 0:
        assert got["rc"] == 0, got["stderr"]
    else:  # a usage error: exit 2 and one line, never a traceback
        lines = got["stderr"].strip().splitlines()
        assert got["rc"] == 2 and len(lines) == 1 and lines[0].startswith("error: "), got["stderr"]
        assert want in lines[0]
    assert got["heavy"] == [], f"{rid} imported {got['heavy']}"


@pytest.mark.parametrize(("proc_dir", "libcuda", "present"), [
    pytest.param(True, None, True, id="proc-entry"),
    pytest.param(False, "libcuda.so.1", True, id="libcuda-only"),
    pytest.param(False, None, False, id="neither"),
])
def test_cuda_driver_present_looks_at_proc_and_libcuda(monkeypatch, proc_dir, libcuda, present):
    monkeypatch.setattr(preflight.os.path, "isdir", lambda p: proc_dir and p == preflight.NVIDIA_PROC)
    monkeypatch.setattr(preflight.ctypes.util, "find_library", lambda name: libcuda if name == "cuda" else None)
    assert preflight.cuda_driver_present() is present


@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_check_device_refuses_cuda_without_driver(monkeypatch, device):
    monkeypatch.setattr(preflight, "cuda_driver_present", lambda: False)
    with pytest.raises(OptionError, match=f"--device {device}"):
        preflight.check_device(device)
    monkeypatch.setattr(preflight, "cuda_driver_present", lambda: True)
    preflight.check_device(device)  # a driver: torch decides later
    preflight.check_device("cpu")


@pytest.mark.parametrize(("target", "draft", "fixture", "message"), [
    pytest.param("t", None, None, "--draft not given", id="target-alone"),
    pytest.param(None, "d", None, "--target not given", id="draft-alone"),
    pytest.param("t", "d", "tiny-llama", "--fixture with", id="fixture-too"),
])
def test_check_program_pair(target, draft, fixture, message):
    with pytest.raises(InputError, match=message):
        preflight.check_program_pair(target, draft, fixture)


def test_check_program_pair_accepts_a_pair_or_none():
    preflight.check_program_pair("t", "d", None)
    preflight.check_program_pair(None, None, "tiny-llama")
