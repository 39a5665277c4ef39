"""The HF reference (DESIGN §3): the target run eagerly with Transformers.

Independent of the runner and the backends by construction: it loads the target with
`AutoModelForCausalLM.from_pretrained` itself (or, judging the harness's own eager program,
shares that program's weight tensors under a fingerprint: judge/shared.py). `score` is what the verdict judges by: one
forward over prompt + the runner's tokens (teacher forcing), a row of top logits per emitted
token plus one past the end. `greedy` decodes one token at a time with Transformers' default
dynamic cache and records the top-1/top-2 margins (goldens and forensics use it).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from pathlib import Path

import torch

from eagle3_check.hf_config import TRUST_REMOTE_CODE, check_loaded_tensors, read_target_config
from eagle3_check.quiet import third_party_quiet


@functools.cache
def _transformers():
    """transformers' AutoConfig, AutoModelForCausalLM and DynamicCache, imported on first use: a process
    that judges (the verdict, goldens: `Scores`) or fails before a reference loads never imports it.
    Its model code imports torchao: that load-time logging is scoped (quiet.py)."""
    with third_party_quiet():
        import transformers.modeling_utils  # noqa: F401
        from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache
    return AutoConfig, AutoModelForCausalLM, DynamicCache


@dataclass
class ReferenceResult:
    tokens: list[int]  # greedy continuation, first token = the token after the prompt
    margins: list[float]  # top-1 minus top-2 logit at each generated position
    runner_up: list[int]  # the top-2 token at each position


@dataclass
class Scores:
    """The reference's rows over prompt + the runner's tokens t_0..t_{n-1} (teacher forcing).

    Row i is the reference's prediction for emitted index i given prompt + t_0..t_{i-1}; rows
    0..n (n + 1 rows: row n is the next token after the run), fewer where the reference cannot
    score (the self reference past max_seq_len, or after a token outside the vocab).
    Worked example: prompt of L = 3, tokens [t0, t1] -> the HF forward over the 5 ids gives
    logits rows 2, 3, 4 -> rows 0, 1, 2 here (row 2 predicts the token after t1)."""

    argmax: list[int]  # the reference's top-1 token per row
    top1: list[float]  # its logit (inf: the reference has no logits)
    top2: list[float]  # the runner-up's logit (-inf: no logits)
    runner_up: list[int]  # the top-2 token (-1: unknown)
    given_logit: list[float]  # the runner's token's logit in row i (rows < n; -inf: unknown)
    given_rank: list[int | None]  # its rank in row i, 1 = argmax (None: unknown)

    @property
    def margins(self) -> list[float]:
        return [a - b for a, b in zip(self.top1, self.top2)]


def valid_prefix(tokens: list[int], vocab_size: int) -> list[int]:
    """The tokens up to the first id outside [0, vocab_size): nothing after it can be scored."""
    bad = next((i for i, t in enumerate(tokens) if not 0 <= t < vocab_size), len(tokens))
    return list(tokens[:bad])


def top_two(logits: torch.Tensor) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """Per row (index, value) of the top-1 and the runner-up, [R, V] -> [R] each. The top-1 is
    `argmax` (the lowest id among equal maxima, as greedy decoding picks); the runner-up is the
    best of the rest, so an exact tie shows as margin 0. Example: [1.0, 3.0, 3.0] -> top-1 id 1,
    runner-up id 2, margin 0."""
    i1 = logits.argmax(-1)  # [R]
    v1 = logits.gather(-1, i1[:, None])[:, 0]  # [R]
    rest = logits.scatter(-1, i1[:, None], float("-inf"))  # [R, V]
    i2 = rest.argmax(-1)  # [R]
    return (i1, v1), (i2, rest.gather(-1, i2[:, None])[:, 0])


def scores_from_logits(logits: torch.Tensor, toks: list[int], device) -> Scores:  # logits [m + 1, V] float32
    """`Scores` of the rows that predict emitted indices 0..m (`toks`: the m scored tokens)."""
    (i1, v1), (i2, v2) = top_two(logits)  # [m + 1] each
    given = torch.tensor(toks, device=device, dtype=torch.long)  # [m]
    given_logit = logits[torch.arange(len(toks), device=device), given]  # [m]
    rank = (logits[: len(toks)] > given_logit[:, None]).sum(-1) + 1  # [m]
    return Scores(i1.tolist(), v1.tolist(), v2.tolist(), i2.tolist(), given_logit.tolist(), rank.tolist())


def check_reference_memory(target_dir: str | Path, device: str, dtype: torch.dtype) -> None:
    """The reference's own copy of the target weights (resources.py), against the memory left now;
    the config is read first with no remote code (hf_config)."""
    from eagle3_check.resources import Estimate, check_fits, target_estimate

    read_target_config(target_dir)
    AutoConfig = _transformers()[0]
    cfg = AutoConfig.from_pretrained(target_dir, trust_remote_code=TRUST_REMOTE_CODE).get_text_config(decoder=True)
    weights = target_estimate(cfg, 1, torch.finfo(dtype).bits // 8, f"target config {target_dir}")["target weights"]
    check_fits(Estimate({"HF reference weights": weights}, host_peak=weights), device,
               "the HF reference (a second copy of the target)", "use --reference self, or a smaller model")


class HFReference:
    shared = None  # judge/shared.SharedWeights when the model's weights are the program's

    def __init__(self, target_dir: str | Path, device: str = "cpu", dtype: torch.dtype = torch.float32):
        check_reference_memory(target_dir, device, dtype)  # no remote code; refused before it allocates
        AutoModelForCausalLM = _transformers()[1]
        with third_party_quiet():  # the "Loading weights" bar
            model, info = AutoModelForCausalLM.from_pretrained(
                target_dir, dtype=dtype, attn_implementation="eager", output_loading_info=True,
                trust_remote_code=TRUST_REMOTE_CODE)
        check_loaded_tensors(info, target_dir)  # as the program's target: nothing dropped, nothing random
        self._use(model.to(device).eval(), device)

    def _use(self, model, device: str) -> None:
        self.model = model
        self.device = device
        params = inspect.signature(self.model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"  # renamed in 5.2x

    @classmethod
    def from_model(cls, model, device: str = "cpu") -> HFReference:
        """A reference over a causal LM already in memory: a quantized program's own target (its
        weight-only quantized linears), whose logits give a quantized golden its margins."""
        ref = cls.__new__(cls)
        ref._use(model.eval(), device)
        return ref

    @torch.no_grad()
    def score(self, prompt_ids: list[int], tokens: list[int]) -> Scores:
        """One eager forward over prompt + tokens: len(tokens) + 1 rows (see `Scores`)."""
        if self.shared is not None:
            self.shared.check()
        vocab = self.model.config.get_text_config(decoder=True).vocab_size
        toks = valid_prefix(tokens, vocab)
        ids = torch.tensor([list(prompt_ids) + toks], device=self.device)  # [1, L + m]
        logits = self.model(input_ids=ids).logits[0, len(prompt_ids) - 1 :].float()  # [m + 1, V]
        return scores_from_logits(logits, toks, self.device)

    @torch.no_grad()
    def greedy(self, prompt_ids: list[int], max_new: int, stop_ids: frozenset[int] = frozenset()) -> ReferenceResult:
        """Decodes up to `max_new` tokens, ending right after the first stop token."""
        if self.shared is not None:
            self.shared.check()
        tokens: list[int] = []
        margins: list[float] = []
        runner_up: list[int] = []
        inp = torch.tensor([prompt_ids], device=self.device)  # [1, L]
        cache = _transformers()[2]()  # a DynamicCache, filled in place by every forward
        for _ in range(max_new):
            out = self.model(input_ids=inp, use_cache=True, **{self._cache_kw: cache})
            logits = out.logits[0, -1].float()  # [V]
            (i1, v1), (i2, v2) = top_two(logits[None])  # [1] each
            tok = int(i1[0])
            tokens.append(tok)
            runner_up.append(int(i2[0]))
            margins.append(float(v1[0] - v2[0]))
            if tok in stop_ids:
                break
            inp = torch.tensor([[tok]], device=self.device)
        return ReferenceResult(tokens, margins, runner_up)
