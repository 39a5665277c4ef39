"""The runner on CUDA, graphs on and off: bit-identical to HF eager greedy in fp32, graph on ==
graph off in fp32 and bf16, bf16 within the tie tolerance, one read back per round.

Every embedded fixture is used (the default tiny-llama and any trained ones beside it).
An oracle draft (`eagle3_check.suites.oracle`) makes rounds accept 0..K proposals, so the reseed
slices of graph-owned verify outputs are exercised even with an untrained draft.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from eagle3_check.fixtures.registry import list_fixtures, load_fixture
from eagle3_check.jobs.check.prompt_set import format_table, run_check
from eagle3_check.judge.hf import HFReference
from eagle3_check.judge.self_ref import self_greedy
from eagle3_check.judge.tolerance import default_budget, tolerance_for
from eagle3_check.judge.verdict import FAIL, PASS
from eagle3_check.program.cuda_graph import GraphedProgram
from eagle3_check.program.eager import EagerBackend
from eagle3_check.runners.device_loop import DeviceRunner
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions, prompt_ids
from eagle3_check.suites.oracle import OracleDraftProgram
from eagle3_check.tokenizer import Tokenizer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; torch.cuda.is_available() is False"),
]

FIXTURES = list_fixtures(real=False)  # the real ones convert from a GGUF (the gguf package): not on the GPU host
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
OPTS = RunOptions(max_new_tokens=64)
NO_STOP = RunOptions(max_new_tokens=64, stop_ids=(), stop_token=None, eos_id=None)
_cache: dict = {}


def programs(name: str, dtype: str) -> tuple[EagerBackend, GraphedProgram]:
    """(graphs off, graphs on) over one module: they share weights and KV caches."""
    if (name, dtype) not in _cache:
        plain = EagerBackend.from_fixture(load_fixture(name), "cuda", dtype)
        _cache[name, dtype] = (plain, GraphedProgram(plain))
    return _cache[name, dtype]


def hf(name: str, dtype: str) -> HFReference:
    if ("hf", name, dtype) not in _cache:
        _cache["hf", name, dtype] = HFReference(load_fixture(name).target_dir, "cuda", DTYPES[dtype])
    return _cache["hf", name, dtype]


def tok(name: str) -> Tokenizer:
    return Tokenizer.load(load_fixture(name).tokenizer_path)


@pytest.mark.parametrize("runner", [DeviceRunner(), ReferenceRunner()], ids=["device-runner", "reference-runner"])
@pytest.mark.parametrize("graph", [True, False], ids=["graph-on", "graph-off"])
@pytest.mark.parametrize("name", FIXTURES)
def test_fp32_bit_identical_to_hf_eager(name, graph, runner):
    plain, graphed = programs(name, "float32")
    report = run_check(graphed if graph else plain, tok(name), hf(name, "float32"),
                       load_fixture(name).prompts(), OPTS, tolerance=tolerance_for("float32"), runner=runner)
    print(format_table(report))
    assert [o.verdict.status for o in report.outcomes] == [PASS] * len(report.outcomes), format_table(report)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", FIXTURES)
def test_graph_on_equals_off(name, dtype):
    plain, graphed = programs(name, dtype)
    t = tok(name)
    for p in load_fixture(name).prompts():
        ids = prompt_ids(t, p.text, NO_STOP)
        seq = ids + self_greedy(plain, ids, 64).tokens
        for draft in ("own", "oracle"):
            off_p = OracleDraftProgram(plain, seq, 0.7) if draft == "oracle" else plain
            on_p = OracleDraftProgram(graphed, seq, 0.7) if draft == "oracle" else graphed
            off = DeviceRunner().run(off_p, t, ids, NO_STOP)
            on = DeviceRunner().run(on_p, t, ids, NO_STOP)
            assert (on.tokens, on.accepted, on.tau) == (off.tokens, off.accepted, off.tau), (p.id, draft)


# tiny-llama-random is the deliberately chaotic fixture (init 0.2, untrained draft): its top
# logits sit within a few bf16 steps (0.031) of each other. On the H200 (torch 2.11, 2026-11-29)
# 12 of 14 prompts end in ties and 'harbour' diverges at token 16 with a reference margin of
# 0.156 (5 bf16 steps) > the 0.125 tolerance: HF's eager and SDPA bf16 kernels disagree there,
# the runner does not. Kept, strictly expected to fail, to show the bf16 limit is enforced.
# With the per-position verdict (issue 11) on CPU, bf16 tiny-llama-random fails 3 positions whose
# runner token ranks 3rd/4th in the reference (tiny-gemma4: 4 positions); not yet re-run on CUDA.
BF16_CHAOTIC = pytest.mark.xfail(
    strict=True, reason="tiny-llama-random: on the H200 one bf16 position picks a rank-5 token 10 ulps below the "
    "top (beyond TOP_N = 4; measured, see eagle3_check/judge/tolerance.py)")


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=BF16_CHAOTIC) if n == "tiny-llama-random" else n for n in FIXTURES])
def test_bf16_pass_or_tie(name):
    tol = tolerance_for("bfloat16")
    _, graphed = programs(name, "bfloat16")
    report = run_check(graphed, tok(name), hf(name, "bfloat16"), load_fixture(name).prompts(), OPTS,
                       tolerance=tol, runner=DeviceRunner(), tie_budget=default_budget("bfloat16"))
    print(f"bf16 vs HF bf16 eager on CUDA, tie tolerance {tol.describe()}:")
    print(format_table(report))
    for o in report.outcomes:
        if o.verdict.status == FAIL and o.verdict.margin is not None and o.verdict.index is not None:
            print(f"fail: {o.prompt_id}: {o.verdict.message}; "
                  + hf_sdpa_diagnosis(name, o) + "; " + one_row_diagnosis(programs(name, "bfloat16")[0], o))
    assert report.passed, format_table(report)


def hf_sdpa_diagnosis(name: str, outcome) -> str:
    """Forensics for a bf16 failure: does Transformers itself, with SDPA attention instead of
    eager, produce the runner's tokens up to the divergence? Then it is kernel numerics."""
    from transformers import AutoModelForCausalLM

    ref = hf(name, "bfloat16")
    sdpa = AutoModelForCausalLM.from_pretrained(load_fixture(name).target_dir, dtype=torch.bfloat16,
                                                attn_implementation="sdpa").to("cuda").eval()
    eager_model, ref.model = ref.model, sdpa
    try:
        i = outcome.verdict.index
        got = ref.greedy(outcome.run.prompt_ids, i + 1).tokens
    finally:
        ref.model = eager_model
    same = got == outcome.run.tokens[: i + 1]
    return (f"HF with SDPA attention {'produces' if same else 'does not produce'} the runner's tokens "
            f"0..{i} (HF sdpa token {got[i]}, runner {outcome.run.tokens[i]})")


