"""One test session's program, tokenizer, reference and runner, built on first use.

`from_settings` checks the options (files exist, values in range) without loading anything, so a
wrong option is a one-line usage error before collection; the program loads when the first item
or fixture needs it (once per process: under pytest-xdist once per worker).

The program is the `.pte` (`--eagle3-pte`, CPU float32; with `--eagle3-data-path`, loaded with
its `.ptd`), or without one the embedded fixture's eager program (CPU float32). The reference and
tokenizer of a `.pte` are the ones `check --pte` uses (`program.sidecar.reference_for_pte`):
`--eagle3-target`/`--eagle3-tokenizer`, else the fixture (`--eagle3-fixture`, else the one its
export sidecar names).

The runner under test is a plug-in in its own process (`--eagle3-runner`, runners/isolate/: the session's
program called over the pipe), the reference runner in process (the default; limited per
request as `check --request-timeout` limits it, `watchdog.time_limited`) or a runner binary
(`--eagle3-runner-bin`, `runners.binary.runner`) that runs the `.pte` file itself, judged by `binary/`
as `check --runner exec:` judges it. A golden prompt runs once per session: its golden item and
the metrics-baseline item of its key share the run (`golden_run`).
"""

from __future__ import annotations

import dataclasses
import tempfile
import warnings
from functools import cached_property
from pathlib import Path

from eagle3_check.errors import InputError, OptionError

DTYPE = "float32"  # the eager fixture program's default dtype (--eagle3-dtype); a .pte runs its own
MAX_NEW = 64  # `eagle3-check check`'s default
NONE = "none"


