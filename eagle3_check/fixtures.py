"""The fixture registry: tiny matched target / draft / tokenizer sets committed under fixtures/.

A fixture directory holds `target/` (HF save_pretrained), `draft/` (speculators layout),
`tokenizer.json` (+ `tokenizer_config.json`), `fixture.json` (the program shape it is
built with: max_seq_len, prefill range, chain length, verify range) and uses the shared
prompt set `fixtures/prompts.json` unless it has its own `prompts.json`.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from eagle3_check.errors import InputError

DEFAULT_FIXTURE = "tiny-llama"


def fixtures_root() -> Path:
    """`$EAGLE3_CHECK_FIXTURES`, else the repository's fixtures/ beside the package."""
    env = os.environ.get("EAGLE3_CHECK_FIXTURES")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "fixtures"


@dataclass(frozen=True)
class ProgramSpec:
    """How an eager program is built: becomes its metadata (DESIGN §1)."""

    max_seq_len: int
    min_prefill: int
    max_prefill: int
    chain_len: int
    min_verify_len: int
    max_verify_len: int


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str


@dataclass(frozen=True)
class Fixture:
    name: str
    root: Path
    spec: ProgramSpec

    @property
    def target_dir(self) -> Path:
        return self.root / "target"

    @property
    def draft_dir(self) -> Path:
        return self.root / "draft"

    @property
    def tokenizer_path(self) -> Path:
        return self.root / "tokenizer.json"

    @property
    def card_path(self) -> Path:
        return self.root / "card.json"

    def prompts(self) -> list[Prompt]:
        own = self.root / "prompts.json"
        return load_prompts(own if own.is_file() else self.root.parent / "prompts.json")


def load_prompts(path: str | Path) -> list[Prompt]:
    """Reads a prompt set: {"prompts": [{"id": ..., "text": ...}, ...]}."""
    p = Path(path)
    fix = 'write {"prompts": [{"id": "a", "text": "..."}]} (see fixtures/prompts.json)'
    if not p.is_file():
        raise InputError(f"prompt set {p} does not exist", "a prompt set JSON file", fix)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        prompts = [Prompt(str(q["id"]), str(q["text"])) for q in data["prompts"]]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
        raise InputError(f"prompt set {p} is malformed ({e.__class__.__name__}: {e})",
                         "UTF-8 JSON with a 'prompts' list of {id, text}", fix) from None
    if not prompts:
        raise InputError(f"prompt set {p} has no prompts", "at least one prompt", fix)
    return prompts


def list_fixtures() -> list[str]:
    root = fixtures_root()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "fixture.json").is_file())


def load_fixture(name: str = DEFAULT_FIXTURE) -> Fixture:
    names = list_fixtures()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"pick one of: {', '.join(names) or '(none)'}"
        raise InputError(f"unknown fixture '{name}'", f"one of {names}", hint)
    root = fixtures_root() / name
    meta = json.loads((root / "fixture.json").read_text())
    return Fixture(name=name, root=root, spec=ProgramSpec(**meta["program"]))
