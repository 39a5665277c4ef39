"""Issue 17's probe catalogue, part 2: hostile files, resource bounds, remote code, a .pte that aborts.

Every probe that broke is a case here (or, where another file owns it, a row of `COVERED` naming
the test that pins it; `test_every_covered_probe_names_a_test_that_exists` keeps the rows true).
A hostile input is one line `error: <file>: <field path> = <value>; expected ... Fix: ...` and exit
2: no traceback, nothing on stdout. The table is docs/reliability.md's "Hostile input" section.
"""

from __future__ import annotations

import ast
import io
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from eagle3_check.cli import main
from eagle3_check.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "tiny-llama"
GOLDEN = ROOT / "golden" / "tiny-llama__eager__cpu__float32__k4__n48.json"


def clean_error(capsys, rc: int, named: str) -> str:
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err and cap.out == "", cap.out + cap.err
    lines = cap.err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, cap.err
    assert lines[0].startswith("error: ") and "; expected " in lines[0] and ". Fix: " in lines[0], lines[0]
    assert named in lines[0], lines[0]
    return lines[0]


# --- goldens: valid JSON, wrong schema (16 of 30 were tracebacks; an empty one passed) ---------

def _set(path: str, value):
    def edit(d):
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        node = d
        for p in parents:
            node = node[p]
        node[last] = value
        return d
    return edit


def _drop(path: str):
    def edit(d):
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        node = d
        for p in parents:
            node = node[p]
        del node[last]
        return d
    return edit


GOLDEN_CASES = [
    pytest.param(_set("prompts", []), "prompts = []; expected at least 1 item(s)", id="empty-prompts"),
    pytest.param(_set("prompts.0.tokens.3", -4), "prompts[0].tokens[3] = -4; expected a number >= 0",
                 id="negative-token"),
    pytest.param(_set("prompts.0.tokens.0", 5.0), "prompts[0].tokens[0] = 5.0; expected a valid integer",
                 id="float-token"),
    pytest.param(_set("prompts.0.tokens.0", "5"), "prompts[0].tokens[0] = '5'; expected a valid integer",
                 id="string-token"),
    pytest.param(_set("prompts.0.tokens.0", True), "prompts[0].tokens[0] = True; expected a valid integer",
                 id="bool-token"),
    pytest.param(_set("prompts.0.prompt_ids.1", -1), "prompts[0].prompt_ids[1] = -1", id="negative-prompt-id"),
    pytest.param(_set("prompts.0.tokens.0", 999999),
                 "prompts[0].tokens[0] = 999999; expected a token id in [0, 511]", id="token-out-of-vocab"),
    pytest.param(_set("prompts.1.prompt_ids.0", 512), "prompts[1].prompt_ids[0] = 512", id="prompt-id-out-of-vocab"),
    pytest.param(_set("options.foo", 1), "unknown field options.foo", id="unknown-option-key"),
    pytest.param(_drop("prompts.0.margins"), "prompts[0].margins is missing", id="missing-margins"),
    pytest.param(_set("prompts.0.margins", [1.0]), "prompts[0].margins has 1 entries", id="margins-wrong-length"),
    pytest.param(_set("prompts.0.accepted.0", 9), "prompts[0].accepted[0] = 9; expected an accepted count in [0, K = 4]",
                 id="accepted-above-k"),
    pytest.param(_set("prompts.0.rounds", 0), "prompts[0].accepted has", id="rounds-disagree"),
    pytest.param(_set("prompts.0.min_margin", 0.0), "prompts[0].min_margin = 0.0 but min(margins)",
                 id="min-margin-disagrees"),
    pytest.param(lambda d: _set("prompts.1.prompt_id", d["prompts"][0]["prompt_id"])(d), "prompts[1].prompt_id = ",
                 id="duplicate-prompt"),
    pytest.param(_set("key.k", 0), "key.k = 0; expected a number >= 1", id="k-zero"),
    pytest.param(_set("key", None), "key = None", id="key-null"),
    pytest.param(_set("tie_tolerance", -1.0), "tie_tolerance = -1.0", id="negative-tolerance"),
    pytest.param(_set("versions", ["torch"]), "versions = ['torch']", id="versions-not-a-mapping"),
    pytest.param(_set("prompts.0.stop_reason", ""), "prompts[0].stop_reason = ''", id="empty-stop-reason"),
    pytest.param(_set("options.stop_ids", "1,50"), "options.stop_ids = '1,50'", id="stop-ids-a-string"),
    pytest.param(_set("schema", 2), "has schema 2", id="schema-2"),
    pytest.param(lambda d: [d], "(top level) = [", id="top-level-list"),
]


