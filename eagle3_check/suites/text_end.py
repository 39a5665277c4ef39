"""The text-end suite: outputs whose text ends in whitespace (a space, a newline, a tab), so the
rule that a run's reported text is the tokenizer's decode of its tokens (`audit.result_problems`)
meets the one place a runner that strips its text differs: the end.

No tiny fixture's greedy output ends in whitespace within 40 tokens of any of its prompts
(searched: tiny-llama, tiny-gemma4, tiny-llama-random, 14 prompts each), so the cases run on the
toy program (suites/toy.py), whose greedy chain is known: the prompt's last id is chosen so that
the output's last token (index max_new - 1) is a token of the tokenizer, in the toy's range, whose
text ends in that whitespace (`ending_prompts`; on the tiny fixtures' 512-id vocabulary: 327 ' ',
437 '  ', 305 '\\n', 304 '\\t'). The draft is right everywhere: the token lands in a fully
accepted round or as the corrected token, both emitted.
"""

from __future__ import annotations

from eagle3_check.suites.case import Case, Expect, PromptSpec
from eagle3_check.suites.toy import LO, SPAN, greedy, prompt_to

ENDINGS = {"space": " ", "newline": "\n", "tab": "\t"}


def ending_prompts(tokenizer, head: list[int], n: int, ending: str, stops: set[int]) -> list[list[int]]:
    """Prompts `head + [t]` whose toy output of n tokens decodes to a text ending in `ending`, one per
    toy-range token whose text ends so (none of the n tokens a stop); none when the vocabulary has
    no such token (the case then skips, `request.pick_prompt`)."""
    out = []
    for end in range(LO, min(LO + SPAN, tokenizer.vocab_size)):
        if not tokenizer.decode([end]).endswith(ending):
            continue
        ids = prompt_to(end, n, head)
        tokens = greedy(ids, n)
        if not stops.intersection(tokens) and tokenizer.decode(tokens).endswith(ending):
            out.append(ids)
    return out


TEXT_END = [
    Case(f"text-end/{name}-k{k}", f"K {k}: the output's text ends in a {name} ({ch!r}), the run's text keeps it",
         prompt=PromptSpec(length=6, ends_in=ch), toy=(("max_seq_len", 48),), k=k,
         options=(("max_new_tokens", n),), expect=Expect(reason="max_new"))
    for name, ch in ENDINGS.items() for k, n in ((4, 11), (3, 6))
]
