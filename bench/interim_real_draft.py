"""Interim EAGLE-3 drafts for the real fixtures (smollm2-135m, gemma3-270m), with the project's
existing recipe (eagle3_check/fixtures/distill.py, driven from here), so the fixtures work until
the trained drafts (issue 27 item 2) replace them. Small on purpose: one draft layer of the
target's width sharing the target's embedding (not saved), a reduced draft vocabulary, bf16.

    PYTHONPATH=. OMP_NUM_THREADS=1 python bench/interim_real_draft.py smollm2-135m [--steps 300]

Writes fixtures/NAME/draft/ and fixtures/NAME/card.json (K from --card-ks, on the held-out
prompts fixtures/real-prompts/heldout.json). Trains on fixtures/real-prompts/train.json.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import asdict

import torch

# The requests each fixture is built and judged with, until run options come from the
# tokenizer's own files: SmolLM2 is ChatML as its chat template renders a user turn (with the
# template's default system turn), no BOS, <|im_end|> (id 2) ends a turn; Gemma 3 270M is the
# base model: raw text after its BOS (2), EOS 1.
SMOL_SYSTEM = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
OPTIONS = {
    "smollm2-135m": dict(chat_prefix=SMOL_SYSTEM + "<|im_start|>user\n", chat_suffix="<|im_end|>\n<|im_start|>assistant\n",
                         stop_ids=(2,), stop_token="<|im_end|>", bos_id=-1, eos_id=2),
    "gemma3-270m": dict(raw=True, stop_ids=(1,), stop_token=None, bos_id=2, eos_id=1),
}
RECIPES = {  # draft shape (hidden = the target's, so its embedding is shared) and taps (low, mid, high)
    "smollm2-135m": {"aux_layer_ids": [2, 15, 27], "seed": 0,
                     "draft": {"num_attention_heads": 9, "num_key_value_heads": 3, "intermediate_size": 512,
                               "draft_vocab_size": 1024}},
    "gemma3-270m": {"aux_layer_ids": [2, 9, 16], "seed": 0,
                    "draft": {"num_attention_heads": 5, "num_key_value_heads": 1, "intermediate_size": 512,
                              "draft_vocab_size": 1024}},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=sorted(RECIPES))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--card-ks", default="4", help="comma-separated K of the card (the full card is 1..7)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from tqdm import tqdm
    from transformers import AutoModelForCausalLM

    from eagle3_check.fixtures.build import init_draft
    from eagle3_check.fixtures.card import measure, write_card
    from eagle3_check.fixtures.distill import (
        TrainConfig,
        greedy_data,
        select_draft_vocab,
        set_draft_vocab,
        train_draft,
    )
    from eagle3_check.fixtures.registry import fixtures_root, load_fixture, load_prompts
    from eagle3_check.program.draft_config import speculators_block
    from eagle3_check.quiet import third_party_quiet
    from eagle3_check.runners.options import RunOptions
    from eagle3_check.tokenizer import Tokenizer

    t0 = time.time()
    fx = load_fixture(args.name)
    opts = RunOptions(**OPTIONS[args.name])
    recipe = {**RECIPES[args.name]}
    tokenizer = Tokenizer.load(fx.tokenizer_path)
    with third_party_quiet():
        target = AutoModelForCausalLM.from_pretrained(fx.target_dir, dtype=torch.float32,
                                                      attn_implementation="eager").eval()
    recipe["draft"] = {**recipe["draft"], "hidden_size": target.config.hidden_size}
    cfg = TrainConfig(steps=args.steps, batch_size=args.batch_size, max_new=args.max_new, soft=0.0, seed=0)
    texts = [p.text for p in load_prompts(fixtures_root() / "real-prompts" / "train.json")]
    stops = frozenset(opts.stop_ids) | {opts.eos_id}
    bar = tqdm(total=len(texts), desc=f"{args.name}: target greedy data", unit="prompt", file=sys.stderr)
    seqs = greedy_data(target, tokenizer, texts, recipe["aux_layer_ids"], cfg.max_new, stops, opts,
                       progress=bar, keep_logits=False, batch_size=8)
    bar.close()
    t_data = time.time() - t0
    head = init_draft(recipe, target, fx.spec.max_seq_len)
    head.share_embedding(target.get_input_embeddings().weight)  # not trained, not saved
    set_draft_vocab(head, select_draft_vocab(seqs, head.cfg.draft_vocab_size, set(stops), head.cfg.vocab_size))
    command = "PYTHONPATH=. python bench/interim_real_draft.py " + shlex.join(sys.argv[1:])
    head.cfg.extra = {"training": {"method": "eagle3_check.fixtures.distill (EAGLE-3 training-time test), interim",
                                   **asdict(cfg), "train_prompts": "fixtures/real-prompts/train.json",
                                   "command": command},
                      "speculators_config": speculators_block(f"fixtures/{args.name} (converted target)",
                                                              list(target.config.architectures or []))}
    bar = tqdm(total=cfg.steps, desc=f"{args.name}: distill draft", unit="step", file=sys.stderr)
    losses = train_draft(head, seqs, cfg, progress=bar)
    bar.close()
    t_train = time.time() - t0 - t_data
    head = head.to(torch.bfloat16)
    del head.embed_tokens  # the target's rows: a checkpoint without them shares the target's (vLLM)
    head.save(fx.draft_dir)
    del target
    ks = [int(k) for k in args.card_ks.split(",")]
    bar = tqdm(total=len(fx.prompts()) * len(ks), desc=f"{args.name}: card", unit="req", file=sys.stderr)
    table = measure(fx, ks, progress=bar, options=opts)
    bar.close()
    times = {"greedy_data_s": round(t_data), "train_s": round(t_train), "card_s": round(time.time() - t0 - t_data - t_train)}
    write_card(fx, table, command, {"final_loss": round(losses[-1], 4), "interim": True, "times": times,
                                    "threads": args.threads},
               prompts="fixtures/real-prompts/heldout.json (held out: not used to train the draft)")
    print(f"{args.name}: {times}, loss {losses[0]:.3f} -> {losses[-1]:.3f}, card {table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