@pytest.mark.parametrize("edit, named", GOLDEN_CASES)
def test_a_malformed_golden_is_one_line_naming_the_field(edit, named, tmp_path, capsys):
    bad = tmp_path / GOLDEN.name
    bad.write_text(json.dumps(edit(json.loads(GOLDEN.read_text()))))
    rc = main(["golden", "verify", str(bad), "--no-baseline", "--no-progress"])
    line = clean_error(capsys, rc, named)
    assert GOLDEN.name in line  # the file is named


@pytest.mark.parametrize("text, named", [
    ('{"schema": 1, "tau": NaN}', "NaN is not a JSON number"),
    ('{"schema": 1, "schema": 1}', "key 'schema' appears twice"),
    ("[" * 100000, "nests too deeply"),
], ids=["nan", "duplicate-key", "deep-nesting"])
def test_inexact_json_is_refused(text, named, tmp_path, capsys):
    bad = tmp_path / GOLDEN.name
    bad.write_text(text)
    clean_error(capsys, main(["golden", "verify", str(bad), "--no-baseline"]), named)


# --- prompt sets -----------------------------------------------------------------------------------

@pytest.mark.parametrize("data, named", [
    ({"prompts": [{"id": 1, "text": "x"}]}, "prompts[0].id = 1; expected a valid string"),
    ({"prompts": [{"id": "a", "text": None}]}, "prompts[0].text = None"),
    ({"prompts": [{"id": "a", "text": "x", "lang": "en"}]}, "unknown field prompts[0].lang"),
    ({"prompts": []}, "prompts = []; expected at least 1 item(s)"),
    ([{"id": "a", "text": "x"}], "(top level) = ["),
    ({"prompts": [{"id": "a", "text": "x\ud800y"}]}, "lone surrogate '\\ud800' at character"),
    ({"prompts": [{"id": "a", "text": "word " * 400_000}]}, "is 2000"),
], ids=["id-int", "text-null", "unknown-key", "empty-list", "top-level-list", "lone-surrogate", "two-million-chars"])
def test_a_hostile_prompt_set_is_one_line(data, named, tmp_path, capsys):
    p = tmp_path / "p.json"
    p.write_text(json.dumps(data))
    clean_error(capsys, main(["check", "--fixture", "tiny-llama", "--prompts", str(p), "--max-new-tokens", "2"]), named)


def test_a_lone_surrogate_on_the_command_line_is_one_line(capsys):
    clean_error(capsys, main(["run", "--fixture", "tiny-llama", "--prompt", "a\udc80b"]), "lone surrogate")


# --- baselines and cards ---------------------------------------------------------------------------

@pytest.mark.parametrize("entry, named", [
    ({"n_alpha": ["x"]}, "n_alpha[0] = 'x'"),
    ({"n_alpha": [1.5]}, "n_alpha[0] = 1.5; expected a number <= 1.0"),
    ({"rounds": -1}, "rounds = -1"),
], ids=["n-alpha-string", "n-alpha-above-one", "negative-rounds"])
def test_a_hostile_metrics_baseline_is_one_line(entry, named, tmp_path, capsys):
    from eagle3_check.gating.metrics import default_baseline_path

    data = json.loads(default_baseline_path().read_text())
    stem = GOLDEN.stem
    data["entries"][stem].update(entry)
    p = tmp_path / "metrics.json"
    p.write_text(json.dumps(data))
    clean_error(capsys, main(["golden", "verify", str(GOLDEN), "--baseline", str(p)]), f"entries.{stem}.{named}")


