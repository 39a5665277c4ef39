"""runners/binary/byte_pieces.py in units (issue 31 item 5: `make mutate-harness` over the byte alignment): every
refusal names the file, what was expected and the fix; added tokens print literally; the byte table's
edges; `of`, `locate` and `whole_tokens` over pieces of several lengths.
"""

from __future__ import annotations

import json

import pytest

from eagle3_check.errors import InputError
from eagle3_check.runners.binary.byte_pieces import BytePieces, byte_table

BYTE_LEVEL = {"decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0, "Ġb": 1, "Ã©": 2}}}


def _write(tmp_path, data) -> str:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return str(path)


def test_a_byte_level_tokenizer_with_added_tokens(tmp_path):
    data = {**BYTE_LEVEL, "added_tokens": [{"id": 3, "content": "<turn|>"}, {"id": 4, "content": "é"}]}
    path = _write(tmp_path, data)
    p = BytePieces.from_tokenizer_json(path)
    assert p.pieces == {0: b"a", 1: b" b", 2: b"\xc3\xa9", 3: b"<turn|>", 4: "é".encode()}
    assert p.path == path


def test_a_byte_level_tokenizer_without_added_tokens(tmp_path):
    assert BytePieces.from_tokenizer_json(_write(tmp_path, BYTE_LEVEL)).pieces == {0: b"a", 1: b" b", 2: b"\xc3\xa9"}


def test_a_file_that_is_no_json_is_refused_with_the_fix(tmp_path):
    path = _write(tmp_path, "{not json")
    with pytest.raises(InputError) as e:
        BytePieces.from_tokenizer_json(path)
    assert str(e.value) == (f"tokenizer {path} cannot be read for byte judging (JSONDecodeError); expected a "
                            "tokenizer.json file. Fix: pass --tokenizer PATH pointing at tokenizer.json")


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(InputError, match=r"cannot be read for byte judging \(FileNotFoundError\)"):
        BytePieces.from_tokenizer_json(tmp_path / "none.json")


@pytest.mark.parametrize("decoder, model", [("Metaspace", "BPE"), ("ByteLevel", "Unigram"), ("Metaspace", "Unigram")],
                         ids=["decoder", "model", "both"])
def test_a_tokenizer_that_is_not_byte_level_bpe_is_refused(tmp_path, decoder, model):
    path = _write(tmp_path, {"decoder": {"type": decoder}, "model": {"type": model, "vocab": {}}})
    with pytest.raises(InputError) as e:
        BytePieces.from_tokenizer_json(path)
    assert str(e.value) == (f"tokenizer {path} has decoder {decoder!r} and model {model!r}; expected a byte-level "
                            "BPE tokenizer (decoder 'ByteLevel') to judge a binary's bytes. Fix: make the runner "
                            "print its ids on stderr ('[ids] a,b,c') so it is judged by ids")


def test_a_piece_outside_the_byte_table_is_refused(tmp_path):
    path = _write(tmp_path, {**BYTE_LEVEL, "model": {"type": "BPE", "vocab": {"a": 0, "▁x": 7}}})
    with pytest.raises(InputError) as e:
        BytePieces.from_tokenizer_json(path)
    assert str(e.value) == (f"tokenizer {path}: vocab piece '▁x' (id 7) has '▁'; expected byte-level pieces "
                            "(characters of the GPT-2 byte table). Fix: judge by ids ('[ids] a,b,c' on the "
                            "runner's stderr)")


def test_an_id_without_a_piece_names_the_tokenizer():
    with pytest.raises(InputError) as e:
        BytePieces({0: b"a"}, "tok.json").of([0, 9])
    assert str(e.value) == ("token id 9 has no piece in tokenizer tok.json; expected a tokenizer that names every "
                            "id. Fix: pass the target's own tokenizer")
    with pytest.raises(InputError, match=r"in tokenizer \(in memory\);"):
        BytePieces({0: b"a"}).of([9])


def test_the_byte_table_edges():
    t = byte_table()
    assert len(t) == 256 and t["ÿ"] == 0xFF and t["®"] == 0xAE and t["¬"] == 0xAC and t["~"] == 0x7E
    assert t[chr(0x100 + 67)] == 0xAD and chr(0x100 + 68) not in t  # the 68 unprintable bytes, the last is 0xAD


def test_of_locate_and_whole_tokens_over_several_pieces():
    p = BytePieces({0: b"ab", 1: b"c", 2: b"def", 3: b""})
    ids = [0, 1, 2, 0]
    assert p.of(ids) == b"abcdefab" and p.of([]) == b""
    assert [p.locate(ids, off) for off in range(9)] == [0, 0, 1, 2, 2, 2, 3, 3, 4]
    assert p.whole_tokens(ids, b"abcdefab") == 4
    assert p.whole_tokens(ids, b"abcdeX") == 2 and p.whole_tokens(ids, b"abcdefaX") == 3
    assert p.whole_tokens(ids, b"abcd") == 2 and p.whole_tokens(ids, b"X") == 0
    assert p.whole_tokens([0, 3, 1], b"abc") == 3  # an empty piece matches anywhere


def test_a_bpe_model_without_a_vocab_has_only_its_added_tokens(tmp_path):
    data = {"decoder": {"type": "ByteLevel"}, "model": {"type": "BPE"}, "added_tokens": [{"id": 5, "content": "<x>"}]}
    assert BytePieces.from_tokenizer_json(_write(tmp_path, data)).pieces == {5: b"<x>"}
