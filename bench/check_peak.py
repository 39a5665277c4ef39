"""Runs one eagle3-check command in this process and reports the peak GPU memory it allocated.

    python bench/check_peak.py OUT.json check --target T --draft D --device cuda --dtype bfloat16 --json

Writes {"argv", "exit", "peak_allocated_gib", "peak_reserved_gib", "seconds"} to OUT.json (atomic) and
prints it on stderr; the command's own output goes where it always goes. The peak is
torch.cuda.max_memory_allocated over the whole command: weights, KV caches, CUDA-graph pools, the
reference's forwards (docs/scale.md); `peak_allocated_gib_by_device` gives each GPU's when
`--devices` spreads the target.
"""

from __future__ import annotations

import json
import sys
import time

import torch


def main(argv: list[str]) -> int:
    from eagle3_check.atomic import write_text_atomic
    from eagle3_check.cli import main as cli

    out, args = argv[0], argv[1:]
    torch.cuda.init()  # torch 2.11: resetting the peak of a device not yet initialised is 'Invalid device argument'
    n = torch.cuda.device_count()
    for i in range(n):
        torch.cuda.reset_peak_memory_stats(i)
    t0 = time.time()
    try:
        code = cli(args)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    gib = 2**30
    info = {"argv": args, "exit": code, "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / gib, 2),
            "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / gib, 2),
            "seconds": round(time.time() - t0, 1),
            # per GPU (--devices spreads the target): allocated peak of cuda:0, cuda:1, ...
            "peak_allocated_gib_by_device": [round(torch.cuda.max_memory_allocated(i) / gib, 2) for i in range(n)]}
    write_text_atomic(out, json.dumps(info) + "\n")
    print(json.dumps(info), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
