"""The speculator program contract (DESIGN.md §1), written once.

Every backend (eager PyTorch, ExecuTorch `.pte`, a user's plug-in) implements
`SpeculatorProgram`. The runner, the references and the suites only ever talk to
a program through these three methods and `metadata()`.

Metadata keys are the names of the `.pte` constant methods. `read_metadata`
turns the raw key/value mapping a backend exposes into a checked `Metadata`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eagle3_check.errors import MetadataError

if TYPE_CHECKING:  # torch loads with a program, not with the contract: the CLI reads suite
    import torch  # names (suites -> contract) before torch is imported (jobs/common/validate.py)

REQUIRED_KEYS = (
    "get_chain_len",
    "get_max_prefill_chunk",
    "get_min_prefill_chunk",
    "get_max_seq_len",
)
OPTIONAL_KEYS = (
    "get_vocab_size",
    "get_draft_vocab_size",
    "get_n_layers",
    "get_sliding_window",
    "get_eos_ids",
    "get_min_verify_len",
    "get_max_verify_len",
)
# Not a constant method: a backend that knows its target_verify's own input bounds (ExecuTorch
# method meta) reports them under this key as [min C, max C] when the program exports no verify
# range metadata (the seed's programs from #20344 on); `Metadata.k_range` then follows them.
VERIFY_BOUNDS_KEY = "target_verify_input_bounds"
VERIFY_FORM_KEY = "target_verify_form"  # likewise derived: VERIFY_PLAIN or VERIFY_KV_WINDOW
# likewise derived: where the backend read those bounds, in words ("ExecuTorch method meta", an AOTI
# package's sidecar, the eager program's spec), so `k_source` names the right one
VERIFY_BOUNDS_FROM_KEY = "target_verify_bounds_from"
SEED_K_CLAMP = (1, 7)  # the seed runner's clamp of K (#20345): the fallback when nothing else says
# The two forms of target_verify (DESIGN §1): the runner PR's (tokens, positions), and from #20344
# on (tokens, positions, kv_window) with kv_window int32 [V], V = anchor_pos + C.
VERIFY_PLAIN, VERIFY_KV_WINDOW = "tokens+positions", "kv_window"


def kv_window_for(positions: torch.Tensor) -> torch.Tensor:  # [C] -> [V] int32
    """The kv_window input of the newer target_verify form: int32 zeros of length V = the valid
    KV positions after this round = anchor_pos + C (its contents are unused; only V matters).

    Worked example: anchor_pos = 20, K = 4 -> positions 20..24 (C = 5) -> V = 20 + 5 = 25,
    i.e. positions[-1] + 1 (slots 0..24 are valid once this window is written).
    """
    import torch  # lazily: this module is read before torch is imported (jobs/common/validate.py)

    return torch.zeros(int(positions[-1]) + 1, dtype=torch.int32)


def program_dtype(program) -> str:
    """The dtype a program computes in: a `.pte` reads it from its feature output (`PteBackend.dtype`),
    an eager program from its weights; float32 when the program does not say."""
    return str(getattr(program, "dtype", "float32")).removeprefix("torch.")  # torch.bfloat16 -> "bfloat16"


class SpeculatorProgram(ABC):
    """An EAGLE-3 speculator program: one shared target KV cache (prefill and
    target_verify) and one draft KV cache (draft_decode). H is the draft hidden size.

    Positions are absolute KV-cache slots; writing a slot again overwrites it, which
    is how both caches roll back rejected proposals.
    """

    @abstractmethod
    def metadata(self) -> dict[str, Any]:
        """Returns the raw metadata: constant-method name -> int or list of ints.
        Missing keys are simply absent; `read_metadata` checks them."""

    @abstractmethod
    def prefill(
        self,
        tokens: torch.Tensor,  # [1, T] int64
        positions: torch.Tensor,  # [T] int64
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Runs the target over the prompt, filling the target KV cache.

        Args:
            tokens: the prompt ids, T within [min_prefill, max_prefill].
            positions: the KV slots 0..T-1 (or any contiguous run).
        Returns:
            next_token: [1, 1] int64, the target's greedy token after the prompt (the bonus).
            feature: [1, T, H] float, the draft's `fc` over the concatenated target taps.
        """

    @abstractmethod
    def target_verify(
        self,
        tokens: torch.Tensor,  # [1, C] int64
        positions: torch.Tensor,  # [C] int64
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Runs the target over a verify window, writing the target KV cache at `positions`.

        Returns:
            verify_ids: [1, C] int64; verify_ids[0, i] is the greedy token for positions[i] + 1.
            feature: [1, C, H] float, as for prefill.
        """

    @abstractmethod
    def draft_decode(
        self,
        tokens: torch.Tensor,  # [1, T] int64, target-vocab ids
        feature: torch.Tensor,  # [1, T, H] float
        positions: torch.Tensor,  # [T] int64
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Runs the draft head, writing the draft KV cache at `positions`.

        Row i pairs the feature of the token at positions[i] with the token at positions[i] + 1.
        Returns:
            ids: [1, T] int64, target-vocab ids (draft id + d2t[draft id]).
            g: [1, T, H] float, the draft's own hidden state, fed back at later chain steps.
        """

    def reset(self) -> None:  # noqa: B027 - optional hook, default is a no-op
        """Called before each request. Caches roll back by overwrite, so the default does nothing."""



class ProgramWrapper(SpeculatorProgram):
    """A program that forwards every method to `inner`; wrappers (recording, forcing, CUDA
    graphs, oracle drafts) subclass it and override only the methods they change."""

    def __init__(self, inner: SpeculatorProgram):
        self.inner = inner

    def metadata(self) -> dict[str, Any]:
        return self.inner.metadata()

    def reset(self) -> None:
        self.inner.reset()

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H]
        return self.inner.prefill(tokens, positions)

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, H]
        return self.inner.target_verify(tokens, positions)

    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, H], [T] -> [1, T], [1, T, H]
        return self.inner.draft_decode(tokens, feature, positions)

