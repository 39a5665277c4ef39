"""The package layout's import rules, checked over the import graph (ast; nothing is imported).

Each subpackage's `__init__` docstring says what it may import ("May import: a, b.c"); an
entry names a subpackage or one module of it; a nested subpackage (jobs.check) may also import what
its parents (jobs) allow. A module may always import its own subpackage
and the leaves: the top-level modules (errors, tokenizer, table, status) and fixtures.registry. On top of those lines, the rules docs/layout.md states:
- the library never imports the CLI;
- the judge (references, tolerance, verdict, audit) never imports the runner loop it judges;
- the program contract and its backends never import the runners, the judge, the suites or the jobs;
- the jobs sit above everything but the front ends and the mutants: nothing below imports them, but
  fixtures.card (a card's tau measured with the prompt-set check), named here;
- shrinking (shrink) knows no job: each job passes its probe;
- reports (report) format and never judge: they import no check (runners, judge, suites, jobs, shrink);
- top-level modules (errors, tokenizer, ...) and fixtures.registry are leaves: they import only
  top-level modules, so every subpackage may use them;
- no import circle between modules, counting the imports inside functions too (a lazy import is
  how a module reaches a heavier one; it is still a dependency a reader follows);
- no branch on a runner's kind outside runners/: no `is_exec`, no test of a `--runner` value's `exec:`
  form, no binary held beside the runner (`.exec_runner`) (a job adapts to `runners.seam.Capabilities`,
  which `runners.seam.kind_of` reads from the spec).
An import by name (a string "eagle3_check.a.b" or "eagle3_check.a.b:attr" that importlib loads: the
plug-in aliases, the mutants' modules) counts as an import; each rule is shown to fail on an injected one.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "eagle3_check"
LEAVES = {"fixtures.registry"}  # subpackage modules that every layer may import


def module_name(path: Path) -> str:
    """eagle3_check/runners/loop.py -> "runners.loop"; eagle3_check/suites/__init__.py -> "suites"."""
    parts = list(path.relative_to(PKG).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}
MODULES.pop("", None)


@functools.cache
def parsed(src: str) -> ast.Module:
    """The tree of a module's source, parsed once per source text (every rule walks every module: the
    rules only read the trees; a FakeModule's injected source is its own text, so its own tree)."""
    return ast.parse(src)


BY_NAME = re.compile(r"eagle3_check((?:\.\w+)+)(?::\w+)?")  # "eagle3_check.runners.loop:ReferenceRunner"


def imports(path: Path, top_level_only: bool = False) -> list[tuple[int, str]]:
    """(line, module relative to eagle3_check) for every eagle3_check import in the file.

    `from eagle3_check.suites import toy` counts as suites.toy when that is a module. A string that is
    a whole module name, or a `module:attr` spec (what importlib loads: the plug-in aliases, the
    mutants' modules), counts as an import of that module: a by-name import obeys the same rules."""
    return list(_imports(path.read_text(), top_level_only, frozenset(MODULES)))


@functools.cache
def _imports(src: str, top_level_only: bool, modules: frozenset[str]) -> tuple[tuple[int, str], ...]:
    """`imports` of one source text, given the module names (MODULES, which a test may extend): once each."""
    tree = parsed(src)
    nodes = tree.body if top_level_only else ast.walk(tree)
    out = []
    for node in nodes:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and not top_level_only:
            named = BY_NAME.fullmatch(node.value)
            if named and named.group(1)[1:] in modules:
                out.append((node.lineno, "eagle3_check" + named.group(1)))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.append((node.lineno, sub if sub.removeprefix("eagle3_check.") in modules else node.module))
    return tuple((n, m.removeprefix("eagle3_check.")) for n, m in out
                 if m == "eagle3_check" or m.startswith("eagle3_check."))


def covered(name: str, entries: set[str]) -> bool:
    """Whether module `name` is one of `entries` (a module) or inside one (a package)."""
    return any(e == "" or name == e or name.startswith(e + ".") for e in entries)


