"""`eagle3-check draft export`: rewrite any EAGLE-3 draft checkpoint in the speculators 0.9 layout."""

from __future__ import annotations

import argparse
import json

HELP = """Draft checkpoints. `export` reads a draft in any layout the loader reads exactly
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
    p = sub.add_parser("draft", help="rewrite a draft checkpoint in the speculators 0.9 layout",
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


def main_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from eagle3_check.errors import InputError
    from eagle3_check.program.draft_export import export_draft

    if not Path(args.source).is_dir():
        raise InputError(f"draft {args.source}: directory does not exist", "a draft directory",
                         "fix the source path")
    result = export_draft(args.source, args.output, args.target, args.verifier)
    print(json.dumps(result.to_json(), indent=2) if args.json else "\n".join(result.lines()))
    return 0