@dataclass(frozen=True)
class Metadata:
    """The checked metadata of a program. K range comes from the verify window range."""

    chain_len: int
    max_prefill: int
    min_prefill: int
    max_seq_len: int
    vocab_size: int | None = None
    draft_vocab_size: int | None = None
    n_layers: int | None = None
    sliding_window: int | None = None
    eos_ids: tuple[int, ...] = ()
    min_verify_len: int | None = None
    max_verify_len: int | None = None
    verify_bounds: tuple[int, int] | None = None  # [min C, max C] from the method's own inputs
    verify_form: str | None = None  # VERIFY_PLAIN or VERIFY_KV_WINDOW, when the backend says
    verify_bounds_from: str | None = None  # where the backend read verify_bounds (VERIFY_BOUNDS_FROM_KEY)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def k_range(self) -> tuple[int, int]:
        """Supported chain lengths K (verify window C = K + 1), inclusive, from (in order) the
        verify range metadata, the target_verify method's own input bounds, or the seed's clamp
        [1, 7] (`k_source` says which)."""
        if self.min_verify_len is not None or self.max_verify_len is not None:
            lo = max(1, self.min_verify_len - 1) if self.min_verify_len is not None else self.chain_len
            hi = self.max_verify_len - 1 if self.max_verify_len is not None else self.chain_len
            return lo, hi
        if self.verify_bounds is not None:
            return max(1, self.verify_bounds[0] - 1), self.verify_bounds[1] - 1
        return SEED_K_CLAMP

    @property
    def k_source(self) -> str:
        """Where `k_range` comes from, in words (for reports and errors)."""
        if self.min_verify_len is not None or self.max_verify_len is not None:
            return "the program's verify range metadata (get_min/max_verify_len)"
        if self.verify_bounds is not None:
            how = {VERIFY_KV_WINDOW: "; kv_window form: C dynamic", VERIFY_PLAIN: "; 2-input form: C = K + 1 static"}
            return (f"target_verify's own input bounds ({self.verify_bounds_from or 'the method'}"
                    f"{how.get(self.verify_form, '')}; no verify range metadata)")
        return "the seed runner's clamp [1, 7] (fallback: no verify range metadata, no method bounds)"


def _as_int(key: str, value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise MetadataError(
                f"metadata {key} = tensor of shape {list(value.shape)}",
                "a single integer",
                "re-export the program so the constant method returns one int",
            )
        value = value.item()
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, int):
        raise MetadataError(
            f"metadata {key} = {value!r}",
            "an integer",
            "re-export the program so the constant method returns one int",
        )
    return value


