"""The bad-input catalogue: every user error is one line naming the value and the fix, exit 2.

Each case drives `eagle3-check` in-process and asserts: exit code 2; stderr is exactly one
line `error: <value>...; expected ... Fix: ...` naming the offending value; no traceback;
nothing on stdout and no file written. Broken model files are copies of the embedded
fixture, damaged in a temporary directory.

Program-level cases (metadata keys, contract violations) cannot be reached by a CLI flag on
the eager backend: tests/cli/test_bad_input_program.py drives them through the same CLI path (and
counts the catalogue against docs/reliability.md).
"""

from __future__ import annotations

import importlib.util
import json
import random
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models

from eagle3_check.cli import main
from eagle3_check.errors import OptionError
from eagle3_check.program.draft import DraftConfig, Eagle3DraftHead
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.suites import toy
from eagle3_check.tokenizer import Tokenizer

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "tiny-llama"
NEEDS_EXECUTORCH = pytest.mark.skipif(importlib.util.find_spec("executorch") is None,
                                      reason="needs executorch (export checks it before its options), found none: "
                                             "pip install -e .[pte]")
TOKENIZER = str(FIXTURE / "tokenizer.json")


class Bad:
    """Damaged copies of the fixture's files, made once per module under one temporary root."""

    def __init__(self, root: Path):
        self.root = root
        self._made: dict[str, Path] = {}

    def _copy(self, key: str, src: Path) -> tuple[Path, bool]:
        if key in self._made:
            return self._made[key], False
        dst = self.root / key
        shutil.copytree(src, dst)
        self._made[key] = dst
        return dst, True

    @staticmethod
    def _damage(path: Path, how: str) -> None:
        data = path.read_bytes()
        if how == "missing":
            path.unlink()
        elif how == "empty":
            path.write_bytes(b"")
        elif how == "truncated":
            path.write_bytes(data[: len(data) // 2])
        elif how == "random-bytes":
            path.write_bytes(random.Random(0).randbytes(len(data)))
        else:
            raise ValueError(how)

    def target(self, how: str) -> str:
        d, new = self._copy(f"target-{how}", FIXTURE / "target")
        if new:
            self._damage(d / "model.safetensors", how)
        return str(d)

    def draft(self, how: str) -> str:
        """A damaged draft: weight file damage, or one config / tensor change."""
        d, new = self._copy(f"draft-{how}", FIXTURE / "draft")
        if not new:
            return str(d)
        cfg_path, w_path = d / "config.json", d / "model.safetensors"
        cfg = json.loads(cfg_path.read_text())
        if how in ("missing", "empty", "truncated", "random-bytes"):
            self._damage(w_path, how)
        elif how == "config-not-json":
            cfg_path.write_text("{ this is not json")
        elif how == "aux-layer-beyond-depth":
            cfg["eagle_aux_hidden_state_layer_ids"] = [1, 2, 9]
            cfg_path.write_text(json.dumps(cfg))
        elif how == "rope-yarn":
            cfg["transformer_layer_config"]["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0}
            cfg_path.write_text(json.dumps(cfg))
        elif how == "unknown-key":
            cfg["attention_sink"] = True
            cfg_path.write_text(json.dumps(cfg))
        elif how in ("stray-bias", "d2t-outside-vocab"):
            w = load_file(str(w_path))
            if how == "stray-bias":
                w["layers.0.self_attn.q_proj.bias"] = torch.zeros(64)
            else:
                w["d2t"][7] = 10_000
            save_file(w, str(w_path))
        elif how == "target-hidden-mismatch":  # a consistent draft trained for a target with H = 48
            c = DraftConfig.from_json(cfg, str(cfg_path))
            c.target_hidden_size = 48
            torch.manual_seed(0)
            Eagle3DraftHead(c, 64).save(d)
        else:
            raise ValueError(how)
        return str(d)

    def file(self, name: str, data: bytes) -> str:
        p = self.root / name
        p.write_bytes(data)
        return str(p)

    def module(self, name: str, source: str) -> str:
        """A Python module `name` in a directory on sys.path for this session."""
        import sys

        d = self.root / "modules"
        d.mkdir(exist_ok=True)
        (d / f"{name}.py").write_text(source)
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))
        return name

    def small_vocab_tokenizer(self, n: int = 3) -> str:
        """A word-level tokenizer with n ids (<unk>, then w1 ... w(n-1))."""
        p = self.root / f"tokenizer-{n}.json"
        if not p.exists():
            vocab = {"<unk>": 0, **{f"w{i}": i for i in range(1, n)}}
            HFTokenizer(models.WordLevel(vocab, unk_token="<unk>")).save(str(p))
        return str(p)


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    return Bad(tmp_path_factory.mktemp("bad-input"))


def with_dirs(target: str, draft: str, tokenizer: str = TOKENIZER) -> list[str]:
    return ["run", "--prompt", "Hi", "--target", target, "--draft", draft, "--tokenizer", tokenizer]


def fx(b: Bad) -> str:
    return str(FIXTURE / "target")


def fd(b: Bad) -> str:
    return str(FIXTURE / "draft")


RUN = ["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--max-new-tokens", "4"]

CLI_CASES = [
    # model files
    pytest.param(lambda b: with_dirs(b.target("missing"), fd(b)), "has no weight file", id="target-weights-missing"),
    pytest.param(lambda b: with_dirs(b.target("empty"), fd(b)), "model.safetensors is empty", id="target-weights-empty"),
    pytest.param(lambda b: with_dirs(b.target("truncated"), fd(b)), "cannot be loaded", id="target-weights-truncated"),
    pytest.param(lambda b: with_dirs(b.target("random-bytes"), fd(b)), "cannot be loaded", id="target-weights-random-bytes"),
    pytest.param(lambda b: with_dirs("/nonexistent/target", fd(b)), "/nonexistent/target", id="target-dir-missing"),
    pytest.param(lambda b: with_dirs(fx(b), b.draft("missing")), "has no weights", id="draft-weights-missing"),
    pytest.param(lambda b: with_dirs(fx(b), b.draft("empty")), "cannot be read", id="draft-weights-empty"),
    pytest.param(lambda b: with_dirs(fx(b), b.draft("truncated")), "cannot be read", id="draft-weights-truncated"),
    pytest.param(lambda b: with_dirs(fx(b), b.draft("random-bytes")), "cannot be read", id="draft-weights-random-bytes"),
    pytest.param(lambda b: with_dirs(fx(b), b.draft("config-not-json")), "is not valid JSON", id="draft-config-not-json"),
    # the draft does not fit the target
    pytest.param(lambda b: with_dirs(fx(b), b.draft("target-hidden-mismatch")), "draft target_hidden_size 48",
                 id="draft-target-hidden-size-mismatch"),
    pytest.param(lambda b: with_dirs(fx(b), b.draft("d2t-outside-vocab")), "d2t maps to target id",
                 id="draft-d2t-outside-target-vocab"),
    pytest.param(lambda b: with_dirs(fx(b), b.draft("aux-layer-beyond-depth")), "aux layer id 9",
                 id="draft-aux-layer-beyond-target-depth"),
    pytest.param(lambda b: with_dirs(fx(b), b.draft("stray-bias")), "layers.0.self_attn.q_proj.bias",
                 id="draft-tensor-the-config-has-no-place-for"),
    pytest.param(lambda b: with_dirs(fx(b), b.draft("rope-yarn")), "rope_scaling.rope_type 'yarn'",
                 id="draft-rope-variant-not-implemented"),
    pytest.param(lambda b: with_dirs(fx(b), b.draft("unknown-key")), "'attention_sink'",
                 id="draft-config-key-not-understood"),
    # tokenizer
    pytest.param(lambda b: [*RUN, "--tokenizer", b.file("tok.json", b"{not json")], "is not valid JSON",
                 id="tokenizer-not-json"),
    pytest.param(lambda b: [*RUN, "--tokenizer", b.file("tok-bytes.json", random.Random(1).randbytes(64))],
                 "is not UTF-8 (byte", id="tokenizer-random-bytes"),
    pytest.param(lambda b: [*RUN, "--tokenizer", b.small_vocab_tokenizer()], "has 3 ids",
                 id="tokenizer-vocab-smaller-than-target"),
    # inconsistent program shape (the eager backend's flags become its metadata)
    pytest.param(lambda b: [*RUN, "--min-prefill", "50", "--max-prefill", "20"],
                 "get_min_prefill_chunk = 50 > get_max_prefill_chunk = 20", id="min-prefill-above-max-prefill"),
    pytest.param(lambda b: [*RUN, "--max-prefill", "256"], "get_max_prefill_chunk = 256 >= get_max_seq_len = 256",
                 id="max-prefill-at-max-seq-len"),
    # the request
    pytest.param(lambda b: ["run", "--fixture", "tiny-llama", "--prompt", ""], "prompt is empty", id="prompt-empty"),
    pytest.param(lambda b: ["run", "--fixture", "tiny-llama", "--prompt", "", "--raw", "--bos-id", "-1"], "prompt is empty (0 tokens)",
                 id="prompt-empty-raw-no-bos"),
    pytest.param(lambda b: [*RUN, "--min-prefill", "40"], "prompt length L = 23", id="prompt-below-prefill-range"),
    pytest.param(lambda b: [*RUN, "--max-prefill", "16"], "prompt length L = 23", id="prompt-above-prefill-range"),
    pytest.param(lambda b: ["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--max-new-tokens", "0"], "max new tokens = 0", id="max-new-zero"),
    pytest.param(lambda b: ["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--max-new-tokens", "-5"], "max new tokens = -5",
                 id="max-new-negative"),
    pytest.param(lambda b: [*RUN, "-k", "0"], "K = 0", id="k-zero"),
    pytest.param(lambda b: [*RUN, "-k", "8"], "K = 8", id="k-above-verify-range"),
    pytest.param(lambda b: ["run", "--fixture", "tiny-llama", "--prompt-file", str(b.root / "nope.txt")], "nope.txt does not exist",
                 id="prompt-file-missing"),
    pytest.param(lambda b: ["run", "--fixture", "tiny-llama", "--prompt-file", b.file("empty.txt", b"  \n")], "empty.txt is empty",
                 id="prompt-file-empty"),
    pytest.param(lambda b: ["run", "--fixture", "tiny-llama", "--prompt-file", b.file("latin1.txt", "café crème".encode("latin-1"))],
                 "latin1.txt is not UTF-8", id="prompt-file-not-utf8"),
    pytest.param(lambda b: [*RUN, "--stop-ids", "1,fifty"], "stop id 'fifty'", id="stop-ids-not-integers"),
    pytest.param(lambda b: [*RUN, "--stop-ids", "1,99999"], "stop id 99999", id="stop-id-out-of-vocab"),
    pytest.param(lambda b: [*RUN, "--stop-ids", "-4"], "stop id -4", id="stop-id-negative"),
    pytest.param(lambda b: [*RUN, "--bos-id", "700"], "bos id 700", id="bos-id-out-of-vocab"),
    # .pte programs and export (nothing is written; `export` checks that executorch imports first,
    # so its cases need it: without it they are the one-line "executorch is not importable" error)
    pytest.param(lambda b: ["run", "--prompt", "Hi", "--pte", str(b.root / "nope.pte")], "nope.pte does not exist",
                 id="pte-missing"),
    pytest.param(lambda b: ["run", "--prompt", "Hi", "--pte", b.file("empty.pte", b"")], "empty.pte is empty",
                 id="pte-empty"),
    pytest.param(lambda b: ["export", "-o", str(b.root / "out.pte"), "--chain-len", "9"], "get_chain_len = 9",
                 id="export-chain-len-outside-verify-range", marks=NEEDS_EXECUTORCH),
    pytest.param(lambda b: ["export", "-o", str(b.root / "out.pte"), "--min-prefill", "50", "--max-prefill", "20"],
                 "get_min_prefill_chunk = 50", id="export-min-prefill-above-max", marks=NEEDS_EXECUTORCH),
    pytest.param(lambda b: ["export", "-o", str(b.root / "out.pte"), "--omit-metadata", "get_foo"],
                 "--omit-metadata get_foo", id="export-omit-unknown-key", marks=NEEDS_EXECUTORCH),
    pytest.param(lambda b: ["export", "-o", str(b.root / "out.pte"), "--target", b.target("truncated"),
                            "--draft", fd(b)], "cannot be loaded", id="export-target-truncated", marks=NEEDS_EXECUTORCH),
    pytest.param(lambda b: ["golden", "record", "--dir", str(b.root / "golden"), "-k", "99", "--max-new-tokens", "8",
                            "--only", "hi"], "chain length K = 99", id="golden-record-k-above-range"),
    pytest.param(lambda b: ["golden", "verify", b.file("golden-latin1.json", "café".encode("latin-1"))],
                 "is not UTF-8 (byte 0xe9 at offset 3)", id="golden-file-not-utf8"),
    # names
    pytest.param(lambda b: ["check", "--fixture", "tiny-lama"], "did you mean 'tiny-llama'", id="unknown-fixture"),
    pytest.param(lambda b: ["check", "--suite", "contxt"], "did you mean 'context'", id="unknown-suite"),
    pytest.param(lambda b: ["gate", "--pte", b.file("g.pte", b"not a program"), "--suite", "budgt"],
                 "did you mean 'budget'", id="gate-unknown-suite"),
    pytest.param(lambda b: ["check", "--fixture", "tiny-llama", "--prompts", str(b.root / "none.json")], "none.json does not exist",
                 id="prompt-set-missing"),
    pytest.param(lambda b: ["check", "--fixture", "tiny-llama", "--prompts", b.file("p.json", b'{"prompts": [{"text": "x"}]}')],
                 "p.json: prompts[0].id is missing", id="prompt-set-malformed"),
    pytest.param(lambda b: ["check", "--fixture", "tiny-llama", "--runner", "eagle3_check.runners.loop:ReferenceRuner"],
                 "did you mean 'eagle3_check.runners.loop:ReferenceRunner'", id="runner-unknown-factory"),
    pytest.param(lambda b: ["check", "--fixture", "tiny-llama", "--runner", "no_such_module_xyz:make"], "no_such_module_xyz",
                 id="runner-module-not-importable"),
    pytest.param(lambda b: ["check", "--fixture", "tiny-llama", "--runner", "ReferenceRunner"], "--runner 'ReferenceRunner'",
                 id="runner-not-module-colon-factory"),
    pytest.param(lambda b: ["check", "--fixture", "tiny-llama", "--runner", "eagle3_check.runners.options:RunOptions"], "RunOptions without run()",
                 id="runner-without-run-method"),
    pytest.param(lambda b: ["check", "--fixture", "tiny-llama", "--runner", "eagle3_check.runners.loop:STOP"], "is a str",
                 id="runner-factory-not-callable-str"),
    pytest.param(lambda b: ["run", "--prompt", "Hi", "--target", fx(b)], "--draft not given", id="target-without-draft"),
    pytest.param(lambda b: ["mutants", "--only", "bos_twise"], "did you mean 'bos_twice'", id="unknown-mutant"),
    # flags: no abbreviations, a suggestion for a typo (cli/parser.Parser)
    pytest.param(lambda b: [*RUN, "--max-new-token", "4"], "did you mean --max-new-tokens?", id="flag-abbreviated"),
    pytest.param(lambda b: ["check", "--fixture", "tiny-llama", "--promts", "p.json"], "did you mean --prompts?", id="flag-typo"),
    pytest.param(lambda b: ["gate", "--pte", "x.pte", "--zzz"], "unknown flag --zzz", id="flag-unknown-no-suggestion"),
    pytest.param(lambda b: ["check", "--fixture", "tiny-llama", "--dtype", "float16"], "invalid choice: 'float16'", id="dtype-not-a-choice"),
    pytest.param(lambda b: [*RUN, "-k", "four"], "invalid int value: 'four'", id="k-not-an-integer"),
    pytest.param(lambda b: ["export"], "-o/--output", id="export-without-output"),
    # checked before anything loads (jobs/common/validate.validated, where the Config is built)
    pytest.param(lambda b: ["check", "--fixture", "tiny-llama", "--cuda-graph"], "--cuda-graph with --device cpu", id="cuda-graph-on-cpu"),
    pytest.param(lambda b: [*RUN, "--device", "gpu"], "--device gpu", id="device-unknown"),
    pytest.param(lambda b: [*RUN, "--eos-id", "999999"], "eos id 999999", id="eos-id-out-of-vocab"),
    pytest.param(lambda b: [*RUN, "--eos-id", "-5"], "eos id -5", id="eos-id-negative"),
    pytest.param(lambda b: [*RUN, "--bos-id", "-5"], "bos id -5", id="bos-id-negative"),
    pytest.param(lambda b: ["check", "--suite", "edge", "--max-new-tokens", "5"], "--max-new-tokens with --suite",
                 id="suite-with-max-new-tokens"),
    pytest.param(lambda b: ["check", "--suite", "edge", "-k", "3"], "-k/--chain-len with --suite", id="suite-with-k"),
    pytest.param(lambda b: ["check", "--fixture", "tiny-llama", "--prompts", b.file("blank.json", b'{"prompts": [{"id": "blank", "text": " "}]}')],
                 "prompt 'blank'", id="prompt-set-empty-text"),
    pytest.param(lambda b: ["check", "--fixture", "tiny-llama", "--prompts", b.file("dup.json", b'{"prompts": [{"id": "a", "text": "x"}, '
                                                                      b'{"id": "a", "text": "y"}]}')],
                 "prompt id 'a' appears twice", id="prompt-set-duplicate-id"),
    pytest.param(lambda b: ["gate", "--pte", str(b.root / "nope.pte")], "nope.pte does not exist", id="gate-pte-missing"),
    pytest.param(lambda b: ["export", "-o", str(b.root / "no-dir" / "x.pte")], "no-dir does not exist",
                 id="export-output-dir-missing"),
    pytest.param(lambda b: ["golden", "verify", str(b.root / "nope.json")], "nope.json does not exist",
                 id="golden-verify-missing"),
    pytest.param(lambda b: ["fixtures", "build", "tiny-llama", "--steps", "0", "--root", str(b.root / "fx")],
                 "--steps 0", id="fixtures-build-steps-zero"),
    pytest.param(lambda b: ["check", "--pte", b.file("any.pte", b"x"), "-k", "0"], "K = 0", id="pte-k-zero"),
]


def assert_clean_error(capsys, rc: int, named: str, root: Path | None = None, before=None) -> str:
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err
    assert rc == 2, cap.err
    assert cap.out == "", "partial output on stdout"
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1, cap.err
    line = lines[0]
    assert line.startswith("error: ") and "; expected " in line and ". Fix: " in line, line
    assert named in line, line
    if root is not None:
        assert sorted(root.rglob("*")) == before, "a file was written"
    return line


@pytest.mark.parametrize("name, content, named", [
    pytest.param("empty.pte", b"", "empty.pte is empty", id="empty"),
    pytest.param("nope.pte", None, "nope.pte does not exist", id="missing"),
])
def test_a_bad_pte_file_is_named_before_executorch_is_needed(capsys, bad, monkeypatch, name, content, named):
    """Without executorch (the runtime import fails) a missing or empty .pte is still named as such:
    the load probe leaves those files to the backend's own checks, which run before the import."""
    def no_runtime():
        raise OptionError("executorch is not importable (stubbed)", "the executorch package", "install it")

    monkeypatch.setattr("eagle3_check.program.pte_backend._runtime", no_runtime)
    path = bad.file(name, content) if content is not None else str(bad.root / name)
    before = sorted(bad.root.rglob("*"))
    rc = main(["run", "--prompt", "Hi", "--pte", path])
    assert_clean_error(capsys, rc, named, bad.root, before)


@pytest.mark.parametrize("argv, named", CLI_CASES)
def test_cli_bad_input(capsys, bad, argv, named):
    args = argv(bad)
    before = sorted(bad.root.rglob("*"))
    assert_clean_error(capsys, main(args), named, bad.root, before)


def test_an_emitted_id_the_tokenizer_cannot_name_is_an_error(bad):
    """Library level (no CLI flag makes the fixture emit a padding id): a tokenizer 22 ids short of
    a 512-row target passes as padding, but the toy target emits id 490 right away (after 41)."""
    tokenizer = Tokenizer.load(bad.small_vocab_tokenizer(490))
    assert toy.next_token(41) == 490
    opts = RunOptions(stop_ids=(), stop_token=None, eos_id=None, bos_id=-1, max_new_tokens=4)
    with pytest.raises(OptionError, match="the target emitted id 490, beyond the 490 ids") as e:
        ReferenceRunner().run(toy.ToyProgram(), tokenizer, [300, 41], opts)
    assert "\n" not in str(e.value) and "Fix: pass the target's own tokenizer" in str(e.value)
