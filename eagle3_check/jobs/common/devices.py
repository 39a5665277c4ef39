"""`--devices cuda:0,cuda:1` checked before torch (issue 51; the placement itself: program/placement.py)."""

from __future__ import annotations

from eagle3_check.errors import OptionError


def checked_devices(cfg):
    """`--devices cuda:0,cuda:1`: checked without torch; the config's `device` becomes the first (the
    main device: inputs, logits, the draft and the HF reference's inputs), CUDA graphs off by default.
    Refused where a program on several devices cannot run: a .pte, graphs, --compile, --workers."""
    if not (cfg.has("devices") and cfg.devices):
        return cfg
    import importlib.util

    from eagle3_check.program.placement import parse_devices

    devices = parse_devices(cfg.devices)
    if "device" in cfg.given and cfg.device != devices[0]:
        raise OptionError(f"--device {cfg.device} with --devices {cfg.devices}", "one of the two",
                          "drop --device: the first of --devices is the main device")
    for flag, on, why in (
        ("--pte", cfg.pte, "an eager target (a .pte runs whole, on the CPU)"),
        ("--aoti", cfg.aoti, "an eager target (an AOTI package is compiled for one device)"),
        ("--cuda-graph", cfg.cuda_graph, "no CUDA graphs (a graph is captured on one device)"),
        ("--compile", cfg.compile not in (None, "off"), "no torch.compile (it compiles for one device)"),
        ("--workers", cfg.check.workers not in (None, 1), "one process (a worker holds one whole GPU)"),
    ):
        if on:
            raise OptionError(f"{flag} with --devices {cfg.devices}", why,
                              f"drop {flag}, or judge on one GPU with --device {devices[0]}")
    if importlib.util.find_spec("accelerate") is None:
        raise OptionError(f"--devices {cfg.devices}", "Accelerate installed (it places the layers)",
                          "pip install 'eagle3-check[multigpu]' (or pip install accelerate)")
    return cfg.replace(device=devices[0], cuda_graph=False, devices=",".join(devices))
