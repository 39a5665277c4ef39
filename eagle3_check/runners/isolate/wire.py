"""The framed protocol between the harness and its runner child, and the plain data it carries.

A frame is a 4-byte big-endian length and that many bytes. Parent -> child frames are pickles
(the child trusts the parent: the setup names the program builder); child -> parent frames are
UTF-8 JSON only, never pickles (unpickling would run the child's code in the parent). What the
child sends is validated here before the parent uses it (`run_from_plain`, `calls_from_plain`):
the exact fields, Python ints where ids and counts are due, ranges (ids >= 0, counts >= 0, K
>= 1), lengths bounded, tensors of a float dtype whose bytes match their shape. Anything else
is a `WireError`, which fails that request naming the field.

Worked example: {"tokens": [5, 7.0], ...} -> WireError("run.tokens[1] is float (7.0); expected an int >= 0").
"""

from __future__ import annotations

import base64
import json
import math
import pickle
import struct
from dataclasses import fields

from eagle3_check.runners.result import RunResult

MAX_FRAME = 512 * 1024 * 1024  # bytes in one frame (a request's call log with its features)
MAX_LEN = 1_000_000  # items in one list the child reports (tokens, calls, positions)
MAX_ID = 2**62  # ids and counts are int64 where they meet torch
METHODS = ("prefill", "target_verify", "draft_decode")
DTYPES = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8}
HEADER = struct.Struct(">I")


class WireError(Exception):
    """A child's message that is not what the protocol allows; `str()` names the field."""


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


def send_pickle(fd: int, obj) -> None:
    _write_all(fd, frame(pickle.dumps(obj)))


def send_json(fd: int, obj) -> None:
    _write_all(fd, frame(json.dumps(obj, allow_nan=False).encode()))


def _write_all(fd: int, data: bytes) -> None:
    import os

    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_frame_blocking(fd: int) -> bytes | None:
    """One whole frame from `fd` (the child's side: it waits for its parent), None at EOF."""
    import os

    def exactly(n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    head = exactly(HEADER.size)
    if head is None:
        return None
    return exactly(HEADER.unpack(head)[0])


class FrameReader:
    """Bytes in (as they arrive on a pipe), whole frames out; a frame over MAX_FRAME is a WireError."""

    def __init__(self):
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        out = []
        while len(self.buf) >= HEADER.size:
            (n,) = HEADER.unpack(self.buf[: HEADER.size])
            if n > MAX_FRAME:
                raise WireError(f"a frame of {n} bytes (at most {MAX_FRAME})")
            if len(self.buf) < HEADER.size + n:
                break
            out.append(bytes(self.buf[HEADER.size : HEADER.size + n]))
            del self.buf[: HEADER.size + n]
        return out


def decode_json(payload: bytes) -> dict:
    try:
        msg = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise WireError(f"a frame that is not UTF-8 JSON ({type(e).__name__})") from None
    if not isinstance(msg, dict):
        raise WireError(f"a message that is a {type(msg).__name__}, not an object")
    return msg


# --- the child's side: plain data out -------------------------------------------------------------

def tensor_plain(t) -> dict | None:
    """A CPU tensor as {"dtype", "shape", "data": base64 of its bytes}; None stays None."""
    if t is None:
        return None
    import torch

    t = t.detach().cpu().contiguous()
    raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
            "data": base64.b64encode(raw).decode("ascii")}


def run_plain(run) -> dict:
    """The RunResult's fields as plain data (what the parent judges and reports, the same object)."""
    out = {}
    for f in fields(RunResult):
        v = object.__getattribute__(run, f.name)
        out[f.name] = _plain(v)
    return out


def _plain(v):
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if type(v) is int:
        return v
    if type(v) is float:
        return v if math.isfinite(v) else repr(v)
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return {"__type__": type(v).__name__, "repr": repr(v)[:60]}  # named by the parent's validation


def calls_plain(rec) -> dict:
    return {"calls": [{"method": c.method, "tokens": c.tokens, "positions": c.positions,
                       "feature": tensor_plain(c.feature), "out_ids": c.out_ids,
                       "out_feature": tensor_plain(c.out_feature)} for c in rec.calls],
            "refused": [[m, list(p), str(why)] for m, p, why in rec.refused]}


# --- the parent's side: plain data in, validated ----------------------------------------------------

def _shown(v) -> str:
    if isinstance(v, dict) and "__type__" in v:
        return f"{v['__type__']} ({v.get('repr', '')!s:.40})"
    return f"{type(v).__name__} ({v!r:.40})"


def _int(v, where: str, low: int = 0) -> int:
    if type(v) is not int or not low <= v < MAX_ID:
        raise WireError(f"{where} is {_shown(v)}; expected an int >= {low}")
    return v


def _ints(v, where: str) -> list[int]:
    if not isinstance(v, list) or len(v) > MAX_LEN:
        raise WireError(f"{where} is {_shown(v)}; expected a list of at most {MAX_LEN} ints")
    return [_int(x, f"{where}[{i}]") for i, x in enumerate(v)]


