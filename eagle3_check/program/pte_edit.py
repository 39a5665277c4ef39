"""Edit an existing `.pte` without re-exporting: drop metadata constant methods.

Building a negative fixture by re-exporting costs a full lowering, and a full deserialize /
re-serialize of the flatbuffer through ExecuTorch's Python schema costs the import of
`executorch.exir` and 2.5 s more (the gate's `metadata/no-chain-len` case, the first to pay it, took
36-39 s through a binary on a busy machine). Dropping a constant method only shortens one vector of the
flatbuffer, so it is done on the bytes (milliseconds): the program's execution_plan is a vector of
offsets to `ExecutionPlan` tables; the kept entries move down, each rebased to its new slot, and
the length shrinks. Every other byte stays where it was (the compute methods, constants,
delegate blobs, the extended header and the segments after the flatbuffer: no offset moves);
the dropped plans' tables stay in the file as unreferenced bytes. A test pins that the runtime
sees the result exactly as it saw the old full rewrite (tests/pte/test_pte_edit.py).
"""

from __future__ import annotations

import struct
from pathlib import Path

from eagle3_check.atomic import write_bytes_atomic
from eagle3_check.errors import InputError
from eagle3_check.program.export import check_omit
from eagle3_check.program.sidecar import read_sidecar, write_sidecar

_IDENT = b"ET12"  # program.fbs: file_identifier
_PLAN_FIELD = 1  # program.fbs: table Program { version: uint; execution_plan: [ExecutionPlan]; ... }
_NAME_FIELD = 0  # program.fbs: table ExecutionPlan { name: string; ... }


def _u32(buf: bytearray, at: int) -> int:
    return struct.unpack_from("<I", buf, at)[0]


def _field(buf: bytearray, table: int, index: int) -> int:
    """The absolute position of field `index` of the table at `table`, 0 when absent (flatbuffers:
    the table starts with an int32 soffset back to its vtable: u16 vtable size, u16 table size, then
    one u16 offset per field)."""
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    slot = 4 + 2 * index
    if slot + 2 > struct.unpack_from("<H", buf, vtable)[0]:
        return 0
    off = struct.unpack_from("<H", buf, vtable + slot)[0]
    return table + off if off else 0


def _plans(buf: bytearray) -> tuple[int, list[tuple[str, int]]]:
    """(the execution_plan vector's position, [(method name, absolute position of its table)]).
    A uoffset is relative to its own position. Example: slot at 120 holding 40 -> table at 160."""
    if bytes(buf[4:8]) != _IDENT:
        raise ValueError(f"file identifier {bytes(buf[4:8])!r}, expected {_IDENT!r}")
    root = _u32(buf, 0)
    at = _field(buf, root, _PLAN_FIELD)
    if not at:
        raise ValueError("the program has no execution_plan")
    vec = at + _u32(buf, at)
    plans = []
    for i in range(_u32(buf, vec)):
        slot = vec + 4 + 4 * i
        table = slot + _u32(buf, slot)
        name_at = _field(buf, table, _NAME_FIELD)
        s = name_at + _u32(buf, name_at)
        plans.append((bytes(buf[s + 4:s + 4 + _u32(buf, s)]).decode("utf-8"), table))
    return vec, plans


def drop_plans(data: bytes, keys: list[str]) -> tuple[bytes, list[str]]:
    """`data` (a .pte's bytes) without the execution plans named in `keys`, and the names it had.
    Worked example: plans [prefill, get_chain_len, get_max_seq_len] at tables 900, 950, 990,
    vector at 100 (slots 104, 108, 112); dropping get_chain_len writes length 2, slot 104 = 900 - 104
    (unchanged), slot 108 = 990 - 108 (was 990 - 112), and zeroes slot 112."""
    buf = bytearray(data)
    vec, plans = _plans(buf)
    kept = [table for name, table in plans if name not in keys]
    struct.pack_into("<I", buf, vec, len(kept))
    for j, table in enumerate(kept):
        slot = vec + 4 + 4 * j
        struct.pack_into("<I", buf, slot, table - slot)
    for j in range(len(kept), len(plans)):
        struct.pack_into("<I", buf, vec + 4 + 4 * j, 0)
    return bytes(buf), [name for name, _ in plans]


def omit_metadata(src: str | Path, dst: str | Path, keys: list[str] | tuple[str, ...]) -> Path:
    """Copies `src` to `dst` without the constant methods named in `keys`."""
    keys = check_omit(keys)
    s, d = Path(src), Path(dst)
    if not s.is_file():
        raise InputError(f"--from-pte {s} does not exist", "an exported .pte", "export one with `eagle3-check export`")
    try:
        data, names = drop_plans(s.read_bytes(), keys)
    except (ValueError, struct.error, UnicodeDecodeError, IndexError) as e:
        raise InputError(f"--from-pte {s} cannot be parsed ({str(e)[:80]})", "an ExecuTorch .pte",
                         "re-export it") from None
    for key in keys:
        if key not in names:
            raise InputError(f"--omit-metadata {key}: {s} has no such method", f"one of {names}",
                             "omit a key the program has")
    rec = read_sidecar(s) if d.suffix == ".pte" else None  # checked against the source before the write
    write_bytes_atomic(d, data, ".pte")
    if rec is not None:
        rec.update(path=str(d), omitted=sorted(set(rec.get("omitted", [])) | set(keys)),
                   metadata={k: v for k, v in rec.get("metadata", {}).items() if k not in keys})
        write_sidecar(d, rec)  # after the .pte: its digest is the new file's
    return d
