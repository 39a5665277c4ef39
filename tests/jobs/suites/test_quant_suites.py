"""Every edge case of the registry on the quantized fixture variant tiny-llama-int4, judged
against the self reference (DESIGN §3: a quantized program's runner must match the program's own
greedy decoding; HF full precision is drift, gated elsewhere: tests/jobs/gate/test_quant_gate.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("torchao.quantization", reason="torchao not installed (it comes with the pte extra): "
                    "pip install -e .[pte]")

from eagle3_check.jobs.suites.execute import SELF, SKIP, SuiteEnv, run_case  # noqa: E402
from eagle3_check.judge.verdict import FAIL  # noqa: E402
from eagle3_check.suites import all_cases  # noqa: E402

VARIANT = "tiny-llama-int4"
CASES = all_cases()


@pytest.fixture(scope="module")
def env():
    e = SuiteEnv.eager(VARIANT, reference=SELF)
    assert e.reference == SELF
    return e


@pytest.mark.parametrize("case", CASES, ids=[f"{VARIANT}:{c.name}" for c in CASES])
def test_case_on_the_quantized_variant(case, env):
    result = run_case(case, env)
    if result.status == SKIP:
        pytest.skip(result.message)
    assert result.status != FAIL, f"{case.name} ({case.what}): {result.message}"


def test_the_variant_program_is_quantized(env):
    program = env.program_for({})
    assert program.metadata()["get_quantization"] == "int4-weight;group_size=32;scope=target"
