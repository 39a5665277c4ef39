"""Runner options (the seed runner's flags) and the request → prompt ids / stop set rules.

DESIGN §2 steps 2-3: the stop set is (program `get_eos_ids`, else tokenizer EOS) ∪ {eos_id}
∪ stop_ids ∪ {id of stop_token, only if it encodes to exactly one token}; the prompt is
`chat_prefix + text + chat_suffix` (unless raw), encoded without special tokens, with
`bos_id` prepended unless it is -1. Defaults follow Gemma 4 IT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eagle3_check.errors import InputError, OptionError
from eagle3_check.tokenizer import Tokenizer

if TYPE_CHECKING:  # annotations only: importing the contract imports torch (the CLI's --help stays fast)
    from eagle3_check.program.contract import Metadata

GEMMA4_CHAT_PREFIX = "<|turn>user\n"
GEMMA4_CHAT_SUFFIX = "<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"


@dataclass
class RunOptions:
    chat_prefix: str = GEMMA4_CHAT_PREFIX
    chat_suffix: str = GEMMA4_CHAT_SUFFIX
    raw: bool = False
    stop_ids: tuple[int, ...] = (1, 50, 106)
    stop_token: str | None = "<turn|>"
    bos_id: int = 2
    eos_id: int | None = 1
    max_new_tokens: int = 128
    chain_len: int | None = None  # K; None = the program's get_chain_len
    chunked_prefill: bool = False  # DESIGN §2 rule 4: prefill (and seed the draft) in chunks


@dataclass
class StopSet:
    ids: frozenset[int]
    notes: list[str] = field(default_factory=list)  # e.g. a stop token that was not added


MAX_PROMPT_CHARS = 1_000_000  # checked before tokenizing: a 10 MB prompt cost 2.4 GB in the tokenizer


def check_prompt_text(text: str, where: str = "prompt") -> None:
    """A prompt's text before it is tokenized: at most MAX_PROMPT_CHARS characters, and encodable
    UTF-8 (a lone surrogate, e.g. from a JSON "\\ud800", is named with its index)."""
    if len(text) > MAX_PROMPT_CHARS:
        raise OptionError(f"{where} is {len(text)} characters", f"at most {MAX_PROMPT_CHARS} characters "
                          "(no program's context holds more tokens)", "shorten the prompt")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise OptionError(f"{where} has a lone surrogate {text[e.start]!r} at character {e.start}",
                          "text that is valid Unicode (UTF-8 encodable)",
                          "remove the unpaired \\ud800-\\udfff escape from the prompt") from None


def read_prompt_file(path: str | Path) -> str:
    from eagle3_check.inputs import PROMPT_FILE_LIMIT, read_text

    p = Path(path)
    if not p.exists():
        raise InputError(f"prompt file {p} does not exist", "a UTF-8 text file", "pass --prompt-file with an existing file")
    text = read_text(p, "prompt file", PROMPT_FILE_LIMIT, "re-save the file as UTF-8",
                     size_fix=f"shorten the prompt to at most {MAX_PROMPT_CHARS:,} characters",
                     file_fix="pass --prompt-file with a regular text file")
    if not text.strip():
        raise InputError(f"prompt file {p} is empty", "a non-empty prompt", "write the prompt into the file")
    return text


def prompt_ids(tokenizer: Tokenizer, text: str, opts: RunOptions) -> list[int]:
    """Prompt = [bos] + encode(prefix + text + suffix), or encode(text) alone when raw."""
    body = text if opts.raw else opts.chat_prefix + text + opts.chat_suffix
    check_prompt_text(body)
    ids = tokenizer.encode(body)
    return ids if opts.bos_id == -1 else [opts.bos_id, *ids]


def stop_set(tokenizer: Tokenizer, md: Metadata, opts: RunOptions) -> StopSet:
    """DESIGN §2 rule 2. The program's `get_eos_ids` REPLACES the tokenizer's EOS (as ExecuTorch's
    `llm::get_eos_ids` does): a program listing [7] does not stop on the tokenizer's EOS unless
    eos_id / stop_ids name it. An empty or absent list falls back to the tokenizer's EOS."""
    ids = set(tokenizer.eos_ids) | set(md.eos_ids) | set(opts.stop_ids)
    if md.eos_ids:  # the program's list replaces the tokenizer's: its EOS stays only where named again
        ids -= set(tokenizer.eos_ids) - set(md.eos_ids) - set(opts.stop_ids)
    if opts.eos_id is not None and opts.eos_id >= 0:
        ids.add(opts.eos_id)
    notes: list[str] = []
    if opts.stop_token:
        enc = tokenizer.encode(opts.stop_token)
        if len(enc) == 1:
            ids.add(enc[0])
        else:
            notes.append(
                f"stop token {opts.stop_token!r} encodes to {len(enc)} tokens {enc}; not added to the stop set"
            )
    return StopSet(frozenset(ids), notes)


