"""AOTI programs against the eager reference (issue 48): compile time, judged tokens/s, and the verdicts
vs self and vs HF, per model and dtype, printed as docs/cuda.md's table and written as JSON.

For each model (the tiny fixture tiny-llama, the real fixture smollm2-135m, the 8B shape that
`python -m eagle3_check.fixtures.scale_target DIR TOKENIZER_DIR --device cuda` builds: --scale-dir) and
dtype (float32, bfloat16), in one process:
  1. the eager program as `check` builds it (jobs/common/world.eager_program), on --device;
  2. `export --aoti`'s compile of it (program/aoti_export.compile_aoti): seconds, per phase;
  3. tokens/s of the eager reference as `check --device cuda` runs it (the program under CUDA graphs,
     the device runner; on CPU the plain program and the reference runner), then of the AOTI program
     (the reference runner and the device runner): new tokens over the wall time of the prompt set,
     prefill included, after one warm-up request; the eager program freed before the AOTI one loads
     (with --weights external kept instead: the package's models are bound to its tensors);
  4. `check --aoti FILE --json` with `--reference self` (identical at every position, or it is a finding)
     and with the HF reference under the tie rule `check` applies (judge/tie_rule.py: a fixture's built-in
     constants, the calibrated tolerance of a --target model in bf16, judge/calibration*.py).

Reproduce (the H200, docs/cuda.md "AOTI programs"):
  python bench/aoti_cuda.py --out bench/results/h200-aoti.json --scale-dir /tmp/s8b
  python bench/aoti_cuda.py --models scale-8b --scale-dir /tmp/s8b --weights external --out aoti-8b.json
CPU (the tiny fixture only; C++ kernels, minutes of compile):
  python bench/aoti_cuda.py --device cpu --models tiny-llama --dtypes float32 --out /tmp/aoti-cpu.json
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eagle3_check.cli import main as cli_main  # noqa: E402
from eagle3_check.jobs.common.config import Config  # noqa: E402
from eagle3_check.jobs.common.world import eager_program, load_tokenizer, resolved_options  # noqa: E402
from eagle3_check.program.aoti_backend import AotiBackend  # noqa: E402
from eagle3_check.program.aoti_export import compile_aoti  # noqa: E402
from eagle3_check.program.cuda_graph import with_cuda_graphs  # noqa: E402
from eagle3_check.runners.device_loop import DeviceRunner  # noqa: E402
from eagle3_check.runners.loop import ReferenceRunner  # noqa: E402
from eagle3_check.table import format_rows  # noqa: E402

SCALE = "scale-8b"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=f"tiny-llama,smollm2-135m,{SCALE}", help="comma-separated")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--device", default="cuda")
    p.add_argument("--scale-dir", default=None, help=f"the 8B shape (target/, draft/) for {SCALE}")
    p.add_argument("--prompts", default=None, help="prompt set JSON for the 8B shape (default: fixtures/real-prompts/heldout.json)")
    p.add_argument("--max-prompts", type=int, default=8, help="prompts timed and judged per model")
    p.add_argument("--new", type=int, default=64, help="max new tokens per request")
    p.add_argument("--inductor-option", action="append", default=[], metavar="KEY=VALUE",
                   help="more inductor config for the compile (JSON values), e.g. aot_inductor.force_mmap_weights=true")
    p.add_argument("--weights", default="embedded", choices=["embedded", "external"],
                   help="embed the weights in each model, or compile the kernels only and bind them at load to the "
                   "eager program (`export --aoti-weights external`: one copy; what an 8B package needs on a 64 GB disk)")
    p.add_argument("--workdir", default=None, help="where the packages go (default a temp dir)")
    p.add_argument("--out", required=True)
    return p.parse_args(argv)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def program_flags(model: str, args) -> list[str]:
    """The CLI flags naming the model: a fixture, or the 8B shape's --target/--draft and a prompt set."""
    if model != SCALE:
        return ["--fixture", model]
    if not args.scale_dir:
        raise SystemExit(f"--scale-dir is needed for {SCALE} (python -m eagle3_check.fixtures.scale_target DIR TOK)")
    d = Path(args.scale_dir)
    prompts = args.prompts or str(Path(__file__).resolve().parent.parent / "fixtures/real-prompts/heldout.json")
    return ["--target", str(d / "target"), "--draft", str(d / "draft"), "--prompts", prompts]


