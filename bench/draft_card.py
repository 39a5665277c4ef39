"""The card of any draft directory against its target, as `draft train` measures it: tau and
n-alpha for K = 1..7 on a held-out prompt set, the reference runner against the HF reference,
eager fp32 (eagle3_check/fixtures/card.py measure_dirs), with the run options `check` resolves
from the target's tokenizer files. For a checkpoint saved in the middle of a run, or to measure
a card on another device than the one that trained the draft (docs/drafts.md).

    PYTHONPATH=. python bench/draft_card.py --target DIR --draft DRAFT_DIR \
        --prompts fixtures/real-prompts/heldout.json --device cpu -o card.json

Prints one line per K and writes {"target", "draft", "device", "prompts", "seconds", "k"} to -o;
`--coverage` adds the share of the target's greedy tokens that the draft vocabulary holds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def card(target: str, draft: str, prompts_file: str, device: str, ks: list[int], tokenizer: str | None = None,
         progress=None) -> dict:
    """The card's `k` table for `draft` against `target` (fixtures/card.py measure_dirs)."""
    from eagle3_check.fixtures.card import measure_dirs
    from eagle3_check.jobs.draft_train import read_prompt_texts

    tok_path, opts = _world(target, draft, tokenizer)
    prompts = read_prompt_texts(prompts_file, "card prompt set")
    return measure_dirs(Path(target), Path(draft), tok_path, prompts, opts, ks, device=device, progress=progress)


def _world(target: str, draft: str, tokenizer: str | None):
    """(tokenizer path, resolved run options) `check --target --draft [--tokenizer]` would use."""
    from eagle3_check.cli import config_of
    from eagle3_check.errors import InputError
    from eagle3_check.jobs.common.world import request_world, resolved_options

    for what, d in (("--target", target), ("--draft", draft)):
        if not (Path(d) / "config.json").is_file():
            raise InputError(f"{what} {d}: no config.json there", "a model directory", f"pass {what} DIR")
    cfg, _ = config_of(["check", "--target", target, "--draft", draft, *(["--tokenizer", tokenizer] if tokenizer else [])])
    return Path(request_world(cfg)[0]), resolved_options(cfg).options


def coverage(target: str, draft: str, prompts_file: str, device: str, tokenizer: str | None = None,
             max_new: int = 64) -> dict:
    """The share of the target's greedy tokens on the prompts (the HF reference, `max_new`
    each, ending at a stop id) that lie in the draft's vocabulary (d2t): a draft can propose
    no other token, so this bounds its acceptance."""
    from types import SimpleNamespace

    import torch
    from safetensors.torch import load_file

    from eagle3_check.judge.hf import HFReference
    from eagle3_check.runners.options import prompt_ids, stop_set
    from eagle3_check.jobs.draft_train import read_prompt_texts
    from eagle3_check.tokenizer import Tokenizer

    tok_path, opts = _world(target, draft, tokenizer)
    tok = Tokenizer.load(tok_path)
    stops = frozenset(stop_set(tok, SimpleNamespace(eos_ids=()), opts).ids)
    d2t = load_file(str(Path(draft) / "model.safetensors"))["d2t"]  # [Vd]
    vocab = set((torch.arange(len(d2t)) + d2t).tolist())
    ref = HFReference(target, device, torch.float32)
    total = inside = 0
    for p in read_prompt_texts(prompts_file, "card prompt set"):
        toks = ref.greedy(prompt_ids(tok, p.text, opts), max_new, stops).tokens
        total += len(toks)
        inside += sum(t in vocab for t in toks)
    return {"tokens": total, "in_draft_vocab": inside, "share": round(inside / max(total, 1), 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True, help="HF target directory")
    ap.add_argument("--draft", required=True, help="draft directory (speculators layout)")
    ap.add_argument("--tokenizer", default=None, help="tokenizer.json (default: inside or beside --target)")
    ap.add_argument("--prompts", default="fixtures/real-prompts/heldout.json", help="held-out prompt set")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--ks", default="1,2,3,4,5,6,7", help="comma-separated chain lengths ('': no card)")
    ap.add_argument("--coverage", action="store_true",
                    help="also the share of the target's greedy tokens inside the draft vocabulary")
    ap.add_argument("-o", "--output", required=True, help="JSON file to write")
    args = ap.parse_args()

    from eagle3_check.atomic import check_writable, write_text_atomic
    from eagle3_check.errors import Eagle3CheckError, first_line

    try:
        ks = [int(k) for k in args.ks.split(",") if k.strip()]
    except ValueError:
        print(f"error: --ks {args.ks!r}: expected comma-separated integers; fix: e.g. --ks 1,2,4", file=sys.stderr)
        return 2
    try:
        check_writable(args.output, "card JSON")
        t = time.perf_counter()
        table = card(args.target, args.draft, args.prompts, args.device, ks, args.tokenizer) if ks else {}
        seconds = round(time.perf_counter() - t, 1)
        cover = coverage(args.target, args.draft, args.prompts, args.device, args.tokenizer) if args.coverage else None
    except Eagle3CheckError as e:
        print(f"error: {first_line(e)}", file=sys.stderr)
        return 2
    for k, row in table.items():
        print(f"K {k}: tau {row['tau']:.4f}  n-alpha {' '.join(f'{a:.4f}' for a in row['n_alpha'])}  "
              f"{'PASS' if row['passed'] else 'FAIL'}")
    record = {"target": args.target, "draft": args.draft, "device": args.device, "prompts": args.prompts,
              "seconds": seconds, "k": table, **({"vocab_coverage": cover} if cover else {})}
    if cover:
        print(f"draft vocabulary holds {cover['in_draft_vocab']} of the target's {cover['tokens']} greedy tokens "
              f"({100 * cover['share']:.1f} %)")
    write_text_atomic(args.output, json.dumps(record, indent=2) + "\n", "card JSON")
    print(f"{seconds} s; wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
