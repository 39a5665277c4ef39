"""Where the runner's bf16 logits depart from the HF reference's, split by cause (issue 44, item 1).

For every prompt of a prompt set (chat-framed as `check` frames it), on one target (the 8B shape:
eagle3_check/fixtures/scale_target.py), the logits at the prompt's last W positions (W = 5, a verify
window; the last row predicts the first generated token) from each way of computing them, against
the HF reference's (one eager full forward, what `HFReference.score` runs) and against float32:

  hf_sdpa_full        HF full forward, SDPA attention instead of eager
  hf_window           HF eager, prefill of L-W on a DynamicCache + a W-token window (the HF-vs-HF floor)
  hf_fp32_full        HF eager full forward in float32 (bf16 against fp32)
  adapter_cast        TargetAdapter prefill as `EagerBackend` built it before the fix: the module cast
                      to bf16 with `.to(dtype)`, which also casts RoPE's float32 inv_freq to bf16
  adapter             TargetAdapter prefill, inv_freq float32 (the fix), static cache of max_seq_len slots
  adapter_slots_L     the same, static cache sized to the prompt (L slots)
  adapter_eager       the same over max_seq_len slots with eager attention
  adapter_sdpa_<b>    the same with SDPA forced to one backend (math, efficient, cudnn; an error is recorded)
  adapter_window      TargetAdapter prefill of L-W + a W-token target_verify window (the verify's shape)
  adapter_cast_window the same, cast as before the fix

Per variant and prompt: max |logit difference| over the vocabulary (last row; all W rows), the
top-1/top-2 margin shift (the reference's two tokens, (v[i1] - v[i2]) - (r[i1] - r[i2])), the
reference-top gap of the variant's argmax and how many rows' argmax agree. A KV cache in float32
is not a variant: a bf16 model's k/v leave bf16 projections, so an fp32 cache holds exactly the
same values (HF's SDPA refuses mixed dtypes besides).

`--greedy N` also judges HF's own greedy decoding (one token at a time on a DynamicCache, the
reference's `greedy`) as a runner: N tokens per prompt, each scored by the reference's teacher-forced
forward: identical / tie (within the bf16 tolerance) / fail, and the largest margin shift.

    python bench/scale_numerics.py --target T --prompts fixtures/real-prompts/heldout.json --out OUT.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time

import torch

W = 5


@contextlib.contextmanager
def attention(model, impl: str):
    """The model's attention implementation set to `impl` for the block (HF reads it at every forward)."""
    old = model.config._attn_implementation
    model.config._attn_implementation = impl
    try:
        yield
    finally:
        model.config._attn_implementation = old


@contextlib.contextmanager
def cast_rope(model):
    """RoPE's inv_freq as `module.to(bfloat16)` leaves it (what EagerBackend did before the fix)."""
    rot = model.model.rotary_emb
    keep = rot.inv_freq
    rot.inv_freq = keep.to(torch.bfloat16)
    try:
        yield
    finally:
        rot.inv_freq = keep


def compare(v: torch.Tensor, r: torch.Tensor) -> dict:  # [W, V] variant, [W, V] reference -> numbers
    v, r = v.float(), r.float()
    top = r.topk(2, dim=-1).indices  # [W, 2]
    rm = r.gather(-1, top)  # [W, 2]
    vm = v.gather(-1, top)  # [W, 2]
    shift = ((vm[:, 0] - vm[:, 1]) - (rm[:, 0] - rm[:, 1])).abs()  # [W]
    arg = v.argmax(-1)  # [W]
    gap = rm[:, 0] - r.gather(-1, arg[:, None])[:, 0]  # [W]
    d = (v - r).abs().amax(-1)  # [W]
    return {"max_abs_last": round(float(d[-1]), 4), "max_abs": round(float(d.max()), 4),
            "margin_shift_last": round(float(shift[-1]), 4), "margin_shift": round(float(shift.max()), 4),
            "gap": round(float(gap.max()), 4), "agree": int((arg == top[:, 0]).sum())}


def hf_full(model, ids):  # [1, L] -> [W, V]
    return model(input_ids=ids).logits[0, -W:]


