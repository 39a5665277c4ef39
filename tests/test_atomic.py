"""Atomic writes (eagle3_check.atomic): a writer killed or failing at its write leaves the old
file intact, a full disk is a one-line error, two writers of one golden or one metrics baseline
leave valid files with every entry, and an unusable output path is refused before the work."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3_check.atomic import (
    atomic_path,
    atomic_writer,
    check_writable,
    locked,
    write_bytes_atomic,
    write_text_atomic,
)
from eagle3_check.cli import main as cli_main
from eagle3_check.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
OLD = '{"old": true}\n'


def _old(tmp_path: Path) -> Path:
    p = tmp_path / "g.json"
    p.write_text(OLD)
    return p


def _no_temp_left(d: Path) -> bool:
    return not [q for q in d.iterdir() if q.name.endswith(".tmp")]


def test_write_replaces_the_file_and_leaves_no_temp(tmp_path):
    p = _old(tmp_path)
    write_text_atomic(p, "new\n")
    assert p.read_text() == "new\n" and _no_temp_left(tmp_path)
    write_bytes_atomic(tmp_path / "b.bin", b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert oct((tmp_path / "b.bin").stat().st_mode & 0o777) != oct(0o600)  # umask mode, not mkstemp's 0600


def test_a_streaming_writer_that_raises_mid_way_leaves_the_old_file(tmp_path):
    p = _old(tmp_path)
    with pytest.raises(RuntimeError, match="mid-way"):
        with atomic_writer(p) as f:
            f.write('{"new": ')
            raise RuntimeError("mid-way")
    assert p.read_text() == OLD and _no_temp_left(tmp_path)


def test_a_failing_rename_leaves_the_old_file_and_is_one_line(tmp_path, monkeypatch):
    p = _old(tmp_path)

    def bad_replace(src, dst):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "replace", bad_replace)
    with pytest.raises(InputError) as e:
        write_text_atomic(p, "new\n", "golden")
    assert "\n" not in str(e.value) and f"writing golden {p}" in str(e.value) and "old file is intact" in str(e.value)
    assert p.read_text() == OLD and _no_temp_left(tmp_path)


def test_a_writer_killed_between_temp_write_and_rename_leaves_the_old_file(tmp_path):
    p = _old(tmp_path)
    code = (
        "import os, signal, sys\n"
        "from eagle3_check.atomic import atomic_writer\n"
        "with atomic_writer(sys.argv[1]) as f:\n"
        "    f.write('{\"new\": ' * 1000)\n"
        "    f.flush()\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(p)], cwd=ROOT, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])})
    assert proc.returncode == -signal.SIGKILL
    assert p.read_text() == OLD  # the killed writer's bytes are only in its hidden temp file
    assert [q.name for q in tmp_path.iterdir() if q.name.endswith(".tmp")][0].startswith(".g.json.")


@pytest.mark.parametrize("where", ["fsync", "write"], ids=["enospc-at-fsync", "enospc-at-write"])
def test_a_full_disk_is_one_line_and_the_old_file_survives(tmp_path, monkeypatch, where):
    p = _old(tmp_path)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    if where == "fsync":
        monkeypatch.setattr(os, "fsync", full)
        with pytest.raises(InputError) as e:
            write_text_atomic(p, "new\n" * 1000, "golden")
    else:  # a streaming writer (e.g. ExecuTorch's write_to_file) whose write fails
        with pytest.raises(InputError) as e:
            with atomic_writer(p, binary=True, what=".pte") as f:
                f.write(b"partial")
                full()
    msg = str(e.value)
    assert "\n" not in msg and "no space left on device" in msg and "expected room for the file" in msg
    assert p.read_text() == OLD and _no_temp_left(tmp_path)


def test_save_golden_force_on_a_full_disk_keeps_the_old_golden(toy_golden, tmp_path, monkeypatch):
    from eagle3_check.jobs.golden.file import load_golden, save_golden

    path = save_golden(toy_golden, tmp_path)
    before = path.read_text()
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    with pytest.raises(InputError, match="no space left on device"):
        save_golden(toy_golden, tmp_path, force=True)
    assert path.read_text() == before and load_golden(path).to_json() == toy_golden.to_json()


@pytest.fixture
def toy_golden(tokenizer):
    from test_golden import KEY, PROMPTS, TOL, ToyReference  # the golden tests' toy recording

    from eagle3_check.jobs.golden.file import record_golden
    from eagle3_check.suites.toy import ToyProgram

    toy = ToyProgram(max_seq_len=128, max_prefill=64, wrong_at={30, 41, 47})
    return record_golden(toy, tokenizer, ToyReference(), PROMPTS, KEY, TOL)


TWO_WRITERS = (
    "import json, sys, time\n"
    "from eagle3_check.jobs.golden.file import load_golden, save_golden\n"
    "from eagle3_check.jobs.golden.metrics import Metrics, write_baseline\n"
    "g = load_golden(sys.argv[1])\n"
    "m = Metrics(**json.loads(sys.argv[5]))\n"
    "from pathlib import Path\n"
    "ready = Path(sys.argv[7])\n"
    "(ready / sys.argv[2]).touch()  # imported; then start together, once both are\n"
    "while len(list(ready.iterdir())) < 2:\n"
    "    time.sleep(0.001)\n"
    "for i in range(int(sys.argv[3])):\n"
    "    save_golden(g, sys.argv[4], force=True)\n"
    "    write_baseline(sys.argv[6], {f'{sys.argv[2]}-{i}': m})\n"
)


def test_two_force_writers_of_one_golden_and_one_baseline_leave_valid_files(toy_golden, tmp_path):
    from eagle3_check.jobs.golden.file import load_golden, save_golden
    from eagle3_check.jobs.golden.metrics import load_baseline

    gdir = tmp_path / "golden"
    path = save_golden(toy_golden, gdir)
    m = {  # any valid entry: the writers only store it
        "requests": 1, "emitted": 4, "rounds": 2, "target_forwards": 3, "draft_forwards": 8,
        "target_per_token": 0.75, "draft_per_token": 2.0, "tau": 1.5, "n_alpha": [1.0, 0.5, 0.0, 0.0]}
    n = 30
    base = tmp_path / "metrics.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    ready = tmp_path / "ready"  # each child touches its tag there once imported
    ready.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", TWO_WRITERS, str(path), tag, str(n), str(gdir),
                               json.dumps(m), str(base), str(ready)], cwd=ROOT, env=env) for tag in ("a", "b")]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    assert load_golden(path).to_json() == toy_golden.to_json()  # valid JSON, the golden as recorded
    assert sorted(load_baseline(base)) == sorted(f"{t}-{i}" for t in "ab" for i in range(n))  # no entry lost
    assert _no_temp_left(gdir) and _no_temp_left(tmp_path)


def test_the_lock_is_a_hidden_sidecar_and_does_not_block_a_reader(tmp_path):
    p = _old(tmp_path)
    with locked(p):
        assert (tmp_path / ".g.json.lock").is_file()
        assert json.loads(p.read_text()) == {"old": True}
        with atomic_path(p) as tmp:
            tmp.write_text("{}\n")
    assert p.read_text() == "{}\n"


@pytest.mark.parametrize("make,match", [
    (lambda d: d / "missing" / "x.json", r"directory .*missing does not exist; expected an existing directory"),
    (lambda d: d, r"is a directory; expected a file path"),
], ids=["missing-directory", "a-directory"])
def test_check_writable_refuses_what_cannot_be_written(tmp_path, make, match):
    with pytest.raises(InputError, match=match):
        check_writable(make(tmp_path))
    assert not (tmp_path / "missing").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="needs a non-root user (root writes any directory); found root")
def test_check_writable_refuses_an_unwritable_directory(tmp_path):
    d = tmp_path / "ro"
    d.mkdir(mode=0o500)
    with pytest.raises(InputError, match="is not writable"):
        check_writable(d / "x.json")


def test_gate_report_into_a_missing_directory_errors_at_start(tmp_path, capsys):
    missing = tmp_path / "nope" / "r.json"
    pte = tmp_path / "empty.pte"
    pte.write_bytes(b"")  # exists (the pre-load check passes) but would fail to load: the --report error comes first
    rc = cli_main(["gate", "--pte", str(pte), "--report", str(missing)])
    err = capsys.readouterr().err
    assert rc == 2 and "--report" in err and "does not exist" in err and "empty.pte" not in err
    assert not missing.parent.exists()


def test_export_into_a_missing_directory_errors_and_creates_nothing(tmp_path, capsys):
    out = tmp_path / "nonexistent" / "dir" / "x.pte"
    rc = cli_main(["export", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "-o" in err and "does not exist" in err
    assert not (tmp_path / "nonexistent").exists()
