"""The fault probes of issue 30: a plug-in runner (or binary) that tries to change the verdict,
silence the report, corrupt `--json`, crash the harness or outlive the check. Each probe asserts
the verdict of every request, the exit code, and the report on disk (`--junit`).

A plug-in runs in its own process (eagle3_check/runners/isolate): what it patches, prints, exits with or
leaves running stays there. The plug-ins are written into tmp_path; each check runs two short
requests on the embedded fixture.
"""

from __future__ import annotations

import json
import os
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from eagle3_check.cli import main

HEADER = """
import os, sys, signal, threading, time, dataclasses, atexit
import torch
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.result import RunResult

class Wrong(ReferenceRunner):
    \"\"\"The reference runner with its last token changed: a run every verdict must fail.\"\"\"
    def run(self, program, tokenizer, prompt, options):
        run = super().run(program, tokenizer, prompt, options)
        run.tokens[-1] = (run.tokens[-1] + 1) % 100
        run.text = tokenizer.decode(run.tokens)
        return run
"""

PROBES = {
    # what the plug-in does -> (its code, the factory, the start of every request's verdict message)
    "patches-the-reference-and-verdict": ("""
import eagle3_check.judge.hf as hf, eagle3_check.jobs.check.prompt_set as gc, eagle3_check.judge.verdict as vd
from eagle3_check.judge.verdict import Verdict
def _pass(run, *a, **k):
    return Verdict("pass", "patched", judged=len(run.tokens), identical=len(run.tokens))
gc.judge = vd.judge = _pass
gc.audit_run = gc.audit_calls = lambda *a, **k: None
gc.result_problems = lambda *a, **k: []
def make(): return Wrong()
""", "make", ""),
    "os-exit-0-in-run": ("""
class R(ReferenceRunner):
    def run(self, *a): os._exit(0)
""", "R", "crashed: the runner's process ended during request"),
    "sys-exit-0-at-import": ("sys.exit(0)\nclass R(ReferenceRunner): pass\n", "R", "not run: crashed"),
    "sys-exit-0-in-the-factory": ("def make(): sys.exit(0)\n", "make", "not run: crashed: the runner called sys.exit(0)"),
    "atexit-os-exit-0": ("atexit.register(lambda: os._exit(0))\ndef make(): return Wrong()\n", "make", ""),
    "writes-fd-1": ("""
class R(Wrong):
    def run(self, *a):
        os.write(1, b'{"passed": true, "counts": {}}\\n')
        sys.__stdout__.write('{"passed": true}\\n'); sys.__stdout__.flush()
        return super().run(*a)
""", "R", ""),
    "result-subclass-shows-other-tokens": ("""
@dataclasses.dataclass
class Two(RunResult):
    def to_json(self):
        return {**dataclasses.asdict(self), "tokens": self.shown}
class R(ReferenceRunner):
    def run(self, program, tokenizer, prompt, options):
        good = super().run(program, tokenizer, prompt, options)
        bad = Two(**{**dataclasses.asdict(good), "tokens": good.tokens[:-1] + [(good.tokens[-1] + 1) % 100]})
        bad.shown = good.tokens
        bad.text = tokenizer.decode(bad.tokens)
        return bad
""", "R", ""),
    "thread-keeps-calling-the-program": ("""
class R(ReferenceRunner):
    def run(self, program, tokenizer, prompt, options):
        run = super().run(program, tokenizer, prompt, options)
        def hammer():
            while True:
                program.prefill(torch.tensor([run.prompt_ids]), torch.arange(len(run.prompt_ids)))
        threading.Thread(target=hammer, daemon=True).start()
        return run
""", "R", "contract violated: the runner left 1 thread(s) running"),
    "keyboard-interrupt": ("""
class R(ReferenceRunner):
    def run(self, *a): raise KeyboardInterrupt
""", "R", "crashed: the runner raised KeyboardInterrupt"),
    "sigkill-itself": ("""
class R(ReferenceRunner):
    def run(self, *a): os.kill(os.getpid(), signal.SIGKILL)
""", "R", "crashed: the runner's process ended during request"),
    "abort": ("""
class R(ReferenceRunner):
    def run(self, *a): os.abort()
""", "R", "crashed: the runner's process ended during request"),
    "float-tokens": ("""
class R(ReferenceRunner):
    def run(self, *a):
        run = super().run(*a)
        run.tokens = [float(t) for t in run.tokens]
        return run
""", "R", "contract violated: RunResult.tokens[0] is float"),
    "token-outside-the-vocabulary": ("""
class R(ReferenceRunner):
    def run(self, *a):
        run = super().run(*a)
        run.tokens[-1] = 10**9
        return run
""", "R", "contract violated: RunResult.tokens"),
    "hangs": ("""
class R(ReferenceRunner):
    def run(self, *a):
        time.sleep(1000)
""", "R", "timeout: request"),
}


