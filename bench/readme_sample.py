"""README's sample output of `eagle3-check check`, produced from a real run (issue 52).

Runs `python -m eagle3_check.cli check ARGS --no-progress` in the repository root (the working
directory decides how the report prints the paths inside it: relative, `shown_path`), makes any
path of the checkout that is still absolute relative to it, and prints the block or writes it into
README.md between the line that ends "printed on stdout" ... and the closing fence.

  PYTHONPATH=. python bench/readme_sample.py --write        # README's run: SmolLM2, ~2 CPU-minutes
  PYTHONPATH=. python bench/readme_sample.py --fixture tiny-llama   # print the tiny fixture's, seconds

tests/test_readme_sample.py compares README's block with this script's output format (header,
columns, summary lines) on a tiny run, and checks it holds no path of a machine.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"(```text\n)(.*?)(```)", re.S)  # README's first text block: the sample output


def relative(text: str, root: Path = ROOT) -> str:
    """`text` with every absolute path inside `root` made relative to it (`/x/repo/fixtures/a` -> `fixtures/a`)."""
    return text.replace(str(root.resolve()) + os.sep, "").replace(str(root) + os.sep, "")


def sample(args: list[str], root: Path = ROOT) -> str:
    """The stdout of `check ARGS` run in `root`, its paths made relative: README's block."""
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "eagle3_check.cli", "check", *args, "--no-progress"],
                          capture_output=True, text=True, cwd=root, env=env)
    if proc.returncode not in (0, 1):  # 1: a failing check still has its report
        raise SystemExit(f"check {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return relative(proc.stdout, root)


def readme_block(text: str) -> str:
    """README's sample block (the first ```text fence)."""
    m = BLOCK.search(text)
    if not m:
        raise SystemExit("README.md has no ```text block")
    return m.group(2)


def write(block: str, readme: Path = README) -> None:
    from eagle3_check.atomic import write_text_atomic

    text = readme.read_text()
    m = BLOCK.search(text)
    write_text_atomic(readme, text[:m.start(2)] + block + text[m.end(2):], "README")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="write the block into README.md")
    ap.add_argument("--fixture", default=None, help="check --fixture NAME (default: check's own default program)")
    args = ap.parse_args(argv)
    block = sample(["--fixture", args.fixture] if args.fixture else [])
    if args.write:
        write(block)
    else:
        print(block, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
