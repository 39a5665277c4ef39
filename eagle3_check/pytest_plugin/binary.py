"""A runner binary under test (`--eagle3-runner-bin CMD`, `--eagle3-request-timeout S`).

The options are parsed by `runners.binary.runner` (`resolve_command`, `exec_runner`: the parser of
`check --runner exec:CMD --request-timeout S`); a binary runs the `.pte` file itself, so it needs
`--eagle3-pte`, and gets its `.ptd` (`--eagle3-data-path`) as the seed's `--data_path` (a template
without `{data_path}` is refused up front, as `check` refuses it). Parsed, it is the session's one
runner (`state.Eagle3State.runner`), whose capabilities route every item (runs.py): its suite cases
and prompts are judged by `jobs.suites.binary` / `jobs.check.binary`; its golden prompts here, by
`jobs.golden.binary`, with that module's rules for which goldens a binary can run.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from eagle3_check.errors import InputError, OptionError

FLAG, TIMEOUT_FLAG, DATA_FLAG = "--eagle3-runner-bin", "--eagle3-request-timeout", "--eagle3-data-path"


def exec_runner_from(s: dict[str, str | None]):
    """The runner binary the settings name (parsed and checked now, before anything loads), or None."""
    from eagle3_check.runners.binary.runner import exec_runner, resolve_command

    if not s["runner_bin"]:
        return None
    if not s["pte"]:
        raise InputError(f"{FLAG} without --eagle3-pte", "the .pte file the binary runs",
                         "pass --eagle3-pte FILE (export one with `eagle3-check export -o FILE.pte`)")
    if s["runner"]:
        raise OptionError(f"--eagle3-runner with {FLAG}", "one runner under test", "drop one of them")
    runner = exec_runner(resolve_command(s["runner_bin"], s["runner_bin_dir"], FLAG), s["request_timeout"], FLAG,
                         TIMEOUT_FLAG)
    runner.check_data(s["data_path"], DATA_FLAG)  # a template with no {data_path}: refused as `check` refuses it
    return runner


def golden_why(state, golden) -> str | None:
    """Why the binary cannot run this golden on the .pte (K outside its range, no --chain), or None."""
    from eagle3_check.jobs.golden.binary import exec_unavailable
    from eagle3_check.program.contract import read_metadata

    md = read_metadata(state.program.metadata())
    return exec_unavailable(golden.key, state.fixture_name, md, state.runner, Path(state.settings["pte"]))


def golden_diffs(state, golden, prompt) -> list[str]:
    """One golden prompt through the binary, compared exactly: one line per difference."""
    from eagle3_check.jobs.golden.binary import compare_prompt
    from eagle3_check.program.contract import read_metadata
    from eagle3_check.runners.binary.byte_pieces import BytePieces
    from eagle3_check.runners.binary.runner import binary_options, program_data

    md = read_metadata(state.program.metadata())
    golden.check_vocab(md.vocab_size or state.tokenizer.vocab_size)
    pieces = BytePieces.from_tokenizer_json(state.tokenizer.path)
    notes: list[str] = []
    diffs = compare_prompt(golden.key.stem, prompt, golden, state.runner, Path(state.settings["pte"]),
                           state.tokenizer, pieces, binary_options(golden.run_options(), md), {},
                           program_data(state.program), notes)
    for note in notes:  # acceptance of an eager golden on the .pte (jobs.golden.diff.stats_exact): shown, not failed
        warnings.warn(note, stacklevel=2)
    return diffs
