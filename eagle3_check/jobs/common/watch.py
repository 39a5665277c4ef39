"""The files a check reads, hashed before it starts and after its runner is gone (issue 47, item 5).

A runner that writes into the user's repository (a golden beside the goldens, the prompt file, the
program) changes what the next check reads. As root its process cannot (runners/isolate/sandbox.py: it is
`nobody`); a binary, or any runner of a harness that is not root, can. So `check`, `check --suite`
and `golden verify` hash what they read before the runner starts (`FileWatch(read_files(cfg))`) and
again before the report is written: a change fails the run (exit 1), named in the report
(`info.files_changed` / `files_changed`, a JUnit case `files-unchanged`) and on stderr.

What is watched: --prompts, --pte, --data-path, --tokenizer, --target and --draft (their files), the
goldens (`golden verify`'s, or the committed ones), the baseline, and the fixture directories (the
repository's `fixtures/`); at most MAX_FILES files of at most MAX_BYTES each are hashed (a large
checkpoint is recorded by size and mtime instead: `stat`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

MAX_FILES = 2000
MAX_BYTES = 256 * 1024 * 1024  # hashing a multi-GB checkpoint twice per check would cost minutes


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        out = []
        for root, dirs, names in os.walk(path):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            out += [Path(root) / n for n in names]
            if len(out) > MAX_FILES:
                break
        return out[:MAX_FILES]
    return []


def _digest(path: Path) -> str:
    try:
        st = path.stat()
        if st.st_size > MAX_BYTES:
            return f"stat:{st.st_size}:{st.st_mtime_ns}"
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return "missing"


def read_files(cfg) -> list[Path]:
    """The inputs `cfg` names, and the goldens and fixtures of the repository."""
    from eagle3_check.fixtures.registry import fixtures_root

    golden_root = Path(__file__).resolve().parents[3] / "golden"  # the repository's (jobs.golden.file.golden_root)
    named = [cfg.value(n) for n in ("prompts", "pte", "aoti", "data_path", "tokenizer", "target", "draft",
                                              "baseline", "golden")]
    named += list(cfg.golden.goldens)
    return [Path(p) for p in named if isinstance(p, (str, os.PathLike))] + [golden_root, fixtures_root()]


class FileWatch:
    """Hashes of `paths` (files, or every file below a directory) now; `changed()` names what differs."""

    def __init__(self, paths: list[Path]):
        self.before = {str(f): _digest(f) for p in paths for f in _files(Path(p))}
        self.roots = [Path(p) for p in paths if Path(p).is_dir()]

    def changed(self) -> list[str]:
        """'PATH (was sha256 ab12.., now cd34..)' for each file changed or removed; 'PATH (new)' for a
        file that appeared under a watched directory."""
        out = []
        for path, was in self.before.items():
            now = _digest(Path(path))
            if now != was:
                out.append(f"{path} (was {was[:12]}, now {now[:12]})")
        seen = set(self.before)
        for root in self.roots:
            out += [f"{f} (new)" for f in _files(root) if str(f) not in seen]
        return out[:50]


def fail_line(changed: list[str]) -> str:
    return (f"error: the run changed {len(changed)} file(s) it reads: {'; '.join(changed[:5])}"
            f"{' ...' if len(changed) > 5 else ''}. The run fails: a runner must not write outside its directory")
