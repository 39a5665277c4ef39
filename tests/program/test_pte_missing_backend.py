"""A `.pte` lowered for a backend this executorch runtime does not register (ExecuTorch's CUDA
backend, issue 48 item 4) is refused in one line naming the delegate, what the runtime registers
and what would run it: the runtime's own log line is read, never a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch", reason="needs executorch (the pte extra) for its runtime's backend list")

from eagle3_check.errors import InputError  # noqa: E402
from eagle3_check.program.pte_backend import PteBackend, registered_backends, unregistered_backend  # noqa: E402

# what executorch's method.cpp logs for a delegate without a backend (the format seen in libexecutorch.so)
LOG = "E 00:00:00.012345 executorch:method.cpp:112] Backend CudaBackend is not registered.\n"


class CudaDelegatedProgram:
    """A program whose compute methods are delegated to CudaBackend, as the runtime answers for it."""

    def load_method(self, name):
        sys.stderr.write(LOG)
        raise RuntimeError("Failed to load method prefill, error: 0x14")


def test_the_runtime_log_names_the_backend():
    assert unregistered_backend(LOG) == "CudaBackend"
    assert unregistered_backend("Init failed for backend XnnpackBackend: 0x1") is None


def test_the_installed_wheel_registers_no_cuda_backend():
    assert "XnnpackBackend" in registered_backends() and "CudaBackend" not in registered_backends()


def test_a_cuda_backend_program_is_one_line_naming_the_runtime_it_needs():
    backend = object.__new__(PteBackend)
    backend.path, backend.data_path, backend._program = Path("m.pte"), None, CudaDelegatedProgram()
    with pytest.raises(InputError) as e:
        backend._load_methods()
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("method prefill of m.pte is lowered for CudaBackend, which this executorch runtime does "
                          "not register (it registers ")
    assert "built with the CUDA backend" in msg and "--data-path" in msg and 'CUDA-backend programs' in msg
