"""Issue 30 item 5, the "partly" probes: each hardened, each a probe through the CLI asserting the
error line (the value, what was expected, the fix), the exit code, and the report on disk where one
is written. The runner-process probes are tests/runners/isolate/test_isolation_probes.py; the output paths checked
before torch is imported are tests/cli/test_preflight_no_torch.py; a binary's `[ids] 99999` end to end
is tests/pte/test_hardening_binary.py (it needs a `.pte`). docs/bad-input.md lists each line.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from eagle3_check.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "tiny-llama"
TOKENIZER = str(FIXTURE / "tokenizer.json")
GOLDEN = ROOT / "golden" / "tiny-llama__eager__cpu__float32__k4__n48.json"


def one_error_line(capsys, rc: int, *named: str) -> str:
    """The bad-input contract: exit 2, nothing on stdout, one `error: ...; expected ... Fix: ...` line."""
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err and cap.out == "", cap.out + cap.err
    lines = cap.err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, (rc, cap.err)
    assert lines[0].startswith("error: ") and "; expected " in lines[0] and ". Fix: " in lines[0], lines[0]
    for n in named:
        assert n in lines[0], lines[0]
    return lines[0]


def copy_pair(tmp_path: Path) -> tuple[Path, Path]:
    t, d = tmp_path / "target", tmp_path / "draft"
    shutil.copytree(FIXTURE / "target", t)
    shutil.copytree(FIXTURE / "draft", d)
    return t, d


def edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def pair_run(t: Path, d: Path) -> list[str]:
    return ["run", "--prompt", "Hi", "--max-new-tokens", "4", "--target", str(t), "--draft", str(d),
            "--tokenizer", TOKENIZER]


# --- an in-process plug-in: its own tokenizer, and threads it leaves running ---------------------------

PLUGINS = {
    # reports text its tokens do not decode to, and patches the tokenizer it was given to agree
    "patches-the-tokenizer": """
from eagle3_check.runners.loop import ReferenceRunner
class R(ReferenceRunner):
    def run(self, program, tokenizer, prompt, options):
        run = super().run(program, tokenizer, prompt, options)
        run.text = "WRONG TEXT"
        tokenizer.decode = lambda *a, **k: "WRONG TEXT"
        tokenizer._tok.add_tokens(["zzz-added-by-the-runner"])
        return run
""",
    # the first request leaves a thread printing while the second request runs
    "thread-prints-after-run": """
import threading, time
from eagle3_check.runners.loop import ReferenceRunner
class R(ReferenceRunner):
    calls = 0
    def run(self, program, tokenizer, prompt, options):
        run = super().run(program, tokenizer, prompt, options)
        R.calls += 1
        if R.calls == 1:
            def late():
                for _ in range(60):
                    print("late output of request 1")
                    time.sleep(0.05)
            threading.Thread(target=late, name="late-printer", daemon=True).start()
        else:
            time.sleep(1.0)  # the late thread prints while this request runs
        return run
