"""Builds a mutant runner: the reference runner's own source with one seeded bug.

A mutant is a list of (original snippet, replacement) edits to the source of
`eagle3_check.runners.loop` (or of a module the runner imports from, e.g. `options`, or
`placement`, whose mutants run only on the placement they edit). The
edited source is executed as a fresh module; its `ReferenceRunner` is the mutant. An
edit whose snippet no longer occurs exactly once raises `StaleMutant`, so a change to
the runner cannot silently turn a mutant into a copy of the reference.

Worked example (mutant `emit_past_max_new`):
    edit  "if len(out) >= max_new:"  ->  "if len(out) > max_new:"
    the fresh module's ReferenceRunner then emits max_new + 1 tokens when max_new caps.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from dataclasses import dataclass

RUNNER_MODULE = "eagle3_check.runners.loop"


class StaleMutant(RuntimeError):
    """A mutant's snippet is not found exactly once in the current source."""


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: str  # the plausible bug, in words
    needs: str  # the case that kills it: what a suite lacks if it survives
    edits: tuple[tuple[str, str], ...]
    module: str = RUNNER_MODULE  # the module whose source is edited
    placements: tuple[str, ...] = ("host", "device")  # where the edited code runs (runners/placement.py)


def _edited_module(module_name: str, mutant: Mutant, edits) -> types.ModuleType:
    original = importlib.import_module(module_name)
    src = inspect.getsource(original)
    for old, new in edits:
        n = src.count(old)
        if n != 1:
            raise StaleMutant(
                f"mutant {mutant.name}: snippet {old!r} occurs {n} times in {module_name} "
                "(the runner changed: update the mutant's edit)"
            )
        src = src.replace(old, new)
    name = f"eagle3_check.mutants._live.{mutant.name}.{module_name.rsplit('.', 1)[-1]}"
    mod = types.ModuleType(name)
    mod.__file__ = f"<mutant {mutant.name} of {module_name}>"
    sys.modules[name] = mod  # dataclasses look their module up while the class is built
    try:
        exec(compile(src, mod.__file__, "exec"), mod.__dict__)
    finally:
        del sys.modules[name]
    return mod


def build_runner_class(mutant: Mutant) -> type:
    """The mutated ReferenceRunner class (RunResult and friends stay the original classes)."""
    original_runner = importlib.import_module(RUNNER_MODULE)
    if mutant.module == RUNNER_MODULE:
        runner_mod = _edited_module(RUNNER_MODULE, mutant, mutant.edits)
    else:
        dep = _edited_module(mutant.module, mutant, mutant.edits)
        original_dep = importlib.import_module(mutant.module)
        runner_mod = _edited_module(RUNNER_MODULE, mutant, ())
        for key, value in list(vars(runner_mod).items()):  # rebind what the runner imported from dep
            if getattr(original_dep, key, None) is value and key in vars(dep):
                setattr(runner_mod, key, getattr(dep, key))
    for key, value in vars(original_runner).items():  # one RunResult class for everybody
        if isinstance(value, type) and key != "ReferenceRunner":
            setattr(runner_mod, key, value)
    cls = runner_mod.ReferenceRunner
    cls.name = f"mutant:{mutant.name}"
    cls.mutant = mutant
    return cls
