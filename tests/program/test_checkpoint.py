"""The draft loader refuses what it cannot read exactly, with one line naming the field or tensor.

Each case edits one thing of a draft from the speculators reference set (fixtures/speculators;
that set proves the accepted layouts equal speculators' forward) and checks the error names it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from eagle3_check.errors import InputError
from eagle3_check.program.checkpoint import load_draft

REFS = Path(__file__).resolve().parents[2] / "fixtures" / "speculators"


def _cfg(fn):
    def edit(d: Path) -> None:
        p = d / "config.json"
        cfg = json.loads(p.read_text())
        fn(cfg, cfg.get("transformer_layer_config"))
        p.write_text(json.dumps(cfg))
    return edit


def _weights(fn, name: str = "model.safetensors"):
    def edit(d: Path) -> None:
        w = load_file(str(d / name))
        fn(w)
        save_file(w, str(d / name))
    return edit


def _index(d: Path) -> None:
    p = d / "model.safetensors.index.json"
    idx = json.loads(p.read_text())
    key = next(k for k, v in idx["weight_map"].items() if v != "model-00001-of-00005.safetensors")
    idx["weight_map"][key] = "model-00001-of-00005.safetensors"
    p.write_text(json.dumps(idx))


def _pickled_code(d: Path) -> None:
    (d / "model.safetensors").unlink()
    torch.save({"fc.weight": torch.zeros(2), "hook": os.system}, d / "pytorch_model.bin")


def _t2d(w):
    w["t2d"][int(torch.nonzero(~w["t2d"])[0])] = True


CASES = [  # (id, source case, edit, what the error line must name)
    ("unknown-top-level-key", "default", _cfg(lambda c, t: c.update(attention_sink=True)), "'attention_sink'"),
    ("unknown-layer-key", "default", _cfg(lambda c, t: t.update(use_qk_norm=True)),
     "'use_qk_norm' in transformer_layer_config"),
    ("rope-yarn", "default", _cfg(lambda c, t: t.update(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0})),
     "rope_parameters.rope_type 'yarn'"),
    ("rope-llama3-incomplete", "rope-llama3", _cfg(lambda c, t: t["rope_parameters"].pop("high_freq_factor")),
     "has no high_freq_factor"),
    ("rope-unknown-scaling-key", "rope-theta", _cfg(lambda c, t: t["rope_parameters"].update(mscale=0.7)),
     "rope_parameters.mscale"),
    ("rope-spellings-disagree", "default", _cfg(lambda c, t: t.update(rope_theta=500000.0)), "rope_theta 500000.0"),
    ("sliding-window-layer", "default", _cfg(lambda c, t: t.update(layer_types=["sliding_attention"], sliding_window=4)),
     "layer_types ['sliding_attention']"),
    ("activation", "default", _cfg(lambda c, t: t.update(hidden_act="gelu")), "hidden_act 'gelu'"),
    ("layer-model-type", "default", _cfg(lambda c, t: t.update(model_type="mistral")), "model_type 'mistral'"),
    ("partial-rotary", "default", _cfg(lambda c, t: t.update(partial_rotary_factor=0.5)), "partial_rotary_factor 0.5"),
    ("tied-lm-head", "default", _cfg(lambda c, t: c.update(tie_word_embeddings=True)), "tie_word_embeddings"),
    ("both-fc-norms", "fc-norm", _cfg(lambda c, t: c.update(norm_before_fc=True)), "both norm_before_fc and fc_norm"),
    ("flag-not-bool", "default", _cfg(lambda c, t: c.update(norm_output="yes")), "norm_output = 'yes'"),
    ("speculators-type", "default", _cfg(lambda c, t: c.update(speculators_model_type="eagle")),
     "speculators_model_type 'eagle'"),
    ("not-a-draft", "default", _cfg(lambda c, t: (c.clear(), c.update(architectures=["LlamaForCausalLM"]))),
     "architectures ['LlamaForCausalLM']"),
    ("aux-ids-not-a-list", "default", _cfg(lambda c, t: c.update(eagle_aux_hidden_state_layer_ids=3)),
     "eagle_aux_hidden_state_layer_ids = 3"),
    ("eagle-config-key", "specforge", _cfg(lambda c, t: c["eagle_config"].update(extra_layers=2)),
     "'extra_layers' in eagle_config"),
    ("config-says-two-layers", "default", _cfg(lambda c, t: t.update(num_hidden_layers=2)),
     "lack layers.1.input_layernorm.weight"),
    ("tensor-with-no-place", "default", _weights(lambda w: w.update({"layers.0.self_attn.q_norm.weight": torch.ones(8)})),
     "layers.0.self_attn.q_norm.weight"),
    ("bias-the-config-lacks", "biases", _cfg(lambda c, t: t.update(attention_bias=False)),
     "layers.0.self_attn.k_proj.bias"),
    ("missing-tensor", "default", _weights(lambda w: w.pop("layers.0.mlp.up_proj.weight")),
     "lack layers.0.mlp.up_proj.weight"),
    ("wrong-shape", "default", _weights(lambda w: w.update({"fc.weight": torch.zeros(32, 64)})), "fc.weight has shape [32, 64]"),
    ("t2d-not-d2t-targets", "default", _weights(_t2d), "t2d"),
    ("no-d2t-with-draft-vocab", "default", _weights(lambda w: (w.pop("d2t"), w.pop("t2d"))), "lack d2t"),
    ("shard-index-disagrees", "sharded", _index, "disagree on"),
    ("shard-missing", "sharded", lambda d: (d / "model-00002-of-00005.safetensors").unlink(),
     "model-00002-of-00005.safetensors does not exist"),
    ("bin-with-pickled-code", "default", _pickled_code, "cannot be read"),
]


@pytest.mark.parametrize("source,edit,named", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused_with_the_field_named(source, edit, named, tmp_path):
    d = tmp_path / "draft"
    shutil.copytree(REFS / source / "draft", d)
    edit(d)
    with pytest.raises(InputError) as err:
        load_draft(d, max_seq_len=32)
    line = str(err.value)
    assert "\n" not in line and "; expected " in line and ". Fix: " in line, line
    assert named in line, line


def test_draft_without_embedding_refuses_to_run_unshared():
    head = load_draft(REFS / "no-embedding" / "draft", max_seq_len=32)
    assert head.needs_target_embedding
    with pytest.raises(InputError, match="without embed_tokens"):
        head(torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, 1, 32), torch.zeros(1, dtype=torch.long))
    with pytest.raises(InputError, match="target embedding of shape"):
        head.share_embedding(torch.zeros(10, 32))


@pytest.mark.parametrize("case,layers,expected", [
    ("no-aux-ids", 32, [2, 16, 29]),  # vLLM default (2, L // 2, L - 3)
    ("default", 32, [1, 3, 6]),  # named ids are kept
    ("specforge", 32, [1, 4, 6]),  # eagle_config [0, 3, 5] are layer outputs: + 1
], ids=["vllm-default", "named", "specforge-output-numbering"])
def test_aux_layer_ids(case, layers, expected):
    head = load_draft(REFS / case / "draft", max_seq_len=32)
    head.cfg.resolve_aux_layers(layers)
    assert head.cfg.aux_layer_ids == expected


def test_norm_before_residual_absent_is_vllms_true():
    assert "norm_before_residual" not in json.loads((REFS / "no-norm-before-residual-key" / "draft" / "config.json").read_text())
    assert load_draft(REFS / "no-norm-before-residual-key" / "draft", 32).cfg.norm_before_residual is True
    assert load_draft(REFS / "eagle3-original" / "draft", 32).cfg.norm_before_residual is False


def test_saved_draft_round_trips(tmp_path):
    """Our writer's output reads back to the same config and tensors (full vocab: no d2t/t2d file)."""
    for case in ("qwen3", "full-vocab", "two-layers"):
        head = load_draft(REFS / case / "draft", 32)
        head.save(tmp_path / case)
        again = load_draft(tmp_path / case, 32)
        assert again.cfg.to_json() == head.cfg.to_json()
        for (k, a), b in zip(head.state_dict().items(), again.state_dict().values()):
            assert torch.equal(a, b), k
    assert "d2t" not in load_file(str(tmp_path / "full-vocab" / "model.safetensors"))
