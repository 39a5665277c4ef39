"""bench/draft_card.py on the tiny fixture (CPU): the card of a draft directory as `draft train`
measures it, and the draft-vocabulary coverage, which must follow the draft's d2t map."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "fixtures" / "tiny-llama"


@pytest.fixture
def draft_card(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import draft_card

    yield draft_card
    sys.modules.pop("draft_card", None)


def prompts(tmp_path: Path) -> Path:
    p = tmp_path / "prompts.json"
    p.write_text(json.dumps({"prompts": [{"id": "a", "text": "Count from one to ten."},
                                         {"id": "b", "text": "Name three colours."}]}))
    return p


@pytest.mark.slow
def test_card_and_coverage_of_a_draft_dir(tmp_path, draft_card, monkeypatch, capsys):
    out = tmp_path / "card.json"
    monkeypatch.setattr(sys, "argv", ["draft_card.py", "--target", str(TINY / "target"), "--tokenizer",
                                      str(TINY / "tokenizer.json"), "--draft", str(TINY / "draft"),
                                      "--prompts", str(prompts(tmp_path)), "--ks", "1,3", "--coverage",
                                      "-o", str(out)])
    assert draft_card.main() == 0
    rec = json.loads(out.read_text())
    assert set(rec["k"]) == {"1", "3"} and all(r["passed"] for r in rec["k"].values())
    assert len(rec["k"]["3"]["n_alpha"]) == 3 and 1.0 <= rec["k"]["1"]["tau"] <= 2.0
    cover = rec["vocab_coverage"]
    assert cover["tokens"] > 0 and 0 < cover["share"] <= 1

    # the same draft with its vocabulary moved to the other half of the target's ids
    import torch
    from safetensors.torch import load_file, save_file

    moved = tmp_path / "moved"
    shutil.copytree(TINY / "draft", moved)
    t = load_file(str(moved / "model.safetensors"))
    ids = torch.arange(len(t["d2t"])) + t["d2t"]  # [Vd] target ids of the draft vocabulary
    others = torch.tensor(sorted(set(range(512)) - set(ids.tolist())))[: len(ids)]  # [Vd]
    t["d2t"] = others - torch.arange(len(others))
    save_file(t, str(moved / "model.safetensors"), metadata={"format": "pt"})
    again = draft_card.coverage(str(TINY / "target"), str(moved), str(prompts(tmp_path)), "cpu",
                                str(TINY / "tokenizer.json"))
    assert again["tokens"] == cover["tokens"]
    assert again["in_draft_vocab"] == cover["tokens"] - cover["in_draft_vocab"]


def test_a_missing_draft_is_one_line(tmp_path, draft_card, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["draft_card.py", "--target", str(TINY / "target"), "--draft",
                                      str(tmp_path / "nope"), "-o", str(tmp_path / "c.json")])
    assert draft_card.main() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--draft" in err[0] and "nope" in err[0]
    assert not (tmp_path / "c.json").exists()