@pytest.mark.parametrize("data, named", [
    ({"tau": "2.1"}, "tau = '2.1'"),
    ({"tau": -1}, "tau = -1"),
    ({"tau": True}, "tau = True"),
    ({"k": 4}, "tau is missing"),
    ({"tau": None}, "tau = None"),
], ids=["tau-string", "tau-negative", "tau-bool", "tau-missing", "tau-null"])
def test_a_hostile_tau_baseline_is_one_line(data, named, tmp_path):
    from eagle3_check.gating.tau_baseline import read_baseline_tau

    p = tmp_path / "base.json"
    p.write_text(json.dumps(data))
    with pytest.raises(InputError, match=named.replace("(", r"\(").replace("[", r"\[")) as e:
        read_baseline_tau(p)
    assert "\n" not in str(e.value)


def test_a_tau_baseline_reads_a_gate_report_and_a_bare_tau(tmp_path):
    from eagle3_check.gating.tau_baseline import read_baseline_tau

    p = tmp_path / "r.json"
    p.write_text(json.dumps({"tau": 2.5, "passed": True, "info": {"k": 4}, "checks": []}))
    assert read_baseline_tau(p) == (2.5, 4)
    p.write_text(json.dumps({"tau": 2}))
    assert read_baseline_tau(p) == (2.0, None)


def test_a_hostile_card_is_one_line(tmp_path):
    from eagle3_check.fixtures.card import read_card
    from eagle3_check.fixtures.registry import Fixture, load_fixture

    fx = load_fixture("tiny-llama")
    root = tmp_path / "tiny-llama"
    root.mkdir()
    card = json.loads(fx.card_path.read_text())
    assert read_card(fx)["k"]["4"]["tau"] == card["k"]["4"]["tau"]  # the committed cards validate
    card["k"]["4"]["passed"] = "yes"
    (root / "card.json").write_text(json.dumps(card))
    with pytest.raises(InputError, match=r"k\.4\.passed = 'yes'; expected a valid boolean"):
        read_card(Fixture("tiny-llama", root, fx.spec))


# --- non-regular and huge files --------------------------------------------------------------------

def _fifo(tmp_path: Path) -> str:
    p = tmp_path / "fifo.json"
    os.mkfifo(p)
    return str(p)


def _sparse(tmp_path: Path, name: str, mib: int) -> str:
    p = tmp_path / name
    with open(p, "wb") as f:
        f.truncate(mib << 20)  # sparse: no disk used, but stat says it is that big
    return str(p)


@pytest.mark.parametrize("argv, named", [
    (lambda t: ["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--tokenizer", _fifo(t)], "is a FIFO (named pipe); expected a regular file"),
    (lambda t: ["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--tokenizer", "/dev/zero"], "/dev/zero is a character device"),
    (lambda t: ["check", "--fixture", "tiny-llama", "--prompts", str(t)], "is a directory; expected a regular file"),
    (lambda t: ["check", "--fixture", "tiny-llama", "--prompts", _fifo(t)], "is a FIFO"),
    (lambda t: ["golden", "verify", _fifo(t)], "is a FIFO"),
    (lambda t: ["run", "--fixture", "tiny-llama", "--prompt-file", "/dev/zero"], "is a character device"),
    (lambda t: ["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--tokenizer", _sparse(t, "tok.json", 600)],
     "is 600.0 MiB; expected at most 512 MiB"),
    (lambda t: ["run", "--fixture", "tiny-llama", "--prompt-file", _sparse(t, "big.txt", 10)], "is 10.0 MiB; expected at most 4 MiB"),
    (lambda t: ["check", "--target", _fifo(t), "--draft", str(t)], "is a FIFO (named pipe); expected an existing directory"),
    (lambda t: _copy_fixture(t, weights_fifo="draft"), "model.safetensors is a FIFO (named pipe)"),
    (lambda t: _copy_fixture(t, weights_fifo="target"), "model.safetensors is a FIFO (named pipe)"),
], ids=["tokenizer-fifo", "tokenizer-dev-zero", "prompts-directory", "prompts-fifo", "golden-fifo",
        "prompt-file-dev-zero", "tokenizer-600mib", "prompt-file-10mib", "target-fifo", "draft-weights-fifo",
        "target-weights-fifo"])
def test_a_non_regular_or_huge_input_is_named_as_such(argv, named, tmp_path, capsys):
    clean_error(capsys, main(argv(tmp_path)), named)


# --- resource bounds before allocation -------------------------------------------------------------