def allowed(package: str) -> set[str]:
    """The "May import:" entries of a subpackage's docstring."""
    doc = ast.get_docstring(parsed((PKG / package.replace(".", "/") / "__init__.py").read_text())) or ""
    m = re.search(r"^May import:(.*?)(?:\(|\n\s*\n|\Z)", doc, re.M | re.S)
    assert m, f"eagle3_check/{package.replace('.', '/')}/__init__.py: its docstring lacks a 'May import:' line"
    first = m.group(1).split()[0]
    if first == "anything":  # the CLI
        return {""}
    if first == "nothing":  # the program layer: only the leaves
        return set()
    return {e for e in re.split(r"[\s,]+", m.group(1)) if e}


SUBPACKAGES = sorted(m for m, p in MODULES.items() if p.name == "__init__.py")
TOP = {m for m in MODULES if "." not in m and m not in SUBPACKAGES}  # errors, tokenizer, table, status
def library() -> list[str]:
    return sorted(m for m in MODULES if m != "cli" and not m.startswith("cli."))


def violations(modules, rule) -> list[str]:
    bad = []
    for m in modules:
        for line, target in imports(MODULES[m]):
            why = rule(m, target)
            if why:
                bad.append(f"eagle3_check/{MODULES[m].relative_to(PKG)}:{line} imports {target}: {why}")
    return bad


def test_every_entry_of_every_docstring_names_a_module():
    for package in SUBPACKAGES:
        for e in allowed(package) - {""}:
            assert e in MODULES, f"eagle3_check/{package}/__init__.py allows {e!r}, which is no module"


def inherited(package: str) -> set[str]:
    """What a nested subpackage (jobs.check) may import: its own entries and its parents' (jobs)."""
    parts = package.split(".")
    return set().union(*(allowed(".".join(parts[:i])) for i in range(1, len(parts) + 1)))


def docstring_rule(package: str) -> list[str]:
    ok = inherited(package) | {package} | LEAVES | TOP

    def rule(m, target):
        if covered(target, ok):
            return None
        return f"{package}'s docstring allows only {', '.join(sorted(inherited(package)))}"

    return violations([m for m in MODULES if m == package or m.startswith(package + ".")], rule)


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_a_subpackage_imports_only_what_its_docstring_allows(package):
    assert docstring_rule(package) == []


def cli_rule() -> list[str]:
    return violations(library(), lambda m, t: "the CLI" if covered(t, {"cli"}) else None)


def test_the_library_never_imports_the_cli():
    assert cli_rule() == []


def judge_rule() -> list[str]:
    refs = [m for m in MODULES if m.startswith("judge.")]
    assert refs, "no judge modules found"
    loops = {m for m in MODULES if m.startswith("runners.") and "loop" in m} | {"runners.plugin"}
    assert {"runners.loop", "runners.device_loop"} <= loops
    return violations(refs, lambda m, t: "a runner loop" if covered(t, loops) else None)


def test_the_judge_never_imports_the_runner_loop():
    assert judge_rule() == []


def program_rule() -> list[str]:
    progs = [m for m in MODULES if m == "program" or m.startswith("program.")]
    above = {"runners", "judge", "suites", "jobs", "shrink"}
    return violations(progs, lambda m, t: "a program sits below it" if covered(t, above) else None)


def test_programs_never_import_runners_judge_suites_or_jobs():
    assert program_rule() == []


ABOVE_JOBS = {"jobs", "cli", "pytest_plugin", "mutants"}  # the jobs, the front ends, the mutants' kill table
BELOW_INTO_JOBS = {("fixtures.card", "jobs.check.prompt_set")}  # a card's tau, measured with the prompt-set check


def jobs_rule() -> list[str]:
    below = [m for m in library() if not covered(m, ABOVE_JOBS)]
    assert {"runners.loop", "judge.verdict", "shrink.search", "suites.case", "fixtures.card"} <= set(below)
    return violations(below, lambda m, t: "the jobs sit above it" if covered(t, {"jobs"})
                      and (m, t) not in BELOW_INTO_JOBS else None)


def test_nothing_below_the_jobs_imports_them():
    """The jobs (check, suites, golden, gate over their shared world) sit above the runners, the judge,
    shrinking, the suites' cases, the reports and the fixtures; only the front ends and the mutants import
    them, and the one import from below is named in BELOW_INTO_JOBS."""
    assert jobs_rule() == []


def shrink_rule() -> list[str]:
    shrink = [m for m in MODULES if covered(m, {"shrink"})]
    assert "shrink.search" in shrink
    return violations(shrink, lambda m, t: "each job passes its probe" if covered(t, {"jobs"}) else None)


