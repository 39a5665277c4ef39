"""A real fixture's default `check` is the run its card measured: draft health expects the
card's tau there (docs/real-models.md, the audit row 'draft health'), and only there."""

from __future__ import annotations

import json

import pytest
from test_real_fixtures import real


@pytest.mark.slow
@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
@pytest.mark.parametrize("flags,expects", [
    ((), True),
    (("--bos-id", "3"), False),
], ids=["default-request", "a-bos-flag"])
def test_default_check_of_a_real_fixture_expects_its_card(name, flags, expects):
    from eagle3_check.cli import config_of  # the flags as check parses them, nothing run
    from eagle3_check.jobs.common.context import CheckContext

    fx = real(name)
    card = json.loads(fx.card_path.read_text())
    cfg, _ = config_of(["check", "--fixture", name, "--max-new-tokens", str(card["max_new_tokens"]), *flags])
    tau, source = CheckContext(cfg).expected_tau(4, name)
    if expects:
        assert tau == card["k"]["4"]["tau"] and "at K=4" in source, source
    else:
        assert tau is None and "options differ" in source, source
