"""Issue 17's probe catalogue, part 3 (tests/test_hostile_files.py holds the files and the `COVERED`
table): resource bounds checked before anything allocates, remote code refused, a `.pte` that
aborts the runtime, stale sidecars, and the KV writes a runner swallowed. docs/reliability.md's
"Hostile input and resource bounds" section is the table.
"""

from __future__ import annotations

import ast
import io
import json
import sys
from pathlib import Path

import pytest
from test_hostile_files import (  # tests/ is on sys.path (pytest's prepend import mode)
    _copy_fixture,
    _set,
    clean_error,
)

from eagle3_check.cli import main
from eagle3_check.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "tiny-llama"


# --- resource bounds before allocation -------------------------------------------------------------

def test_the_memory_estimate_matches_the_worked_example_and_the_loaded_model():
    from eagle3_check.program.target import load_hf_target, target_text_config
    from eagle3_check.resources import LAYER_OVERHEAD, target_estimate

    cfg = target_text_config(FIXTURE / "target")
    est = target_estimate(cfg, 256, 4, "tiny-llama")
    assert est == {"target weights": 1050880 + 4 * LAYER_OVERHEAD, "target KV cache": 262144}  # resources.py
    model = load_hf_target(FIXTURE / "target")
    assert sum(p.numel() for p in model.parameters()) * 4 == 1050880  # the estimate is the real count


def test_a_config_with_1000_layers_is_refused_before_it_allocates(tmp_path, capsys):
    argv = _copy_fixture(tmp_path, _set("num_hidden_layers", 1000))  # ~0.25 GiB (100000 is past the dimension cap)
    line = clean_error(capsys, main([*argv, "--max-memory", "0.1"]), "the program (max_seq_len 256, float32) needs about")
    assert "0.10 GiB is the --max-memory budget" in line and "--max-memory GIB" in line


def test_a_draft_with_a_huge_hidden_size_is_refused_against_the_memory_available(tmp_path, capsys):
    def huge(cfg):
        layer = cfg["transformer_layer_config"]  # within the dimension caps: ~134 GiB of float32 weights
        layer["hidden_size"], layer["intermediate_size"] = 60_000, 200_000
        return cfg

    line = clean_error(capsys, main(_copy_fixture(tmp_path, draft_edit=huge)), "needs about")
    assert "available on this host" in line and "draft weights" in line


def test_max_seq_len_beyond_the_target_is_refused(tmp_path, capsys):
    clean_error(capsys, main(["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--max-seq-len", "100000000"]),
                "max_seq_len 100000000 (--max-seq-len); expected at most the target's max_position_embeddings 256")


@pytest.mark.parametrize("value", ["0", "-2"])
def test_max_memory_must_be_positive(value, capsys):
    clean_error(capsys, main(["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--max-memory", value]), f"--max-memory {value}")


# --- never run remote code -------------------------------------------------------------------------

@pytest.mark.parametrize("edit, named", [
    (_set("auto_map", {"AutoModelForCausalLM": "modeling_evil.Evil"}), "has auto_map: loading it would run Python"),
    (_set("text_config", {"auto_map": {"AutoConfig": "x.Y"}}), "has text_config.auto_map"),
    (_set("model_type", "evil-remote"), "model_type = 'evil-remote'"),
], ids=["auto-map", "nested-auto-map", "unknown-model-type"])
def test_a_target_that_needs_remote_code_is_refused_and_stdin_is_not_read(edit, named, tmp_path, capsys,
                                                                            monkeypatch):
    argv = _copy_fixture(tmp_path, edit)
    (tmp_path / "target" / "modeling_evil.py").write_text("raise SystemExit('remote code ran')\n")
    stdin = io.StringIO("y\ny\n")
    monkeypatch.setattr(sys, "stdin", stdin)
    clean_error(capsys, main(argv), named)
    assert stdin.tell() == 0  # nothing read the "y"
    assert sys.stdin is stdin  # main restores it


