"""The harness's program, called from the runner's process: every route that sets up its own program.

`check`'s prompt set gives the child a builder and the child runs on its own copy of the program
(runners/isolate/child.py). The suites, the gate, `golden verify` and the pytest plugin set up a program
per case instead (a spec, forcing, patched metadata or stop ids, a toy program, a `.pte` as
loaded), which a builder cannot name. There the child gets no program of its own: each request
carries the program's metadata, whether it owns its outputs, and the tokenizer (when it changed),
and the runner gets a `RemoteProgram` whose every call is a frame to the harness, which runs it on
the very program (and recording wrapper) the in-process route would hand the runner, then sends the
outputs back. What the runner patches, prints or leaves running still stays in its process; the
call log is the harness's own recording, so nothing of it comes from the child.

Frames: child -> harness `{"call": method, "tokens": {"shape", "ids"}, "positions": [...],
"feature": tensor_plain or None}` (JSON, validated by `call_inputs`); harness -> child a pickle,
`{"out": (ids [1, T], feature [1, T, H])}` (each as dtype, shape, bytes) or `{"raise": [type, what, expected, fix]}` (the
program's error, raised in the child as the same class) or `{"raise": [type, message]}`.
Graph-owned outputs stay graph-owned: when the harness's program owns its outputs, the child copies
each call's outputs into the method's one buffer (`owned.OutputBuffers`), so a runner that reads an
output after the method's next call reads the new values, as it would in process.

Worked example: the runner calls `program.prefill(tensor([[1, 5, 9]]), arange(3))` -> frame
{"call": "prefill", "tokens": {"shape": [1, 3], "ids": [1, 5, 9]}, "positions": [0, 1, 2],
"feature": null} -> the harness's RecordingProgram records and runs it -> {"out": (ids, feature)}.
"""

from __future__ import annotations

import threading

from eagle3_check import errors
from eagle3_check.runners.isolate import wire

METHODS = ("prefill", "target_verify", "draft_decode", "reset")


def owns_outputs(program) -> bool:
    """Does `program` (or a program under its wrappers) own its outputs (graph-owned)?"""
    while program is not None:
        if getattr(program, "owns_outputs", False) is True or getattr(program, "reuse_outputs", False) is True:
            return True
        program = getattr(program, "inner", None)
    return False


def error_parts(e: BaseException) -> list:
    """An exception as JSON-safe parts: [type, what, expected, fix] for the project's errors, else
    [type, first line]."""
    if isinstance(e, errors.Eagle3CheckError):
        return [type(e).__name__, str(e.what), str(e.expected), str(e.fix)]
    return [type(e).__name__, errors.first_line(e)[:300]]


def rebuild_error(parts) -> BaseException:
    """The exception `error_parts` describes: the project's error class of that name (an Eagle3CheckError
    subclass of eagle3_check.errors), else a RuntimeError naming the type."""
    if not isinstance(parts, (list, tuple)) or not parts or not all(isinstance(p, str) for p in parts):
        return RuntimeError(f"an error the harness could not read ({type(parts).__name__})")
    cls = getattr(errors, parts[0], None)
    if len(parts) == 4 and isinstance(cls, type) and issubclass(cls, errors.Eagle3CheckError):
        return cls(*(p[:400] for p in parts[1:]))
    return RuntimeError(f"{parts[0]}: {parts[-1][:300]}" if len(parts) > 1 else parts[0])


# --- the runner's side --------------------------------------------------------------------------------

