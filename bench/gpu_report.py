"""The GPU bench's ratios and its printed table (bench/gpu_bench.py writes the JSON they read)."""

from __future__ import annotations


def ratios(res: dict) -> dict:
    r = res["results"]
    floor = (res.get("floor") or {}).get("floor_ms")

    def tps(name):
        v = r.get(name, {})
        return v.get("tokens_per_s")

    out = {}
    spec = {n: v for n, v in r.items() if n.startswith("spec-K") and "tokens_per_s" in v}
    for base in ("hf-compiled", "self-graph-compiled", "self-graph", "hf-eager"):
        if tps(base):
            for n in spec:
                out[f"{n} / {base}"] = tps(n) / tps(base)
    if tps("self-graph-compiled") and tps("hf-compiled"):
        out["self-graph-compiled / hf-compiled"] = tps("self-graph-compiled") / tps("hf-compiled")
    for n, v in spec.items():
        out[f"{n} host % of round"] = v.get("host_pct_of_round")
        if floor and v.get("verify_ms_per_round"):
            out[f"{n} verify ms / floor ms"] = v["verify_ms_per_round"] / floor
    replay = (res.get("floor") or {}).get("verify_replay_ms") or {}
    for forward, by_t in replay.items():
        for t, ms in by_t.items():
            if floor and ms:
                out[f"verify T={t} ({forward}) replay ms / floor ms"] = ms / floor
    for t, ms in ((res.get("floor") or {}).get("matmul_only_ms") or {}).items():
        if floor and ms:
            out[f"matmuls only T={t} ms / floor ms"] = ms / floor
    return out


def _f(v, fmt):
    return format(v, fmt) if isinstance(v, (int, float)) else "-"


def print_table(res: dict) -> None:
    print(f"\n{res['gpu']}  torch {res['torch']}  transformers {res['transformers']}  {res['date']}")
    d = res.get("draft", {})
    print(f"target {res['target']['params'] / 1e9:.2f}B params bf16 ({'real: ' + res['target']['dir'] if res['target'].get('dir') else 'random'}), draft {d.get('params', 0) / 1e6:.0f}M "
          f"({d.get('mode')}); prompt {res['prompt_len']}, new {res['new_tokens']}")
    floor = (res.get("floor") or {}).get("floor_ms")
    if floor:
        f = res["floor"]
        print(f"floor: {f['weight_bytes'] / 1e9:.2f} GB / {f['copy_bandwidth_tb_s']:.2f} TB/s = {floor:.3f} ms")
    head = (f"{'method':24} {'tok/s':>8} {'tau':>5} {'ms/round':>9} {'verify':>7} {'draft':>7} {'host':>7} "
            f"{'host%':>6} {'v/floor':>7} {'peak GiB':>8}")
    print(head)
    for name, v in res["results"].items():
        if "error" in v:
            print(f"{name:24} error: {v['error'][:100]}")
            continue
        vf = v.get("verify_ms_per_round") / floor if floor and v.get("verify_ms_per_round") else None
        print(f"{name:24} {v['tokens_per_s']:8.1f} {_f(v.get('tau'), '5.2f')} {v['ms_per_round']:9.3f} "
              f"{_f(v.get('verify_ms_per_round'), '7.3f')} {_f(v.get('draft_ms_per_round'), '7.3f')} "
              f"{_f(v.get('host_ms_per_round'), '7.3f')} {_f(v.get('host_pct_of_round'), '6.1f')} "
              f"{_f(vf, '7.2f')} {_f(v['peak_gib'], '8.2f')}")
        if v.get("n_alpha"):
            print(f"{'':24} n-alpha {' '.join(f'{a:.2f}' for a in v['n_alpha'])}")
    for k, c in (res.get("card") or {}).get("k", {}).items():
        print(f"card K={k}: tau {c['tau']:.2f} n-alpha {' '.join(f'{a:.2f}' for a in c['n_alpha'])} "
              f"identical {c['identical_to_greedy']}")
    if "bench_text_bigram_coverage" in d:
        print(f"bench text bigram coverage by the training text: {d['bench_text_bigram_coverage']:.3f}")
    for k, v in res.get("ratios", {}).items():
        print(f"{k:52} {_f(v, '.2f')}")
