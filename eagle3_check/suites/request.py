"""Building a case's request: the prompt, its greedy reference, and the forced stops.

`pick_prompt` takes the first candidate prompt (the case's text, L filler ids from the prompt
set rotated to start at each prompt, or each fixture prompt in turn) that fits the program's prefill range, whose reference makes every forced
stop index the first stop, and on which (under full forcing) the rules land on the boundary
the case aims at. `apply_stops` turns the forced stop indices into request options (stop
ids, eos id, stop token string) or extra program EOS ids.
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path

from eagle3_check.atomic import write_text_atomic
from eagle3_check.runners.options import RunOptions, prompt_ids, read_prompt_file, stop_set
from eagle3_check.runners.rules import expected_length
from eagle3_check.suites.case import NOT_STOP_VIAS, Case


class CaseSkip(Exception):
    """The case cannot run on this program (the message says why); it is reported as skipped."""


def pick_prompt(case, env, program, md, k, options, stop_idx, base_stops, accepts):
    """(prompt as given to the runner, its ids, reference). Picks the first candidate prompt (the
    case's text; L filler ids, the prompt set rotated to start at each prompt in turn; or each fixture
    prompt) that fits the prefill range, makes each forced stop index the first stop in the reference,
    and (under full forcing) lands on the boundary the case aims at."""
    L = case.prompt.resolve_length(md, k)
    if case.prompt.ends_in is not None:  # a toy case: its output's text ends in this whitespace (text_end.py)
        from eagle3_check.suites.text_end import ending_prompts

        candidates = ending_prompts(env.tokenizer, env.filler_ids(L - 1, options.bos_id), options.max_new_tokens,
                                    case.prompt.ends_in, base_stops)
        if not candidates:
            raise CaseSkip(f"no token in the toy's range of this tokenizer decodes to a text ending in "
                           f"{case.prompt.ends_in!r}")
    elif L is not None:
        candidates = [env.filler_ids(L, options.bos_id, start) for start in range(len(env.prompts))]
    elif case.prompt.text is not None:
        candidates = [case.prompt.text]
    else:
        candidates = list(env.prompts)
    fits = 0
    for cand in candidates:
        ids = list(cand) if isinstance(cand, list) else prompt_ids(env.tokenizer, cand, options)
        top = md.max_seq_len - 1 if options.chunked_prefill else md.max_prefill  # DESIGN §2 rule 4
        if not md.min_prefill <= len(ids) <= top:
            continue
        fits += 1
        n = max(1, min(options.max_new_tokens + k + 1, md.max_seq_len - len(ids)), max(stop_idx, default=0) + 1)
        ref = env.greedy(ids, n, program)
        forced = apply_stops(case, env.tokenizer, ref.tokens, stop_idx, options)
        if forced is None or not all(_first_stop_at(ref.tokens, i, base_stops) for i in stop_idx):
            continue
        forced_opts, patch = forced
        stops = stop_set(patch.tokenizer(env.tokenizer), patch.md(md), forced_opts).ids
        stops = oracle_stops(case, ref.tokens, stop_idx, stops)
        if _aims(case, ref, ids, md, k, options, accepts, stops):
            return _as_prompt(case, cand), ids, ref
    if not fits:
        if options.chunked_prefill:  # the chunks take any L below max_seq_len
            raise CaseSkip(f"no prompt of {case.prompt.describe()} fits this program's chunked prompt range "
                           f"[{md.min_prefill}, {md.max_seq_len - 1}] (min prefill, max_seq_len - 1)")
        raise CaseSkip(f"no prompt of {case.prompt.describe()} fits this program's prefill range "
                       f"[{md.min_prefill}, {md.max_prefill}]")
    raise CaseSkip(f"no prompt's reference reaches the case's boundary ({case.expect.reason or 'forced stop'} "
                   f"at {stop_idx or options.max_new_tokens}) with distinct, non-stop tokens before it")


@dataclass(frozen=True)
class StopPatch:
    """How a case's forced stops change the program's get_eos_ids and the tokenizer's EOS
    (DESIGN §2 rule 2 sources other than the run options): extended, replaced, dropped."""

    extra_eos: tuple[int, ...] = ()  # get_eos_ids extended by these
    program_eos: tuple[int, ...] | None = None  # get_eos_ids replaced by this list
    drop_program_eos: bool = False  # the program has no get_eos_ids at all
    tokenizer_eos: tuple[int, ...] | None = None  # the tokenizer's EOS ids replaced

    @property
    def changes_program(self) -> bool:
        return bool(self.extra_eos) or self.program_eos is not None or self.drop_program_eos

    def eos_ids(self, base: tuple[int, ...]) -> tuple[int, ...]:
        if self.drop_program_eos:
            return ()
        return self.program_eos if self.program_eos is not None else (*base, *self.extra_eos)

    def metadata(self, raw: dict) -> dict:
        """The program's raw metadata with the patch applied."""
        out = dict(raw)
        if self.drop_program_eos:
            out.pop("get_eos_ids", None)
        elif self.program_eos is not None:
            out["get_eos_ids"] = list(self.program_eos)
        elif self.extra_eos:
            out["get_eos_ids"] = [*(out.get("get_eos_ids") or []), *self.extra_eos]
        return out

    def md(self, md):  # Metadata -> Metadata
        return dataclasses.replace(md, eos_ids=self.eos_ids(md.eos_ids))

    def tokenizer(self, tokenizer):
        return tokenizer if self.tokenizer_eos is None else tokenizer.with_eos(self.tokenizer_eos)


