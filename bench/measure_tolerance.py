"""How far a correct runner's target logits sit from the HF reference's, in logits (issues 11, 26, 27).

On each fixture (the embedded tiny ones, `--fixture NAME`, and real models, `--real NAME=DIR` with
DIR/target/ and DIR/tokenizer.json), each prompt (ids as `check` derives them: the fixture's
template, or the real model's own: ChatML for smollm2*, raw after BOS for gemma3*), in each
`--dtype` on `--device`, for up to `--new` greedy tokens (one-row decode greedy, ended by the
model's stop set as `check` ends a run, so all sources score the sequence a correct runner emits):
  decode  the speculator's target (TargetAdapter: static cache, the eager backend's target),
          one row at a time: prefill(prompt), then target(t_i, [L + i]) for each token;
  verify  the same target in K+1-row windows [t_j .. t_j+K] at L+j .. L+j+K (every window fully
          accepted, as the runner's target_verify sees them; K = the fixture's chain_len, else 4);
  hf      the HF model (eager attention) once over prompt + tokens in the same dtype: the
          verdict's teacher-forced reference (`HFReference.score`);
  hf32    (bf16 only) the same HF model in float32: what bf16 rounding alone moves.
Row i of each is the logit vector predicting generated token i. `--kernels xnnpack|portable`
runs decode and verify on the target's calibration twin instead (program/calibration_export.py:
the target lowered as a speculator export is, logits out; exported once into --twin-dir) and
writes OUT/tolerance-cpu-<dtype>-<fixture>-<kernels>.json.

Per position and pair (a, b), b the reference side, in logits: `shift`, how far the top-1/top-2
margin moves (|(a[i1] - a[i2]) - (b[i1] - b[i2])| on b's two top tokens: a different argmax
needs a margin below it); `top`, max |a - b| over b's top-8 tokens; and where the argmaxes
differ (a flip) b's margin there, the rank of a's token in b's row and its gap below b's top.
Each row also records the scales a tolerance could be relative to (|top-1|, the row's RMS).
The summary gives max / p99 / p50 per pair, the same shifts divided by each scale, and how many
reference rows have a margin within candidate absolute tolerances (the tie-eligible share).

    PYTHONPATH=. python bench/measure_tolerance.py --device cpu --real smollm2=/tmp/real/smollm2
    PYTHONPATH=. python bench/measure_tolerance.py --device cuda --real smollm2=DIR --out DIR2
Writes OUT/tolerance-<device>-<dtype>-<fixture>.json atomically (per-position records and the
summary), prints one table, and the paths last. docs/calibration.md derives the constants.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

PAIRS = (("verify", "decode"), ("verify", "hf"), ("decode", "hf"), ("hf", "hf32"), ("verify", "hf32"))
CANDIDATES = (0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0)  # absolute tolerances (logits)
TOPK = 8  # `top` compares the reference's leading TOPK logits
CHATML = dict(chat_prefix="<|im_start|>user\n", chat_suffix="<|im_end|>\n<|im_start|>assistant\n",
              stop_ids=(2,), stop_token=None, bos_id=-1, eos_id=2)
PRESETS = {"smollm2": CHATML, "gemma3": dict(raw=True, stop_ids=(1,), stop_token=None, bos_id=2, eos_id=1)}


@dataclass
class Source:
    name: str
    target_dir: Path
    tokenizer: Path
    prompts: list  # [(id, text)]
    options: dict  # RunOptions fields
    chain_len: int
    max_seq_len: int


def preset(name: str) -> dict | None:
    return next((v for k, v in PRESETS.items() if name.startswith(k)), None)


def clean_target(d: Path, tmp: Path) -> Path:
    """`d` itself, or (a prototype conversion with a stale `quantization_config`) a copy of its
    config without it beside links to its other files."""
    cfg = json.loads((d / "config.json").read_text())
    if "quantization_config" not in cfg:
        return d
    out = tmp / d.parent.name
    out.mkdir(parents=True)
    for f in d.iterdir():
        if f.name != "config.json":
            (out / f.name).symlink_to(f.resolve())
    cfg.pop("quantization_config")
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    return out


def sources(args, tmp: Path) -> list[Source]:
    from eagle3_check.fixtures.registry import list_fixtures, load_fixture, load_prompts

    names = args.fixture if args.fixture is not None else ([] if args.no_tiny else list_fixtures())
    out = []
    for name in names:
        fx = load_fixture(name)
        if args.fixture is None and getattr(fx, "source", None) is not None:
            continue  # a real-model fixture converts on first use: only when named
        out.append(Source(name, fx.target_dir, fx.tokenizer_path, [(p.id, p.text) for p in fx.prompts()],
                          preset(name) or {}, fx.spec.chain_len, fx.spec.max_seq_len))
    default_prompts = Path(__file__).resolve().parents[1] / "fixtures" / "prompts.json"
    prompts = [(p.id, p.text) for p in load_prompts(args.prompts or default_prompts)][:args.max_prompts]
    for spec in args.real:
        name, _, d = spec.partition("=")
        if not d or preset(name) is None:
            sys.exit(f"--real {spec}: expected NAME=DIR with NAME starting {' or '.join(PRESETS)} (its prompt "
                     "template); pass e.g. --real smollm2=/tmp/real/smollm2")
        root = Path(d)
        out.append(Source(name, clean_target(root / "target", tmp / name), root / "tokenizer.json", prompts,
                          preset(name), 4, args.max_seq_len))
    return out


def stop_ids_of(tok, opts) -> set[int]:
    ids = set(opts.stop_ids) | ({opts.eos_id} if opts.eos_id is not None else set())
    if opts.stop_token:
        enc = tok.encode(opts.stop_token)
        ids |= set(enc) if len(enc) == 1 else set()
    return ids


@torch.no_grad()
def measure(src: Source, device: str, dtype: str, n_new: int, kernels: str = "eager",
            twin_dir: Path | None = None) -> list[dict]:
    """Per prompt: the four sources' rows (float32, on the CPU), one per generated token. With
    `kernels` xnnpack or portable, decode and verify run the target's calibration twin lowered
    to those kernels (program/calibration_export.py; exported once into `twin_dir`)."""
    from transformers import AutoModelForCausalLM

    from eagle3_check.program.eager import DTYPES
    from eagle3_check.program.target import TargetAdapter, load_hf_target
    from eagle3_check.quiet import third_party_quiet
    from eagle3_check.runners.options import RunOptions, prompt_ids
    from eagle3_check.tokenizer import Tokenizer

    dev = torch.device(device)
    target = TargetAdapter(load_hf_target(src.target_dir, DTYPES[dtype]), [0], src.max_seq_len).to(dev).eval()
    if kernels != "eager":
        from eagle3_check.program.calibration_export import cached_twin

        target = cached_twin(target, twin_dir / f"target-logits-{src.name}-{dtype}-{kernels}.pte", kernels)

    def hf_model(dt):
        with third_party_quiet():  # the "Loading weights" bar
            model = AutoModelForCausalLM.from_pretrained(src.target_dir, dtype=dt, attn_implementation="eager")
        return model.to(dev).eval()

    refs = {"hf": hf_model(DTYPES[dtype])}
    if dtype != "float32":
        refs["hf32"] = hf_model(torch.float32)
    tok = Tokenizer.load(src.tokenizer)
    opts = replace(RunOptions(), **src.options)
    stops = stop_ids_of(tok, opts)
    k = src.chain_len
    out = []
    for pid, text in src.prompts:
        ids = prompt_ids(tok, text, opts)
        L = len(ids)
        budget = min(n_new, src.max_seq_len - L - (k + 1))
        if budget < 1:
            continue
        logits, _ = target(torch.tensor([ids], device=dev), torch.arange(L, device=dev))  # [1, L, V]
        decode, gen = [logits[0, -1].float().cpu()], []
        while True:
            gen.append(int(decode[-1].argmax()))
            if len(gen) == budget or gen[-1] in stops:
                break
            pos = torch.tensor([L + len(gen) - 1], device=dev)
            lg, _ = target(torch.tensor([[gen[-1]]], device=dev), pos)  # [1, 1, V]
            decode.append(lg[0, -1].float().cpu())
        n = len(gen)
        logits, _ = target(torch.tensor([ids], device=dev), torch.arange(L, device=dev))
        verify = [logits[0, -1].float().cpu()]  # row 0 comes from prefill, as in the runner
        j = 0
        while len(verify) < n:
            window = gen[j:j + k + 1]
            window += [window[-1]] * (k + 1 - len(window))  # padding rows past the end are unused
            lg, _ = target(torch.tensor([window], device=dev), torch.arange(L + j, L + j + k + 1, device=dev))  # [1, K+1, V]
            verify += [lg[0, r].float().cpu() for r in range(k + 1)]
            j += k + 1
        rows = {"decode": decode, "verify": verify[:n]}
        seq = torch.tensor([ids + gen[:-1]], device=dev)  # [1, L + n - 1]
        for name, model in refs.items():
            full = model(input_ids=seq).logits[0].float().cpu()  # [L + n - 1, V]
            rows[name] = [full[L - 1 + i] for i in range(n)]
        out.append({"prompt": pid, "prompt_len": L, "tokens": gen, "records": records(rows)})
    return out


def r4(xs: list[float]) -> list[float]:
    """4 significant digits: the records stay small, the distributions unchanged at that precision."""
    return [float(f"{x:.4g}") for x in xs]


def records(rows: dict[str, list[torch.Tensor]]) -> dict:
    """Per position: the reference row's scales and margin; per pair, shift / top diff / flip."""
    hf = torch.stack(rows["hf"])  # [n, V]
    top2 = torch.topk(hf, 2, dim=-1)
    rec = {"hf_top1": r4(top2.values[:, 0].tolist()), "hf_margin": r4((top2.values[:, 0] - top2.values[:, 1]).tolist()),
           "hf_rms": r4(hf.pow(2).mean(-1).sqrt().tolist())}
    for a, b in PAIRS:
        if b not in rows:
            continue
        A, B = torch.stack(rows[a]), torch.stack(rows[b])  # [n, V] each
        bt = torch.topk(B, TOPK, dim=-1)
        i1, i2 = bt.indices[:, :1], bt.indices[:, 1:2]  # [n, 1]
        ma = (A.gather(1, i1) - A.gather(1, i2))[:, 0]
        mb = (bt.values[:, 0] - bt.values[:, 1])
        got = A.argmax(-1)  # [n]
        got_b = B.gather(1, got[:, None])[:, 0]
        flips = (got != bt.indices[:, 0]).nonzero()[:, 0].tolist()
        rec[f"{a}-{b}"] = {
            "shift": r4((ma - mb).abs().tolist()),
            "top": r4((A.gather(1, bt.indices) - bt.values).abs().amax(-1).tolist()),
            "flips": [{"i": i, "margin": float(mb[i]), "gap": float(bt.values[i, 0] - got_b[i]),
                       "rank": int((B[i] > got_b[i]).sum()) + 1, "b_top1": float(bt.values[i, 0])} for i in flips],
        }
    return rec


