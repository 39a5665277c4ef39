"""`export --backend xnnpack-bf16`: XNNPACK's opt-in bf16 delegation (program/metadata_check.BACKENDS). A bf16
linear stays on ExecuTorch's portable kernels with the default partitioner and is delegated with this
backend; the backend is refused in one line without --dtype bfloat16; a `.pte`'s calibration is keyed,
and its twin lowered, by the backend the program names (jobs/common/calibrate.pte_kernels). The speed on
SmolLM2: docs/pte.md, "bf16 on XNNPACK"."""

from __future__ import annotations

import pytest
import torch

from eagle3_check.cli import main
from eagle3_check.jobs.common.calibrate import pte_kernels


class _Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(32, 16, bias=False)

    def forward(self, x):  # [1, 4, 32] -> [1, 4, 16]
        return self.proj(x)


@pytest.mark.pte
@pytest.mark.parametrize("backend, delegated", [("xnnpack", 0), ("xnnpack-bf16", 1)])
def test_a_bf16_linear_is_delegated_only_by_xnnpack_bf16(backend, delegated):
    pytest.importorskip("executorch.exir", reason="executorch not installed: pip install -e .[pte]")
    from eagle3_check.program.lowering import _summarise, lower_edge

    model = _Linear().to(torch.bfloat16).eval()
    ep = torch.export.export(model, (torch.randn(1, 4, 32, dtype=torch.bfloat16),))
    edge, _ = lower_edge({"forward": ep}, {}, backend)
    calls, portable = _summarise(edge, ["forward"])
    assert calls["forward"] == delegated, (calls, portable)
    assert any("mm" in op or "linear" in op for op in portable["forward"]) == (delegated == 0), portable


def test_xnnpack_bf16_without_bfloat16_is_one_line(capsys, tmp_path):
    rc = main(["export", "--backend", "xnnpack-bf16", "-o", str(tmp_path / "t.pte")])
    err = capsys.readouterr().err
    assert rc == 2 and "--backend xnnpack-bf16 with --dtype float32" in err and "--dtype bfloat16" in err, err
    assert "Traceback" not in err and not (tmp_path / "t.pte").exists()


class _Program:
    def __init__(self, md):
        self._md = md

    def metadata(self):
        return dict(self._md)


@pytest.mark.parametrize("md, kernels", [
    ({"get_export_backend": "xnnpack-bf16"}, "xnnpack-bf16"),
    ({"get_export_backend": "portable"}, "portable"),
    ({"get_export_backend": "xnnpack"}, "xnnpack"),
    ({}, "xnnpack"),  # a program that does not say: the export default
], ids=["xnnpack-bf16", "portable", "xnnpack", "unsaid"])
def test_a_pte_is_calibrated_on_its_own_kernels(md, kernels):
    assert pte_kernels(_Program(md)) == kernels
