"""program/aoti_backend.py's inputs: each call's tensors start on 16 bytes, as AOTInductor compiled them."""

from __future__ import annotations

import torch

from eagle3_check.program.aoti_backend import aligned


def test_an_input_off_16_bytes_is_copied_aligned_and_an_aligned_one_is_passed_as_is():
    """aoti_backend.aligned (the GPU run's 'compiled as 16-bytes aligned' warnings): the worked example."""
    base = torch.arange(16, dtype=torch.float32)  # [16]; the allocator aligns its start
    off, on = base[1:5], base[4:8]  # 4 bytes in, 16 bytes in
    assert aligned(on) is on
    copy = aligned(off)
    assert copy is not off and copy.data_ptr() % 16 == 0 and torch.equal(copy, off)
