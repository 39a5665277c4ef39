"""Live interop with speculators 0.9.0 (marker `interop`): runs where speculators is importable
(docs/checkpoints.md: its own virtual environment), skips with the reason elsewhere.

- Drafts eagle3_check writes (the committed fixtures' drafts, and `Eagle3DraftHead.save`) load in
  speculators' `Eagle3DraftModel.from_pretrained`, and its forward equals ours.
- The reference set is rebuilt live for a few layouts (fixtures/speculators/build_refs.py) and
  matches our loader, so the committed references are speculators' outputs, not stale files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch

from eagle3_check.program.checkpoint import load_draft

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(importlib.util.find_spec("speculators") is None,
                       reason="needs speculators==0.9.0 importable (docs/checkpoints.md); not installed here"),
]

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_speculators_ref import max_diffs  # noqa: E402


@pytest.fixture
def in_repo_root():
    """speculators resolves the relative verifier paths the drafts name from the working directory."""
    old = os.getcwd()
    os.chdir(ROOT)
    yield
    os.chdir(old)


def speculators_forward(draft_dir: Path, ref: dict, steps: int) -> dict:
    sys.path.insert(0, str(ROOT / "fixtures" / "speculators"))
    from build_refs import reference

    return reference(draft_dir, ref, None)


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-gemma4"])
def test_our_written_draft_loads_in_speculators(name, tmp_path, in_repo_root):
    """Our draft, saved by Eagle3DraftHead.save, read by speculators: same logits and g."""
    head = load_draft(ROOT / "fixtures" / name / "draft", max_seq_len=64)
    head.save(tmp_path / "draft")
    cfg = head.cfg
    g = torch.Generator().manual_seed(0)
    ref = {"input_ids": torch.randint(0, cfg.vocab_size, (1, 10), generator=g),
           "taps": torch.randn(1, 10, cfg.n_taps * cfg.target_hidden_size, generator=g),
           "positions": torch.arange(10)}
    ref.update(speculators_forward(tmp_path / "draft", ref, 3))
    dl, dg = max_diffs(head, ref, 3)
    print(f"{name}: speculators vs eagle3_check max |logits diff| {dl:.2e}, |g diff| {dg:.2e}")
    assert dl <= 2e-5 and dg <= 1e-4


@pytest.mark.parametrize("case", ["default", "rope-llama3", "qwen3", "two-layers", "eagle3-original"])
def test_reference_rebuilt_live_matches(case, tmp_path, in_repo_root):
    sys.path.insert(0, str(ROOT / "fixtures" / "speculators"))
    import build_refs
    from safetensors.torch import load_file

    verifier = build_refs.verifier_dir(tmp_path)
    build_refs.build_case(case, tmp_path, verifier, seed=list(build_refs.CASES).index(case))
    shutil.rmtree(tmp_path / "verifier")
    fresh = load_file(str(tmp_path / case / "reference.safetensors"))
    committed = load_file(str(ROOT / "fixtures" / "speculators" / case / "reference.safetensors"))
    for k in ("logits", "g"):
        assert torch.allclose(fresh[k], committed[k], atol=1e-5, rtol=0), (case, k)
    meta = json.loads((tmp_path / case / "case.json").read_text())
    head = load_draft(tmp_path / case / "draft", max_seq_len=64)
    if "target_embed" in fresh:
        head.share_embedding(fresh["target_embed"])
    dl, dg = max_diffs(head, fresh, meta["steps"])
    assert dl <= 2e-5 and dg <= 1e-4


@pytest.mark.parametrize("case", ["specforge", "eagle3-original", "no-embedding", "rope-llama3"])
def test_exported_draft_loads_in_speculators(case, tmp_path, in_repo_root):
    """`draft export` of layouts speculators cannot read as they are (SpecForge, original EAGLE-3)
    or reads wrongly (no embed_tokens): speculators loads the export and computes the committed
    reference outputs of the source."""
    from safetensors.torch import load_file
    from test_speculators_ref import _target_dir_for

    from eagle3_check.program.draft_export import export_draft

    meta = json.loads((ROOT / "fixtures" / "speculators" / case / "case.json").read_text())
    ref = load_file(str(ROOT / "fixtures" / "speculators" / case / "reference.safetensors"))
    target = _target_dir_for(case, ref, meta, tmp_path / "target") if "target_embed" in ref else None
    export_draft(ROOT / "fixtures" / "speculators" / case / "draft", tmp_path / "out", target,
                 verifier="fixtures/speculators/verifier")
    theirs = speculators_forward(tmp_path / "out", {k: ref[k] for k in ("input_ids", "taps", "positions")},
                                 meta["steps"])
    ok = ~torch.isnan(ref["logits"][..., 0])
    diff = float((theirs["logits"][ok] - ref["logits"][ok]).abs().max())
    print(f"{case}: speculators on the export vs the committed reference, max |logits diff| {diff:.2e}")
    assert diff <= 2e-5, (case, diff)
