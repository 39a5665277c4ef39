"""Suites on what a user hands in: the program's metadata and the runner options."""

from __future__ import annotations

from eagle3_check.program.contract import REQUIRED_KEYS
from eagle3_check.suites.case import Case, Expect, PromptSpec

METADATA = [
    Case(f"metadata/no-{key.removeprefix('get_').replace('_', '-')}",
         f"required metadata '{key}' missing: a clear error naming it, nothing run",
         drop_key=key, expect=Expect(error="MetadataError", mentions=(key,)))
    for key in REQUIRED_KEYS
]

TEXT = "Count from one to ten."

OPTIONS = [
    Case("options/bos-minus-1", "bos -1: the prompt is the default prompt without its BOS",
         prompt=PromptSpec(text=TEXT), options=(("bos_id", -1),), expect=Expect(prompt="drop-bos")),
    Case("options/raw", "raw prompt: no chat prefix or suffix", prompt=PromptSpec(text=TEXT),
         options=(("raw", True),), expect=Expect(prompt="decodes")),
    Case("options/raw-bos-minus-1", "raw prompt and bos -1: the text's ids alone", prompt=PromptSpec(text=TEXT),
         options=(("raw", True), ("bos_id", -1)), expect=Expect(prompt="decodes")),
    Case("options/custom-chat", "custom chat prefix and suffix", prompt=PromptSpec(text=TEXT),
         options=(("chat_prefix", "User: "), ("chat_suffix", "\nAssistant:")), expect=Expect(prompt="decodes")),
    Case("options/prompt-file", "the prompt read from a UTF-8 file", prompt=PromptSpec(text=TEXT, from_file=True),
         expect=Expect(prompt="decodes")),
    Case("options/multi-token-stop", "a stop token string of several tokens: not added, and said so",
         prompt=PromptSpec(text=TEXT), options=(("stop_token", "STOP HERE NOW"),),
         expect=Expect(note="not added to the stop set")),
    # prompt text at its edges (issue 20): rule 3 takes the text as given, never normalised
    *(Case(f"options/{name}", f"prompt {what}: the ids are BOS + prefix + text + suffix, the text untouched",
           prompt=PromptSpec(text=text), options=opts, expect=Expect(prompt="decodes"))
      for name, what, text, opts in (
          ("leading-space", "with leading spaces", "   " + TEXT, ()),
          ("trailing-space", "with trailing spaces", TEXT + "  ", ()),
          ("leading-newline", "starting with newlines", "\n\n" + TEXT, ()),
          ("trailing-newline", "ending with a newline", TEXT + "\n", ()),
          ("inner-newlines", "with blank lines and tabs inside", "Count from one\n\n\tto ten.", ()),
          ("only-whitespace", "of whitespace only", " \n\t ", ()),
          ("raw-edge-whitespace", "raw, with whitespace at both ends", "\n " + TEXT + " \n", (("raw", True),)),
      )),
    Case("options/no-stops", "no stop ids and no stop token: only EOS stops", prompt=PromptSpec(text=TEXT),
         options=(("stop_ids", ()), ("stop_token", None))),
]
