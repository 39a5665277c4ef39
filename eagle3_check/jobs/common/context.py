"""`CheckContext`: the world of one check, assembled from a `Config` once, each piece on first use.

The program, tokenizer and target (jobs/common/world.py), the run options, the reference (HF or
the program's own target methods), the tolerance and tie budget of the program's dtype (a
real fixture has its own measured budget), the prompt set (shuffled, sharded), the runner
under test (reference, device, plug-in, binary; in-process ones under the request time
limit) and the expected tau (draft health). A `.pte` carries its own dtype: once it has
loaded, `cfg.dtype` is the program's, and the tolerance, budget and reference follow it.
Every command (check, suites, golden, gate, run) and the pytest plugin's state read their
world from here.
"""

from __future__ import annotations

import sys
from functools import cached_property

from eagle3_check.errors import InputError
from eagle3_check.jobs.common import world


class CheckContext:
    """`build(cfg) -> ProgramSetup` replaces `world.build_program` for a front end that builds its
    own program (the pytest plugin: a `.pte` as loaded, CPU float32); `limit_flag` is the flag a
    request over its time limit names; `log` takes the --shuffle order line (stderr); `loaded`: the
    runner `cfg.runner` names, already loaded by the front end with its own flags in its errors (the
    pytest plugin's `--eagle3-runner-bin`), used as `loaded_runner`."""

    def __init__(self, cfg, build=None, limit_flag: str | None = None, log=None, loaded=None):
        self.cfg = cfg
        self.build = build
        self.limit_flag = limit_flag
        self.log = log or (lambda line: print(line, file=sys.stderr))
        self._loaded = loaded

    # --- the program ------------------------------------------------------------------------

    @cached_property
    def setup(self) -> world.ProgramSetup:
        if self.build is not None:
            return self.build(self.cfg)
        setup = world.build_program(self.cfg)
        if self.cfg.pte:  # the tolerance, tie budget and HF reference follow the program's dtype
            self.cfg = self.cfg.replace(dtype=setup.program.dtype)
        if self.cfg.aoti:  # and an AOTI package's device: the HF reference and the runner run there
            self.cfg = self.cfg.replace(dtype=setup.program.dtype, device=str(setup.program.device))
        return setup

    @property
    def program(self):
        return self.setup.program

    @property
    def tokenizer(self):
        return self.setup.tokenizer

    @property
    def fixture(self) -> str | None:
        """The fixture this program is (a .pte names its own), else --fixture."""
        return self.setup.info.get("fixture") or self.cfg.fixture

    def metadata(self):
        from eagle3_check.program.contract import read_metadata

        return read_metadata(self.program.metadata())

    # --- how it is run and judged ---------------------------------------------------------

    @cached_property
    def resolved(self):
        """runners.defaults.ResolvedOptions: the run options and where each came from."""
        return world.resolved_options(self.cfg)

    @property
    def options(self):
        return self.resolved.options

    @cached_property
    def tie_rule(self):
        """The tolerance and budget of this run and where they came from (judge/tie_rule.py: one
        rule for every job): --tie-budget, the calibration of a user's target in a reduced precision
        (measured on the first check, then read from the cache), or the built-in constants."""
        from eagle3_check.judge.tie_rule import tie_rule

        if self.cfg.exact:  # identity: tolerance 0, budget 0 (jobs/common/exact.py)
            from eagle3_check.jobs.common.exact import exact_rule

            return exact_rule(self.cfg.dtype)
        if getattr(self.cfg, "reference", "hf") == "self":  # no margins, never a tie (judge/self_ref.py)
            from eagle3_check.judge.tie_rule import self_rule

            return self_rule(self.cfg.dtype)
        return tie_rule(self.cfg.dtype, self.cfg.fixture, self.cfg.tie_budget, self.calibration)

    @cached_property
    def calibration(self):
        """The calibration of a user's target in a reduced precision (jobs/common/calibrate.py: --target, or
        a fixture the constants were not measured on; check, golden record, the pytest plugin); None where
        the built-in constants apply: float32, a .pte, exact mode, and the fixtures they were measured on."""
        from eagle3_check.jobs.common.calibrate import calibration_for, wants_calibration

        return calibration_for(self) if wants_calibration(self) else None

    @property
    def tolerance(self):
        return self.tie_rule.tolerance

    @property
    def tie_budget(self):
        """A share of judged positions (--tie-budget, the constants) or a calibrated binomial bound."""
        return self.tie_rule.budget

    @cached_property
    def reference(self):
        """The greedy reference: HF (Transformers) or the program's own target methods."""
        if self.cfg.reference == "self":
            from eagle3_check.judge.self_ref import SelfReference

            return SelfReference(self.program)
        return self.hf_reference()

    @cached_property
    def target_dir(self):
        """The target's HF directory: the program's (a .pte's sidecar names it), --target's or the fixture's."""
        return world.request_world(self.cfg)[1]

    @cached_property
    def target_record(self) -> dict:
        """The target directory's provenance record (report/provenance.py's file_record: every file read
        and hashed): computed once, for the calibration's key and the report's provenance alike (a
        second read of an 8B target's weights is tens of seconds)."""
        from eagle3_check.report.provenance import file_record

        return file_record(self.target_dir)

    def hashed(self) -> dict:
        """{resolved path: record} of what this context already hashed (`report_provenance`'s `records`)."""
        from pathlib import Path

        rec = self.__dict__.get("target_record")
        return {str(Path(self.target_dir).resolve()): rec} if rec else {}

    def hf_reference(self):
        """HF's own forward over the target: on the weights the program already holds when it is our
        unquantized eager program in the judged dtype (judge/shared.py: one copy), else loaded."""
        import torch

        from eagle3_check.judge.hf import HFReference
        from eagle3_check.judge.shared import shareable, shared_reference

        dtype = getattr(torch, self.cfg.dtype)
        model = shareable(self.setup.program, self.cfg.device, dtype) if "setup" in self.__dict__ else None
        if model is not None:
            return shared_reference(model, self.cfg.device)
        return HFReference(self.target_dir, self.cfg.device, dtype)

    @cached_property
    def runner_name(self) -> str:
        return self.cfg.runner or world.default_runner(self.cfg.device)

    @cached_property
    def loaded_runner(self):
        """The runner as loaded (runners/plugin.py) in this process: a PluginRunner, or a runner of the seam
        that runs its program file (runners.binary.runner.ExecRunner).
        An isolated runner (`isolated`) is never loaded here: `runner` is its child."""
        if self._loaded is not None:
            return self._loaded
        from eagle3_check.runners.plugin import load_runner

        return load_runner(self.runner_name)

    @property
    def capabilities(self):
        """What the runner lets the harness observe and control (runners/seam.py), from its spec alone, so
        nothing is imported to tell: a route adapts to these, never to the runner's kind."""
        from eagle3_check.runners.seam import kind_of

        return kind_of(self.runner_name, self.isolated)

    @property
    def isolated(self) -> bool:
        """Does the runner run in its own process (runners/isolate/policy.wants_isolation: a plug-in unless
        --in-process; ours with --isolate)? Decided from the spec, before anything loads it."""
        from eagle3_check.runners.isolate.policy import wants_isolation

        return wants_isolation(self.runner_name, self.cfg.isolate, self.cfg.in_process)

    @cached_property
    def runner(self):
        """The runner under test: an isolated one in its child process, the harness's program called over
        the pipe (runners/isolate/remote.py), under the per-request limit; an in-process one under that limit
        (`watchdog.time_limited`); a binary with --request-timeout as its timeout."""
        if self.isolated:
            from eagle3_check.jobs.common.isolation import remote_runner

            self._isolated_runner = remote_runner(self.runner_name, self.cfg.runner_timeout, self.limit_flag,
                                                  self.cfg.runner_profile, self.cfg.exact)
            return self._isolated_runner
        runner = self.loaded_runner
        if self.capabilities.program_file:  # a process already: its own timeout and profile (runners/binary)
            from eagle3_check.runners.binary.runner import request_timeout

            t = request_timeout(self.cfg.runner_timeout)
            if t is not None:
                runner.timeout = t
            if self.cfg.runner_profile:
                runner.set_profile(self.cfg.runner_profile)
            return runner
        if self.cfg.runner_profile:  # an in-process runner judged by (ours: run by) the given profile
            from eagle3_check.runners.profiles import declare

            declare(runner, self.cfg.runner_profile)
        return limited(runner, self.runner_name, self.cfg.runner_timeout, self.limit_flag)

    def close(self) -> None:
        """Ends the isolated runner's process, if one was started (its output stays in its records)."""
        runner = self.__dict__.get("_isolated_runner")
        if runner is not None:
            runner.close()

    # --- what is checked --------------------------------------------------------------------

    def prompts(self, fixture: str | None = None) -> list:
        """The prompt set: --prompts, else the fixture's own (a .pte names its fixture); with
        --target/--draft there is no fixture, so --prompts is required. Shuffled by --shuffle
        (its order logged), then the --shard's share."""
        from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture, load_prompts

        cfg = self.cfg
        if cfg.prompts:
            prompts = load_prompts(cfg.prompts)
        elif cfg.target:
            raise no_prompts()
        else:
            prompts = load_fixture(fixture or self.fixture or DEFAULT_FIXTURE).prompts()
        if cfg.check.shuffle is not None:
            from eagle3_check.jobs.check.prompt_set import shuffled_prompts

            prompts = shuffled_prompts(prompts, cfg.check.shuffle)
            self.log(f"order: --shuffle {cfg.check.shuffle}: {', '.join(p.id for p in prompts)}")
        return shard_of(cfg.check.shard, prompts)

    def expected_tau(self, k: int, fixture: str | None = None) -> tuple[float | None, str | None]:
        """--expect-tau X, else the fixture card's tau when this run is the card's own run."""
        cfg = self.cfg
        if cfg.check.expect_tau is not None:
            return cfg.check.expect_tau, "--expect-tau"
        if not fixture or cfg.target or any(getattr(cfg, f) is not None for f in world.OVERRIDES):
            return None, None
        from eagle3_check.fixtures.card import read_card
        from eagle3_check.fixtures.registry import load_fixture
        from eagle3_check.jobs.check.draft_health import card_expectation
        from eagle3_check.runners.defaults import resolve_options

        fx = load_fixture(fixture)  # the card measured the fixture's own request, from its own files:
        request = resolve_options(world.load_tokenizer(fx.tokenizer_path), fx.target_dir, {}).options
        from eagle3_check.inputs import shown_path

        return card_expectation(read_card(fx), shown_path(fx.card_path), k, self.options,
                                own_prompts=not cfg.prompts and not cfg.check.shard, request=request)


def limited(runner, spec: str, timeout: float | None, flag: str | None = None):
    """The in-process runner under a per-request limit (`watchdog.TimeLimited`): `timeout` when
    given; else a plug-in gets the default (300 s) and our own runners (reference, device),
    which may take long on a large model on CPU, run unlimited. `flag`: the option the limit's
    message names (default `--request-timeout`)."""
    from eagle3_check.runners.watchdog import time_limited

    return time_limited(runner, spec, timeout) if flag is None else time_limited(runner, spec, timeout, flag)


def shard_of(shard: str | None, prompts: list) -> list:
    """`--shard I/N`: the prompts of that shard (jobs/check/workers.py), else all."""
    if not shard:
        return prompts
    from eagle3_check.jobs.check.workers import parse_shard, shard_indices

    return [prompts[i] for i in shard_indices(len(prompts), *parse_shard(shard))]


def no_prompts() -> InputError:
    return InputError("--target/--draft given without --prompts", "a prompt set JSON file",
                      "pass --prompts FILE (see fixtures/prompts.json for the format)")
