"""Shared pytest fixtures: the embedded fixture, its eager program, tokenizer and HF reference.

Everything here is CPU, fp32, built from files committed under fixtures/ (no network).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
import suite_schedule as scheduling  # tests/suite_schedule.py (tests/ is on sys.path: no __init__.py)
import torch

from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.judge.hf import HFReference
from eagle3_check.program.contract import read_metadata
from eagle3_check.program.eager import EagerBackend
from eagle3_check.tokenizer import Tokenizer

# pytester's in-process runs (the pytest plugin's tests) drop from sys.modules every module first imported
# inside them. A Transformers model module first imported there would live on in the classes Transformers
# caches, beside a second copy of its masking registry: the packed HF reference (judge/packed.py) registers its
# split attention in one and the model reads the other. Imported here first, they are never dropped.
import transformers.masking_utils  # noqa: E402,F401  isort: skip
import transformers.models.gemma4.modeling_gemma4  # noqa: E402,F401  isort: skip
import transformers.models.llama.modeling_llama  # noqa: E402,F401  isort: skip

torch.set_num_threads(1)  # tiny models: one thread is fastest and keeps 2-core CI machines calm


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The order of the suite and its export groups under `-n 2 --dist loadgroup` (tests/suite_schedule.py)."""
    # on an xdist worker `dist` reads "no" and `loadgroup` says what the controller was given
    groups = scheduling.ordered(items, parallel=config.getoption("loadgroup", False))
    scheduling.write_groups(config, groups)


@pytest.hookimpl(optionalhook=True)  # an xdist hook (controller): the file the first worker writes the groups to
def pytest_configure_node(node):
    scheduling.configure_node(node.config, node, _groups_file(node.config))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist", "no") == "loadgroup":
        return scheduling.make_scheduler(config, log, _groups_file(config))
    return None


def _groups_file(config) -> Path:
    if not hasattr(config, "_eagle3_groups"):
        config._eagle3_groups = Path(tempfile.mkdtemp(prefix="eagle3-test-groups-")) / "groups.json"
    return config._eagle3_groups


def pytest_unconfigure(config):
    if hasattr(config, "_eagle3_groups"):
        shutil.rmtree(config._eagle3_groups.parent, ignore_errors=True)


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


@pytest.fixture
def warm(program, hf_reference):
    """tests/test_pytest_plugin*.py: their inline runs load the fixture's program and HF reference.
    pytester drops the modules an inline run imported when it ends, and torch refuses to register its
    operator libraries twice: so every module they need is imported here first (the session's own
    program and reference)."""


def _writable_dir():
    path = Path(tempfile.mkdtemp(prefix="eagle3-probe-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def runner_writable():
    """A directory the runner's process may write (issue 47: as root the harness runs it as `nobody`,
    which cannot write tmp_path, a 0700 tree): a probe's marks go here."""
    yield from _writable_dir()


@pytest.fixture(scope="module")
def module_runner_writable():
    """runner_writable for a module's tests that share one run (tests/cli_child.py's commands)."""
    yield from _writable_dir()
