"""The device-resident runner: the reference loop (`runners.loop.ReferenceRunner`) with the device
placement (`placement.DevicePlacement`): positions, the verify window and the reseed slices
stay on the program's device, and a round makes one device-to-host read. Same rules, same
calls, same arguments as `ReferenceRunner()` (a CPU test checks them call for call).

`PhaseTimer` splits the rounds' time into draft / verify / host for the GPU benchmark.
"""

from __future__ import annotations

import time

import torch

from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.placement import check_shapes, check_vocab, program_device


class PhaseTimer:
    """Splits each round's time on the device timeline into draft / verify / host.

    The runner marks "draft" before its draft calls, "verify" before target_verify and
    "host" right after it (before the read). On CUDA a mark is an event recorded on the
    stream, so a phase is the device-timeline span to the next mark: "host" is the time from
    the end of verify until the next draft work is queued (the read back, the runner's own
    logic), i.e. time the device waits on the host. On CPU a mark is the wall clock.
    """

    def __init__(self, device: torch.device):
        self.cuda = torch.device(device).type == "cuda"
        self.marks: list[tuple[str, object]] = []

    def mark(self, phase: str) -> None:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.marks.append((phase, ev))
        else:
            self.marks.append((phase, time.perf_counter()))

    def totals(self) -> dict[str, float]:
        """Milliseconds per phase, summed over the marks so far (synchronises on CUDA)."""
        out = {"draft": 0.0, "verify": 0.0, "host": 0.0}
        if self.cuda and self.marks:
            self.marks[-1][1].synchronize()
        for (phase, a), (_, b) in zip(self.marks, self.marks[1:]):
            out[phase] = out.get(phase, 0.0) + (a.elapsed_time(b) if self.cuda else (b - a) * 1e3)
        return out


class DeviceRunner(ReferenceRunner):
    """The reference loop with device-resident data (see module doc)."""

    name = "device"

    def __init__(self, timer: PhaseTimer | None = None):
        super().__init__("device", timer)


__all__ = ["DeviceRunner", "PhaseTimer", "check_shapes", "check_vocab", "program_device"]
