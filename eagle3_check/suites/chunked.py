"""The chunked-prefill suite (DESIGN §2 rule 4): prompts beyond max prefill, run with
`--chunked-prefill`, prefilled and seeded in the rule's chunks.

Cases wish for a program with max_seq_len 80 and prefill range [6, 32], so the chunk is 16 on
every embedded fixture (tiny-llama: max_prefill / 2; tiny-gemma4: its sliding window 16).
Worked plans on that spec (`rules.prefill_chunks`):
    L = 31 -> [16, 15]        L = 32 -> [16, 16]        L = 33 -> [16, 11, 6]  (16 would leave 1 < 6)
    L = 17 -> [11, 6]         L = 37 -> [16, 15, 6]     L = 49 -> [16, 16, 11, 6]
On that spec the window and max_prefill // 2 coincide (16), so three more specs tell them apart
(issue 31), each on every fixture (tiny-gemma4: its window 16; tiny-llama: no window, the half):
    window below half: max prefill 48 (half 24)  -> chunk 16 (tiny-llama 24)
    window above half: max prefill 24 (half 12)  -> chunk 16 (tiny-llama 12)
    window above max:  max prefill 12 (half 6)   -> chunk 12, the cap (tiny-llama 6)
the same three on the toy program with a declared window (so a run on a windowless program, or on
one given program, meets them too), and Gemma 3's real window (gemma3-270m: window 512, max
prefill 768, half 384; and a spec with max prefill 1152, half 576). These are also where the stack
top's rule (#20347: the window if present, else half, capped at max prefill) differs from an
uncapped window, from "half" alone, and from one chunk of max prefill (before #20346).
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


# (name, what, program spec) of the specs whose window differs from max_prefill // 2 (module doc)
WINDOW_SPECS = (
    ("window-below-half", "window below max prefill / 2", (("max_seq_len", 112), ("min_prefill", 4), ("max_prefill", 48))),
    ("window-above-half", "window between max prefill / 2 and max prefill",
     (("max_seq_len", 80), ("min_prefill", 4), ("max_prefill", 24))),
    ("window-above-max", "window above max prefill: the chunk is capped at max prefill",
     (("max_seq_len", 64), ("min_prefill", 3), ("max_prefill", 12))),
)
TOY_WINDOWS = (  # toy: (name, ToyProgram arguments): window 8 < half 16, 24 > half 16, 16 > max 12
    ("window-below-half", (("max_seq_len", 64), ("min_prefill", 4), ("max_prefill", 32), ("sliding_window", 8))),
    ("window-above-half", (("max_seq_len", 96), ("min_prefill", 4), ("max_prefill", 32), ("sliding_window", 24))),
    ("window-above-max", (("max_seq_len", 48), ("min_prefill", 3), ("max_prefill", 12), ("sliding_window", 16))),
)
GEMMA3 = "gemma3-270m"  # a real fixture: window 512 (its cases take minutes on CPU; tests mark them slow)


def _window_cases() -> list[Case]:
    out = []
    for name, what, spec in WINDOW_SPECS:
        out.append(Case(f"chunked-prefill/{name}", f"{what}; L = 2 chunks + 3",
                        prompt=_chunks(2, 3), spec=spec, options=ON, forcing=ALL_K, expect=Expect(reason="max_new")))
    for name, toy in TOY_WINDOWS:
        window = dict(toy)["sliding_window"]
        out.append(Case(f"chunked-prefill/toy-{name}", f"the toy program declaring window {window}, max prefill "
                        f"{dict(toy)['max_prefill']}; L = 2 chunks + 3", prompt=_chunks(2, 3), toy=toy, options=ON,
                        expect=Expect(reason="max_new")))
    out.append(Case("chunked-prefill/gemma3-window", "Gemma 3's real window 512 above max prefill / 2 = 384: "
                    "L = window + 88, chunks [512, 88]", prompt=_chunks(1, 88), options=ON + (("max_new_tokens", 8),),
                    forcing=ALL_K, fixture=GEMMA3, expect=Expect(reason="max_new")))
    out.append(Case("chunked-prefill/gemma3-window-below-half", "Gemma 3's window 512 below max prefill / 2 = 576 "
                    "(max prefill 1152): L = window + 100, chunks [512, 100]", prompt=_chunks(1, 100),
                    spec=(("max_seq_len", 1280), ("max_prefill", 1152)), options=ON + (("max_new_tokens", 8),),
                    forcing=ALL_K, fixture=GEMMA3, expect=Expect(reason="max_new")))
    return out


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
    *_window_cases(),
]