def _check(tmp_path, monkeypatch, capsys, code: str, factory: str, *extra: str):
    name = f"probe_{abs(hash(code)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(HEADER + code)
    monkeypatch.syspath_prepend(str(tmp_path))
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}, {"id": "count", "text": "One two"}]}))
    junit = tmp_path / "out" / "check.xml"
    junit.parent.mkdir(exist_ok=True)
    t0 = time.monotonic()
    rc = main(["check", "--fixture", "tiny-llama", "--runner", f"{name}:{factory}", "--prompts", str(prompts), "--max-new-tokens", "8",
               "--json", "--junit", str(junit), "--no-progress", *extra])
    seconds = time.monotonic() - t0
    out = capsys.readouterr()
    report = json.loads(out.out)  # stdout is exactly one JSON document
    cases = ET.parse(junit).getroot().iter("testcase")
    return rc, report, list(cases), out.err, seconds


@pytest.mark.parametrize("probe", list(PROBES), ids=list(PROBES))
def test_a_hostile_plugin_fails_every_request_with_the_report_written(probe, tmp_path, monkeypatch, capsys):
    code, factory, reason = PROBES[probe]
    extra = ("--request-timeout", "3") if probe == "hangs" else ()
    rc, report, cases, err, seconds = _check(tmp_path, monkeypatch, capsys, code, factory, *extra)
    assert rc == 1 and report["passed"] is False, report["counts"]
    assert "Traceback" not in err
    assert [r["verdict"]["status"] for r in report["requests"]] == ["fail", "fail"]
    for r in report["requests"]:
        assert r["verdict"]["message"].startswith(reason), r["verdict"]["message"]
    assert len(cases) == 2 and all(c.find("failure") is not None for c in cases)  # the JUnit file on disk
    if probe == "hangs":  # the first request's process was ready before it: the limit holds within 2 s
        assert report["requests"][0]["seconds"] < 3 + 2, report["requests"][0]["seconds"]


def test_the_report_shows_the_tokens_the_verdict_judged(tmp_path, monkeypatch, capsys):
    rc, good, _, _, _ = _check(tmp_path, monkeypatch, capsys, "class R(ReferenceRunner): pass\n", "R")
    code, factory, _ = PROBES["result-subclass-shows-other-tokens"]
    rc, report, _, _, _ = _check(tmp_path, monkeypatch, capsys, code, factory)
    for r, g in zip(report["requests"], good["requests"]):
        want = g["run"]["tokens"][:-1] + [(g["run"]["tokens"][-1] + 1) % 100]
        assert r["run"]["tokens"] == want and r["verdict"]["status"] == "fail"  # the tokens judged, not the shown


def test_what_the_runner_writes_is_its_requests_record(tmp_path, monkeypatch, capsys):
    code = """
class R(ReferenceRunner):
    def run(self, program, tokenizer, prompt, options):
        os.write(1, b"fd1 " + prompt.encode() + b"\\n")
        os.write(2, b"x" * 300000)
        return super().run(program, tokenizer, prompt, options)
"""
    rc, report, _, _, _ = _check(tmp_path, monkeypatch, capsys, code, "R")
    assert rc == 0 and report["passed"], report["counts"]  # printing is harmless in its own process
    records = {r["request"]: r["output"] for r in report["info"]["isolation"]["output"]}
    hi = records["request 'hi'"]
    assert hi["head"].startswith("fd1 Hi\n") and hi["bytes"] == len("fd1 Hi\n") + 300000 and hi["truncated"]
    assert len(hi["head"]) + len(hi["tail"]) <= 32 * 1024  # bounded: head + tail
    assert records["request 'count'"]["head"].startswith("fd1 One two\n")


