"""How far the runner's target logits move with the batch shape, in ulps of the dtype (issue 11).

On every embedded fixture and prompt (prompt ids as `check` derives them), for `--new` greedy
tokens (one-row decode greedy, so all three sources score the same sequence):
  decode  the speculator's target (TargetAdapter: static cache, the eager backend's target),
          one row at a time: prefill(prompt), then target(t_i, [L + i]) for each token;
  verify  the same target in K+1-row windows [t_j .. t_j+K] at L+j .. L+j+K (every window
          fully accepted, as the runner's target_verify sees them; K = the fixture's chain_len);
  hf      the HF model (eager attention) once over prompt + tokens: the verdict's teacher-forced
          reference (`HFReference.score`).
Row i of each is the logit vector predicting generated token i (rows 0..new-1).

Per row and pair, in units of ulp(dtype, |HF top-1 logit|) (`eagle3_check.reference.tolerance.ulp`):
  shift  how far the top-1/top-2 margin moves between the two sources, measured on the HF row's
         two top tokens: |(a[i1] - a[i2]) - (b[i1] - b[i2])|. A difference in argmax between
         two sources needs a margin below this shift: the tie tolerance must cover it;
  vocab  max |a - b| over the whole vocab (large negative logits have coarser ulps: context).
It also counts, per pair, rows whose argmax differs, and, for the verdict's tie budget, how many
HF rows have a top-1/top-2 margin within m ulps for the candidate multiples.

    PYTHONPATH=. python bench/measure_tolerance.py --device cpu --dtype float32
    PYTHONPATH=. python bench/measure_tolerance.py --device cuda --dtype bfloat16 --out DIR
Writes DIR/tolerance-<device>-<dtype>.json atomically and prints its path last.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

import torch

from eagle3_check.fixtures.registry import list_fixtures, load_fixture
from eagle3_check.program.eager import DTYPES, EagerBackend
from eagle3_check.reference.tolerance import ulp
from eagle3_check.run.options import RunOptions, prompt_ids
from eagle3_check.tokenizer import Tokenizer

PAIRS = (("verify", "decode"), ("verify", "hf"), ("decode", "hf"))
CANDIDATES = (1, 2, 4, 8, 16, 32, 64)


@torch.no_grad()
def rows_for(fx, device: str, dtype: str, n_new: int) -> list[dict]:
    from transformers import AutoModelForCausalLM

    backend = EagerBackend.from_fixture(fx, device, dtype)
    target = backend.module.target
    k = backend.spec.chain_len
    hf = AutoModelForCausalLM.from_pretrained(fx.target_dir, dtype=DTYPES[dtype],
                                              attn_implementation="eager").to(device).eval()
    tok = Tokenizer.load(fx.tokenizer_path)
    dev = torch.device(device)
    out = []
    for p in fx.prompts():
        ids = prompt_ids(tok, p.text, RunOptions())
        L = len(ids)
        n = min(n_new, backend.spec.max_seq_len - L - (k + 1))
        logits, _ = target(torch.tensor([ids], device=dev), torch.arange(L, device=dev))  # [1, L, V]
        decode = [logits[0, -1].float()]
        seq = list(ids)
        for i in range(n - 1):
            seq.append(int(decode[-1].argmax()))
            lg, _ = target(torch.tensor([[seq[-1]]], device=dev), torch.tensor([L + i], device=dev))  # [1, 1, V]
            decode.append(lg[0, -1].float())
        seq.append(int(decode[-1].argmax()))
        gen = seq[L:]  # n tokens
        logits, _ = target(torch.tensor([ids], device=dev), torch.arange(L, device=dev))
        verify = [logits[0, -1].float()]  # row 0 comes from prefill, as in the runner
        j = 0
        while len(verify) < n:
            window = gen[j:j + k + 1]
            window += [window[-1]] * (k + 1 - len(window))  # padding rows past the end are unused
            lg, _ = target(torch.tensor([window], device=dev), torch.arange(L + j, L + j + k + 1, device=dev))  # [1, K+1, V]
            verify += [lg[0, r].float() for r in range(k + 1)]
            j += k + 1
        verify = verify[:n]
        full = hf(input_ids=torch.tensor([seq[:-1]], device=dev)).logits[0].float()  # [L + n - 1, V]
        hfrows = [full[L - 1 + i] for i in range(n)]
        out.append({"prompt": p.id, "rows": {"decode": decode, "verify": verify, "hf": hfrows}})
    return out


def summarize(fixture: str, prompts: list[dict], dtype: str) -> dict:
    dist = {f"{a}-{b}": [] for a, b in PAIRS}
    shift = {f"{a}-{b}": [] for a, b in PAIRS}
    flips = {f"{a}-{b}": 0 for a, b in PAIRS}
    # where a's argmax is not b's: the rank of a's token in b's row (1 = top) and its gap below b's top
    flip_rank = {f"{a}-{b}": [] for a, b in PAIRS}
    flip_gap = {f"{a}-{b}": [] for a, b in PAIRS}
    margins = []
    n = 0
    for p in prompts:
        r = p["rows"]
        for i in range(len(r["hf"])):
            n += 1
            top2 = torch.topk(r["hf"][i], 2)
            u = ulp(dtype, float(top2.values[0].abs()))
            margins.append(float(top2.values[0] - top2.values[1]) / u)
            i1, i2 = top2.indices.tolist()
            for a, b in PAIRS:
                dist[f"{a}-{b}"].append(float((r[a][i] - r[b][i]).abs().max()) / u)
                ma, mb = r[a][i][i1] - r[a][i][i2], r[b][i][i1] - r[b][i][i2]
                shift[f"{a}-{b}"].append(float((ma - mb).abs()) / u)
                got, top_b = int(r[a][i].argmax()), int(r[b][i].argmax())
                if got != top_b:
                    flips[f"{a}-{b}"] += 1
                    flip_rank[f"{a}-{b}"].append(int((r[b][i] > r[b][i][got]).sum()) + 1)
                    flip_gap[f"{a}-{b}"].append(float(r[b][i][top_b] - r[b][i][got]) / u)
    top = max(float(torch.topk(row, 1).values.abs()) for p in prompts for row in p["rows"]["hf"])

    def q(xs, f):
        s = sorted(xs)
        return s[min(len(s) - 1, int(f * len(s)))]

    return {
        "fixture": fixture, "rows": n, "max_abs_top_logit": top,
        "shift_ulps": {k: {"max": max(v), "p99": q(v, 0.99), "p50": q(v, 0.5)} for k, v in shift.items()},
        "vocab_ulps": {k: {"max": max(v), "p99": q(v, 0.99), "p50": q(v, 0.5)} for k, v in dist.items()},
        "argmax_flips": flips,
        "flip_rank_max": {k: max(v, default=0) for k, v in flip_rank.items()},
        "flip_gap_ulps_max": {k: max(v, default=0.0) for k, v in flip_gap.items()},
        "hf_margin_within": {str(m): sum(x <= m for x in margins) for m in CANDIDATES},
        "hf_margin_ulps_min": min(margins),
    }


def write_atomic(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    ap.add_argument("--new", type=int, default=32, help="generated tokens scored per prompt")
    ap.add_argument("--out", default="bench/results", help="folder for tolerance-<device>-<dtype>.json")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    results = [summarize(name, rows_for(load_fixture(name), args.device, args.dtype, args.new), args.dtype)
               for name in list_fixtures()]
    data = {"device": args.device, "dtype": args.dtype, "new": args.new, "torch": torch.__version__,
            "python": platform.python_version(),
            "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
            "fixtures": results}
    path = Path(args.out) / f"tolerance-{args.device.split(':')[0]}-{args.dtype}.json"
    write_atomic(path, data)
    print(f"{args.device} {args.dtype}: ulps at the HF row's top logit; shift = top-1/top-2 margin moved")
    print(format_results(results))
    print(path)
    return 0


def format_results(results: list[dict]) -> str:
    """One row per fixture and pair (ulps at the HF row's top logit), then each fixture's HF margins."""
    from eagle3_check.table import format_rows

    rows = [("fixture", "rows", "pair", "shift max", "p99", "p50", "vocab max", "flips", "rank max", "gap max")]
    for r in results:
        rows += [(r["fixture"], str(r["rows"]), pair, f"{d['max']:.2f}", f"{d['p99']:.2f}", f"{d['p50']:.2f}",
                  f"{r['vocab_ulps'][pair]['max']:.2f}", str(r["argmax_flips"][pair]), str(r["flip_rank_max"][pair]),
                  f"{r['flip_gap_ulps_max'][pair]:.2f}") for pair, d in r["shift_ulps"].items()]
    lines = format_rows(rows, align=("left", "right", "left", *["right"] * 7))
    for r in results:
        within = "  ".join(f"<={m}: {c}" for m, c in r["hf_margin_within"].items())
        lines.append(f"{r['fixture']}: HF rows with top-1/top-2 margin within m ulps: {within}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
