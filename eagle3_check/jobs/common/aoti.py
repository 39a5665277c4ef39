"""AOTI programs from a `Config`: `export --aoti -o F.pt2` (an eager program compiled with AOTInductor,
program/aoti_export.py), and the flag checks of `--aoti F.pt2` on check, gate, golden verify and the
suites (the package on the AOTI backend, program/aoti_backend.py, built by `world.build_aoti_program`
and judged against the reference its sidecar names, as a `.pte`).

AOTI programs are compiled for, and judged on, the GPU: on a machine without CUDA `--aoti` is refused
in one line before torch is imported (`check_aoti_flags`), unless `--device cpu` is given, which
compiles and judges a CPU package (C++ kernels; what the CPU tests prove the backend with). Without
`--device`, `export --aoti` compiles for cuda; `--aoti F.pt2` runs on the device the package was
compiled for (`--device cuda:N` picks the GPU; `--device cpu` with a CUDA package is an error).
"""

from __future__ import annotations

from eagle3_check.errors import OptionError

# export's flags that shape a .pte only: refused with `export --aoti`
PTE_ONLY = {"quantize": "--quantize", "external_data": "--external-data", "from_pte": "--from-pte",
            "omit_metadata": "--omit-metadata", "stock_lowering": "--stock-lowering", "quantize_draft": "--quantize-draft",
            "group_size": "--group-size"}


def check_aoti_flags(cfg) -> None:
    """The flag checks of `--aoti` (no torch): the refusal without CUDA, and the flags it excludes."""
    wanted = cfg.aoti or cfg.export.aoti_export
    if cfg.export.aoti_weights and not cfg.export.aoti_export:
        raise OptionError(f"--aoti-weights {cfg.export.aoti_weights} without --aoti", "an AOTI compile",
                          "add --aoti, or drop --aoti-weights (a .pte embeds its weights)")
    if not wanted:
        return
    flag = "export --aoti" if cfg.export.aoti_export else f"--aoti {cfg.aoti}"
    from eagle3_check.preflight import cuda_driver_present

    if "device" not in cfg.given and not cuda_driver_present():
        raise OptionError(f"{flag} on a machine without CUDA (no NVIDIA driver)",
                          "a CUDA GPU: AOTI programs are compiled for and judged on it",
                          "run it on the GPU machine, or pass --device cpu for a CPU package (C++ kernels, "
                          "a minute or more of compile per method)")
    if cfg.aoti and cfg.pte:
        raise OptionError(f"--aoti {cfg.aoti} with --pte {cfg.pte}", "one program", "drop one of them")
    if cfg.aoti and cfg.compile not in (None, "off"):
        raise OptionError(f"--compile {cfg.compile} with --aoti {cfg.aoti}",
                          "an eager program (an AOTI package is compiled when exported)", "drop --compile")
    if cfg.export.aoti_export:
        for field, name in PTE_ONLY.items():
            if getattr(cfg.export, field):
                raise OptionError(f"{name} with export --aoti", "the flags of an AOTI compile (program, shape, "
                                  "dtype, --verify-kv-window, --device)", f"drop {name} (it shapes a .pte only)")
        if cfg.export.backend not in (None, "xnnpack"):
            raise OptionError(f"--backend {cfg.export.backend} with export --aoti", "AOTInductor's kernels",
                              "drop --backend")
        if not str(cfg.output).endswith(".pt2"):
            raise OptionError(f"-o {cfg.output} with export --aoti", "a file name ending in .pt2",
                              "pass -o NAME.pt2")


def export_aoti(cfg, on_phase=None) -> dict:
    """`export --aoti`: the eager program the config names, on --device (default cuda), compiled into
    --output; returns the sidecar's record."""
    from eagle3_check.jobs.common.world import OVERRIDES, eager_program, overrides_of
    from eagle3_check.program.aoti_export import compile_aoti
    from eagle3_check.program.contract import VERIFY_KV_WINDOW, read_metadata

    device = cfg.device if "device" in cfg.given else "cuda"
    cfg = cfg.replace(device=device)
    overrides = overrides_of(cfg, (*OVERRIDES, "chain_len", "min_verify_len", "max_verify_len"))
    program, _, _, source = eager_program(cfg, overrides)
    if cfg.export.verify_kv_window:
        program.use_verify_form(VERIFY_KV_WINDOW)
    read_metadata(program.metadata())  # refuse inconsistent ranges before minutes of compile
    return compile_aoti(program, cfg.output, source, on_phase, weights=cfg.export.aoti_weights or "embedded")
