"""The marks of a test module that needs torch.compile on a CUDA GPU (tests/gpu/test_compiled_cuda.py,
tests/gpu/test_compile_cli_cuda.py): the `gpu` marker, and skips that name what was needed and found."""

from __future__ import annotations

import pytest
import torch

from eagle3_check.program.compiled import compile_unavailable

CUDA = torch.cuda.is_available()
COMPILE_ON_CUDA = [
    pytest.mark.gpu,
    pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU; torch.cuda.is_available() is False"),
    pytest.mark.skipif(CUDA and compile_unavailable("cuda") is not None,
                       reason=f"needs torch.compile on CUDA; {compile_unavailable('cuda') if CUDA else ''}"),
]
