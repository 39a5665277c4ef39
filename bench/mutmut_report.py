"""The kill report of `make mutate-harness`: mutmut's results over the judging code, per file, with
every survivor's diff and why it survives (bench/mutmut_survivors.json: mutant name -> an
equivalence argument, or the test that now kills it).

Usage (from the repository root, after `mutmut run`):
    python bench/mutmut_report.py [bench/results/mutmut-harness.md]
Exit code 0 only if every mutant was checked, at least 90 % are killed and every survivor is explained.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from mutmut import __version__ as MUTMUT_VERSION
from mutmut.stats import status_by_exit_code

from eagle3_check.atomic import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
WHY = ROOT / "bench" / "mutmut_survivors.json"
THRESHOLD = 0.90


def load_results() -> dict[str, dict[str, str]]:
    """file -> {mutant name: status} from mutmut's .meta files."""
    out: dict[str, dict[str, str]] = {}
    for meta in sorted((ROOT / "mutants").rglob("*.py.meta")):
        data = json.loads(meta.read_text(encoding="utf-8"))
        rel = str(meta.relative_to(ROOT / "mutants")).removesuffix(".meta")
        out[rel] = {k: ("not checked" if v is None else status_by_exit_code.get(v, f"exit {v}"))
                    for k, v in data["exit_code_by_key"].items()}
    return out


def diff_of(name: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=ROOT, capture_output=True, text=True)
    lines = [x for x in proc.stdout.splitlines()[1:] if x.startswith(("+", "-")) and not x.startswith(("+++", "---"))]
    return "\n".join(lines) or proc.stdout.strip()


def main(path: str) -> int:
    results = load_results()
    why = json.loads(WHY.read_text(encoding="utf-8")) if WHY.is_file() else {}
    total = Counter(s for per in results.values() for s in per.values())
    n = sum(total.values())
    killed, unchecked = total["killed"], total["not checked"]
    checked = n - unchecked
    lines = [f"# mutmut kill report: the judging code (`make mutate-harness`, mutmut {MUTMUT_VERSION})", "",
             f"{killed} of {n} mutants killed ({100 * killed / n:.1f} %); of the {checked} the run reached, "
             f"{killed} killed ({100 * killed / max(checked, 1):.1f} %); "
             + ", ".join(f"{s} {c}" for s, c in sorted(total.items()) if s != "killed"), "",
             "| file | mutants | checked | killed | killed of checked | survived | no tests | not checked |",
             "|---|---|---|---|---|---|---|---|"]
    for f, per in results.items():
        c = Counter(per.values())
        ran = len(per) - c["not checked"]
        share = f"{100 * c['killed'] / ran:.1f} %" if ran else "-"
        lines.append(f"| {f} | {len(per)} | {ran} | {c['killed']} | {share} | {c['survived']} | {c['no tests']} "
                     f"| {c['not checked']} |")
    survivors = [(f, name, s) for f, per in results.items() for name, s in per.items()
                 if s not in ("killed", "not checked")]
    unexplained = [name for _, name, _ in survivors if name not in why]
    lines += ["", f"## Not killed ({len(survivors)}): each with its diff and why", ""]
    for _, name, s in survivors:
        lines += [f"### `{name}` ({s})", "", "```diff", diff_of(name), "```", "",
                  why.get(name, "UNEXPLAINED: add a test that kills it, or say why it is equivalent "
                          "(bench/mutmut_survivors.json)"), ""]
    write_text_atomic(Path(path), "\n".join(lines) + "\n", "mutmut kill report")
    ok = killed / n >= THRESHOLD and not unexplained and not unchecked
    print(f"mutmut: {killed}/{n} killed ({100 * killed / n:.1f} %), {unchecked} not checked, "
          f"{len(unexplained)} survivors unexplained; "
          f"report {path}: {'OK' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "bench" / "results" / "mutmut-harness.md")))
