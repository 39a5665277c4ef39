"""The runner options' rules in milliseconds (what `make mutate-harness` runs per mutant): the
request-independent option checks, the prompt text and prompt file checks, `--stop-ids` parsing,
the prompt ids, the DESIGN §2 rule-2 stop set, the tokenizer/vocab check and checked decoding,
each error pinned as the user reads it (the value named, what was expected, the fix)."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, pre_tokenizers

from eagle3_check.errors import InputError, OptionError
from eagle3_check.inputs import PROMPT_FILE_LIMIT
from eagle3_check.program.contract import Metadata
from eagle3_check.runners.options import (
    MAX_PROMPT_CHARS,
    RunOptions,
    check_options,
    check_prompt_text,
    check_tokenizer,
    decode_checked,
    parse_stop_ids,
    prompt_ids,
    read_prompt_file,
    stop_set,
)
from eagle3_check.tokenizer import Tokenizer

WORDS = ["<unk>", "<eos>", "<bos>", "hi", "there", "<turn|>", "<u>", "<m>"]  # id = index


def _tok(n: int = len(WORDS), eos: tuple[int, ...] = (1,), path: str = "") -> Tokenizer:
    """A whitespace-split word-level tokenizer with n ids: WORDS first, then w8, w9, ..."""
    vocab = {w: i for i, w in enumerate(WORDS[:n])} | {f"w{i}": i for i in range(len(WORDS), n)}
    hf = HFTokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    hf.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return Tokenizer(hf, eos, path)


def _md(vocab_size: int | None = 100, eos_ids: tuple[int, ...] = (), chain_len: int = 3) -> Metadata:
    """K range [1, 5]: verify windows C in [2, 6] from the verify range metadata."""
    return Metadata(chain_len=chain_len, max_prefill=16, min_prefill=1, max_seq_len=64, vocab_size=vocab_size,
                    eos_ids=eos_ids, min_verify_len=2, max_verify_len=6)


def _opts(**kw) -> RunOptions:
    base = dict(chat_prefix="<u> ", chat_suffix=" <m>", stop_ids=(), stop_token=None, bos_id=2, eos_id=None)
    return RunOptions(**{**base, **kw})


def _msg(exc: pytest.ExceptionInfo) -> str:
    return str(exc.value)


# check_options -------------------------------------------------------------------------------

K_SOURCE = "the program's verify range metadata (get_min/max_verify_len)"


@pytest.mark.parametrize("chain_len, want", [(None, 3), (1, 1), (5, 5)], ids=["program-K", "lowest-K", "highest-K"])
def test_check_options_returns_k_from_the_option_or_the_program(chain_len, want):
    assert check_options(_opts(chain_len=chain_len), _md(), 100) == want


@pytest.mark.parametrize("k", [0, 6, True, 2.0], ids=["below", "above", "bool", "float"])
def test_check_options_rejects_k_outside_the_verify_range(k):
    with pytest.raises(OptionError) as e:
        check_options(_opts(chain_len=k), _md(), 100)
    assert _msg(e) == (f"chain length K = {k}; expected K in [1, 5] (the verify window range minus one, from "
                       f"{K_SOURCE}). Fix: pass -k between 1 and 5, or re-export the program for a wider verify range")


def test_check_options_takes_the_programs_k_when_no_option_is_given():
    with pytest.raises(OptionError, match=r"^chain length K = 9; expected K in \[1, 5\]"):
        check_options(_opts(), _md(chain_len=9), 100)


@pytest.mark.parametrize("n", [0, -3, True, 2.5, "3"], ids=["zero", "negative", "bool", "float", "str"])
def test_check_options_rejects_max_new_tokens(n):
    with pytest.raises(OptionError) as e:
        check_options(_opts(max_new_tokens=n), _md(), 100)
    assert _msg(e) == f"max new tokens = {n}; expected an integer >= 1. Fix: pass --max-new-tokens 1 or more"


def test_check_options_accepts_one_new_token():
    assert check_options(_opts(max_new_tokens=1), _md(), 100) == 3


def test_check_options_accepts_stop_ids_at_both_ends_of_the_vocab():
    assert check_options(_opts(stop_ids=(0, 99)), _md(), 100) == 3


@pytest.mark.parametrize("sid", [100, -1, True, 1.0], ids=["vocab-size", "negative", "bool", "float"])
def test_check_options_rejects_a_stop_id(sid):
    with pytest.raises(OptionError) as e:
        check_options(_opts(stop_ids=(7, sid)), _md(), 100)
    assert _msg(e) == f"stop id {sid!r}; expected an integer token id in [0, 100). Fix: fix --stop-ids"


@pytest.mark.parametrize("bos", [-1, 0, 99], ids=["none", "first", "last"])
def test_check_options_accepts_a_bos_id(bos):
    assert check_options(_opts(bos_id=bos), _md(), 100) == 3


@pytest.mark.parametrize("bos", [-2, 1, 100, True, "2"], ids=["minus-two", "plus-one", "vocab-size", "bool", "str"])
def test_check_options_rejects_a_bos_id(bos):
    vocab = 1 if bos == 1 and not isinstance(bos, bool) else 100  # vocab 1: id 1 is out, and +1 is not "none"
    with pytest.raises(OptionError) as e:
        check_options(_opts(bos_id=bos), _md(), vocab)
    assert _msg(e) == f"bos id {bos!r}; expected -1 or an id in [0, {vocab}). Fix: fix --bos-id"


@pytest.mark.parametrize("eos", [None, -1, 0, 99], ids=["unset", "none", "first", "last"])
def test_check_options_accepts_an_eos_id(eos):
    assert check_options(_opts(eos_id=eos), _md(), 100) == 3


@pytest.mark.parametrize("eos", [-2, 1, 100, True, 1.5], ids=["minus-two", "plus-one", "vocab-size", "bool", "float"])
def test_check_options_rejects_an_eos_id(eos):
    vocab = 1 if eos == 1 and not isinstance(eos, bool) else 100
    with pytest.raises(OptionError) as e:
        check_options(_opts(eos_id=eos, bos_id=0), _md(), vocab)
    assert _msg(e) == f"eos id {eos!r}; expected -1 or an id in [0, {vocab}). Fix: fix --eos-id"


# parse_stop_ids -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, want", [
    ("1,50,106", (1, 50, 106)), ("", ()), (" 1 , 2 ", (1, 2)), ("1,,2", (1, 2)), ("1,2,", (1, 2)), ("-3", (-3,)),
], ids=["default", "empty", "spaces", "empty-middle", "trailing-comma", "negative"])
def test_parse_stop_ids(text, want):
    assert parse_stop_ids(text) == want


def test_parse_stop_ids_names_the_bad_part_and_the_whole_flag():
    with pytest.raises(OptionError) as e:
        parse_stop_ids("1, x ,3")
    assert _msg(e) == ("stop id 'x' in --stop-ids '1, x ,3'; expected comma-separated integers. "
                       "Fix: e.g. --stop-ids 1,50,106")


# check_prompt_text / read_prompt_file ---------------------------------------------------------

def test_check_prompt_text_accepts_the_largest_prompt():
    check_prompt_text("a" * MAX_PROMPT_CHARS)


@pytest.mark.parametrize("where", ["prompt", "request 'long'"])
def test_check_prompt_text_rejects_one_character_too_many(where):
    with pytest.raises(OptionError) as e:
        check_prompt_text("a" * (MAX_PROMPT_CHARS + 1), *([where] if where != "prompt" else []))
    assert _msg(e) == (f"{where} is 1000001 characters; expected at most 1000000 characters (no program's context "
                       "holds more tokens). Fix: shorten the prompt")


def test_check_prompt_text_names_a_lone_surrogate_and_its_index():
    with pytest.raises(OptionError) as e:
        check_prompt_text("ab\ud800c", "request 'x'")
    assert _msg(e) == ("request 'x' has a lone surrogate '\\ud800' at character 2; expected text that is valid "
                       "Unicode (UTF-8 encodable). Fix: remove the unpaired \\ud800-\\udfff escape from the prompt")


def test_read_prompt_file_returns_the_text_as_written(tmp_path):
    p = tmp_path / "p.txt"
    p.write_bytes("  héllo\nthere \n".encode())
    assert read_prompt_file(str(p)) == "  héllo\nthere \n"


def test_read_prompt_file_missing(tmp_path):
    p = tmp_path / "nope.txt"
    with pytest.raises(InputError) as e:
        read_prompt_file(p)
    assert _msg(e) == f"prompt file {p} does not exist; expected a UTF-8 text file. Fix: pass --prompt-file with an existing file"


def test_read_prompt_file_blank(tmp_path):
    p = tmp_path / "blank.txt"
    p.write_text(" \n\t\n")
    with pytest.raises(InputError) as e:
        read_prompt_file(p)
    assert _msg(e) == f"prompt file {p} is empty; expected a non-empty prompt. Fix: write the prompt into the file"


def test_read_prompt_file_not_utf8(tmp_path):
    p = tmp_path / "latin1.txt"
    p.write_bytes(b"ab\xffc")
    with pytest.raises(InputError) as e:
        read_prompt_file(p)
    assert _msg(e) == f"prompt file {p} is not UTF-8 (byte 0xff at offset 2); expected UTF-8 text. Fix: re-save the file as UTF-8"


def test_read_prompt_file_over_the_limit(tmp_path):
    p = tmp_path / "big.txt"
    with open(p, "wb") as f:
        f.truncate(PROMPT_FILE_LIMIT + 1)  # sparse: the size is refused before a byte is read
    with pytest.raises(InputError) as e:
        read_prompt_file(p)
    assert _msg(e).startswith(f"prompt file {p} is 4.0 MiB; expected at most 4 MiB for a prompt file. ")


# prompt_ids -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kw, want", [
    ({}, [2, 6, 3, 4, 7]),  # bos + "<u> " + text + " <m>"
    ({"raw": True}, [2, 3, 4]),
    ({"bos_id": -1}, [6, 3, 4, 7]),
    ({"bos_id": 1}, [1, 6, 3, 4, 7]),
    ({"raw": True, "bos_id": -1}, [3, 4]),
], ids=["chat", "raw", "no-bos", "bos-one", "raw-no-bos"])
def test_prompt_ids(kw, want):
    assert prompt_ids(_tok(), "hi there", _opts(**kw)) == want


def test_prompt_ids_checks_the_templated_body():
    """The chat prefix and suffix count: a text of MAX_PROMPT_CHARS - 7 characters is 1 too many."""
    with pytest.raises(OptionError, match=r"^prompt is 1000001 characters; "):
        prompt_ids(_tok(), "a" * (MAX_PROMPT_CHARS - 7), _opts())  # "<u> " + " <m>" = 8 characters


# stop_set -------------------------------------------------------------------------------------

@pytest.mark.parametrize("tok_eos, md_eos, kw, want", [
    ((1,), (), {}, {1}),  # no program list: the tokenizer's EOS
    ((1,), (7,), {}, {7}),  # the program's list replaces the tokenizer's EOS
    ((1,), (7,), {"stop_ids": (1, 50)}, {1, 7, 50}),  # ... unless stop_ids names it again
    ((1,), (7, 1), {}, {1, 7}),  # ... or the program's list names it
    ((1, 3), (7,), {"stop_ids": (3,)}, {3, 7}),  # only the named tokenizer EOS comes back
    ((1,), (7,), {"eos_id": 1}, {1, 7}),  # ... or eos_id names it
    ((), (), {"eos_id": 0}, {0}),  # eos_id 0 is an id
    ((), (), {"eos_id": -1}, set()),  # eos_id -1: none
    ((1,), (), {"stop_token": "<turn|>"}, {1, 5}),  # one token: added
], ids=["tokenizer-eos", "program-replaces", "stop-ids-name-it", "program-names-it", "partly-named", "eos-id",
        "eos-id-zero", "eos-id-none", "stop-token"])
def test_stop_set_rule_2(tok_eos, md_eos, kw, want):
    s = stop_set(_tok(eos=tok_eos), _md(eos_ids=md_eos), _opts(**kw))
    assert (s.ids, s.notes) == (frozenset(want), [])


@pytest.mark.parametrize("stop_token, note", [
    ("hi there", "stop token 'hi there' encodes to 2 tokens [3, 4]; not added to the stop set"),
    (" ", "stop token ' ' encodes to 0 tokens []; not added to the stop set"),
], ids=["two-tokens", "no-token"])
def test_stop_set_notes_a_stop_token_that_is_not_one_token(stop_token, note):
    s = stop_set(_tok(), _md(), _opts(stop_token=stop_token))
    assert (s.ids, s.notes) == (frozenset({1}), [note])


# check_tokenizer / decode_checked -------------------------------------------------------------

@pytest.mark.parametrize("n, vocab", [(3, None), (8, 8), (15, 16), (20000 - 1024, 20000)],
                         ids=["no-vocab-size", "equal", "one-padding-row", "1024-padding-rows"])
def test_check_tokenizer_accepts_padding_up_to_the_slack(n, vocab):
    check_tokenizer(_tok(n), _md(vocab_size=vocab))


@pytest.mark.parametrize("n, vocab, slack, path", [
    (3, 100, 6, ""),  # 100 // 16 = 6 padding rows at most
    (14, 16, 1, "tok/tokenizer.json"),
    (20000 - 1025, 20000, 1024, ""),  # min(1024, 1250)
], ids=["far-too-small", "one-row-past-the-slack", "slack-capped-at-1024"])
def test_check_tokenizer_rejects_a_smaller_tokenizer(n, vocab, slack, path):
    with pytest.raises(OptionError) as e:
        check_tokenizer(_tok(n, path=path), _md(vocab_size=vocab))
    assert _msg(e) == (f"tokenizer {path or '(in memory)'} has {n} ids; expected the target's vocab size {vocab} "
                       f"(at most {slack} padding rows beyond the tokenizer). Fix: pass the target's own tokenizer "
                       "with --tokenizer")


def test_decode_checked_decodes_every_id_of_the_tokenizer():
    assert decode_checked(_tok(), [0, 3, 4, 7]) == "<unk> hi there <m>"


@pytest.mark.parametrize("ids, bad, path", [([3, 8, 9], 8, ""), ([3, -1], -1, "tok.json")],
                         ids=["vocab-size", "negative"])
def test_decode_checked_names_an_id_the_tokenizer_cannot_name(ids, bad, path):
    with pytest.raises(OptionError) as e:
        decode_checked(_tok(path=path), ids)
    assert _msg(e) == (f"the target emitted id {bad}, beyond the 8 ids of tokenizer {path or '(in memory)'}; "
                       "expected a tokenizer that names every id the target emits. "
                       "Fix: pass the target's own tokenizer with --tokenizer")
