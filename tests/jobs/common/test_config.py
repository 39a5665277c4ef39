"""`jobs.common.config.Config`: every CLI flag is a typed option, built and checked in one place, no torch
(where each flag lives, shared or in its job's section: test_config_sections.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from eagle3_check.cli import config_of
from eagle3_check.errors import OptionError
from eagle3_check.jobs.common.config import Config


def test_an_unknown_option_is_refused_not_dropped():
    with pytest.raises(OptionError, match="option max_new_token;"):
        Config.build({"command": "check", "max_new_token": 3})


@pytest.mark.parametrize("argv, message", [
    (["check", "--fixture", "tiny-llama", "--tie-budget", "1.5"], "--tie-budget 1.5"),
    (["check", "--fixture", "tiny-llama", "--min-agreement", "2"], "--min-agreement 2"),
    (["check", "--max-far-share", "0.5", "--suite", "budget"], "--max-far-share without --quantize"),
    (["check", "--list", "--junit", "x.xml"], "--junit with --list"),
    (["check", "--suite", "budget", "--html", "x.html"], "--html with --suite"),
    (["check", "--runner", "exec:./bin", "--html", "x.html"], "--html with a runner binary"),
    (["gate", "--pte", __file__, "--tie-budget", "-1"], "--tie-budget -1"),
], ids=["tie-budget", "drift-range", "drift-without-quantize", "junit-with-list", "html-with-suite",
        "html-with-binary", "gate-tie-budget"])
def test_a_bad_combination_is_one_line_where_the_config_is_built(argv, message):
    with pytest.raises(OptionError, match=message):
        config_of(argv)


def test_the_config_is_the_flags_in_their_order_and_knows_what_was_typed():
    cfg, _ = config_of(["check", "--fixture", "tiny-llama", "-k", "3", "--max-new-tokens", "16"])
    assert (cfg.chain_len, cfg.max_new_tokens, cfg.runner) == (3, 16, "reference")  # the runner resolved once
    assert cfg.given == {"chain_len", "max_new_tokens"}
    assert list(cfg.options())[:3] == ["command", "prompts", "json"]
    assert cfg.has("chain_len") and not config_of(["golden", "verify"])[0].has("chain_len")


def test_building_a_config_imports_no_torch(tmp_path):
    pte = tmp_path / "x.pte"
    pte.write_bytes(b"\0\0\0\0ET12" + bytes(8))  # a .pte's identifier: the Config reads no further
    code = ("import sys\nfrom eagle3_check.cli import config_of\n"
            "config_of(['check', '--suite', 'budget']); config_of(['gate', '--pte', sys.argv[1]])\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code, str(pte)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
