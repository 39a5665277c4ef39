"""The chunked-prefill suite (DESIGN §2 rule 4): prompts beyond max prefill, run with
`--chunked-prefill`, prefilled and seeded in the rule's chunks.

Cases wish for a program with max_seq_len 80 and prefill range [6, 32], so the chunk is 16 on
every embedded fixture (tiny-llama: max_prefill / 2; tiny-gemma4: its sliding window 16).
Worked plans on that spec (`rules.prefill_chunks`):
    L = 31 -> [16, 15]        L = 32 -> [16, 16]        L = 33 -> [16, 11, 6]  (16 would leave 1 < 6)
    L = 17 -> [11, 6]         L = 37 -> [16, 15, 6]     L = 49 -> [16, 16, 11, 6]
Besides the verdict, every case checks the call log against the plan (`instrument.call_problems`):
one prefill per chunk at its positions, the draft seeded in the same chunks with each chunk's
features, so a runner that chunks wrongly (a chunk larger than the window, the tail rule
ignored) fails even where its tokens come out right.
"""

from __future__ import annotations

from eagle3_check.suites.blocks import ALL_K
from eagle3_check.suites.case import Case, Expect, PromptSpec

CHUNK_SPEC = (("max_seq_len", 80), ("min_prefill", 6), ("max_prefill", 32))
ON = (("chunked_prefill", True),)
_L_ERROR = Expect(error="OptionError", mentions=("prompt length L =", "chunked prefill"))


def _case(short: str, what: str, prompt: PromptSpec, **kw) -> Case:
    kw.setdefault("forcing", ALL_K)
    return Case(f"chunked-prefill/{short}", what, prompt=prompt, spec=CHUNK_SPEC,
                options=ON + kw.pop("options", ()), **kw)


def _chunks(times: int, offset: int) -> PromptSpec:
    return PromptSpec(anchor="chunk", times=times, offset=offset)


CHUNKED_PREFILL = [
    _case("min-1", "L = min prefill - 1 is a clear error with chunking too",
          PromptSpec(anchor="min_prefill", offset=-1), forcing=None, expect=_L_ERROR),
    _case("min", "L = min prefill: one chunk", PromptSpec(anchor="min_prefill")),
    _case("max-1", "L = max prefill - 1, chunked", PromptSpec(anchor="max_prefill", offset=-1)),
    _case("max", "L = max prefill, chunked", PromptSpec(anchor="max_prefill")),
    _case("max+1", "L = max prefill + 1: beyond the prefill range, three chunks", PromptSpec(anchor="max_prefill", offset=1),
          expect=Expect(reason="max_new")),
    _case("chunk-1", "L = chunk - 1: one chunk", _chunks(1, -1)),
    _case("chunk", "L = chunk: exactly one chunk", _chunks(1, 0)),
    _case("chunk+1", "L = chunk + 1: the first chunk is shortened so the tail is min prefill", _chunks(1, 1)),
    _case("3chunks-1", "L = 3 chunks - 1: the last chunk one short", _chunks(3, -1)),
    _case("3chunks", "L = 3 chunks exactly", _chunks(3, 0)),
    _case("3chunks+1", "L = 3 chunks + 1: a tail of 1 would fall below min prefill, shortened",
          _chunks(3, 1), expect=Expect(reason="max_new")),
    _case("tail-min-1", "L = 2 chunks + min prefill - 1 (37 on the spec): the tail rule shortens chunk 2",
          _chunks(2, 5)),
    _case("window-ring", "tiny-gemma4 (window 16): chunks cross the window and the rounds go past "
          "2 x window (where a ring cache wraps)", _chunks(3, 1), fixture="tiny-gemma4",
          options=(("max_new_tokens", 24),), expect=Expect(reason="max_new")),
    _case("max-seq-len-1", "L = max_seq_len - 1 runs: chunked prefill, then the bonus alone (context)",
          PromptSpec(anchor="max_seq_len", offset=-1), forcing=None,
          expect=Expect(reason="context", rounds=0, draft_calls=0)),
    _case("max-seq-len", "L = max_seq_len is a clear error", PromptSpec(anchor="max_seq_len"), forcing=None,
          expect=_L_ERROR),
]
