"""Measures quantization drift: the numbers behind the gate's drift thresholds
(`eagle3_check/jobs/check/drift.py`: --min-agreement, --max-tau-drop, --max-far-share, --far-rank).

For each fixture and quantization (and deliberately broken ones: one layer's scales zeroed,
`quantize.zero_scales`) it runs what `eagle3-check gate` runs on a quantized program, through
the same code (`jobs.gate.requests.run_requests` with the HF reference, `runner_tau` on the
full-precision twin, `drift.DriftReport`), on the eager backend (a .pte of the same quantized
module emits the same tokens: tests/pte/test_quantized_pte.py), float32 CPU, one thread.

Fixtures: the embedded tiny ones (gate defaults: the fixture's 14 prompts, 64 new tokens, K 4),
and real models (`--fixtures smollm2-135m` once the fixture is registered, or a prototype
conversion `--real smollm2=DIR` / `--real gemma3=DIR`: a `save_pretrained` directory with
target/ and tokenizer.json; a stale `quantization_config` in its config.json is stripped in a
temporary copy, and the draft is a seeded untrained head, since drift's agreement and ranks
come from the self reference, which has no draft; tau is then ~1 and only measured). Real
models run `--real-prompts` prompts (default 4) x `--real-max-new` tokens (default 32), K 4,
with their own template (SmolLM2: ChatML, no BOS, stop <|im_end|>; Gemma 3 base: raw, BOS 2).

    PYTHONPATH=. python bench/measure_quant_drift.py --fixtures tiny-llama --out bench/results/quant-drift-tiny-llama.json
    PYTHONPATH=. python bench/measure_quant_drift.py --fixtures none --real smollm2=/tmp/real/smollm2 \\
        --out bench/results/quant-drift-smollm2-135m.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import torch

from eagle3_check.atomic import write_text_atomic
from eagle3_check.fixtures.registry import ProgramSpec, load_fixture
from eagle3_check.jobs.check.drift import DriftReport, DriftThresholds
from eagle3_check.jobs.gate.requests import run_requests, runner_tau
from eagle3_check.program.eager import EagerBackend
from eagle3_check.program.quantize import make_spec, zero_scales
from eagle3_check.judge.hf import HFReference
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.runners.options import RunOptions
from eagle3_check.tokenizer import Tokenizer

L = "target.model.model.layers."
# (label, scheme, group size, quantize the draft too, layer whose scales are zeroed or None)
TINY = [
    ("broken: int4 g32 layers.0.mlp.down_proj scales 0", "int4-weight", 32, False, L + "0.mlp.down_proj"),
    ("broken: int4 g32 layers.3.self_attn.o_proj scales 0", "int4-weight", 32, False, L + "3.self_attn.o_proj"),
    ("broken: int8 layers.1.mlp.up_proj scales 0", "int8-weight", None, False, L + "1.mlp.up_proj"),
    ("int8-weight", "int8-weight", None, False, None),
    ("int4-weight g32", "int4-weight", 32, False, None),
    ("int4-weight g16", "int4-weight", 16, False, None),
    ("int4-weight g32 +draft", "int4-weight", 32, True, None),
]
SMOLLM2 = [  # the four broken programs of issue 26, and the two good ones
    ("int8-weight", "int8-weight", None, False, None),
    ("int4-weight g32", "int4-weight", 32, False, None),
    ("broken: int4 g32 layers.0.mlp.down_proj scales 0", "int4-weight", 32, False, L + "0.mlp.down_proj"),
    ("broken: int8 layers.1.mlp.up_proj scales 0", "int8-weight", None, False, L + "1.mlp.up_proj"),
    ("broken: int4 g32 layers.15.self_attn.o_proj scales 0", "int4-weight", 32, False, L + "15.self_attn.o_proj"),
    ("broken: int4 g32 layers.29.mlp.down_proj scales 0", "int4-weight", 32, False, L + "29.mlp.down_proj"),
]
GEMMA3 = [  # 18 layers: the first MLP, a middle attention output, the last MLP (each removes one block's output:
    # Gemma 3's post-norms map zero to zero), then two layers' keys
    ("int8-weight", "int8-weight", None, False, None),
    ("int4-weight g32", "int4-weight", 32, False, None),
    ("broken: int4 g32 layers.0.mlp.down_proj scales 0", "int4-weight", 32, False, L + "0.mlp.down_proj"),
    ("broken: int4 g32 layers.8.self_attn.o_proj scales 0", "int4-weight", 32, False, L + "8.self_attn.o_proj"),
    ("broken: int8 layers.17.mlp.down_proj scales 0", "int8-weight", None, False, L + "17.mlp.down_proj"),
    # zeroed keys (k_norm keeps them zero): uniform attention in that layer, not just a block removed
    ("broken: int4 g32 layers.0.self_attn.k_proj scales 0", "int4-weight", 32, False, L + "0.self_attn.k_proj"),
    ("broken: int4 g32 layers.11.self_attn.k_proj scales 0", "int4-weight", 32, False, L + "11.self_attn.k_proj"),
]
CONFIGS = {"tiny-llama": TINY, "tiny-gemma4": TINY, "tiny-llama-random": TINY, "smollm2": SMOLLM2,
           "smollm2-135m": SMOLLM2, "gemma3": GEMMA3, "gemma3-270m": GEMMA3}
CHATML = dict(chat_prefix="<|im_start|>user\n", chat_suffix="<|im_end|>\n<|im_start|>assistant\n",
              stop_token="<|im_end|>", stop_ids=(2,), bos_id=-1, eos_id=2)
GEMMA3_BASE = dict(raw=True, bos_id=2, eos_id=1, stop_ids=(1,), stop_token=None)
TEMPLATES = {"smollm2": CHATML, "gemma3": GEMMA3_BASE}
REAL_PROMPTS = ["poem-sea", "soup", "sky", "code-add", "baker", "harbour"]  # fixtures/prompts.json ids: long answers
REAL_SPEC = ProgramSpec(256, 1, 128, 4, 2, 8)


def random_draft(target_dir: Path, out: Path, seed: int = 0) -> Path:
    """A seeded untrained one-layer draft for `target_dir` (no embed_tokens: it shares the target's;
    a draft vocab of 4096 ids, d2t identity). Drift's agreement and ranks do not depend on it."""
    from eagle3_check.program.draft import Eagle3DraftHead
    from eagle3_check.program.draft_config import DraftConfig

    cfg = json.loads((target_dir / "config.json").read_text())
    dc = DraftConfig(hidden_size=cfg["hidden_size"], num_attention_heads=cfg["num_attention_heads"],
                     num_key_value_heads=cfg["num_key_value_heads"], intermediate_size=cfg["intermediate_size"],
                     vocab_size=cfg["vocab_size"], draft_vocab_size=4096, aux_layer_ids=None,
                     target_hidden_size=cfg["hidden_size"], rms_norm_eps=cfg.get("rms_norm_eps", 1e-6))
    dc.resolve_aux_layers(cfg["num_hidden_layers"])
    torch.manual_seed(seed)
    head = Eagle3DraftHead(dc, 8)
    for p in head.parameters():
        if p.dim() == 2:
            torch.nn.init.normal_(p, std=0.02)
    head.save(out)
    from safetensors.torch import load_file, save_file

    w = load_file(out / "model.safetensors")
    w.pop("embed_tokens.weight")
    save_file(w, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def real_setup(name: str, root: Path, work: Path):
    """(target dir, draft dir, tokenizer, prompts, options) of a prototype conversion."""
    target = work / name / "target"
    target.mkdir(parents=True)
    cfg = json.loads((root / "target" / "config.json").read_text())
    cfg.pop("quantization_config", None)  # the GGUF conversion's leftover: the weights are plain fp32
    (target / "config.json").write_text(json.dumps(cfg, indent=2))
    for f in (root / "target").iterdir():
        if f.name != "config.json":
            (target / f.name).symlink_to(f.resolve())
    draft = random_draft(target, work / name / "draft")
    fx = load_fixture("tiny-llama")  # only its prompt set (fixtures/prompts.json)
    by_id = {p.id: p for p in fx.prompts()}
    return target, draft, Tokenizer.load(root / "tokenizer.json"), [by_id[i] for i in REAL_PROMPTS], TEMPLATES[name]


def measure(name: str, only: set[str] | None, done, real: Path | None = None, n_prompts: int = 4,
            max_new: int = 32) -> list[dict]:
    work = Path(tempfile.mkdtemp(prefix="quant-drift-"))
    try:
        if real is not None:
            target, draft, tok, prompts, template = real_setup(name, real, work)
            prompts, opts, spec = prompts[:n_prompts], RunOptions(max_new_tokens=max_new, **template), REAL_SPEC

            def build():
                return EagerBackend.from_dirs(target, draft, spec)
        else:
            fx = load_fixture(name)
            target, tok, prompts, opts, spec = fx.target_dir, Tokenizer.load(fx.tokenizer_path), fx.prompts(), \
                RunOptions(max_new_tokens=64), fx.spec

            def build():
                return EagerBackend.from_fixture(fx)
        return _measure(name, only, done, build, target, tok, prompts, opts, [spec.chain_len])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _measure(name, only, done, build, target, tok, prompts, opts, ks) -> list[dict]:
    hf = HFReference(target)
    t0 = time.perf_counter()
    fp_tau = runner_tau(build(), tok, prompts, opts, ks)
    print(f"{name}: full-precision tau {fp_tau:.2f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    rows = []
    for label, scheme, group, draft, broken in CONFIGS[name]:
        if only and label not in only:
            continue
        t0 = time.perf_counter()
        program = build()
        spec = make_spec(scheme, group, draft)
        program.quantize(spec)
        if broken:
            zero_scales(program.module, broken)
        rc = run_requests(program, tok, prompts, opts, ks, tolerance_for("float32"), hf)
        rep = DriftReport(spec.short(), rc.drift, rc.tau, fp_tau, DriftThresholds()).judge()
        lossless = all(c.status == "pass" for c in rc.vs_self)
        row = {"fixture": name, "config": label, "broken_layer": broken, "runner_vs_self_identical": lossless,
               "prompts": len(prompts), "max_new_tokens": opts.max_new_tokens,
               "seconds": round(time.perf_counter() - t0, 1), **rep.to_json()}
        rows.append(row)
        done(row)
        _print(row)
    return rows


def _print(row: dict) -> None:
    print(f"{row['fixture']:14s} {row['config']:54s} agreement {row['agreement']:.3f} far {row['far_share']:.3f} "
          f"mean gap {row['mean_gap']:.3f} ranks {row['rank_histogram']} tau {row['tau']:.2f} fp {row['fp_tau']:.2f} "
          f"lossless {row['runner_vs_self_identical']} -> {row['status']} ({row['seconds']} s)", flush=True)


def rejudge(path: str) -> None:
    """Re-derives every row's statistics and verdict from its recorded per-prompt drift with the
    current code and default thresholds (the measurement itself is the rows' prompts)."""
    from eagle3_check.jobs.check.drift import PromptDrift

    d = json.loads(Path(path).read_text())
    for i, row in enumerate(d["rows"]):
        prompts = [PromptDrift(**{k: v for k, v in p.items() if k != "agreement"}) for p in row["prompts"]]
        rep = DriftReport(row["quantization"], prompts, row["tau"], row["fp_tau"], DriftThresholds(),
                          row["fp_note"]).judge()
        keep = {k: row[k] for k in ("fixture", "config", "broken_layer", "runner_vs_self_identical", "prompts",
                                    "max_new_tokens", "seconds") if k in row}
        d["rows"][i] = {**keep, **rep.to_json(), "prompts": [p.to_json() for p in prompts]}
        _print(d["rows"][i])
    d["summary"] = _summary(d["rows"])
    d["rejudged"] = ("statistics and verdicts re-derived from the recorded per-prompt drift with the defaults of "
                     f"the commit that wrote this file: PYTHONPATH=. python bench/measure_quant_drift.py --rejudge {path}")
    write_text_atomic(path, json.dumps(d, indent=2) + "\n", "measurement")
    print(json.dumps(d["summary"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixtures", default="tiny-llama,tiny-gemma4", help="registered fixtures, or 'none'")
    ap.add_argument("--real", action="append", default=[], metavar="NAME=DIR",
                    help="a prototype conversion (smollm2 or gemma3) in DIR (target/, tokenizer.json)")
    ap.add_argument("--real-prompts", type=int, default=4)
    ap.add_argument("--real-max-new", type=int, default=32)
    ap.add_argument("--only", default=None, help="config labels separated by '|'")
    ap.add_argument("--out", default=None)
    ap.add_argument("--rejudge", default=None, metavar="FILE", help="re-derive FILE's verdicts with the current "
                    "thresholds (no model runs)")
    args = ap.parse_args()
    if args.rejudge:
        return rejudge(args.rejudge)
    torch.set_num_threads(1)
    only = set(args.only.split("|")) if args.only else None
    rows: list[dict] = []

    def done(row: dict) -> None:  # written after every row: a long run interrupted keeps what it measured
        rows.append(row)
        if args.out:
            write_text_atomic(args.out, json.dumps(_report(rows, args), indent=2) + "\n", "measurement")

    for f in [] if args.fixtures == "none" else args.fixtures.split(","):
        measure(f, only, done)
    for spec in args.real:
        name, _, root = spec.partition("=")
        measure(name, only, done, Path(root), args.real_prompts, args.real_max_new)
    print(json.dumps(_report(rows, args)["summary"]))


def _summary(rows: list[dict]) -> dict:
    good = [r for r in rows if not r["broken_layer"]]
    broken = [r for r in rows if r["broken_layer"]]
    return {
        "min_agreement_good": min((r["agreement"] for r in good), default=None),
        "max_agreement_broken": max((r["agreement"] for r in broken), default=None),
        "max_tau_drop_good": max((r["tau_drop"] for r in good), default=None),
        "max_far_share_good": max((r["far_share"] for r in good), default=None),
        "min_far_share_broken": min((r["far_share"] for r in broken), default=None),
        "max_mean_gap_good": max((r["mean_gap"] for r in good), default=None),
        "min_mean_gap_broken": min((r["mean_gap"] for r in broken), default=None),
        "broken_passing": [f"{r['fixture']}: {r['config']}" for r in broken if r["status"] == "pass"],
        "good_failing": [f"{r['fixture']}: {r['config']}" for r in good if r["status"] != "pass"],
    }


def _report(rows: list[dict], args) -> dict:
    summary = _summary(rows)
    only = f" --only '{args.only}'" if args.only else ""
    real = "".join(f" --real {r}" for r in args.real)
    return {"what": "quantization drift (eager fp32 CPU, one thread; tiny fixtures: gate defaults, 64 new tokens, "
                    f"the fixture's K and prompts; real models: {args.real_prompts} prompts x {args.real_max_new} "
                    "tokens, K 4, an untrained draft)",
            "command": f"PYTHONPATH=. python bench/measure_quant_drift.py --fixtures {args.fixtures}{real}"
                       f" --real-prompts {args.real_prompts} --real-max-new {args.real_max_new}{only} --out {args.out}",
            "torch": torch.__version__, "summary": summary, "rows": rows}


if __name__ == "__main__":
    main()
