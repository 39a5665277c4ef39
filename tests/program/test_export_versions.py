"""An export's sidecar records the installed executorch version (issue 52: it wrote "?", since
executorch 1.5.1 has no `__version__`). The export's heavy steps are stood in for: what is
checked is the sidecar `export_speculator` writes beside the .pte."""

from __future__ import annotations

import json
from importlib import metadata

import pytest
import torch

from eagle3_check.fixtures.registry import ProgramSpec
from eagle3_check.program import export
from eagle3_check.program.sidecar import sidecar_path


def test_export_versions_names_the_installed_distribution():
    try:
        want = metadata.version("executorch")
    except metadata.PackageNotFoundError:
        pytest.skip("executorch is not installed (the pte extra)")
    assert export.export_versions() == {"torch": torch.__version__, "executorch": want}


def test_the_sidecar_records_it(tmp_path, monkeypatch):
    monkeypatch.setattr(export, "export_versions", lambda: {"torch": "t", "executorch": "1.5.1-stand-in"})
    monkeypatch.setattr(export, "feature_width", lambda module: 4)
    monkeypatch.setattr(export, "export_methods", lambda *a, **k: {})
    monkeypatch.setattr(export, "constant_methods", lambda *a, **k: {})

    def lower(programs, constants, backend, out, phases, external_data, stock_lowering):
        out.write_bytes(b"\0\0\0\0ET12")
        return {}, [], {}

    monkeypatch.setattr(export, "lower_to_pte", lower)
    out = tmp_path / "m.pte"
    export.export_speculator(torch.nn.Linear(2, 2), ProgramSpec(64, 1, 32, 4, 2, 8), {}, out)
    assert json.loads(sidecar_path(out).read_text())["versions"] == {"torch": "t", "executorch": "1.5.1-stand-in"}
