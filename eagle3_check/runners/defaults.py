"""The run options of a request world: from the tokenizer's and the model's own files, flags on top.

`resolve_options(tokenizer, target_dir, given)` is the one place a request's chat template, BOS,
EOS and stop ids are decided (docs/run-options.md has the table). Per field, the first that
applies:

- a flag the user gave (`given`);
- the seed's Gemma 4 IT defaults (`RunOptions()`) when the tokenizer is Gemma 4's
  (`is_gemma4`: its control tokens at the ids those defaults name);
- otherwise the files: the chat template (runners/chat_template.py) gives the prefix and suffix and,
  when the suffix starts with one added token (`<|im_end|>`), the stop token (end of turn);
  `generation_config.json`, else the target's `config.json`, gives the EOS ids (the first is
  `eos_id`, the rest `stop_ids`), else `tokenizer_config.json`'s `eos_token`; BOS is none under a
  chat template (it renders what it emits, and `apply_chat_template` encodes the render without
  special tokens), else the tokenizer's: `add_bos_token` when the config states it, else what
  tokenizer.json's post-processor puts in front.

Then the role rules (`check_roles`): a BOS that is an EOS or end-of-turn token, a stop id or EOS
id that is ordinary text (not an added token; `--allow-text-stops` permits it), a stop token from
the files or the defaults that is not exactly one token: each a one-line error naming the flag
and the token. A multi-token `--stop-token` given as a flag stays a note (DESIGN §2 rule 2).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from eagle3_check.errors import InputError, OptionError
from eagle3_check.inputs import read_json
from eagle3_check.runners.options import RunOptions
from eagle3_check.tokenizer import Tokenizer

FIELDS = ("chat_prefix", "chat_suffix", "raw", "stop_ids", "stop_token", "bos_id", "eos_id")
FLAGS = {f: "--" + f.replace("_", "-") for f in FIELDS}
GEMMA4 = "Gemma 4 IT defaults"
# The Gemma 4 IT defaults name these control tokens; a tokenizer with all of them there, each an
# added token, is Gemma 4's (the repo's tiny fixtures are built with them: fixtures/build.py SPECIAL_AT).
GEMMA4_TOKENS = {1: "<eos>", 2: "<bos>", 100: "<|channel>", 101: "<channel|>", 105: "<|turn>", 106: "<turn|>"}


@dataclass
class ResolvedOptions:
    options: RunOptions
    sources: dict[str, str]  # field -> where its value came from ("flag --bos-id", "chat_template.jinja", ...)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """The report's `info.run_options`: each field's source, the notes, and the text line."""
        return {"sources": dict(self.sources), "notes": list(self.notes), "summary": self.line()}

    def line(self) -> str:
        """One line for a text report: each option and where it came from."""
        o, s = self.options, self.sources
        if set(s.values()) == {GEMMA4}:
            return f"options: {GEMMA4} (the tokenizer is Gemma 4's)"
        parts = ["raw prompt" if o.raw else f"chat prefix/suffix ({s['chat_prefix']})"
                 if s["chat_prefix"] == s["chat_suffix"] else f"chat prefix ({s['chat_prefix']}), suffix ({s['chat_suffix']})",
                 f"bos {o.bos_id} ({s['bos_id']})", f"eos {o.eos_id} ({s['eos_id']})",
                 f"stop ids {list(o.stop_ids)} ({s['stop_ids']})", f"stop token {o.stop_token!r} ({s['stop_token']})"]
        return "options: " + "; ".join(parts)


def is_gemma4(tokenizer: Tokenizer) -> bool:
    """True when every token of GEMMA4_TOKENS is an added token at its id."""
    added = tokenizer.added_ids
    return all(i in added and tokenizer.id_to_token(i) == name for i, name in GEMMA4_TOKENS.items())


def resolve_options(tokenizer: Tokenizer, target_dir: str | Path | None, given: dict,
                    allow_text_stops: bool = False) -> ResolvedOptions:
    """RunOptions for this tokenizer and target (module doc). `given` holds the flags the user
    gave (FIELDS, and any other RunOptions field such as max_new_tokens, passed through)."""
    unknown = set(given) - {f.name for f in dataclasses.fields(RunOptions)}
    if unknown:
        raise OptionError(f"run option(s) {sorted(unknown)}", "RunOptions fields", "fix the option names")
    sources = {f: f"flag {FLAGS[f]}" for f in FIELDS if f in given}
    notes: list[str] = []
    if is_gemma4(tokenizer):
        values = {f: getattr(RunOptions(), f) for f in FIELDS}
        sources = {f: sources.get(f, GEMMA4) for f in FIELDS}
    else:
        values = _from_files(tokenizer, target_dir, given, sources, notes)
    opts = RunOptions(**{**values, **given})
    check_roles(tokenizer, opts, sources, _model_eos(target_dir)[0], allow_text_stops)
    return ResolvedOptions(opts, sources, notes)


def _from_files(tokenizer: Tokenizer, target_dir, given: dict, sources: dict, notes: list) -> dict:
    from eagle3_check.runners.chat_template import find_template, split_template

    out: dict = {"raw": False}
    sources.setdefault("raw", "default")
    need_template = not given.get("raw") and not {"chat_prefix", "chat_suffix"} <= set(given)
    template = find_template(tokenizer) if need_template else None
    if template is not None:
        other = tokenizer.config.get("chat_template")
        if template.source == "chat_template.jinja" and isinstance(other, str) and other != template.text:
            notes.append("tokenizer_config.json holds another chat_template; chat_template.jinja is used "
                         "(as Transformers does)")
        out["chat_prefix"], out["chat_suffix"] = split_template(template, tokenizer)
        for f in ("chat_prefix", "chat_suffix"):
            sources.setdefault(f, template.source)
    else:
        out["chat_prefix"] = out["chat_suffix"] = ""
        why = "--raw" if given.get("raw") else "no chat template"
        for f in ("chat_prefix", "chat_suffix"):
            sources.setdefault(f, f"none: {why}")
    templated = template is not None and not given.get("raw") and "chat_prefix" not in given
    out["bos_id"], bos_source = _bos(tokenizer, target_dir, templated)
    pp = tokenizer.post_processor_bos()
    if not templated and bos_source.endswith("add_bos_token false") and pp is not None:
        notes.append(f"tokenizer_config.json add_bos_token is false but tokenizer.json's post-processor adds "
                     f"{tokenizer.id_to_token(pp)!r} {pp}: no BOS (the config is followed; --bos-id {pp} adds it)")
    sources.setdefault("bos_id", bos_source)
    eos, eos_source = _model_eos(target_dir)
    if not eos and (name := tokenizer.config_token("eos_token")) and tokenizer.token_to_id(name) is not None:
        eos, eos_source = (tokenizer.token_to_id(name),), "tokenizer_config.json eos_token"
    out["eos_id"], out["stop_ids"] = (eos[0], tuple(eos[1:])) if eos else (None, ())
    sources.setdefault("eos_id", eos_source or "none: no EOS in the model's or the tokenizer's files")
    sources.setdefault("stop_ids", f"{eos_source}: the EOS ids after the first" if len(eos) > 1 else "none")
    out["stop_token"] = None
    suffix = given.get("chat_suffix", out["chat_suffix"])
    first = tokenizer.encode(suffix)[:1] if suffix and not given.get("raw") else []
    if first and first[0] in tokenizer.added_ids:
        out["stop_token"] = tokenizer.id_to_token(first[0])
        sources.setdefault("stop_token", f"{sources['chat_suffix']}: end of turn")
    else:
        sources.setdefault("stop_token", "none: --raw" if given.get("raw") else "none: no chat template"
                           if not suffix else "none: the chat suffix starts with no added token")
    return out


def _bos(tokenizer: Tokenizer, target_dir, templated: bool) -> tuple[int, str]:
    """(bos_id, source): -1 under the chat template; else the tokenizer's own rule."""
    if templated:
        return -1, "none: the chat template renders its own"
    add = tokenizer.config.get("add_bos_token")
    if add is not None and not isinstance(add, bool):
        raise InputError(f"tokenizer_config.json add_bos_token = {add!r}", "true or false",
                         "fix add_bos_token in tokenizer_config.json, or pass --bos-id")
    if add is False:
        return -1, "none: tokenizer_config.json add_bos_token false"
    if add is True:
        name = tokenizer.config_token("bos_token")
        bos = tokenizer.token_to_id(name) if name else _model_bos(target_dir)
        if bos is None:
            raise InputError("tokenizer_config.json add_bos_token true but no bos_token names a token",
                             "a bos_token in tokenizer_config.json or a bos_token_id in generation_config.json",
                             "pass --bos-id ID (or -1)")
        return bos, "tokenizer_config.json add_bos_token"
    bos = tokenizer.post_processor_bos()
    if bos is not None:
        return bos, "tokenizer.json post-processor"
    return -1, "none: the tokenizer adds none"


