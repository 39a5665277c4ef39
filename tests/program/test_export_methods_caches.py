"""A program's KV caches start zeroed whatever the eager module ran before its export
(program/export.py `zeroed_caches`): the traced program's state holds the module's own cache buffers,
so before this a test session's (or a job's) used module lowered its last request's keys and values
into the `.pte` (tests/pte/test_fast_lowering_pte.py's kv_window comparison failed on them)."""

from __future__ import annotations

import torch

from eagle3_check.program.eager import EagerBackend
from eagle3_check.program.export import export_methods, feature_width


def test_a_used_module_exports_zero_caches_and_keeps_its_own(fixture):
    program = EagerBackend.from_fixture(fixture)
    caches = {n: b for n, b in program.module.named_buffers() if "cache" in n}
    assert caches, "the fixture's speculator has no cache buffers"
    with torch.no_grad():
        for b in caches.values():
            b.fill_(1.0)  # what a request leaves behind
    programs = export_methods(program.module, program.spec, feature_width(program.module))
    for name, ep in programs.items():
        traced = {k: v for k, v in ep.constants.items() if "cache" in k}
        assert len(traced) == len(caches), (name, sorted(traced))
        assert all(not v.any() for v in traced.values()), name
    assert all(bool((b == 1.0).all()) for b in caches.values())  # the module keeps its state
