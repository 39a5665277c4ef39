"""Builds an embedded fixture from nothing but a config, a seed and text written for this repo.

Steps (`build_fixture`, behind `eagle3-check fixtures build NAME`): train a byte-level BPE
tokenizer on `fixtures/corpus.txt` with the Gemma 4 IT special ids (pad 0, eos 1, bos 2, a
stop token at 50, `<turn|>` at 106, and the turn/channel markers); random-init a tiny HF
target from a fixed seed; decode the training prompts (`fixtures/train_prompts.json`)
greedily with it; pick the draft vocabulary from the tokens the target generates; train
the EAGLE-3 draft head by distillation (`distill.py`) and save it in the speculators
layout; measure the card on the held-out prompts (`card.py`).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

import torch
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from eagle3_check.distill import (
    TrainConfig,
    greedy_data,
    select_draft_vocab,
    set_draft_vocab,
    train_draft,
)
from eagle3_check.draft import DraftConfig, Eagle3DraftHead
from eagle3_check.fixtures import Fixture, ProgramSpec, fixtures_root, load_prompts

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


STOP_IDS = frozenset({1, 50, 106})  # eos, <eot>, <turn|>: the Gemma 4 IT stop set
PROGRAM = ProgramSpec(max_seq_len=256, min_prefill=1, max_prefill=128, chain_len=4,
                      min_verify_len=2, max_verify_len=8)

_LLAMA = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 192,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "tie_word_embeddings": False,
}
_DRAFT = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
          "intermediate_size": 192, "draft_vocab_size": 256}

RECIPES = {
    # Llama: 4 layers, random init from a fixed seed (the scale sets how predictable its
    # greedy text is: loops and drifts, like a real model's, that a draft can learn).
    "tiny-llama": {
        "family": "llama",
        "seed": 1234,
        "target": {**_LLAMA, "initializer_range": 0.06},  # 0.2: chaos no draft learns; 0.02: one loop
        "aux_layer_ids": [1, 2, 3],
        "draft": _DRAFT,
        "train": TrainConfig(),
        "program": PROGRAM,
    },
    # The original random pair: a chaotic target (init 0.2) whose greedy text rarely repeats
    # a token, and an untrained draft (tau ~ 1): the edge suites' forced stops and boundary
    # cases need distinct tokens, which the learnable fixtures above do not give.
    "tiny-llama-random": {
        "family": "llama",
        "seed": 1234,
        "target": {**_LLAMA, "initializer_range": 0.2},
        "aux_layer_ids": [1, 2, 3],
        "draft": _DRAFT,
        "train": TrainConfig(steps=0),
        "program": PROGRAM,
    },
    # Gemma 4 text (the Gemma 4 31B layout, shrunk): sliding-window layers with a window of
    # 16 (every prompt and generation runs past it) and a global layer whose head dim and
    # kv heads differ (global_head_dim, num_global_key_value_heads, attention_k_eq_v),
    # logit soft-capping, tied embeddings.
    "tiny-gemma4": {
        "family": "gemma4",
        "seed": 4321,
        "target": {
            "model_type": "gemma4_text",
            "hidden_size": 64,
            "intermediate_size": 192,
            "num_hidden_layers": 4,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "global_head_dim": 32,
            "num_global_key_value_heads": 1,
            "attention_k_eq_v": True,
            "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
            "sliding_window": 16,
            "hidden_size_per_layer_input": 0,
            "vocab_size_per_layer_input": VOCAB_SIZE,
            "final_logit_softcapping": 30.0,
            "max_position_embeddings": 256,
            "initializer_range": 0.08,  # tied embeddings: >= 0.2 repeats one token forever
        },
        "aux_layer_ids": [1, 2, 3],
        "draft": {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "intermediate_size": 192, "draft_vocab_size": 256},
        "train": TrainConfig(),
        "program": PROGRAM,
    },
}
# config.json keys that older Transformers read instead of the per-layer config
COMPAT_KEYS = ("global_head_dim", "num_global_key_value_heads")


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
    extra = {k: spec[k] for k in COMPAT_KEYS if k in spec}
    if extra:  # written beside per_layer_config so that either reading loads the same shapes
        path = out_dir / "config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **extra}, indent=2, sort_keys=True) + "\n")
    return model


def init_draft(recipe: dict, target: torch.nn.Module, max_seq_len: int) -> Eagle3DraftHead:
    """A fresh draft head from the recipe's seed; embed_tokens starts as a copy of the
    target's embedding when the widths match (EAGLE-3 practice), the rest small normal."""
    target_cfg = target.config
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
    )
    torch.manual_seed(recipe["seed"] + 1)
    head = Eagle3DraftHead(cfg, max_seq_len)
    for p in head.parameters():
        if p.dim() == 2:
            torch.nn.init.normal_(p, std=0.05)
    emb = target.get_input_embeddings().weight
    if emb.shape == head.embed_tokens.weight.shape:
        with torch.no_grad():
            head.embed_tokens.weight.copy_(emb)
    return head


