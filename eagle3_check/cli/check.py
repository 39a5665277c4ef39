"""`eagle3-check check`: the main job. Prompt set -> runner -> HF reference -> verdicts.

Parse, build the config, call the job (eagle3_check/jobs/check_command.py: it picks the prompt set, the
suites, `--quantize` or `--list` by what was asked and by the runner's capabilities) and print its
outcome with the one printer (`cli.common.emit`): the table, JSON, JUnit or HTML.
"""

from __future__ import annotations

import argparse

from eagle3_check.cli.common import (
    add_compile_args,
    add_drift_args,
    add_html_arg,
    add_program_args,
    add_runner_args,
    add_timeout_arg,
    bars,
    emit,
)
from eagle3_check.cli.shrink_flags import add_replay_args, add_shrink_args

HELP = """Run a prompt set through the reference runner and judge every emitted token of every
request against the target in Transformers (the HF reference) run over the prompt + the runner's
own tokens: identical (the reference's argmax), tie (a near-tie of the reference within the
dtype's tolerance, see eagle3_check/judge/tolerance.py) or fail; then the length and stop rules.
Exit code 0 only if no request fails and the ties are within the tie budget.

examples:
  eagle3-check check                         # the real SmolLM2-135M fixture (smollm2-135m), its 16 prompts
  eagle3-check check --fixture tiny-llama    # the embedded tiny model (seconds)
  eagle3-check check -k 7 --json             # machine-readable report
  eagle3-check check --target T --draft D --tokenizer T/tokenizer.json --prompts my.json
  eagle3-check check --runner my_pkg.runners:make_runner   # judge your own runner
  eagle3-check check --pte tiny.pte --runner exec:./eagle3_speculator_runner   # judge a runner binary
  eagle3-check check --list                  # the edge-case suites and their cases
  eagle3-check check --suite edge            # every edge case (stop, budget, context, ...)
  eagle3-check check --suite context --json  # one suite (or one case: --suite context/room-0)
  eagle3-check check --device cuda --compile layer   # judge bench/gpu_bench.py's compiled fast path
  eagle3-check check --quantize int4-weight  # quantize in process: lossless + drift, as gate judges a .pte
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="runner vs HF reference on a prompt set (the main job)",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", default=None, help='prompt set JSON {"prompts": [{"id", "text"}]} '
                   "(default: the fixture's)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    add_html_arg(p)
    p.add_argument("--junit", default=None, metavar="FILE",
                   help="also write JUnit XML here: one testsuite per K (or per suite report), one testcase per "
                   "prompt (or case) with the verdict's message and time")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--runner", default=None, metavar="MODULE:FACTORY",
                   help="the runner to judge: a no-argument factory returning an object with "
                   "run(program, tokenizer, prompt, options) -> RunResult, or 'reference' / 'device' "
                   "(default: device with --device cuda, reference elsewhere), or exec:PATH: a runner "
                   "binary speaking the seed runner's flags and output (needs --pte)")
    add_timeout_arg(p)
    p.add_argument("--isolate", action="store_true", help="run the reference/device runner in its own process too "
                   "(a plug-in runner always runs in its own process: docs/isolation.md)")
    p.add_argument("--in-process", action="store_true", help="run a plug-in runner in the harness's process "
                   "(faster to start; what it patches or prints can reach the harness)")
    p.add_argument("--suite", default=None, metavar="NAME",
                   help="run an edge-case suite instead of the prompt set ('edge' = all; see --list). "
                   "Cases set their own options and program spec")
    p.add_argument("--list", action="store_true", help="list the suites and their cases, then exit")
    p.add_argument("--shuffle", type=int, default=None, metavar="SEED",
                   help="run the prompt set (or the suites and their cases) in an order shuffled by SEED, "
                   "printed on stderr; the same SEED gives the same order (state leaks between requests)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="spread the prompt set over N processes, each with its own program (with --device cuda "
                   "worker i runs on cuda:i); the report is the serial run's, in prompt order")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="check shard I of N of the prompt set only (round robin: prompts I, I+N, ...; 1-based)")
    p.add_argument("--expect-tau", type=float, default=None, metavar="X",
                   help="flag the draft (exit 1) when tau is far below X (draft health)")
    p.add_argument("--reference", choices=["hf", "self"], default="hf",
                   help="greedy reference: hf (Transformers, the default) or self (the program's own "
                   "prefill/target_verify: the fair one for a quantized .pte; no ties)")
    p.add_argument("--tie-budget", type=float, default=None, metavar="SHARE",
                   help="ties allowed, as a share of all judged positions (default per dtype: "
                   "float32 0, bfloat16 see eagle3_check/judge/tolerance.py TIE_BUDGET, FIXTURE_BUDGET); more "
                   "fails the report")
    p.add_argument("--exact", action="store_true",
                   help="exact mode: the runner and the HF reference on shape-invariant kernels (docs/exact.md), "
                   "so a correct runner's logits equal the reference's bit for bit; the verdict is identity "
                   "(tie tolerance 0, tie budget 0). The prompt set, in process, on an eager program")
    add_program_args(p, aoti=True, default="the real fixture smollm2-135m", why=" for the prompt set (the `real` extra); --suite, "
                     "--quantize and --repro keep the tiny fixtures (cost: docs/real-models.md)")
    add_runner_args(p, max_new_default=64)
    add_compile_args(p)
    add_drift_args(p, quantize=True)
    add_replay_args(p, prompt_text=True)
    add_shrink_args(p)
    p.set_defaults(func=main)


def main(cfg) -> int:
    """Parse's Config -> the job it names (jobs/check_command.py) -> the one printer."""
    from eagle3_check.jobs.check_command import run_check_command

    return emit(cfg, run_check_command(cfg, bars(cfg)))
