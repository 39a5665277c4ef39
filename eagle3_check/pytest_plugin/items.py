"""The test items the plugin adds to a user's run, and their failure texts.

Node ids (the `-k` names), under one `eagle3` node per session:

    eagle3::suites::acceptance/full                           an edge case (`check --suite`)
    eagle3::prompts::hi                                       one request of the prompt-set check
    eagle3::goldens::tiny-llama__eager__cpu__float32__k4__n48/hi   one prompt of a golden
    eagle3::baseline::tiny-llama__eager__cpu__float32__k4__n48     one key of the metrics baseline

Markers: `eagle3` on every item, plus `eagle3_suite`, `eagle3_prompt`, `eagle3_golden` or
`eagle3_baseline`. A case that skips skips with its reason; a failure's text is the verdict's
forensics (no traceback); a user error (a program that does not load, a bad prompt) is its one
line. An item's location (in skip lines and failure headers) is where it is written down: the
case in its suite module, the prompt in its prompt set, the prompt in its golden file, the key in
the baseline. Every item runs through the session's one runner and adapts to its capabilities
(runs.py): a runner binary (--eagle3-runner-bin) runs them on its own `.pte`, judged by what it prints;
a failure also shows the binary's exit and the end of its stderr.

A golden prompt runs once per process (`runs.Runs.golden_run`), shared by its golden item and the
baseline item of its key. Under pytest-xdist each worker is a process: both kinds of item of a
baseline key carry `xdist_group("eagle3-<stem>")`, and `--dist loadgroup` sends them to one worker
(workers.py), so no worker re-runs a prompt another one ran (`-n` alone, `--dist load`, does not).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from eagle3_check.errors import Eagle3CheckError
from eagle3_check.judge.budget import allowed as ties_allowed
from eagle3_check.judge.budget import share_text
from eagle3_check.pytest_plugin.workers import XDIST_GROUP
from eagle3_check.status import FAIL, SKIP, TIE


class Eagle3Failure(Exception):
    """A judged failure: its text is the whole report."""


class Eagle3Node(pytest.Collector):
    """A grouping node (`eagle3`, `eagle3::suites`, ...); its items are made by `collect` below."""

    def collect(self):  # items are attached by pytest_collection_modifyitems, never collected from here
        return []


class Eagle3Item(pytest.Item):
    kind = "item"

    def __init__(self, *, state, source: Path, needle: str, **kw):
        super().__init__(**kw)
        self.state = state
        self.source, self.line = source, line_of(source, needle)
        self.add_marker("eagle3")
        self.add_marker(f"eagle3_{self.kind}")

    def skip(self, why: str):
        """Skips, reported at the item's own location (not at this line)."""
        raise pytest.skip.Exception(why, _use_item_location=True)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, Eagle3Failure):
            return str(excinfo.value)
        if isinstance(excinfo.value, Eagle3CheckError):
            return f"error: {excinfo.value}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.source, self.line, f"eagle3 {self.kind} {self.name}"


class SuiteItem(Eagle3Item):
    kind = "suite"

    def __init__(self, *, case, **kw):
        super().__init__(**kw)
        self.case = case

    def runtest(self):
        state = self.state
        result = state.run_case(self.case)  # routed by the runner's capabilities (runs.py)
        self.user_properties.append(("status", str(result.status)))
        if result.status == SKIP:
            self.skip(result.message)
        if result.status == FAIL:
            d = result.details
            keys = ("L", "K", "tokens", "rounds", "accepted", "stop", "judged_by", "returncode")
            stats = ", ".join(f"{k} {d[k]}" for k in keys if k in d)
            raise Eagle3Failure(f"{self.case.name} FAIL ({self.case.what}): {result.message}\n"
                                f"  {stats}\n  setup: {self.case.describe()}\n  runner: {state.runner_name}"
                                + stderr_tail(d.get("stderr")))
        if result.status == TIE:
            self.user_properties.append(("ties", result.details.get("ties")))


class PromptItem(Eagle3Item):
    kind = "prompt"

    def __init__(self, *, prompt, **kw):
        super().__init__(**kw)
        self.prompt = prompt

    def runtest(self):
        o = self.state.check_request(self.prompt.text, prompt_id=self.prompt.id)
        if self.state.capabilities.program_file:  # judged by what it printed (jobs.check.binary.ExecOutcome)
            return self.judge_exec(o)
        v, r = o.verdict, o.run
        allowed = ties_allowed(self.state.tie_budget, v.judged)  # the report's budget rule, per request
        self.user_properties += [("ties", v.ties), ("tau", r.tau)]
        stats = (f"L {len(r.prompt_ids)}, {len(r.tokens)} tokens, {r.rounds} rounds, tau {r.tau:.2f}, "
                 f"stop {r.stop_reason}, K {r.k}; positions {v.identical} identical, {v.ties} tie, {v.fails} fail")
        if v.status == FAIL:
            raise Eagle3Failure(f"prompt '{o.prompt_id}' FAIL: {v.message}\n  {stats}\n  runner: {self.state.runner_name}")
        if v.ties > allowed:
            raise Eagle3Failure(f"prompt '{o.prompt_id}' FAIL: {v.ties} tie(s) exceed the tie budget of {allowed} "
                                f"({share_text(self.state.tie_budget, v.judged)}): {v.message}\n  {stats}")

    def judge_exec(self, o) -> None:
        """A runner binary's request (`jobs.check.binary.ExecOutcome`): its verdict, exit and stderr."""
        v, out, proc = o.verdict, o.output, o.process
        allowed = ties_allowed(self.state.tie_budget, v.judged)
        self.user_properties += [("ties", v.ties), ("tau", out.tau if out else None)]
        exit_ = "timeout" if proc.returncode is None else proc.returncode
        stats = (f"L {o.prompt_len}, " + (f"{out.tokens} tokens, {out.rounds} rounds, tau {out.tau:.3f}, K {out.k}, "
                                          if out else "no output, ")
                 + f"judged by {v.mode or 'nothing'}, exit {exit_}; positions {v.judged} judged, {v.ties} tie, "
                 f"{v.fails} fail")
        tail = f"\n  runner: {self.state.runner_name}" + stderr_tail(proc.stderr_tail())
        if v.status == FAIL:
            raise Eagle3Failure(f"prompt '{o.prompt_id}' FAIL: {v.message}\n  {stats}{tail}")
        if v.ties > allowed:
            raise Eagle3Failure(f"prompt '{o.prompt_id}' FAIL: {v.ties} tie(s) exceed the tie budget of {allowed} "
                                f"({share_text(self.state.tie_budget, v.judged)}): {v.message}\n  {stats}{tail}")


