"""Measures quantization drift on the embedded fixtures: the numbers behind the gate's
--min-agreement and --max-tau-drop defaults (`eagle3_check/gating/drift.py`).

For each fixture and quantization (and a few deliberately broken ones: one layer's scales
zeroed) it runs what `eagle3-check gate` runs on a quantized program, through the same code
(`gate_requests.run_requests` with the HF reference, `runner_tau` on the full-precision twin,
`drift.DriftReport`), on the eager backend (a .pte of the same quantized module emits the same
tokens: tests/pte/test_quantized_pte.py). Gate defaults: the fixture's prompt set, 64 new
tokens, K = the fixture's chain length, float32 CPU.

    PYTHONPATH=. python bench/measure_quant_drift.py --out bench/results/quant-drift.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from eagle3_check.atomic import write_text_atomic
from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.gating.drift import DriftReport, DriftThresholds
from eagle3_check.gating.gate_requests import run_requests, runner_tau
from eagle3_check.program.eager import EagerBackend
from eagle3_check.program.quantize import make_spec, zero_scales
from eagle3_check.reference.hf import HFReference
from eagle3_check.reference.tolerance import tolerance_for
from eagle3_check.run.options import RunOptions
from eagle3_check.tokenizer import Tokenizer

# (label, scheme, group size, quantize the draft too, layer whose scales are zeroed or None)
CONFIGS = [
    ("broken: int4 g32 layers.0.mlp.down_proj scales 0", "int4-weight", 32, False,
     "target.model.model.layers.0.mlp.down_proj"),
    ("broken: int4 g32 layers.3.self_attn.o_proj scales 0", "int4-weight", 32, False,
     "target.model.model.layers.3.self_attn.o_proj"),
    ("broken: int8 layers.1.mlp.up_proj scales 0", "int8-weight", None, False,
     "target.model.model.layers.1.mlp.up_proj"),
    ("int8-weight", "int8-weight", None, False, None),
    ("int4-weight g32", "int4-weight", 32, False, None),
    ("int4-weight g16", "int4-weight", 16, False, None),
    ("int4-weight g32 +draft", "int4-weight", 32, True, None),
]


def measure(fixture: str, only: set[str] | None, done=lambda row: None) -> list[dict]:
    fx = load_fixture(fixture)
    tok = Tokenizer.load(fx.tokenizer_path)
    prompts = fx.prompts()
    opts = RunOptions(max_new_tokens=64)
    ks = [fx.spec.chain_len]
    hf = HFReference(fx.target_dir)
    fp = EagerBackend.from_fixture(fx)
    fp_tau = runner_tau(fp, tok, prompts, opts, ks)
    rows = []
    for label, scheme, group, draft, broken in CONFIGS:
        if only and label not in only:
            continue
        t0 = time.perf_counter()
        program = EagerBackend.from_fixture(fx)
        spec = make_spec(scheme, group, draft)
        program.quantize(spec)
        if broken:
            zero_scales(program.module, broken)
        rc = run_requests(program, tok, prompts, opts, ks, tolerance_for("float32"), hf)
        rep = DriftReport(spec.short(), rc.drift, rc.tau, fp_tau, DriftThresholds()).judge()
        lossless = all(c.status == "pass" for c in rc.vs_self)
        row = {"fixture": fixture, "config": label, "broken_layer": broken, "runner_vs_self_identical": lossless,
               "seconds": round(time.perf_counter() - t0, 1), **rep.to_json()}
        rows.append(row)
        done(row)
        print(f"{fixture:18s} {label:52s} agreement {rep.agreement:.3f} tau {rep.tau:.2f} fp {fp_tau:.2f} "
              f"drop {rep.tau_drop:+.2f} lossless {lossless} -> {rep.status}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixtures", default="tiny-llama,tiny-gemma4,tiny-llama-random")
    ap.add_argument("--only", default=None, help="config labels separated by '|'")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    only = set(args.only.split("|")) if args.only else None
    rows: list[dict] = []

    def done(row: dict) -> None:  # written after every row: a long run interrupted keeps what it measured
        rows.append(row)
        if args.out:
            write_text_atomic(args.out, json.dumps(_report(rows, args), indent=2) + "\n", "measurement")

    for f in args.fixtures.split(","):
        measure(f, only, done)
    print(json.dumps(_report(rows, args)["summary"]))


def _report(rows: list[dict], args) -> dict:
    good = [r for r in rows if not r["broken_layer"]]
    summary = {
        "min_agreement_good": min(r["agreement"] for r in good) if good else None,
        "max_tau_drop_good": max(r["tau_drop"] for r in good) if good else None,
        "max_agreement_broken": max((r["agreement"] for r in rows if r["broken_layer"]), default=None),
    }
    only = f" --only '{args.only}'" if args.only else ""
    return {"what": "quantization drift on the embedded fixtures (eager fp32 CPU, gate defaults: 64 new tokens, "
                    "the fixture's K and prompts)",
            "command": f"PYTHONPATH=. python bench/measure_quant_drift.py --fixtures {args.fixtures}{only} --out {args.out}",
            "torch": torch.__version__, "summary": summary, "rows": rows}


if __name__ == "__main__":
    main()
