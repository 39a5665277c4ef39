"""The CLI's shared argument groups (program, runner options, compile, drift, timeout, --html),
the progress bars it shows and the offline environment. Nothing here builds or judges: the
library does (eagle3_check/jobs)."""

from __future__ import annotations

import argparse
import functools
import os
import sys

from eagle3_check.cli.parser import Given
from eagle3_check.jobs.common.world import COMPILE_ATTENTIONS, COMPILE_MODES

GRANULARITIES = ("off", "layer", "model")  # program/compiled.py's, plus off


def offline_environment() -> None:
    """The CLI never reaches the network (HF_HUB_OFFLINE=1 unless set). Library noise is silenced
    where it arises (eagle3_check/quiet.py, scoped), never here: no process-wide warning filter,
    so a warning from the user's own code (a plug-in runner) shows as Python shows it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def bars(cfg, disable: bool | None = None):
    """The progress-bar factory the library's jobs call (tqdm's signature, on stderr); off with
    --no-progress or --json."""
    from tqdm import tqdm

    return functools.partial(tqdm, file=sys.stderr, disable=(cfg.no_progress or cfg.json) if disable is None
                             else disable)


def emit(cfg, outcome) -> int:
    """The one printer of every job's Outcome (jobs/common/outcomes.py): --junit, --html, then the JSON
    document (--json) or the table lines on stdout; its exit code."""
    import json

    if getattr(cfg, "junit", None):
        from eagle3_check.report.junit import write_junit

        write_junit(cfg.junit, outcome.junit_suites(), outcome.junit_name, prefix=outcome.junit_prefix)
    if getattr(cfg, "html", None):
        page = outcome.html_page()
        if page is not None:
            from eagle3_check.report.html_page import write_html

            write_html(cfg.html, page)
    print(json.dumps(outcome.to_json(), indent=outcome.json_indent) if cfg.json else "\n".join(outcome.lines()))
    return outcome.exit_code()


def add_html_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--html", default=None, metavar="FILE",
                   help="also write the report as one self-contained HTML page with plots (opens offline)")


def add_program_args(p: argparse.ArgumentParser, default: str = "the embedded tiny-llama fixture", why: str = "",
                     aoti: bool = False) -> None:
    """`default`: the program the command runs without --fixture/--target/--pte (jobs/common/default_program.py);
    `why`: the --fixture help's note on it; `aoti`: the command runs an AOTI package too (--aoti)."""
    g = p.add_argument_group(f"program (default: {default}, eager backend)")
    g.add_argument("--fixture", default=None, help=f"fixture name (see `eagle3-check fixtures list`); default: "
                   f"{default}{why}")
    g.add_argument("--target", default=None, help="HF save_pretrained target directory (with --draft)")
    g.add_argument("--draft", default=None, help="speculators-layout EAGLE-3 draft directory (with --target)")
    g.add_argument("--tokenizer", default=None, help="tokenizer.json (default: the fixture's or the target's)")
    g.add_argument("--device", default="cpu", action=Given,
                   help="cpu or cuda (eager backend; with --aoti: the package's own device, --device cpu for a CPU package)")
    g.add_argument("--devices", default=None, metavar="LIST",
                   help="spread the target's layers over several GPUs, e.g. cuda:0,cuda:1 (Accelerate's device_map; "
                   "the tokens judged are those of one GPU: docs/scale.md)")
    g.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="eager backend dtype")
    g.add_argument("--cuda-graph", action=argparse.BooleanOptionalAction, default=None,
                   help="replay target_verify (and short draft_decode calls) as CUDA graphs "
                   "(default: on with --device cuda; --cuda-graph on CPU is an error)")
    g.add_argument("--max-seq-len", type=int, default=None,
                   help="override the program's max_seq_len (at most the target's max_position_embeddings)")
    g.add_argument("--threads", type=int, default=None, metavar="N",
                   help="CPU torch threads (default 1, or OMP_NUM_THREADS when set: see docs/real-models.md)")
    g.add_argument("--max-memory", type=float, default=None, metavar="GIB",
                   help="memory budget in GiB for the program and the HF reference, checked against an "
                   "estimate before anything is allocated (default: the memory available now)")
    g.add_argument("--min-prefill", type=int, default=None, help="override the min prefill chunk")
    g.add_argument("--max-prefill", type=int, default=None, help="override the max prefill chunk")
    g.add_argument("--pte", default=None, metavar="FILE",
                   help="run an exported .pte instead (pte extra); --fixture or --target gives the HF reference")
    g.add_argument("--data-path", default=None, metavar="FILE.ptd",
                   help="the .pte's external data file (weights exported outside the .pte)")
    if aoti:
        g.add_argument("--aoti", default=None, metavar="FILE.pt2",
                       help="run an AOTInductor package instead (`export --aoti`; on the GPU, or --device cpu for a "
                       "CPU package); --fixture or --target gives the HF reference")


