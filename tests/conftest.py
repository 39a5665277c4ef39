"""Shared pytest fixtures: the embedded fixture, its eager program, tokenizer and HF reference.

Everything here is CPU, fp32, built from files committed under fixtures/ (no network).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.program.contract import read_metadata
from eagle3_check.program.eager import EagerBackend
from eagle3_check.reference.hf import HFReference
from eagle3_check.tokenizer import Tokenizer

torch.set_num_threads(1)  # tiny models: one thread is fastest and keeps 2-core CI machines calm

PTE_TESTS = Path(__file__).resolve().parent / "pte"  # their session fixtures export .pte files: minutes


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    """The tests under tests/pte wait on `.pte` exports (about a minute each on two idle cores, five
    of them, cached in .cache/pte). Serial: they run last, so the fast tests show progress from the
    first seconds. Under `-n 2 --dist loadgroup` (what CI runs): they run first, as one group on one
    worker, which exports each .pte once while the other worker takes the fast tests
    (docs/contributing.md, "How long make check takes")."""
    parallel = config.getoption("dist", "no") == "loadgroup"  # plain -n 2 (load): as serial
    is_pte = {id(item): Path(str(item.path)).is_relative_to(PTE_TESTS) for item in items}
    if parallel:
        for item in items:
            if is_pte[id(item)]:
                item.add_marker(pytest.mark.xdist_group("pte"))
    items.sort(key=lambda item: is_pte[id(item)] != parallel)  # stable: the collection order within each part


@pytest.fixture(scope="session")
def fixture():
    return load_fixture("tiny-llama")


@pytest.fixture(scope="session")
def tokenizer(fixture):
    return Tokenizer.load(fixture.tokenizer_path)


@pytest.fixture(scope="session")
def program(fixture):
    """The eager program of the default fixture (caches roll back by overwrite: shareable)."""
    return EagerBackend.from_fixture(fixture)


@pytest.fixture(scope="session")
def metadata(program):
    return read_metadata(program.metadata())


@pytest.fixture(scope="session")
def hf_reference(fixture):
    return HFReference(fixture.target_dir)
