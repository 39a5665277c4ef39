"""`--aoti` on the CLI without a GPU: refused in one line (value, expected, fix) before torch loads,
unless `--device cpu` asks for a CPU package; and the flags it excludes."""

from __future__ import annotations

import pytest

from eagle3_check import preflight
from eagle3_check.cli import main
from tests.cli.test_bad_input import assert_clean_error


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(preflight, "cuda_driver_present", lambda: False)  # what this machine says, on any machine


@pytest.mark.parametrize("argv", [
    ["export", "--aoti", "-o", "{tmp}/t.pt2"],
    ["check", "--aoti", "{tmp}/t.pt2"],
    ["gate", "--aoti", "{tmp}/t.pt2"],
    ["golden", "verify", "--aoti", "{tmp}/t.pt2"],
], ids=["export", "check", "gate", "golden-verify"])
def test_aoti_without_cuda_is_one_line(no_cuda, capsys, tmp_path, argv):
    (tmp_path / "t.pt2").write_bytes(b"PK")
    rc = main([a.format(tmp=tmp_path) for a in argv])
    line = assert_clean_error(capsys, rc, "on a machine without CUDA")
    assert "a CUDA GPU" in line and "--device cpu" in line


@pytest.mark.parametrize("extra, named", [
    (["--quantize", "int4-weight"], "--quantize with export --aoti"),
    (["--external-data"], "--external-data with export --aoti"),
    (["--backend", "portable"], "--backend portable with export --aoti"),
])
def test_export_aoti_refuses_pte_only_flags(no_cuda, capsys, tmp_path, extra, named):
    rc = main(["export", "--aoti", "--device", "cpu", "-o", str(tmp_path / "t.pt2"), *extra])
    assert_clean_error(capsys, rc, named)


def test_export_aoti_needs_a_pt2_name(no_cuda, capsys, tmp_path):
    rc = main(["export", "--aoti", "--device", "cpu", "-o", str(tmp_path / "t.pte")])
    assert_clean_error(capsys, rc, "with export --aoti")


def test_aoti_with_pte_is_one_program(no_cuda, capsys, tmp_path):
    (tmp_path / "t.pt2").write_bytes(b"PK")
    rc = main(["check", "--aoti", str(tmp_path / "t.pt2"), "--pte", str(tmp_path / "t.pt2"), "--device", "cpu"])
    assert_clean_error(capsys, rc, "with --pte")


def test_aoti_weights_needs_aoti(no_cuda, capsys, tmp_path):
    rc = main(["export", "--aoti-weights", "external", "-o", str(tmp_path / "t.pte")])
    assert_clean_error(capsys, rc, "--aoti-weights external without --aoti")


def test_aoti_weights_external_refuses_a_quantized_program(no_cuda, capsys, tmp_path):
    """A quantized fixture variant's weights are not what the eager program rebuilds at load."""
    rc = main(["export", "--aoti", "--aoti-weights", "external", "--device", "cpu", "--fixture", "tiny-llama-int4",
               "-o", str(tmp_path / "t.pt2"), "--no-progress"])
    assert_clean_error(capsys, rc, "--aoti-weights external with a quantized program")


def test_an_external_weights_package_whose_draft_is_gone_names_it(no_cuda, capsys, tmp_path, monkeypatch):
    """A kernels-only package's sidecar names the draft its weights come from; a moved draft is one line."""
    import json

    from eagle3_check.program import sidecar

    pkg = tmp_path / "t.pt2"
    pkg.write_bytes(b"PK")
    record = {"backend": "aoti", "device": "cpu", "dtype": "float32", "weights": {"mode": "external"},
              "source": {"target": "T", "draft": str(tmp_path / "gone")}, "spec": {}}
    sidecar.sidecar_path(pkg).write_text(json.dumps(record))
    monkeypatch.setattr("eagle3_check.program.aoti_backend.read_aoti_sidecar", lambda path: record)
    from eagle3_check.fixtures.registry import fixtures_root

    target = fixtures_root() / "tiny-llama" / "target"
    (tmp_path / "p.json").write_text(json.dumps({"prompts": [{"id": "a", "text": "hi"}]}))
    rc = main(["check", "--aoti", str(pkg), "--device", "cpu", "--target", str(target), "--tokenizer",
               str(target.parent / "tokenizer.json"), "--prompts", str(tmp_path / "p.json")])
    assert_clean_error(capsys, rc, "draft directory")
