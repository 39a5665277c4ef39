"""A text-only binary's token ids, recovered from its bytes by aligning them with the reference.

The seed's runner prints each emitted token's bytes and no ids. To judge it per position (ties
included, DESIGN §3) the harness recovers the ids: walking the output, at emitted index i the
candidates are the reference's top tokens for that position (teacher-forced over the prompt and
the ids recovered so far: its argmax, then its runner-up); the walk follows the candidate whose
bytes (`byte_pieces`) the output continues with. Several that match are tried in that order
(back to the last such choice when the walk dead-ends); none is a failure naming the byte
offset, the expected pieces and what came. The walk must consume the bytes exactly with the N
tokens the summary line reports, so the decode of the recovered ids is the printed text.

Before walking, the text is split the other way round (`_room`): for every byte offset, the
counts of non-empty printed tokens that cover the rest exactly. The walk takes only candidates
after which the rest still fits the tokens left (exactly first; with fewer, the rest printed as
nothing, below), so it goes back only where a token printed as nothing was assumed and none
came, however often the binary leaves the reference (every one of 64 tokens on a flat bf16
model costs a re-decode, not a backtrack). Where no split exists the walk runs unpruned, only to
find its deepest dead end for the failure.

Where the walk leaves the reference's greedy tokens (a tie taken the other way), the rest of the
reference is decoded again from there (`greedy`), and the teacher-forced rows recomputed
(`score`): one reference forward per divergence.

Known output quirks are matched as a second form of a piece and named where they occur, never a
silent pass and never a false failure: the seed's `printf("%s")` drops a token's bytes from its
first NUL byte on (`NUL`; a token whose bytes start with one prints as nothing, which only the
reference's top two can be taken as: the real stack top, tiny-gemma4 `harbour`, token 45; the
walk that allowed it at the end of the text only took Gemma's '<' for '<unused47>' and failed
8 bytes short), and a lossy UTF-8 decode may print U+FFFD for a piece that is not
valid UTF-8 alone (`REPLACED`).

Worked example: reference greedy [5, 8, 9], pieces 5 -> b" a", 7 -> b" b", 8 -> b" c", output
b" a b..." with N = 3: index 0 matches 5; at index 1 the argmax 8 (b" c") does not match, the
runner-up 7 (b" b") does: the reference is decoded again after [5, 7] and the walk goes on.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from eagle3_check.judge.hf import Scores
from eagle3_check.runners.binary.byte_pieces import BytePieces

NUL = "printf('%s') stops at the NUL byte"
REPLACED = "invalid UTF-8 printed as U+FFFD"
MAX_BACKTRACKS = 32  # dead ends one unpruned walk may go back from (each costs a reference re-decode)


@dataclass
class Recovery:
    ids: list[int] | None  # None: the bytes cannot be aligned (see `failure`)
    scores: Scores | None = None  # the reference's rows over prompt + a sequence starting with `ids`
    failure: str | None = None
    index: int | None = None  # the emitted index where the walk failed
    offset: int | None = None  # its byte offset
    quirks: list[str] = field(default_factory=list)  # one line per quirk, where it occurs
    redecodes: int = 0


def printed_forms(piece: bytes) -> list[tuple[bytes, str | None]]:
    """The bytes a token may be printed as: its piece, then the quirks' forms (with their name).
    Example: b"a\\x00b" -> [(b"a\\x00b", None), (b"a", NUL)]; b"\\xc3" -> [(b"\\xc3", None),
    (b"\\xef\\xbf\\xbd", REPLACED)]."""
    forms: list[tuple[bytes, str | None]] = [(piece, None)]
    if b"\x00" in piece:
        forms.append((piece.split(b"\x00", 1)[0], NUL))
    try:
        piece.decode("utf-8")
    except UnicodeDecodeError:
        forms.append((piece.decode("utf-8", "replace").encode("utf-8"), REPLACED))
    return forms


def _candidates(scores: Scores, i: int) -> list[tuple[int, int]]:
    """(id, rank) of the reference's top tokens at row i, best first."""
    out = []
    if i < len(scores.argmax):
        out.append((scores.argmax[i], 1))
        if i < len(scores.runner_up) and scores.runner_up[i] >= 0 and scores.runner_up[i] != scores.argmax[i]:
            out.append((scores.runner_up[i], 2))
    return out


