"""The ExecuTorch runtime without the exporter: what `executorch.runtime` does to load and run a
program, over the same C extension, in a process that never imports `executorch.exir`.

`import executorch.runtime` imports `executorch.extension.pybindings.portable_lib`, which imports
`executorch.exir._warnings` for the class of its one ExperimentalWarning, and with it the whole of
`executorch.exir` (the exporter: torch._dynamo, inductor's passes, the edge dialect's op tables).
That is most of the import (docs/contributing.md, "How long make check takes", measures it), and every
process that only runs programs pays it: each `--pte` route's probe child, the fake runner binary
(one process a request), the pytest plugin through a binary.

So this module loads the extension as `portable_lib` does (torch first: libtorch.so must be loaded
before the extension resolves it) and makes the calls `executorch.runtime` makes (executorch 1.5.1,
pinned by the `pte` extra: `Runtime.load_program` for a path, `Program.load_method` cached per name,
`Method.execute`): `load_program(path, data_path)` returns a `Program` with `method_names`,
`load_method(name)` and `metadata(name)`, as `executorch.runtime.Program` has.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def extension():
    """The ExecuTorch C extension (kernels and XNNPACK linked in); ImportError if it is absent."""
    import torch  # noqa: F401 - libtorch.so first, as portable_lib does
    from executorch.extension.pybindings import _C

    return _C


class Method:
    """One loaded method: `execute(inputs)` -> its outputs (a list), `metadata` (its MethodMeta)."""

    def __init__(self, method):
        self._method = method

    def execute(self, inputs: list[Any]) -> list[Any]:
        return self._method(inputs)

    @property
    def metadata(self):
        return self._method.method_meta()


class Program:
    """A loaded program: its method names, each method loaded once (and kept), each method's meta."""

    def __init__(self, program):
        self._program = program
        self._methods: dict[str, Method | None] = {
            program.get_method_name(i): None for i in range(program.num_methods())}

    @property
    def method_names(self) -> set[str]:
        return set(self._methods)

    def load_method(self, name: str) -> Method:
        if self._methods[name] is None:
            self._methods[name] = Method(self._program.load_method(name))
        return self._methods[name]

    def metadata(self, name: str):
        return self._program.method_meta(name)


def load_program(path: str | Path, data_path: str | Path | None = None) -> Program:
    """The program at `path` (with its `.ptd` data file when given), verified as
    `executorch.runtime` verifies it by default (internal consistency)."""
    c = extension()
    return Program(c._load_program(str(path), enable_etdump=False, debug_buffer_size=0,
                                   program_verification=c.Verification.InternalConsistency,
                                   data_path=str(data_path) if data_path is not None else None))