class RemoteProgram:
    """A SpeculatorProgram in the runner's process whose calls run in the harness (see the module doc).
    `close()` after the request: a thread that calls it later gets an error, never a frame."""

    def __init__(self, rfd: int, wfd: int, metadata: dict, owned: bool, rows: int):
        self._rfd, self._wfd, self._md = rfd, wfd, metadata
        self._lock = threading.Lock()
        self._closed = False
        from eagle3_check.program.owned import OutputBuffers

        self._buffers = OutputBuffers(rows) if owned else None

    def metadata(self) -> dict:
        import copy

        return copy.deepcopy(self._md)

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def _call(self, method: str, tokens=None, positions=None, feature=None):
        import pickle

        import torch

        msg = {"call": method}
        if method != "reset":
            tokens, positions = torch.as_tensor(tokens), torch.as_tensor(positions)
            msg.update(tokens={"shape": list(tokens.shape), "ids": tokens.reshape(-1).tolist()},
                       positions=positions.reshape(-1).tolist(), feature=wire.tensor_plain(feature))
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{method} called after run() returned; the request is over")
            wire.send_json(self._wfd, msg)
            payload = wire.read_frame_blocking(self._rfd)
        if payload is None:
            raise RuntimeError("the harness closed the program")
        reply = pickle.loads(payload)
        if "raise" in reply:
            raise rebuild_error(reply["raise"])
        if method == "reset":
            return None
        ids, feat = _tensor(reply["out"][0]), _tensor(reply["out"][1])
        return self._buffers.own(method, ids, feat) if self._buffers is not None else (ids, feat)

    def reset(self) -> None:
        self._call("reset")

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H]
        return self._call("prefill", tokens, positions)

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, H]
        return self._call("target_verify", tokens, positions)

    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, H], [T] -> [1, T], [1, T, H]
        return self._call("draft_decode", tokens, positions, feature)


# --- the harness's side -----------------------------------------------------------------------------

def call_inputs(msg: dict):
    """(method, tokens [1, T] int64, positions [T] int64, feature [1, T, H] or None) of a call frame,
    validated; raises wire.WireError naming the field."""
    import torch

    method = msg.get("call")
    if method not in METHODS:
        raise wire.WireError(f"a call of {str(method)[:40]!r}; expected one of {METHODS}")
    if method == "reset":
        if set(msg) != {"call"}:
            raise wire.WireError(f"a reset call with {sorted(msg)[:5]}; expected no inputs")
        return method, None, None, None
    keys = {"call", "tokens", "positions", "feature"}
    if set(msg) != keys or not isinstance(msg["tokens"], dict) or set(msg["tokens"]) != {"shape", "ids"}:
        raise wire.WireError(f"a {method} call with {sorted(msg)[:6]}; expected {sorted(keys)}")
    shape = wire._ints(msg["tokens"]["shape"], f"{method}.tokens.shape")
    ids = wire._ints(msg["tokens"]["ids"], f"{method}.tokens")
    if len(shape) > 4 or _prod(shape) != len(ids):
        raise wire.WireError(f"{method}.tokens: {len(ids)} ids for shape {shape}")
    positions = msg["positions"]
    if not isinstance(positions, list) or len(positions) > wire.MAX_LEN or \
            not all(type(p) is int and abs(p) < wire.MAX_ID for p in positions):
        raise wire.WireError(f"{method}.positions is {wire._shown(positions)}; expected a list of ints")
    feature = wire.tensor_from_plain(msg["feature"], f"{method}.feature")
    if (feature is None) != (method != "draft_decode"):
        raise wire.WireError(f"{method}.feature is {'missing' if feature is None else 'given'}; "
                             f"expected {'a [1, T, H] tensor' if method == 'draft_decode' else 'none'}")
    return method, torch.tensor(ids, dtype=torch.int64).reshape(shape), torch.tensor(positions, dtype=torch.int64), \
        feature


def _prod(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def serve_call(program, msg: dict) -> dict:
    """Runs one validated call frame on `program` (the harness's, as the in-process route would hand it to
    the runner): the reply to pickle back. A program error is the child's to raise; a bad frame raises
    wire.WireError (the request fails)."""
    method, tokens, positions, feature = call_inputs(msg)
    try:
        if method == "reset":
            program.reset()
            return {"out": None}
        args = (tokens, feature, positions) if method == "draft_decode" else (tokens, positions)
        ids, feat = getattr(program, method)(*args)
    except Exception as e:  # noqa: BLE001 - the program refused the runner's call: raised in the runner, as in process
        return {"raise": error_parts(e), "error": e}
    return {"out": (_raw(ids), _raw(feat))}  # bytes, never a view of the program's buffer


def _raw(t) -> tuple:
    """A tensor as (dtype name, shape, bytes): a cheaper pickle than a tensor's (storage machinery)."""
    import torch

    t = t.detach().to("cpu").contiguous()
    return str(t.dtype).removeprefix("torch."), tuple(t.shape), t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def _tensor(raw: tuple):
    import torch

    dtype, shape, data = raw
    if not data:
        return torch.empty(shape, dtype=getattr(torch, dtype))
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).view(getattr(torch, dtype)).reshape(shape)
