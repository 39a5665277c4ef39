"""One test session's program, tokenizer, reference and runner, built on first use.

`from_settings` checks the options (files exist, values in range) without loading anything, so a
wrong option is a one-line usage error before collection; the program loads when the first item
or fixture needs it (once per process: under pytest-xdist once per worker).

The program is the `.pte` (`--eagle3-pte`, CPU float32; with `--eagle3-data-path`, loaded with
its `.ptd`), or without one the embedded fixture's eager program (CPU float32). The reference and
tokenizer of a `.pte` are the ones `check --pte` uses (`program.sidecar.reference_for_pte`):
`--eagle3-target`/`--eagle3-tokenizer`, else the fixture (`--eagle3-fixture`, else the one its
export sidecar names).

The session holds ONE runner under test (`runner`, the context's: `jobs.common.context.CheckContext`)
over the runner seam, whatever its kind: a plug-in in its own process (`--eagle3-runner`,
runners/isolate/: the session's program called over the pipe), the reference runner in process (the
default; limited per request as `check --request-timeout` limits it, `watchdog.time_limited`) or a
runner binary (`--eagle3-runner-bin`, parsed with the plugin's flags by `binary.exec_runner_from`) that
runs the `.pte` file itself. The items adapt to its `capabilities` (`runners.seam.Capabilities`), as the
CLI's jobs do, never to its kind: what is collected is `collected.Collected`, an item's run `runs.Runs`.
"""

from __future__ import annotations

import tempfile
from functools import cached_property
from pathlib import Path

from eagle3_check.errors import InputError, OptionError
from eagle3_check.pytest_plugin.collected import NONE, Collected
from eagle3_check.pytest_plugin.runs import Runs

DTYPE = "float32"  # the eager fixture program's default dtype (--eagle3-dtype); a .pte runs its own
MAX_NEW = 64  # `eagle3-check check`'s default


class Eagle3State(Collected, Runs):
    def __init__(self, settings: dict[str, str | None], binary=None, timeout: float | None = None):
        """`binary`: the runner binary of --eagle3-runner-bin, parsed and checked with the plugin's flags
        (`binary.exec_runner_from`), else None (the Config's runner, loaded on first use)."""
        from eagle3_check.jobs.common.context import CheckContext
        from eagle3_check.pytest_plugin.binary import TIMEOUT_FLAG

        self.settings = settings
        self.max_new = int(settings["max_new_tokens"] or MAX_NEW)
        self.timeout = timeout  # --eagle3-request-timeout in seconds (None: not given)
        self.cfg = plugin_config(settings, self.max_new, timeout, binary.spec if binary is not None else None)
        # the world `check` assembles, from this session's Config (jobs/common/context.py); the program
        # is the plugin's own (`_build`): a .pte as loaded, or the fixture's eager program per spec
        self.ctx = CheckContext(self.cfg, build=self._build, limit_flag=TIMEOUT_FLAG, loaded=binary)
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

    # --- the one runner under test (runners/seam.py) ------------------------------------------

    @property
    def runner(self):
        """The runner under test, under `check --request-timeout`'s rule (`watchdog.time_limited`):
        --eagle3-request-timeout when given; else 300 s for a plug-in or a binary, none for the reference
        runner. A plug-in runs in its own process (runners/isolate/), started on first use; the reference
        runner here; a binary is a process a request (runners/binary/)."""
        return self.ctx.runner

    @property
    def capabilities(self):
        """What the runner lets the items observe and control (`runners.seam.Capabilities`, from its spec
        alone: nothing loads to tell); every item adapts to these, never to the runner's kind."""
        return self.ctx.capabilities

    @property
    def runner_name(self) -> str:
        return self.ctx.runner_name

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


def plugin_config(s: dict[str, str | None], max_new: int, timeout: float | None, binary: str | None = None):
    """The session's `Config`, from the options `from_settings` checked (their errors name the
    --eagle3-* flags): CPU, float32 unless --eagle3-dtype, exact mode with --eagle3-numerics exact, the
    runner options `check` gives a request of max_new tokens; the runner is `binary` (a runner binary's
    resolved spec, --eagle3-runner-bin) when given, else --eagle3-runner, else the reference runner."""
    from eagle3_check.jobs.common.config import Config

    return Config.build({"command": "pytest", "fixture": s["fixture"], "target": s["target"], "tokenizer": s["tokenizer"],
                         "pte": s["pte"], "data_path": s["data_path"], "device": "cpu",
                         "dtype": s.get("dtype") or DTYPE, "exact": s.get("numerics") == "exact",
                         "max_new_tokens": max_new, "reference": s["reference"] or "hf",
                         "runner": binary or s["runner"] or "reference", "runner_timeout": timeout}, check=False)
