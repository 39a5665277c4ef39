"""A runner binary's requests recorded once, then replayed by a process that starts as a C++ one does.

    exec:python3 -S bench/replay_runner.py record DIR BINARY [ARGS]   # runs BINARY, keeps what it printed
    exec:python3 -S bench/replay_runner.py replay DIR                 # prints what BINARY printed

The gate through the fake seed runner (fixtures/fake_runners/fake_seed_runner, Python) pays ~1.8
CPU-seconds per request for Python, torch and executorch to start; the seed's C++ runner starts in
milliseconds. Replaying the recorded bytes (stdout, stderr, exit status) of each request, `--help`
included, gives the same verdicts at the cost of the harness alone: `bench/gate_speed.py`'s
`replay` route. A request is its flags, the program file by name only (a metadata case's copy
lives in a fresh temporary directory each run); one never recorded exits 1 with an `E [...]` line,
which the gate reports as that request's failure, so a replay that does not match shows.
Standard library only (no torch: `-S` keeps site-packages out of the start).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys


def key(flags: list[str]) -> str:
    """A request's name: its flags, the program and data files by file name only.
    Example: --model_path=/tmp/eagle3-exec-ab12/tiny-no-get_chain_len.pte -> --model_path=tiny-no-get_chain_len.pte."""
    named = []
    for f in flags:
        name, eq, value = f.partition("=")
        if eq and name in ("--model_path", "--data_path", "--tokenizer_path"):
            f = f"{name}={lent(value) if value.startswith('/proc/self/fd/') else os.path.basename(value)}"
        named.append(f)
    return hashlib.sha256(json.dumps(named).encode()).hexdigest()[:32]


def lent(path: str) -> str:
    """A file the harness lends by descriptor (/proc/self/fd/N: one its binary cannot reach by name,
    docs/isolation.md) named by its bytes: every such file has the same name."""
    with open(path, "rb") as f:
        return "sha256:" + hashlib.sha256(f.read()).hexdigest()[:16]


def record(directory: str, argv: list[str]) -> int:
    """Runs the binary (the words up to its first `--` flag), stores what it printed under the flags' key."""
    split = next((i for i, a in enumerate(argv) if a.startswith("--")), len(argv))
    binary, flags = argv[:split], argv[split:]
    # close_fds=False: an input the harness lends by descriptor (a file in a directory the binary cannot
    # reach: --model_path=/proc/self/fd/N, docs/isolation.md) must stay open for the binary, as it is for us
    p = subprocess.run(binary + flags, stdin=subprocess.DEVNULL, capture_output=True, close_fds=False)
    entry = {"flags": flags, "returncode": p.returncode, "stdout": base64.b64encode(p.stdout).decode(),
             "stderr": base64.b64encode(p.stderr).decode()}
    dst = os.path.join(directory, key(flags) + ".json")
    with open(dst + ".tmp", "w", encoding="utf-8") as f:
        json.dump(entry, f)
    os.replace(dst + ".tmp", dst)
    return emit(entry)


def emit(entry: dict) -> int:
    sys.stdout.buffer.write(base64.b64decode(entry["stdout"]))
    sys.stdout.flush()
    sys.stderr.buffer.write(base64.b64decode(entry["stderr"]))
    sys.stderr.flush()
    return entry["returncode"]


def replay(directory: str, flags: list[str]) -> int:
    path = os.path.join(directory, key(flags) + ".json")
    if not os.path.isfile(path):
        sys.stderr.write(f"E [replay_runner.py:0] no recorded request {key(flags)} for {' '.join(flags)[:300]}\n")
        return 1
    with open(path, encoding="utf-8") as f:
        return emit(json.load(f))


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("record", "replay"):
        sys.stderr.write("usage: replay_runner.py record DIR BINARY [ARGS] [FLAGS] | replay DIR [FLAGS]\n")
        return 2
    os.makedirs(argv[1], exist_ok=True)
    return record(argv[1], argv[2:]) if argv[0] == "record" else replay(argv[1], argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