def apply_stops(case, tokenizer, ref: list[int], stop_idx: list[int], options: RunOptions):
    """(options with the forced stops, StopPatch of the program's and tokenizer's EOS), or None
    when this reference cannot carry them (a token's string does not encode as the case needs)."""
    stop_ids, opts = list(options.stop_ids), dataclasses.replace(options)
    patch: dict = {"extra_eos": ()}
    for s, i in zip(case.stop_at, stop_idx):
        if i >= len(ref):
            return None
        tok = ref[i]
        if s.via == "stop_ids":
            stop_ids.append(tok)
        elif s.via == "eos_id":
            opts.eos_id = tok
        elif s.via == "program_eos":
            patch["extra_eos"] += (tok,)
        elif s.via == "program_eos_only":
            patch["program_eos"] = (tok,)
        elif s.via in ("tokenizer_eos", "tokenizer_eos_empty_list"):
            patch["tokenizer_eos"] = (tok,)
            if s.via == "tokenizer_eos":
                patch["drop_program_eos"] = True
            else:
                patch["program_eos"] = ()
        elif s.via == "tokenizer_eos_shadowed":  # the program lists the tokenizer's own EOS, not tok
            if not tokenizer.eos_ids or tok in tokenizer.eos_ids:
                return None
            patch["program_eos"], patch["tokenizer_eos"] = tuple(tokenizer.eos_ids), (tok,)
        elif s.via in ("stop_token", "stop_token_not_key"):
            opts.stop_token = tokenizer.decode([tok])
            if tokenizer.encode(opts.stop_token) != [tok]:
                return None
            if s.via == "stop_token_not_key" and tokenizer.token_to_id(opts.stop_token) is not None:
                return None
        elif s.via == "vocab_key_multi":
            opts.stop_token = tokenizer.id_to_token(tok)
            if not opts.stop_token or len(tokenizer.encode(opts.stop_token)) < 2:
                return None
        elif s.via == "stop_string_multi":
            opts.stop_token = tokenizer.decode(ref[i : i + 2])
            enc = tokenizer.encode(opts.stop_token)
            if len(enc) < 2 or enc[0] != tok:
                return None
    opts.stop_ids = tuple(dict.fromkeys(stop_ids))
    return opts, StopPatch(**patch)


def oracle_stops(case, ref: list[int], stop_idx: list[int], stops: frozenset[int]) -> frozenset[int]:
    """The stop set a case judges by: the rules' set (`options.stop_set`) corrected by what the case
    itself forced, so a bug in `stop_set` cannot agree with the runner (and turn the case into a
    skip): a token forced via a stop source IS a stop (DESIGN §2 rule 2), one forced via a
    NOT_STOP_VIAS source (a string of several tokens, a tokenizer EOS the program's list replaces)
    is NOT."""
    forced = [(s.via, ref[i]) for s, i in zip(case.stop_at, stop_idx) if i < len(ref)]
    return frozenset((stops | {t for via, t in forced if via not in NOT_STOP_VIAS})
                     - {t for via, t in forced if via in NOT_STOP_VIAS})


def prompt_problem(tokenizer, prompt, options: RunOptions, got: list[int]) -> str | None:
    """DESIGN §2 rule 3 checked without `options.prompt_ids`: a text prompt's ids are BOS (none when
    bos is -1), then ids that decode to prefix + text + suffix (the text alone when raw). Checked where
    the tokenizer round-trips that string (decode(encode(s)) == s); an ids prompt is used as given."""
    if not isinstance(prompt, str):
        return None
    want = prompt if options.raw else options.chat_prefix + prompt + options.chat_suffix
    if tokenizer.decode(tokenizer.encode(want)) != want:
        return None
    head = [] if options.bos_id == -1 else [options.bos_id]
    if got[: len(head)] == head and tokenizer.decode(got[len(head):]) == want:
        return None
    return (f"runner's prompt ids {got[:4]}... decode to {tokenizer.decode(got)[:60]!r}; rule 3 gives "
            f"{f'BOS {head[0]} + ' if head else ''}{want[:60]!r}")


def _aims(case, ref, ids, md, k, options, accepts, stops) -> bool:
    """Under full forcing, do the rules land this prompt on the boundary the case aims at?"""
    if not case.expect.reason or not accepts or min(accepts) < 0:
        return True
    exp = expected_length(ref.tokens, stops, options.max_new_tokens, len(ids), k, md.max_seq_len, accepts)
    return exp.reason == case.expect.reason


def _first_stop_at(tokens: list[int], i: int, base_stops: frozenset[int]) -> bool:
    """tokens[i] is new (not earlier in tokens), not already a stop, and no earlier token is a stop."""
    if i >= len(tokens) or tokens[i] in base_stops or tokens[i] in tokens[:i]:
        return False
    return not any(t in base_stops for t in tokens[:i])


def _as_prompt(case: Case, cand):
    if not case.prompt.from_file or isinstance(cand, list):
        return cand
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "prompt.txt"
        write_text_atomic(path, cand, "prompt file")
        return read_prompt_file(path)