def _model_json(target_dir) -> list[tuple[str, dict]]:
    """(file name, dict) of generation_config.json then config.json (its text_config) of the target."""
    out = []
    for name in ("generation_config.json", "config.json"):
        p = Path(target_dir) / name if target_dir is not None else None
        if p is not None and p.is_file():
            data = read_json(p, f"target {name}", "a JSON object", "re-save the model with save_pretrained")
            if isinstance(data, dict):
                inner = data.get("text_config")
                out.append((name, data if name.startswith("generation") or not isinstance(inner, dict)
                            else {**inner, **{k: v for k, v in data.items() if k.endswith("token_id")}}))
    return out


def _ids(value, where: str) -> tuple[int, ...]:
    ids = value if isinstance(value, list) else [value]
    if not ids or not all(type(i) is int and i >= 0 for i in ids):
        raise InputError(f"{where} = {value!r}", "a token id or a list of token ids",
                         f"fix {where.split()[0]}, or pass --eos-id / --stop-ids")
    return tuple(ids)


def _model_eos(target_dir) -> tuple[tuple[int, ...], str | None]:
    """The model's EOS ids (generation_config.json, else config.json) and the file named."""
    for name, data in _model_json(target_dir):
        if data.get("eos_token_id") is not None:
            return _ids(data["eos_token_id"], f"{name} eos_token_id"), name
    return (), None


