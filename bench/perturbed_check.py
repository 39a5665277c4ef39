"""Does the verdict fail a different program? `check` of perturbed programs of a real target (issue 26).

Each program is the eager speculator of the target (a draft of the right shape: the fixture's
when given, else an untrained one; the verdict does not read it) with one perturbation of the
target's weights, run by the reference runner through `run_check` and judged against the HF
reference of the *unperturbed* target in the same dtype, with the default tolerance and the
fixture's budget (`default_budget(dtype, NAME)`):
  none        the correct program (must pass: ties within the budget);
  scale:L     every linear weight of decoder layer L multiplied by 1.01;
  int4-zero:N the target's linears int4-weight (group 32), then layer N's scales zeroed
              (`program/quantize.py`: that layer outputs 0);
  int8        an int8-weight (per channel) copy of the target.
Quantization is computed in float32 and the program then cast to `--dtype` (weight-only: the
dequantized weights, rounded to the dtype, are what the program multiplies by).

    PYTHONPATH=. python bench/perturbed_check.py --real smollm2=/tmp/real/smollm2 --dtype bfloat16
Writes OUT/verdict-perturbed-<device>-<dtype>-<fixture>.json and prints one row per program.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure_tolerance import clean_target, preset  # noqa: E402

DEFAULT_KINDS = ("none", "scale:15", "int4-zero:layers.15.self_attn.o_proj", "int4-zero:layers.0.mlp.down_proj", "int8")


def random_draft(target_dir: Path, out: Path, max_seq_len: int) -> Path:
    """An untrained draft of the target's shape (full draft vocab: no maps), seeded."""
    from eagle3_check.program.draft import Eagle3DraftHead
    from eagle3_check.program.draft_config import DraftConfig
    from eagle3_check.program.target import target_text_config

    t = target_text_config(target_dir)
    n = t.num_hidden_layers
    cfg = DraftConfig(hidden_size=t.hidden_size, num_attention_heads=t.num_attention_heads,
                      num_key_value_heads=t.num_key_value_heads, intermediate_size=t.intermediate_size,
                      vocab_size=t.vocab_size, draft_vocab_size=t.vocab_size, aux_layer_ids=[1, n // 2, n - 3],
                      target_hidden_size=t.hidden_size, head_dim=getattr(t, "head_dim", None))
    torch.manual_seed(0)
    Eagle3DraftHead(cfg, max_seq_len).save(out)
    return out


def perturb(backend, kind: str) -> str:
    """Applies `kind` (module doc) to the eager program's target in place; returns what it did."""
    from eagle3_check.program.quantize import make_spec, quantize_speculator, zero_scales

    name, _, arg = kind.partition(":")
    model = backend.module.target.model
    if name == "none":
        return "the target as it is"
    if name == "scale":
        layer = model.get_decoder().layers[int(arg)]
        with torch.no_grad():
            for m in layer.modules():
                if isinstance(m, torch.nn.Linear):
                    m.weight.mul_(1.01)
        return f"decoder layer {arg}'s linear weights x 1.01"
    if name == "int4-zero":
        quantize_speculator(backend.module, make_spec("int4-weight", 32))
        zero_scales(backend.module, f"target.model.model.{arg}")
        return f"int4-weight g32, {arg} scales zeroed"
    if name == "int8":
        quantize_speculator(backend.module, make_spec("int8-weight"))
        return "int8-weight per channel"
    raise SystemExit(f"perturbation {kind!r}: expected none, scale:L, int4-zero:NAME or int8")


def program(target_dir: Path, draft_dir: Path, spec, dtype: str, kind: str):
    """The eager program of `target_dir`, perturbed by `kind`, computing in `dtype` (CPU)."""
    from eagle3_check.program.eager import DTYPES, EagerBackend

    backend = EagerBackend.from_dirs(target_dir, draft_dir, spec, "cpu", "float32")
    what = perturb(backend, kind)
    backend.module.to(DTYPES[dtype])
    backend._metadata.pop("get_quantization", None)  # presented as the target itself
    return backend, what


def check_perturbed(target_dir: Path, tokenizer: Path, options: dict, prompts, dtype: str, kinds, max_new: int,
                    fixture: str | None = None, draft_dir: Path | None = None, spec=None, reference=None) -> list[dict]:
    """One `run_check` per perturbation; rows of verdict counts, tie margins and the pass/fail."""
    from eagle3_check.fixtures.registry import ProgramSpec
    from eagle3_check.jobs.check.prompt_set import run_check
    from eagle3_check.judge.hf import HFReference
    from eagle3_check.judge.tolerance import default_budget, tolerance_for
    from eagle3_check.runners.options import RunOptions
    from eagle3_check.status import FAIL
    from eagle3_check.tokenizer import Tokenizer

    spec = spec or ProgramSpec(max_seq_len=256, min_prefill=1, max_prefill=128, chain_len=4,
                               min_verify_len=2, max_verify_len=8)
    tok = Tokenizer.load(tokenizer)
    opts = replace(RunOptions(), **options, max_new_tokens=max_new)
    reference = reference or HFReference(target_dir, "cpu", getattr(torch, dtype))
    tol = tolerance_for(dtype)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        draft_dir = draft_dir or random_draft(target_dir, Path(tmp) / "draft", spec.max_seq_len)
        for kind in kinds:
            t0 = time.perf_counter()
            backend, what = program(target_dir, draft_dir, spec, dtype, kind)
            report = run_check(backend, tok, reference, prompts, opts, tol, tie_budget=default_budget(dtype, fixture))
            c = report.counts()
            vs = [o.verdict for o in report.outcomes]
            first = next((v.message for v in vs if v.status == FAIL), None)
            rows.append({"program": kind, "what": what, "positions": c["positions"],
                         "disagreements": disagreements(report, reference),
                         "identical": c["identical_positions"], "ties": c["tie_positions"],
                         "fails": c["fail_positions"], "ties_allowed": report.ties_allowed,
                         "tie_margins": sorted(m for v in vs for m in v.tie_margins),
                         "passed": report.passed, "first_failure": first,
                         "seconds": round(time.perf_counter() - t0, 1)})
    return rows


def disagreements(report, reference) -> list[dict]:
    """Every position whose token is not the reference's argmax: the reference's margin there,
    the token's gap below the top, its rank and the top logit (what the tolerance is judged on)."""
    out = []
    for o in report.outcomes:
        toks = list(o.run.tokens)
        s = reference.score(list(o.run.prompt_ids), toks)
        out += [{"prompt": o.prompt_id, "i": i, "margin": s.top1[i] - s.top2[i], "gap": s.top1[i] - s.given_logit[i],
                 "rank": s.given_rank[i], "top1": s.top1[i]}
                for i, t in enumerate(toks) if i < len(s.given_rank) and t != s.argmax[i]]
    return out


def rejudge(data: dict) -> list[dict]:
    """A written result's rows judged again from their disagreements with today's tolerance and the
    fixture's budget (what the rule decides, without running the programs again)."""
    from eagle3_check.judge.hf import Scores
    from eagle3_check.judge.tolerance import default_budget, tolerance_for
    from eagle3_check.judge.verdict import judge_position
    from eagle3_check.status import TIE

    tol, out = tolerance_for(data["dtype"]), []
    for r in data["rows"]:
        ties = [x for x in r["disagreements"] if judge_position(0, -1, Scores(
            [0], [x["top1"]], [x["top1"] - x["margin"]], [1], [x["top1"] - x["gap"]], [x["rank"]]), tol).status == TIE]
        allowed = int(default_budget(data["dtype"], data["fixture"]) * r["positions"] + 1e-9)
        fails = len(r["disagreements"]) - len(ties)
        out.append({**r, "identical": r["positions"] - len(r["disagreements"]), "ties": len(ties), "fails": fails,
                    "ties_allowed": allowed, "tie_margins": sorted(x["margin"] for x in ties),
                    "passed": fails == 0 and len(ties) <= allowed})
    return out


def format_table(rows: list[dict]) -> str:
    from eagle3_check.table import format_rows

    table = [("program", "positions", "identical", "ties", "allowed", "fails", "max tie margin", "max gap", "verdict")]
    table += [(r["program"], str(r["positions"]), str(r["identical"]), str(r["ties"]), str(r["ties_allowed"]),
               str(r["fails"]), f"{max(r['tie_margins'], default=0):.3g}",
               f"{max((x['gap'] for x in r['disagreements']), default=0):.3g}", "PASS" if r["passed"] else "FAIL")
              for r in rows]
    return "\n".join(format_rows(table, align=("left", *["right"] * 8)))


def main(argv: list[str] | None = None) -> int:
    from eagle3_check.atomic import write_text_atomic
    from eagle3_check.fixtures.registry import Prompt, load_prompts
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", metavar="NAME=DIR", help="DIR/target/ + DIR/tokenizer.json (smollm2*, gemma3*)")
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    ap.add_argument("--kinds", nargs="+", default=list(DEFAULT_KINDS))
    ap.add_argument("--prompts", default=str(Path(__file__).resolve().parents[1] / "fixtures" / "prompts.json"))
    ap.add_argument("--max-prompts", type=int, default=None)
    ap.add_argument("--new", type=int, default=32, help="max new tokens per request")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--rejudge", metavar="JSON", help="run nothing: a written result judged again with today's "
                    "tolerance and budget")
    args = ap.parse_args(argv)
    if args.rejudge:
        print(format_table(rejudge(json.loads(Path(args.rejudge).read_text()))))
        return 0
    torch.set_num_threads(args.threads)
    if not args.real:
        raise SystemExit("--real NAME=DIR is required (or --rejudge JSON)")
    name, _, d = args.real.partition("=")
    if not d or preset(name) is None:
        raise SystemExit(f"--real {args.real}: expected NAME=DIR, NAME starting smollm2 or gemma3")
    prompts = [Prompt(p.id, p.text) for p in load_prompts(args.prompts)][:args.max_prompts]
    with tempfile.TemporaryDirectory() as tmp:
        target = clean_target(Path(d) / "target", Path(tmp))
        rows = check_perturbed(target, Path(d) / "tokenizer.json", preset(name), prompts, args.dtype, args.kinds,
                               args.new, name)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"verdict-perturbed-cpu-{args.dtype}-{name}.json"
    write_text_atomic(path, json.dumps({"fixture": name, "dtype": args.dtype, "new": args.new, "device": "cpu",
                                        "prompts": len(prompts), "torch": torch.__version__, "rows": rows},
                                       indent=1) + "\n", "perturbed check")
    print(format_table(rows))
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
