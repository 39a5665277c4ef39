"""Docs that cannot drift: every backticked dotted name in README, docs/ and the package's docstrings
that starts with one of eagle3_check's modules resolves (the module imports, each part is an attribute,
a submodule or a declared field), a stale module name is caught, and README stays one screen.

What counts as a name (`NAME` below): an inline code span whose whole text is dotted identifiers,
optionally `module:attr` (`jobs.check.prompt_set.judge`, `rules.expected_length`, `runners.device_loop.DeviceRunner`,
`eagle3_check.runners.loop:ReferenceRunner`). Its head decides:

- `eagle3_check`, or the last component of any module or package of eagle3_check (`rules`, `run`,
  `cuda_graph`): it must resolve (a short name that several modules share resolves if any of them has it);
- the name of a class defined at module level in eagle3_check (`EagerBackend.use_verify_form`,
  `RunOptions.chunked_prefill`): the rest must resolve on that class;
- a lowercase head that is no such module and no importable package, with a CapWords last part
  (`runner.ReferenceRunner`): a stale module name, an error;
- anything else is ordinary code, never checked: file names (`metrics.json`, `main.cpp`), JSON fields
  (`info.program`), other projects (`torch.cuda.CUDAGraph`, `speculators.Eagle3DraftModel`,
  `Eagle3DraftModel.from_pretrained`), spans with spaces, calls or slashes.
Fenced code blocks are not read (their commands are tests/test_readme_flags.py's)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import inspect
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "eagle3_check"
README = ROOT / "README.md"
DOC_FILES = [README, ROOT / "DESIGN.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 150  # one screen, about three terminal pages: issue 29

SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)?")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
FILE_EXTENSIONS = {"json", "jsonl", "py", "pte", "ptd", "xml", "html", "txt", "md", "cpp", "h", "ini",
                   "toml", "yaml", "yml", "log", "sh", "bin", "safetensors", "jinja", "svg", "csv",
                   "gguf", "gz", "whl", "lock", "cfg"}
EXTERNAL = {"speculators", "vllm", "sglang", "specforge",  # projects named in the docs, not installed here
            "nn", "np"}  # torch.nn, numpy as their users import them


def _modules() -> dict[str, list[str]]:
    """Short name -> the full names of eagle3_check's modules and packages that end in it."""
    short: dict[str, list[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        full = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        short.setdefault(full.rsplit(".", 1)[-1], []).append(full)
    return short


SHORT = _modules()


def _classes() -> dict[str, list[str]]:
    """Class name -> the modules of eagle3_check that define a class of that name at module level."""
    out: dict[str, list[str]] = {}
    for full in sorted({m for ms in SHORT.values() for m in ms}):
        parts = full.split(".")
        path = ROOT.joinpath(*parts)
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, []).append(full)
    return out


CLASSES = _classes()


def names_in(text: str) -> list[str]:
    """The dotted names of a text's inline code spans (fenced blocks dropped)."""
    return [s for s in SPAN.findall(FENCE.sub("", text)) if NAME.fullmatch(s)]


def _has(obj, part: str):
    """obj.part: an attribute, a submodule of a package, or a declared field of a class."""
    if hasattr(obj, part):
        return True, getattr(obj, part)
    if hasattr(obj, "__path__"):  # a package: its submodule
        try:
            return True, importlib.import_module(f"{obj.__name__}.{part}")
        except ModuleNotFoundError:
            return False, None
    if isinstance(obj, type):
        fields = {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else set()
        fields |= set(getattr(obj, "model_fields", {}))  # pydantic
        for klass in obj.__mro__:
            fields |= set(getattr(klass, "__annotations__", {}))
            if klass.__module__.startswith("eagle3_check"):  # attributes its methods set on self
                fields |= {n.attr for n in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(klass))))
                           if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                           and isinstance(n.value, ast.Name) and n.value.id == "self"}
        return part in fields, None
    return False, None


