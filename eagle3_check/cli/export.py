"""`eagle3-check export`: write a speculator `.pte` (ExecuTorch; needs the `pte` extra)."""

from __future__ import annotations

import argparse
import json

from eagle3_check.cli.parser import Given
from eagle3_check.program.metadata_check import BACKENDS

HELP = """Export a target + EAGLE-3 draft to an ExecuTorch .pte with the methods prefill,
target_verify and draft_decode, the metadata as constant methods, XNNPACK where it lowers
(portable kernels elsewhere; recorded in get_export_backend and NAME.export.json).

examples:
  eagle3-check export -o tiny.pte                            # the embedded tiny-llama fixture
  eagle3-check export --target T --draft D -o model.pte --max-verify-len 8
  eagle3-check export --from-pte tiny.pte --omit-metadata get_chain_len -o bad.pte
  eagle3-check export --quantize int4-weight -o q4.pte           # INT4 weights (groups of 32), fp32 compute
  eagle3-check export --quantize int8-weight --quantize-draft -o q8.pte
  eagle3-check export --verify-kv-window -o kvwin.pte   # target_verify(tokens, positions, kv_window)
  eagle3-check export --dtype bfloat16 -o tiny-bf16.pte   # bf16 weights and features
  eagle3-check export --aoti -o tiny.pt2                # AOTInductor for CUDA (on the GPU machine; docs/cuda.md)
  eagle3-check export --aoti --device cpu -o tiny-cpu.pt2   # AOTInductor for CPU (C++ kernels)
  eagle3-check export --aoti --aoti-weights external --target T --draft D -o big.pt2   # kernels only, weights bound at load
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export a speculator to an ExecuTorch .pte", description=HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", required=True, help="the .pte to write")
    p.add_argument("--fixture", default=None, help="fixture name (default tiny-llama: seconds; "
                   "a real fixture, e.g. smollm2-135m, exports in ~30 CPU-minutes)")
    p.add_argument("--target", default=None, help="HF save_pretrained target directory (with --draft)")
    p.add_argument("--draft", default=None, help="speculators-layout EAGLE-3 draft directory (with --target)")
    p.add_argument("--backend", default="xnnpack", choices=BACKENDS,
                   help="xnnpack-bf16: with --dtype bfloat16, bf16 linears on XNNPACK's bf16 kernels instead of "
                   "ExecuTorch's portable ones (opt-in in ExecuTorch; docs/pte.md)")
    p.add_argument("--max-seq-len", type=int, default=None)
    p.add_argument("--min-prefill", type=int, default=None)
    p.add_argument("--max-prefill", type=int, default=None)
    p.add_argument("--chain-len", "-k", type=int, default=None, help="default K (get_chain_len)")
    p.add_argument("--min-verify-len", type=int, default=None, help="smallest verify window (K + 1)")
    p.add_argument("--max-verify-len", type=int, default=None, help="largest verify window (K + 1)")
    p.add_argument("--verify-kv-window", action="store_true",
                   help="write the newer target_verify form (a third input kv_window int32 [V], dynamic C and V, "
                   "no verify range metadata: DESIGN §1)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                   help="weights and features of the program (default float32)")
    p.add_argument("--external-data", action="store_true",
                   help="write the weights to NAME.ptd beside NAME.pte (load it with --data-path NAME.ptd)")
    p.add_argument("--stock-lowering", action="store_true",
                   help="lower as ExecuTorch does (its per-partition legalize_graph, XNNPACK's preprocess in this "
                        "process), not the exact fast way (same .pte bytes, slower: docs/speed.md)")
    p.add_argument("--omit-metadata", action="append", default=[], metavar="KEY",
                   help="leave a metadata constant method out (repeatable; for negative fixtures)")
    p.add_argument("--quantize", default=None, choices=["int8-weight", "int4-weight"],
                   help="weight-only quantization of the target's linear layers (torchao; see docs/quantized-exports.md)")
    p.add_argument("--group-size", type=int, default=None, metavar="N",
                   help="input columns per scale (default: 32 for int4-weight, per output channel for int8-weight)")
    p.add_argument("--quantize-draft", action="store_true", help="quantize the draft's linear layers too")
    p.add_argument("--from-pte", default=None, metavar="FILE",
                   help="copy an existing .pte, only dropping --omit-metadata keys (fast)")
    p.add_argument("--aoti", action="store_true", dest="aoti_export",
                   help="compile with AOTInductor into a .pt2 package (three models, caches shared as inputs, the "
                   "metadata in NAME.export.json) instead of a .pte; for --device (default cuda)")
    p.add_argument("--aoti-weights", default=None, choices=["embedded", "external"],
                   help="with --aoti: embed the weights in each model (default), or compile the kernels only and "
                   "bind the weights at load from the target and draft (one copy; for large targets; docs/cuda.md)")
    p.add_argument("--device", default="cpu", action=Given,
                   help="with --aoti: the device the package is compiled for (default cuda; cpu for a CPU package)")
    p.add_argument("--json", action="store_true", help="print the export record as JSON")
    p.add_argument("--no-progress", action="store_true",
                   help="no phase lines on stderr (trace each method, lower, to_executorch, serialize)")
    p.set_defaults(func=main)


def main(cfg) -> int:
    from eagle3_check.jobs.export import copy_pte, export

    if cfg.export.aoti_export:
        return aoti_main(cfg)
    if cfg.export.from_pte:
        copy_pte(cfg)
        print(f"wrote {cfg.output} (copy of {cfg.export.from_pte} without {', '.join(cfg.export.omit_metadata) or 'nothing'})")
        return 0
    record = export(cfg, on_phase=None if cfg.no_progress else phase_printer("export"))
    if cfg.json:
        print(json.dumps(record.to_json(), indent=2))
    else:
        delegated = ", ".join(f"{m} {n}" for m, n in record.delegated.items())
        omitted = f"; omitted {', '.join(record.omitted)}" if record.omitted else ""
        phases = ", ".join(f"{name} {s:.0f} s" for name, s in record.phases.items())
        if record.quantization:
            omitted += f"; quantized {len(record.quantization['layers'])} layers: {record.quantization['tag']}"
        omitted += f"; weights in {record.data_path}" if record.data_path else ""
        form = "target_verify with kv_window" if cfg.export.verify_kv_window else "target_verify(tokens, positions)"
        print(f"wrote {record.path} ({cfg.export.backend}, {cfg.dtype}, {form}; XNNPACK delegate calls: {delegated}; "
              f"{record.seconds:.0f} s: {phases}{omitted})")
    return 0


def aoti_main(cfg) -> int:
    from eagle3_check.jobs.common.aoti import export_aoti

    record = export_aoti(cfg, on_phase=None if cfg.no_progress else phase_printer("export --aoti"))
    if cfg.json:
        print(json.dumps(record, indent=2))
    else:
        phases = ", ".join(f"{name} {s:.0f} s" for name, s in record["phases"].items())
        weights = "weights bound at load" if record["weights"]["mode"] == "external" else "weights embedded"
        print(f"wrote {record['path']} (AOTInductor, {record['device']}, {record['dtype']}, target_verify "
              f"{record['target_verify']}, {weights}; {record['seconds']:.0f} s: {phases}; metadata in the sidecar)")
    return 0


def phase_printer(command: str):
    """on_phase for a long command: one stderr line as each phase starts, with the time so far
    ("[  12s] export: lower"), so minutes of work are never silent."""
    import sys
    import time

    t0 = time.perf_counter()

    def on_phase(name: str) -> None:
        print(f"[{time.perf_counter() - t0:5.0f}s] {command}: {name}", file=sys.stderr, flush=True)

    return on_phase
