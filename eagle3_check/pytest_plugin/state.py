"""One test session's program, tokenizer, reference and runner, built on first use.

`from_settings` checks the options (files exist, values in range) without loading anything, so a
wrong option is a one-line usage error before collection; the program loads when the first item
or fixture needs it (once per process: under pytest-xdist once per worker).

The program is the `.pte` (`--eagle3-pte`, CPU float32), or without one the embedded fixture's
eager program (CPU float32). The reference and tokenizer of a `.pte` are the ones `check --pte`
uses (`program.pte_source`): `--eagle3-target`/`--eagle3-tokenizer`, else the
fixture (`--eagle3-fixture`, else the one its export sidecar names).
"""

from __future__ import annotations

import dataclasses
import os
from functools import cached_property
from pathlib import Path

from eagle3_check.errors import InputError, OptionError

DTYPE = "float32"  # a .pte and the plugin's eager fixture program both run float32 on CPU
MAX_NEW = 64  # `eagle3-check check`'s default
NONE = "none"


class Eagle3State:
    def __init__(self, settings: dict[str, str | None]):
        self.settings = settings
        self.max_new = int(settings["max_new_tokens"] or MAX_NEW)

    @classmethod
    def from_settings(cls, s: dict[str, str | None]) -> Eagle3State:
        """Checks every option before anything loads; a one-line error names the first wrong one."""
        for key, want in (("pte", "is_file"), ("target", "is_dir"), ("tokenizer", "is_file"),
                          ("prompts", "is_file"), ("goldens", "exists")):
            v = s[key]
            if v and v != NONE and not getattr(Path(v), want)():
                kind = {"is_file": "an existing file", "is_dir": "an existing directory"}.get(want, "an existing path")
                raise InputError(f"--eagle3-{key} {v} does not exist", kind, f"fix the path given to --eagle3-{key}")
        if s["target"] and s["fixture"]:
            raise InputError("--eagle3-fixture with --eagle3-target", "one or the other", "drop one of them")
        if s["target"] and not s["pte"]:
            raise InputError("--eagle3-target without --eagle3-pte", "a .pte to judge against the target",
                             "pass --eagle3-pte FILE, or --eagle3-fixture NAME for an embedded fixture")
        if s["reference"] not in (None, "hf", "self"):
            raise OptionError(f"--eagle3-reference {s['reference']}", "hf or self", "pass hf or self")
        if (s["runner"] or "").startswith("exec:"):
            raise OptionError(f"--eagle3-runner {s['runner']}", "an in-process runner module:factory",
                              "judge runner binaries with `eagle3-check check --runner exec:PATH`")
        n = s["max_new_tokens"]
        if n is not None and not (n.isdigit() and int(n) >= 1):
            raise OptionError(f"--eagle3-max-new-tokens {n}", "an integer >= 1", "pass e.g. 64")
        return cls(s)

    # --- what the program is judged with ---------------------------------------------------

    @cached_property
    def _source(self) -> tuple:
        """(fixture or None, target_dir, tokenizer path)."""
        from eagle3_check.fixtures.registry import load_fixture

        s = self.settings
        if s["pte"]:
            from eagle3_check.program.pte_source import reference_for_pte

            return reference_for_pte(s["pte"], s["fixture"], s["target"], s["tokenizer"])
        fx = load_fixture(s["fixture"])
        return fx, fx.target_dir, Path(s["tokenizer"]) if s["tokenizer"] else fx.tokenizer_path

    @property
    def fixture(self):
        return self._source[0]

    @property
    def fixture_name(self) -> str | None:
        return self.fixture.name if self.fixture else None

    @cached_property
    def program(self):
        if self.settings["pte"]:
            from eagle3_check.program.pte_backend import PteBackend

            return PteBackend(self.settings["pte"])
        return self.program_for({})

    def program_for(self, spec: dict[str, int]):
        """The eager fixture program for an edge case's spec wish, built once per spec."""
        key = tuple(sorted(spec.items()))
        if key not in self._built:
            import torch

            from eagle3_check.program.eager import EagerBackend

            if "OMP_NUM_THREADS" not in os.environ:  # tiny models: one thread is fastest (cli.common)
                torch.set_num_threads(1)
            self._built[key] = EagerBackend.from_fixture(self.fixture, "cpu", DTYPE, **spec)
        return self._built[key]

    @cached_property
    def _built(self) -> dict:
        return {}

    @cached_property
    def tokenizer(self):
        from eagle3_check.tokenizer import Tokenizer

        return Tokenizer.load(self._source[2])

    @cached_property
    def reference(self):
        if self.settings["reference"] == "self":
            from eagle3_check.reference.self_ref import SelfReference

            return SelfReference(self.program)
        import torch

        from eagle3_check.reference.hf import HFReference

        return HFReference(self._source[1], "cpu", getattr(torch, DTYPE))

    @cached_property
    def tolerance(self):
        from eagle3_check.reference.tolerance import tolerance_for

        return tolerance_for(DTYPE)

    @cached_property
    def tie_budget(self) -> float:
        from eagle3_check.reference.tolerance import default_budget

        return default_budget(DTYPE)

    @cached_property
    def runner(self):
        from eagle3_check.run.plugin import load_runner

        return load_runner(self.settings["runner"] or "reference")

    @property
    def runner_name(self) -> str:
        return self.settings["runner"] or "reference"

    # --- what is collected ------------------------------------------------------------------

    @cached_property
    def prompts(self) -> list:
        """The prompt set: --eagle3-prompts, else the fixture's ([] with 'none')."""
        from eagle3_check.fixtures.registry import load_prompts

        p = self.settings["prompts"]
        if p == NONE:
            return []
        if p:
            return load_prompts(p)
        if self.fixture is None:
            raise InputError("--eagle3-target without --eagle3-prompts", "a prompt set JSON file",
                             "pass --eagle3-prompts FILE (or --eagle3-prompts none)")
        return self.fixture.prompts()

    @property
    def prompts_path(self) -> Path:
        """The file the prompt set comes from (the fixture's own prompts.json, else the shared one)."""
        if self.settings["prompts"] not in (None, NONE):
            return Path(self.settings["prompts"])
        own = self.fixture.root / "prompts.json"
        return own if own.is_file() else self.fixture.root.parent / "prompts.json"

    def cases(self) -> list:
        from eagle3_check.suites import suite_cases

        name = self.settings["suite"] or "edge"
        return [] if name == NONE else suite_cases(name)

    def goldens(self) -> list:
        """[(path, Golden, why it cannot run here or None)] of this program's fixture."""
        from eagle3_check.gating.golden import golden_root, load_golden
        from eagle3_check.gating.golden_check import golden_paths, unavailable

        g = self.settings["goldens"]
        if g == NONE or self.fixture is None or (g is None and not golden_root().is_dir()):
            return []
        out = []
        for path in golden_paths([g] if g else []):
            golden = load_golden(path)
            key = golden.key
            if key.fixture != self.fixture_name:
                continue
            why = unavailable(key, self.settings["pte"])
            if why is None and not self.settings["pte"] and (key.device, key.dtype) != ("cpu", DTYPE):
                why = f"a golden for {key.device} {key.dtype}; this eager program runs cpu {DTYPE}"
            out.append((path, golden, why))
        return out

    # --- running ----------------------------------------------------------------------------

    @cached_property
    def suite_env(self):
        from eagle3_check.suites.execute import SELF, SuiteEnv

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

    def options(self, **fields):
        from eagle3_check.run.options import RunOptions

        return RunOptions(**{"max_new_tokens": self.max_new, **fields})

    def check_request(self, prompt, prompt_id: str = "request", **fields):
        """One request through the runner under test, judged as `check` judges it: a RequestOutcome."""
        from eagle3_check.fixtures.registry import Prompt
        from eagle3_check.gating.check import run_check

        if "stop_ids" in fields:
            fields["stop_ids"] = tuple(fields["stop_ids"])
        report = run_check(self.program, self.tokenizer, self.reference, [Prompt(prompt_id, prompt)],
                           self.options(**fields), self.tolerance, runner=self.runner, tie_budget=self.tie_budget)
        return report.outcomes[0]

    def golden_diffs(self, golden, prompt) -> list:
        """One golden prompt re-run with the golden's options and compared exactly: its GoldenDiffs."""
        from eagle3_check.gating.golden_diff import diff_golden
        from eagle3_check.run.crash import RunCrash, crashed_run, guarded_run

        opts = golden.run_options()
        try:
            run = guarded_run(self.runner, self.program, self.tokenizer, list(prompt.prompt_ids), opts)
        except RunCrash as e:
            run = crashed_run(list(prompt.prompt_ids), golden.key.k, opts.max_new_tokens)
            run.notes.append(str(e))
        return diff_golden({prompt.prompt_id: run}, dataclasses.replace(golden, prompts=[prompt]))