def config(model: str, dtype: str, args) -> Config:
    flags = dict(zip(*[iter(program_flags(model, args))] * 2))
    values = {k.lstrip("-").replace("-", "_"): v for k, v in flags.items()}
    prompts = values.pop("prompts", None)
    return Config(command="check", device=args.device, dtype=dtype, prompts=prompts, max_new_tokens=args.new,
                  **values)


def prompt_texts(cfg: Config, n: int) -> list[str]:
    from eagle3_check.fixtures.registry import load_fixture, load_prompts

    prompts = load_prompts(cfg.prompts) if cfg.prompts else load_fixture(cfg.fixture).prompts()
    return [p.text for p in prompts[:n]]


def tokens_per_s(program, runner, tokenizer, texts: list[str], options, device: str) -> dict:
    """New tokens over the wall time of `texts` (one warm-up request first), and the tokens themselves."""
    runner.run(program, tokenizer, texts[0], options)
    sync(device)
    t0, runs = time.perf_counter(), []
    for text in texts:
        runs.append(runner.run(program, tokenizer, text, options))
    sync(device)
    wall = time.perf_counter() - t0
    new = sum(len(r.tokens) for r in runs)
    rounds = sum(r.rounds for r in runs)
    return {"tokens_per_s": round(new / wall, 1), "new_tokens": new, "wall_s": round(wall, 2),
            "tau": round(sum(max(len(r.tokens) - 1, 0) for r in runs) / rounds, 3) if rounds else None,
            "tokens": [list(r.tokens) for r in runs]}


def judged(path: Path, model: str, args, reference: str) -> dict:
    """`check --aoti PATH --json` as a user runs it: the verdict, counts, tie rule."""
    argv = ["check", "--aoti", str(path), "--device", args.device, "--json", "--no-progress", "--max-new-tokens",
            str(args.new), "--reference", reference, "--runner", "reference"]
    flags = dict(zip(*[iter(program_flags(model, args))] * 2))
    flags.pop("--draft", None)  # the draft is the package's; --target (the 8B shape) gives the HF reference
    argv += [x for kv in flags.items() for x in kv]
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out):
        rc = cli_main(argv)
    try:
        rep = json.loads(out.getvalue())
    except ValueError:
        return {"rc": rc, "output": out.getvalue()[-400:]}
    info = rep.get("info") or {}
    return {"rc": rc, "passed": rep.get("passed"), "counts": rep.get("counts"), "tau": rep.get("tau"),
            "tie_budget": rep.get("tie_budget"), "tie_tolerance": info.get("tie_tolerance"),
            "tie_source": info.get("tie_source"),
            "seconds": round(time.perf_counter() - t0, 1), "argv": [path.name if a == str(path) else a for a in argv]}


