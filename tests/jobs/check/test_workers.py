"""`check --workers N` and `--shard I/N` (eagle3_check/jobs/check/workers.py): the shard arithmetic,
the worker-to-device mapping (CUDA mapping tested on CPU, as logic), and a 2-worker check whose
report equals the serial one verdict for verdict (only timings differ)."""

from __future__ import annotations

import json
import pickle

import pytest

from eagle3_check.errors import InputError, OptionError
from eagle3_check.fixtures.registry import fixtures_root
from eagle3_check.jobs.check.workers import parse_shard, shard_indices, worker_devices


def test_shard_worked_example():
    # 5 prompts [a, b, c, d, e], n = 2: shard 1/2 = a, c, e; shard 2/2 = b, d (module doc)
    assert shard_indices(5, 1, 2) == [0, 2, 4]
    assert shard_indices(5, 2, 2) == [1, 3]
    assert shard_indices(2, 3, 3) == []


@pytest.mark.parametrize("count", [1, 5, 14, 17])
@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_every_prompt_is_in_exactly_one_shard(count, n):
    got = sorted(i for s in range(1, n + 1) for i in shard_indices(count, s, n))
    assert got == list(range(count))


@pytest.mark.parametrize("text, want", [("1/2", (1, 2)), ("2/2", (2, 2)), (" 3/8 ", (3, 8))])
def test_parse_shard(text, want):
    assert parse_shard(text) == want


@pytest.mark.parametrize("text", ["0/2", "3/2", "1/0", "a/b", "2", "1/2/3", "-1/2"])
def test_a_bad_shard_is_an_option_error(text):
    with pytest.raises(OptionError, match=r"--shard .*1 <= i <= n"):
        parse_shard(text)


@pytest.mark.parametrize("device, workers, gpus, want", [
    ("cpu", 2, 0, ["cpu", "cpu"]),
    ("cpu", 1, 0, ["cpu"]),
    ("cuda", 2, 4, ["cuda:0", "cuda:1"]),  # worker i on cuda:i
    ("cuda", 2, 2, ["cuda:0", "cuda:1"]),
    ("cuda", 1, 2, ["cuda"]),
    ("cuda:1", 1, 2, ["cuda:1"]),
], ids=["cpu-2", "cpu-1", "cuda-2-of-4", "cuda-2-of-2", "cuda-1", "cuda-numbered-1"])
def test_worker_devices(device, workers, gpus, want):
    assert worker_devices(device, workers, gpus) == want


@pytest.mark.parametrize("device, workers, gpus, message", [
    ("cuda", 3, 2, "at most 2 workers"),
    ("cuda", 2, 0, "at most 0 workers"),
    ("cuda:1", 2, 4, "--device cuda (worker i runs on cuda:i)"),
    ("cpu", 0, 0, "an integer >= 1"),
], ids=["more-workers-than-gpus", "no-gpu", "numbered-gpu-with-2-workers", "zero-workers"])
def test_worker_devices_errors(device, workers, gpus, message):
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        worker_devices(device, workers, gpus)


def test_an_error_raised_in_a_worker_pickles_back_whole():
    e = pickle.loads(pickle.dumps(InputError("prompt 'x'", "a prompt", "drop it")))
    assert type(e) is InputError and str(e) == "prompt 'x'; expected a prompt. Fix: drop it" and e.fix == "drop it"


@pytest.mark.parametrize("argv, message", [
    (["--workers", "0"], "--workers 0"),
    (["--shard", "3/2"], "--shard 3/2"),
    (["--workers", "2", "--suite", "one-token"], "--workers with --suite"),
    (["--shard", "1/2", "--runner", "exec:./x"], "--shard with --runner exec:./x"),
], ids=["zero-workers", "bad-shard", "workers-with-suite", "shard-with-exec"])
def test_cli_flag_errors_are_one_line(argv, message, capsys):
    from eagle3_check.cli import main

    assert main(["check", "--fixture", "tiny-llama", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def _prompts(tmp_path, n=5):
    data = json.loads((fixtures_root() / "prompts.json").read_text())
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"prompts": data["prompts"][:n]}))
    return str(path)


def _report(capsys, argv):
    from eagle3_check.cli import main

    rc = main(["check", "--fixture", "tiny-llama", "--json", "--max-new-tokens", "16", *argv])
    out = json.loads(capsys.readouterr().out)
    for r in out["requests"]:
        r["run"].pop("method_ms")  # wall times: the one thing allowed to differ
        r.pop("seconds")
    return rc, out


def test_two_workers_give_the_serial_report_and_shards_partition_it(tmp_path, capsys):
    prompts = _prompts(tmp_path)
    rc, serial = _report(capsys, ["--prompts", prompts])
    rc2, parallel = _report(capsys, ["--prompts", prompts, "--workers", "2"])
    assert rc == rc2 == 0
    assert parallel["info"]["workers"] == 2 and parallel["info"]["worker_devices"] == ["cpu", "cpu"]
    for key in ("passed", "k", "tau", "n_alpha", "counts", "tie_budget", "requests"):
        assert parallel[key] == serial[key], key
    assert parallel["draft_health"] == serial["draft_health"]
    assert [r["prompt_id"] for r in parallel["requests"]] == [r["prompt_id"] for r in serial["requests"]]
    shards = [_report(capsys, ["--prompts", prompts, "--shard", f"{i}/2"])[1]["requests"] for i in (1, 2)]
    assert shards[0] == serial["requests"][0::2] and shards[1] == serial["requests"][1::2]


def test_a_workers_error_is_one_line_and_no_report(tmp_path, capsys):
    """A prompt longer than max prefill, found in the workers: exit 2, one line, nothing on stdout."""
    from eagle3_check.cli import main

    rc = main(["check", "--fixture", "tiny-llama", "--prompts", _prompts(tmp_path, 2), "--max-prefill", "8", "--workers", "2", "--no-progress"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.startswith("error: prompt 'hi'") and err.count("\n") == 1
