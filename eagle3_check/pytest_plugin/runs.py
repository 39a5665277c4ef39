"""An item's run through the session's one runner, routed by its capabilities (`runners.seam.Capabilities`)
as the CLI's jobs route them, never by its kind.

| item | the runner takes the harness's program | it runs its own program file (`program_file`) |
|---|---|---|
| an edge case | `jobs.suites.execute.run_case` (forcing, patched programs) | `jobs.suites.binary.run_exec_case` (skipped or unforced) |
| a prompt, `eagle3_check_request` | `jobs.check.prompt_set.run_check` | `jobs.check.binary.run_exec_check` |
| a golden prompt | its run (`golden_run`, once) diffed by `jobs.golden.diff` | `binary.golden_diffs` (`jobs.golden.binary`) |
| a baseline key | its golden's runs counted | skipped where it shows no call log (`call_log`: `Collected.baseline_golden`) |

`Runs` is a part of `state.Eagle3State`: it reads the state's program, tokenizer, reference, tolerance,
tie budget, `runner`, `capabilities` and `ctx`. A golden prompt runs once per session: its golden item
and the metrics-baseline item of its key share the run (`golden_run`).
"""

from __future__ import annotations

import dataclasses
import warnings
from functools import cached_property

from eagle3_check.errors import InputError
from eagle3_check.pytest_plugin.collected import NONE


