"""A repro command is one line that bash reads back as the same words (shrink/repro.one_line):
prompts with newlines, tabs, quotes and control characters use bash's $'...' quoting."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from eagle3_check.shrink.repro import one_line, split_line

WORDS = [
    ("plain", ["eagle3-check", "check", "--prompt", "Hi there"]),
    ("newline", ["--prompt", "\n"]),
    ("newline-inside", ["--prompt", "line one\nline two"]),
    ("tab-and-quote", ["--prompt", "it's\ta 'test'"]),
    ("backslash", ["--prompt", "a\\nb\n"]),
    ("control", ["--prompt", "bell\x07 nul-free \x1b[0m"]),
    ("unicode", ["--prompt", "héllo\u2028wörld"]),
    ("dollar-quote-words", ["--prompt", "$'not ansi'", "a$", "b"]),
]


@pytest.mark.parametrize("words", [w for _, w in WORDS], ids=[n for n, _ in WORDS])
def test_one_line_round_trips_through_bash(words):
    line = one_line(words)
    assert "\n" not in line and "\r" not in line, line
    if shutil.which("bash") is None:
        pytest.skip("needs bash to read the line back; found none on PATH")
    got = subprocess.run(["bash", "-c", f'for w in {line}; do printf "%s\\0" "$w"; done'],
                         capture_output=True, check=True).stdout.decode().split("\0")[:-1]
    assert got == words
    assert split_line(line) == words  # what the tests replay the command with


def test_printable_words_quote_as_shlex_does():
    import shlex

    words = ["check", "--prompt", "it's a test", "-k", "4"]
    assert one_line(words) == shlex.join(words)
