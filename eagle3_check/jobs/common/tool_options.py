"""The sections of the Config for the commands that build rather than judge: `export`, `mutants`,
`fixtures build`, `draft export | train` and `report`. Each is one command's own flags; their work
lives in jobs/export.py, mutants/command.py, jobs/fixture_build.py, jobs/draft_train.py and
cli/draft.py, cli/report.py."""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_check.jobs.common.section import Section


@dataclass(frozen=True)
class ExportOptions(Section):
    COMMANDS = ("export",)
    backend: str | None = None  # xnnpack or portable
    min_verify_len: int | None = None
    max_verify_len: int | None = None
    verify_kv_window: bool = False
    external_data: bool = False
    stock_lowering: bool = False
    omit_metadata: tuple = ()
    quantize: str | None = None
    group_size: int | None = None
    quantize_draft: bool = False
    from_pte: str | None = None
    aoti_export: bool = False  # export --aoti: compile with AOTInductor into a .pt2
    aoti_weights: str | None = None  # with --aoti: embedded (default) or external (program/aoti_weights.py)


@dataclass(frozen=True)
class MutantsOptions(Section):
    COMMANDS = ("mutants",)
    only: object = None  # a list of mutant names
    first_kill: bool = False
    all: bool = False
    no_suites: bool = False
    placement: object = None  # a list: host, device
    strict_suites: bool = False


@dataclass(frozen=True)
class FixturesOptions(Section):
    COMMANDS = ("fixtures",)
    RENAMED = {"fixtures_command": "action"}
    action: str | None = None  # list or build
    name: str | None = None  # the recipe
    root: str | None = None
    steps: int | None = None
    batch_size: int | None = None
    seed: int | None = None
    no_card: bool = False


@dataclass(frozen=True)
class DraftingOptions(Section):
    """`draft export | train` (the section is not `draft`: `Config.draft` is the --draft directory)."""

    COMMANDS = ("draft",)
    RENAMED = {"draft_command": "action"}
    action: str | None = None  # export or train
    source: str | None = None  # draft export SOURCE
    verifier: str | None = None
    train_prompts: str | None = None  # draft train --prompts
    card_prompts: str | None = None
    no_card: bool = False
    steps: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    ttt_steps: int | None = None
    self_prompts: int | None = None
    opened_prompts: int | None = None
    gen_batch: int | None = None
    draft_vocab: int | None = None
    intermediate_size: int | None = None
    seed: int | None = None
    checkpoint_every: int | None = None


@dataclass(frozen=True)
class ReportOptions(Section):
    """`report --bench | --check | --gate | --golden FILE`: the JSON report an HTML page is made of."""

    COMMANDS = ("report",)
    bench: str | None = None
    check: str | None = None
    gate: str | None = None
    golden: str | None = None