def hf_window(model, ids):  # [1, L] -> [W, V]: prefill L-W on a DynamicCache, then the W-token window
    from transformers import DynamicCache

    from eagle3_check.program.target import cache_kwarg

    kw = {cache_kwarg(model): DynamicCache()}  # `cache` from Transformers 5.2x, else past_key_values
    model(input_ids=ids[:, :-W], use_cache=True, **kw)
    return model(input_ids=ids[:, -W:], use_cache=True, **kw).logits[0]


def adapter_rows(model, ids, slots: int, window: bool):  # [1, L] -> [W, V]
    from eagle3_check.program.target import TargetAdapter

    L = ids.shape[1]
    adapter = TargetAdapter(model, [0], slots).to(ids.device)
    if model.config._attn_implementation == "eager":  # HF's eager attention adds its mask: the bool one as 0/-big
        bool_mask = adapter.attention_mask
        low = torch.finfo(next(model.parameters()).dtype).min
        adapter.attention_mask = lambda p, s=None: torch.zeros((), dtype=torch.float32, device=p.device).masked_fill(
            ~bool_mask(p, s), low).to(next(model.parameters()).dtype)  # s: the window's slots (program/kv_window.py)
    pos = torch.arange(L, device=ids.device)  # [L]
    if not window:
        return adapter(ids, pos)[0][0, -W:]
    adapter(ids[:, :-W], pos[:-W])
    return adapter(ids[:, -W:], pos[-W:])[0][0]


