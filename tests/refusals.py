"""The refusals a newcomer met only after torch and the model had loaded (issue 52): the one list.

Each is decided from the file system or an import spec where the Config is built
(jobs/common/validate.py `_program_files`, eagle3_check/preflight.py). `materialise(tmp)` writes the
files they name and returns (id, argv, the text the one `error:` line holds). Used by
tests/test_refusals_before_torch.py (one line, exit 2, within 2x `--help`) and
tests/cli/test_preflight_no_torch.py (torch never imported).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DRAFT = str(ROOT / "fixtures" / "tiny-llama" / "draft")

# (id, argv with {placeholders}, what the error line must hold)
REFUSALS = [
    ("runner-module-missing", ["check", "--runner", "nosuchmodule:factory"], "module 'nosuchmodule' cannot be imported"),
    ("target-without-config", ["check", "--target", "{empty_dir}", "--draft", DRAFT], "has no config.json"),
    ("gate-runner-binary-missing", ["gate", "--pte", "{magic_pte}", "--runner", "exec:/path/that/does/not/exist"],
     "not an executable file"),
    ("pte-not-a-program", ["check", "--pte", "{text_pte}"], "is not an ExecuTorch program"),
    ("runner-binary-without-pte", ["check", "--runner", "exec:/bin/false"], "without --pte"),
    ("export-bf16-backend-fp32", ["export", "--backend", "xnnpack-bf16", "-o", "{empty_dir}/t.pte"],
     "--backend xnnpack-bf16 with --dtype float32"),
]


def materialise(tmp: Path) -> list[tuple[str, list[str], str]]:
    """The refusals with their files written under `tmp`: an empty directory, a text file named
    .pte, and a file that has a .pte's identifier (ET12 at byte 4) and nothing else."""
    files = {"empty_dir": tmp / "empty", "text_pte": tmp / "text.pte", "magic_pte": tmp / "magic.pte"}
    files["empty_dir"].mkdir(exist_ok=True)
    files["text_pte"].write_text("not a program\n")
    files["magic_pte"].write_bytes(b"\0\0\0\0ET12" + bytes(56))
    names = {k: str(v) for k, v in files.items()}
    return [(rid, [a.format(**names) for a in argv], want) for rid, argv, want in REFUSALS]
