"""`draft train`'s inputs from a `Config`: every one checked before anything loads (one-line
errors), the prompt sets read, the recipe and the run options resolved from the tokenizer found
beside --target (runners/defaults.py)."""

from __future__ import annotations

import json


def read_prompt_texts(path: str, what: str) -> list:
    """A prompt set {"prompts": [{"id", "text"}]} read by hand (no pydantic: the H200 has none)."""
    from eagle3_check.errors import InputError
    from eagle3_check.fixtures.registry import Prompt
    from eagle3_check.inputs import read_json

    fix = 'write {"prompts": [{"id": "a", "text": "..."}]} (see fixtures/prompts.json)'
    data = read_json(path, what, "a prompt set JSON object", fix)
    items = data.get("prompts") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise InputError(f"{what} {path} has no 'prompts' list", "a non-empty list of prompts", fix)
    out = []
    for i, q in enumerate(items):
        if not isinstance(q, dict) or sorted(q) != ["id", "text"] or not all(isinstance(v, str) for v in q.values()):
            raise InputError(f"{what} {path}: prompts[{i}] is {json.dumps(q)[:60]}",
                             "an object with string 'id' and 'text' only", fix)
        out.append(Prompt(q["id"], q["text"]))
    return out


def train_inputs(cfg) -> dict:
    """Every `draft train` input checked before anything loads (one-line errors)."""
    from pathlib import Path

    import torch

    from eagle3_check.errors import InputError, OptionError
    from eagle3_check.fixtures.recipe import Recipe
    from eagle3_check.fixtures.registry import fixtures_root
    from eagle3_check.jobs.common.world import resolved_options

    target = Path(cfg.target)
    if not (target / "config.json").is_file():
        raise InputError(f"--target {target}: no config.json there", "an HF target directory",
                         "pass --target DIR holding config.json and the weights")
    tok = Path(cfg.tokenizer) if cfg.tokenizer else next(
        (p for p in (target / "tokenizer.json", target.parent / "tokenizer.json") if p.is_file()), None)
    if tok is None or not tok.is_file():
        raise InputError(f"--tokenizer {tok or '(none beside --target)'} does not exist", "a tokenizer.json",
                         "pass --tokenizer PATH/tokenizer.json")
    cfg = cfg.replace(tokenizer=str(tok))  # the run options resolve from this tokenizer's files (runners/defaults.py)
    out = Path(cfg.output)
    if out.exists():
        raise InputError(f"-o {out} already exists", "a new directory", "pass a new -o DIR or delete it")
    if cfg.chain_len is not None or cfg.chunked_prefill:
        raise OptionError("-k / --chunked-prefill with draft train", "no chain length or prefill option "
                          "(the card measures K = 1..7)", "drop -k / --chunked-prefill")
    for name in ("steps", "batch_size", "ttt_steps", "gen_batch", "checkpoint_every", "max_new_tokens"):
        if cfg.value(name) < 1:
            raise OptionError(f"--{name.replace('_', '-')} {cfg.value(name)}", "an integer >= 1",
                              f"pass --{name.replace('_', '-')} 1 or more")
    if cfg.drafting.self_prompts < 0 or cfg.drafting.opened_prompts < 0 or cfg.drafting.draft_vocab < 2 or not cfg.drafting.lr > 0:
        raise OptionError(f"--self-prompts {cfg.drafting.self_prompts} / --opened-prompts {cfg.drafting.opened_prompts} / "
                          f"--draft-vocab {cfg.drafting.draft_vocab} / --lr {cfg.drafting.lr}",
                          "self-prompts >= 0, opened-prompts >= 0, draft-vocab >= 2, lr > 0", "fix the value")
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise OptionError(f"--device {cfg.device}", "cpu, or cuda on a machine with a GPU", "pass --device cpu")
    prompts_file = cfg.drafting.train_prompts or str(fixtures_root() / "train_prompts.json")
    train = [p.text for p in read_prompt_texts(prompts_file, "training prompt set")]
    card = None if cfg.drafting.no_card else read_prompt_texts(cfg.drafting.card_prompts or str(fixtures_root() / "prompts.json"),
                                                       "card prompt set")
    recipe = Recipe(self_prompts=cfg.drafting.self_prompts, opened_prompts=cfg.drafting.opened_prompts, max_new=cfg.max_new_tokens, gen_batch=cfg.drafting.gen_batch,
                    draft_vocab=cfg.drafting.draft_vocab, intermediate_size=cfg.drafting.intermediate_size, steps=cfg.drafting.steps,
                    batch_size=cfg.drafting.batch_size, lr=cfg.drafting.lr, ttt_steps=cfg.drafting.ttt_steps, seed=cfg.drafting.seed,
                    train_prompts=train)
    return {"target": target, "tokenizer": tok, "output": out, "options": resolved_options(cfg).options,
            "recipe": recipe, "card_prompts": card, "prompts_file": prompts_file,
            "dtype": {"float32": torch.float32, "bfloat16": torch.bfloat16}[cfg.dtype]}
