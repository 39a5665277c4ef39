"""Goldens on the `.pte`: the committed backend-pte goldens verify exactly on the session's export,
with their metrics equal to the baseline, and the eager goldens of the same configuration hold
on the `.pte` too (same tokens; in float32 the same rounds and accepted counts as well, in bfloat16
acceptance is the backend's: `jobs.golden.diff.stats_exact`)."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.jobs.golden.diff import ACCEPTANCE_STATS, stats_exact  # noqa: E402
from eagle3_check.jobs.golden.file import golden_root, load_golden  # noqa: E402
from eagle3_check.jobs.golden.metrics import default_baseline_path  # noqa: E402
from eagle3_check.jobs.golden.verify import gate_goldens, golden_paths  # noqa: E402

pytestmark = pytest.mark.pte

PATHS = golden_paths() if golden_root().is_dir() else []
PTE = [p for p in PATHS if load_golden(p).key.backend == "pte"]


def test_every_pte_golden_has_its_eager_twin():
    stems = {p.stem for p in PATHS}
    for p in PTE:
        twin = dataclasses.replace(load_golden(p).key, backend="eager").stem
        assert twin in stems, f"{p.stem} has no eager twin {twin}: record it with `eagle3-check golden record`"


@pytest.mark.parametrize("path", PTE, ids=lambda p: p.stem)
def test_committed_pte_golden_verifies_exactly_with_its_metrics(path, pte_path, pte_program, tokenizer):
    key = load_golden(path).key
    if key.fixture != "tiny-llama":
        pytest.skip(f"the session's .pte is tiny-llama; {key.fixture} needs its own export")
    out = gate_goldens([path], default_baseline_path(), build=lambda k: (pte_program, tokenizer), pte=pte_path)
    assert out.passed, out.format()


@pytest.mark.parametrize("path", PTE, ids=lambda p: p.stem)
def test_pte_golden_content_equals_its_eager_twin(path):
    pte = load_golden(path)
    eager = load_golden(path.with_name(dataclasses.replace(pte.key, backend="eager").filename))
    strip = ("margins", "min_margin")  # the same HF reference; recorded margins agree anyway
    if not stats_exact("eager", pte.key.dtype, "pte"):  # bf16: the draft's near-ties round per backend
        strip += ACCEPTANCE_STATS
    assert [{k: v for k, v in dataclasses.asdict(p).items() if k not in strip} for p in pte.prompts] == [
        {k: v for k, v in dataclasses.asdict(p).items() if k not in strip} for p in eager.prompts]


def test_golden_verify_pte_runs_every_golden_on_the_file(pte_path, monkeypatch):
    """`golden verify --pte FILE`: the eager goldens of its fixture and dtype run on FILE (they once
    ran on the eager program, the file never loaded); other fixtures' goldens skip saying so."""
    from eagle3_check.program.pte_backend import PteBackend

    calls = []
    execute = PteBackend.execute
    monkeypatch.setattr(PteBackend, "execute", lambda self, m, a: calls.append(m) or execute(self, m, a))
    eager = golden_root() / "tiny-llama__eager__cpu__float32__k4__n48.json"
    other = golden_root() / "tiny-gemma4__eager__cpu__float32__k4__n48.json"
    out = gate_goldens([eager, other], pte=pte_path)
    assert out.passed, out.format()
    assert list(out.runs) == [eager.stem] and calls.count("target_verify") == sum(
        p.rounds for p in load_golden(eager).prompts)
    assert out.skipped == {other.stem: "a golden of fixture tiny-gemma4; this program is tiny-llama"}
