"""program/aoti_weights.py without a compile: the fingerprint that ties a weightless AOTI package to the
weights it was compiled from, the binding of a loaded model's constants by name, and the refusals.
(The compiled package bound to tiny-llama's weights: tests/aoti/test_aoti_weights_cpu.py, `-m aoti`.)"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from eagle3_check.errors import InputError
from eagle3_check.program import aoti_weights as aw


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("inv_freq", torch.arange(1.0, 3.0))
        self.register_buffer("k_cache_0", torch.zeros(1, 1, 2, 2))


CACHES = {"k_cache_0"}


class Loaded:
    """What `load_package` returns, as far as binding needs: its constant names and load_constants."""

    def __init__(self, fqns):
        self.fqns, self.loads = list(fqns), []

    def get_constant_fqns(self):
        return self.fqns

    def load_constants(self, constants, *, check_full_update, user_managed):
        self.loads.append((constants, check_full_update, user_managed))


def test_compile_options_switch_the_weights_out_of_the_package():
    assert aw.compile_options("external") == {"aot_inductor.package_constants_in_so": False}
    assert aw.compile_options("embedded") == {}
    with pytest.raises(InputError, match="--aoti-weights bogus"):
        aw.compile_options("bogus")


def test_weights_mode_defaults_to_embedded_and_refuses_an_unknown_one():
    assert aw.weights_mode({}) == "embedded"
    assert aw.weights_mode({"weights": {"mode": "external"}}) == "external"
    with pytest.raises(InputError, match="sidecar weights mode 'shared'"):
        aw.weights_mode({"weights": {"mode": "shared"}})


def test_fingerprint_names_every_weight_but_the_caches():
    torch.manual_seed(0)
    m = Tiny()
    rows = aw.fingerprint(m, CACHES)
    assert [r[0] for r in rows] == ["lin.weight", "lin.bias", "inv_freq"]
    assert rows[2][1:3] == [[2], "float32"] and rows[2][3] == aw.checksum(torch.tensor([1.0, 2.0]))


def test_checksum_worked_example_and_what_moves_it():
    assert aw.checksum(torch.tensor([1.0])) == 32512  # 0x3F800000: words [0x0000, 0x3F80] -> 0*1 + 16256*2
    assert aw.checksum(torch.tensor([1.0], dtype=torch.bfloat16)) == 0x3F80  # one word, weight 1
    a = torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16)
    assert aw.checksum(a) != aw.checksum(a.flip(0))  # a permutation moves it
    b = a.clone()
    b.view(torch.int16)[1] ^= 1  # one bit of one weight
    assert aw.checksum(b) != aw.checksum(a)
    assert aw.checksum(torch.tensor([True, False])) == 1  # one-byte dtypes: bytes


def test_checksum_is_exact_across_chunks(monkeypatch):
    torch.manual_seed(0)
    t = torch.randn(1000)
    whole = aw.checksum(t)
    monkeypatch.setattr(aw, "CHUNK", 7)  # 2000 words in chunks of 7: the same integer
    assert aw.checksum(t) == whole


def test_the_same_weights_pass_and_any_other_is_named():
    torch.manual_seed(0)
    m = Tiny()
    rec = aw.fingerprint(m, CACHES)
    aw.check_fingerprint(m, CACHES, rec, "p.pt2")  # the same module
    with torch.no_grad():
        m.k_cache_0.fill_(3.0)  # the caches are not weights: a used module still binds
    aw.check_fingerprint(m, CACHES, rec, "p.pt2")
    other = Tiny()  # another init: every norm moves
    with pytest.raises(InputError, match=r"weight lin\.weight: checksum \d+ here; expected \d+, the weights"):
        aw.check_fingerprint(other, CACHES, rec, "p.pt2")
    with torch.no_grad():
        m.lin.weight[0, 0] += 1e-3  # one element
    with pytest.raises(InputError, match=r"weight lin\.weight"):
        aw.check_fingerprint(m, CACHES, rec, "p.pt2")


def test_a_shape_dtype_or_name_change_is_refused():
    torch.manual_seed(0)
    m = Tiny()
    rec = aw.fingerprint(m, CACHES)
    half = Tiny().to(torch.bfloat16)
    with pytest.raises(InputError, match=r"bfloat16 \[3, 4\] here; expected float32 \[3, 4\]"):
        aw.check_fingerprint(half, CACHES, rec, "p.pt2")
    extra = Tiny()
    extra.register_buffer("mask", torch.ones(2))
    with pytest.raises(InputError, match="weight mask of p.pt2: only in this program"):
        aw.check_fingerprint(extra, CACHES, rec, "p.pt2")


def test_bind_maps_each_constant_to_the_eager_tensor_by_reference():
    m = Tiny()
    model = Loaded(["method.spec.lin.weight", "method.spec.inv_freq", "method.spec.k_cache_0"])
    assert aw.bind(model, aw.module_tensors(m), "prefill", "p.pt2") == 3
    constants, full, user_managed = model.loads[0]
    assert full and user_managed
    assert constants["method.spec.lin.weight"].data_ptr() == m.lin.weight.data_ptr()  # the same storage
    assert constants["method.spec.k_cache_0"] is not None


@pytest.mark.parametrize("fqn", ["method.spec.lin.scale", "lin.weight", "method.other.lin.weight"])
def test_bind_refuses_a_constant_the_eager_program_lacks(fqn):
    with pytest.raises(InputError, match=f"constant {fqn} of model target_verify in p.pt2"):
        aw.bind(Loaded([fqn]), aw.module_tensors(Tiny()), "target_verify", "p.pt2")


class Exported:
    def __init__(self, state, constants):
        self.state_dict, self.constants = state, constants


def test_a_lifted_constant_is_refused_before_the_compile():
    tensors = aw.module_tensors(Tiny())
    aw.check_bindable(Exported({"method.spec.lin.weight": 0}, {"method.spec.k_cache_0": 0}), tensors, "prefill")
    with pytest.raises(InputError, match="constant lifted_tensor_0 of prefill: not a parameter or buffer"):
        aw.check_bindable(Exported({"method.spec.lin.weight": 0}, {"lifted_tensor_0": 0}), tensors, "prefill")
