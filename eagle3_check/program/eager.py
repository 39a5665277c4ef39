"""The eager backend: `Eagle3Speculator` as a program on CPU or CUDA (the reference backend).

Its metadata is taken from how it was built: the `ProgramSpec` (sequence length,
prefill range, chain length, verify range) plus what the models say (vocab sizes,
layer count, sliding window, EOS ids).

`reuse_outputs=True` gives the eager program graph-owned outputs (`owned.OutputBuffers`), as a
CUDA graph's or an ExecuTorch program's memory-planned outputs are: each method writes its
outputs into one buffer of its own, sized for max_seq_len rows, and returns views of it, so an output is valid
only until the next call of the same method (any length). A runner that reads an output after
that (a stale read) then sees the later call's values on CPU, not only on a GPU. Worked
example: draft_decode at positions 0..9 returns ids = buf[:, :10]; the chain step at 10 then
writes buf[:, :1], so the seed's ids[0, -1] read after that step is not the seed's proposal 0
(ids[0, 0] is now the step's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from eagle3_check.errors import InputError, OptionError
from eagle3_check.fixtures.registry import Fixture, ProgramSpec
from eagle3_check.program.checkpoint import load_draft
from eagle3_check.program.contract import (
    VERIFY_BOUNDS_FROM_KEY,
    VERIFY_BOUNDS_KEY,
    VERIFY_FORM_KEY,
    VERIFY_KV_WINDOW,
    VERIFY_PLAIN,
    SpeculatorProgram,
    kv_window_for,
)
from eagle3_check.program.kv_window import windowed
from eagle3_check.program.owned import OutputBuffers
from eagle3_check.program.speculator import Eagle3Speculator
from eagle3_check.program.target import TargetAdapter, load_hf_target, target_text_config
from eagle3_check.program.weights import weight_info

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def resolve_device(device: str) -> torch.device:
    """`device` as torch's; a `--devices` list ("cuda:0,cuda:1") resolves to its first, the main device,
    after each GPU it names is checked to exist."""
    if "," in device:
        from eagle3_check.program.placement import parse_devices

        devices = parse_devices(device, allow_cpu=True)
        for d in devices:
            if d.startswith("cuda") and resolve_device(d).index >= torch.cuda.device_count():
                raise OptionError(f"--devices {device}: {d}", f"one of the {torch.cuda.device_count()} GPUs "
                                  "visible here", "name GPUs nvidia-smi lists (or set CUDA_VISIBLE_DEVICES)")
        return resolve_device(devices[0])
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise OptionError(
            f"--device {device}", "a CUDA device", "run on a machine with a GPU, or use --device cpu"
        )
    if device != "cpu" and not device.startswith("cuda"):
        raise OptionError(f"--device {device}", "cpu or cuda[:N]", "pass --device cpu or --device cuda")
    return torch.device(device)


def check_memory(target_dir, draft_dir, max_seq_len: int, device: str, dtype: str) -> None:
    """max_seq_len within the target's max_position_embeddings; the program's weights and KV caches,
    estimated from the two configs (resources.py), within the memory available (or --max-memory):
    both refused before anything is allocated."""
    from eagle3_check.program.checkpoint import read_draft_config
    from eagle3_check.resources import Estimate, check_fits, draft_estimate, target_estimate

    tcfg = target_text_config(target_dir)
    limit = getattr(tcfg, "max_position_embeddings", None)
    if type(limit) is int and max_seq_len > limit:
        raise OptionError(f"max_seq_len {max_seq_len} (--max-seq-len)",
                          f"at most the target's max_position_embeddings {limit} (target config {target_dir})",
                          f"pass --max-seq-len {limit} or less")
    elem = torch.finfo(DTYPES[dtype]).bits // 8
    parts = target_estimate(tcfg, max_seq_len, elem, f"target config {target_dir}")
    parts.update(draft_estimate(read_draft_config(draft_dir), max_seq_len))
    check_fits(Estimate(parts, host_peak=parts["target weights"]), device, f"the program (max_seq_len {max_seq_len}, "
               f"{dtype})", "pass a smaller --max-seq-len, --dtype bfloat16 or a smaller model")


class EagerBackend(SpeculatorProgram):
    def __init__(self, module: Eagle3Speculator, spec: ProgramSpec, eos_ids: tuple[int, ...] = (),
                 reuse_outputs: bool = False):
        self.module = module
        self.spec = spec
        self.reuse_outputs = reuse_outputs  # graph-owned outputs (module doc)
        self.weight_conversion: dict | None = None  # set by from_dirs: weights stored in another dtype (weights.py)
        self.placement = None  # set by from_dirs with --devices: where the target's layers sit (placement.py)
        self._buffers = OutputBuffers(spec.max_seq_len) if reuse_outputs else None
        target = module.target
        self.device = next(module.parameters()).device
        self._metadata: dict[str, Any] = {
            "get_chain_len": spec.chain_len,
            "get_max_prefill_chunk": spec.max_prefill,
            "get_min_prefill_chunk": spec.min_prefill,
            "get_max_seq_len": spec.max_seq_len,
            "get_vocab_size": target.vocab_size,
            "get_draft_vocab_size": module.draft.cfg.draft_vocab_size,
            "get_n_layers": target.n_layers,
            "get_eos_ids": list(eos_ids),
            "get_min_verify_len": spec.min_verify_len,
            "get_max_verify_len": spec.max_verify_len,
        }
        if target.sliding_window:
            self._metadata["get_sliding_window"] = int(target.sliding_window)
        self.verify_form = VERIFY_PLAIN

    def use_verify_form(self, form: str) -> EagerBackend:
        """Emulates either target_verify form (DESIGN §1). The kv_window form is the seed's from
        #20344 on: target_verify also takes kv_window (built per call by `kv_window_for`), and the
        program declares no verify range metadata; its window bounds [min C, max C] are reported
        as a `.pte` reports its method's own input bounds."""
        if form not in (VERIFY_PLAIN, VERIFY_KV_WINDOW):
            raise OptionError(f"target_verify form {form!r}", f"{VERIFY_PLAIN} or {VERIFY_KV_WINDOW}",
                              "pick one of the two forms of DESIGN §1")
        self.verify_form = form
        verify = {"get_min_verify_len": self.spec.min_verify_len, "get_max_verify_len": self.spec.max_verify_len}
        for key in (*verify, VERIFY_BOUNDS_KEY, VERIFY_FORM_KEY, VERIFY_BOUNDS_FROM_KEY):
            self._metadata.pop(key, None)
        if form == VERIFY_PLAIN:
            self._metadata.update(verify)
        else:
            self._metadata[VERIFY_BOUNDS_KEY] = [self.spec.min_verify_len, self.spec.max_verify_len]
            self._metadata[VERIFY_FORM_KEY] = VERIFY_KV_WINDOW
            self._metadata[VERIFY_BOUNDS_FROM_KEY] = "the eager program's spec"
        return self

    @classmethod
    def from_dirs(
        cls,
        target_dir: str | Path,
        draft_dir: str | Path,
        spec: ProgramSpec,
        device: str = "cpu",
        dtype: str = "float32",
        reuse_outputs: bool = False,
    ) -> EagerBackend:
        if dtype not in DTYPES:
            raise OptionError(f"--dtype {dtype}", f"one of {sorted(DTYPES)}", "pass --dtype float32")
        dev = resolve_device(device)
        check_memory(target_dir, draft_dir, spec.max_seq_len, device, dtype)  # before any allocation
        model = load_hf_target(target_dir, DTYPES[dtype])
        draft = load_draft(draft_dir, spec.max_seq_len)
        tcfg = model.config.get_text_config(decoder=True)
        if draft.cfg.target_hidden_size != tcfg.hidden_size:
            raise InputError(
                f"draft target_hidden_size {draft.cfg.target_hidden_size}",
                f"the target's hidden size {tcfg.hidden_size}",
                "use a draft trained for this target",
            )
        if draft.cfg.vocab_size != tcfg.vocab_size:
            raise InputError(
                f"draft vocab size {draft.cfg.vocab_size}",
                f"the target's vocab size {tcfg.vocab_size}",
                "use a draft trained for this target",
            )
        draft.cfg.resolve_aux_layers(tcfg.num_hidden_layers)  # vLLM's default when unnamed
        if draft.needs_target_embedding:  # no embed_tokens in the checkpoint: vLLM shares the target's
            draft.share_embedding(model.get_input_embeddings().weight)
        target = TargetAdapter(model, draft.cfg.aux_layer_ids, spec.max_seq_len)
        # The target is loaded in `dtype` already; only the device moves. A module-wide .to(dtype) would also
        # cast HF's float32 RoPE `inv_freq` buffer to bf16 (0.3162 -> 0.3164): a phase error that grows with the
        # position: a 4.19-logit margin shift at the end of an 825-token prompt on the 8B shape (0.25 with the
        # float32 table, where two HF forwards differ by 0.38; docs/scale.md).
        draft.to(dtype=DTYPES[dtype])
        if "," in device:  # --devices: the target's layers over several GPUs, the draft on the first
            from eagle3_check.program.placement import param_bytes, parse_devices, place_target

            draft.to(device=dev)
            placement = place_target(target, parse_devices(device, allow_cpu=True), first_extra=param_bytes(draft))
            module = Eagle3Speculator(target, draft).eval()
        else:
            placement = None
            module = Eagle3Speculator(target, draft).to(device=dev).eval()
        eos = model.generation_config.eos_token_id if model.generation_config else None
        eos_ids = tuple(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        program = cls(module, spec, eos_ids, reuse_outputs)
        program.weight_conversion = weight_info(target_dir, draft_dir, dtype)  # fp16 weights upcast: stated
        program.placement = placement
        return program

    @classmethod
    def from_fixture(cls, fixture: Fixture, device: str = "cpu", dtype: str = "float32", reuse_outputs: bool = False,
                     **spec_overrides) -> EagerBackend:
        spec = ProgramSpec(**{**fixture.spec.__dict__, **spec_overrides})
        program = cls.from_dirs(fixture.target_dir, fixture.draft_dir, spec, device, dtype, reuse_outputs)
        if fixture.quantization is not None:  # a quantized variant (e.g. tiny-llama-int4), built here
            from eagle3_check.program.quantize import make_spec

            program.quantize(make_spec(**fixture.quantization))
        return program

    @property
    def dtype(self) -> str:
        """The dtype the program computes in (its weights'): float32 or bfloat16."""
        return str(next(self.module.parameters()).dtype).removeprefix("torch.")

    def metadata(self) -> dict[str, Any]:
        return dict(self._metadata)

    def _owned(self, method: str, out: tuple[torch.Tensor, torch.Tensor]):  # ([1, T], [1, T, H])
        """`out` in the method's one output buffer when outputs are graph-owned (module doc)."""
        return self._buffers.own(method, *out) if self._buffers is not None else out

    def quantize(self, spec) -> list[str]:
        """Weight-only quantization in place (`program/quantize.py`, a `QuantSpec`): the eager twin
        of a quantized `.pte`; the metadata gains `get_quantization`. Returns the quantized layers."""
        from eagle3_check.program.quantize import QUANT_KEY, quantize_speculator

        if self.device.type != "cpu":
            raise OptionError(f"--quantize {spec.scheme} on {self.device}", "cpu",
                              "quantized programs run on CPU here: pass --device cpu")
        self.quantized_layers = quantize_speculator(self.module, spec)
        self._metadata[QUANT_KEY] = spec.tag()
        return self.quantized_layers

    # each call attends over the used KV slots only on CPU (program/kv_window.py: bit-identical)
    @torch.no_grad()
    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H]
        with windowed(self):
            return self._owned("prefill", self.module.prefill(tokens.to(self.device), positions.to(self.device)))

    @torch.no_grad()
    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, H]
        tokens, positions = tokens.to(self.device), positions.to(self.device)
        with windowed(self):
            if self.verify_form == VERIFY_KV_WINDOW:
                return self._owned("target_verify", self.module.target_verify_kv(
                    tokens, positions, kv_window_for(positions).to(self.device)))
            return self._owned("target_verify", self.module.target_verify(tokens, positions))

    @torch.no_grad()
    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, H], [T] -> [1, T], [1, T, H]
        with windowed(self):
            return self._owned("draft_decode", self.module.draft_decode(
                tokens.to(self.device), feature.to(self.device), positions.to(self.device)
            ))
