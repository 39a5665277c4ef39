"""The repro of a shrunk failing request: one command line that replays it and a small JSON file.

`repro_data` is what a file holds (format `eagle3-check-repro/1`): the program (the flags that
build it, the sha256 of its files and one digest over them), the runner, the run options, the
shrunk request (prompt ids, max new tokens, K, spec fields), the rule it breaks, the expected
and the emitted tokens, and the original request beside it. `repro_command` is the `check`
line that reproduces the verdict (`check --prompt-ids ... -k K --max-new-tokens N` with the
program's and runner's flags); `run` takes the same `--prompt-ids` / `--repro` to print the tokens.
Files are written atomically beside the report (`repro_path`: `repro-<prompt id>.json`).

Replaying (`--repro FILE`): `replay_args` sets the request's flags on the parsed arguments, and
`check_digest` refuses a program whose files differ from the recorded ones (one line, both digests).

Example line: eagle3-check check --fixture tiny-llama --max-seq-len 48 --runner
eagle3_check.mutants:reseed_before_room_check --raw --prompt-ids 2,10,11,12 -k 4 --max-new-tokens 42
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shlex
from pathlib import Path

from eagle3_check.atomic import write_text_atomic
from eagle3_check.errors import InputError
from eagle3_check.report.provenance import file_record
from eagle3_check.shrink.search import ShrinkResult

FORMAT = "eagle3-check-repro/1"
FLAG_OF = {"max_seq_len": "--max-seq-len", "min_prefill": "--min-prefill", "max_prefill": "--max-prefill"}
PROGRAM_FLAGS = ("fixture", "pte", "data_path", "target", "draft", "tokenizer", "device", "dtype",
                 "max_seq_len", "min_prefill", "max_prefill", "quantize", "group_size")  # the options that build it
RUN_FLAGS = ("reference", "chat_prefix", "chat_suffix", "stop_ids", "stop_token", "bos_id", "eos_id")
SWITCHES = ("raw", "chunked_prefill", "allow_text_stops", "quantize_draft")
DEFAULTS = {"device": "cpu", "dtype": "float32", "reference": "hf"}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def program_flags(options: dict, spec: dict | None = None) -> list[str]:
    """The flags of the parsed `options` (vars(args)) that rebuild the program and the request's
    stop set, defaults left out; `spec` fields (a shrunk max_seq_len, ...) replace their flags."""
    options = {**options, **(spec or {})}
    out: list[str] = []
    for name in (*PROGRAM_FLAGS, *RUN_FLAGS):
        value = options.get(name)
        if value is not None and value != DEFAULTS.get(name) and not isinstance(value, bool):
            out += [_flag(name), str(value)]
    return out + [_flag(s) for s in SWITCHES if options.get(s)]


def program_record(files: dict[str, str | Path | None]) -> dict:
    """{"files": {name: {"path", "sha256"}}, "sha256": one digest over them} of the program's inputs."""
    recs = {name: file_record(p) for name, p in sorted(files.items()) if p}
    h = hashlib.sha256("".join(f"{n}:{r.get('sha256', 'missing')}\n" for n, r in recs.items()).encode())
    return {"files": recs, "sha256": h.hexdigest()}