@torch.no_grad()
def one_row_diagnosis(plain: EagerBackend, outcome) -> str:
    """Forensics for a bf16 failure: our own target decoded one row at a time (the HF
    reference's shape) instead of K + 1-row verify windows. If it gives the reference's
    token, the divergence is the batched verify's rounding, not the cache or the mask."""
    i, ids = outcome.verdict.index, outcome.run.prompt_ids
    target, dev = plain.module.target, plain.device
    logits, _ = target(torch.tensor([ids], device=dev), torch.arange(len(ids), device=dev))
    seq = [int(logits[0, -1].argmax())]
    for pos in range(len(ids), len(ids) + i):
        logits, _ = target(torch.tensor([[seq[-1]]], device=dev), torch.tensor([pos], device=dev))
        seq.append(int(logits[0, -1].argmax()))
    top = logits[0, -1].float().topk(2)
    return (f"our target one row at a time gives token {seq[i]} at {i} (its own margin "
            f"{float(top.values[0] - top.values[1]):.3g}; reference {outcome.verdict.want}, runner {outcome.verdict.got})")


def test_verify_captured_once_per_chain_length():
    name = FIXTURES[0]
    plain, _ = programs(name, "float32")
    graphed = GraphedProgram(plain)  # fresh graph caches
    t = tok(name)
    rounds = 0
    for k in (2, 4, 2, 4):
        rounds += DeviceRunner().run(graphed, t, "Count from one to ten.", RunOptions(max_new_tokens=24, chain_len=k)).rounds
    windows = sorted(key[0][0][1] for key in graphed.verify_graphs.entries)
    assert windows == [3, 5]
    assert sum(graphed.verify_graphs.captures.values()) == rounds
    assert graphed.verify_graphs.eager_calls == 0


def test_one_read_back_per_round():
    """With CUDA's sync debug mode on, a warm run synchronises once per round plus at most a
    few times per request (prompt upload, prefill bonus read)."""
    name = FIXTURES[0]
    _, graphed = programs(name, "float32")
    t = tok(name)
    ids = prompt_ids(t, "Hi", NO_STOP)
    oracle = OracleDraftProgram(graphed, ids + self_greedy(graphed, ids, 64).tokens, 0.7)
    DeviceRunner().run(oracle, t, ids, NO_STOP)  # warm: graphs captured
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            result = DeviceRunner().run(oracle, t, ids, NO_STOP)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = sum("synchroniz" in str(w.message) for w in caught)
    print(f"rounds {result.rounds}, synchronisations {syncs}")
    assert result.rounds <= syncs <= result.rounds + 3


def test_edge_suites_on_cuda(graph=True):
    """Every registered edge case (eagle3_check.suites) on the CUDA program, device runner."""
    from eagle3_check.jobs.suites.execute import SKIP, SuiteEnv, run_case
    from eagle3_check.judge.verdict import FAIL as CASE_FAIL
    from eagle3_check.suites import all_cases

    name = FIXTURES[0]
    base = SuiteEnv.eager(name, "cuda", "float32")
    built: dict = {}

    def program_for(spec):
        key = tuple(sorted(spec.items()))
        if key not in built:
            built[key] = GraphedProgram(base.program_for(spec)) if graph else base.program_for(spec)
        return built[key]

    env = SuiteEnv(program_for, base.tokenizer, base.reference, base.prompts, base.tolerance)
    results = [run_case(case, env, DeviceRunner()) for case in all_cases()]
    ran = [r for r in results if r.status != SKIP]
    for r in results:
        print(f"{r.name}: {r.status} {r.message}")
    assert ran, "no edge case ran"
    failed = [f"{r.name}: {r.message}" for r in ran if r.status == CASE_FAIL]
    assert not failed, "\n".join(failed)
