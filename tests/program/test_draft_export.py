"""`draft export`: refusals, the round-trip proof that can fail, nothing published on failure, the CLI.

Every layout's export is checked against speculators' own outputs in test_speculators_ref.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3_check.cli import main
from eagle3_check.errors import InputError
from eagle3_check.program import draft_config
from eagle3_check.program.draft_export import export_draft

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "fixtures" / "tiny-llama" / "draft"
ORIGINAL = ROOT / "fixtures" / "speculators" / "eagle3-original" / "draft"
SPECFORGE = ROOT / "fixtures" / "speculators" / "specforge" / "draft"
NO_EMBED = ROOT / "fixtures" / "speculators" / "no-embedding" / "draft"


@pytest.mark.parametrize(("source", "kwargs", "needle"), [
    pytest.param(SPECFORGE, {}, "no verifier", id="specforge-without-verifier"),
    pytest.param(NO_EMBED, {"verifier": "acme/t"}, "no embed_tokens", id="shared-embedding-without-target"),
])
def test_refusals(source, kwargs, needle, tmp_path):
    with pytest.raises(InputError, match=needle):
        export_draft(source, tmp_path / "out", **kwargs)
    assert not (tmp_path / "out").exists() and not list(tmp_path.iterdir())


def test_output_must_be_new_or_empty(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("keep me")
    with pytest.raises(InputError, match="not an empty directory"):
        export_draft(TINY, tmp_path / "out")
    assert (tmp_path / "out" / "old.txt").read_text() == "keep me"
    with pytest.raises(InputError, match="is the source draft"):
        export_draft(TINY, TINY)
    with pytest.raises(InputError, match="does not exist"):
        export_draft(TINY, tmp_path / "missing" / "out")


def test_a_writer_that_changes_the_math_is_caught_and_nothing_published(tmp_path, monkeypatch):
    """The round-trip proof has teeth: a config writer that drops the draft's rope theta
    (written 500000 -> read back 10000) fails the probe, and -o never appears."""
    src = tmp_path / "src"
    cfg = json.loads((TINY / "config.json").read_text())
    cfg["transformer_layer_config"]["rope_parameters"]["rope_theta"] = 500000.0
    src.mkdir()
    (src / "config.json").write_text(json.dumps(cfg))
    (src / "model.safetensors").write_bytes((TINY / "model.safetensors").read_bytes())
    real = draft_config.DraftConfig.to_json

    def lossy(self):
        out = real(self)
        out["transformer_layer_config"]["rope_parameters"]["rope_theta"] = 10000.0
        return out

    monkeypatch.setattr(draft_config.DraftConfig, "to_json", lossy)
    with pytest.raises(InputError, match="probe forward differs"):
        export_draft(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["src"]  # no temp directory left behind


def test_cli_export_json(tmp_path, capsys):
    assert main(["draft", "export", str(ORIGINAL), "-o", str(tmp_path / "out"), "--verifier", "acme/t",
                 "--json"]) == 2  # shared embedding: needs --target
    assert "no embed_tokens" in capsys.readouterr().err
    assert main(["draft", "export", str(TINY), "-o", str(tmp_path / "out2"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["max_abs_diff"] == 0.0 and summary["verifier"] == "fixtures/tiny-llama/target"
    assert summary["tensors"] > 0 and (tmp_path / "out2" / "model.safetensors").is_file()