def _model_bos(target_dir) -> int | None:
    for name, data in _model_json(target_dir):
        if data.get("bos_token_id") is not None:
            return _ids(data["bos_token_id"], f"{name} bos_token_id")[0]
    return None


def check_roles(tokenizer: Tokenizer, opts: RunOptions, sources: dict, model_eos: tuple[int, ...] = (),
                allow_text_stops: bool = False) -> None:
    """The role rules of the module doc; `sources` names the flag (or the default) in each error."""
    def named(f: str) -> str:
        src = sources.get(f, GEMMA4)
        return src.removeprefix("flag ") if src.startswith("flag ") else f"the {FLAGS[f]} default ({src})"

    def tok(i: int) -> str:
        return repr(tokenizer.id_to_token(i))

    stop_token_id = None
    if opts.stop_token:
        enc = tokenizer.encode(opts.stop_token)
        if len(enc) == 1:
            stop_token_id = enc[0]
        elif not sources.get("stop_token", "").startswith("flag "):
            raise OptionError(f"{named('stop_token')} {opts.stop_token!r} encodes to {len(enc)} tokens {enc} "
                              f"with tokenizer {tokenizer.path or '(in memory)'}", "a stop token that is one token",
                              "pass --stop-token with this tokenizer's end-of-turn token, or --stop-token ''")
    eos_ids = {*tokenizer.eos_ids, *model_eos, *([opts.eos_id] if opts.eos_id not in (None, -1) else [])}
    ends = eos_ids | ({stop_token_id} if stop_token_id is not None else set())
    vocab = tokenizer.vocab_size
    bos = opts.bos_id
    if type(bos) is int and 0 <= bos < vocab and bos in ends:
        role = "EOS" if bos in eos_ids else "end-of-turn"
        own = tokenizer.config_token("bos_token")
        hint = f" (this tokenizer's BOS is {own!r}, id {tokenizer.token_to_id(own)})" if own and \
            tokenizer.token_to_id(own) not in ends else ""
        raise OptionError(f"{named('bos_id')} {bos} names {tok(bos)}, the {role} token of tokenizer "
                          f"{tokenizer.path or '(in memory)'}", f"a BOS token{hint}, or -1 for none",
                          "pass --bos-id -1, or the tokenizer's BOS id")
    if allow_text_stops:
        return
    added = tokenizer.added_ids
    for f, ids in (("stop_ids", opts.stop_ids), ("eos_id", () if opts.eos_id is None else (opts.eos_id,))):
        for i in ids:
            if type(i) is int and 0 <= i < vocab and i not in added:
                eos = sorted(e for e in eos_ids if e in added)
                raise OptionError(f"{named(f)} {i} names {tok(i)}, an ordinary text token of tokenizer "
                                  f"{tokenizer.path or '(in memory)'} (not one of its added tokens)",
                                  "stop ids that are control tokens (EOS, end of turn)"
                                  + (f"; this tokenizer's EOS: {', '.join(f'{e} {tok(e)}' for e in eos)}" if eos else ""),
                                  f"drop {i} from {FLAGS[f]}, or pass --allow-text-stops to stop on that text")