def _as_ids(key: str, value: Any) -> tuple[int, ...]:
    import torch

    if isinstance(value, torch.Tensor):
        value = value.flatten().tolist()
    if isinstance(value, int):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise MetadataError(
            f"metadata {key} = {value!r}",
            "a list of integer token ids",
            "re-export the program so the constant method returns a list of ints",
        )
    return tuple(value)


def read_metadata(raw: dict[str, Any]) -> Metadata:
    """Checks raw metadata: every required key present, ranges consistent.

    Raises MetadataError naming the first missing key or the inconsistent values.
    """
    for key in REQUIRED_KEYS:
        if key not in raw:
            raise MetadataError(
                f"program metadata is missing required key '{key}'",
                f"all of {', '.join(REQUIRED_KEYS)} as constant methods",
                f"re-export the program with a '{key}' constant method",
            )
    vals = {k: _as_int(k, raw[k]) for k in REQUIRED_KEYS}
    opt: dict[str, Any] = {}
    for key in OPTIONAL_KEYS:
        if key in raw and raw[key] is not None:
            opt[key] = _as_ids(key, raw[key]) if key == "get_eos_ids" else _as_int(key, raw[key])
    md = Metadata(
        chain_len=vals["get_chain_len"],
        max_prefill=vals["get_max_prefill_chunk"],
        min_prefill=vals["get_min_prefill_chunk"],
        max_seq_len=vals["get_max_seq_len"],
        vocab_size=opt.get("get_vocab_size"),
        draft_vocab_size=opt.get("get_draft_vocab_size"),
        n_layers=opt.get("get_n_layers"),
        sliding_window=opt.get("get_sliding_window"),
        eos_ids=opt.get("get_eos_ids", ()),
        min_verify_len=opt.get("get_min_verify_len"),
        max_verify_len=opt.get("get_max_verify_len"),
        verify_bounds=_bounds(raw.get(VERIFY_BOUNDS_KEY)),
        verify_form=raw.get(VERIFY_FORM_KEY) if raw.get(VERIFY_FORM_KEY) in (VERIFY_PLAIN, VERIFY_KV_WINDOW) else None,
        verify_bounds_from=str(raw[VERIFY_BOUNDS_FROM_KEY]) if raw.get(VERIFY_BOUNDS_FROM_KEY) else None,
        raw=dict(raw),
    )
    _check_consistent(md)
    return md


def _bounds(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    lo, hi = (_as_int(VERIFY_BOUNDS_KEY, v) for v in value)
    if not 2 <= lo <= hi:
        raise MetadataError(f"{VERIFY_BOUNDS_KEY} = {list(value)}", "2 <= min C <= max C",
                            "re-export target_verify for windows of at least 2 (K >= 1)")
    return lo, hi


def _check_consistent(md: Metadata) -> None:
    def bad(what: str, expected: str) -> MetadataError:
        return MetadataError(what, expected, "re-export the program with consistent ranges")

    if md.min_prefill < 1:
        raise bad(f"get_min_prefill_chunk = {md.min_prefill}", "at least 1")
    if md.min_prefill > md.max_prefill:
        raise bad(
            f"get_min_prefill_chunk = {md.min_prefill} > get_max_prefill_chunk = {md.max_prefill}",
            "min prefill <= max prefill",
        )
    if md.max_prefill >= md.max_seq_len:
        raise bad(
            f"get_max_prefill_chunk = {md.max_prefill} >= get_max_seq_len = {md.max_seq_len}",
            "max prefill < max seq len (room for at least one generated token)",
        )
    if md.chain_len < 1:
        raise bad(f"get_chain_len = {md.chain_len}", "at least 1")
    lo, hi = md.k_range
    if lo > hi:
        raise bad(
            f"verify window range [{md.min_verify_len}, {md.max_verify_len}]",
            "min verify len <= max verify len",
        )
    if not lo <= md.chain_len <= hi:
        raise bad(
            f"get_chain_len = {md.chain_len} with K range [{lo}, {hi}] from {md.k_source}",
            f"K + 1 inside the verify range, i.e. K in [{lo}, {hi}]",
        )
    if md.vocab_size is not None and md.draft_vocab_size is not None:
        if md.draft_vocab_size > md.vocab_size:
            raise bad(
                f"get_draft_vocab_size = {md.draft_vocab_size} > get_vocab_size = {md.vocab_size}",
                "draft vocab <= target vocab",
            )
