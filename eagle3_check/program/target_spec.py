"""A `--target` program's shape from the model's own config, bounded by memory; flags override.

    max_seq_len = min(max_position_embeddings, SEQ_CAP), halved while the memory bound fails
                  (never below FLOOR); 256 when the config has no max_position_embeddings
    max_prefill = max(max_seq_len // 2, max_seq_len - ROOM)   (room for `run`'s default 128 new
                  tokens; tiny fixtures 256 -> 128 as before; 1024 -> 896, so one prefill crosses
                  Gemma 3's 512-token sliding window)
    min_prefill = 1;  K and the verify range: DEFAULT's (chain 4, verify 2..8)

The memory bound: the program's estimate (resources.py: target and draft weights and KV caches
at max_seq_len) plus the working set of its largest prefill (T = max_prefill rows at S =
max_seq_len slots: attention scores nh·T·S, logits T·V, hidden states (L+1)·T·H, the MLP 3·T·I,
elements of --dtype) within half of the budget (--max-memory, else the memory available now): the
other half is the HF reference's, which `check` loads beside the program (a second copy of the
weights, teacher-forced over the same tokens).

SEQ_CAP: the eager program attends over all max_seq_len slots at every step (target.py: one slot
per absolute position), so a step costs more with max_seq_len whatever the prompt: a SmolLM2-135M
verify step on CPU costs 2.8x its 256-slot cost at 1024 slots, 10.6x at 4096 (bench/seq_len_cost.py,
docs/run-options.md). --max-seq-len gives more.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_check.fixtures.registry import ProgramSpec

SEQ_CAP = 1024
ROOM = 128  # new tokens `run` makes by default
FLOOR = 256
DEFAULT = ProgramSpec(max_seq_len=256, min_prefill=1, max_prefill=128, chain_len=4, min_verify_len=2, max_verify_len=8)
FLAGS = {"max_seq_len": "--max-seq-len", "min_prefill": "--min-prefill", "max_prefill": "--max-prefill"}


def program_bytes(tcfg, dcfg, slots: int, elem: int, where: str) -> int:
    """The program's estimate at `slots` plus its largest prefill's working set (module doc)."""
    from eagle3_check.resources import draft_estimate, prefill_estimate, target_estimate

    parts = {**target_estimate(tcfg, slots, elem, where), **draft_estimate(dcfg, slots)}
    return sum(parts.values()) + prefill_estimate(tcfg, max_prefill_for(slots), slots, elem, where)


def max_prefill_for(seq: int) -> int:
    return max(1, seq // 2, seq - ROOM)


def target_spec(target_dir: str | Path, draft_dir: str | Path, overrides: dict, device: str,
                dtype: str) -> tuple[ProgramSpec, dict]:
    """(ProgramSpec, {"sources": {field: where}, "summary": line}) for --target/--draft."""
    import torch

    from eagle3_check.program.checkpoint import read_draft_config
    from eagle3_check.program.target import target_text_config
    from eagle3_check.resources import budget, gib

    tcfg = target_text_config(target_dir)
    where = f"target config {target_dir}"
    limit = getattr(tcfg, "max_position_embeddings", None)
    sources: dict[str, str] = {}
    if "max_seq_len" in overrides:
        seq = overrides["max_seq_len"]
        sources["max_seq_len"] = "flag --max-seq-len"
    elif type(limit) is not int or limit < 2:
        seq = DEFAULT.max_seq_len
        sources["max_seq_len"] = f"default {seq} (the target config has no max_position_embeddings)"
    else:
        seq = min(limit, SEQ_CAP)
        why = f"max_position_embeddings {limit}" + (f", capped at {SEQ_CAP}" if limit > SEQ_CAP else "")
        elem = torch.finfo(getattr(torch, dtype)).bits // 8
        dcfg = read_draft_config(draft_dir)
        have, what = budget(device)
        need = program_bytes(tcfg, dcfg, seq, elem, where)
        while seq > FLOOR and need > have // 2:
            seq = max(FLOOR, seq // 2)
            need = program_bytes(tcfg, dcfg, seq, elem, where)
        if seq < min(limit, SEQ_CAP):
            why += f", halved to fit half of {gib(have)} GiB ({what})"
        sources["max_seq_len"] = f"target config {why}; program + prefill about {gib(need)} GiB"
    spec = {"max_seq_len": seq, "min_prefill": DEFAULT.min_prefill, "max_prefill": max_prefill_for(seq)}
    sources.setdefault("min_prefill", "default 1")
    sources.setdefault("max_prefill", f"max_seq_len - {ROOM}, at least half")
    for f in ("min_prefill", "max_prefill"):
        if f in overrides:
            spec[f], sources[f] = overrides[f], f"flag {FLAGS[f]}"
    out = ProgramSpec(spec["max_seq_len"], spec["min_prefill"], spec["max_prefill"], DEFAULT.chain_len,
                      DEFAULT.min_verify_len, DEFAULT.max_verify_len)
    summary = (f"program shape: max_seq_len {out.max_seq_len} ({sources['max_seq_len']}); prefill "
               f"[{out.min_prefill}, {out.max_prefill}] ({sources['min_prefill']}, {sources['max_prefill']})")
    return out, {"sources": sources, "summary": summary}