def check_tokenizer(tokenizer: Tokenizer, md: Metadata) -> None:
    """The tokenizer must name the target's vocab, up to embedding padding.

    Checkpoints often pad the embedding past the tokenizer (Gemma 3: 262208 rows, 262145
    tokens; Qwen 2.5: 151936 rows, 151665 tokens), so a gap up to min(1024, vocab / 16)
    rows is padding; `decode_checked` still catches a padding id that is actually emitted."""
    if md.vocab_size is None:
        return
    slack = min(1024, md.vocab_size // 16)
    if tokenizer.vocab_size < md.vocab_size - slack:
        raise OptionError(
            f"tokenizer {tokenizer.path or '(in memory)'} has {tokenizer.vocab_size} ids",
            f"the target's vocab size {md.vocab_size} (at most {slack} padding rows beyond the tokenizer)",
            "pass the target's own tokenizer with --tokenizer",
        )


def decode_checked(tokenizer: Tokenizer, ids: list[int]) -> str:
    """Decodes emitted ids; an id the tokenizer cannot name is an error, not silently dropped text."""
    bad = next((t for t in ids if not 0 <= t < tokenizer.vocab_size), None)
    if bad is not None:
        raise OptionError(
            f"the target emitted id {bad}, beyond the {tokenizer.vocab_size} ids of tokenizer "
            f"{tokenizer.path or '(in memory)'}",
            "a tokenizer that names every id the target emits",
            "pass the target's own tokenizer with --tokenizer",
        )
    return tokenizer.decode(ids)


def check_options(opts: RunOptions, md: Metadata, vocab_size: int) -> int:
    """Validates the request-independent options; returns K."""
    if isinstance(opts.max_new_tokens, bool) or not isinstance(opts.max_new_tokens, int) or opts.max_new_tokens < 1:
        raise OptionError(
            f"max new tokens = {opts.max_new_tokens}", "an integer >= 1", "pass --max-new-tokens 1 or more"
        )
    k = md.chain_len if opts.chain_len is None else opts.chain_len
    lo, hi = md.k_range
    if isinstance(k, bool) or not isinstance(k, int) or not lo <= k <= hi:
        raise OptionError(
            f"chain length K = {k}",
            f"K in [{lo}, {hi}] (the verify window range minus one, from {md.k_source})",
            f"pass -k between {lo} and {hi}, or re-export the program for a wider verify range",
        )
    for sid in opts.stop_ids:
        if isinstance(sid, bool) or not isinstance(sid, int) or not 0 <= sid < vocab_size:
            raise OptionError(
                f"stop id {sid!r}", f"an integer token id in [0, {vocab_size})", "fix --stop-ids"
            )
    bos = opts.bos_id
    if isinstance(bos, bool) or not isinstance(bos, int) or not (bos == -1 or 0 <= bos < vocab_size):
        raise OptionError(f"bos id {bos!r}", f"-1 or an id in [0, {vocab_size})", "fix --bos-id")
    eos = opts.eos_id
    if eos is not None and (isinstance(eos, bool) or not isinstance(eos, int) or not (eos == -1 or 0 <= eos < vocab_size)):
        raise OptionError(f"eos id {eos!r}", f"-1 or an id in [0, {vocab_size})", "fix --eos-id")
    return k


def parse_stop_ids(text: str) -> tuple[int, ...]:
    """Parses the CLI form '1,50,106' (empty string = no stop ids)."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            out.append(int(part))
        except ValueError:
            raise OptionError(
                f"stop id {part!r} in --stop-ids {text!r}", "comma-separated integers", "e.g. --stop-ids 1,50,106"
            ) from None
    return tuple(out)