def q(xs: list[float], f: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(f * len(s)))] if s else 0.0


def stats(xs: list[float]) -> dict:
    return {"max": max(xs, default=0.0), "p99": q(xs, 0.99), "p50": q(xs, 0.5)}


def summarize(prompts: list[dict]) -> dict:
    recs = [p["records"] for p in prompts]
    cat = {key: sum((r[key] for r in recs), []) for key in ("hf_top1", "hf_margin", "hf_rms")}
    n = len(cat["hf_margin"])
    pairs = {}
    for a, b in PAIRS:
        key = f"{a}-{b}"
        if key not in recs[0]:
            continue
        shift = sum((r[key]["shift"] for r in recs), [])
        flips = sum((r[key]["flips"] for r in recs), [])
        pairs[key] = {
            "shift": stats(shift), "top": stats(sum((r[key]["top"] for r in recs), [])),
            "shift_per_top1": stats([s / max(abs(t), 1e-6) for s, t in zip(shift, cat["hf_top1"])]),
            "shift_per_rms": stats([s / max(m, 1e-6) for s, m in zip(shift, cat["hf_rms"])]),
            "flips": len(flips), "flip_share": len(flips) / max(n, 1),
            "flip_margin_max": max((f["margin"] for f in flips), default=0.0),
            "flip_gap_max": max((f["gap"] for f in flips), default=0.0),
            "flip_rank_max": max((f["rank"] for f in flips), default=0),
        }
    return {"rows": n, "top1": stats([abs(t) for t in cat["hf_top1"]]), "rms": stats(cat["hf_rms"]),
            "margin_within": {str(c): sum(m <= c for m in cat["hf_margin"]) for c in CANDIDATES}, "pairs": pairs}


