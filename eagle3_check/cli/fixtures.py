"""`eagle3-check fixtures`: list the embedded fixtures, or rebuild one (train its draft, measure its card)."""

from __future__ import annotations

import argparse
import json

HELP = """Embedded fixtures: tiny matched target / draft / tokenizer sets under fixtures/.

`build` rebuilds one from its recipe (eagle3_check/fixtures/build.py): tokenizer, random
target from a fixed seed, the target's greedy text on fixtures/train_prompts.json, the
draft head trained on it by distillation (EAGLE-3 training-time test), and the card
(tau and n-alpha for K = 1..7 on the held-out fixtures/prompts.json).

examples:
  eagle3-check fixtures list
  eagle3-check fixtures build tiny-llama                  # rewrites fixtures/tiny-llama
  eagle3-check fixtures build tiny-gemma4 --root /tmp/fx  # writes /tmp/fx/tiny-gemma4
  eagle3-check fixtures build tiny-llama --device cuda --steps 2000
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fixtures", help="list the embedded fixtures or rebuild one (trains its draft)",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    fsub = p.add_subparsers(dest="fixtures_command", metavar="ACTION", required=True)
    ls = fsub.add_parser("list", help="every fixture --fixture takes (quantized variants too), with its card's tau at K = 4")
    ls.add_argument("--json", action="store_true", help="print the list as JSON")
    ls.set_defaults(func=main_list)
    b = fsub.add_parser("build", help="rebuild a fixture: target, distilled draft, card",
                        description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("name", help="recipe name (see `fixtures list`)")
    b.add_argument("--root", default=None, help="fixtures directory to write into (default: the repository's)")
    b.add_argument("--device", default="cpu", help="cpu or cuda: where the draft trains")
    b.add_argument("--steps", type=int, default=None, help="training steps (default: the recipe's)")
    b.add_argument("--batch-size", type=int, default=None, help="sequences per step (default: the recipe's)")
    b.add_argument("--seed", type=int, default=None, help="training seed (default: the recipe's)")
    b.add_argument("--threads", type=int, default=1, help="CPU threads for torch (default 1: tiny models, "
                   "and shared machines slow down badly with more)")
    b.add_argument("--no-card", action="store_true", help="skip measuring card.json")
    b.add_argument("--no-progress", action="store_true", help="no progress bars")
    b.set_defaults(func=main_build)


def main_list(cfg) -> int:
    from eagle3_check.fixtures.card import read_card
    from eagle3_check.fixtures.recipes import RECIPES
    from eagle3_check.fixtures.registry import (
        fixtures_root,
        list_fixtures,
        list_variants,
        load_fixture,
    )
    from eagle3_check.inputs import shown_path
    from eagle3_check.table import format_rows

    rows = []
    for name in list_fixtures():
        fx = load_fixture(name)
        card = read_card(fx) or {}
        k4 = card.get("k", {}).get("4", {})
        family = json.loads((fx.root / "fixture.json").read_text()).get("family", "?")
        rows.append({"name": name, "family": family, "path": shown_path(fx.root), "tau_k4": k4.get("tau"),
                     "recipe": name in RECIPES})
    for name in list_variants():  # every name --fixture takes: a quantized variant of a base fixture too
        meta = json.loads((fixtures_root() / name / "fixture.json").read_text())
        base = next(r for r in rows if r["name"] == meta["base"])
        rows.append({"name": name, "family": f"{base['family']}, {meta['quantize']['scheme']} of {meta['base']}",
                     "path": shown_path(fixtures_root() / name), "tau_k4": None, "recipe": False,
                     "variant_of": meta["base"]})
    if cfg.json:
        print(json.dumps(rows, indent=2))
        return 0
    cells = [(r["name"], r["family"], f"tau(K=4) = {r['tau_k4']:.2f}" if r["tau_k4"] is not None else "no card",
              r["path"]) for r in rows]
    for line in format_rows(cells):
        print(line)
    return 0


def main_build(cfg) -> int:
    from eagle3_check.jobs.fixture_build import build

    out = build(cfg)
    print(f"built {out}")
    card = out / "card.json"
    if card.is_file():
        table = json.loads(card.read_text())["k"]
        for k, row in table.items():
            alpha = " ".join(f"{a:.2f}" for a in row["n_alpha"])
            ok = "identical" if row["passed"] else "MISMATCH"
            print(f"K = {k}   tau = {row['tau']:.2f}   n-alpha = [{alpha}]   {ok}")
    return 0
