"""Shrinking on the routes beyond the prompt-set check (issue 33): golden verify, --workers, --quantize,
a forced suite case. Each with a seeded mutant: it shrinks to a pinned minimal request, the shrunk
request still fails the same way (its repro command replays it), the original verdict is the one a
run without --shrink gives, and a budget of 0 probes nothing.

`emit_past_max_new` (one token past max new tokens) is the mutant: its minimal request is max new
tokens 2 and K 1 (max new tokens reached inside a round of one proposal), the prompt the template's
frame where the route may shrink it (21 ids), the whole recorded prompt on a golden.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from eagle3_check.cli import main
from eagle3_check.jobs.golden.file import golden_root, load_golden, save_golden
from eagle3_check.shrink.repro import load_repro, split_line

MUTANT = "eagle3_check.mutants:emit_past_max_new"
GOLDEN = "tiny-llama__eager__cpu__float32__k4__n48.json"


def one_prompt_golden(tmp_path) -> str:
    """The committed tiny-llama K 4 golden cut to its first prompt (one run a verify)."""
    g = load_golden(golden_root() / GOLDEN)
    return str(save_golden(dataclasses.replace(g, prompts=g.prompts[:1]), tmp_path / "golden"))


def test_a_golden_that_differs_shrinks_max_new_and_k_and_keeps_its_prompt(tmp_path, capsys):
    path = one_prompt_golden(tmp_path)
    want = load_golden(path).prompts[0]
    assert main(["golden", "verify", path, "--runner", MUTANT, "--no-baseline", "--no-progress", "--json"]) == 1
    plain = json.loads(capsys.readouterr().out)
    rc = main(["golden", "verify", path, "--runner", MUTANT, "--no-baseline", "--no-progress", "--json", "--shrink",
               "--shrink-dir", str(tmp_path)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["golden_diffs"] == plain["golden_diffs"]  # the original verdict untouched
    shrunk = out["shrunk"][load_golden(path).key.stem][want.prompt_id]
    req = shrunk["shrunk"]
    assert (len(req["prompt_ids"]), req["max_new_tokens"], req["k"]) == (len(want.prompt_ids), 2, 1)
    assert req["prompt_ids"] == want.prompt_ids and shrunk["kept"][0].startswith("prompt (the golden records")
    repro = load_repro(shrunk["file"])
    assert repro.expected == want.tokens[:2]  # the recorded prefix is what the shrunk request must emit
    assert repro.got[:2] == want.tokens[:2] and len(repro.got) == 3  # ... and the runner emits one past it
    assert repro.rule == shrunk["original_failure"]["kind"] and "emitted # tokens, golden #" in repro.rule
    assert "\n" not in repro.command  # one line: the template's frame is in the ids, not in flags
    assert main(split_line(repro.command)[1:] + ["--no-progress"]) == 1  # the command reproduces it
    assert "length: runner emitted 3 tokens, rules fix 2" in capsys.readouterr().out


def test_a_golden_shrink_with_no_budget_probes_nothing(tmp_path, capsys):
    path = one_prompt_golden(tmp_path)
    main(["golden", "verify", path, "--runner", MUTANT, "--no-baseline", "--no-progress", "--json", "--shrink",
          "--shrink-budget", "0", "--shrink-dir", str(tmp_path)])
    out = json.loads(capsys.readouterr().out)
    [shrunk] = [s for per in out["shrunk"].values() for s in per.values()]
    assert not shrunk["complete"] and shrunk["shrunk"] == shrunk["original"]  # the original is its own repro


def test_golden_verify_of_a_passing_runner_has_nothing_to_shrink(tmp_path, capsys):
    path = one_prompt_golden(tmp_path)
    assert main(["golden", "verify", path, "--no-baseline", "--no-progress", "--shrink",
                 "--shrink-dir", str(tmp_path)]) == 0
    assert "shrunk" not in capsys.readouterr().out and not list(tmp_path.glob("repro-*.json"))


def prompts_file(tmp_path) -> str:
    path = tmp_path / "prompts.json"
    path.write_text(json.dumps({"prompts": [{"id": "sky", "text": "Why is the sky blue?"},
                                            {"id": "count", "text": "Count from one to ten."}]}))
    return str(path)


@pytest.mark.slow  # two worker processes and a child for the plug-in: ~60 s on two busy cores
def test_workers_shrink_in_the_parent_in_prompt_order(tmp_path, capsys):
    argv = ["check", "--fixture", "tiny-llama", "--runner", MUTANT, "--prompts", prompts_file(tmp_path), "--max-new-tokens", "10",
            "--no-progress", "--shrink", "--shrink-dir", str(tmp_path)]
    assert main([*argv, "--workers", "2"]) == 1
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if x.startswith("shrunk ")]
    assert [x.split("'")[1] for x in lines] == ["sky", "count"]  # prompt order, whatever the workers' timing
    assert all("-> L 21, max new tokens 2, K 1" in x for x in lines)
    serial = {p: load_repro(tmp_path / f"repro-{p}.json").request for p in ("sky", "count")}
    assert main(argv) == 1  # the serial check shrinks to the same requests
    capsys.readouterr()
    assert {p: load_repro(tmp_path / f"repro-{p}.json").request for p in ("sky", "count")} == serial


def test_quantize_shrinks_the_lossless_checks_failures_and_the_repro_replays(tmp_path, capsys):
    rc = main(["check", "--quantize", "int8-weight", "--runner", MUTANT, "--prompts", prompts_file(tmp_path),
               "--max-new-tokens", "6", "--no-progress", "--shrink", "--shrink-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1
    line = next(x for x in out.splitlines() if x.startswith("shrunk 'sky'"))
    assert "L 33, max new tokens 6, K 4 -> L 21, max new tokens 2, K 1" in line
    repro = load_repro(tmp_path / "repro-sky.json")
    assert "--quantize int8-weight" in repro.command and "--reference" not in repro.command
    assert main(split_line(repro.command)[1:] + ["--no-progress"]) == 1
    assert "length: runner emitted 3 tokens, rules fix 2" in capsys.readouterr().out


def test_a_forced_suite_case_ends_in_its_own_one_line_command(tmp_path, capsys):
    runner = "eagle3_check.mutants:last_proposal_never_accepted"
    rc = main(["check", "--suite", "acceptance/full", "--fixture", "tiny-llama", "--runner", runner, "--shrink",
               "--shrink-dir", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out.splitlines()
    assert rc == 1
    at = out.index(next(x for x in out if x.startswith("acceptance/full: not shrunk: its draft is forced")))
    assert out[at + 1].startswith("  kept: the whole case (its draft is forced")
    command = out[at + 2].removeprefix("  repro: ")
    assert command == f"eagle3-check check --fixture tiny-llama --runner {runner} --suite acceptance/full"
    assert main(split_line(command)[1:] + ["--no-progress"]) == 1
