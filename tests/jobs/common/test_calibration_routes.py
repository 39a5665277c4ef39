"""Calibration on every route (jobs/common/calibrate.py, issue 44 item 2): a target the built-in constants
were not measured on, in bfloat16, is calibrated on first use by the function `check` uses, stored in the
same cache, named on the same `tie rule:` line, and read back the second time. The target here is
tiny-llama copied under another name into a fixtures root of its own ($EAGLE3_CHECK_FIXTURES): a user's
fixture, not the repository's measured one. `check --target` is tests/jobs/check/test_calibration_route.py;
gate judges a .pte, which keeps the constants as `check --pte` does (docs/calibration.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eagle3_check.cli import main
from eagle3_check.jobs.common.calibrate import measured_fixture

FX = Path(__file__).resolve().parents[3] / "fixtures" / "tiny-llama"
CALIBRATING = "calibrating the tie tolerance on this target"
PROMPTS = {"prompts": [{"id": "soup", "text": "How do I make a simple vegetable soup?"},
                       {"id": "sky", "text": "Explain why the sky is blue in words a child would understand."}]}


@pytest.fixture
def user_fixture(tmp_path, monkeypatch):
    """(fixtures root, cache, prompts): tiny-llama copied as `my-llama` into a root of its own."""
    root = tmp_path / "fixtures"
    shutil.copytree(FX, root / "my-llama")
    meta = json.loads((root / "my-llama" / "fixture.json").read_text())
    (root / "my-llama" / "fixture.json").write_text(json.dumps({**meta, "name": "my-llama"}))
    (root / "prompts.json").write_text(json.dumps(PROMPTS))
    monkeypatch.setenv("EAGLE3_CHECK_FIXTURES", str(root))
    monkeypatch.setenv("EAGLE3_CHECK_CACHE", str(tmp_path / "cache"))
    return root, tmp_path / "cache", root / "prompts.json"


def test_only_the_repository_s_measured_fixtures_keep_the_constants(user_fixture, monkeypatch):
    assert not measured_fixture("my-llama") and not measured_fixture(None)
    monkeypatch.delenv("EAGLE3_CHECK_FIXTURES")
    assert measured_fixture("tiny-llama") and measured_fixture("tiny-llama-int4")


def test_golden_record_calibrates_a_user_fixture_once(user_fixture, capsys, tmp_path):
    """The first record measures (16 rows over the 2 prompts) and prints check's `tie rule:` line; the
    second reads the stored record back. 'soup' records at the calibrated tolerance (measured: its smallest
    margin is above 0.016 + 2 ulp, where 'sky' is refused)."""
    root, cache, prompts = user_fixture
    argv = ["golden", "record", "--fixture", "my-llama", "--dtype", "bfloat16", "--max-new-tokens", "8",
            "--prompts", str(prompts), "--only", "soup", "--no-progress", "--force", "--dir", str(tmp_path / "g")]
    assert main(argv) == 0
    first = capsys.readouterr()
    assert CALIBRATING in first.err
    (record,) = (cache / "calibration").glob("*-bfloat16-cpu-eager.json")
    line = next(x for x in first.out.splitlines() if x.startswith("tie rule: "))
    assert line.startswith("tie rule: measured: calibration ") and "of 16 rows, 2 prompts" in line, line
    golden = json.loads(next((tmp_path / "g").glob("*.json")).read_text())
    assert golden["tie_tolerance"] < 0.5  # the calibrated tolerance, not the bf16 constant
    stamp = record.stat().st_mtime_ns
    assert main(argv) == 0
    again = capsys.readouterr()
    assert CALIBRATING not in again.err and record.stat().st_mtime_ns == stamp  # the cached record, read back
    assert line in again.out.splitlines()


pytest_plugins = ["pytester"]


def test_pytest_plugin_calibrates_a_user_fixture_once(user_fixture, pytester, warm):
    """The first session runs in this process (warm: the modules it loads imported first; a Python start and
    its imports fewer, ~5 s), the second in a process of its own: what it reads back is the stored record, not
    anything the first session left in memory."""
    root, cache, prompts = user_fixture
    args = ["-p", "eagle3_check.pytest_plugin", "-p", "no:cacheprovider", "--eagle3-fixture=my-llama",
            f"--eagle3-prompts={prompts}", "--eagle3-max-new-tokens=8", "--eagle3-goldens=none",
            "--eagle3-suite=none", "--eagle3-dtype=bfloat16", "-s"]
    first = pytester.runpytest_inprocess(*args)
    text = first.stdout.str() + first.stderr.str()
    assert CALIBRATING in text and "eagle3: tie rule: measured: calibration " in text, text
    assert len(list((cache / "calibration").glob("*-bfloat16-cpu-eager.json"))) == 1
    again = pytester.runpytest_subprocess(*args)
    text = again.stdout.str() + again.stderr.str()
    assert CALIBRATING not in text and "eagle3: tie rule: measured: calibration " in text, text


def test_an_aoti_package_is_calibrated_on_the_eager_program_of_its_target(monkeypatch):
    """`check --aoti F --target T` in bf16 (measured on the GPU machine, the 8B shape: the calibration was
    asked of the AOTI program, which has no eager target, and refused): the calibration measures an eager
    program of the same target: the one an external package is bound to, else one built for it."""
    from types import SimpleNamespace

    from eagle3_check.jobs.common import calibrate, world
    from eagle3_check.judge.calibration_measure import eager_target

    eager = SimpleNamespace(module=SimpleNamespace(target=object()))  # what calibration_measure.eager_target reads

    def ctx(aoti, program):
        return SimpleNamespace(cfg=SimpleNamespace(aoti=aoti), program=program)

    assert calibrate.eager_of(ctx(None, eager)) is eager  # an eager program measures itself
    external = SimpleNamespace(weights_source=eager)  # external weights: the target measured is the bound one's
    assert calibrate.eager_of(ctx("m.pt2", external)) is external and eager_target(external) is eager.module.target
    built = []
    monkeypatch.setattr(world, "aoti_eager", lambda cfg: built.append(cfg) or eager)
    embedded = ctx("m.pt2", SimpleNamespace(weights_source=None))
    assert calibrate.eager_of(embedded) is eager and built == [embedded.cfg]


def test_the_self_reference_asks_for_no_calibration(monkeypatch):
    """`--reference self` judges against the program's own greedy decoding, which has no margins (every
    divergence fails, never a tie): calibrating would load the HF reference for nothing (the 8B shape's
    AOTI `check --reference self` stopped in the calibration)."""
    from types import SimpleNamespace

    from eagle3_check.jobs.common.calibrate import wants_calibration

    def ctx(reference):
        cfg = SimpleNamespace(dtype="bfloat16", exact=False, pte=None, target="T", reference=reference)
        return SimpleNamespace(cfg=cfg, fixture=None)

    assert wants_calibration(ctx("hf")) and not wants_calibration(ctx("self"))
