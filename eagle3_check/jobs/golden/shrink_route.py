"""`golden verify --shrink` on a Config: each golden prompt whose tokens differ shrunk
(jobs/golden/shrink.py: the prompt kept, max new tokens and K smaller, the same divergence from
the recorded tokens), a repro file each beside the report. The repro command is `check` with the
golden's program and run options (`--prompt-ids`, no template applied): the reference that recorded
the golden judges the same tokens; the file's `expected` is the golden's recorded prefix.
"""

from __future__ import annotations

import sys


def golden_flag_values(golden, pte: str | None, data_path: str | None) -> dict:
    """The options (by flag name) that rebuild a golden's program and run options."""
    from eagle3_check.jobs.shrink_route import run_option_flags

    key = golden.key
    program = {"fixture": key.fixture, "device": key.device, "dtype": key.dtype}
    if key.backend == "pte":
        program.update(pte=pte, data_path=data_path)
    # the request is given as ids (no template applied): the template's prefix and suffix are not flags of it
    opts = {k: v for k, v in golden.options.items()
            if k not in ("max_new_tokens", "chain_len", "chat_prefix", "chat_suffix")}
    return {**program, **run_option_flags(opts)}


def shrink_goldens_and_write(cfg, outcome, runner, runner_name: str) -> list[str]:
    """Shrinks the failing golden prompts of `outcome` (a GateOutcome) within --shrink-budget; writes
    a repro file each; sets `outcome.shrunk` (stem -> prompt id -> the shrunk JSON); the lines to print."""
    if not cfg.shrink.enabled or not outcome.golden_diffs:
        return []
    from tqdm import tqdm

    from eagle3_check.jobs.golden.file import load_golden
    from eagle3_check.jobs.golden.shrink import shrink_golden_diffs
    from eagle3_check.jobs.golden.verify import golden_paths, program_for_key
    from eagle3_check.jobs.shrink_route import program_files_of, write_one
    from eagle3_check.shrink.repro import program_flags, program_record

    goldens = {g.key.stem: g for g in map(load_golden, golden_paths(list(cfg.golden.goldens)))}
    bar = tqdm(desc="shrink (golden)", unit="probe", file=sys.stderr, leave=False, delay=0.5,
               disable=cfg.no_progress or cfg.json)
    try:
        done = shrink_golden_diffs(outcome, goldens, lambda key: program_for_key(key, cfg.pte, cfg.data_path),
                                   runner, cfg.shrink.budget, on_probe=lambda *a: bar.update(1))
    finally:
        bar.close()
    lines: list[str] = []
    shrunk: dict = {}
    for g in done:
        name = f"{g.golden}:{g.prompt_id}"
        if g.result is None:
            lines.append(f"{name}: {g.note}")
            continue
        golden = goldens[g.golden]
        values = golden_flag_values(golden, cfg.pte, cfg.data_path)
        flags = program_flags(values)
        files = program_files_of(values)
        entry = {**g.result.to_json(), "prompt_text": None}
        lines += write_one(cfg, name, entry, g.result, flags, {"flags": flags, **program_record(files)},
                           runner_name, golden.run_options())
        shrunk.setdefault(g.golden, {})[g.prompt_id] = entry
    outcome.shrunk = shrunk
    return lines