def recover_ids(text: bytes, n: int, pieces: BytePieces, greedy: list[int],
                score: Callable[[list[int]], Scores], decode: Callable[[list[int], int], list[int]]) -> Recovery:
    """The n ids whose printed bytes are `text`, following the reference (module doc).
    `greedy`: the reference's greedy tokens after the prompt; `score(tokens)`: its rows over
    prompt + tokens; `decode(prefix, m)`: m greedy tokens after prompt + prefix."""
    forms = _forms(pieces)
    room = _room(text, n, forms)
    pruned = room[0] != 0  # some split of the text into at most n non-empty printed tokens exists
    hyp = list(greedy)
    rows = score(hyp)
    branches: list[tuple[int, int, list[int], Scores, list]] = []  # (i, pos, hyp, rows, untried matches)
    quirks: dict[int, str] = {}
    i, pos, redecodes, backtracks = 0, 0, 0, 0
    furthest = (0, 0, [], b"")  # (index, offset, candidates, what came) of the deepest dead end

    while True:
        if i == n and pos == len(text):
            got = hyp[:n]
            return Recovery(got, rows, quirks=[quirks[k] for k in sorted(quirks) if k < n], redecodes=redecodes)
        matches = []
        if i < n:
            for c, rank in _candidates(rows, i):
                for form, quirk in printed_forms(pieces.pieces.get(c, b"")):
                    if text.startswith(form, pos):  # an empty form (a NUL first) only for a top token
                        matches.append((c, rank, form, quirk))
        if i < n and i < len(rows.argmax):  # past the top two: any token the bytes continue with, tried after them
            seen = {m[0] for m in matches}  # (a top token may be a prefix of the printed one: "<" of "<unused47>")
            matches += [(c, None, form, quirk) for c, form, quirk in _by_bytes(forms, text, pos, not pruned)
                        if c not in seen]
        if pruned:  # only what leaves the rest splittable into the tokens left: exactly first, then with empties
            left = n - i - 1
            matches = sorted((m for m in matches if _fits(room[pos + len(m[2])], left)),
                             key=lambda m: not room[pos + len(m[2])] >> left & 1)
        if not matches:
            if (i, pos) >= furthest[:2]:
                furthest = (i, pos, _candidates(rows, i), text[pos:pos + 16])
            if not branches or backtracks >= MAX_BACKTRACKS:
                return _failed(furthest, n, len(text), pieces, redecodes)
            backtracks += 1
            i, pos, hyp, rows, matches = branches.pop()
        c, rank, form, quirk = matches[0]
        if matches[1:]:
            branches.append((i, pos, hyp, rows, matches[1:]))
        for k in [k for k in quirks if k >= i]:
            del quirks[k]
        if quirk:
            quirks[i] = (f"token {i} (id {c}, {pieces.pieces.get(c, b'')!r}) printed as {form!r}: {quirk} "
                         "(a known quirk of the binary's output, not judged as a difference)")
        if i >= len(hyp) or hyp[i] != c:  # the walk leaves the reference's tokens: decode again from here
            redecodes += 1
            hyp = hyp[:i] + [c]
            hyp += decode(hyp, max(n - len(hyp), 0))
            rows = score(hyp)
        i, pos = i + 1, pos + len(form)


@dataclass
class _Forms:
    """Every token's non-empty printed forms (its piece, then its quirks' forms), by their bytes."""
    by_bytes: dict[bytes, list[tuple[int, str | None]]]  # form -> (id, quirk name or None), pieces first
    longest: int


_FORMS: weakref.WeakKeyDictionary[BytePieces, _Forms] = weakref.WeakKeyDictionary()


def _forms(pieces: BytePieces) -> _Forms:
    got = _FORMS.get(pieces)
    if got is None:
        by: dict[bytes, list[tuple[int, str | None]]] = {}
        for c in sorted(pieces.pieces):
            for form, quirk in printed_forms(pieces.pieces[c]):
                if form:
                    by.setdefault(form, []).append((c, quirk))
        for v in by.values():
            v.sort(key=lambda cq: (cq[1] is not None, cq[0]))
        got = _FORMS[pieces] = _Forms(by, max(map(len, by), default=0))
    return got


def _room(text: bytes, n: int, forms: _Forms) -> list[int]:
    """room[p]: a bit mask whose bit k says text[p:] splits into exactly k non-empty printed forms
    (k <= n). Example: forms b"a", b"ab", b"b", text b"ab", n 2: room[2] = 0b1 (0 tokens),
    room[1] = 0b10, room[0] = 0b110 (b"ab" alone, or b"a" + b"b")."""
    size, keep = len(text), (1 << (n + 1)) - 1
    room = [0] * (size + 1)
    room[size] = 1
    for p in range(size - 1, -1, -1):
        m = 0
        for ln in range(1, min(forms.longest, size - p) + 1):
            if text[p:p + ln] in forms.by_bytes:
                m |= room[p + ln] << 1
        room[p] = m & keep
    return room


def _fits(mask: int, left: int) -> bool:
    """The rest (its `_room` mask) can take `left` tokens: some split of at most `left` non-empty
    forms (the rest printed empty: a NUL first, a top token's quirk)."""
    return mask != 0 and (mask & -mask).bit_length() - 1 <= left


def _by_bytes(forms: _Forms, text: bytes, pos: int, pieces_only: bool) -> list[tuple[int, bytes, str | None]]:
    """Every token whose printed form `text` continues with at `pos`, longest first (its piece before
    a quirk's form): the candidates below the reference's top two, whose rank the verdict then
    judges (a tie within the top-N, else a failure with its rank). `pieces_only`: pieces alone, at
    most 8 (the unpruned walk, which only looks for its dead end)."""
    found = []
    for ln in range(min(forms.longest, len(text) - pos), 0, -1):
        for c, quirk in forms.by_bytes.get(text[pos:pos + ln], ()):
            if quirk is None or not pieces_only:
                found.append((c, text[pos:pos + ln], quirk))
    return found[:8] if pieces_only else found


def _failed(furthest, n: int, size: int, pieces: BytePieces, redecodes: int) -> Recovery:
    i, pos, cands, came = furthest
    if i >= n:
        why = (f"the {n} tokens the summary reports end at byte {pos}, but stdout's text goes on with {came!r} "
               f"({size - pos} more bytes)")
    elif not cands:
        why = f"the reference cannot score token {i} (past its context): nothing to align byte {pos} with"
    else:
        want = ", ".join(f"id {c} {pieces.pieces.get(c, b'')!r} (rank {r})" for c, r in cands)
        why = (f"bytes at offset {pos} (token {i}) are none of the reference's top tokens there: expected "
               f"{want}; stdout has {came!r}")
    return Recovery(None, failure=why, index=i, offset=pos, redecodes=redecodes)