""",
}


def in_process_check(tmp_path, monkeypatch, capsys, plugin: str):
    name = plugin.replace("-", "_")
    (tmp_path / f"{name}.py").write_text(PLUGINS[plugin])
    monkeypatch.syspath_prepend(str(tmp_path))
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}, {"id": "count", "text": "One two"}]}))
    junit = tmp_path / "check.xml"
    rc = main(["check", "--fixture", "tiny-llama", "--runner", f"{name}:R", "--in-process", "--prompts", str(prompts), "--max-new-tokens", "8",
               "--json", "--junit", str(junit), "--no-progress"])
    out = capsys.readouterr()
    report = json.loads(out.out)  # stdout is exactly one JSON document
    cases = {c.get("name"): c.find("failure") for c in ET.parse(junit).getroot().iter("testcase")}
    assert "Traceback" not in out.err and len(cases) == 2
    return rc, {r["prompt_id"]: r["verdict"] for r in report["requests"]}, cases


def test_a_runner_that_patches_its_tokenizer_cannot_change_the_harnesss_decode(tmp_path, monkeypatch, capsys):
    rc, verdicts, cases = in_process_check(tmp_path, monkeypatch, capsys, "patches-the-tokenizer")
    assert rc == 1
    for v in verdicts.values():  # the harness decodes with its own tokenizer: the text is caught
        assert v["status"] == "fail" and v["message"].startswith("text: the run reports 'WRONG TEXT'"), v
    assert all(f is not None for f in cases.values())


def test_the_runners_tokenizer_is_one_copy_per_runner(tokenizer):
    from eagle3_check.runners.crash import runner_tokenizer

    class R:
        pass

    a, b = R(), R()
    mine = runner_tokenizer(a, tokenizer)
    assert mine is not tokenizer and mine._tok is not tokenizer._tok  # its own HF tokenizer, not a view
    mine.eos_ids = ()  # a wrapper per request: what it sets on one does not reach the next
    again = runner_tokenizer(a, tokenizer)
    assert again is not mine and again._tok is mine._tok and again.eos_ids == tokenizer.eos_ids
    assert runner_tokenizer(a, tokenizer.with_eos((9,)))._tok is mine._tok  # EOS variants share the copy
    assert runner_tokenizer(b, tokenizer)._tok is not mine._tok  # another runner: its own
    mine._tok.add_tokens(["zzz-only-in-the-copy"])
    assert tokenizer.vocab_size < mine.vocab_size and mine.decode([5, 7]) == tokenizer.decode([5, 7])


def test_a_thread_printing_after_run_fails_its_own_request_not_the_next(tmp_path, monkeypatch, capsys):
    rc, verdicts, cases = in_process_check(tmp_path, monkeypatch, capsys, "thread-prints-after-run")
    assert rc == 1
    assert verdicts["hi"]["status"] == "fail", verdicts["hi"]
    assert verdicts["hi"]["message"].startswith("contract violated: the runner left 1 thread(s) running after "
                                                "run() returned (late-printer)")
    assert verdicts["count"]["status"] == "pass", verdicts["count"]  # its prints landed during this one
    assert cases["hi"] is not None and cases["count"] is None
    for t in threading.enumerate():
        if t.name == "late-printer":
            t.join(10)
    assert capsys.readouterr().out == ""  # what it printed after the check is dropped too: stdout is --json's


# --- golden verify: recorded margins that are ties ---------------------------------------------------

@pytest.mark.parametrize("margins", [
    pytest.param(lambda ms: [0.0] * len(ms), id="all-zero"),
    pytest.param(lambda ms: [*ms[:3], 0.00005, *ms[4:]], id="one-below-the-tie-bound"),
])
def test_golden_verify_refuses_a_golden_whose_margins_are_ties(tmp_path, capsys, margins):
    golden = tmp_path / GOLDEN.name  # the file name spells the key
    data = json.loads(GOLDEN.read_text())
    p = data["prompts"][1]
    p["margins"] = margins(p["margins"])
    p["min_margin"] = min(p["margins"])
    golden.write_text(json.dumps(data))
    t0 = time.monotonic()
    line = one_error_line(capsys, main(["golden", "verify", str(golden)]), f"golden file {golden}",
                          f"prompt '{p['prompt_id']}' (prompts[1])", "is a tie", "Fix: re-record it")
    assert time.monotonic() - t0 < 5, "refused when read, before any program is built"
    assert "PASS" not in line


def test_every_committed_golden_clears_its_tie_bound():
    from eagle3_check.jobs.golden.file import load_golden, recorded_tie

    for path in sorted((ROOT / "golden").glob("*.json")):
        assert recorded_tie(load_golden(path)) is None, path.name


# --- a target with an extra or a missing tensor, in a safetensors or a .bin checkpoint ----------------

@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
@pytest.mark.parametrize("change, named", [
    pytest.param("extra", "target tensor model.layers.0.self_attn.q_proj.bias", id="extra-tensor"),
    pytest.param("missing", "lack model.layers.1.mlp.up_proj.weight", id="missing-tensor"),
])
def test_a_target_whose_tensors_do_not_match_its_config_is_refused(tmp_path, capsys, change, named, fmt):
    t, d = copy_pair(tmp_path)
    w = load_file(str(t / "model.safetensors"))
    if change == "extra":
        w["model.layers.0.self_attn.q_proj.bias"] = torch.zeros(64)
    else:
        del w["model.layers.1.mlp.up_proj.weight"]
    (t / "model.safetensors").unlink()
    if fmt == "bin":
        torch.save(w, t / "pytorch_model.bin")
    else:
        save_file(w, str(t / "model.safetensors"), metadata={"format": "pt"})
    line = one_error_line(capsys, main(pair_run(t, d)), named, str(t))
    assert "Fix: " in line and "re-save the target" in line


# --- fp16 weights: loaded, the conversion stated in the table and the JSON ----------------------------

def test_fp16_weights_are_loaded_with_the_conversion_stated(tmp_path, capsys):
    t, d = copy_pair(tmp_path)
    for f in (t / "model.safetensors", d / "model.safetensors"):
        w = load_file(str(f))
        save_file({k: v.half() if v.is_floating_point() else v for k, v in w.items()}, str(f), metadata={"format": "pt"})
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}]}))
    argv = ["check", "--target", str(t), "--draft", str(d), "--tokenizer", TOKENIZER, "--prompts", str(prompts),
            "--max-new-tokens", "4", "--no-progress"]
    rc = main([*argv, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["passed"]
    conv = report["info"]["weight_conversion"]
    assert conv["target"]["stored"] == {"float16": 39} and conv["target"]["run"] == "float32"
    assert conv["draft"]["conversion"].startswith("draft stored float16 (14 tensors), run in float32: "
                                                  "float16 -> float32 exact")
    main(argv)
    table = capsys.readouterr().out
    assert "weights: target stored float16 (39 tensors), run in float32" in table


def test_weights_stored_as_they_run_state_no_conversion():
    from eagle3_check.program.weights import stored_dtypes, weight_info

    assert stored_dtypes(FIXTURE / "target") == {"float32": 39}
    assert weight_info(FIXTURE / "target", FIXTURE / "draft", "float32") is None
    assert "rounded" in weight_info(FIXTURE / "target", FIXTURE / "draft", "bfloat16")["summary"]


# --- absurd config dimensions: refused at once, before torch allocates ----------------------------------

@pytest.mark.parametrize("part, edit, named", [
    pytest.param("target", lambda c: c.update(hidden_size=1_000_000), "hidden_size = 1000000", id="target-hidden-1e6"),
    pytest.param("draft", lambda c: c["transformer_layer_config"].update(hidden_size=400_000), "hidden_size = 400000",
                 id="draft-hidden-4e5"),
    pytest.param("target", lambda c: c.update(vocab_size=10**9), "vocab_size = 1000000000", id="target-vocab-1e9"),
    pytest.param("target", lambda c: c.update(num_hidden_layers=100_000), "num_hidden_layers = 100000",
                 id="target-layers-1e5"),
])
def test_an_absurd_config_dimension_is_refused_before_anything_loads(tmp_path, capsys, part, edit, named):
    t, d = copy_pair(tmp_path)
    edit_json((t if part == "target" else d) / "config.json", edit)
    t0 = time.monotonic()
    rc = main(pair_run(t, d))
    seconds = time.monotonic() - t0
    one_error_line(capsys, rc, f"{part} config {tmp_path / part / 'config.json'}", named, "expected at most",
                   "Fix: correct")
    assert seconds < 1.0, seconds  # read as JSON where the Config is built: no model, no allocation


# --- a .pte sidecar without its digest ----------------------------------------------------------------

@pytest.mark.parametrize("sidecar, named", [
    pytest.param({"old": 1}, "has no pte_sha256 (found None)", id="no-digest"),
    pytest.param({"pte_sha256": "ab" * 32}, "has no pte_bytes (found None)", id="digest-without-size"),
])
def test_a_sidecar_without_its_digest_is_refused(tmp_path, capsys, sidecar, named):
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"\0\0\0\0ET12 a program")
    (tmp_path / "m.export.json").write_text(json.dumps(sidecar))
    line = one_error_line(capsys, main(["check", "--pte", str(pte)]), f"export sidecar {tmp_path / 'm.export.json'}",
                          named)
    assert "Fix: re-export m.pte with `eagle3-check export`" in line
