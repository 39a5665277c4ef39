"""Peak RSS of the harness while a runner binary writes N MB to its stderr (issue 30: 500 MB was kept
whole, RSS 1.95 GB). A fake binary (a shell script: `head -c N /dev/zero | tr` onto stderr, then the
`[ids]` line) runs through `ExecRunner.execute`, which keeps the head and tail of stderr and its size
(runners/proc.BoundedOutput). Prints one JSON object; `--out FILE` writes it too.

    python bench/binary_stderr_rss.py --mb 500 --out bench/results/binary-stderr-rss.json
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=500, help="megabytes the fake binary writes to stderr")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from eagle3_check.atomic import write_text_atomic
    from eagle3_check.runners.binary.runner import STDERR_KEPT_BYTES, ExecRunner
    from eagle3_check.runners.options import RunOptions

    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "loud.sh"
        script.write_text(f"#!/bin/sh\nhead -c {args.mb * 1000 * 1000} /dev/zero | tr '\\0' x >&2\n"
                          "echo '[ids] 1,2' >&2\n")
        script.chmod(0o755)
        before = peak_rss_mb()
        t0 = time.perf_counter()
        got = ExecRunner(f"exec:{script}", timeout=600.0).execute("m.pte", "tok.json", "Hi", RunOptions())
        seconds = time.perf_counter() - t0
    result = {"stderr_mb_written": args.mb, "stderr_bytes_kept": len(got.stderr),
              "kept_limit_bytes": sum(STDERR_KEPT_BYTES), "ids_line_kept": got.stderr.rstrip().endswith(b"[ids] 1,2"),
              "returncode": got.returncode, "peak_rss_mb_before": round(before, 1),
              "peak_rss_mb_after": round(peak_rss_mb(), 1), "seconds": round(seconds, 2),
              "python": sys.version.split()[0]}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        write_text_atomic(args.out, text + "\n", "result")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
