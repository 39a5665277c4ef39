"""`Config`: a command's options, typed, built once and checked where it is built.

A front end (the CLI's parsed flags, the pytest plugin's options) hands `Config.build` a flat
mapping of option name -> value; `build` routes each name (`route`), refuses one the command does
not have, fills the rest with their defaults and runs every check that needs neither torch nor a
model (jobs/common/validate.py): a wrong value is one line before anything loads. Nothing here
imports torch.

The options are cut in two. The shared ones are fields of `Config` itself, each read by more than
one job or by the world they share: the program (fixture ... compile_attention: jobs/common/world.py
builds it for every command), the runner options (prompt ... chunked_prefill: runners/options.py,
for run, check, calibrate, gate, golden, draft train), what every judging job shares (prompts,
runner, runner_timeout, runner_profile, isolate, in_process, reference, tie_budget, exact: the
CheckContext of check, gate and golden verify, and the pytest plugin's), and the outputs (json,
html, junit, no_progress, output: written or silenced the same way by every command). The rest
belong to one job each and live in its section, a small frozen dataclass in that job's package
(jobs/common/section.py): `cfg.check` (jobs/check/options.py), `cfg.drift` (the quantized drift
thresholds of check --quantize and gate, ibid.), `cfg.suites` (jobs/suites/options.py), `cfg.gate`
(jobs/gate/options.py), `cfg.golden` (jobs/golden/options.py), `cfg.shrink`
(jobs/common/shrink_options.py: run, check, gate, golden verify) and the building commands'
`cfg.export`, `cfg.mutants`, `cfg.fixtures`, `cfg.drafting`, `cfg.report`
(jobs/common/tool_options.py). A command without a section gets its defaults.

A flat name is routed by the command: the same flag can fill different sections (`--golden FILE`
is `cfg.gate.golden` for gate and `cfg.report.golden` for report; `--quantize` is `cfg.check.quantize`
or `cfg.export.quantize`; `--shrink` is `cfg.shrink.enabled`). The bookkeeping stays flat, in the
front end's names: `present` (the option names the command has: a subcommand without
`--max-new-tokens` does not set it), `given` (the ones the user typed: `-k 4` told from the
default), `order`, and `options()` gives the mapping back in the front end's order (the provenance
block). `replace(**changes)` takes flat names too, routed the same way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from eagle3_check.errors import OptionError
from eagle3_check.jobs.check.options import CheckOptions, DriftOptions
from eagle3_check.jobs.common.shrink_options import ShrinkOptions
from eagle3_check.jobs.common.tool_options import (
    DraftingOptions,
    ExportOptions,
    FixturesOptions,
    MutantsOptions,
    ReportOptions,
)
from eagle3_check.jobs.gate.options import GateOptions
from eagle3_check.jobs.golden.options import GoldenOptions
from eagle3_check.jobs.suites.options import SuitesOptions

# Config's attribute -> its section's class
SECTIONS = {"check": CheckOptions, "drift": DriftOptions, "suites": SuitesOptions, "shrink": ShrinkOptions,
            "gate": GateOptions, "golden": GoldenOptions, "export": ExportOptions, "mutants": MutantsOptions,
            "fixtures": FixturesOptions, "drafting": DraftingOptions, "report": ReportOptions}


@dataclass(frozen=True)
class Config:
    command: str | None = None
    # --- the program (default: jobs/common/default_program.py: smollm2-135m for check / run, else tiny-llama) ---
    fixture: str | None = None
    target: str | None = None  # a directory (a hub id is resolved to its cache directory when built)
    draft: str | None = None
    tokenizer: str | None = None
    device: str = "cpu"
    devices: str | None = None  # --devices cuda:0,cuda:1: the target's layers over several GPUs (program/placement.py)
    dtype: str = "float32"
    cuda_graph: bool | None = None
    max_seq_len: int | None = None
    min_prefill: int | None = None
    max_prefill: int | None = None
    threads: int | None = None
    max_memory: float | None = None
    pte: str | None = None
    data_path: str | None = None
    aoti: str | None = None  # an AOTI package (.pt2) to run (jobs/common/aoti.py)
    compile: str | None = None  # off / layer / model (None: the command has no --compile)
    compile_mode: str | None = None
    compile_attention: str | None = None
    # --- runner options (runners/options.py; unset ones come from the tokenizer's files) ---
    prompt: str | None = None
    prompt_file: str | None = None
    chat_prefix: str | None = None
    chat_suffix: str | None = None
    raw: bool = False
    stop_ids: str | None = None
    stop_token: str | None = None
    bos_id: int | None = None
    eos_id: int | None = None
    allow_text_stops: bool = False
    max_new_tokens: int | None = None
    chain_len: int | None = None
    chunked_prefill: bool = False
    # --- what every judging job shares (the CheckContext of check, gate, golden verify; the pytest plugin) ---
    prompts: str | None = None
    runner: str | None = None
    runner_timeout: float | None = None
    runner_profile: str | None = None  # the runner's rules (runners/profiles.py); default: detected / declared
    isolate: bool = False  # the reference/device runner in its own process too (eagle3_check/runners/isolate)
    in_process: bool = False  # a plug-in runner in the harness's process
    reference: str = "hf"
    tie_budget: float | None = None
    exact: bool = False  # exact mode: shape-invariant kernels, verdict as identity (jobs/common/exact.py)
    # --- outputs ---
    json: bool = False
    html: str | None = None
    junit: str | None = None
    no_progress: bool = False
    output: str | None = None
    # --- each job's own section (its defaults where the command lacks it) ---
    check: CheckOptions = field(default_factory=CheckOptions)
    drift: DriftOptions = field(default_factory=DriftOptions)
    suites: SuitesOptions = field(default_factory=SuitesOptions)
    shrink: ShrinkOptions = field(default_factory=ShrinkOptions)
    gate: GateOptions = field(default_factory=GateOptions)
    golden: GoldenOptions = field(default_factory=GoldenOptions)
    export: ExportOptions = field(default_factory=ExportOptions)
    mutants: MutantsOptions = field(default_factory=MutantsOptions)
    fixtures: FixturesOptions = field(default_factory=FixturesOptions)
    drafting: DraftingOptions = field(default_factory=DraftingOptions)
    report: ReportOptions = field(default_factory=ReportOptions)
    # --- bookkeeping (not options) ---
    present: frozenset = field(default=frozenset(), compare=False)  # the option names the command has
    given: frozenset = field(default=frozenset(), compare=False)  # the ones the user typed (Given action)
    order: tuple = field(default=(), compare=False)  # the front end's option order (options())


    @classmethod
    def build(cls, values: dict, check: bool = True) -> Config:
        """The config of `values` (flat option name -> value), each routed to its place by the
        command, checked (jobs/common/validate.py) unless `check` is false; a name the command does
        not have is a one-line error, never dropped."""
        values = dict(values)
        given = frozenset(values.pop("given", ()))
        command = values.get("command")
        unknown = [k for k in values if route(command, k) is None]
        if unknown:
            raise OptionError(f"option {unknown[0]}", f"one of Config's options ({len(names_of(command))})",
                              "add it to eagle3_check/jobs/common/config.py (shared) or to its job's section")
        shared, sections = _routed(command, values)
        cfg = cls(**shared, **{name: SECTIONS[name](**fields) for name, fields in sections.items()},
                  present=frozenset(values), given=given, order=tuple(values))
        if not check:
            return cfg
        from eagle3_check.jobs.common.validate import validated

        return validated(cfg)

    def has(self, name: str) -> bool:
        """Whether the command has this option (a flat name) at all."""
        return name in self.present

    def value(self, name: str):
        """The value of a flat option name, read from its place (None where the command has no such
        option): for what speaks in flags (the provenance block, a repro file, a table of flags)."""
        where = route(self.command, name)
        if where is None:
            return None
        section, attr = where
        return getattr(getattr(self, section) if section else self, attr)

    def options(self) -> dict:
        """The command's options in the front end's order (the provenance block's `options`)."""
        values = {k: self.value(k) for k in self.order}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}

    def replace(self, **changes) -> Config:
        """A copy with these options changed, each a flat option name routed as `build` routes it
        (`replace(runner=...)` a shared field, `replace(repro_prompt_id=...)` the shrink section's)."""
        unknown = [k for k in changes if route(self.command, k) is None]
        if unknown:
            raise TypeError(f"Config.replace: {unknown[0]} is no option of command {self.command!r}")
        shared, sections = _routed(self.command, changes)
        return dataclasses.replace(self, **shared, **{name: getattr(self, name).replace(**fields)
                                                      for name, fields in sections.items()})


