"""The compiled target forward (program/compiled.py) under CUDA graphs, on every Llama fixture:
fp32 tokens identical to HF eager, graph on == graph off with the compiled forward (own and
oracle draft), bf16 judged by the verdict against HF bf16, one compile per window length.
"""

from __future__ import annotations

import pytest
import torch
from cuda_marks import COMPILE_ON_CUDA

from eagle3_check.fixtures.registry import list_fixtures, load_fixture
from eagle3_check.jobs.check.prompt_set import format_table, run_check
from eagle3_check.judge.hf import HFReference
from eagle3_check.judge.self_ref import self_greedy
from eagle3_check.judge.tolerance import default_budget, tolerance_for
from eagle3_check.judge.verdict import PASS
from eagle3_check.program.compiled import compile_target, llama_layout_problem
from eagle3_check.program.cuda_graph import GraphedProgram
from eagle3_check.program.eager import EagerBackend
from eagle3_check.runners.device_loop import DeviceRunner
from eagle3_check.runners.options import RunOptions, prompt_ids
from eagle3_check.suites.oracle import OracleDraftProgram
from eagle3_check.tokenizer import Tokenizer

pytestmark = COMPILE_ON_CUDA

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
OPTS = RunOptions(max_new_tokens=64)
NO_STOP = RunOptions(max_new_tokens=64, stop_ids=(), stop_token=None, eos_id=None)


def _llama(name: str) -> bool:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(load_fixture(name).target_dir).model_type == "llama"


LLAMA = [n for n in list_fixtures(real=False) if _llama(n)]
_cache: dict = {}


def programs(name: str, dtype: str, attention: str = "sdpa") -> tuple[EagerBackend, GraphedProgram]:
    """(compiled, graphs off; compiled, graphs on) over one module."""
    if (name, dtype, attention) not in _cache:
        plain = EagerBackend.from_fixture(load_fixture(name), "cuda", dtype)
        assert llama_layout_problem(plain.module.target.model) is None
        compile_target(plain.module.target, "layer", attention=attention)
        _cache[name, dtype, attention] = (plain, GraphedProgram(plain))
    return _cache[name, dtype, attention]


def hf(name: str, dtype: str) -> HFReference:
    if ("hf", name, dtype) not in _cache:
        _cache["hf", name, dtype] = HFReference(load_fixture(name).target_dir, "cuda", DTYPES[dtype])
    return _cache["hf", name, dtype]


@pytest.mark.parametrize("attention", ["sdpa", "grouped"])
@pytest.mark.parametrize("graph", [True, False], ids=["graph-on", "graph-off"])
@pytest.mark.parametrize("name", LLAMA)
def test_compiled_fp32_tokens_identical_to_hf_eager(name, graph, attention):
    plain, graphed = programs(name, "float32", attention)
    t = Tokenizer.load(load_fixture(name).tokenizer_path)
    report = run_check(graphed if graph else plain, t, hf(name, "float32"), load_fixture(name).prompts(), OPTS,
                       tolerance=tolerance_for("float32"), runner=DeviceRunner())
    print(format_table(report))
    assert [o.verdict.status for o in report.outcomes] == [PASS] * len(report.outcomes), format_table(report)
    assert plain.module.target.fast_forward.compiled_calls > 0


@pytest.mark.parametrize("attention", ["sdpa", "grouped"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", LLAMA)
def test_compiled_graph_on_equals_off(name, dtype, attention):
    plain, graphed = programs(name, dtype, attention)
    t = Tokenizer.load(load_fixture(name).tokenizer_path)
    for p in load_fixture(name).prompts()[:6]:
        ids = prompt_ids(t, p.text, NO_STOP)
        seq = ids + self_greedy(plain, ids, 64).tokens
        for draft in ("own", "oracle"):
            off_p = OracleDraftProgram(plain, seq, 0.7) if draft == "oracle" else plain
            on_p = OracleDraftProgram(graphed, seq, 0.7) if draft == "oracle" else graphed
            off = DeviceRunner().run(off_p, t, ids, NO_STOP)
            on = DeviceRunner().run(on_p, t, ids, NO_STOP)
            assert (on.tokens, on.accepted, on.tau) == (off.tokens, off.accepted, off.tau), (p.id, draft)


@pytest.mark.parametrize("attention", ["sdpa", "grouped"])
def test_compiled_bf16_passes_the_verdict(attention):
    name = "tiny-llama"
    if name not in LLAMA:
        pytest.skip(f"needs the {name} fixture; found {LLAMA}")
    _, graphed = programs(name, "bfloat16", attention)
    t = Tokenizer.load(load_fixture(name).tokenizer_path)
    tol = tolerance_for("bfloat16")
    report = run_check(graphed, t, hf(name, "bfloat16"), load_fixture(name).prompts(), OPTS, tolerance=tol,
                       runner=DeviceRunner(), tie_budget=default_budget("bfloat16"))
    print(f"compiled bf16 vs HF bf16 eager, tolerance {tol.describe()}:")
    print(format_table(report))
    assert report.passed, format_table(report)
