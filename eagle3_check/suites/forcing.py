"""Forcing: make a run accept exactly a chosen number of proposals each round.

`ForcedDraft` wraps any program. The real `draft_decode` still runs (so seeding, reseeding
and the draft KV cache are exercised); only the returned proposal ids are replaced, using
the target's greedy sequence (a reference) to make proposal j right or wrong:

    round r accepts a_r:  proposal j <  a_r -> the reference token (accepted)
                          proposal j == a_r -> any other token (rejected: the corrected
                                               token verify_ids[a_r] is emitted instead)
                          proposal j >  a_r -> the reference token again, so a runner that
                                               counts all matches instead of leading ones
                                               is caught when the target agrees by chance.

Which proposal a `draft_decode` call produces: row i at position p proposes the token for
position p + 2 (it pairs the feature of the token at p with the token at p + 1). The first
draft call after `prefill` / `target_verify` is the seed / reseed: its last row is proposal
0; each later call in the same round is one chain step.

Worked example (L = 10, K = 3, pattern a = [2, 0]):
    prefill -> bonus at position 10; round 1.
    seed: draft_decode(positions 0..9): last row p = 9 proposes position 11 -> j = 0
    chain: positions 10, 11 -> j = 1, 2 (positions 12, 13)
    a_1 = 2: j = 0, 1 right, j = 2 wrong.  emitted: bonus, p0, p1, corrected (block of 3)
    target_verify -> round 2; reseed positions 10..12: last p = 12 -> j = 0 for position 14
    a_2 = 0: j = 0 wrong; emitted: corrected (block of 1).
Emitted indices (bonus = 0): round 1 slots 0..2 are 1..3, round 2 slot 0 is 4; see
`emitted_index`.

Target-side forcing needs no wrapper: a reference token becomes a stop token by adding its
id to the request's stop ids (`stop_ids_at`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eagle3_check.program.contract import ProgramWrapper, SpeculatorProgram

FULL = "K"  # in a pattern: accept every proposal of the round (a = K)


@dataclass(frozen=True)
class Forcing:
    """A per-round acceptance pattern: `pattern[r-1]` for round r, then `then` for later rounds.

    Entries are ints in [0, K] or FULL ("K"); `then = None` stops forcing after the pattern
    (the real draft's proposals are used). `wrong` is the token a rejected proposal carries
    (default: the reference token + 1), e.g. a stop id: a rejected stop token must not stop."""

    pattern: tuple[int | str, ...]
    then: int | str | None = None
    wrong: int | None = None

    def resolve(self, k: int, rounds: int) -> list[int | None]:
        """The forced a for rounds 1..rounds (None where unforced)."""
        out: list[int | None] = []
        for r in range(rounds):
            a = self.pattern[r] if r < len(self.pattern) else self.then
            out.append(None if a is None else k if a == FULL else int(a))
        return out

    def describe(self) -> str:
        body = ",".join(str(a) for a in self.pattern)
        return (f"a=[{body}]" + ("" if self.then is None else f" then {self.then}")
                + ("" if self.wrong is None else f" rejected={self.wrong}"))


def emitted_index(accepts: Sequence[int], round_no: int, slot: int) -> int:
    """Index in the emitted tokens (bonus = 0) of `slot` of round `round_no` (1-based).

    Slot j < a is accepted proposal j; slot a is the corrected token. Round 0 is the prefill
    bonus (slot 0). Example: accepts = [2, 0] -> round 1 slots 0..2 are 1..3; round 2 slot 0 is 4.
    """
    if round_no == 0:
        return 0
    return 1 + sum(a + 1 for a in accepts[: round_no - 1]) + slot


def block_end(accepts: Sequence[int], round_no: int) -> int:
    """Tokens emitted once round `round_no` is complete (the bonus included): 1 + sum (a + 1)."""
    return 1 + sum(a + 1 for a in accepts[:round_no])


def stop_ids_at(reference: Sequence[int], indices: Sequence[int]) -> tuple[int, ...]:
    """The stop ids that turn reference[i] (i in indices) into stop tokens."""
    return tuple(dict.fromkeys(reference[i] for i in indices))


class ForcedDraft(ProgramWrapper):
    """Overrides draft proposals so that round r accepts exactly the forced a_r.

    `sequence[q]` is the target's greedy token at position q (prompt ids, then the greedy
    continuation). Proposals for positions past the sequence are left as the draft made them.
    """

    def __init__(
        self,
        inner: SpeculatorProgram,
        sequence: Sequence[int],
        forcing: Forcing,
        k: int,
        vocab_size: int,
    ):
        super().__init__(inner)
        self.sequence = list(sequence)
        self.forcing = forcing
        self.k = k
        self.vocab_size = vocab_size
        self._round = 0
        self._base: int | None = None  # position of the round's proposal-0 row
        self._fresh = False  # the next draft call is a seed / reseed
        self._prompt_end = -1  # position of the prompt's last token (the seed's last chunk ends there)

    def reset(self) -> None:
        self._round, self._base, self._fresh = 0, None, False
        self.inner.reset()

    def _forced_a(self) -> int | None:
        return self.forcing.resolve(self.k, self._round)[-1] if self._round else None

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H]
        self._round, self._fresh = 1, True
        self._prompt_end = int(positions.reshape(-1)[-1])  # chunked: the seed ends with the last chunk
        return self.inner.prefill(tokens, positions)

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, H]
        self._round += 1
        self._fresh = True
        return self.inner.target_verify(tokens, positions)

    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, H], [T] -> [1, T], [1, T, H]
        ids, g = self.inner.draft_decode(tokens, feature, positions)
        last = int(positions.reshape(-1)[-1])
        if self._fresh and (self._round != 1 or last >= self._prompt_end):  # not a non-last seed chunk
            self._base, self._fresh = last, False
        a = self._forced_a()
        if a is None or self._base is None:
            return ids, g
        j, q = last - self._base, last + 2
        if not 0 <= j < self.k or q >= len(self.sequence):
            return ids, g
        want, wrong = self.sequence[q], self.forcing.wrong
        if wrong is None or wrong == want:
            wrong = (want + 1) % self.vocab_size
        tok = wrong if j == a else want
        ids[0, -1] = tok  # in place: a graph-owned output stays graph-owned (a stale read still shows)
        return ids, g
