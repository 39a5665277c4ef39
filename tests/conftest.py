"""Shared pytest fixtures: the embedded fixture, its eager program, tokenizer and HF reference.

Everything here is CPU, fp32, built from files committed under fixtures/ (no network).
"""

from __future__ import annotations

import pytest
import torch

from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.program.contract import read_metadata
from eagle3_check.program.eager import EagerBackend
from eagle3_check.reference.hf import HFReference
from eagle3_check.tokenizer import Tokenizer

torch.set_num_threads(1)  # tiny models: one thread is fastest and keeps 2-core CI machines calm


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
