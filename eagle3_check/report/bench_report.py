"""The HTML page of a benchmark JSON (bench/gpu_bench.py's output, e.g. bench/results/h200.json):
tokens/s and ms/round per method as plots, the per-round time split (draft, verify, host),
tau and n-alpha per K of the speculative methods, the ratios, and the run's setup.

Every method must carry numeric `tokens_per_s` and `ms_per_round`; a file without them is a
one-line error naming the method and the key (never a method silently left out of a plot).
"""

from __future__ import annotations

from pathlib import Path

from eagle3_check.errors import InputError
from eagle3_check.report import plots
from eagle3_check.report.html_page import esc, info_list, num, page, section, table
from eagle3_check.report.html_page import plots as plot_row

NEEDED = ("tokens_per_s", "ms_per_round")
SPLIT = ("draft_ms_per_round", "verify_ms_per_round", "host_ms_per_round")
SETUP = ("gpu", "torch", "cuda", "transformers", "date", "command", "prompt_len", "new_tokens", "repeats",
         "tokens_per_s_definition")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_bench(bench, source: str | Path = "bench JSON") -> dict[str, dict]:
    """The `results` of a bench JSON, each method checked to have the numbers the plots need."""
    results = bench.get("results") if isinstance(bench, dict) else None
    if not isinstance(results, dict) or not results:
        raise InputError(f"{source}: no 'results' object of methods", 'a bench JSON like bench/results/h200.json '
                         '({"results": {"method": {"tokens_per_s": ..., "ms_per_round": ...}}})',
                         "pass the JSON that bench/gpu_bench.py --out wrote")
    for method, r in results.items():
        missing = [k for k in NEEDED if not (isinstance(r, dict) and _is_number(r.get(k)))]
        if missing:
            got = r.get(missing[0]) if isinstance(r, dict) else r
            raise InputError(f"{source}: method {method!r} has {missing[0]} = {got!r}", "a number",
                             "pass a complete bench JSON (re-run bench/gpu_bench.py)")
    return results


def bench_html(bench: dict, source: str | Path = "bench JSON", title: str = "eagle3-check benchmark") -> str:
    results = check_bench(bench, source)
    methods = list(results)
    setup = {k: bench.get(k) for k in SETUP}
    for part in ("target", "draft"):
        if isinstance(bench.get(part), dict):
            setup[part] = ", ".join(f"{k} {v}" for k, v in bench[part].items() if k not in ("note", "weights"))
    rows = [(m, num(r.get("k")), num(r["tokens_per_s"], "{:.1f}"), num(r.get("wall_ms"), "{:.1f}"),
             num(r.get("rounds")), num(r["ms_per_round"], "{:.3f}"), *[num(r.get(s), "{:.3f}") for s in SPLIT],
             num(r.get("tau")), num(r.get("peak_gib"), "{:.2f}"), num(r.get("identical_to_hf_eager")))
            for m, r in results.items()]
    header = ("method", "K", "tokens/s", "wall ms", "rounds", "ms/round", "draft ms/round", "verify ms/round",
              "host ms/round", "tau", "peak GiB", "identical to hf-eager")
    svgs = [plots.bars("tokens/s per method", "tokens / s", methods,
                       {"tokens/s": [results[m]["tokens_per_s"] for m in methods]}, annotate="{:.0f}"),
            plots.bars("ms per round per method", "ms / round", methods,
                       {"ms/round": [results[m]["ms_per_round"] for m in methods]})]
    split = [m for m in methods if all(_is_number(results[m].get(s)) for s in SPLIT)]
    if split:
        svgs.append(plots.bars("time per round: draft, verify, host", "ms / round", split,
                               {s.split("_")[0]: [results[m][s] for m in split] for s in SPLIT}))
    spec = [m for m in methods if _is_number(results[m].get("k")) and isinstance(results[m].get("n_alpha"), list)]
    if spec:
        svgs.append(plots.lines("n-alpha per speculative method", "proposal j", "n-alpha",
                                {m: (list(range(len(results[m]["n_alpha"]))), results[m]["n_alpha"]) for m in spec},
                                (0, 1.05)))
    parts = [info_list(setup), section("Methods", table(header, rows, numeric=tuple(range(1, 11)),
                                                        table_id="methods"), plot_row(*svgs), section_id="methods")]
    ratios = bench.get("ratios")
    if isinstance(ratios, dict) and ratios:
        parts.append(section("Ratios", table(("ratio", "value"), [(k, num(v, "{:.3f}")) for k, v in ratios.items()],
                                             numeric=(1,), table_id="ratios")))
    if bench.get("note"):
        parts.append(section("Note", f"<p>{esc(bench['note'])}</p>"))
    return page(f"{title}: {bench.get('gpu', source)}", *parts)
