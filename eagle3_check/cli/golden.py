"""`eagle3-check golden record | verify | baseline`: golden outputs and the metrics baseline."""

from __future__ import annotations

import argparse
import json
import sys

from eagle3_check.cli.common import (
    add_program_args,
    add_runner_args,
    build_program,
    resolved_from_args,
    set_threads,
)
from eagle3_check.cli.exec_cmd import add_timeout_arg, golden_verify_main, is_exec, time_limited
from eagle3_check.cli.report import add_html_arg, refuse_html, write_html
from eagle3_check.errors import InputError

HELP = """Golden outputs: record the exact tokens and stats of a configuration once, then verify
every later run against them, token for token. The deterministic metrics (forwards per
token, tau, n-alpha) are gated exactly against bench/baselines/metrics.json.

examples:
  eagle3-check golden verify                              # all of golden/, plus the metrics baseline
  eagle3-check golden verify --runner my_pkg.runners:make_runner   # gate your own runner
  eagle3-check golden record --fixture tiny-llama -k 4 --max-new-tokens 48 --only hi,count,capital,soup
  eagle3-check golden record ... --force                  # re-record (review the diff before committing)
  eagle3-check golden record --pte tiny.pte -k 4 --max-new-tokens 48 --only hi,count   # a .pte golden
  eagle3-check golden baseline                            # refresh the metrics baseline from golden/
"""