class Runs:
    @cached_property
    def suite_env(self):
        from eagle3_check.jobs.suites.execute import SELF, SuiteEnv

        ref = SELF if self.settings["reference"] == "self" else self.reference
        texts = [p.text for p in self._suite_prompts()]
        if self.settings["pte"]:
            return SuiteEnv.fixed(self.program, self.tokenizer, ref, texts, self.tolerance, fixture=self.fixture_name)
        return SuiteEnv(self.program_for, self.tokenizer, ref, texts, self.tolerance, fixture=self.fixture_name)

    def _suite_prompts(self) -> list:
        """The texts cases pick their prompts from: the fixture's, else the prompt set."""
        if self.fixture is not None and self.settings["prompts"] in (None, NONE):
            return self.fixture.prompts()
        if not self.prompts:
            raise InputError("--eagle3-prompts none with --eagle3-target", "a prompt set the edge cases pick prompts from",
                             "pass --eagle3-prompts FILE (or --eagle3-suite none)")
        return self.prompts

    @property
    def resolved_options(self):  # as `check` resolves them for this tokenizer and target (runners/defaults.py)
        return self.ctx.resolved

    def options(self, **fields):  # a request's own fields on top, as given (no role rules)
        return dataclasses.replace(self.resolved_options.options, **fields)

    def numerics(self):
        """The block an item's runs go in: exact mode's kernels with --eagle3-numerics exact (the reference's
        model switched to their attention, jobs/common/exact.py), else nothing."""
        from eagle3_check.jobs.common.exact import scope

        return scope(self.cfg, self.reference if self.cfg.exact else None)

    def run_case(self, case):
        """One edge case through the runner, judged as `check --suite` judges it (a CaseResult): on the
        program's file for a runner of its own program file (its metadata copies in the session's scratch
        directory), else on the case's own program, forced and patched as the case asks."""
        if self.capabilities.program_file:
            from eagle3_check.jobs.suites.binary import run_exec_case

            return run_exec_case(case, self.suite_env, self.runner, self.tmp_dir)
        from eagle3_check.jobs.suites.execute import run_case

        with self.numerics():  # --eagle3-numerics exact: the case on the shape-invariant kernels
            return run_case(case, self.suite_env, self.runner)

    def check_request(self, prompt, prompt_id: str = "request", **fields):
        """One request through the runner under test, judged as `check` judges it: a RequestOutcome
        (a `jobs.check.binary.ExecOutcome` for a runner of its own program file, judged by what it prints)."""
        from eagle3_check.fixtures.registry import Prompt

        if "stop_ids" in fields:
            fields["stop_ids"] = tuple(fields["stop_ids"])
        prompts, options = [Prompt(prompt_id, prompt)], self.options(**fields)
        if self.capabilities.program_file:
            from eagle3_check.jobs.check.binary import run_exec_check

            report = run_exec_check(self.runner, self.program, self.tokenizer, self.reference, prompts, options,
                                    tolerance=self.tolerance, tie_budget=self.tie_budget)
            return report.outcomes[0]
        from eagle3_check.jobs.check.prompt_set import run_check

        with self.numerics():
            report = run_check(self.program, self.tokenizer, self.reference, prompts, options, self.tolerance,
                               runner=self.runner, tie_budget=self.tie_budget)
        return report.outcomes[0]

    def golden_skip(self, golden) -> str | None:
        """Why the runner cannot run this golden on the program, past what collection found (`goldens`):
        a runner of its own program file is asked K and the .pte's range (`binary.golden_why`); None: it can."""
        if not self.capabilities.program_file:
            return None
        from eagle3_check.pytest_plugin.binary import golden_why

        return golden_why(self, golden)

    def golden_run(self, golden, prompt):
        """One golden prompt run with the golden's options, once per session (a RunResult)."""
        from eagle3_check.runners.crash import RunCrash, crashed_run, guarded_run

        key = (golden.key.stem, prompt.prompt_id)
        if key not in self._runs:
            opts = golden.run_options()
            try:
                with self.numerics():
                    run = guarded_run(self.runner, self.program, self.tokenizer, list(prompt.prompt_ids), opts)
            except RunCrash as e:
                run = crashed_run(list(prompt.prompt_ids), golden.key.k, opts.max_new_tokens)
                run.notes.append(str(e))
            self._runs[key] = run
        return self._runs[key]

    def golden_diffs(self, golden, prompt) -> list[str]:
        """One golden prompt re-run and compared exactly: one line per difference ([]: identical)."""
        if self.capabilities.program_file:  # by what it prints, on its .pte (jobs.golden.binary)
            from eagle3_check.pytest_plugin.binary import golden_diffs

            return golden_diffs(self, golden, prompt)
        from eagle3_check.jobs.golden.diff import diff_golden

        run = self.golden_run(golden, prompt)
        notes: list[str] = []
        diffs = diff_golden({prompt.prompt_id: run}, dataclasses.replace(golden, prompts=[prompt]),
                            self.run_backend, notes, self.run_sha256)
        for note in notes:  # acceptance of an eager golden on a .pte (jobs.golden.diff.stats_exact): shown, not failed
            warnings.warn(note, stacklevel=2)
        return [d.message for d in diffs]

    @property
    def run_backend(self) -> str | None:
        """The backend the goldens run on: "pte" with --eagle3-pte, else the golden's own (None)."""
        return "pte" if self.settings.get("pte") else None

    @property
    def run_sha256(self) -> str | None:
        """The sha256 of the --eagle3-pte program (a pte golden's acceptance is exact on its own program)."""
        from eagle3_check.jobs.golden.verify import program_sha256

        return program_sha256(self.settings.get("pte"))

    def metric_diffs(self, golden) -> list:
        """The metrics of the golden's runs (shared with its golden items) against the baseline's
        entry of its key: one MetricDiff per differing metric ([]: identical)."""
        from eagle3_check.jobs.golden.metrics import compare_metrics, compute_metrics
        from eagle3_check.runners.crash import CRASHED

        runs = [self.golden_run(golden, p) for p in golden.prompts]
        from eagle3_check.jobs.golden.verify import gated_metrics

        now = compute_metrics([r for r in runs if r.stop_reason != CRASHED], golden.key.k)
        diffs, note = gated_metrics(golden.key, self.run_backend,
                                    compare_metrics(golden.key.stem, now, self.baseline.get(golden.key.stem)),
                                    golden.program_sha256, self.run_sha256)
        if note:  # acceptance's metrics of an eager golden on a .pte (jobs.golden.diff.stats_exact): shown, not failed
            warnings.warn(note, stacklevel=2)
        return diffs
