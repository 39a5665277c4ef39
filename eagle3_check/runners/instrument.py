"""An instrumented program wrapper: records every call (method, tokens, positions, shapes).

Cases assert on the record: call counts ("one target_verify per round, no standalone
decode"), the exact reseed tokens/positions, and that no KV position >= max_seq_len
was ever written.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from eagle3_check.program.contract import ProgramWrapper, SpeculatorProgram


@dataclass
class Call:
    method: str
    tokens: list[int]
    positions: list[int]
    feature: torch.Tensor | None  # [1, T, H] input feature (draft_decode only), on CPU
    out_ids: list[int]
    out_feature: torch.Tensor  # [1, T, H] returned feature / g, on CPU


class RecordingProgram(ProgramWrapper):
    def __init__(self, inner: SpeculatorProgram):
        super().__init__(inner)
        self.calls: list[Call] = []
        self.refused: list[tuple[str, list[int], str]] = []  # (method, positions, why) of calls that raised

    def reset(self) -> None:
        self.calls.clear()
        self.inner.reset()

    def _call(self, method: str, tokens, positions, feature, *args):
        """Calls the inner method, recording its inputs BEFORE the call: an input may be a view of
        a graph-owned output buffer (a CUDA-graph replay overwrites it during the call)."""
        toks, pos = tokens.reshape(-1).tolist(), positions.reshape(-1).tolist()
        fed = None if feature is None else feature.detach().cpu().clone()
        try:
            ids, feat = out = getattr(self.inner, method)(*args)
        except Exception as e:  # a call the program refused (e.g. a KV position >= max_seq_len) is audited too
            self.refused.append((method, pos, f"{type(e).__name__}: {str(e)[:120]}"))
            raise
        self.calls.append(Call(method, toks, pos, fed, ids.reshape(-1).tolist(), feat.detach().cpu().clone()))
        return out

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H]
        return self._call("prefill", tokens, positions, None, tokens, positions)

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, H]
        return self._call("target_verify", tokens, positions, None, tokens, positions)

    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, H], [T] -> [1, T], [1, T, H]
        return self._call("draft_decode", tokens, positions, feature, tokens, feature, positions)

    def of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def max_position(self) -> int:
        return max((p for c in self.calls for p in c.positions), default=-1)


def call_problems(rec: RecordingProgram, run, max_seq_len: int, chunks: list[int] | None = None) -> list[str]:
    """The call-log invariants of DESIGN §2 for a finished run (`run` is a RunResult); [] if all hold.

    `chunks`: the chunked-prefill plan (`rules.prefill_chunks`), or None for one prefill.
    Walks the log in order:
    - one prefill, first, of the prompt at positions 0..L-1 (chunked: one prefill per chunk of
      the plan, at its positions, and the seed in the same chunks with each chunk's features);
    - per round, a chain of K draft_decode calls, then one target_verify (no standalone decode):
      the seed (round 1) is prompt[1:] + [bonus] at 0..L-1 with the prefill feature; a reseed is
      the previous round's emitted tokens (accepted proposals, corrected) at
      anchor_pos..anchor_pos+a with verify feature rows 0..a; chain step j (1..K-1) feeds the
      previous proposal with the last g row at anchor_pos + j - 1;
    - verify r is [anchor, p0..pK-1] at anchor_pos..anchor_pos+K, anchor_pos = L + sum (a + 1);
    - nothing after the last verify (no reseed without a round), no draft without a round;
    - no KV position >= max_seq_len or < 0, in any method; no call the program refused (raised)
      that the runner caught and went on from.

    Worked example: L = 10, K = 2, accepted = [1, 0] -> prefill 0..9; draft 0..9 (seed),
    draft 10 (chain); verify 10..12; draft 10..11 (reseed with the 2 emitted), draft 12;
    verify 12..14 -> 2 verifies, 4 draft calls.
    """
    out: list[str] = []
    calls, L, k = rec.calls, len(run.prompt_ids), run.k
    top = rec.max_position()
    if top >= max_seq_len:
        bad = next(c for c in calls if c.positions and max(c.positions) == top)
        out.append(f"{bad.method} wrote KV position {top} >= max_seq_len {max_seq_len}")
    low = min((p for c in calls for p in c.positions), default=0)
    if low < 0:
        bad = next(c for c in calls if c.positions and min(c.positions) == low)
        out.append(f"{bad.method} wrote negative KV position {low}")
    for method, pos, why in getattr(rec, "refused", ()):  # caught by the runner, which went on
        out.append(f"{method} at {_span(pos)} was refused by the program ({why}) and the run went on")
    n_verify, n_draft = len(rec.of("target_verify")), len(rec.of("draft_decode"))
    if n_verify != run.rounds:
        out.append(f"{n_verify} target_verify calls for {run.rounds} rounds (expected one per round)")
    plan = list(chunks) if chunks else [L]
    extra = len(plan) - 1 if run.rounds else 0  # seed calls beyond the first
    if n_draft != run.rounds * k + extra:
        out.append(f"{n_draft} draft_decode calls for {run.rounds} rounds of K = {k} (expected {run.rounds * k + extra})")
    n_pre = len(rec.of("prefill"))
    if len(calls) < len(plan) or any(c.method != "prefill" for c in calls[: len(plan)]) or n_pre != len(plan):
        return out + [f"expected {len(plan)} prefill call(s) {plan} first, got {n_pre} prefill call(s)"]
    seeds, start = [], 0
    for n, (pre, t) in enumerate(zip(calls, plan)):
        want = list(range(start, start + t))
        if pre.tokens != run.prompt_ids[start : start + t] or pre.positions != want:
            out.append(f"prefill {n + 1} got {len(pre.tokens)} tokens at {_span(pre.positions)}, expected "
                       f"prompt chunk {plan} at {_span(want)}")
        seeds.append(((run.prompt_ids[1:] + run.tokens[:1])[start : start + t], want, pre.out_feature))
        start += t
    if out or run.rounds == 0:
        return out
    i, anchor_pos, emitted = len(plan), L, 1
    for r, a in enumerate(run.accepted, start=1):
        if emitted > len(run.tokens) or not 0 <= a <= k:
            return out + [f"round {r}: the run reports a = {a} after {emitted} tokens, but emitted {len(run.tokens)}"]
        n_seed = len(seeds)
        chain, i = calls[i : i + n_seed + k - 1], i + n_seed + k - 1
        if len(chain) < n_seed + k - 1 or any(c.method != "draft_decode" for c in chain):
            return out + [f"round {r}: expected {n_seed + k - 1} draft_decode calls before target_verify"]
        for head, seed in zip(chain, seeds):
            if head.tokens != seed[0] or head.positions != seed[1] or not _same(head.feature, seed[2]):
                what = "seed" if r == 1 else "reseed"
                out.append(f"round {r}: {what} {head.tokens[-3:]} at {_span(head.positions)} (feature "
                           f"{'ok' if _same(head.feature, seed[2]) else 'differs'}), expected {seed[0][-3:]} at "
                           f"{_span(seed[1])} with the {'prefill' if r == 1 else 'verify'} feature rows")
                break
        chain = chain[n_seed - 1 :]  # the last seed call, then the K - 1 chain steps
        for j, (prev, step) in enumerate(zip(chain, chain[1:]), start=1):
            want_pos = anchor_pos + j - 1
            if step.tokens != prev.out_ids[-1:] or step.positions != [want_pos] or \
                    not _same(step.feature, prev.out_feature[:, -1:]):
                out.append(f"round {r}: chain step {j} fed {step.tokens} at {step.positions}, expected the previous "
                           f"proposal {prev.out_ids[-1:]} with the last g row at [{want_pos}]")
                break
        if i >= len(calls) or calls[i].method != "target_verify":
            return out + [f"round {r}: no target_verify after the chain"]
        v, i = calls[i], i + 1
        window = [run.tokens[emitted - 1]] + [c.out_ids[-1] for c in chain]
        if v.tokens != window or v.positions != list(range(anchor_pos, anchor_pos + k + 1)):
            out.append(f"round {r}: target_verify {v.tokens} at {_span(v.positions)}, expected [anchor, proposals] "
                       f"{window} at {anchor_pos}..{anchor_pos + k}")
        block = run.tokens[emitted : emitted + a + 1]
        seeds = [(block, list(range(anchor_pos, anchor_pos + a + 1)), v.out_feature[:, : a + 1])]
        anchor_pos, emitted = anchor_pos + a + 1, emitted + a + 1
    if i < len(calls):
        out.append(f"{len(calls) - i} call(s) after the last round ({calls[i].method} at {_span(calls[i].positions)})")
    return out


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    return a is not None and b is not None and a.shape == b.shape and torch.equal(a, b)


def _span(positions: list[int]) -> str:
    return f"{positions[0]}..{positions[-1]}" if positions else "(none)"
