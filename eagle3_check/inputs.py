"""Reading what the user hands the tool: regular files only, bounded in size, exact UTF-8 and JSON.

Every input path (prompt sets and files, goldens, baselines, cards, tokenizers, configs, `.pte`
files) goes through `regular_file`: a FIFO would block the read forever, `/dev/zero` would
never end, a directory is not a file; each is named as what it is instead of "does not exist".
`read_text` / `read_json` read at most a stated number of bytes (a 3 GB "tokenizer" is an error
before it is read, not a MemoryError), decode strict UTF-8 (the byte offset of a bad byte is
named) and parse strict JSON: NaN / Infinity and duplicate keys are errors, since anything the
tool cannot interpret exactly is an error, never a guess.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from eagle3_check.errors import InputError

MiB = 1 << 20
JSON_LIMIT = 64 * MiB  # goldens, baselines, cards, prompt sets, configs (the largest committed: < 1 MiB)
TOKENIZER_LIMIT = 512 * MiB  # tokenizer.json (large real ones are ~35 MB)
PROMPT_FILE_LIMIT = 4 * MiB  # a --prompt-file (the prompt cap is MAX_PROMPT_CHARS characters)
FILE_FIX = "pass the path of a regular file"  # for a path that is missing, no regular file or unreadable

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """'a FIFO (named pipe)', 'a directory', ... for a stat mode that is not a regular file."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def regular_file(path: str | Path, what: str, fix: str = FILE_FIX) -> Path:
    """`path` as a Path if it names a regular file (symlinks followed); else a one-line InputError
    that says what it is instead (missing, a directory, a FIFO, a device, a socket)."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(f"{what} {p} does not exist", "an existing file", fix) from None
    except OSError as e:
        raise InputError(f"{what} {p} cannot be read ({e.strerror})", "a readable file", fix) from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} {p} is {kind_of(st.st_mode)}", "a regular file", fix)
    return p


def read_bytes(path: str | Path, what: str, limit: int, fix: str = FILE_FIX, size_fix: str | None = None) -> bytes:
    """The file's bytes, refused above `limit` before reading. `fix` is for a path that is no readable
    regular file; `size_fix` (default `fix`) for one above the limit."""
    p = regular_file(path, what, fix)
    size = p.stat().st_size
    if size > limit:
        raise InputError(f"{what} {p} is {size / MiB:.1f} MiB", f"at most {limit / MiB:g} MiB for a {what}",
                         f"{fix if size_fix is None else size_fix} (a file this large is not one the tool reads)")
    try:
        with open(p, "rb") as f:
            data = f.read(limit + 1)  # the file may have grown since the stat
    except OSError as e:
        raise InputError(f"{what} {p} cannot be read ({e.strerror})", "a readable file", fix) from None
    if len(data) > limit:
        raise InputError(f"{what} {p} grew past {limit / MiB:g} MiB while read", "a file at rest", fix)
    return data


def read_text(path: str | Path, what: str, limit: int = JSON_LIMIT, fix: str = "re-save it as UTF-8",
              size_fix: str | None = None, file_fix: str = FILE_FIX) -> str:
    """The file as strict UTF-8 (a bad byte is named with its offset).

    Each error gets the fix that is true for it: `fix` (the caller's, about the file's content) for
    bytes that are not UTF-8 and, unless `size_fix` says otherwise, for a file above `limit` (a
    golden that large is re-recorded); `file_fix` for a path that is missing, a directory, a FIFO or
    unreadable: re-saving the content cannot fix those."""
    data = read_bytes(path, what, limit, file_fix, fix if size_fix is None else size_fix)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{what} {path} is not UTF-8 (byte {data[e.start]:#04x} at offset {e.start})",
                         "UTF-8 text", fix) from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} appears twice in one object")
        out[k] = v
    return out


def parse_json(text: str, where: str, expected: str, fix: str) -> Any:
    """Strict JSON: NaN / Infinity and duplicate keys are errors; the line and column are named."""
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise InputError(f"{where} is not valid JSON (line {e.lineno} column {e.colno}: {e.msg})",
                         expected, fix) from None
    except ValueError as e:
        raise InputError(f"{where} is not exact JSON ({e})", expected, fix) from None
    except RecursionError:
        raise InputError(f"{where} nests too deeply to parse", expected, fix) from None


def read_json(path: str | Path, what: str, expected: str, fix: str, limit: int = JSON_LIMIT) -> Any:
    """`read_text` + `parse_json`: the parsed value of a JSON input file."""
    return parse_json(read_text(path, what, limit, fix), f"{what} {path}", expected, fix)


def shown_path(path: str | Path) -> str:
    """A path as a report prints it: relative to the working directory when it lies inside it (a
    checkout's `fixtures/tiny-llama/card.json`, never the machine's `/home/me/src/...`), else as given."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)
