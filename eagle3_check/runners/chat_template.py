"""The tokenizer's own chat template, rendered for one user message and split into prefix and suffix.

Where the template is (as Transformers loads it): `chat_template.jinja` beside `tokenizer.json`
(it takes priority), else `tokenizer_config.json`'s `chat_template` (a string, or the list of
named templates older configs hold: the one named "default").

How it is rendered: jinja2's immutable sandbox (templates are untrusted code), with the settings
and helpers `apply_chat_template` gives it (trim_blocks, lstrip_blocks, loop controls, `tojson`,
`raise_exception`, `strftime_now`) and the tokenizer config's special tokens (`bos_token`, ...), for
`messages = [{"role": "user", "content": SENTINEL}]` and `add_generation_prompt = True`. The
render must contain SENTINEL exactly once: what comes before it is the chat prefix, what follows
is the chat suffix. Anything else (a render error, the sentinel missing, repeated or altered) is a
one-line error whose fix is to state the template by hand (--chat-prefix/--chat-suffix) or --raw.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from eagle3_check.errors import InputError, first_line
from eagle3_check.inputs import read_text
from eagle3_check.tokenizer import Tokenizer

SENTINEL = "eagle3checkusermessage"  # letters only: survives `| trim`, escaping and case-preserving filters
TEMPLATE_FILE = "chat_template.jinja"
TEMPLATE_LIMIT = 1 << 20  # bytes; the largest published templates are ~20 KB
FIX = "pass --chat-prefix and --chat-suffix (the text before and after the user message), or --raw"


@dataclass(frozen=True)
class ChatTemplate:
    text: str
    source: str  # "chat_template.jinja" or "tokenizer_config.json chat_template"
    path: str  # the file it was read from


def find_template(tokenizer: Tokenizer) -> ChatTemplate | None:
    """The tokenizer's chat template (module doc), or None when it has none."""
    where = Path(tokenizer.path).parent if tokenizer.path else None
    if where is not None and (where / TEMPLATE_FILE).is_file():
        f = where / TEMPLATE_FILE
        text = read_text(f, "chat template", TEMPLATE_LIMIT, "re-save the template as UTF-8", file_fix=FIX)
        return ChatTemplate(text, TEMPLATE_FILE, str(f))
    value = tokenizer.config.get("chat_template")
    cfg = str(where / "tokenizer_config.json") if where is not None else "tokenizer_config.json"
    if value is None:
        return None
    if isinstance(value, list):  # [{"name": ..., "template": ...}]: the default one
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        value = named.get("default")
        if not isinstance(value, str):
            raise InputError(f"{cfg} chat_template lists templates {sorted(map(str, named))} and none named "
                             "'default'", "a 'default' chat template", FIX)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{cfg} chat_template is {type(value).__name__} {str(value)[:40]!r}",
                         "a Jinja template string", FIX)
    return ChatTemplate(value, "tokenizer_config.json chat_template", cfg)


def split_template(template: ChatTemplate, tokenizer: Tokenizer) -> tuple[str, str]:
    """(chat prefix, chat suffix): the template rendered for one user message, split around it."""
    try:
        rendered = _render(template.text, _special_tokens(tokenizer))
    except Exception as e:  # noqa: BLE001 - a template is user code: any failure is its error
        raise InputError(f"chat template {template.path} does not render one user message "
                         f"({type(e).__name__}: {first_line(e)[:100]})",
                         "a template that renders [user message] with add_generation_prompt", FIX) from None
    n = rendered.count(SENTINEL)
    if n != 1:
        raise InputError(f"chat template {template.path} renders the user message {n} times",
                         "the message's text exactly once in the render", FIX)
    prefix, suffix = rendered.split(SENTINEL)
    return prefix, suffix


def _special_tokens(tokenizer: Tokenizer) -> dict[str, str]:
    """The `*_token` strings of tokenizer_config.json (bos_token, eos_token, pad_token, ...), as
    `apply_chat_template` passes them to the template."""
    keys = [k for k in tokenizer.config if k.endswith("_token")]
    return {k: v for k in keys if (v := tokenizer.config_token(k)) is not None}


def _render(text: str, tokens: dict[str, str]) -> str:
    import jinja2.ext
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=lambda fmt: datetime.now().strftime(fmt))
    messages = [{"role": "user", "content": SENTINEL}]
    return env.from_string(text).render(messages=messages, add_generation_prompt=True, **tokens)
