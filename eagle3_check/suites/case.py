"""A suite case as data: prompt, program spec, runner options, forcing, and what it expects.

Nothing here names an expected token. Expectations come from DESIGN §2 (through
`rules.expected_length` and the verdict) and a greedy reference at run time; a case only
says which boundary it aims at (`Expect.reason`), which makes a mis-built case fail
loudly instead of silently testing something else.

Lengths and positions are relative to the program under test where they can be, so the
same case runs on any backend: `PromptSpec(anchor="room", offset=2)` means L + K =
max_seq_len - 2 whatever max_seq_len is. `spec` is a wish for a program factory that can
build programs (the eager backend builds a small one); a fixed program (a `.pte`) ignores
it and the case skips when its prompt cannot fit. `toy` runs the case on the toy program
(suites/toy.py) instead, which every run can build, so a fixed program's run still meets a
program of another size (the state suite) or one that declares a sliding window (chunked prefill).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eagle3_check.program.contract import Metadata
from eagle3_check.runners.rules import prefill_chunk_size
from eagle3_check.suites.forcing import Forcing

ANCHORS = ("min_prefill", "max_prefill", "max_seq_len", "room", "chunk")


@dataclass(frozen=True)
class PromptSpec:
    """The request's prompt: fixture text through the chat template, or exactly L ids.

    - text: a literal prompt text;
    - pick: the first fixture prompt that suits the case (default when nothing else is given);
    - length: L ids (BOS, then filler text ids);
    - anchor + offset: L relative to the program: min_prefill / max_prefill / max_seq_len +
      offset, or "room": L = max_seq_len - K - offset (offset 2 means L + K = max_seq_len - 2),
      or "chunk": L = times x the chunked-prefill chunk (`rules.prefill_chunk_size`) + offset.
    """

    text: str | None = None
    length: int | None = None
    anchor: str | None = None
    offset: int = 0
    times: int = 1  # anchor "chunk": how many chunks
    from_file: bool = False  # write the text to a file and read it back (the prompt-file path)
    ends_in: str | None = None  # toy cases: the last id chosen so the output's text ends in this (text_end.py)

    def resolve_length(self, md: Metadata, k: int) -> int | None:
        if self.anchor is None:
            return self.length
        if self.anchor == "room":
            return md.max_seq_len - k - self.offset
        if self.anchor == "chunk":
            return self.times * prefill_chunk_size(md.max_prefill, md.sliding_window) + self.offset
        return getattr(md, self.anchor) + self.offset

    def describe(self) -> str:
        if self.anchor == "room":
            return f"L+K=max_seq_len{-self.offset:+d}" if self.offset else "L+K=max_seq_len"
        if self.anchor == "chunk":
            return f"L={self.times}*chunk{self.offset:+d}" if self.offset else f"L={self.times}*chunk"
        if self.anchor:
            return f"L={self.anchor}{self.offset:+d}" if self.offset else f"L={self.anchor}"
        if self.length is not None:
            return f"L={self.length}" + (f" output ends in {self.ends_in!r}" if self.ends_in else "")
        src = "file" if self.from_file else "text"
        return f"{src} {self.text!r}" if self.text is not None else "fixture prompt"


VIAS = ("stop_ids", "eos_id", "program_eos", "stop_token", "stop_string_multi", "program_eos_only",
        "tokenizer_eos", "tokenizer_eos_empty_list", "tokenizer_eos_shadowed", "stop_token_not_key",
        "vocab_key_multi")
NOT_STOP_VIAS = ("stop_string_multi", "tokenizer_eos_shadowed", "vocab_key_multi")  # rule 2: no stop


@dataclass(frozen=True)
class StopAt:
    """Target-side forcing: the emitted token of `round` at `slot` becomes a stop token.

    Round 0 slot 0 is the prefill bonus; in round r >= 1, slot j < a_r is accepted proposal j
    and slot a_r is the corrected token. `via` is the DESIGN §2 rule-2 source it goes through,
    each alone where the case's options drop the others:
    - stop_ids (added), eos_id (replaced), stop_token (its one-token string);
    - program_eos: the program's get_eos_ids extended; program_eos_only: the program's list
      replaced by this token alone (the tokenizer's EOS differs and no longer stops);
    - tokenizer_eos: the tokenizer's EOS is this token and the program has no get_eos_ids;
      tokenizer_eos_empty_list: the same with an empty get_eos_ids (falls back to the tokenizer);
    - stop_token_not_key: a string that encodes to exactly this one token but is not a
      vocabulary key (' the' for the key 'Ġthe'): a stop, rule 2 encodes, it does not look up.
    Not stops (NOT_STOP_VIAS): stop_string_multi, a string of this token and the next (several
    tokens); tokenizer_eos_shadowed, the tokenizer's EOS while the program's get_eos_ids lists
    another id (the program's list replaces the tokenizer's); vocab_key_multi, this token's
    vocabulary key as the stop string, which encodes to several tokens ('Ġthe')."""

    round: int
    slot: int
    via: str = "stop_ids"

    def describe(self) -> str:
        at = "bonus" if self.round == 0 else f"r{self.round}.{self.slot}"
        return at if self.via == "stop_ids" else f"{at} via {self.via}"


@dataclass(frozen=True)
class Expect:
    """What a case checks besides the always-on checks (reference prefix, rule length,
    call-log invariants, tau * rounds + 1 = emitted, forced a = run's a)."""

    reason: str | None = None  # stop | max_new | context: the boundary the rules must land on
    error: str | None = None  # Eagle3CheckError subclass name; then no program method may run
    mentions: tuple[str, ...] = ()  # substrings of the error message
    draft_calls: int | None = None  # e.g. 0: the draft is never seeded
    rounds: int | None = None
    note: str | None = None  # substring of one of the run's notes
    prompt: str | None = None  # "drop-bos": ids = default ids minus BOS; "decodes": see execute.py


@dataclass(frozen=True)
class Case:
    name: str  # "suite/short-name"
    what: str  # one line: the boundary under test
    prompt: PromptSpec = field(default_factory=PromptSpec)
    options: tuple[tuple[str, object], ...] = ()  # RunOptions overrides
    k: int | tuple[str, int] | None = None  # K, or ("lo"|"hi", offset) relative to the k range
    forcing: Forcing | None = None
    stop_at: tuple[StopAt, ...] = ()
    max_new_at: tuple[int, int] | None = None  # (round, offset): max_new_tokens = block_end + offset
    spec: tuple[tuple[str, int], ...] = ()  # ProgramSpec wish (program factories may ignore it)
    drop_key: str | None = None  # metadata key removed from the program
    expect: Expect = field(default_factory=Expect)
    fixture: str | None = None  # None: every fixture; a name: only that fixture (others skip)
    # Run on the toy program (suites/toy.py) built from these ToyProgram arguments instead of the
    # program under test: a second program of another size, or a declared sliding window, that a
    # run on one given program (the gate's .pte) has too. Judged by the toy's own target.
    toy: tuple[tuple[str, object], ...] = ()  # e.g. (("verify_range", (2, 5)), ("chain_len", 3))

    @property
    def suite(self) -> str:
        return self.name.split("/", 1)[0]

    def option_dict(self) -> dict[str, object]:
        return dict(self.options)

    def describe(self) -> str:
        """The case's setup in one line (for `check --list`)."""
        bits = [self.prompt.describe()]
        if isinstance(self.k, tuple):
            bits.append(f"K={self.k[0]}{self.k[1]:+d}" if self.k[1] else f"K={self.k[0]}")
        elif self.k is not None:
            bits.append(f"K={self.k}")
        if self.forcing:
            bits.append(self.forcing.describe())
        if self.stop_at:
            bits.append("stop@" + ",".join(s.describe() for s in self.stop_at))
        if self.max_new_at:
            r, off = self.max_new_at
            bits.append(f"max_new=end(r{r}){off:+d}" if off else f"max_new=end(r{r})")
        bits += [f"{k}={v!r}" for k, v in self.options]
        bits += [f"{k}={v}" for k, v in self.spec]
        if self.toy:
            bits.append("toy " + " ".join(f"{k}={v}" for k, v in self.toy))
        if self.drop_key:
            bits.append(f"drop {self.drop_key}")
        if self.fixture:
            bits.append(f"fixture {self.fixture} only")
        return " ".join(bits)
