"""Models: the speculators layout round-trips, taps follow the HF convention, caches roll
back by overwrite."""

import json

import torch
from safetensors.torch import load_file

from eagle3_check.program.checkpoint import load_draft
from eagle3_check.program.target import TargetAdapter, load_hf_target

SPECULATORS_CONFIG_KEYS = {
    "transformer_layer_config", "draft_vocab_size", "eagle_aux_hidden_state_layer_ids",
    "norm_before_residual", "target_hidden_size",
}


def test_draft_speculators_layout_round_trips(fixture, tmp_path):
    head = load_draft(fixture.draft_dir, max_seq_len=64)
    head.save(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert SPECULATORS_CONFIG_KEYS <= cfg.keys()
    names = set(load_file(str(tmp_path / "model.safetensors")))
    assert {"embed_tokens.weight", "fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d",
            "layers.0.self_attn.q_proj.weight", "layers.0.hidden_norm.weight"} <= names
    assert not any("cache" in n for n in names)
    again = load_draft(tmp_path, max_seq_len=64)
    for (n, a), (_, b) in zip(head.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), n


def test_target_taps_are_hf_hidden_states_at_aux_ids(fixture):
    model = load_hf_target(fixture.target_dir)
    adapter = TargetAdapter(model, [1, 2, 3], max_seq_len=64)
    tokens = torch.tensor([[2, 105, 300, 301, 302, 106]])  # [1, 6]
    with torch.no_grad():
        logits, taps = adapter(tokens, torch.arange(6))
        hf = model(tokens, output_hidden_states=True)
    assert torch.allclose(logits, hf.logits, atol=1e-5)
    want = torch.cat([hf.hidden_states[k] for k in (1, 2, 3)], dim=-1)
    assert taps.shape == (1, 6, 3 * model.config.hidden_size)
    assert torch.allclose(taps, want, atol=1e-5)


def test_target_cache_rolls_back_by_overwrite(fixture):
    adapter = TargetAdapter(load_hf_target(fixture.target_dir), [1, 2, 3], max_seq_len=64)
    prompt = torch.tensor([[2, 300, 301, 302]])  # [1, 4]
    with torch.no_grad():
        adapter(prompt, torch.arange(4))
        clean, _ = adapter(torch.tensor([[303, 304]]), torch.tensor([4, 5]))
        adapter(torch.tensor([[400, 401, 402]]), torch.tensor([4, 5, 6]))  # rejected proposals
        again, _ = adapter(torch.tensor([[303, 304]]), torch.tensor([4, 5]))  # overwrite 4..5
    assert torch.equal(clean, again)


def test_draft_cache_rolls_back_by_overwrite(fixture):
    head = load_draft(fixture.draft_dir, max_seq_len=64)
    torch.manual_seed(0)
    feat = torch.randn(1, 3, head.cfg.hidden_size)  # [1, 3, H]
    tokens = torch.tensor([[300, 301, 302]])
    with torch.no_grad():
        first, g1 = head(tokens, feat, torch.arange(3))
        head(torch.tensor([[7, 8, 9, 10]]), torch.randn(1, 4, head.cfg.hidden_size), torch.arange(1, 5))
        second, g2 = head(tokens, feat, torch.arange(3))
    assert torch.equal(first, second) and torch.equal(g1, g2)


def test_load_hf_target_reads_config_json_once(fixture, monkeypatch):
    """config.json is read and checked once (hf_config.read_target_config, bounded strict JSON); the
    config built from it is the one Transformers loads the weights with, and the one AutoConfig reads."""
    import builtins
    from pathlib import Path

    from transformers import AutoConfig

    want = AutoConfig.from_pretrained(fixture.target_dir).to_dict()
    real, reads = builtins.open, []

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, Path)) and Path(file).name == "config.json":
            reads.append(Path(file))
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    model = load_hf_target(fixture.target_dir)
    monkeypatch.undo()
    assert reads == [Path(fixture.target_dir) / "config.json"]
    got = model.config.to_dict()
    assert {k: got[k] for k in want if k != "dtype"} == {k: v for k, v in want.items() if k != "dtype"}