def test_shrinking_knows_no_job():
    assert shrink_rule() == []


def report_rule() -> list[str]:
    reports = [m for m in MODULES if covered(m, {"report"})]
    assert "report.junit" in reports and "report.html_report" in reports
    checks = {"runners", "judge", "suites", "jobs", "shrink"}
    return violations(reports, lambda m, t: "a report imports no check" if covered(t, checks) else None)


def test_reports_import_no_check():
    assert report_rule() == []


def leaves_rule() -> list[str]:
    leaves = sorted(TOP) + sorted(LEAVES)
    assert "errors" in leaves and "fixtures.registry" in leaves
    return violations(leaves, lambda m, t: "a leaf imports top-level modules only" if "." in t else None)


def test_leaves_import_only_top_level_modules():
    assert leaves_rule() == []


def _exec_form(node) -> bool:
    """A string constant (or a tuple of them) that is a runner binary's spec form: 'exec', 'exec:'."""
    if isinstance(node, ast.Tuple):
        return any(_exec_form(e) for e in node.elts)
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.split(":")[0] == "exec"


def kind_rule() -> list[str]:
    """Every branch on a runner's kind outside runners/: the name `is_exec`, a `.startswith("exec:")` (or
    removeprefix, partition), a comparison with an `exec...` string, and a binary held beside the runner
    (an `.exec_runner` attribute: the pytest plugin once branched on `state.exec_runner is not None`)."""
    bad = []
    for m in sorted(MODULES):
        if m == "runners" or m.startswith("runners."):
            continue
        for lineno in _kind_branches(MODULES[m].read_text()):
            bad.append(f"eagle3_check/{MODULES[m].relative_to(PKG)}:{lineno}: a branch on the runner's kind "
                       "(adapt to runners.seam.Capabilities: runners.seam.kind_of(spec), the runner's capabilities)")
    return bad


@functools.cache
def _kind_branches(src: str) -> tuple[int, ...]:
    """The lines of `kind_rule`'s branches in one source text (walked once per text)."""
    lines = []
    for node in ast.walk(parsed(src)):
        named = (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
                 else node.name if isinstance(node, ast.FunctionDef) else None)
        spec_test = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                     and node.func.attr in ("startswith", "removeprefix", "partition")
                     and any(_exec_form(a) for a in node.args))
        compared = isinstance(node, ast.Compare) and any(_exec_form(c) for c in [node.left, *node.comparators])
        beside = isinstance(node, ast.Attribute) and node.attr == "exec_runner"
        if named == "is_exec" or spec_test or compared or beside:
            lines.append(node.lineno)
    return tuple(lines)


def test_no_branch_on_a_runners_kind_outside_the_runners():
    assert kind_rule() == []


class FakeModule:
    """A module of the import graph that is no file: its source, and the path a violation names."""

    def __init__(self, name: str, src: str):
        self.name, self.src = name, src

    def read_text(self) -> str:
        return self.src

    def relative_to(self, _root) -> str:
        return self.name.replace(".", "/") + ".py"


@pytest.mark.parametrize("rule, module, src", [
    (lambda: docstring_rule("runners"), "runners.fake", "from eagle3_check.jobs.check.job import check\n"),
    (lambda: docstring_rule("runners.isolate"), "runners.isolate.fake", "from eagle3_check.judge import hf\n"),
    (lambda: docstring_rule("jobs.check"), "jobs.check.fake", "def f():\n    from eagle3_check.jobs.gate import gate\n"),
    (lambda: docstring_rule("shrink"), "shrink.fake", "from eagle3_check.runners.loop import ReferenceRunner\n"),
    (cli_rule, "jobs.fake", "def f():\n    import eagle3_check.cli.check\n"),
    (judge_rule, "judge.fake", "def f():\n    from eagle3_check.runners.loop import ReferenceRunner\n"),
    (judge_rule, "judge.fake", "SPEC = 'eagle3_check.runners.loop:ReferenceRunner'\n"),  # by name
    (program_rule, "program.fake", "from eagle3_check.runners.options import RunOptions\n"),
    (jobs_rule, "runners.fake", "from eagle3_check.jobs.golden.file import load_golden\n"),
    (jobs_rule, "fixtures.fake", "from eagle3_check.jobs.check.prompt_set import run_check\n"),  # not the named one
    (shrink_rule, "shrink.fake", "from eagle3_check.jobs.check.shrink import check_probe\n"),
    (report_rule, "report.fake", "from eagle3_check.judge.verdict import judge\n"),
    (leaves_rule, "fixtures.registry", "from eagle3_check.runners.options import RunOptions\n"),
    (kind_rule, "jobs.fake", "def f(cfg):\n    if (cfg.runner or '').startswith('exec:'):\n        pass\n"),
    (kind_rule, "cli.fake", "def f(ctx):\n    return 1 if ctx.is_exec else 0\n"),
    (kind_rule, "jobs.fake", "def f(spec):\n    return 'exec:' in spec\n"),
    (kind_rule, "pytest_plugin.fake", "def f(state):\n    return 1 if state.exec_runner is not None else 0\n"),
], ids=["docstring-runners", "docstring-isolate", "docstring-jobs-check", "docstring-shrink", "cli", "judge-loop",
        "judge-loop-by-name", "program", "jobs-from-runners", "jobs-from-fixtures", "shrink", "report", "leaves",
        "kind-startswith", "kind-is-exec", "kind-in", "kind-binary-beside"])
