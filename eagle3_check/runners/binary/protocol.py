"""The seed runner's command line and output format, as bytes (`--runner exec:...`).

Command line: `exec:PATH [ARGS]`. Each ARG may hold placeholders ({model_path},
{tokenizer_path}, {prompt}, {max_new_tokens}, {bos_id}, {eos_id}, {chain}, {chat_prefix},
{chat_suffix}, {stop_ids}, {stop_token}, {raw_prompt}, {data_path}); without any, the seed's own
flags are appended (`--model_path=... --tokenizer_path=... --prompt=... --max_new_tokens=...
--bos_id=... --eos_id=... --chat_prefix=... --chat_suffix=... --stop_ids=...
--stop_token=... --raw_prompt=...`, `--chain=K` only when K is asked for: the runner-PR
binary has no `--chain` flag, and `--data_path=FILE.ptd` only when the program has an external
data file, as the seed's main.cpp takes it). A template given a `.ptd` must place {data_path}
(else the binary would load the program without its weights): refused with one line
(`ExecCommand.check_data`); {data_path} without a `.ptd` is empty.

Stdout (the seed's main.cpp), parsed exactly; anything else is an `OutputError`:

    Prompt tokens: L, chain K=k, max_new=m\\n
    <each emitted token's bytes, no separator>\\n
    [timing] verify=Xms draft=Yms over R rounds (a / b ms per round)\\n
    \\n--- EAGLE-3 speculative decode ---\\n
    generated N tokens in R rounds (tau=T)\\n          N counts the bonus and a stop token
    decode: x tok/s (s s)\\n                           absent when no time passed
    PyTorchObserver {json}\\n

Stderr is kept whole; one optional protocol line `[ids] a,b,c` (every emitted id, the bonus
first) lets the harness judge by ids instead of bytes.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from eagle3_check.errors import InputError
from eagle3_check.runners.options import RunOptions

PLACEHOLDERS = ("model_path", "tokenizer_path", "prompt", "max_new_tokens", "bos_id", "eos_id", "chain",
                "chat_prefix", "chat_suffix", "stop_ids", "stop_token", "raw_prompt", "data_path")
_OPTIONAL = ("chain", "raw_prompt", "data_path")  # the seed's flags appended apart (see `request`)
_HEADER = re.compile(rb"Prompt tokens: (\d+), chain K=(\d+), max_new=(-?\d+)\n")
_TIMING = re.compile(rb"\n\[timing\] verify=(\d+)ms draft=(\d+)ms over (\d+) rounds "
                     rb"\((\d+\.\d) / (\d+\.\d) ms per round\)\n\n--- EAGLE-3 speculative decode ---\n")
_SUMMARY = re.compile(rb"generated (\d+) tokens in (\d+) rounds \(tau=(\d+\.\d{3})\)\n")
_TAIL = (re.compile(rb"decode: \d+\.\d{2} tok/s \(\d+\.\d{3} s\)"), re.compile(rb"PyTorchObserver \{.*\}"))
_IDS = re.compile(r"\[ids\] (\d+(?:,\d+)*)?")


class OutputError(Exception):
    """The binary's output does not follow the protocol (the message says where)."""


@dataclass
class ExecOutput:
    prompt_len: int  # L from the header
    k: int
    max_new: int
    text: bytes  # the emitted tokens' bytes
    rounds: int
    tokens: int  # N from the summary
    tau: float  # as printed (3 decimals)
    verify_ms: int
    draft_ms: int
    ids: list[int] | None = None  # from the stderr protocol line, when printed
    notes: list[str] = field(default_factory=list)


def parse_output(stdout: bytes, stderr: bytes) -> ExecOutput:
    """Parses one successful run; raises OutputError naming the first thing that is off."""
    head = _HEADER.match(stdout)
    if not head:
        first = stdout.split(b"\n", 1)[0][:80]
        raise OutputError(f"stdout starts with {first!r}, not 'Prompt tokens: L, chain K=k, max_new=m'")
    cut = stdout.rfind(b"\n[timing] ")
    if cut < head.end():
        raise OutputError("no '[timing] ... over R rounds' line after the tokens")
    text = stdout[head.end():cut]
    timing = _TIMING.match(stdout, cut)
    if not timing:
        line = stdout[cut + 1:].split(b"\n", 1)[0][:100]
        raise OutputError(f"timing block {line!r} is not '[timing] verify=Xms draft=Yms over R rounds (a / b ms "
                          "per round)' followed by '--- EAGLE-3 speculative decode ---'")
    summary = _SUMMARY.match(stdout, timing.end())
    if not summary:
        line = stdout[timing.end():].split(b"\n", 1)[0][:100]
        raise OutputError(f"summary line {line!r} is not 'generated N tokens in R rounds (tau=T)'")
    for line in stdout[summary.end():].split(b"\n"):
        if line and not any(p.fullmatch(line) for p in _TAIL):
            raise OutputError(f"unexpected stdout line after the summary: {line[:100]!r}")
    if int(timing.group(3)) != int(summary.group(2)):
        raise OutputError(f"[timing] says {int(timing.group(3))} rounds, the summary {int(summary.group(2))}")
    L, k, max_new = (int(g) for g in head.groups())
    return ExecOutput(L, k, max_new, text, int(summary.group(2)), int(summary.group(1)),
                      float(summary.group(3)), int(timing.group(1)), int(timing.group(2)), ids=parse_ids(stderr))