def _copy_fixture(tmp_path: Path, target_edit=None, draft_edit=None, weights_fifo: str = "") -> list[str]:
    t, d = tmp_path / "target", tmp_path / "draft"
    shutil.copytree(FIXTURE / "target", t)
    shutil.copytree(FIXTURE / "draft", d)
    if weights_fifo:  # its weights replaced by a FIFO: reading it would block forever
        (tmp_path / weights_fifo / "model.safetensors").unlink()
        os.mkfifo(tmp_path / weights_fifo / "model.safetensors")
    for path, edit in ((t / "config.json", target_edit), (d / "config.json", draft_edit)):
        if edit:
            path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    return ["run", "--prompt", "Hi", "--target", str(t), "--draft", str(d), "--tokenizer", str(FIXTURE / "tokenizer.json")]


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
    from eagle3_check.gating.check import run_check
    from eagle3_check.reference.tolerance import tolerance_for
    from eagle3_check.run.loop import ReferenceRunner
    from eagle3_check.run.options import RunOptions

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

    from eagle3_check.run.loop import ReferenceRunner
    from eagle3_check.run.options import RunOptions
    from eagle3_check.suites.instrument import RecordingProgram, call_problems

    rec = RecordingProgram(program)
    run = ReferenceRunner().run(rec, tokenizer, "Hi", RunOptions(max_new_tokens=1))
    call = rec.calls[0]
    rec.calls[0] = type(call)(call.method, call.tokens, [-1, *call.positions[1:]], call.feature, call.out_ids,
                              call.out_feature)  # as a .pte that accepts position -1 would record it
    assert "prefill wrote negative KV position -1" in call_problems(rec, run, 256)
    assert torch.is_tensor(call.out_feature)


# --- probes another test file pins ----------------------------------------------------------------

COVERED = {
    "kill -9 at a write leaves the old file":
        "tests/test_atomic.py::test_a_writer_killed_between_temp_write_and_rename_leaves_the_old_file",
    "a full disk is one line, old file intact": "tests/test_atomic.py::test_a_full_disk_is_one_line_and_the_old_file_survives",
    "two golden record --force at once":
        "tests/test_atomic.py::test_two_force_writers_of_one_golden_and_one_baseline_leave_valid_files",
    "gate --report into a missing directory": "tests/test_atomic.py::test_gate_report_into_a_missing_directory_errors_at_start",
    "runner sets options.max_new_tokens = 1": "tests/test_isolation.py::test_a_runner_that_changes_the_options_is_judged_on_the_request",
    "runner never calls the program": "tests/test_isolation.py::test_a_runner_that_never_calls_the_program_fails",
    "runner calls sys.exit(0)": "tests/test_isolation.py::test_cli_check_json_stays_valid_and_exits_1",
    "runner prints to stdout": "tests/test_isolation.py::test_the_printed_text_is_in_the_reason",
    "float / numpy / tensor tokens": "tests/test_isolation.py::test_type_problem_names_the_field",
    "runner raises": "tests/test_crash.py::test_a_crash_fails_its_request_and_the_others_are_still_judged",
    "runner hangs": "tests/test_timeout.py::test_a_looping_runner_fails_its_request_names_it_and_stops_at_its_next_call",
    "runner hangs inside a program call": "tests/test_timeout.py::test_a_run_stuck_inside_a_program_call_leaves_the_program_busy_until_it_returns",
    "runner calls the program out of protocol": "tests/test_isolation.py::test_a_runner_that_calls_the_program_out_of_protocol_fails",
    "corrupt method section aborts the runtime": "tests/pte/test_gate_abort.py::test_gate_reports_a_pte_whose_method_aborts_the_runtime",
    "check / run / golden on a .pte that aborts the runtime":
        "tests/pte/test_gate_abort.py::test_a_pte_that_aborts_the_runtime_is_one_error_line",
}


def test_every_covered_probe_names_a_test_that_exists():
    for probe, node in COVERED.items():
        path, name = node.split("::")
        tree = ast.parse((ROOT / path).read_text())
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert name in names, f"{probe}: {node} does not exist"


def test_the_golden_options_schema_mirrors_run_options():
    """A RunOptions field added without its schema twin would make every new golden unreadable."""
    from dataclasses import fields

    from eagle3_check.run.options import RunOptions
    from eagle3_check.schema import GoldenOptions

    assert set(GoldenOptions.model_fields) == {f.name for f in fields(RunOptions)}