def run_from_plain(d, vocab_size: int | None = None) -> RunResult:
    """A RunResult (the class itself, never a subclass) from the child's plain data, validated."""
    names = [f.name for f in fields(RunResult)]
    if not isinstance(d, dict) or sorted(d) != sorted(names):
        got = sorted(d) if isinstance(d, dict) else type(d).__name__
        raise WireError(f"run has fields {got}; expected {sorted(names)}")
    for name in ("tokens", "prompt_ids"):
        ids = _ints(d[name], f"RunResult.{name}")
        if vocab_size and any(t >= vocab_size for t in ids):
            i = next(i for i, t in enumerate(ids) if t >= vocab_size)
            raise WireError(f"RunResult.{name}[{i}] = {ids[i]} is outside the vocabulary (size {vocab_size})")
    _ints(d["accepted"], "RunResult.accepted")
    _int(d["rounds"], "RunResult.rounds")
    _int(d["k"], "RunResult.k", low=1)
    _int(d["max_new"], "RunResult.max_new")
    if type(d["tau"]) not in (int, float) or not math.isfinite(d["tau"]):
        raise WireError(f"RunResult.tau is {_shown(d['tau'])}; expected a finite float")
    for name in ("text", "stop_reason"):
        if not isinstance(d[name], str):
            raise WireError(f"RunResult.{name} is {_shown(d[name])}; expected a str")
    if not isinstance(d["notes"], list) or not all(isinstance(n, str) for n in d["notes"]):
        raise WireError(f"RunResult.notes is {_shown(d['notes'])}; expected a list of str")
    for name, ok in (("method_ms", lambda t: type(t) in (int, float) and math.isfinite(t)),
                     ("method_calls", lambda t: type(t) is int and 0 <= t < MAX_ID)):
        m = d[name]
        if not isinstance(m, dict) or not all(ok(t) for t in m.values()):
            raise WireError(f"RunResult.{name} is {_shown(m)}; expected a dict of method -> number")
    from eagle3_check.untrusted import bounded

    return bounded(RunResult(**{**d, "tau": float(d["tau"])}))


def tensor_from_plain(d, where: str):
    """The tensor (a fresh CPU tensor) of `tensor_plain`'s dict, its dtype, shape and size checked."""
    import torch

    if d is None:
        return None
    if not isinstance(d, dict) or set(d) != {"dtype", "shape", "data"} or d["dtype"] not in DTYPES:
        raise WireError(f"{where} is {_shown(d)}; expected a tensor of {', '.join(DTYPES)}")
    shape = _ints(d["shape"], f"{where}.shape")
    if len(shape) != 3 or not isinstance(d["data"], str):
        raise WireError(f"{where}.shape {shape}; expected [1, T, H]")
    try:
        raw = base64.b64decode(d["data"], validate=True)
    except ValueError:
        raise WireError(f"{where}.data is not base64") from None
    if len(raw) != math.prod(shape) * DTYPES[d["dtype"]]:
        raise WireError(f"{where}: {len(raw)} bytes for shape {shape} of {d['dtype']}")
    if not raw:
        return torch.empty(shape, dtype=getattr(torch, d["dtype"]))
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(getattr(torch, d["dtype"])).reshape(shape)


def calls_from_plain(d) -> tuple[list, list]:
    """(instrument.Call list, refused list) from `calls_plain`'s dict, validated."""
    from eagle3_check.runners.instrument import Call

    if not isinstance(d, dict) or not isinstance(d.get("calls"), list) or not isinstance(d.get("refused"), list) \
            or len(d["calls"]) > MAX_LEN:
        raise WireError(f"the call log is {_shown(d)}; expected {{'calls': [...], 'refused': [...]}}")
    calls = []
    for i, c in enumerate(d["calls"]):
        where = f"call {i}"
        keys = {"method", "tokens", "positions", "feature", "out_ids", "out_feature"}
        if not isinstance(c, dict) or set(c) != keys or c["method"] not in METHODS:
            raise WireError(f"{where} is {_shown(c)}; expected one of {METHODS} with {sorted(keys)}")
        positions = c["positions"]
        if not isinstance(positions, list) or not all(type(p) is int and abs(p) < MAX_ID for p in positions):
            raise WireError(f"{where}.positions is {_shown(positions)}; expected a list of ints")
        out_feature = tensor_from_plain(c["out_feature"], f"{where}.out_feature")
        if out_feature is None:
            raise WireError(f"{where}.out_feature is missing")
        calls.append(Call(c["method"], _ints(c["tokens"], f"{where}.tokens"), positions,
                          tensor_from_plain(c["feature"], f"{where}.feature"),
                          _ints(c["out_ids"], f"{where}.out_ids"), out_feature))
    refused = []
    for i, r in enumerate(d["refused"]):
        if not (isinstance(r, list) and len(r) == 3 and r[0] in METHODS and isinstance(r[2], str)):
            raise WireError(f"refused call {i} is {_shown(r)}; expected [method, positions, why]")
        pos = r[1]
        if not isinstance(pos, list) or not all(type(p) is int and abs(p) < MAX_ID for p in pos):
            raise WireError(f"refused call {i} positions are {_shown(pos)}; expected ints")
        refused.append((r[0], pos, r[2][:200]))
    return calls, refused