def test_a_plugin_that_cannot_be_imported_is_still_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(tmp_path))
    rc = main(["check", "--fixture", "tiny-llama", "--runner", "no_such_module_here:make", "--max-new-tokens", "4", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "no_such_module_here" in err and "Traceback" not in err


def test_a_fresh_process_answers_the_requests_after_a_crash(tmp_path, monkeypatch, capsys):
    code = """
class R(ReferenceRunner):
    def run(self, program, tokenizer, prompt, options):
        if prompt == "Hi":
            os._exit(3)
        return super().run(program, tokenizer, prompt, options)
"""
    rc, report, _, _, _ = _check(tmp_path, monkeypatch, capsys, code, "R")
    first, second = report["requests"]
    assert rc == 1 and first["verdict"]["status"] == "fail" and "exit status 3" in first["verdict"]["message"]
    assert second["verdict"]["status"] == "pass", second["verdict"]["message"]
    assert report["info"]["isolation"]["processes"] == 2


# --- runner binaries: the whole process tree of a request ends with it (runners/proc.py) -------------------

# Each child records its pid atomically (tmp + mv) and the binary waits for the record before it
# exits or hangs: the request cannot end (and kill the child) before the child runs (a clean-clone run
# once read an empty pid file: the child was killed between open and write). The binary runs in a PID
# namespace of its own (runners/isolate/binary_sandbox.py), where that pid is not ours: the test finds the
# child by its `sleep`, unique to the test, and the pid file sits where the binary's account may write.
BINARIES = {
    # a child that double-forks into its own session, holding stdout, then the binary exits
    "setsid-orphan-then-exit": "( setsid sh -c 'echo $$ > \"$PIDFILE.tmp\" && mv \"$PIDFILE.tmp\" \"$PIDFILE\"; exec sleep $SLEEP' & )\nwhile [ ! -e \"$PIDFILE\" ]; do sleep 0.01; done\necho hello\nexit 0\n",
    # the same child, and the binary itself hangs past the timeout
    "setsid-orphan-then-hang": "( setsid sh -c 'echo $$ > \"$PIDFILE.tmp\" && mv \"$PIDFILE.tmp\" \"$PIDFILE\"; exec sleep $SLEEP' & )\nwhile [ ! -e \"$PIDFILE\" ]; do sleep 0.01; done\nexec sleep 1000\n",
    # a child with stdio closed, in the binary's process group
    "closed-stdio-child": "sh -c 'echo $$ > \"$PIDFILE.tmp\" && mv \"$PIDFILE.tmp\" \"$PIDFILE\"; exec sleep $SLEEP' </dev/null >/dev/null 2>&1 &\nwhile [ ! -e \"$PIDFILE\" ]; do sleep 0.01; done\nexit 0\n",
}


def _sleepers(marker: str) -> list[int]:
    """The live processes (zombies are dead, not yet reaped) whose command line holds `marker`."""
    out = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat") as f:
                zombie = f.read().split(") ")[1][0] == "Z"
            if not zombie and marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                out.append(int(name))
        except (OSError, IndexError):
            pass
    return out


@pytest.mark.parametrize("binary", list(BINARIES), ids=list(BINARIES))
def test_a_binarys_children_end_with_its_request(binary, runner_writable, monkeypatch):
    from eagle3_check.runners.binary.runner import ExecRunner
    from eagle3_check.runners.options import RunOptions

    script = runner_writable / "runner.sh"
    script.write_text("#!/bin/sh\n" + BINARIES[binary])
    script.chmod(0o755)
    pidfile, sleep = runner_writable / "child.pid", f"1000.{runner_writable.stat().st_ino}"
    monkeypatch.setenv("PIDFILE", str(pidfile))
    monkeypatch.setenv("SLEEP", sleep)
    runner = ExecRunner(f"exec:{script}", timeout=3.0)
    t0 = time.monotonic()
    got = runner.execute("m.pte", "tok.json", "Hi", RunOptions(max_new_tokens=4))
    seconds = time.monotonic() - t0
    hangs = binary.endswith("hang")
    assert seconds < (3.0 + 2.0 if hangs else 2.0), seconds  # --request-timeout S holds within S + 2 s
    assert got.timed_out == hangs and (hangs or got.returncode == 0)
    deadline = time.monotonic() + 2
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pidfile.read_text().strip()  # the child ran
    assert _sleepers(sleep) == [], "the binary's child outlived its request"


def test_a_binarys_output_is_read_bounded(tmp_path):
    from eagle3_check.runners.binary.runner import STDERR_KEPT_BYTES, ExecRunner
    from eagle3_check.runners.options import RunOptions

    script = tmp_path / "loud.sh"
    script.write_text("#!/bin/sh\nhead -c 20000000 /dev/zero | tr '\\0' x >&2\necho '[ids] 1,2' >&2\n")
    script.chmod(0o755)
    got = ExecRunner(f"exec:{script}", timeout=30.0).execute("m.pte", "tok.json", "Hi", RunOptions())
    assert got.returncode == 0
    assert len(got.stderr) < sum(STDERR_KEPT_BYTES) + 100  # head + tail + the marker, not 20 MB
    assert got.stderr.rstrip().endswith(b"[ids] 1,2") and b"bytes dropped" in got.stderr


def test_a_binarys_ids_outside_the_vocabulary_fail_that_request(program, tokenizer, fixture):
    from eagle3_check.jobs.check.binary import byte_pieces_or_none
    from eagle3_check.judge.binary import FAIL, Request, judge_observation
    from eagle3_check.runners.binary.runner import ProcessRun, observed
    from eagle3_check.runners.loop import ReferenceRunner
    from eagle3_check.runners.options import RunOptions

    run = ReferenceRunner().run(program, tokenizer, "Hi", RunOptions(max_new_tokens=4))
    pieces = byte_pieces_or_none(tokenizer)
    n, r = len(run.tokens), run.rounds
    stdout = (f"Prompt tokens: {len(run.prompt_ids)}, chain K={run.k}, max_new={run.max_new}\n".encode()
              + pieces.of(run.tokens) + f"\n[timing] verify=3ms draft=2ms over {r} rounds (0.5 / 0.3 ms per round)\n"
              .encode() + b"\n--- EAGLE-3 speculative decode ---\n"
              + f"generated {n} tokens in {r} rounds (tau={(n - 1) / r if r else 0:.3f})\n".encode())
    ids = [*run.tokens[:-1], 99999]
    proc = ProcessRun(["runner"], 0, stdout, ("[ids] " + ",".join(map(str, ids)) + "\n").encode(), 0.1)
    req = Request(len(run.prompt_ids), run.k, 4, 64, frozenset())
    verdict, _ = judge_observation(observed(proc, 10.0), run.tokens, [1.0] * n, pieces, req,
                                   vocab_size=tokenizer.vocab_size)
    assert verdict.status == FAIL and "[ids] id 99999 at index" in verdict.message, verdict.message
    assert "outside the vocabulary" in verdict.message


@pytest.mark.parametrize("mode", ["isolated", "in-process"])
def test_fd_1_writes_keep_suite_json_whole(mode, tmp_path, monkeypatch, capsys):
    """`check --suite` runs a plug-in in its own process: its writes to fd 1 are that case's record; with
    --in-process they are captured at fd 1 and fail the case. Either way stdout is one JSON document."""
    (tmp_path / "fd_writer.py").write_text(HEADER + """
class R(ReferenceRunner):
    def run(self, *a):
        os.write(1, b'{"passed": true}\\n')
        sys.__stdout__.write('{"passed": true}\\n')
        return super().run(*a)
""")
    monkeypatch.syspath_prepend(str(tmp_path))
    extra = ["--in-process"] if mode == "in-process" else []
    rc = main(["check", "--suite", "budget/full-end", "--fixture", "tiny-llama", "--runner", "fd_writer:R", "--json",
               "--no-progress", *extra])
    out = capsys.readouterr()
    report = json.loads(out.out)  # exactly one JSON document
    assert "Traceback" not in out.err
    text = json.dumps(report)
    if mode == "in-process":
        assert rc == 1 and "bytes to file descriptor 1" in text, text[:500]
    else:
        assert rc == 0 and report["passed"], text[:500]
        records = report["reports"][0]["info"]["isolation"]["output"]
        assert records and records[-1]["output"]["head"].startswith('{"passed": true}'), records
