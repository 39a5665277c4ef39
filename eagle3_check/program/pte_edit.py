"""Edit an existing `.pte` without re-exporting: drop metadata constant methods.

Building a negative fixture by re-exporting costs a full lowering; the flatbuffer can
instead be read, its `get_*` execution plans filtered, and written back (seconds).
Compute methods, constants and delegate blobs are kept as they are.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_check.atomic import write_bytes_atomic
from eagle3_check.errors import InputError
from eagle3_check.program.export import check_omit, require_executorch
from eagle3_check.program.sidecar import read_sidecar, write_sidecar


def omit_metadata(src: str | Path, dst: str | Path, keys: list[str] | tuple[str, ...]) -> Path:
    """Copies `src` to `dst` without the constant methods named in `keys`."""
    require_executorch()
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    keys = check_omit(keys)
    s, d = Path(src), Path(dst)
    if not s.is_file():
        raise InputError(f"--from-pte {s} does not exist", "an exported .pte", "export one with `eagle3-check export`")
    try:
        pte = deserialize_pte_binary(s.read_bytes())
    except Exception as e:
        raise InputError(f"--from-pte {s} cannot be parsed ({str(e)[:80]})", "an ExecuTorch .pte",
                         "re-export it") from None
    names = [p.name for p in pte.program.execution_plan]
    for key in keys:
        if key not in names:
            raise InputError(f"--omit-metadata {key}: {s} has no such method", f"one of {names}",
                             "omit a key the program has")
    pte.program.execution_plan = [p for p in pte.program.execution_plan if p.name not in keys]
    rec = read_sidecar(s) if d.suffix == ".pte" else None  # checked against the source before the write
    write_bytes_atomic(d, bytes(serialize_pte_binary(pte, extract_delegate_segments=True)), ".pte")
    if rec is not None:
        rec.update(path=str(d), omitted=sorted(set(rec.get("omitted", [])) | set(keys)),
                   metadata={k: v for k, v in rec.get("metadata", {}).items() if k not in keys})
        write_sidecar(d, rec)  # after the .pte: its digest is the new file's
    return d