def problem(name: str) -> str | None:
    """Why `name` does not resolve, or None (it resolves, or it is not a name of ours)."""
    parts = name.replace(":", ".").split(".")
    head, last = parts[0], parts[-1]
    if last in FILE_EXTENSIONS:
        return None
    if head == "eagle3_check":
        candidates, rest = ["eagle3_check"], parts[1:]
    elif head in SHORT:
        candidates, rest = SHORT[head], parts[1:]
    elif head in CLASSES:
        candidates, rest = CLASSES[head], parts  # the class, then its attribute
    elif (head.islower() and last[:1].isupper() and head not in EXTERNAL
          and importlib.util.find_spec(head) is None):
        return f"`{name}`: no module {head!r} in eagle3_check (a stale name?)"
    else:
        return None
    for full in candidates:
        obj, ok = importlib.import_module(full), True
        for part in rest:
            ok, obj = _has(obj, part)
            if not ok:
                break
        if ok:
            return None
    return f"`{name}`: not found in {' or '.join(candidates)}"


def docstrings() -> list[tuple[str, str]]:
    """(module:line, docstring) of every module, class and function of the package."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    where = f"{path.relative_to(ROOT).as_posix()}:{getattr(node, 'lineno', 1)}"
                    out.append((where, doc))
    return out


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_name_in_the_docs_exists(path):
    bad = [p for p in map(problem, names_in(path.read_text(encoding="utf-8"))) if p]
    assert not bad, f"{path.name}: " + "; ".join(bad)


def test_every_name_in_a_docstring_exists():
    bad = [f"{where}: {p}" for where, doc in docstrings() for p in map(problem, names_in(doc)) if p]
    assert not bad, "\n".join(bad)


def test_the_pattern_takes_names_and_leaves_ordinary_code():
    text = ("`jobs.check.prompt_set.judge` `eagle3_check.runners.loop:ReferenceRunner` `metrics.json` `--json` "
            "`options.max_new_tokens = 1` `golden/x.json` `f(x)`\n```bash\n`rules.nothing`\n```\n")
    assert names_in(text) == ["jobs.check.prompt_set.judge", "eagle3_check.runners.loop:ReferenceRunner", "metrics.json"]
    assert [problem(n) for n in names_in(text)] == [None, None, None]


@pytest.mark.parametrize("name, why", [
    ("rules.no_such_rule", "not found in eagle3_check.runners.rules"),
    ("RunOptions.no_such_field", "not found in eagle3_check.runners.options"),
    ("eagle3_check.runners.loop:NoRunner", "not found in eagle3_check"),
    ("device_runner.DeviceRunner", "no module 'device_runner'"),  # the name before runners/device_loop.py
    ("runners.nothing_here.Thing", "not found in eagle3_check.runners"),
], ids=["missing-function", "missing-field", "missing-class", "stale-module", "missing-submodule"])
def test_a_wrong_name_is_caught(name, why):
    assert why in (problem(name) or ""), problem(name)


@pytest.mark.parametrize("name", ["info.program", "torch.cuda.CUDAGraph", "Eagle3DraftModel.from_pretrained",
                                  "speculators.Eagle3DraftModel", "card.json"])
def test_ordinary_code_is_not_a_name_of_ours(name):
    assert problem(name) is None


@pytest.mark.parametrize("name", ["EagerBackend.use_verify_form", "RunOptions.chunked_prefill", "PteBackend.dtype",
                                  "runners.device_loop.DeviceRunner", "eagle3_check.runners.loop:ReferenceRunner"])
def test_names_of_ours_resolve(name):
    assert name.split(".")[0].split(":")[0] in {*SHORT, *CLASSES}, name  # checked, not skipped
    assert problem(name) is None


def test_readme_fits_one_screen():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md is {len(lines)} lines; expected at most {README_MAX_LINES}. Fix: move the detail "
        "into a page under docs/ and link it")