def build_fixture(
    name: str,
    root: Path | None = None,
    device: str = "cpu",
    train: TrainConfig | None = None,
    card: bool = True,
    command: str = "",
    progress: bool = True,
) -> Path:
    """Builds tokenizer, target, trained draft and card for `name` under `root`
    (default: the repository's fixtures/); returns the fixture directory."""
    from tqdm import tqdm
    from transformers import AutoModelForCausalLM

    from eagle3_check.tokenizer import Tokenizer

    recipe = RECIPES[name]
    cfg = train or recipe["train"]
    repo = fixtures_root()
    root = Path(root or repo)
    out = root / name
    train_tokenizer(repo / "corpus.txt", out)
    build_target(recipe, out / "target")
    spec: ProgramSpec = recipe["program"]
    (out / "fixture.json").write_text(
        json.dumps({"name": name, "family": recipe["family"], "program": asdict(spec)}, indent=2) + "\n"
    )
    tokenizer = Tokenizer.load(out / "tokenizer.json")
    # the HF reference's loading (eager attention) so that labels are what it decodes
    target = AutoModelForCausalLM.from_pretrained(out / "target", dtype=torch.float32,
                                                  attn_implementation="eager").to(device).eval()
    texts = [p.text for p in load_prompts(repo / "train_prompts.json")]
    bar = tqdm(total=len(texts), desc=f"{name}: target greedy data", unit="prompt",
               file=sys.stderr, disable=not progress)
    seqs = greedy_data(target, tokenizer, texts, recipe["aux_layer_ids"], cfg.max_new, STOP_IDS, progress=bar)
    bar.close()
    head = init_draft(recipe, target, spec.max_seq_len)
    set_draft_vocab(head, select_draft_vocab(seqs, head.cfg.draft_vocab_size, set(STOP_IDS), head.cfg.vocab_size))
    head.cfg.extra = {"training": {"method": "eagle3_check.distill (EAGLE-3 training-time test)",
                                   **asdict(cfg), "train_prompts": "fixtures/train_prompts.json"}}
    bar = tqdm(total=cfg.steps, desc=f"{name}: distill draft", unit="step", file=sys.stderr,
               disable=not progress)
    losses = train_draft(head.to(device), seqs, replace(cfg), progress=bar)
    bar.close()
    head.to("cpu").save(out / "draft")
    if card:
        write_fixture_card(name, root, command, {"final_loss": round(losses[-1], 4)} if losses else {}, progress)
    return out


def write_fixture_card(name: str, root: Path, command: str, extra: dict, progress: bool = True) -> Path:
    """Measures the card of the fixture under `root` on the held-out prompts and writes it."""
    from tqdm import tqdm

    from eagle3_check.card import CARD_KS, measure, write_card

    fx = Fixture(name, Path(root) / name, RECIPES[name]["program"])
    prompts = load_prompts(fixtures_root() / "prompts.json")
    bar = tqdm(total=len(prompts) * len(CARD_KS), desc=f"{name}: card", unit="req", file=sys.stderr,
               disable=not progress)
    table = measure(fx, CARD_KS, prompts, progress=bar)
    bar.close()
    return write_card(fx, table, command, extra)
