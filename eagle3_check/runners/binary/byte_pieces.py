"""The bytes a runner binary prints for each token: byte-level BPE pieces through the byte table.

A C++ runner (the seed's `eagle3_speculator_runner`) prints every emitted token's decoded
bytes with no separator, as its HF tokenizer decodes one token: a byte-level BPE piece is
mapped back to raw bytes through the GPT-2 byte table (so a piece may be a partial UTF-8
sequence), an added token (`<eos>`, `<turn|>`) is printed literally. Judging its stdout
without token ids means: emitted bytes == the reference tokens' pieces concatenated.

Worked example (GPT-2 byte table): vocab piece "Ġw" -> bytes b" w" ('Ġ' is byte 0x20);
"Ċ" -> b"\\n"; "Ã©" -> b"\\xc3\\xa9" ("é"); a piece "Ã" alone -> b"\\xc3", half of "é".
"""

from __future__ import annotations

import json
from pathlib import Path

from eagle3_check.errors import InputError


def byte_table() -> dict[str, int]:
    """GPT-2's `bytes_to_unicode`, inverted: the printable character standing for each byte.

    Printable Latin-1 bytes stand for themselves; the other 68 bytes (0x00-0x20, 0x7f-0xa0,
    0xad) map, in byte order, to U+0100 onwards: 0x00 -> 'Ā' (U+0100), 0x20 -> 'Ġ' (U+0120)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out: dict[str, int] = {chr(b): b for b in keep}
    n = 0
    for b in range(256):
        if b not in out.values():
            out[chr(256 + n)] = b
            n += 1
    return out


class BytePieces:
    """id -> the bytes a runner prints for that token (byte-level BPE tokenizers only)."""

    def __init__(self, pieces: dict[int, bytes], path: str = ""):
        self.pieces = pieces
        self.path = path

    @classmethod
    def from_tokenizer_json(cls, path: str | Path) -> BytePieces:
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise InputError(f"tokenizer {p} cannot be read for byte judging ({e.__class__.__name__})",
                             "a tokenizer.json file", "pass --tokenizer PATH pointing at tokenizer.json") from None
        decoder = (data.get("decoder") or {}).get("type")
        model = data.get("model") or {}
        if decoder != "ByteLevel" or model.get("type") != "BPE":
            raise InputError(
                f"tokenizer {p} has decoder {decoder!r} and model {model.get('type')!r}",
                "a byte-level BPE tokenizer (decoder 'ByteLevel') to judge a binary's bytes",
                "make the runner print its ids on stderr ('[ids] a,b,c') so it is judged by ids",
            )
        table = byte_table()
        pieces: dict[int, bytes] = {}
        for piece, i in model.get("vocab", {}).items():
            bad = next((c for c in piece if c not in table), None)
            if bad is not None:  # not a byte-level piece: the decoder cannot map it either
                raise InputError(f"tokenizer {p}: vocab piece {piece!r} (id {i}) has {bad!r}",
                                 "byte-level pieces (characters of the GPT-2 byte table)",
                                 "judge by ids ('[ids] a,b,c' on the runner's stderr)")
            pieces[int(i)] = bytes(table[c] for c in piece)
        for tok in data.get("added_tokens", []):
            pieces[int(tok["id"])] = tok["content"].encode("utf-8")
        return cls(pieces, str(p))

    def of(self, ids: list[int]) -> bytes:
        """The bytes of `ids` printed one after another."""
        missing = next((i for i in ids if i not in self.pieces), None)
        if missing is not None:
            raise InputError(f"token id {missing} has no piece in tokenizer {self.path or '(in memory)'}",
                             "a tokenizer that names every id", "pass the target's own tokenizer")
        return b"".join(self.pieces[i] for i in ids)

    def locate(self, ids: list[int], offset: int) -> int:
        """Index of the token of `ids` whose piece covers byte `offset` (len(ids) past the end).

        Example: pieces [b"ab", b"c"], offset 2 -> 1; offset 3 -> 2."""
        end = 0
        for n, i in enumerate(ids):
            end += len(self.pieces[i])
            if offset < end:
                return n
        return len(ids)

    def whole_tokens(self, ids: list[int], data: bytes) -> int:
        """How many leading tokens of `ids` `data` starts with, piece for piece."""
        pos = 0
        for n, i in enumerate(ids):
            piece = self.pieces[i]
            if data[pos:pos + len(piece)] != piece:
                return n
            pos += len(piece)
        return len(ids)