def format_table(results: list[dict]) -> str:
    from eagle3_check.table import format_rows

    rows = [("fixture", "dtype", "rows", "pair", "shift max", "p99", "top max", "shift/|top1|", "flips",
             "flip margin", "gap", "rank")]
    for r in results:
        s = r["summary"]
        rows += [(r["fixture"], r["dtype"], str(s["rows"]), pair, f"{d['shift']['max']:.3g}",
                  f"{d['shift']['p99']:.3g}", f"{d['top']['max']:.3g}", f"{d['shift_per_top1']['max']:.3g}",
                  str(d["flips"]), f"{d['flip_margin_max']:.3g}", f"{d['flip_gap_max']:.3g}",
                  str(d["flip_rank_max"])) for pair, d in s["pairs"].items()]
    lines = format_rows(rows, align=("left", "left", "right", "left", *["right"] * 8))
    for r in results:
        within = "  ".join(f"<={c}: {m}" for c, m in r["summary"]["margin_within"].items())
        lines.append(f"{r['fixture']} {r['dtype']}: |top1| max {r['summary']['top1']['max']:.2f}; "
                     f"reference rows with top-1/top-2 margin within: {within}")
    return "\n".join(lines)


RUNNER_PAIRS = ("verify-hf", "decode-hf", "verify-decode")  # a correct runner against the verdict's reference


