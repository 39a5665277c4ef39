"""`export` from a `Config`: the eager program the options name (fixture or --target/--draft,
their shape overrides, the verify form, an in-process quantization) written as a `.pte`
(program/export.py), or an existing `.pte` copied without some metadata keys (--from-pte)."""

from __future__ import annotations

from eagle3_check.errors import InputError


def export(cfg, on_phase=None):
    """The ExportRecord of the .pte written to --output."""
    from eagle3_check.jobs.common.world import OVERRIDES, eager_program, overrides_of
    from eagle3_check.program.export import export_eager, require_executorch

    require_executorch()
    overrides = overrides_of(cfg, (*OVERRIDES, "chain_len", "min_verify_len", "max_verify_len"))
    program, _, _, source = eager_program(cfg, overrides)
    from eagle3_check.program.contract import VERIFY_KV_WINDOW, read_metadata

    if cfg.export.verify_kv_window:
        program.use_verify_form(VERIFY_KV_WINDOW)

    read_metadata(program.metadata())  # refuse inconsistent ranges before a long export
    if cfg.export.quantize:
        from eagle3_check.program.quantize import make_spec

        if getattr(program, "quantized_layers", None):
            raise InputError(f"--quantize with --fixture {cfg.fixture}", "a full-precision fixture (this variant is "
                             "quantized already)", "drop --quantize, or export its base fixture")
        spec = make_spec(cfg.export.quantize, cfg.export.group_size, cfg.export.quantize_draft)
        program.quantize(spec)
        source = {**source, "fixture": variant_of(source.get("fixture"), spec)} if "fixture" in source else source
    elif cfg.export.group_size is not None or cfg.export.quantize_draft:
        raise InputError("--group-size / --quantize-draft without --quantize", "--quantize int8-weight|int4-weight",
                         "add --quantize int4-weight")
    if getattr(program, "quantized_layers", None):
        from eagle3_check.program.quantize import QUANT_KEY

        source = {**source, "quantization": program.metadata()[QUANT_KEY]}
    return export_eager(program, cfg.output, cfg.export.backend, list(cfg.export.omit_metadata), source, cfg.export.external_data,
                        on_phase=on_phase, stock_lowering=cfg.export.stock_lowering)


def variant_of(fixture: str, spec) -> str:
    """The quantized variant of `fixture` with exactly this quantization (its goldens then apply
    to the export), else `fixture` itself (the gate then applies none of its goldens)."""
    from eagle3_check.fixtures.registry import list_variants, load_fixture
    from eagle3_check.program.quantize import make_spec

    for name in list_variants():
        fx = load_fixture(name)
        if fx.base == fixture and make_spec(**fx.quantization) == spec:
            return name
    return fixture


def copy_pte(cfg) -> None:
    """`--from-pte`: the .pte copied to --output without the --omit-metadata keys."""
    from eagle3_check.program.pte_edit import omit_metadata

    for flag in ("fixture", "target", "draft", "quantize", "group_size", "max_seq_len", "min_prefill", "max_prefill", "chain_len",
                 "min_verify_len", "max_verify_len"):
        if cfg.value(flag) is not None:
            name = "--" + flag.replace("_", "-")
            raise InputError(f"{name} with --from-pte", "only --omit-metadata (the program is copied)",
                             f"drop {name}, or export from --fixture / --target")
    for flag, given in (("--verify-kv-window", cfg.export.verify_kv_window), ("--dtype", cfg.dtype != "float32"),
                        ("--external-data", cfg.export.external_data)):
        if given:
            raise InputError(f"{flag} with --from-pte", "only --omit-metadata (the program is copied)",
                             f"drop {flag}, or export from --fixture / --target")
    omit_metadata(cfg.export.from_pte, cfg.output, list(cfg.export.omit_metadata))
