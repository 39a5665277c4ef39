"""Every draft layout eagle3_check reads, against speculators' own forward on the same files.

`fixtures/speculators/<case>/` holds a small draft checkpoint in one layout and what
speculators 0.9.0's `Eagle3DraftModel` computes from those files (fixtures/speculators/build_refs.py
wrote both; no speculators needed here). The draft head loaded by `checkpoint.load_draft` must
reproduce speculators' logits and g at every training-time-test step, to fp32 rounding.

Replaying a training-time-test step with the draft KV cache (worked example, row r = 4, position
of row r = r): step 0 runs every row at once (slots 0..11 hold step-0 keys); step 1 of row 4 runs
at position 5 with token input_ids[5] and hidden g0[4], writing slot 5; step 2 at position 6, token
input_ids[6], hidden g1[4]. Slot 5 had row 5's step-0 key, now overwritten: what speculators' mask
sees (step-0 keys of rows 0..4, then row 4's own later steps).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from eagle3_check.program.checkpoint import load_draft
from eagle3_check.program.draft import Eagle3DraftHead

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "speculators"
CASES = sorted(p.name for p in ROOT.iterdir() if (p / "case.json").is_file()) if ROOT.is_dir() else []
# fp32 rounding (measured max |diff|, printed by -s: logits <= 6e-6, g <= 2e-5 with |g| up to ~30);
# a misread layout differs by 0.1 and more (test_a_wrong_reading_is_caught)
TOL_LOGITS, TOL_G = 2e-5, 1e-4


@torch.no_grad()
def replay(head: Eagle3DraftHead, ref: dict[str, torch.Tensor], steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Our draft's logits [S, T, Vd] and g [S, T, H] on speculators' TTT inputs (NaN where the
    row's chain runs past the sequence)."""
    ids, pos = ref["input_ids"], ref["positions"]  # [1, T], [T]
    t = ids.shape[1]
    logits = torch.full((steps, t, head.cfg.draft_vocab_size), float("nan"))
    gs = torch.full((steps, t, head.cfg.hidden_size), float("nan"))
    feature = head.fuse(ref["taps"])  # [1, T, H]
    for r in range(t):
        lg, g = head(ids, feature, pos)  # step 0, every row (rewrites the confirmed slots)
        logits[0], gs[0] = lg[0], g[0]
        h = g[:, r : r + 1]
        for s in range(1, steps):
            if r + s >= t:
                break
            lg, h = head(ids[:, r + s : r + s + 1], h, pos[r : r + 1] + s)
            logits[s, r], gs[s, r] = lg[0, 0], h[0, 0]
    return logits, gs


def load_case(case: str) -> tuple[Eagle3DraftHead, dict, dict]:
    meta = json.loads((ROOT / case / "case.json").read_text())
    ref = load_file(str(ROOT / case / "reference.safetensors"))
    head = load_draft(ROOT / case / "draft", max_seq_len=64)
    head.cfg.resolve_aux_layers(meta["target_layers"])
    if "target_embed" in ref:
        assert head.needs_target_embedding
        head.share_embedding(ref["target_embed"])
    return head, ref, meta


def max_diffs(head: Eagle3DraftHead, ref: dict, steps: int) -> tuple[float, float]:
    logits, g = replay(head, ref, steps)
    ok = ~torch.isnan(logits[..., 0])  # [S, T] rows whose chain fits
    return (float((logits[ok] - ref["logits"][ok]).abs().max()), float((g[ok] - ref["g"][ok]).abs().max()))


@pytest.mark.parametrize("case", CASES)
def test_layout_matches_speculators(case):
    head, ref, meta = load_case(case)
    assert head.cfg.aux_layer_ids == meta["aux_layer_ids"]
    dl, dg = max_diffs(head, ref, meta["steps"])
    print(f"{case}: max |logits diff| {dl:.2e}, max |g diff| {dg:.2e}")
    assert dl <= TOL_LOGITS and dg <= TOL_G, (case, dl, dg)


def test_every_layout_case_is_present():
    """The reference set covers each layout the loader claims (a deleted case cannot pass silently)."""
    assert set(CASES) >= {
        "default", "rope-theta", "rope-llama3", "rope-legacy", "qwen3", "two-layers", "biases",
        "norm-before-fc", "fc-norm", "norm-output", "norm-before-residual", "no-norm-before-residual-key",
        "full-vocab", "no-embedding", "no-aux-ids", "sharded", "bin", "eagle3-original", "specforge",
    }


def test_a_wrong_reading_is_caught():
    """The comparison has teeth: reading llama3 rope as plain theta misses by far more than TOL."""
    from dataclasses import replace

    head, ref, meta = load_case("rope-llama3")
    for layer in head.layers:
        layer.self_attn.rope = replace(layer.self_attn.rope, rope_type="default")
    assert max_diffs(head, ref, meta["steps"])[0] > 1000 * TOL_LOGITS


def _target_dir_for(case: str, ref: dict, meta: dict, where: Path) -> Path:
    """A local target the exporter can read the shared embedding from (the no-embedding layout)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    emb = ref["target_embed"]  # [V, Ht]
    cfg = LlamaConfig(vocab_size=emb.shape[0], hidden_size=emb.shape[1], intermediate_size=2 * emb.shape[1],
                      num_hidden_layers=meta["target_layers"], num_attention_heads=2, num_key_value_heads=2)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        model.get_input_embeddings().weight.copy_(emb)
    model.save_pretrained(where)
    return where


@pytest.mark.parametrize("case", CASES)
def test_exported_layout_still_matches_speculators(case, tmp_path):
    """`draft export` of every layout writes speculators 0.9, and the written draft still
    reproduces speculators' own outputs on the source files (not only its own round trip)."""
    from eagle3_check.program.draft_export import export_draft

    meta = json.loads((ROOT / case / "case.json").read_text())
    ref = load_file(str(ROOT / case / "reference.safetensors"))
    target = _target_dir_for(case, ref, meta, tmp_path / "target") if "target_embed" in ref else None
    result = export_draft(ROOT / case / "draft", tmp_path / "out", target, verifier="acme/target")
    assert result.max_abs_diff == 0.0 and result.shared_embedding_written == ("target_embed" in ref)
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["speculators_model_type"] == "eagle3" and "rope_parameters" in written["transformer_layer_config"]
    assert written["speculators_config"]["verifier"]["name_or_path"] == "acme/target"
    head = load_draft(tmp_path / "out", max_seq_len=64)
    assert not head.needs_target_embedding  # the shared rows were written in
    head.cfg.resolve_aux_layers(meta["target_layers"])
    assert head.cfg.aux_layer_ids == meta["aux_layer_ids"]
    dl, dg = max_diffs(head, ref, meta["steps"])
    assert dl <= TOL_LOGITS and dg <= TOL_G, (case, dl, dg)