class Eagle3State:
    def __init__(self, settings: dict[str, str | None], exec_runner=None, timeout: float | None = None):
        from eagle3_check.jobs.common.context import CheckContext
        from eagle3_check.pytest_plugin.binary import TIMEOUT_FLAG

        self.settings = settings
        self.max_new = int(settings["max_new_tokens"] or MAX_NEW)
        self.exec_runner = exec_runner  # runners.binary.runner.ExecRunner with --eagle3-runner-bin, else None
        self.timeout = timeout  # --eagle3-request-timeout in seconds (None: not given)
        self.cfg = plugin_config(settings, self.max_new, timeout)
        # the world `check` assembles, from this session's Config (jobs/common/context.py); the program
        # is the plugin's own (`_build`): a .pte as loaded, or the fixture's eager program per spec
        self.ctx = CheckContext(self.cfg, build=self._build, limit_flag=TIMEOUT_FLAG)
        self._runs: dict[tuple[str, str], object] = {}  # (golden stem, prompt id) -> RunResult
        self._tmp: tempfile.TemporaryDirectory | None = None

    @classmethod
    def from_settings(cls, s: dict[str, str | None]) -> Eagle3State:
        """Checks every option before anything loads; a one-line error names the first wrong one."""
        for key, want in (("pte", "is_file"), ("data_path", "is_file"), ("target", "is_dir"), ("tokenizer", "is_file"),
                          ("prompts", "is_file"), ("goldens", "exists"), ("baseline", "is_file")):
            v = s[key]
            if v and v != NONE and not getattr(Path(v), want)():
                kind = {"is_file": "an existing file", "is_dir": "an existing directory"}.get(want, "an existing path")
                flag = f"--eagle3-{key.replace('_', '-')}"
                raise InputError(f"{flag} {v} does not exist", kind, f"fix the path given to {flag}")
        if s["data_path"] and not s["pte"]:  # as `check --data-path` without --pte
            raise InputError(f"--eagle3-data-path {s['data_path']} without --eagle3-pte",
                             "--eagle3-data-path with the .pte it belongs to",
                             "add --eagle3-pte FILE.pte, or drop --eagle3-data-path")
        if s["target"] and s["fixture"]:
            raise InputError("--eagle3-fixture with --eagle3-target", "one or the other", "drop one of them")
        if s["target"] and not s["pte"]:
            raise InputError("--eagle3-target without --eagle3-pte", "a .pte to judge against the target",
                             "pass --eagle3-pte FILE, or --eagle3-fixture NAME for an embedded fixture")
        if s.get("dtype") not in (None, "float32", "bfloat16"):
            raise OptionError(f"--eagle3-dtype {s['dtype']}", "float32 or bfloat16", "pass float32 or bfloat16")
        if s.get("numerics") not in (None, "normal", "exact"):
            raise OptionError(f"--eagle3-numerics {s['numerics']}", "normal or exact", "pass normal or exact")
        for flag, given in (("--eagle3-pte", s["pte"]), ("--eagle3-runner-bin", s.get("runner_bin"))):
            if s.get("numerics") == "exact" and given:  # as `check --exact` refuses them (jobs/common/exact.py)
                raise OptionError(f"--eagle3-numerics exact with {flag}", "an eager fixture program (exact mode "
                                  "replaces aten's kernels; a .pte and a binary run their own)",
                                  f"drop {flag} (test the fixture's eager program) or --eagle3-numerics")
        if s["reference"] not in (None, "hf", "self"):
            raise OptionError(f"--eagle3-reference {s['reference']}", "hf or self", "pass hf or self")
        from eagle3_check.runners.seam import kind_of

        if kind_of(s["runner"]).program_file:
            raise OptionError(f"--eagle3-runner {s['runner']}", "an in-process runner module:factory",
                              "pass a runner binary as --eagle3-runner-bin CMD")
        n = s["max_new_tokens"]
        if n is not None and not (n.isdigit() and int(n) >= 1):
            raise OptionError(f"--eagle3-max-new-tokens {n}", "an integer >= 1", "pass e.g. 64")
        from eagle3_check.pytest_plugin.binary import TIMEOUT_FLAG, exec_runner_from
        from eagle3_check.runners.binary.runner import request_timeout

        timeout = request_timeout(s["request_timeout"], TIMEOUT_FLAG)  # `check --request-timeout`'s rule
        return cls(s, exec_runner_from(s), timeout)

    # --- what the program is judged with (jobs.common.context.CheckContext) ---------------------

    @cached_property
    def _source(self) -> tuple:
        """(fixture or None, target_dir, tokenizer path)."""
        from eagle3_check.fixtures.registry import load_fixture

        s = self.settings
        if s["pte"]:
            from eagle3_check.program.sidecar import reference_for_pte

            return reference_for_pte(s["pte"], s["fixture"], s["target"], s["tokenizer"])
        fx = load_fixture(s["fixture"])
        return fx, fx.target_dir, Path(s["tokenizer"]) if s["tokenizer"] else fx.tokenizer_path

    @property
    def fixture(self):
        return self._source[0]

    @property
    def fixture_name(self) -> str | None:
        return self.fixture.name if self.fixture else None

    def _build(self, cfg):
        """The context's program: the .pte as given (CPU float32), else the fixture's eager program."""
        from eagle3_check.jobs.common.world import ProgramSetup

        if cfg.pte:
            from eagle3_check.program.pte_backend import PteBackend

            program = PteBackend(cfg.pte, cfg.data_path)
        else:
            program = self.program_for({})
        return ProgramSetup(program, self.tokenizer, Path(self._source[1]),
                            {"fixture": self.fixture_name} if self.fixture else {"target": str(self._source[1])})

    @property
    def program(self):
        return self.ctx.program

    def program_for(self, spec: dict[str, int]):
        """The eager fixture program for an edge case's spec wish, built once per spec."""
        key = tuple(sorted(spec.items()))
        if key not in self._built:
            from eagle3_check.jobs.common.world import set_threads
            from eagle3_check.program.eager import EagerBackend

            set_threads("cpu")  # tiny models: one thread is fastest (unless OMP_NUM_THREADS is set)
            self._built[key] = EagerBackend.from_fixture(self.fixture, "cpu", self.cfg.dtype, **spec)
        return self._built[key]

    @cached_property
    def _built(self) -> dict:
        return {}

    @cached_property
    def tokenizer(self):
        from eagle3_check.jobs.common.world import load_tokenizer

        return load_tokenizer(self._source[2])

    @property
    def reference(self):
        return self.ctx.reference

    @property
    def tolerance(self):
        return self.ctx.tolerance

    @property
    def tie_budget(self) -> float:
        return self.ctx.tie_budget

    def judged_rule(self):
        """The TieRule the items used (judge/tie_rule.py), or None where none was needed yet."""
        return self.ctx.__dict__.get("tie_rule")

    @property
    def runner(self):
        """The runner under test, under `check --request-timeout`'s rule (`watchdog.time_limited`):
        --eagle3-request-timeout when given; else 300 s for a plug-in, none for the reference runner.
        A plug-in runs in its own process (runners/isolate/), started on first use; the reference runner here."""
        return self.ctx.runner

    @property
    def runner_name(self) -> str:
        return self.exec_runner.spec if self.exec_runner else self.settings["runner"] or "reference"

    @property
    def tmp_dir(self) -> Path:
        """A directory for this session's scratch files (a binary's `.pte` copies without a key)."""
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="eagle3-plugin-")
        return Path(self._tmp.name)

    def close(self) -> None:
        self.ctx.close()  # an isolated plug-in's process
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

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
        """The file the prompt set comes from (the fixture's, registry.Fixture.prompts_path)."""
        if self.settings["prompts"] not in (None, NONE):
            return Path(self.settings["prompts"])
        return self.fixture.prompts_path

    def cases(self) -> list:
        from eagle3_check.suites import suite_cases

        name = self.settings["suite"] or "edge"
        return [] if name == NONE else suite_cases(name)

    @cached_property
    def _golden_files(self) -> list:
        """[(path, Golden)] of every golden given (--eagle3-goldens, default golden/), any fixture."""
        from eagle3_check.jobs.golden.file import golden_root, load_golden
        from eagle3_check.jobs.golden.verify import golden_paths

        g = self.settings["goldens"]
        if g == NONE or (g is None and not golden_root().is_dir()):
            return []
        return [(path, load_golden(path)) for path in golden_paths([g] if g else [])]

    def goldens(self) -> list:
        """[(path, Golden, why it cannot run here or None)] of this program's fixture."""
        if self.fixture is None:
            return []
        return [(path, g, self._unavailable(g.key)) for path, g in self._golden_files
                if g.key.fixture == self.fixture_name]

    def _unavailable(self, key) -> str | None:
        from eagle3_check.jobs.golden.verify import mode_skip, unavailable

        why = unavailable(key, self.settings["pte"]) or mode_skip(key, self.cfg_numerics)
        if why is None and not self.settings["pte"] and (key.device, key.dtype) != ("cpu", self.cfg.dtype):
            why = f"a golden for {key.device} {key.dtype}; this eager program runs cpu {self.cfg.dtype}"
        return why

    @property
    def cfg_numerics(self) -> str:
        return "exact" if self.cfg.exact else "normal"

    def numerics(self):
        """The block an item's runs go in: exact mode's kernels with --eagle3-numerics exact (the reference's
        model switched to their attention, jobs/common/exact.py), else nothing."""
        from eagle3_check.jobs.common.exact import scope

        return scope(self.cfg, self.reference if self.cfg.exact else None)

    @cached_property
    def baseline_path(self) -> Path | None:
        b = self.settings["baseline"]
        return Path(b) if b else None

    @cached_property
    def baseline(self) -> dict[str, dict]:
        """The metrics baseline's entries (golden key stem -> metrics); {} without --eagle3-baseline."""
        from eagle3_check.jobs.golden.metrics import load_baseline

        return load_baseline(self.baseline_path) if self.baseline_path else {}

    def baseline_golden(self, stem: str) -> tuple:
        """(Golden or None, why the key's metrics cannot be gated here or None)."""
        from eagle3_check.jobs.golden.file import golden_root

        g = self.settings["goldens"]
        where = "--eagle3-goldens none" if g == NONE else g or str(golden_root())
        golden = next((gold for _, gold in self._golden_files if gold.key.stem == stem), None)
        if golden is None:
            return None, f"no golden {stem} among the goldens given ({where}): nothing to count"
        if golden.key.fixture != self.fixture_name:
            return golden, f"a golden of fixture {golden.key.fixture}; this program is {self.fixture_name}"
        if self.exec_runner is not None:
            from eagle3_check.jobs.golden.binary import METRICS_NOT_GATED

            return golden, METRICS_NOT_GATED
        return golden, self._unavailable(golden.key)

    # --- running ----------------------------------------------------------------------------

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

    def check_request(self, prompt, prompt_id: str = "request", **fields):
        """One request through the runner under test, judged as `check` judges it: a RequestOutcome
        (a `jobs.check.binary.ExecOutcome` for a runner binary)."""
        from eagle3_check.fixtures.registry import Prompt

        if "stop_ids" in fields:
            fields["stop_ids"] = tuple(fields["stop_ids"])
        prompts, options = [Prompt(prompt_id, prompt)], self.options(**fields)
        if self.exec_runner is not None:
            from eagle3_check.jobs.check.binary import run_exec_check

            report = run_exec_check(self.exec_runner, self.program, self.tokenizer, self.reference, prompts, options,
                                    tolerance=self.tolerance, tie_budget=self.tie_budget)
            return report.outcomes[0]
        from eagle3_check.jobs.check.prompt_set import run_check

        with self.numerics():
            report = run_check(self.program, self.tokenizer, self.reference, prompts, options, self.tolerance,
                               runner=self.runner, tie_budget=self.tie_budget)
        return report.outcomes[0]

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
        if self.exec_runner is not None:
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


def plugin_config(s: dict[str, str | None], max_new: int, timeout: float | None):
    """The session's `Config`, from the options `from_settings` checked (their errors name the
    --eagle3-* flags): CPU, float32 unless --eagle3-dtype, exact mode with --eagle3-numerics exact, the
    runner options `check` gives a request of max_new tokens."""
    from eagle3_check.jobs.common.config import Config

    return Config.build({"command": "pytest", "fixture": s["fixture"], "target": s["target"], "tokenizer": s["tokenizer"],
                         "pte": s["pte"], "data_path": s["data_path"], "device": "cpu",
                         "dtype": s.get("dtype") or DTYPE, "exact": s.get("numerics") == "exact",
                         "max_new_tokens": max_new, "reference": s["reference"] or "hf",
                         "runner": s["runner"] or "reference", "runner_timeout": timeout}, check=False)