BOOKKEEPING = {"present", "given", "order"}
SHARED = frozenset(f.name for f in dataclasses.fields(Config)) - BOOKKEEPING - set(SECTIONS)
TUPLES = {"goldens", "omit_metadata"}  # a front end's list, kept as a tuple (the Config is frozen)


def route(command: str | None, name: str) -> tuple[str | None, str] | None:
    """Where the flat option `name` of `command` lives: (None, field) for a shared option,
    (section, field) for a job's own, None where the command has no such option. Worked example:
    route("gate", "golden") == ("gate", "golden"), route("report", "golden") == ("report", "golden"),
    route("check", "shrink") == ("shrink", "enabled"), route("run", "workers") is None."""
    if name in SHARED:
        return None, name
    return ROUTES.get((command, name))


def names_of(command: str | None) -> set[str]:
    """Every flat option name `command` can have."""
    return set(SHARED) | {name for (c, name) in ROUTES if c == command}


def _routes() -> dict[tuple[str, str], tuple[str, str]]:
    """(command, flat name) -> (section, field), from each section's COMMANDS; a flat name two
    sections of one command would take is refused here (one place each)."""
    table: dict[tuple[str, str], tuple[str, str]] = {}
    for section, kind in SECTIONS.items():
        for command in kind.COMMANDS:
            for flat, attr in kind.flat_names().items():
                if flat in SHARED or (command, flat) in table:
                    raise TypeError(f"{kind.__name__}: {command}'s option {flat} already has a place")
                table[command, flat] = (section, attr)
    return table


ROUTES = _routes()


def _routed(command: str | None, values: dict) -> tuple[dict, dict[str, dict]]:
    """`values` (flat names, each routable) split into the shared fields and each section's."""
    shared: dict = {}
    sections: dict[str, dict] = {}
    for name, value in values.items():
        section, attr = route(command, name)
        if name in TUPLES and isinstance(value, list):
            value = tuple(value)
        if section is None:
            shared[attr] = value
        else:
            sections.setdefault(section, {})[attr] = value
    return shared, sections
