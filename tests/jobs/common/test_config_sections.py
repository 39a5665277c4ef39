"""The Config split by job (issue 46 item 5): shared options on `Config`, one typed section per job;
every flag of every subcommand routed to exactly one place by its command, every section field
set by some command's flag, the names that collide told apart, and `replace` and `options()` in
the front end's flat names."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from eagle3_check.cli import build_parser, config_of
from eagle3_check.errors import OptionError
from eagle3_check.jobs.common import config as config_mod
from eagle3_check.jobs.common.config import SECTIONS, SHARED, Config, route
from eagle3_check.jobs.common.section import Section


def command_dests(parser: argparse.ArgumentParser, command: str | None = None):
    """(command, dest) for every argument of every subcommand (a nested subcommand's under its
    top command: `golden verify`'s flags are `golden`'s)."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            if command is not None:
                yield command, a.dest  # golden_command, fixtures_command, draft_command
            for name, sub in a.choices.items():
                yield from command_dests(sub, command or name)
        elif not isinstance(a, argparse._HelpAction):
            yield command, a.dest


def places(command: str, name: str) -> list[str]:
    """Every place that could take `name` for `command`: the shared fields, each section."""
    found = ["Config"] if name in SHARED else []
    return found + [s for s, kind in SECTIONS.items() if command in kind.COMMANDS and name in kind.flat_names()]


def unset_fields(sections: dict, pairs: set) -> list[str]:
    """Section fields no command's flag sets (nor the harness: HARNESS)."""
    return [f"{kind.__name__}.{field}" for s, kind in sections.items() for flat, field in kind.flat_names().items()
            if field not in kind.HARNESS and not any((c, flat) in pairs for c in kind.COMMANDS)]


PAIRS = set(command_dests(build_parser()))


def test_every_flag_of_every_subcommand_routes_to_exactly_one_place():
    assert PAIRS  # the parser walk found the flags
    assert {(c, d): places(c, d) for c, d in PAIRS if len(places(c, d)) != 1} == {}
    assert [(c, d) for c, d in PAIRS if route(c, d) is None] == []


def test_a_section_field_no_command_sets_is_an_error():
    assert unset_fields(SECTIONS, PAIRS) == []

    @dataclasses.dataclass(frozen=True)
    class Stale(Section):
        COMMANDS = ("gate",)
        all_k: bool = False
        forgotten: int = 0  # a field whose flag is gone

    assert unset_fields({"stale": Stale}, PAIRS) == ["Stale.forgotten"]


def test_two_sections_taking_one_flag_of_one_command_are_refused(monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class Twin(Section):
        COMMANDS = ("gate",)
        all_k: bool = False  # gate --all-k is the gate section's already

    monkeypatch.setitem(SECTIONS, "twin", Twin)
    with pytest.raises(TypeError, match="gate's option all_k already has a place"):
        config_mod._routes()


@pytest.mark.parametrize("argv, section, field, value", [
    (["gate", "--pte", __file__, "--golden", __file__], "gate", "golden", __file__),
    (["report", "--golden", __file__, "--html", "x.html"], "report", "golden", __file__),
    (["report", "--check", __file__, "--html", "x.html"], "report", "check", __file__),
    (["gate", "--pte", __file__, "--report", "r.json"], "gate", "report", "r.json"),
    (["check", "--fixture", "tiny-llama", "--shrink"], "shrink", "enabled", True),
    (["gate", "--pte", __file__, "--no-shrink"], "shrink", "enabled", False),
    (["check", "--fixture", "tiny-llama", "--quantize", "int8-weight"], "check", "quantize", "int8-weight"),
    (["export", "-o", "x.pte", "--quantize", "int8-weight"], "export", "quantize", "int8-weight"),
    (["golden", "verify", "--baseline", __file__], "golden", "baseline", __file__),
    (["gate", "--pte", __file__, "--baseline", __file__], "gate", "baseline", __file__),
    (["mutants", "--only", "bos_twice"], "mutants", "only", ["bos_twice"]),
    (["golden", "record", "--only", "a,b"], "golden", "only", "a,b"),
    (["fixtures", "build", "tiny-llama", "--steps", "3"], "fixtures", "steps", 3),
    (["gate", "--pte", __file__, "--suite", "none"], "suites", "suite", "none"),
    (["check", "--fixture", "tiny-llama", "--min-agreement", "0.5", "--quantize", "int8-weight"], "drift",
     "min_agreement", 0.5),
], ids=["gate-golden", "report-golden", "report-check", "gate-report", "check-shrink", "gate-no-shrink",
        "check-quantize", "export-quantize", "golden-baseline", "gate-baseline", "mutants-only", "golden-only",
        "fixtures-steps", "gate-suite", "drift"])
def test_a_colliding_name_lands_in_its_commands_section(argv, section, field, value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg, _ = config_of(argv)
    assert getattr(getattr(cfg, section), field) == value
    flat = next(flat for flat, f in SECTIONS[section].flat_names().items() if f == field)
    assert cfg.value(flat) == value and cfg.options()[flat] == value  # the provenance block: the flat name


def test_a_command_without_a_section_gets_its_defaults():
    cfg, _ = config_of(["check", "--fixture", "tiny-llama"])
    assert (cfg.gate, cfg.golden, cfg.export) == (SECTIONS["gate"](), SECTIONS["golden"](), SECTIONS["export"]())
    assert cfg.check.workers == 1 and cfg.suites.suite is None


def test_options_are_the_flat_names_in_the_front_ends_order_with_their_values():
    values = {"command": "gate", "pte": "p.pte", "golden": "g.json", "suite": "edge", "report": "r.json",
              "shrink": True, "shrink_budget": 5.0, "min_agreement": 0.4, "json": False}
    cfg = Config.build(values, check=False)
    assert list(cfg.options().items()) == list(values.items())
    golden = Config.build({"command": "golden", "golden_command": "verify", "goldens": ["a", "b"]}, check=False)
    assert golden.golden.goldens == ("a", "b") and golden.options()["goldens"] == ["a", "b"]


def test_replace_takes_flat_names_routed_by_the_command():
    cfg = Config.build({"command": "check", "runner": "reference", "shrink": True, "workers": 2}, check=False)
    new = cfg.replace(runner="device", shrink=False, workers=1, repro_prompt_id="repro:x")
    assert (new.runner, new.shrink.enabled, new.check.workers, new.shrink.repro_prompt_id) == (
        "device", False, 1, "repro:x")
    assert (cfg.runner, cfg.shrink.enabled, cfg.check.workers) == ("reference", True, 2)  # frozen: a copy
    with pytest.raises(TypeError, match="all_k is no option of command 'check'"):
        cfg.replace(all_k=True)


def test_a_flag_of_another_command_is_refused_where_the_config_is_built():
    with pytest.raises(OptionError, match="option all_k;"):
        Config.build({"command": "check", "all_k": True})
    assert route("run", "workers") is None and route("check", "workers") == ("check", "workers")