def test_each_rule_fails_on_an_injected_import(rule, module, src):
    """Each rule above catches the import (or the kind branch) it forbids (so none of them passes for want
    of looking)."""
    assert rule() == []
    saved = dict(MODULES)
    try:
        MODULES[module] = FakeModule(module, src)
        assert rule(), f"{module}: {src.strip()!r} passed the rule"
    finally:
        MODULES.clear()
        MODULES.update(saved)


def circles(top_level_only: bool) -> list[str]:
    """Every import circle between modules ("a -> b -> a"), one per back edge of a depth-first walk."""
    graph = {m: {t for _, t in imports(p, top_level_only) if t in MODULES and t != m} for m, p in MODULES.items()}
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    found = []

    def visit(m, stack):
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                found.append(" -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                visit(t, stack + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return found


def test_no_import_circle_at_module_level():
    assert circles(top_level_only=True) == []


def test_no_import_circle_with_the_imports_inside_functions():
    """A lazy import is still a dependency: `cli.check` reaching `cli.exec_cmd` which reaches back is a
    circle a reader follows round, whether or not Python would deadlock on it."""
    assert circles(top_level_only=False) == []


def test_the_circle_finder_finds_a_circle():
    """The walk names a circle it is given (so the two tests above can fail)."""
    import types

    saved = dict(MODULES)
    try:
        fake = {"a.x": "from eagle3_check.a.y import f\n", "a.y": "def g():\n    from eagle3_check.a.x import h\n"}
        MODULES.clear()
        for name, src in fake.items():
            MODULES[name] = types.SimpleNamespace(read_text=lambda src=src: src)
        assert circles(top_level_only=False) == ["a.x -> a.y -> a.x"]
        assert circles(top_level_only=True) == []
    finally:
        MODULES.clear()
        MODULES.update(saved)


def test_the_pytest_plugin_imports_eagle3_check_only_lazily():
    """pytest loads the plugin (entry point pytest11) in every run of every project where eagle3_check is
    installed: its package level imports nothing of eagle3_check, only its hooks do, once turned on."""
    assert imports(MODULES["pytest_plugin"], top_level_only=True) == []
    assert "pytest_plugin.state" in {t for _, t in imports(MODULES["pytest_plugin"])}  # the lazy ones are seen


def test_the_rules_see_lazy_imports():
    """A lazy import inside a function counts: the rules would catch one that breaks them."""
    src = MODULES["jobs.gate.gate"].read_text()
    assert "\n    from eagle3_check.suites" in src  # a lazy import (inside a function) the gate really has
    assert ("suites" in {t.split(".")[0] for _, t in imports(MODULES["jobs.gate.gate"])})


def test_test_file_basenames_are_unique():
    """tests/ has no __init__.py files, so pytest imports each test file by its basename: two files of one
    name (tests/x.py and tests/pte/x.py) make the second an import-file-mismatch error of the whole run."""
    tests = Path(__file__).resolve().parent
    names: dict[str, list[str]] = {}
    for p in sorted(tests.rglob("test_*.py")):
        names.setdefault(p.name, []).append(str(p.relative_to(tests)))
    assert {n: ps for n, ps in names.items() if len(ps) > 1} == {}