def parse_ids(stderr: bytes) -> list[int] | None:
    """The `[ids] a,b,c` protocol line of stderr (None when absent); two such lines is an error."""
    found = [line for line in stderr.decode("utf-8", "replace").splitlines() if line.startswith("[ids]")]
    if not found:
        return None
    if len(found) > 1:
        raise OutputError(f"stderr has {len(found)} '[ids]' lines; the protocol allows one")
    m = _IDS.fullmatch(found[0].rstrip())
    if not m:
        raise OutputError(f"stderr line {found[0][:100]!r} is not '[ids] a,b,c' (comma-separated ids)")
    return [int(x) for x in m.group(1).split(",")] if m.group(1) else []


@dataclass(frozen=True)
class ExecCommand:
    """`exec:PATH [ARGS]` split into argv; formats one request's command line."""

    argv: tuple[str, ...]

    @classmethod
    def parse(cls, spec: str, flag: str = "--runner") -> ExecCommand:
        """`flag` is the option that gave `spec`, named in its errors."""
        tail = spec[len("exec:"):] if spec.startswith("exec:") else spec
        try:
            argv = tuple(shlex.split(tail))
        except ValueError as e:
            raise InputError(f"{flag} {spec!r} ({e})", "exec:PATH [ARGS] with balanced quotes",
                             f"quote the command line once, e.g. {flag} 'exec:./runner --flag x'") from None
        if not argv:
            raise InputError(f"{flag} {spec!r}", "exec:PATH (a runner binary)", f"e.g. {flag} exec:./eagle3_runner")
        for arg in argv:
            for name in re.findall(r"\{(\w*)\}", arg):
                if name not in PLACEHOLDERS:
                    raise InputError(f"{flag} {spec!r}: placeholder {{{name}}}", f"one of {PLACEHOLDERS}",
                                     "fix the placeholder name, or drop the placeholders to get the seed's flags")
        return cls(argv)

    @property
    def templated(self) -> bool:
        return any("{" in a for a in self.argv[1:])

    def check_data(self, data_path: str | None, flag: str = "--data-path") -> None:
        """A template that has no {data_path} cannot pass the program's `.ptd` (given by `flag`): refused."""
        if data_path and self.templated and not any("{data_path}" in a for a in self.argv[1:]):
            raise InputError(f"{flag} {data_path} with the runner template {shlex.join(self.argv)!r}, which has "
                             "no {data_path} placeholder", "a runner command that passes the program's data file",
                             "add e.g. --data_path={data_path} to the template (the seed's flag), or drop the "
                             "placeholders to get the seed's flags")

    def request(self, model: str, tokenizer: str, prompt: str, options: RunOptions,
                data_path: str | None = None) -> list[str]:
        """argv for one request (prompt is text; the binary encodes it itself); `data_path`: the
        program's external data file (.ptd), None when its weights are inside the .pte."""
        self.check_data(data_path)
        values = {
            "model_path": model, "tokenizer_path": tokenizer, "prompt": prompt,
            "max_new_tokens": str(options.max_new_tokens), "bos_id": str(options.bos_id),
            "eos_id": str(options.eos_id if options.eos_id is not None else -1),
            "chain": "" if options.chain_len is None else str(options.chain_len),
            "chat_prefix": options.chat_prefix, "chat_suffix": options.chat_suffix,
            "stop_ids": ",".join(str(i) for i in options.stop_ids), "stop_token": options.stop_token or "",
            "raw_prompt": "true" if options.raw else "false", "data_path": data_path or "",
        }
        if self.templated:
            return [self.argv[0], *(re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], a) for a in self.argv[1:])]
        flags = [f"--{name}={values[name]}" for name in PLACEHOLDERS if name not in _OPTIONAL]
        flags.append(f"--raw_prompt={values['raw_prompt']}")
        if options.chain_len is not None:
            flags.append(f"--chain={options.chain_len}")
        if data_path:
            flags.append(f"--data_path={data_path}")
        return [*self.argv, *flags]
