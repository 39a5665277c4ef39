"""Metadata validation for the gate: a program's metadata against itself, the tokenizer and the target.

`read_metadata` already rejects a missing required key and inconsistent ranges. On top,
`validate_metadata` checks what only the gate knows:
- `get_vocab_size` equals the target's vocab size, and the tokenizer fits in it;
- `get_draft_vocab_size` is at most the target vocab;
- `get_n_layers` and `get_sliding_window` match the target config;
- every `get_eos_ids` id is inside the vocab;
- the program's compiled input maxima (ExecuTorch method metadata) match the exported
  ranges it declares: no method is compiled for less than `get_max_prefill_chunk` /
  `get_max_verify_len` (draft_decode must take a whole prompt).
Missing optional keys are notes, not failures. A warning (shown in the gate's line, never a
failure) names what is known to make a correct-looking program compute another function: a tanh
GELU target in an XNNPACK program that does not record keeping it (program/gelu_tanh.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from eagle3_check.errors import Eagle3CheckError
from eagle3_check.program.contract import OPTIONAL_KEYS, read_metadata


@dataclass
class MetadataFindings:
    problems: list[str] = field(default_factory=list)  # each one fails the gate
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # shown in the gate's line; never fail it

    @property
    def ok(self) -> bool:
        return not self.problems


def target_facts(target_dir: str | Path | None) -> dict:
    """vocab_size / num_hidden_layers / sliding_window of the target config (empty when unknown)."""
    if target_dir is None:
        return {}
    from transformers import AutoConfig

    from eagle3_check.hf_config import TRUST_REMOTE_CODE, read_target_config

    read_target_config(target_dir)
    cfg = AutoConfig.from_pretrained(Path(target_dir), trust_remote_code=TRUST_REMOTE_CODE).get_text_config(decoder=True)
    return {
        "vocab_size": cfg.vocab_size,
        "n_layers": cfg.num_hidden_layers,
        "sliding_window": getattr(cfg, "sliding_window", None),
        "max_position_embeddings": getattr(cfg, "max_position_embeddings", None),
        "activation": getattr(cfg, "hidden_activation", None) or getattr(cfg, "hidden_act", None),
    }


# The backends `export` lowers with (recorded in the constant get_export_backend). xnnpack-bf16: XNNPACK with
# its opt-in bf16 delegation (`enable_bf16`: bf16 linears as XNNPACK's bf16 fully-connected instead of the
# portable kernels; ExecuTorch 1.5.1 keeps it off by default). Measured on SmolLM2-135M bf16 on one CPU
# thread: docs/pte.md, "bf16 on XNNPACK". Here, not in program/export.py, so the CLI reads them without torch.
BACKENDS = ("xnnpack", "portable", "xnnpack-bf16")
BACKEND_KEY = "get_export_backend"  # the constant method a `.pte` names its backend by (one of BACKENDS)
XNNPACK_BACKENDS = ("xnnpack", "xnnpack-bf16")  # the BACKENDS that lower with XNNPACK


def require_backend(backend: str) -> None:
    """A backend `export` cannot lower with is one line naming the ones it can."""
    if backend not in BACKENDS:
        from eagle3_check.errors import OptionError

        raise OptionError(f"--backend {backend}", f"one of {', '.join(BACKENDS)}", "pass --backend xnnpack")


TANH_GELU = "gelu_pytorch_tanh"  # transformers' GELUTanh: nn.functional.gelu(approximate="tanh")


def gelu_warning(raw: dict, target: dict, lowering: dict | None) -> str | None:
    """A warning when the target's MLP is a tanh GELU, the program may be XNNPACK's (it says so, or
    does not say) and its export record does not count a kept tanh GELU (`tanh_gelu_as_ops`)."""
    if target.get("activation") != TANH_GELU or raw.get(BACKEND_KEY, "xnnpack") not in XNNPACK_BACKENDS:
        return None
    if (lowering or {}).get("tanh_gelu_as_ops"):
        return None
    return ("the target's MLP is a tanh GELU (gelu_pytorch_tanh) and nothing records that this program "
            "kept it: ExecuTorch 1.5.1's XNNPACK lowering runs it as the exact GELU (pytorch/executorch#22851; "
            "0.033 logits on Gemma 3 270M), so runner vs HF can fail at small margins while runner vs self is "
            "identical. Fix: re-export with eagle3-check export, or with an ExecuTorch that has that fix")


def program_gelu_warning(program, target_dir: str | Path | None) -> str | None:
    """`gelu_warning` for a loaded `.pte` (its `sidecar`, read at load; None for another program) and its target."""
    if target_dir is None or not hasattr(program, "sidecar"):
        return None
    return gelu_warning(program.metadata(), target_facts(target_dir), (program.sidecar or {}).get("lowering"))


def validate_metadata(
    raw: dict,
    tokenizer_vocab: int | None = None,
    target: dict | None = None,
    method_maxima: dict[str, int] | None = None,
    lowering: dict | None = None,
) -> MetadataFindings:
    """All findings at once (not just the first), so one gate run shows every problem. `lowering`
    is the export record's (the `.pte` sidecar's), where there is one."""
    f = MetadataFindings()
    try:
        md = read_metadata(raw)
    except Eagle3CheckError as e:
        f.problems.append(str(e))
        return f
    target = target or {}
    warning = gelu_warning(raw, target, lowering)
    if warning:
        f.warnings.append(warning)
    vocab = md.vocab_size
    for key in OPTIONAL_KEYS:
        if key not in raw:
            f.notes.append(f"optional key {key} absent: not checked")
    tv = target.get("vocab_size")
    if vocab is not None and tv is not None and vocab != tv:
        f.problems.append(f"get_vocab_size = {vocab} but the target vocab is {tv}; expected equal. "
                          "Fix: export against this target, or pass the matching --target")
    ref_vocab = vocab if vocab is not None else tv
    if tokenizer_vocab is not None and ref_vocab is not None and tokenizer_vocab > ref_vocab:
        f.problems.append(f"tokenizer has {tokenizer_vocab} tokens but the vocab is {ref_vocab}; expected "
                          "tokenizer <= vocab. Fix: pass the target's own --tokenizer")
    if md.draft_vocab_size is not None and ref_vocab is not None and md.draft_vocab_size > ref_vocab:
        f.problems.append(f"get_draft_vocab_size = {md.draft_vocab_size} > vocab {ref_vocab}; expected "
                          "draft vocab <= target vocab. Fix: use a draft trained for this target")
    tl = target.get("n_layers")
    if md.n_layers is not None and tl is not None and md.n_layers != tl:
        f.problems.append(f"get_n_layers = {md.n_layers} but the target has {tl} layers; expected equal. "
                          "Fix: pass the target the program was exported from")
    tw = target.get("sliding_window")
    if md.sliding_window is not None and tw is not None and md.sliding_window != tw:
        f.problems.append(f"get_sliding_window = {md.sliding_window} but the target's is {tw}; expected "
                          "equal. Fix: re-export with the target's sliding window")
    if ref_vocab is not None:
        bad = [i for i in md.eos_ids if not 0 <= i < ref_vocab]
        if bad:
            f.problems.append(f"get_eos_ids has {bad} outside [0, {ref_vocab}); expected ids in the vocab. "
                              "Fix: re-export with the tokenizer's EOS ids")
    tp = target.get("max_position_embeddings")
    if tp is not None and md.max_seq_len > tp:
        f.notes.append(f"get_max_seq_len = {md.max_seq_len} exceeds the target's max_position_embeddings {tp}")
    maxima = method_maxima or {}
    declared = {"prefill": md.max_prefill, "target_verify": md.max_verify_len, "draft_decode": md.max_prefill}
    for method, n in maxima.items():
        want = declared.get(method)
        if want is not None and n < want:
            f.problems.append(f"{method} was compiled for lengths up to {n} but the metadata declares {want}; "
                              "expected at least that. Fix: re-export so the dynamic shapes cover the metadata")
    return f
