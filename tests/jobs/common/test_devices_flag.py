"""`--devices cuda:0,cuda:1` (issue 51): refused in one line before torch wherever a program on
several devices cannot run, and the first device made the main device."""

from __future__ import annotations

import pytest

from eagle3_check.cli import config_of
from eagle3_check.errors import OptionError

BASE = ["check", "--fixture", "tiny-llama", "--devices", "cuda:0,cuda:1"]


@pytest.mark.parametrize(("extra", "match"), [
    (["--pte", "x.pte"], r"--pte with --devices cuda:0,cuda:1; expected an eager target.*--device cuda:0"),
    (["--aoti", "x.pt2"], r"--aoti with --devices cuda:0,cuda:1; expected an eager target \(an AOTI package"),
    (["--cuda-graph"], r"--cuda-graph with --devices.*captured on one device"),
    (["--compile", "layer"], r"--compile with --devices.*one device"),
    (["--workers", "2"], r"--workers with --devices.*one process"),
    (["--device", "cuda:1"], r"--device cuda:1 with --devices cuda:0,cuda:1; expected one of the two"),
], ids=["pte", "aoti", "cuda-graph", "compile", "workers", "device-differs"])
def test_devices_refuses_what_one_placed_program_cannot_do(extra, match):
    with pytest.raises(OptionError, match=match):
        config_of([*BASE, *extra])


def test_devices_names_the_bad_entry():
    with pytest.raises(OptionError, match=r"--devices cuda:0,gpu1: 'gpu1'; expected two or more distinct CUDA"):
        config_of(["check", "--fixture", "tiny-llama", "--devices", "cuda:0,gpu1"])


def test_devices_makes_the_first_the_main_device(monkeypatch):
    import eagle3_check.preflight as preflight

    monkeypatch.setattr(preflight, "cuda_driver_present", lambda: True)  # the driver check, not a GPU
    cfg, _ = config_of(["check", "--fixture", "tiny-llama", "--devices", "cuda:1, cuda:0"])
    assert (cfg.device, cfg.devices, cfg.cuda_graph) == ("cuda:1", "cuda:1,cuda:0", False)


def test_devices_without_accelerate_says_how_to_install_it(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "accelerate" else real(name, *a))
    with pytest.raises(OptionError, match=r"Accelerate installed.*pip install 'eagle3-check\[multigpu\]'"):
        config_of(BASE)
