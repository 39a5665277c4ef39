"""The runner under test in its own process, for every route (docs/isolation.md).

- `remote_runner(spec, ...)`: the suites, the gate, `golden verify`, `--quantize` and the pytest
  plugin: the child imports the plug-in and nothing else; each request's program is the harness's,
  called over the pipe (runners/isolate/remote.py), so a case's forcing, patched metadata or toy program is
  the one the runner gets, as in process.
- `IsolatedPool`: `check --workers N`: N children, each building its own program (on `cuda:i`
  with --device cuda) and running the runner there; this process judges every request, in prompt
  order, while each child runs its next one (the report is the serial run's).

Every way out of a child is that request's FAIL and a fresh child takes the rest (runners/isolate/runner.py);
the decision is `runners.isolate.policy.wants_isolation`, taken from the spec before anything loads it.
"""

from __future__ import annotations


def limit_of(spec: str, timeout: float | None) -> float | None:
    """The per-request limit an isolated `spec` gets: `check --request-timeout`'s rule (watchdog)."""
    from eagle3_check.runners.watchdog import time_limited

    return getattr(time_limited(object(), spec, timeout), "seconds", None)


def preload() -> None:
    """torch and transformers imported before a child forks (runners/isolate/fork.py: it starts with them)."""
    import eagle3_check.program.eager  # noqa: F401
    import eagle3_check.runners.loop  # noqa: F401


def exact_child() -> tuple[None, None]:
    """A remote runner's child in exact mode (module-level: pickled to it): the shape-invariant kernels
    installed for the child's life, so what a plug-in in PyTorch computes itself runs on them as the
    harness's program does; no program of its own (None, None: the harness's, call by call)."""
    from eagle3_check.exact.mode import install_for_process

    install_for_process()
    return None, None


def remote_runner(spec: str, timeout: float | None, flag: str | None = None, profile: str | None = None,
                  exact: bool = False):
    """An IsolatedRunner for `spec` with no program of its own, started and ready: a plug-in that cannot
    be found is the one-line error here, before any work; one that dies loading fails every request.
    `profile`: --runner-profile, which the child's runner runs by (runners/isolate/declared.py); `exact`:
    --exact, installed in the child (`exact_child`)."""
    from eagle3_check.runners.isolate.runner import IsolatedRunner
    from eagle3_check.runners.plugin import check_spec

    check_spec(spec)  # its form, before anything loads; the child imports it
    preload()
    runner = IsolatedRunner(spec, None, limit_of(spec, timeout), flag or "--request-timeout", profile)
    if exact:  # still remote (decided from build None above); the child's setup runs exact_child
        runner.build = exact_child
    runner.start()
    runner.ready()
    return runner


class IsolatedPool:
    """`check --workers N`: one IsolatedRunner per device, request i on child i mod N (round robin, as
    --shard). `run_named` answers in any order; each child has its next request in flight while this
    process judges (IsolatedRunner.expect). The Runner protocol's `run` (one extra request: a
    shrinker's) goes to the first child."""

    isolated = True

    def __init__(self, spec: str, builds: list, timeout: float | None, flag: str = "--request-timeout",
                 profile: str | None = None):
        from eagle3_check.runners.isolate.runner import IsolatedRunner

        self.spec = spec
        self.members = [IsolatedRunner(spec, b, timeout, flag, profile) for b in builds]
        self._owner: dict[str, IsolatedRunner] = {}

    def start(self) -> None:
        for m in self.members:
            m.start()

    def ready(self) -> None:
        for m in self.members:
            m.ready()

    def set_twin(self, program) -> None:
        for m in self.members:
            m.set_twin(program)

    def expect(self, requests: list, options) -> None:
        n = len(self.members)
        for w, m in enumerate(self.members):
            share = requests[w::n]
            m.expect(share, options)
            self._owner.update({what: m for what, _ in share})
        for m in self.members:
            m.ready()
            m._prefetch()  # every child starts on its first request now

    def run_named(self, program, tokenizer, prompt, options, what: str):
        member = self._owner.get(what, self.members[0])
        return member.run_named(program, tokenizer, prompt, options, what)

    def run(self, program, tokenizer, prompt, options):
        return self.members[0].run(program, tokenizer, prompt, options)

    @property
    def profile(self) -> str | None:  # every child runs the same plug-in: the first one's declaration
        return self.members[0].profile

    @property
    def profile_found(self) -> str:
        return self.members[0].profile_found

    @property
    def children(self) -> int:
        return sum(m.children for m in self.members)

    def records(self) -> list[dict]:
        return [{**r, "worker": w + 1} for w, m in enumerate(self.members) for r in m.records()]

    def close(self) -> None:
        for m in self.members:
            m.close()


