"""`eagle3-check draft train` / `draft export`: train an EAGLE-3 draft for a target; rewrite any EAGLE-3
draft checkpoint in the speculators 0.9 layout."""

from __future__ import annotations

import argparse
import json

HELP = """Draft checkpoints. `train` trains an EAGLE-3 draft for a target (`draft train --help`,
docs/drafts.md). `export` reads a draft in any layout the loader reads exactly
(speculators 0.9 and earlier, original EAGLE-3, SpecForge; see docs/checkpoints.md)
and writes it in the speculators 0.9 layout (Eagle3DraftModel, rope_parameters,
speculators_config naming the verifier), which speculators and the seed's loader read.
The written draft is read back before it is published: every tensor and a probe forward
must be bit-equal, else nothing is written.

examples:
  eagle3-check draft export fixtures/tiny-llama/draft -o /tmp/tiny-draft
  eagle3-check draft export eagle3-ckpt/ -o out/ --target meta-llama/Llama-3.1-8B-Instruct  # hub id, local cache
  eagle3-check draft export specforge-ckpt/ -o out/ --verifier org/target --json
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("draft", help="train an EAGLE-3 draft for a target, or export (rewrite) a draft "
                       "checkpoint in the speculators 0.9 layout",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    dsub = p.add_subparsers(dest="draft_command", metavar="ACTION", required=True)
    e = dsub.add_parser("export", help="read a draft in any supported layout, write speculators 0.9",
                        description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("source", help="draft directory (config.json + weights)")
    e.add_argument("-o", "--output", required=True, help="new (or empty) directory to write")
    e.add_argument("--target", default=None, help="the target (directory or cached hub id): writes a shared "
                   "embedding in, resolves vLLM's default aux layers, names the verifier")
    e.add_argument("--verifier", default=None, metavar="NAME",
                   help="speculators_config verifier name_or_path (default: the source's, else --target)")
    e.add_argument("--json", action="store_true", help="print the summary as JSON")
    e.set_defaults(func=main_export)
    add_train_parser(dsub)


TRAIN_HELP = """Trains an EAGLE-3 draft for a target by EAGLE-3's recipe (docs/drafts.md): the
training prompts plus user turns the target writes itself (--self-prompts, sampled at --seed),
the target's greedy answers, the training-time test on the target's taps and argmax labels
(teacher-forced, online), a reduced draft vocabulary (--draft-vocab) and the target's embedding
shared. Writes the draft (speculators layout, bf16) and its card (tau and n-alpha for K = 1..7
on --card-prompts, measured by the reference runner against the HF reference).
Resumable: OUT.work/ holds the data and a checkpoint every --checkpoint-every steps; rerun the
same command to continue. OUT appears only when the draft is complete.

examples:
  eagle3-check draft train --target /tmp/real/smollm2/target --tokenizer /tmp/real/smollm2/tokenizer.json \\
      -o /tmp/smollm2-draft --chat-prefix $'<|im_start|>user\\n' \\
      --chat-suffix $'<|im_end|>\\n<|im_start|>assistant\\n' --stop-ids 2 --stop-token '<|im_end|>' \\
      --bos-id -1 --eos-id 2 --self-prompts 64 --steps 100
  eagle3-check draft train --target fixtures/tiny-llama/target -o /tmp/d --steps 20 --self-prompts 8
"""


def add_train_parser(dsub) -> None:
    from eagle3_check.cli.common import add_runner_args
    from eagle3_check.fixtures.recipe import Recipe

    r = Recipe()
    t = dsub.add_parser("train", help="train an EAGLE-3 draft for a target (EAGLE-3 recipe)",
                        description=TRAIN_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--target", required=True, help="HF target directory (config.json + weights)")
    t.add_argument("--tokenizer", default=None, help="tokenizer.json (default: beside or inside --target)")
    t.add_argument("-o", "--output", required=True, help="new draft directory (must not exist)")
    t.add_argument("--prompts", dest="train_prompts", default=None,
                   help="training prompt set JSON (default: fixtures/train_prompts.json)")
    t.add_argument("--card-prompts", default=None,
                   help="held-out prompt set for the card (default: fixtures/prompts.json)")
    t.add_argument("--no-card", action="store_true", help="do not measure the card")
    t.add_argument("--device", default="cpu", help="cpu or cuda")
    t.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                   help="the target's dtype for data and taps (the card is always fp32)")
    t.add_argument("--steps", type=int, default=r.steps, help="training steps")
    t.add_argument("--batch-size", type=int, default=r.batch_size, help="sequences per step")
    t.add_argument("--lr", type=float, default=r.lr)
    t.add_argument("--ttt-steps", type=int, default=r.ttt_steps, help="chain steps trained")
    t.add_argument("--self-prompts", type=int, default=r.self_prompts, help="user turns the target writes")
    t.add_argument("--opened-prompts", type=int, default=r.opened_prompts,
                   help="more user turns the target writes, each begun with a training prompt's first 1-4 words")
    t.add_argument("--gen-batch", type=int, default=r.gen_batch, help="sequences per generate call")
    t.add_argument("--draft-vocab", type=int, default=r.draft_vocab, help="draft vocabulary size")
    t.add_argument("--intermediate-size", type=int, default=None, help="draft MLP width (default: the target's)")
    t.add_argument("--seed", type=int, default=r.seed)
    t.add_argument("--checkpoint-every", type=int, default=50, help="steps between checkpoints")
    add_runner_args(t, max_new_default=r.max_new)  # --max-new-tokens: the greedy answer length
    t.set_defaults(func=main_train)


def main_train(cfg) -> int:
    import sys

    from tqdm import tqdm

    from eagle3_check.fixtures.draft_recipe import train_for_target
    from eagle3_check.jobs.draft_train import train_inputs

    a = train_inputs(cfg)
    bars = lambda total, desc, unit: tqdm(total=total, desc=desc, unit=unit, file=sys.stderr)  # noqa: E731
    summary = train_for_target(a["target"], a["tokenizer"], a["output"], a["options"], a["recipe"],
                               a["card_prompts"], a["prompts_file"], cfg.device, a["dtype"],
                               cfg.drafting.checkpoint_every, command=" ".join(["eagle3-check", *sys.argv[1:]]),
                               bar_factory=bars)
    print(json.dumps({"draft": str(a["output"]), **summary}, indent=2))
    return 0


def main_export(cfg) -> int:
    from pathlib import Path

    from eagle3_check.errors import InputError
    from eagle3_check.program.draft_export import export_draft

    if not Path(cfg.drafting.source).is_dir():
        raise InputError(f"draft {cfg.drafting.source}: directory does not exist", "a draft directory",
                         "fix the source path")
    result = export_draft(cfg.drafting.source, cfg.output, cfg.target, cfg.drafting.verifier)
    print(json.dumps(result.to_json(), indent=2) if cfg.json else "\n".join(result.lines()))
    return 0
