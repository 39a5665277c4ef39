"""The program a command runs when no flag names one (jobs/common/default_program.py): the real fixture
smollm2-135m for `run` and check's prompt set, tiny-llama for the routes that cost more there; the
real extra missing is one line naming both fixes. Config only: no torch, no model."""

from __future__ import annotations

import pytest

from eagle3_check import gguf_fixture
from eagle3_check.cli import config_of
from eagle3_check.errors import InputError
from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, fixtures_root
from eagle3_check.jobs.common.default_program import REAL_DEFAULT

TINY = str(fixtures_root() / "tiny-llama")
PROMPTS = str(fixtures_root() / "prompts.json")


@pytest.fixture
def installed(monkeypatch):
    """The real extra as installed or not, whatever this machine has: the GGUF found (no file read),
    or its package's module not found."""
    def set_installed(yes: bool):
        if yes:
            monkeypatch.setattr(gguf_fixture, "source_paths", lambda name, source: [])
        else:
            monkeypatch.setattr(gguf_fixture.importlib.util, "find_spec", lambda name, *a: None)
    return set_installed


@pytest.mark.parametrize("argv, want", [
    (["check"], REAL_DEFAULT),
    (["check", "--prompts", PROMPTS, "-k", "3"], REAL_DEFAULT),
    (["check", "--workers", "2"], REAL_DEFAULT),
    (["check", "--runner", "json:loads"], REAL_DEFAULT),  # an importable module: the spec is checked before torch
    (["check", "--shrink"], REAL_DEFAULT),
    (["run", "--prompt", "Hi"], REAL_DEFAULT),
    (["check", "--suite", "stop-set"], None),  # every tiny fixture, as before
    (["check", "--list"], None),
    (["check", "--quantize", "int8-weight"], None),
    (["check", "--fixture", "tiny-llama"], "tiny-llama"),
    (["run", "--prompt", "Hi", "--fixture", "gemma3-270m"], "gemma3-270m"),
    (["check", "--target", f"{TINY}/target", "--draft", f"{TINY}/draft", "--prompts", PROMPTS], None),
    (["export", "-o", "/tmp/x.pte"], None),  # export, gate, golden: tiny-llama (the library's default)
    (["golden", "verify"], None),
], ids=["check", "check-prompts", "check-workers", "check-plugin", "check-shrink", "run", "check-suite",
        "check-list", "check-quantize", "check-tiny", "run-gemma", "check-target", "export", "golden"])
def test_the_default_program_of_each_route(installed, argv, want):
    installed(True)
    cfg, _ = config_of(argv)
    assert cfg.fixture == want


def test_a_missing_real_extra_names_the_extra_and_the_tiny_fixture(installed):
    installed(False)
    with pytest.raises(InputError) as e:
        config_of(["run", "--prompt", "Hi"])
    msg = str(e.value)
    assert "\n" not in msg and "default program of `eagle3-check run`" in msg
    assert 'pip install -e ".[real]"' in msg and f"--fixture {DEFAULT_FIXTURE}" in msg, msg


def test_a_named_tiny_fixture_needs_no_real_extra(installed):
    installed(False)
    assert config_of(["check", "--fixture", "tiny-llama"])[0].fixture == "tiny-llama"
    assert config_of(["check", "--suite", "stop-set"])[0].fixture is None