def one_line(words: list[str]) -> str:
    """`shlex.join`, except that a word holding a newline, a tab or another control character is
    written in bash's ANSI-C quoting (`$'a\\nb'`), so the command stays on one line and pastes back
    into bash as the same words: ['--prompt', 'a\\nb'] -> `--prompt $'a\\nb'`."""
    def quote(word: str) -> str:
        if word.isprintable():
            return shlex.quote(word)
        body = "".join({"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c)
                       or (c if c.isprintable() else f"\\U{ord(c):08x}") for c in word)
        return f"$'{body}'"
    return " ".join(quote(w) for w in words)


_ANSI_C = re.compile(r"(?:^|(?<= ))\$'((?:[^'\\]|\\.)*)'")  # at a word's start: one_line's words only


def split_line(line: str) -> list[str]:
    """The words of a `one_line` command, as bash reads them (shlex.split, plus $'...' words)."""
    found: list[str] = []

    def hold(m: re.Match) -> str:
        found.append(m.group(1).encode("latin-1", "backslashreplace").decode("unicode_escape"))
        return f"\0{len(found) - 1}\0"

    held = _ANSI_C.sub(hold, line)
    return [re.sub(r"\0(\d+)\0", lambda m: found[int(m.group(1))], w) for w in shlex.split(held)]


def repro_command(flags: list[str], runner: str | None, result: ShrinkResult) -> str:
    """The `check` line that replays the shrunk request of `result` (the runner named unless the default)."""
    req = result.shrunk
    spec = [x for name, v in req.spec for x in (FLAG_OF[name], str(v)) if name in FLAG_OF]
    drop = {FLAG_OF[name] for name, _ in req.spec if name in FLAG_OF}
    kept = [x for i, x in enumerate(flags) if x not in drop and (i == 0 or flags[i - 1] not in drop)]
    words = ["eagle3-check", "check", *kept, *spec]
    if runner and runner not in ("reference", "device"):
        words += ["--runner", runner]
    prompt = ["--prompt", result.prompt_text] if result.prompt_text is not None else \
        ["--prompt-ids", ",".join(map(str, req.prompt_ids))]
    words += [*prompt, "-k", str(req.k), "--max-new-tokens", str(req.max_new_tokens)]
    return one_line(words)


def repro_data(result: ShrinkResult, prompt_id: str, program: dict, runner: str, options, command: str) -> dict:
    """The repro file's content (`options`: the RunOptions of the check, before the request's fields)."""
    req, f = result.shrunk, result.failure
    opts = {**dataclasses.asdict(options), "max_new_tokens": req.max_new_tokens, "chain_len": req.k}
    opts["stop_ids"] = list(opts["stop_ids"])
    return {"format": FORMAT, "prompt_id": prompt_id, "program": program, "runner": runner, "options": opts,
            "request": req.to_json(), "prompt_text": result.prompt_text, "rule": f.kind, "message": f.message, "index": f.index,
            "expected": f.expected, "got": f.got, "original": result.original.to_json(),
            "original_message": result.original_failure.message, "command": command,
            "kept": list(result.kept)}


def repro_path(directory: str | Path, prompt_id: str) -> Path:
    """`<directory>/repro-<prompt id>.json`, the id's characters outside [A-Za-z0-9._-] as '_'."""
    return Path(directory) / f"repro-{re.sub(r'[^A-Za-z0-9._-]', '_', prompt_id)}.json"


def write_repro(path: str | Path, data: dict) -> Path:
    import json

    return write_text_atomic(path, json.dumps(data, indent=2) + "\n", "repro file")


def load_repro(path: str | Path):
    """The repro file as a schema.ReproModel (one-line errors for a bad file)."""
    from eagle3_check.schema import ReproModel, load

    return load(ReproModel, path, "repro file", "pass a repro file written by check --shrink or gate")


INT_OPTIONS = ("max_seq_len", "min_prefill", "max_prefill", "bos_id", "eos_id", "group_size")


def _bad(what: str, expected: str):
    return InputError(f"the repro file's {what}"[:300], expected,
                      "pass a repro file written by check --shrink or gate (a repro is data: it names no output)")


def flag_values(flags) -> dict:
    """`program_flags`' list back to parsed option values: ['--max-seq-len', '48', '--raw'] ->
    {'max_seq_len': 48, 'raw': True}. A repro is data (issue 47): only the flags that build the program
    and its stop set (PROGRAM_FLAGS, RUN_FLAGS, SWITCHES), each a one-line string; an int option's value
    an int. Anything else (an output such as --junit, a --runner, a dict, a missing value) is an InputError."""
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise _bad(f"program.flags {flags!r:.80}", "a list of strings")
    out, i = {}, 0
    while i < len(flags):
        name = flags[i].removeprefix("--").replace("-", "_")
        if not flags[i].startswith("--") or name not in (*PROGRAM_FLAGS, *RUN_FLAGS, *SWITCHES):
            known = ", ".join(_flag(n) for n in PROGRAM_FLAGS + RUN_FLAGS)
            raise _bad(f"program.flags {flags[i]!r:.60}", f"only the flags that build the program: {known}")
        if name in SWITCHES:
            out[name], i = True, i + 1
            continue
        if i + 1 >= len(flags) or not flags[i + 1].isprintable():
            raise _bad(f"program.flags {flags[i]} value", "a value on one line after each flag")
        value = flags[i + 1]
        if name in INT_OPTIONS:
            try:
                value = int(value)
            except ValueError:
                raise _bad(f"program.flags {flags[i]} {value!r:.40}", "an int") from None
        out[name], i = value, i + 2
    return out


OWN_RUNNERS = ("reference", "device")


def replay_runner(recorded: str, given: str | None) -> tuple[str | None, str | None]:
    """(the runner to use, None: the command line's or the default; a note for the user). A repro never
    imports a module or runs a command the command line did not name: its runner is used only when it
    is ours (reference, device, a seeded mutant, e.g. `eagle3_check.mutants:emit_past_max_new`); otherwise
    the note says which runner it was recorded with and how to replay it with that one."""
    if not isinstance(recorded, str) or not recorded.isprintable() or len(recorded) > 300:
        raise _bad(f"runner {recorded!r:.60}", "a runner spec on one line")
    ours = recorded in OWN_RUNNERS or re.fullmatch(r"eagle3_check\.mutants:[A-Za-z_][A-Za-z0-9_]*", recorded)
    if given is not None:
        note = None if given == recorded else \
            f"note: the repro was recorded with --runner {recorded}; this run uses --runner {given}"
        return None, note
    if ours:
        return recorded, None
    return None, (f"note: the repro was recorded with --runner {shlex.quote(recorded)}, which it does not run "
                  f"(a repro is data); this run uses the default runner. Fix: pass --runner "
                  f"{shlex.quote(recorded)} to replay it with that runner")


def replay_args(args, repro) -> None:
    """Sets the repro's request on the parsed `args` (an argparse namespace): prompt ids, K, max new
    tokens, the spec fields it shrank, and the program's and run's flags the command line left unset
    (a flag given on the command line wins; `check_digest` then tells a different program)."""
    for name, value in flag_values(repro.program.get("flags", [])).items():
        if hasattr(args, name) and getattr(args, name) in (None, False, DEFAULTS.get(name)):
            setattr(args, name, value)
    req = repro.request
    if repro.prompt_text is not None:  # a text prompt: the runner gets the text, as in the shrunk run
        args.prompt = repro.prompt_text
    else:
        args.prompt_ids = ",".join(map(str, req.prompt_ids))
    args.chain_len, args.max_new_tokens = req.k, req.max_new_tokens
    for name, value in req.spec.items():
        if name not in FLAG_OF:  # the program fields a shrinker shrinks, nothing else
            raise _bad(f"request.spec field {name!r:.40}", f"one of {', '.join(FLAG_OF)}")
        setattr(args, name, value)


def check_digest(repro, files: dict[str, str | Path | None], where: str) -> None:
    """The program the flags build must be the one the repro was shrunk on."""
    want = repro.program.get("sha256")
    got = program_record(files)["sha256"]
    if want and got != want:
        raise InputError(f"{where}: the program's files hash to {got[:12]}, the repro was recorded on {want[:12]}",
                         "the program the repro file names (its program.files)",
                         f"pass the flags of its command: {repro.command}")
