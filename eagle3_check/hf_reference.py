"""The HF reference (DESIGN §3): eager greedy decoding with Transformers, one token at a time.

Independent of the runner and the backends by construction: it loads the target with
`AutoModelForCausalLM.from_pretrained` itself, uses Transformers' default dynamic
cache, and records, at every generated position, the top-1/top-2 logit margin
(the forensics for a divergence).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, DynamicCache


@dataclass
class ReferenceResult:
    tokens: list[int]  # greedy continuation, first token = the token after the prompt
    margins: list[float]  # top-1 minus top-2 logit at each generated position
    runner_up: list[int]  # the top-2 token at each position


class HFReference:
    def __init__(self, target_dir: str | Path, device: str = "cpu", dtype: torch.dtype = torch.float32):
        self.model = AutoModelForCausalLM.from_pretrained(
            target_dir, dtype=dtype, attn_implementation="eager"
        ).to(device).eval()
        self.device = device
        params = inspect.signature(self.model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"  # renamed in 5.2x

    @torch.no_grad()
    def greedy(self, prompt_ids: list[int], max_new: int, stop_ids: frozenset[int] = frozenset()) -> ReferenceResult:
        """Decodes up to `max_new` tokens, ending right after the first stop token."""
        tokens: list[int] = []
        margins: list[float] = []
        runner_up: list[int] = []
        inp = torch.tensor([prompt_ids], device=self.device)  # [1, L]
        cache = DynamicCache()  # filled in place by every forward
        for _ in range(max_new):
            out = self.model(input_ids=inp, use_cache=True, **{self._cache_kw: cache})
            logits = out.logits[0, -1].float()  # [V]
            top = torch.topk(logits, 2)
            tok = int(top.indices[0])
            tokens.append(tok)
            runner_up.append(int(top.indices[1]))
            margins.append(float(top.values[0] - top.values[1]))
            if tok in stop_ids:
                break
            inp = torch.tensor([[tok]], device=self.device)
        return ReferenceResult(tokens, margins, runner_up)