class GoldenItem(Eagle3Item):
    kind = "golden"

    def __init__(self, *, golden, prompt, why, **kw):
        super().__init__(**kw)
        self.golden, self.prompt, self.why = golden, prompt, why
        self.stem = golden.key.stem

    def runtest(self):
        state = self.state
        if not self.why:
            self.why = state.golden_skip(self.golden)  # what this runner cannot run (runs.py), by its capabilities
        why = self.why
        if why:
            self.skip(f"golden {self.golden.key.stem}: {why}")
        diffs = state.golden_diffs(self.golden, self.prompt)
        if diffs:
            raise Eagle3Failure("\n".join([f"golden {self.golden.key.stem} '{self.prompt.prompt_id}' differs:",
                                           *(f"  {d}" for d in diffs), f"  runner: {state.runner_name}"]))


class BaselineItem(Eagle3Item):
    """One key of the metrics baseline: the counts over its golden's runs (the golden items' own
    runs, made once) must equal the baseline's exactly (`jobs.golden.metrics`)."""

    kind = "baseline"

    def __init__(self, *, stem, **kw):
        super().__init__(**kw)
        self.stem = stem

    def runtest(self):
        from eagle3_check.jobs.golden.metrics import format_metric_diffs

        golden, why = self.state.baseline_golden(self.stem)
        if why:
            self.skip(f"baseline {self.stem}: {why}")
        diffs = self.state.metric_diffs(golden)
        if diffs:
            raise Eagle3Failure(format_metric_diffs(diffs, self.state.baseline_path)
                                + f"\n  runner: {self.state.runner_name}")


def stderr_tail(stderr: str | None, lines: int = 5) -> str:
    """The last lines of a runner binary's stderr, indented under a failure ('' when it has none)."""
    kept = [line for line in (stderr or "").splitlines() if line.strip()][-lines:]
    return "".join(f"\n  stderr: {line[:200]}" for line in kept)


def line_of(path: Path, needle: str) -> int:
    """The 0-based line of `path` that holds `needle` (0 where none does)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return 0
    return next((i for i, text in enumerate(lines) if needle in text), 0)


def case_source(case) -> tuple[Path, str]:
    """The suite module that writes the case down, and what to look for in it: its name, or the
    part after the suite (modules that build names from it)."""
    short = case.name.partition("/")[2]
    for needle in (f'"{case.name}"', f'"{short}"'):
        for f, text in _suite_sources():
            if needle in text:
                return f, needle
    return _suite_sources()[0][0], "SUITES"


@functools.cache
def _suite_sources() -> list[tuple[Path, str]]:
    """(file, text) of every suite module, the registry (__init__) first."""
    import eagle3_check.suites as suites

    return [(f, f.read_text(encoding="utf-8")) for f in sorted(Path(suites.__file__).parent.glob("*.py"))]


def collect(session: pytest.Session, state) -> list[Eagle3Item]:
    """Every item of this session: the edge cases, the prompts, the golden prompts, the baseline keys."""
    root = Eagle3Node.from_parent(session, name="eagle3", nodeid="eagle3")
    out: list[Eagle3Item] = []
    cases = state.cases()
    if cases:
        group = Eagle3Node.from_parent(root, name="suites")
        for c in cases:
            src, needle = case_source(c)
            out.append(SuiteItem.from_parent(group, name=c.name, state=state, case=c, source=src, needle=needle))
    if state.prompts:
        group = Eagle3Node.from_parent(root, name="prompts")
        out += [PromptItem.from_parent(group, name=p.id, state=state, prompt=p, source=state.prompts_path,
                                       needle=f'"{p.id}"') for p in state.prompts]
    goldens = state.goldens()
    if goldens:
        group = Eagle3Node.from_parent(root, name="goldens")
        out += [GoldenItem.from_parent(group, name=f"{g.key.stem}/{p.prompt_id}", state=state, golden=g, prompt=p,
                                       why=why, source=path, needle=f'"prompt_id": "{p.prompt_id}"')
                for path, g, why in goldens for p in g.prompts]
    if state.baseline:
        group = Eagle3Node.from_parent(root, name="baseline")
        out += [BaselineItem.from_parent(group, name=stem, state=state, stem=stem, source=state.baseline_path,
                                         needle=f'"{stem}"') for stem in state.baseline]
    for item in out:  # `pytest -n N --dist loadgroup`: a baseline key's golden prompts and its item on one
        if getattr(item, "stem", None) in state.baseline:  # worker, which runs each prompt once for both
            item.add_marker(pytest.mark.xdist_group(f"{XDIST_GROUP}{item.stem}"))
    # counted like collected items ("collected N items"): the terminal counts collect reports
    session.ihook.pytest_collectreport(report=pytest.CollectReport(root.nodeid, "passed", None, out))
    return out
