"""Builds an embedded fixture from nothing but a config, a seed and text written for this repo.

Steps: train a byte-level BPE tokenizer on `fixtures/corpus.txt` with the Gemma 4 IT
special ids (pad 0, eos 1, bos 2, a stop token at 50, `<turn|>` at 106, and the
turn/channel markers), random-init a tiny HF target from a fixed seed, and random-init
an EAGLE-3 draft head in the speculators layout. Draft training (distillation) is a
separate step that overwrites `draft/`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import torch
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from eagle3_check.draft import DraftConfig, Eagle3DraftHead
from eagle3_check.fixtures import ProgramSpec, fixtures_root

# Special tokens placed at the ids the Gemma 4 IT defaults use; the rest are fillers.
SPECIAL_AT = {
    0: "<pad>",
    1: "<eos>",
    2: "<bos>",
    50: "<eot>",
    100: "<|channel>",
    101: "<channel|>",
    105: "<|turn>",
    106: "<turn|>",
}
N_SPECIAL = 107
VOCAB_SIZE = 512


def special_tokens() -> list[str]:
    return [SPECIAL_AT.get(i, f"<unused{i}>") for i in range(N_SPECIAL)]


def train_tokenizer(corpus: Path, out_dir: Path) -> HFTokenizer:
    tok = HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=special_tokens(),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = corpus.read_text(encoding="utf-8").splitlines()
    tok.train_from_iterator(lines, trainer=trainer)
    for i, name in SPECIAL_AT.items():
        assert tok.token_to_id(name) == i, f"{name} landed at {tok.token_to_id(name)}, not {i}"
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    (out_dir / "tokenizer_config.json").write_text(
        json.dumps({"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"}, indent=2) + "\n"
    )
    return tok


RECIPES = {
    "tiny-llama": {
        "family": "llama",
        "seed": 1234,
        "target": {
            "model_type": "llama",
            "hidden_size": 64,
            "intermediate_size": 192,
            "num_hidden_layers": 4,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 256,
            "initializer_range": 0.2,
            "tie_word_embeddings": False,
        },
        "aux_layer_ids": [1, 2, 3],
        "draft": {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "intermediate_size": 192, "draft_vocab_size": 256},
        "program": ProgramSpec(max_seq_len=256, min_prefill=1, max_prefill=128, chain_len=4,
                               min_verify_len=2, max_verify_len=8),
    },
}


def build_target(recipe: dict, out_dir: Path) -> torch.nn.Module:
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = dict(recipe["target"])
    model_type = spec.pop("model_type")
    cfg = AutoConfig.for_model(
        model_type, vocab_size=VOCAB_SIZE, bos_token_id=2, eos_token_id=1, pad_token_id=0, **spec
    )
    torch.manual_seed(recipe["seed"])
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    model.save_pretrained(out_dir, safe_serialization=True)
    return model


def draft_vocab(tok: HFTokenizer, corpus: Path, size: int) -> list[int]:
    """The `size` target ids kept by the draft: the most frequent corpus tokens, plus the
    stop specials, in ascending id order (so d2t offsets are non-negative)."""
    counts = Counter()
    for line in corpus.read_text(encoding="utf-8").splitlines():
        counts.update(tok.encode(line).ids)
    keep = {1, 50, 106}
    for i, _ in counts.most_common():
        if len(keep) >= size:
            break
        keep.add(i)
    i = N_SPECIAL
    while len(keep) < size:
        keep.add(i)
        i += 1
    return sorted(keep)


def init_draft(recipe: dict, target_cfg, kept_ids: list[int], max_seq_len: int) -> Eagle3DraftHead:
    d = recipe["draft"]
    cfg = DraftConfig(
        hidden_size=d["hidden_size"],
        num_attention_heads=d["num_attention_heads"],
        num_key_value_heads=d["num_key_value_heads"],
        intermediate_size=d["intermediate_size"],
        vocab_size=target_cfg.vocab_size,
        draft_vocab_size=d["draft_vocab_size"],
        aux_layer_ids=list(recipe["aux_layer_ids"]),
        target_hidden_size=target_cfg.hidden_size,
        rms_norm_eps=getattr(target_cfg, "rms_norm_eps", 1e-6),
        rope_theta=float(getattr(target_cfg, "rope_theta", None) or 10000.0),
    )
    torch.manual_seed(recipe["seed"] + 1)
    head = Eagle3DraftHead(cfg, max_seq_len)
    for p in head.parameters():
        if p.dim() == 2:
            torch.nn.init.normal_(p, std=0.05)
    kept = torch.tensor(kept_ids, dtype=torch.long)
    head.d2t.copy_(kept - torch.arange(len(kept_ids)))
    head.t2d.zero_()
    head.t2d[kept] = True
    return head.eval()


def build_fixture(name: str, root: Path | None = None) -> Path:
    """Builds tokenizer, random target and random draft for `name`; returns its directory."""
    recipe = RECIPES[name]
    root = root or fixtures_root()
    out = root / name
    corpus = fixtures_root() / "corpus.txt"
    tok = train_tokenizer(corpus, out)
    target = build_target(recipe, out / "target")
    spec: ProgramSpec = recipe["program"]
    head = init_draft(recipe, target.config, draft_vocab(tok, corpus, recipe["draft"]["draft_vocab_size"]), spec.max_seq_len)
    head.save(out / "draft")
    (out / "fixture.json").write_text(
        json.dumps({"name": name, "family": recipe["family"], "program": asdict(spec)}, indent=2) + "\n"
    )
    return out
