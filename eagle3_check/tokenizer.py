"""A thin tokenizer wrapper over a `tokenizer.json` (HF `tokenizers`), with clear errors.

The runner needs four things: encode without special tokens (added tokens such as
`<|turn>` written in the text are still matched), decode, id lookup of one token
string, and the tokenizer's own EOS ids (from `tokenizer_config.json` when present).
The run options' defaults (runners/defaults.py) also read its `tokenizer_config.json` (`config`),
its added tokens (`added_ids`: the control tokens, never text) and the BOS its post-processor
puts before a sequence (`post_processor_bos`).
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer as HFTokenizer

from eagle3_check.errors import InputError, first_line
from eagle3_check.inputs import TOKENIZER_LIMIT, parse_json, read_json, read_text


class Tokenizer:
    def __init__(self, tok: HFTokenizer, eos_ids: tuple[int, ...] = (), path: str = "", config: dict | None = None):
        self._tok = tok
        self.eos_ids = eos_ids
        self.path = path
        self.config = config or {}  # tokenizer_config.json beside tokenizer.json ({} when absent)

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        p = Path(path)
        if p.is_dir():
            p = p / "tokenizer.json"
        fix, file_fix = "re-save the tokenizer with tokenizer.save(path)", "pass --tokenizer PATH pointing at tokenizer.json"
        if not p.exists():
            raise InputError(f"tokenizer file {p} does not exist", "a tokenizer.json file (HF tokenizers format)",
                             file_fix)
        text = read_text(p, "tokenizer", TOKENIZER_LIMIT, fix, file_fix=file_fix)  # regular file, bounded, strict UTF-8
        parse_json(text, f"tokenizer {p}", "a tokenizer.json file (HF tokenizers format)", fix)
        try:
            tok = HFTokenizer.from_str(text)
        except Exception as e:
            raise InputError(
                f"tokenizer {p} cannot be parsed ({first_line(e)[:80]})",
                "a tokenizer.json file (HF tokenizers format)",
                "re-save the tokenizer with tokenizer.save(path)",
            ) from None
        eos_ids: list[int] = []
        data: dict = {}
        cfg = p.parent / "tokenizer_config.json"
        if cfg.exists():
            data = read_json(cfg, "tokenizer config", "a tokenizer_config.json object", fix)
            data = data if isinstance(data, dict) else {}
            eos = data.get("eos_token")
            if isinstance(eos, dict):
                eos = eos.get("content")
            names = eos if isinstance(eos, list) else [eos] if eos else []
            eos_ids = [i for i in (tok.token_to_id(n) for n in names) if i is not None]
        return cls(tok, tuple(eos_ids), str(p), data)

    def with_eos(self, eos_ids: tuple[int, ...]) -> Tokenizer:
        """The same vocabulary with other EOS ids (a tokenizer variant whose EOS differs from a
        program's `get_eos_ids`, so each DESIGN §2 rule-2 stop source can be tested alone)."""
        return Tokenizer(self._tok, tuple(eos_ids), self.path, self.config)

    def copy(self, hf: HFTokenizer | None = None) -> Tokenizer:
        """An independent copy (its own EOS ids and config, and its own HF tokenizer: `hf`, an earlier
        copy's, else a re-parse: 0.6 ms on tiny-llama, ~4 s on Gemma 3's 262k vocab). What a runner
        under test gets, so a runner that mutates it (adds tokens, replaces `decode`) cannot change
        the harness's decode."""
        import copy as _copy

        own = hf if hf is not None else HFTokenizer.from_str(self._tok.to_str())
        return Tokenizer(own, tuple(self.eos_ids), self.path, _copy.deepcopy(self.config))

    def config_token(self, key: str) -> str | None:
        """tokenizer_config.json's `key` ("bos_token", "eos_token", ...) as a token string, or None
        (absent or null); the {"content": ...} form of older configs is read too."""
        value = self.config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        return value if isinstance(value, str) and value else None

    @property
    def added_ids(self) -> frozenset[int]:
        """The ids of tokenizer.json's added tokens (special or not): control tokens such as
        `<|im_end|>` or `<turn|>`, never pieces of ordinary text."""
        return frozenset(self._tok.get_added_tokens_decoder())

    @property
    def special_ids(self) -> frozenset[int]:
        """The added tokens marked special (skipped by decode(skip_special_tokens=True))."""
        return frozenset(i for i, t in self._tok.get_added_tokens_decoder().items() if t.special)

    def post_processor_bos(self) -> int | None:
        """The id tokenizer.json's post-processor puts before a single sequence (Gemma 3: `<bos>`
        2), or None when it adds nothing in front (SmolLM2's template processor adds nothing)."""
        bare = self._tok.encode("a", add_special_tokens=False).ids
        full = self._tok.encode("a", add_special_tokens=True).ids
        return full[0] if len(full) > len(bare) and full[1:len(bare) + 1] == bare else None

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def id_to_token(self, token_id: int) -> str | None:
        """The vocabulary key of an id (e.g. 'Ġthe' in a byte-level BPE), not its decoded text."""
        return self._tok.id_to_token(token_id)