def _calls(name: str):
    for path in sorted((ROOT / "eagle3_check").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                fn = node.func
                called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
                if called == name:
                    yield f"{path.relative_to(ROOT)}:{node.lineno}", node


def test_every_from_pretrained_passes_trust_remote_code_false():
    calls = list(_calls("from_pretrained"))
    assert calls
    for where, node in calls:
        kw = {k.arg: k.value for k in node.keywords}
        value = kw.get("trust_remote_code")
        ok = (isinstance(value, ast.Constant) and value.value is False) or \
             (isinstance(value, ast.Name) and value.id == "TRUST_REMOTE_CODE")
        assert ok, f"{where}: from_pretrained without trust_remote_code=False"


def test_nothing_in_the_package_reads_stdin():
    assert not list(_calls("input")), "input() in the package"
    for path in sorted((ROOT / "eagle3_check").rglob("*.py")):
        text = path.read_text()
        assert "stdin.read" not in text and "stdin.readline" not in text, path


# --- gate: a .pte that aborts the runtime still gets a report and JUnit ----------------------------

def test_gate_writes_report_and_junit_when_the_pte_aborts_the_runtime(tmp_path, capsys, monkeypatch):
    """The child load dies by SIGABRT (as ExecuTorch 1.5.1 does on a corrupt method section,
    tests/pte/test_gate_abort.py does it for real): the gate's load row names it, the rest skip."""
    import xml.etree.ElementTree as ET

    from eagle3_check.program import pte_probe

    monkeypatch.setattr(pte_probe, "_CODE", "import os, sys\nsys.stderr.write('terminate called\\n')\nos.abort()\n")
    pte = tmp_path / "x.pte"
    pte.write_bytes(b"\0\0\0\0ET12" + b"\0" * 64)
    report, junit = tmp_path / "r.json", tmp_path / "j.xml"
    rc = main(["gate", "--pte", str(pte), "--report", str(report), "--junit", str(junit), "--all-k"])
    assert rc == 1, capsys.readouterr().err
    checks = {c["name"]: c for c in json.loads(report.read_text())["checks"]}
    assert checks["load"]["status"] == "fail"
    assert "ended the process while loading it (signal SIGABRT: terminate called)" in checks["load"]["message"]
    assert all(c["status"] == "skip" for n, c in checks.items() if n != "load")
    failures = [f.get("message") for f in ET.parse(junit).getroot().iter("failure")]
    assert any("SIGABRT" in (m or "") for m in failures)


@pytest.mark.parametrize("argv", [
    ["check", "--pte", "{pte}", "--max-new-tokens", "4"],
    ["run", "--pte", "{pte}", "--prompt", "hi"],
    ["golden", "record", "--pte", "{pte}", "--only", "capital", "--dir", "{tmp}"],
], ids=["check", "run", "golden-record"])
def test_check_and_run_refuse_a_pte_that_aborts_the_runtime_in_one_line(tmp_path, capsys, monkeypatch, argv):
    """`check`, `run`, `golden record` load a --pte through the gate's probe (`load_probed`): exit 2, one line."""
    pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")
    from eagle3_check.program import pte_probe

    monkeypatch.setattr(pte_probe, "_CODE", "import os, sys\nsys.stderr.write('terminate called\\n')\nos.abort()\n")
    pte = tmp_path / "x.pte"
    pte.write_bytes(b"\0\0\0\0ET12" + b"\0" * 64)
    assert main([a.format(pte=pte, tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: --pte {pte}: the ExecuTorch runtime ended the process "
                                                   "while loading it (signal SIGABRT: terminate called)"), err
    assert "Fix: re-export it with `eagle3-check export`" in err


# --- the .pte and its sidecar: two renames, one consistent pair ------------------------------------

def test_a_stale_sidecar_is_refused_and_a_fresh_one_is_read(tmp_path):
    from eagle3_check.program.sidecar import read_sidecar, sidecar_path, write_sidecar

    pte = tmp_path / "m.pte"
    pte.write_bytes(b"old program")
    write_sidecar(pte, {"source": {"fixture": "tiny-llama"}})
    assert read_sidecar(pte)["source"] == {"fixture": "tiny-llama"}
    pte.write_bytes(b"new program")  # a crash between the pair's two renames: new .pte, old sidecar
    with pytest.raises(InputError, match=r"export sidecar .*m\.export\.json describes another file"):
        read_sidecar(pte)
    legacy = json.loads(sidecar_path(pte).read_text())
    del legacy["pte_sha256"]
    sidecar_path(pte).write_text(json.dumps(legacy))
    with pytest.raises(InputError, match=r"m\.export\.json has no pte_sha256"):  # nothing ties it to this file
        read_sidecar(pte)
    assert read_sidecar(tmp_path / "none.pte") is None


def test_check_pte_refuses_a_stale_sidecar_before_loading(tmp_path, capsys):
    from eagle3_check.program.sidecar import write_sidecar

    pte = tmp_path / "m.pte"
    pte.write_bytes(b"\0\0\0\0ET12 first")
    write_sidecar(pte, {"source": {"fixture": "tiny-gemma4"}})
    pte.write_bytes(b"\0\0\0\0ET12 second")
    clean_error(capsys, main(["check", "--pte", str(pte)]), "describes another file")


# --- KV positions the program refused or should have: flagged by check's call audit -----------------

def test_a_kv_write_past_max_seq_len_the_runner_swallowed_fails(program, tokenizer, hf_reference):
    import torch

    from eagle3_check.fixtures.registry import Prompt
    from eagle3_check.jobs.check.prompt_set import run_check
    from eagle3_check.judge.tolerance import tolerance_for
    from eagle3_check.runners.loop import ReferenceRunner
    from eagle3_check.runners.options import RunOptions

    class Overreach(ReferenceRunner):
        def run(self, program, tokenizer, prompt, options):
            result = super().run(program, tokenizer, prompt, options)
            n = program.metadata()["get_max_seq_len"]
            try:  # the backend refuses; a runner that swallows it must not pass
                program.target_verify(torch.zeros(1, 2, dtype=torch.long), torch.tensor([n, n + 1]))
            except Exception:  # noqa: BLE001
                pass
            return result

    report = run_check(program, tokenizer, hf_reference, [Prompt("hi", "Hi")], RunOptions(max_new_tokens=4),
                       tolerance_for("float32"), runner=Overreach())
    v = report.outcomes[0].verdict
    assert v.status == "fail" and "target_verify at 256..257 was refused by the program" in v.message, v.message


def test_a_negative_kv_position_is_flagged(program, tokenizer):
    import torch

    from eagle3_check.runners.instrument import RecordingProgram, call_problems
    from eagle3_check.runners.loop import ReferenceRunner
    from eagle3_check.runners.options import RunOptions

    rec = RecordingProgram(program)
    run = ReferenceRunner().run(rec, tokenizer, "Hi", RunOptions(max_new_tokens=1))
    call = rec.calls[0]
    rec.calls[0] = type(call)(call.method, call.tokens, [-1, *call.positions[1:]], call.feature, call.out_ids,
                              call.out_feature)  # as a .pte that accepts position -1 would record it
    assert "prefill wrote negative KV position -1" in call_problems(rec, run, 256)
    assert torch.is_tensor(call.out_feature)
