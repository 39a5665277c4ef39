"""Each error of reading an input file names the fix that is true for it (inputs.read_text): the
caller's content fix for bytes that are not UTF-8 and (unless the caller says otherwise) for a file
over the size limit; a path fix for a path that is missing or a directory, never "re-save it"."""

from pathlib import Path

import pytest

from eagle3_check.errors import Eagle3CheckError
from eagle3_check.fixtures.registry import load_prompts
from eagle3_check.hf_config import FIX_SAVE, read_target_config
from eagle3_check.inputs import JSON_LIMIT, PROMPT_FILE_LIMIT, TOKENIZER_LIMIT, read_text
from eagle3_check.jobs.golden.file import RERECORD, load_golden
from eagle3_check.runners.options import MAX_PROMPT_CHARS, read_prompt_file
from eagle3_check.tokenizer import Tokenizer

LARGE = " (a file this large is not one the tool reads)"
TOKENIZER_FIX = "re-save the tokenizer with tokenizer.save(path)"
TOKENIZER_PATH_FIX = "pass --tokenizer PATH pointing at tokenizer.json"
GOLDEN = "llama__k4__greedy__hello.json"  # a golden's file name (GoldenKey.from_path reads it after)


def _msg(call, path) -> str:
    with pytest.raises(Eagle3CheckError) as e:
        call(path)
    return str(e.value)


def _sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)  # the size is refused before a byte is read
    return path


# (reader, path in tmp_path, what the error calls it, its size limit)
CALLERS = {
    "prompt-file": (read_prompt_file, "p.txt", "prompt file", PROMPT_FILE_LIMIT),
    "tokenizer": (lambda p: Tokenizer.load(p.parent), "tokenizer.json", "tokenizer", TOKENIZER_LIMIT),  # its dir
    "golden-file": (load_golden, GOLDEN, "golden file", JSON_LIMIT),
    "target-config": (lambda p: read_target_config(p.parent), "config.json", "target config", JSON_LIMIT),
}

CONTENT_FIX = {  # the caller's fix for bytes that are not UTF-8
    "prompt-file": "re-save the file as UTF-8",
    "tokenizer": TOKENIZER_FIX,
    "golden-file": RERECORD,
    "target-config": FIX_SAVE,
}
# an oversized file: the content fix, but a prompt file's ("re-save as UTF-8") is no fix for its size
SIZE_FIX = {**CONTENT_FIX, "prompt-file": f"shorten the prompt to at most {MAX_PROMPT_CHARS:,} characters"}


@pytest.mark.parametrize("caller", list(SIZE_FIX))
def test_an_oversized_file_gets_the_callers_size_fix(caller, tmp_path):
    read, name, what, limit = CALLERS[caller]
    p = _sparse(tmp_path / name, limit + 1)
    assert _msg(read, p) == (f"{what} {p} is {(limit + 1) / (1 << 20):.1f} MiB; expected at most "
                             f"{limit >> 20} MiB for a {what}. Fix: {SIZE_FIX[caller]}{LARGE}")


@pytest.mark.parametrize("caller", list(CONTENT_FIX))
def test_bytes_that_are_not_utf8_get_the_callers_content_fix(caller, tmp_path):
    read, name, what, _ = CALLERS[caller]
    p = tmp_path / name
    p.write_bytes(b'{"\xff": 1}')
    assert _msg(read, p) == f"{what} {p} is not UTF-8 (byte 0xff at offset 2); expected UTF-8 text. Fix: {CONTENT_FIX[caller]}"


MISSING = {  # each caller says "does not exist" itself, with a path fix
    "prompt-file": "prompt file {p} does not exist; expected a UTF-8 text file. Fix: pass --prompt-file with an existing file",
    "tokenizer": "tokenizer file {p} does not exist; expected a tokenizer.json file (HF tokenizers format). "
                 f"Fix: {TOKENIZER_PATH_FIX}",
    "golden-file": "golden file {p} does not exist; expected a file under golden/. "
                   "Fix: record it with `eagle3-check golden record`, or list golden/",
    "target-config": "target directory {d} has no config.json; expected an HF save_pretrained directory "
                     "(config.json + model.safetensors). Fix: pass --target DIR pointing at a saved HF model",
}


@pytest.mark.parametrize("caller", list(MISSING))
def test_a_missing_file_gets_a_path_fix(caller, tmp_path):
    read, name, _, _ = CALLERS[caller]
    p = tmp_path / name
    assert _msg(read, p) == MISSING[caller].format(p=p, d=tmp_path)


DIRECTORY_FIX = {  # a path fix: re-saving or re-recording the content cannot make a directory a file
    "prompt-file": "pass --prompt-file with a regular text file",
    "tokenizer": TOKENIZER_PATH_FIX,
    "golden-file": "pass the path of a regular file",
    "target-config": "pass the path of a regular file",
    "prompt-set": "pass the path of a prompt set JSON file (see fixtures/prompts.json)",
}


@pytest.mark.parametrize("caller", list(DIRECTORY_FIX))
def test_a_directory_gets_a_path_fix(caller, tmp_path):
    read, name, what, _ = CALLERS.get(caller, (load_prompts, "prompts.json", "prompt set", JSON_LIMIT))
    p = tmp_path / name
    p.mkdir()
    assert _msg(read, p) == f"{what} {p} is a directory; expected a regular file. Fix: {DIRECTORY_FIX[caller]}"


def test_read_text_defaults_the_size_fix_to_the_content_fix_and_keeps_the_path_fix_apart(tmp_path):
    big = _sparse(tmp_path / "big.json", 2 << 20)
    assert _msg(lambda p: read_text(p, "card", 1 << 20, "re-measure it"), big).endswith(
        f"Fix: re-measure it{LARGE}")
    assert _msg(lambda p: read_text(p, "card", 1 << 20, "re-measure it", size_fix="split it"), big).endswith(
        f"Fix: split it{LARGE}")
    assert _msg(lambda p: read_text(p, "card", 1 << 20, "re-measure it", file_fix="pass --card FILE"),
                tmp_path).endswith("is a directory; expected a regular file. Fix: pass --card FILE")