def variants(model, ids, max_seq_len: int) -> dict:
    """name -> [W, V] logits, or an error string (module doc)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out: dict = {}
    L = ids.shape[1]
    with attention(model, "sdpa"):
        out["hf_sdpa_full"] = hf_full(model, ids)
        out["adapter"] = adapter_rows(model, ids, max_seq_len, False)
        out["adapter_slots_L"] = adapter_rows(model, ids, L, False)
        out["adapter_window"] = adapter_rows(model, ids, max_seq_len, True)
        with cast_rope(model):
            out["adapter_cast"] = adapter_rows(model, ids, max_seq_len, False)
            out["adapter_cast_window"] = adapter_rows(model, ids, max_seq_len, True)
        for name, b in (("math", SDPBackend.MATH), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                        ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel([b]):
                    out[f"adapter_sdpa_{name}"] = adapter_rows(model, ids, max_seq_len, False)
            except RuntimeError as e:
                out[f"adapter_sdpa_{name}"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    with attention(model, "eager"):
        out["hf_window"] = hf_window(model, ids)
        out["adapter_eager"] = adapter_rows(model, ids, max_seq_len, False)
    return out


def greedy_judged(model, ids, n: int, tol) -> dict:
    """HF greedy (one token at a time, DynamicCache, eager) judged by the teacher-forced eager forward."""
    from transformers import DynamicCache

    from eagle3_check.program.target import cache_kwarg

    kw, inp, toks = {cache_kwarg(model): DynamicCache()}, ids, []
    for _ in range(n):
        logits = model(input_ids=inp, use_cache=True, **kw).logits[0, -1]  # [V]
        toks.append(int(logits.argmax()))
        inp = torch.tensor([[toks[-1]]], device=ids.device)
    full = torch.cat([ids, torch.tensor([toks], device=ids.device)], 1)  # [1, L + n]
    ref = model(input_ids=full).logits[0, ids.shape[1] - 1:-1].float()  # [n, V]
    given = ref.gather(-1, torch.tensor(toks, device=ids.device)[:, None])[:, 0]  # [n]
    top1 = ref.amax(-1)  # [n]
    rank = (ref > given[:, None]).sum(-1) + 1  # [n]
    gaps = (top1 - given).tolist()
    ident = sum(g == 0 for g in gaps)
    ties = sum(0 < g <= tol.at(t) and r <= tol.top_n for g, t, r in zip(gaps, top1.tolist(), rank.tolist()))
    return {"identical": ident, "tie": ties, "fail": n - ident - ties, "max_gap": round(max(gaps), 4)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--prompts", default="fixtures/real-prompts/heldout.json")
    ap.add_argument("--max-seq-len", type=int, default=1024, help="the program's (target_spec's default)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--greedy", type=int, default=0, help="judge HF greedy as a runner over N tokens")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    from transformers import AutoModelForCausalLM

    from eagle3_check.atomic import write_text_atomic
    from eagle3_check.fixtures.registry import load_prompts
    from eagle3_check.judge.tolerance import tolerance_for
    from eagle3_check.runners.defaults import resolve_options
    from eagle3_check.runners.options import prompt_ids
    from eagle3_check.jobs.common.world import load_tokenizer

    t0 = time.time()
    tok = load_tokenizer(f"{a.target}/tokenizer.json")
    opts = resolve_options(tok, a.target, {}).options
    bf16 = AutoModelForCausalLM.from_pretrained(a.target, dtype=torch.bfloat16, attn_implementation="eager").to(
        a.device).eval()
    fp32 = AutoModelForCausalLM.from_pretrained(a.target, dtype=torch.float32, attn_implementation="eager").to(
        a.device).eval()
    load_s = time.time() - t0
    rows, tol = [], tolerance_for("bfloat16")
    with torch.no_grad():
        for p in load_prompts(a.prompts):
            ids = torch.tensor([prompt_ids(tok, p.text, opts)], device=a.device)  # [1, L]
            ref, ref32 = hf_full(bf16, ids), hf_full(fp32, ids)  # [W, V] each
            vs = variants(bf16, ids, a.max_seq_len)
            vs["hf_fp32_full"] = ref32
            with attention(fp32, "sdpa"):
                vs["adapter_fp32"] = adapter_rows(fp32, ids, a.max_seq_len, False)
            row = {"prompt": p.id, "L": ids.shape[1], "ref_vs_fp32": compare(ref, ref32), "variants": {}}
            for name, v in vs.items():
                row["variants"][name] = v if isinstance(v, str) else {
                    "vs_ref": compare(v, ref), "vs_fp32": compare(v, ref32), "vs_sdpa": compare(v, vs["hf_sdpa_full"])}
            if a.greedy:
                row["hf_greedy"] = greedy_judged(bf16, ids, a.greedy, tol)
            rows.append(row)
            print(p.id, ids.shape[1], {k: (v if isinstance(v, str) else v["vs_ref"]["margin_shift"])
                                       for k, v in row["variants"].items()}, flush=True)
    report = {"target": a.target, "max_seq_len": a.max_seq_len, "window": W, "load_s": round(load_s, 1),
              "torch": torch.__version__, "device": torch.cuda.get_device_name() if a.device.startswith("cuda") else
              "cpu", "prompts": rows, "summary": summary(rows)}
    write_text_atomic(a.out, json.dumps(report, indent=1) + "\n")
    print_summary(report["summary"])


def summary(rows: list) -> dict:
    """Per variant, over prompts: the largest margin shift and max |diff| against the reference."""
    out: dict = {}
    for name in rows[0]["variants"]:
        vals = [r["variants"][name] for r in rows if not isinstance(r["variants"][name], str)]
        if not vals:
            out[name] = rows[0]["variants"][name]
            continue
        out[name] = {k: max(v["vs_ref"][k] for v in vals) for k in ("margin_shift", "max_abs", "gap")}
        out[name]["fp32_margin_shift"] = max(v["vs_fp32"]["margin_shift"] for v in vals)
        out[name]["sdpa_margin_shift"] = max(v["vs_sdpa"]["margin_shift"] for v in vals)
        out[name]["agree"] = f"{sum(v['vs_ref']['agree'] for v in vals)}/{W * len(vals)}"
    if "hf_greedy" in rows[0]:
        g = [r["hf_greedy"] for r in rows]
        out["hf_greedy"] = {k: sum(x[k] for x in g) for k in ("identical", "tie", "fail")}
        out["hf_greedy"]["max_gap"] = max(x["max_gap"] for x in g)
    return out


def print_summary(s: dict) -> None:
    for name, v in s.items():
        print(f"{name:24s} {v}")


if __name__ == "__main__":
    main()
