"""The `provenance` block of a `--json` report, from the `Config` the report was made with
(report/provenance.py): the options, the runner's RunOptions, package versions and the sha256
of every input file the options name, plus the fixture's target, draft, tokenizer, card and
prompt set when one is used."""

from __future__ import annotations


def report_provenance(cfg, fixture: str | None = None, run_options=None, extra_files: dict | None = None,
                      records: dict | None = None) -> dict:
    """`records`: {resolved path: file_record} already hashed in this run (CheckContext.hashed: the
    calibrated target), reused rather than read again."""
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.report.provenance import provenance

    files: dict = {flag: cfg.value(flag) for flag in ("pte", "aoti", "prompts", "target", "draft", "tokenizer",
                                                      "golden", "baseline")}
    for i, g in enumerate(cfg.golden.goldens):
        files[f"golden {i}" if i else "golden"] = g
    if fixture:
        fx = load_fixture(fixture)
        files.update({"fixture target": fx.target_dir, "fixture draft": fx.draft_dir,
                      "fixture tokenizer": fx.tokenizer_path, "fixture card": fx.card_path})
        if not cfg.prompts:
            files["prompts"] = fx.prompts_path
    files.update(extra_files or {})
    return provenance(cfg.options(), files, run_options, records)