def add_runner_args(p: argparse.ArgumentParser, max_new_default: int = 128) -> None:
    g = p.add_argument_group("runner options (default: the tokenizer's and the model's own files, or the "
                             "Gemma 4 IT defaults for a Gemma 4 tokenizer; docs/run-options.md)")
    g.add_argument("--chat-prefix", default=None, help="text before the prompt (default: the chat template's)")
    g.add_argument("--chat-suffix", default=None, help="text after the prompt (default: the chat template's)")
    g.add_argument("--raw", action="store_true", help="no chat prefix/suffix")
    g.add_argument("--stop-ids", default=None, help="comma-separated stop token ids (default: the model's EOS "
                   "ids after the first)")
    g.add_argument("--stop-token", default=None, help="stop token string, added only if one token (default: "
                   "the chat template's end-of-turn token); '' for none")
    g.add_argument("--bos-id", type=int, default=None, help="BOS id to prepend; -1 to skip (default: none under "
                   "a chat template, else the tokenizer's own)")
    g.add_argument("--eos-id", type=int, default=None, help="EOS id added to the stop set; -1 for none (default: "
                   "generation_config.json's eos_token_id)")
    g.add_argument("--allow-text-stops", action="store_true",
                   help="let --stop-ids / --eos-id name ordinary text tokens (refused by default: docs/run-options.md)")
    g.add_argument("--max-new-tokens", type=int, default=max_new_default, action=Given)
    g.add_argument("-k", "--chain-len", type=int, default=None, action=Given,
                   help="chain length K (default: the program's)")
    g.add_argument("--chunked-prefill", action="store_true",
                   help="prefill a prompt in chunks (DESIGN §2 rule 4): L may exceed the program's max prefill")


def add_compile_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("compiled fast path (eager program; bench/gpu_bench.py's)")
    g.add_argument("--compile", default="off", choices=GRANULARITIES,
                   help="torch.compile the target forward (layer: one graph per decoder layer, model: one "
                   "for the whole forward) and the draft's one-token chain steps, then capture them as "
                   "CUDA graphs with --device cuda; on CPU it needs a C++ compiler (default: off)")
    g.add_argument("--compile-mode", default=None, choices=COMPILE_MODES,
                   help="inductor mode (default: default; needs --compile)")
    g.add_argument("--compile-attention", default=None, choices=COMPILE_ATTENTIONS,
                   help="grouped (no per-head copy of the KV cache, the bench's default) or sdpa (HF's "
                   "repeat_kv + sdpa) (default: grouped; needs --compile)")


def add_drift_args(p: argparse.ArgumentParser, quantize: bool = False) -> None:
    """The drift thresholds (gate, check --quantize); with `quantize`, the in-process quantization too."""
    from eagle3_check.jobs.check.drift import (
        DEFAULT_FAR_RANK,
        DEFAULT_MAX_FAR_SHARE,
        DEFAULT_MAX_MEAN_GAP,
        DEFAULT_MAX_TAU_DROP,
        DEFAULT_MIN_AGREEMENT,
    )

    g = p.add_argument_group("quantization drift (quantized programs; defaults measured: docs/quantization.md)")
    if quantize:
        g.add_argument("--quantize", default=None, choices=["int8-weight", "int4-weight"],
                       help="quantize the program in process (int8-weight or int4-weight) and run the gate's "
                       "quantized checks on it: lossless vs its own greedy decoding, drift from full precision")
        g.add_argument("--group-size", type=int, default=None, metavar="N",
                       help="--quantize: input columns per scale (int4-weight default 32; int8-weight: per channel)")
        g.add_argument("--quantize-draft", action="store_true", help="--quantize the draft's linear layers too")
    g.add_argument("--min-agreement", type=float, default=None, metavar="SHARE",
                   help="least share of the program's greedy tokens that must be the full-precision HF argmax, "
                   f"teacher-forced (default {DEFAULT_MIN_AGREEMENT:g})")
    g.add_argument("--max-tau-drop", type=float, default=None, metavar="TAU",
                   help=f"largest tau drop below the full-precision program's (default {DEFAULT_MAX_TAU_DROP:g})")
    g.add_argument("--far-rank", type=int, default=None, metavar="R",
                   help="a divergence is far when the program's token ranks past R (rank > R) under the full-precision "
                   f"target (default {DEFAULT_FAR_RANK})")
    g.add_argument("--max-far-share", type=float, default=None, metavar="SHARE",
                   help=f"largest share of positions that diverge far (default {DEFAULT_MAX_FAR_SHARE:g})")
    g.add_argument("--max-mean-gap", type=float, default=None, metavar="LOGITS",
                   help="largest mean, over positions, of HF's top-1 logit minus the program's token's "
                   f"(default {DEFAULT_MAX_MEAN_GAP:g})")


def add_timeout_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--request-timeout", "--runner-timeout", dest="runner_timeout", type=float, default=None,
                   metavar="S", help="seconds one request may take (default: 300 for a plug-in or a binary, none "
                   "for the reference/device runner); a request over it fails "
                   "with a timeout and the report is still written. An in-process runner is abandoned (its "
                   "thread stops at its next program call); a runner binary's process group is killed")
    p.add_argument("--runner-profile", default=None, metavar="NAME",
                   help="the runner's rules: runner-pr (#20156), k-runtime (#20345), chunked-prefill "
                   "(#20347, the stack top) or design (DESIGN §2); default: a binary's from its --help, an "
                   "in-process runner's as it declares (ours: design; none declared: the newest). Our "
                   "reference runner runs by the one given (docs/runner-binaries.md)")




def add_exact_arg(p: argparse.ArgumentParser, what: str) -> None:
    """--exact (docs/exact.md) on a command; `what` says what runs on the shape-invariant kernels."""
    p.add_argument("--exact", action="store_true",
                   help=f"exact mode: {what} on shape-invariant kernels (docs/exact.md), so a correct runner's "
                   "logits equal the reference's bit for bit; the verdict is identity (tie tolerance 0, budget 0)")
