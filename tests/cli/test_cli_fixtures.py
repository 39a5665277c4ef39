"""`eagle3-check fixtures list / build`: listing with card tau, one-line errors for bad builds."""

from __future__ import annotations

import json

import pytest

from eagle3_check.cli import main
from eagle3_check.fixtures.card import read_card
from eagle3_check.fixtures.registry import list_fixtures, list_variants, load_fixture


def test_fixtures_list_json_shows_each_fixture_with_its_card_tau(capsys):
    assert main(["fixtures", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(list_fixtures()) | set(list_variants()) >= {"tiny-llama", "tiny-gemma4", "tiny-llama-int8"}
    for name, row in rows.items():
        card = read_card(load_fixture(name)) if "variant_of" not in row else None  # its base's card is not its own
        assert row["tau_k4"] == (card["k"]["4"]["tau"] if card else None)
    assert rows["tiny-gemma4"]["family"] == "gemma4"
    assert rows["tiny-llama-int8"]["variant_of"] == "tiny-llama"
    assert not any(r["path"].startswith("/") for r in rows.values())  # inside the checkout: relative


def test_fixtures_list_table(capsys):
    assert main(["fixtures", "list"]) == 0
    out = capsys.readouterr().out
    assert "tiny-llama" in out and "tau(K=4)" in out


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["fixtures", "build", "tiny-lama"], "fixture recipe 'tiny-lama'"),
        (["fixtures", "build", "tiny-llama", "--steps", "0"], "--steps 0"),
        (["fixtures", "build", "tiny-llama", "--device", "tpu"], "--device tpu"),
    ],
    ids=["unknown-recipe", "zero-steps", "bad-device"],
)
def test_fixtures_build_bad_arguments_are_one_line_errors(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and needle in err and "\n" not in err
