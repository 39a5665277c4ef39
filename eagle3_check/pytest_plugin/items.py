"""The test items the plugin adds to a user's run, and their failure texts.

Node ids (the `-k` names), under one `eagle3` node per session:

    eagle3::suites::acceptance/full                           an edge case (`check --suite`)
    eagle3::prompts::hi                                       one request of the prompt-set check
    eagle3::goldens::tiny-llama__eager__cpu__float32__k4__n48/hi   one prompt of a golden

Markers: `eagle3` on every item, plus `eagle3_suite`, `eagle3_prompt` or `eagle3_golden`. A case
that skips skips with its reason; a failure's text is the verdict's forensics (no traceback); a
user error (a program that does not load, a bad prompt) is its one line.
"""

from __future__ import annotations

import pytest

from eagle3_check.errors import Eagle3CheckError
from eagle3_check.status import FAIL, SKIP, TIE


class Eagle3Failure(Exception):
    """A judged failure: its text is the whole report."""


class Eagle3Node(pytest.Collector):
    """A grouping node (`eagle3`, `eagle3::suites`, ...); its items are made by `collect` below."""

    def collect(self):  # items are attached by pytest_collection_modifyitems, never collected from here
        return []


class Eagle3Item(pytest.Item):
    kind = "item"

    def __init__(self, *, state, **kw):
        super().__init__(**kw)
        self.state = state
        self.add_marker("eagle3")
        self.add_marker(f"eagle3_{self.kind}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, Eagle3Failure):
            return str(excinfo.value)
        if isinstance(excinfo.value, Eagle3CheckError):
            return f"error: {excinfo.value}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"eagle3 {self.kind} {self.name}"


class SuiteItem(Eagle3Item):
    kind = "suite"

    def __init__(self, *, case, **kw):
        super().__init__(**kw)
        self.case = case

    def runtest(self):
        from eagle3_check.suites.execute import run_case

        result = run_case(self.case, self.state.suite_env, self.state.runner)
        self.user_properties.append(("status", str(result.status)))
        if result.status == SKIP:
            pytest.skip(result.message)
        if result.status == FAIL:
            d = result.details
            stats = ", ".join(f"{k} {d[k]}" for k in ("L", "K", "tokens", "rounds", "accepted", "stop") if k in d)
            raise Eagle3Failure(f"{self.case.name} FAIL ({self.case.what}): {result.message}\n"
                                f"  {stats}\n  setup: {self.case.describe()}\n  runner: {self.state.runner_name}")
        if result.status == TIE:
            self.user_properties.append(("ties", result.details.get("ties")))


class PromptItem(Eagle3Item):
    kind = "prompt"

    def __init__(self, *, prompt, **kw):
        super().__init__(**kw)
        self.prompt = prompt

    def runtest(self):
        o = self.state.check_request(self.prompt.text, prompt_id=self.prompt.id)
        v, r = o.verdict, o.run
        allowed = int(self.state.tie_budget * v.judged + 1e-9)  # the report's budget rule, per request
        self.user_properties += [("ties", v.ties), ("tau", r.tau)]
        stats = (f"L {len(r.prompt_ids)}, {len(r.tokens)} tokens, {r.rounds} rounds, tau {r.tau:.2f}, "
                 f"stop {r.stop_reason}, K {r.k}; positions {v.identical} identical, {v.ties} tie, {v.fails} fail")
        if v.status == FAIL:
            raise Eagle3Failure(f"prompt '{o.prompt_id}' FAIL: {v.message}\n  {stats}\n  runner: {self.state.runner_name}")
        if v.ties > allowed:
            raise Eagle3Failure(f"prompt '{o.prompt_id}' FAIL: {v.ties} tie(s) exceed the tie budget of {allowed} "
                                f"({self.state.tie_budget:.1%} of {v.judged} positions): {v.message}\n  {stats}")


class GoldenItem(Eagle3Item):
    kind = "golden"

    def __init__(self, *, golden, prompt, why, **kw):
        super().__init__(**kw)
        self.golden, self.prompt, self.why = golden, prompt, why

    def runtest(self):
        if self.why:
            pytest.skip(f"golden {self.golden.key.stem}: {self.why}")
        diffs = self.state.golden_diffs(self.golden, self.prompt)
        if diffs:
            raise Eagle3Failure("\n".join([f"golden {self.golden.key.stem} '{self.prompt.prompt_id}' differs:",
                                           *(f"  {d.message}" for d in diffs), f"  runner: {self.state.runner_name}"]))


def collect(session: pytest.Session, state) -> list[Eagle3Item]:
    """Every item of this session: the edge cases, then the prompts, then the golden prompts."""
    root = Eagle3Node.from_parent(session, name="eagle3", nodeid="eagle3")
    out: list[Eagle3Item] = []
    cases = state.cases()
    if cases:
        group = Eagle3Node.from_parent(root, name="suites")
        out += [SuiteItem.from_parent(group, name=c.name, state=state, case=c) for c in cases]
    if state.prompts:
        group = Eagle3Node.from_parent(root, name="prompts")
        out += [PromptItem.from_parent(group, name=p.id, state=state, prompt=p) for p in state.prompts]
    goldens = state.goldens()
    if goldens:
        group = Eagle3Node.from_parent(root, name="goldens")
        out += [GoldenItem.from_parent(group, name=f"{g.key.stem}/{p.prompt_id}", state=state, golden=g, prompt=p, why=why)
                for g, why in goldens for p in g.prompts]
    # counted like collected items ("collected N items"): the terminal counts collect reports
    session.ihook.pytest_collectreport(report=pytest.CollectReport(root.nodeid, "passed", None, out))
    return out
