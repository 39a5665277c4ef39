"""What a `.pte` is judged with: its fixture (for the HF reference, the tokenizer and the prompt
set) or a given target, read from the options or from the export sidecar `NAME.export.json`
that `eagle3-check export` writes beside it (`{"source": {"fixture": ...}}`).

Used by `check --pte`, `gate --pte` and the pytest plugin's `--eagle3-pte`.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_check.errors import InputError
from eagle3_check.program.sidecar import read_sidecar


def reference_for_pte(pte: str | Path, fixture: str | None, target: str | Path | None,
                      tokenizer: str | Path | None) -> tuple:
    """(fixture or None, target_dir, tokenizer path) a .pte is judged with: `target`/`tokenizer`,
    else `fixture`, else the fixture recorded in the export sidecar, else the default fixture."""
    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture

    if target:
        if fixture:
            raise InputError("--fixture with --target", "one or the other", "drop --fixture")
        t = Path(target)
        return None, t, Path(tokenizer) if tokenizer else t / "tokenizer.json"
    if not fixture:
        source = (read_sidecar(pte) or {}).get("source")  # a stale sidecar is an error, never trusted
        fixture = source.get("fixture") if isinstance(source, dict) else None
        fixture = fixture if isinstance(fixture, str) else DEFAULT_FIXTURE
    fx = load_fixture(fixture)
    return fx, fx.target_dir, Path(tokenizer) if tokenizer else fx.tokenizer_path
