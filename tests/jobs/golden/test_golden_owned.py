"""Issue 31 item 3: `golden verify` and the gate's golden check run on graph-owned outputs, as `check`
does, so a runner that reads an output after the method's next call fails them too.

Seeded: `proposals_kept_as_views` (host: the window keeps views of the draft output) and
`device_window_kept_as_views` (device: the window assembled from those views at verify time). On
fresh output tensors both emit the right tokens and acceptance; on graph-owned ones the chain steps
overwrite the proposals before verify reads them, acceptance drops and the golden's rounds differ.
"""

from __future__ import annotations

import pytest
import torch

from eagle3_check.jobs.gate.gate import GateInputs, golden_check
from eagle3_check.jobs.golden.diff import diff_golden
from eagle3_check.jobs.golden.file import load_golden, run_golden
from eagle3_check.jobs.golden.verify import gate_goldens
from eagle3_check.judge.verdict import FAIL, PASS
from eagle3_check.mutants import factory
from eagle3_check.program.eager import EagerBackend
from eagle3_check.program.owned import OwnedOutputs, graph_owned
from eagle3_check.runners.loop import ReferenceRunner

GOLDEN = "golden/tiny-llama__eager__cpu__float32__k4__n48.json"
LATE = [("proposals_kept_as_views", "host"), ("device_window_kept_as_views", "device")]


@pytest.fixture(scope="module")
def plain(fixture):
    """The fixture's eager program with fresh output tensors (what golden verify used to build)."""
    return EagerBackend.from_fixture(fixture)


@pytest.mark.parametrize("mutant, placement", LATE, ids=[m for m, _ in LATE])
def test_a_late_read_passed_on_fresh_outputs_and_fails_golden_verify(mutant, placement, plain, tokenizer):
    golden = load_golden(GOLDEN)
    late = factory(mutant, placement)()
    assert diff_golden(run_golden(plain, tokenizer, golden, late), golden) == []  # the gap issue 31 names
    assert gate_goldens([GOLDEN], runner=ReferenceRunner(placement)).passed
    out = gate_goldens([GOLDEN], runner=factory(mutant, placement)())
    assert not out.passed and any("rounds" in d.message for d in out.golden_diffs), out.format()


@pytest.mark.parametrize("mutant, placement", LATE, ids=[m for m, _ in LATE])
def test_the_gate_golden_check_judges_its_runner_on_owned_outputs(mutant, placement, plain, tokenizer, fixture):
    def inputs(plugin):
        return GateInputs(pte=None, tokenizer=tokenizer, target_dir=fixture.target_dir, prompts=fixture.prompts()[:1],
                          golden=GOLDEN, fixture=fixture.name, plugin=plugin)

    assert golden_check(plain, inputs(ReferenceRunner(placement))).status == PASS
    bad = golden_check(plain, inputs(factory(mutant, placement)()))
    assert bad.status == FAIL and "rounds" in bad.message, bad.message


def test_graph_owned_wraps_only_programs_that_do_not_own_their_outputs(plain, fixture):
    owned = EagerBackend.from_fixture(fixture, reuse_outputs=True)
    assert graph_owned(owned) is owned
    wrapped = graph_owned(plain)
    assert isinstance(wrapped, OwnedOutputs) and graph_owned(wrapped) is wrapped
    assert wrapped.metadata() == plain.metadata()
    wrapped.prefill(torch.tensor([[2, 5, 6, 7]]), torch.arange(4))
    H = plain.module.draft.cfg.hidden_size
    feature = torch.randn(1, 4, H, generator=torch.Generator().manual_seed(0))  # [1, 4, H]
    ids, g = wrapped.draft_decode(torch.tensor([[5, 6, 7, 8]]), feature, torch.arange(4))
    later, _ = wrapped.draft_decode(torch.tensor([[9]]), g[:, -1:].clone(), torch.tensor([4]))
    # the next call wrote into the buffer the first returned a view of (its ids may equal the
    # first's by chance: compare storage, and that the old view shows the new ids)
    assert later.data_ptr() == ids.data_ptr()
    assert torch.equal(ids[:, :1], later[:, :1])