def one(model: str, dtype: str, args, workdir: Path, options_extra: dict) -> dict:
    cfg = config(model, dtype, args)
    row: dict = {"model": model, "dtype": dtype, "device": args.device}
    program, _, tok_path, _ = eager_program(cfg, {})
    tokenizer, options = load_tokenizer(tok_path), resolved_options(cfg).options
    texts = prompt_texts(cfg, args.max_prompts)
    path = workdir / f"{model}-{dtype}.pt2"
    t0 = time.perf_counter()
    source = {"fixture": model} if model != SCALE else {"target": str(cfg.target), "draft": str(cfg.draft)}
    record = compile_aoti(program, path, source=source, options=options_extra, weights=args.weights)
    row["weights"] = args.weights
    row["compile_s"], row["phases"] = round(time.perf_counter() - t0, 1), record["phases"]
    row["package_mb"] = round(path.stat().st_size / 2**20, 1)
    cuda = args.device.startswith("cuda")
    eager = with_cuda_graphs(program, True) if cuda else program
    row["eager"] = tokens_per_s(eager, DeviceRunner() if cuda else ReferenceRunner(), tokenizer, texts, options,
                                args.device)
    row["eager"]["runner"] = "eager, CUDA graphs, device runner" if cuda else "eager, reference runner"
    del eager
    source = program if args.weights == "external" else None  # external: the package reads these tensors
    del program
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    aoti = AotiBackend(path, int(args.device.split(":")[1]) if ":" in args.device else None, weights_source=source)
    row["aoti_reference_runner"] = tokens_per_s(aoti, ReferenceRunner(), tokenizer, texts, options, args.device)
    if cuda:
        row["aoti_device_runner"] = tokens_per_s(aoti, DeviceRunner(), tokenizer, texts, options, args.device)
    row["tokens_equal_eager"] = row["aoti_reference_runner"]["tokens"] == row["eager"]["tokens"]
    del aoti, source
    gc.collect()
    row["vs_self"] = judged(path, model, args, "self")
    row["vs_hf"] = judged(path, model, args, "hf")
    for k in ("eager", "aoti_reference_runner", "aoti_device_runner"):
        row.get(k, {}).pop("tokens", None)
    return row


def table(rows: list[dict]) -> str:
    def verdict(j: dict) -> str:
        c = j.get("counts") or {}
        return (f"{'PASS' if j.get('passed') else 'FAIL'} {c.get('identical', '?')}/{c.get('requests', '?')} id, "
                f"{c.get('tie', '?')} tie" if c else f"rc {j.get('rc')}")

    head = ["model", "dtype", "compile s", "eager tok/s", "AOTI tok/s (ref / device runner)", "AOTI / eager",
            "tokens = eager", "vs self", "vs HF"]
    body = []
    for r in rows:
        if "error" in r:
            body.append([r["model"], r["dtype"], "error: " + r["error"][:60], "", "", "", "", "", ""])
            continue
        a, d, e = r["aoti_reference_runner"], r.get("aoti_device_runner"), r["eager"]
        best = max(a["tokens_per_s"], d["tokens_per_s"] if d else 0)
        body.append([r["model"], r["dtype"], r["compile_s"], e["tokens_per_s"],
                     f"{a['tokens_per_s']} / {d['tokens_per_s'] if d else '-'}", f"{best / e['tokens_per_s']:.2f}",
                     r["tokens_equal_eager"], verdict(r["vs_self"]), verdict(r["vs_hf"])])
    return "\n".join(format_rows([head, *[[str(c) for c in row] for row in body]]))


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    extra = {k: json.loads(v) for k, v in (o.split("=", 1) for o in args.inductor_option)}
    env = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None, "load": os.getloadavg()}
    rows = []
    with tempfile.TemporaryDirectory(prefix="aoti-bench-") as tmp:
        workdir = Path(args.workdir or tmp)
        for model in args.models.split(","):
            for dtype in args.dtypes.split(","):
                print(f"== {model} {dtype}", file=sys.stderr, flush=True)
                try:
                    rows.append(one(model, dtype, args, workdir, extra))
                except Exception as e:  # one model's failure (memory, a compile error) is a row, not the end
                    rows.append({"model": model, "dtype": dtype, "error": f"{type(e).__name__}: {e}"})
                print(json.dumps(rows[-1])[:600], file=sys.stderr, flush=True)
    Path(args.out).write_text(json.dumps({"env": env, "rows": rows}, indent=2) + "\n")
    print(table(rows))
    return 0 if all("error" not in r and r["vs_self"].get("passed") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