def derive(results: list[dict], safety: float, ulps: tuple[float, ...] = (0, 1, 2, 3, 4)) -> str:
    """Per dtype, over every result given: for each ulp part U, the absolute part A such that
    A + U x ulp(top) >= safety x every margin shift of a correct runner's pair; the largest rank
    and flip share (verify or decode against the reference)."""
    from eagle3_check.judge.tolerance import tolerance_for, ulp

    lines = []
    for dtype in sorted({r["dtype"] for r in results}):
        rs = [r for r in results if r["dtype"] == dtype]
        rows = [(s, t) for r in rs for p in r["prompts"] for pair in RUNNER_PAIRS
                for s, t in zip(p["records"][pair]["shift"], p["records"]["hf_top1"])]
        fits = "; ".join(f"U {u:g}: A >= {max(safety * s - u * ulp(dtype, t) for s, t in rows):.3g}" for u in ulps)
        tol = tolerance_for(dtype)
        ratio = min((tol.at(t) / s for s, t in rows if s > 0), default=float("inf"))
        flips = [f for r in rs for p in r["prompts"] for pair in ("verify-hf", "decode-hf")
                 for f in p["records"][pair]["flips"]]
        share = max((r["summary"]["pairs"][pair]["flip_share"], f"{r['fixture']} {r['device']} {pair}")
                    for r in rs for pair in ("verify-hf", "decode-hf"))
        lines += [f"{dtype}: {len(rows)} runner rows ({len(rs)} results); safety {safety:g}: {fits}",
                  f"{dtype}: today's tolerance ({tol.describe()}) / shift >= {ratio:.2f} on every row; flips against "
                  f"the reference: {len(flips)}, margin <= {max((f['margin'] for f in flips), default=0):.3g}, gap <= "
                  f"{max((f['gap'] for f in flips), default=0):.3g}, rank <= {max((f['rank'] for f in flips), default=0)}; "
                  f"largest flip share {share[0]:.2%} ({share[1]})"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="H200: PYTHONPATH=.:.gpudeps python bench/measure_tolerance.py --device cuda "
                                        "--real smollm2=/tmp/real/smollm2 --out $OUT (docs/calibration.md)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    ap.add_argument("--fixture", nargs="*", help="embedded or registered fixtures (default: every embedded one)")
    ap.add_argument("--no-tiny", action="store_true", help="no embedded fixture unless --fixture names it")
    ap.add_argument("--real", action="append", default=[], metavar="NAME=DIR",
                    help="a real model: DIR/target/ + DIR/tokenizer.json; NAME picks its template (smollm2*, gemma3*)")
    ap.add_argument("--prompts", help="prompt set for --real (default fixtures/prompts.json)")
    ap.add_argument("--max-prompts", type=int, default=None, help="the first N prompts of the set for --real")
    ap.add_argument("--new", type=int, default=48, help="generated tokens scored per prompt (at most)")
    ap.add_argument("--max-seq-len", type=int, default=1024, help="static cache length for --real")
    ap.add_argument("--kernels", default="eager", choices=["eager", "xnnpack", "portable"],
                    help="decode/verify on the eager target, or on its calibration twin lowered to ExecuTorch's "
                         "XNNPACK or portable kernels (CPU only; exported once into --twin-dir)")
    ap.add_argument("--twin-dir", default=".cache/calibration", help="where --kernels keeps its exported twins")
    ap.add_argument("--threads", type=int, default=0, help="torch threads on CPU (0: torch's default)")
    ap.add_argument("--out", default="bench/results", help="folder for tolerance-<device>-<dtype>-<fixture>.json")
    ap.add_argument("--derive", nargs="+", metavar="JSON", help="measure nothing: the table and the derivation "
                    "(docs/calibration.md) over these result files")
    ap.add_argument("--safety", type=float, default=2.0, help="with --derive: the stated margin over the shifts")
    args = ap.parse_args(argv)
    if args.derive:
        results = [json.loads(Path(p).read_text()) for p in args.derive]
        print(format_table(results))
        print(derive(results, args.safety))
        return 0
    if args.kernels != "eager" and args.device != "cpu":
        sys.exit(f"--kernels {args.kernels} with --device {args.device}: ExecuTorch's kernels run on the CPU; "
                 "pass --device cpu")
    if args.threads:
        torch.set_num_threads(args.threads)
    from eagle3_check.atomic import write_text_atomic

    results, paths = [], []
    Path(args.out).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for src in sources(args, Path(tmp)):
            for dtype in args.dtype:
                torch.manual_seed(0)
                t0 = time.perf_counter()
                prompts = measure(src, args.device, dtype, args.new, args.kernels, Path(args.twin_dir))
                r = {"fixture": src.name, "device": args.device, "dtype": dtype, "new": args.new, "kernels": args.kernels,
                     "chain_len": src.chain_len, "seconds": round(time.perf_counter() - t0, 1),
                     "torch": torch.__version__, "transformers": __import__("transformers").__version__,
                     "python": platform.python_version(),
                     "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
                     "summary": summarize(prompts), "prompts": prompts}
                kern = "" if args.kernels == "eager" else f"-{args.kernels}"
                path = Path(args.out) / f"tolerance-{args.device.split(':')[0]}-{dtype}-{src.name}{kern}.json"
                write_text_atomic(path, json.dumps(r) + "\n", "tolerance measurement")
                print(f"{src.name} {dtype}: {r['summary']['rows']} rows, {r['seconds']} s", flush=True)
                results.append(r)
                paths.append(path)
    print(f"{args.device}: logits; shift = top-1/top-2 margin moved; top = max |diff| over the reference's top-{TOPK}")
    print(format_table(results))
    print("\n".join(map(str, paths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
