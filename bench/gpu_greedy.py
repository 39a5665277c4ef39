"""The GPU bench's greedy decoder, id tokenizer, n-alpha and the draft's card (bench/gpu_bench.py)."""

from __future__ import annotations

import sys

import torch
from gpu_draft import random_prompts

from eagle3_check.runners.device_loop import DeviceRunner, PhaseTimer, program_device
from eagle3_check.runners.options import RunOptions


class IdTokenizer:
    """The runner needs a tokenizer only for the stop set and the text: ids in, nothing out."""

    eos_ids: tuple[int, ...] = ()

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def encode(self, text: str) -> list[int]:
        return []

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return ""


def graph_greedy(program, prompt_ids: list[int], max_new: int, timer: PhaseTimer | None = None) -> list[int]:
    """(c): greedy through the program's own target, data on the device: prefill, then
    target_verify of a one-token window [last] at position pos (its id is the token for
    pos + 1), replayed as a CUDA graph by a GraphedProgram. One id read back per token, as any
    greedy decoder with a stop check needs. Tokens: the prefill bonus first.
    (`self_reference.self_greedy` is the contract-general version: it uses the program's
    smallest exported window and host tensors, so it is no speed baseline.)"""
    dev = program_device(program)
    L = len(prompt_ids)
    slots = torch.arange(L + max_new, device=dev)
    program.reset()
    last, _ = program.prefill(torch.tensor([prompt_ids], device=dev), slots[:L])  # [1, 1], [1, L, H]
    cur = torch.empty(1, 1, dtype=torch.long, device=dev)  # the stable one-token window
    cur.copy_(last)
    tokens = [int(cur)]
    for pos in range(L, L + max_new - 1):
        if timer is not None:
            timer.mark("verify")
        ids, _ = program.target_verify(cur, slots[pos : pos + 1])  # [1, 1], [1, 1, H]
        if timer is not None:
            timer.mark("host")
        cur.copy_(ids)
        tokens.append(int(cur))
    if timer is not None:
        timer.mark("end")
    return tokens

def n_alpha(accepted: list[int], k: int) -> list[float]:
    """n-alpha[j]: share of rounds whose proposal j was accepted (a > j)."""
    return [sum(a > j for a in accepted) / len(accepted) if accepted else 0.0 for j in range(k)]

def measure_card(program, tok, args, opts, prompts: list[list[int]] | None = None) -> dict:
    """tau and n-alpha per K on held-out prompts (seed 5, not the bench's, not training's; or the
    real mode's prompt ids), runner tokens checked against graph greedy of the same prompt."""
    what = (f"{len(prompts)} prompts of {args.prompts} after the bench's" if prompts is not None else
            f"{args.card_prompts} random prompts (seed 5) of {args.prompt_len} ids")
    prompts = prompts if prompts is not None else random_prompts(args.card_prompts, args.prompt_len, args.vocab, 5)
    refs = [graph_greedy(program, p, args.new) for p in prompts]
    card = {"prompts": f"{what}, {args.new} new tokens",
            "measured_by": "DeviceRunner over CUDA graphs (HF forward), bf16", "k": {}}
    for k in [int(x) for x in args.card_ks.split(",")]:
        runs = [DeviceRunner().run(program, tok, p, RunOptions(chain_len=k, **opts)) for p in prompts]
        accepted = [a for r in runs for a in r.accepted]
        emitted = sum(len(r.tokens) - 1 for r in runs)
        card["k"][str(k)] = {"tau": round(emitted / len(accepted), 4), "n_alpha": [round(x, 4) for x in n_alpha(accepted, k)],
                             "identical_to_greedy": all(r.tokens == g for r, g in zip(runs, refs)),
                             "rounds": len(accepted)}
        print(f"card K={k}: {card['k'][str(k)]}", file=sys.stderr, flush=True)
    return card