DEFAULT_MAX_NEW = 48


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("golden", help="record / verify golden outputs and the metrics baseline",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    gsub = p.add_subparsers(dest="golden_command", metavar="ACTION", required=True)

    r = gsub.add_parser("record", help="run the runner and the HF reference; write a golden file",
                        description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--prompts", default=None, help="prompt set JSON (default: the fixture's)")
    r.add_argument("--only", default=None, help="comma-separated prompt ids to keep, in this order")
    r.add_argument("--dir", default=None, help="golden directory (default: the repository's golden/)")
    r.add_argument("--force", action="store_true", help="overwrite an existing golden")
    r.add_argument("--json", action="store_true", help="print the recorded golden as JSON")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_program_args(r)
    add_runner_args(r, max_new_default=DEFAULT_MAX_NEW)
    r.set_defaults(func=record_main)

    for name, helptext in (("verify", "re-run goldens; exact token compare and the metrics gate"),
                           ("baseline", "write the metrics baseline entries of goldens (refresh)")):
        v = gsub.add_parser(name, help=helptext, description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
        v.add_argument("goldens", nargs="*", help="golden files or directories (default: golden/)")
        v.add_argument("--baseline", default=None, help="metrics baseline JSON (default: bench/baselines/metrics.json)")
        v.add_argument("--pte", default=None, metavar="FILE",
                       help="the .pte export to run backend-pte goldens on (skipped without it)")
        v.add_argument("--data-path", default=None, metavar="FILE.ptd", help="the .pte's external data file")
        v.add_argument("--threads", type=int, default=None, metavar="N",
                       help="CPU torch threads (default 1, or OMP_NUM_THREADS when set), as `check`")
        if name == "verify":
            v.add_argument("--no-baseline", action="store_true", help="compare tokens only")
            v.add_argument("--runner", default="reference", metavar="MODULE:FACTORY",
                           help="the runner to verify (a plug-in factory, see `check --runner`, or exec:PATH, "
                           "a runner binary, with --pte); default reference")
            add_timeout_arg(v)
            v.add_argument("--json", action="store_true", help="print the outcome as JSON")
            add_html_arg(v)
        v.add_argument("--no-progress", action="store_true", help="no progress bar")
        v.set_defaults(func=verify_main if name == "verify" else baseline_main)


def _select(prompts, only: str | None):
    if not only:
        return prompts
    by_id = {p.id: p for p in prompts}
    wanted = [s.strip() for s in only.split(",") if s.strip()]
    missing = [w for w in wanted if w not in by_id]
    if missing:
        raise InputError(f"--only {', '.join(missing)}", f"prompt ids of the set ({', '.join(by_id)})",
                         "fix --only, or pass --prompts FILE with those prompts")
    return [by_id[w] for w in wanted]


def _quantized_reference(setup, backend: str):
    """A quantized program's golden is judged against, and takes its margins from, the program's
    own quantized target (DESIGN §3: HF full precision is drift, not the reference); None for
    full-precision programs."""
    from eagle3_check.program.quantize import program_quantization
    from eagle3_check.reference.hf import HFReference

    if program_quantization(setup.program.metadata()) is None:
        return None
    module = getattr(setup.program, "module", None)
    if backend == "pte" or module is None:
        raise InputError("golden record on a quantized .pte", "its eager twin (margins need the quantized "
                         "target's logits)", "record on the eager variant (e.g. --fixture tiny-llama-int4), "
                         "then gate the .pte with --golden")
    return HFReference.from_model(module.target.model)


def record_main(args: argparse.Namespace) -> int:
    from pathlib import Path

    import torch
    from tqdm import tqdm

    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture, load_prompts
    from eagle3_check.gating.golden import GoldenKey, golden_root, record_golden, save_golden
    from eagle3_check.program.contract import read_metadata
    from eagle3_check.reference.hf import HFReference
    from eagle3_check.reference.tolerance import tolerance_for
    from eagle3_check.table import format_rows

    if args.target or args.draft:
        raise InputError("--target/--draft for a golden", "an embedded fixture (goldens are named by it)",
                         "pass --fixture NAME (see fixtures/)")
    over = [f for f in ("max_seq_len", "min_prefill", "max_prefill") if getattr(args, f) is not None]
    if over:
        raise InputError(f"--{over[0].replace('_', '-')} for a golden", "the fixture's own program shape",
                         "drop the override (a golden's name does not record it)")
    setup = build_program(args)  # --pte: the .pte, its fixture from --fixture or the export sidecar
    fixture = setup.info.get("fixture") or args.fixture or DEFAULT_FIXTURE
    backend = "pte" if getattr(args, "pte", None) else "eager"
    md = read_metadata(setup.program.metadata())
    k = args.chain_len if args.chain_len is not None else md.chain_len
    key = GoldenKey(fixture, backend, args.device, args.dtype, k, args.max_new_tokens)
    directory = Path(args.dir) if args.dir else golden_root()
    path = directory / key.filename
    if not args.force and path.exists():
        raise InputError(f"golden {path} already exists", "a configuration without a golden",
                         "pass --force to re-record it (review the diff before committing)")
    prompts = load_prompts(args.prompts) if args.prompts else load_fixture(fixture).prompts()
    prompts = _select(prompts, args.only)
    reference = _quantized_reference(setup, backend) or HFReference(setup.target_dir, args.device,
                                                                     getattr(torch, args.dtype))
    bar = tqdm(total=len(prompts), desc="record", unit="prompt", file=sys.stderr, delay=0.5,
               disable=args.no_progress or args.json)  # delay: an early error is one line, no bar
    golden = record_golden(setup.program, setup.tokenizer, reference, prompts, key,
                           tolerance_for(args.dtype), resolved_from_args(args).options, on_prompt=lambda _: bar.update(1))
    bar.close()
    written = save_golden(golden, directory, force=args.force)
    if args.json:
        print(json.dumps(golden.to_json(), indent=1))
        return 0
    print(f"wrote {written}")
    rows = [("prompt", "L", "tokens", "rounds", "tau", "stop", "min margin")]
    rows += [(p.prompt_id, str(len(p.prompt_ids)), str(len(p.tokens)), str(p.rounds), f"{p.tau:.2f}",
              p.stop_reason, f"{p.min_margin:.3g}") for p in golden.prompts]
    for line in format_rows(rows, align=("left", "right", "right", "right", "right", "left", "left")):
        print("  " + line)
    print(f"next: `eagle3-check golden baseline {written}` to refresh its metrics baseline entry")
    return 0


def _baseline_path(args: argparse.Namespace):
    from eagle3_check.gating.metrics import default_baseline_path

    return args.baseline or default_baseline_path()


def _progress(args: argparse.Namespace, disable: bool):
    from tqdm import tqdm

    from eagle3_check.gating.golden_check import total_prompts

    return tqdm(total=total_prompts(args.goldens), desc="golden", unit="prompt", file=sys.stderr, delay=0.5,
                disable=args.no_progress or disable)


def verify_main(args: argparse.Namespace) -> int:
    from pathlib import Path

    from eagle3_check.gating.golden_check import gate_goldens
    from eagle3_check.run.plugin import load_runner

    runner = load_runner(args.runner)
    if is_exec(runner):  # a runner binary: cli/exec_cmd.py
        refuse_html(args, "a runner binary (--runner exec:...)")
        return golden_verify_main(args, runner)
    set_threads("cpu", args.threads)  # one thread, as check (two: bench/golden_speed.py, docs/goldens.md)
    runner = time_limited(args, runner)  # --request-timeout: a hang fails its prompt
    baseline = None
    if not args.no_baseline:
        baseline = _baseline_path(args)
        if not args.baseline and not Path(baseline).is_file():
            baseline = None  # no committed baseline yet: tokens only
    bar = _progress(args, args.json)
    outcome = gate_goldens(args.goldens, baseline, runner=runner, on_prompt=lambda _: bar.update(1), pte=args.pte,
                           data_path=args.data_path)
    bar.close()
    if args.html:
        from eagle3_check.report.html_report import golden_html

        write_html(args.html, golden_html(outcome.to_json()))
    if args.json:
        from eagle3_check.cli.common import report_provenance
        from eagle3_check.gating.golden import golden_root

        files = {"baseline": baseline, **({} if args.goldens else {"golden": golden_root()})}
        print(json.dumps({**outcome.to_json(), "provenance": report_provenance(args, extra_files=files)}, indent=1))
    else:
        print(outcome.format())
        if args.html:
            print(f"html: {args.html}")
    return 0 if outcome.passed else 1


def baseline_main(args: argparse.Namespace) -> int:
    from eagle3_check.gating.golden_check import gate_goldens
    from eagle3_check.gating.metrics import compute_metrics, write_baseline

    set_threads("cpu", args.threads)
    bar = _progress(args, False)
    outcome = gate_goldens(args.goldens, None, on_prompt=lambda _: bar.update(1), pte=args.pte,
                           data_path=args.data_path)
    bar.close()
    if outcome.golden_diffs:
        print(outcome.format())
        print("error: the goldens do not verify; a baseline is only written for verified goldens", file=sys.stderr)
        return 1
    for stem, why in outcome.skipped.items():
        print(f"skipped {stem}: {why}")
    entries = {stem: compute_metrics(outcome.runs[stem].values(), key.k) for stem, key in outcome.keys.items()}
    path = write_baseline(_baseline_path(args), entries)
    print(f"wrote {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} to {path}")
    for stem, m in entries.items():
        alpha = " ".join(f"{a:.2f}" for a in m.n_alpha)
        print(f"  {stem}: tau {m.tau:.3f}  target/token {m.target_per_token:.3f}  "
              f"draft/token {m.draft_per_token:.3f}  n-alpha [{alpha}]")
    return 0
