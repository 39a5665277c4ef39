"""Calibration: the tie tolerance and budget measured on the user's own target, never assumed.

The built-in constants (judge/tolerance.py) were measured on SmolLM2, Gemma 3 and the tiny
fixtures; on an 8B-shaped target in bf16 they decided the verdict for a model nobody measured.
A calibration measures, on the target, dtype, device and kernels of the run, how far a correct
runner's logits move against the HF reference's:

- `decode`: the program's own target (the eager program's TargetAdapter: its static cache and
  kernels) one row at a time over its greedy continuation of each prompt;
- `verify`: the same target in K+1-row windows over the same tokens, as target_verify sees them;
- `hf`: the reference model, one teacher-forced forward over prompt + tokens (the verdict's rows).

Per row it records the top-1/top-2 margin shift of verify and decode against hf (on hf's two top
tokens: |(a[i1] - a[i2]) - (b[i1] - b[i2])|), whether their argmax differs from hf's (a flip),
and the flip's rank under hf. From those (`Calibration`):
- the tie tolerance: SAFETY x the largest shift, plus the dtype's ulp part (the logits' own rounding);
- the tie rank: the largest flip rank + 1, at least TOP_N;
- the tie budget: a binomial bound on the flip rate (judge/budget.py).

A record is keyed by the target's weight digest, the dtype, the device kind and the kernel set, and
kept in the cache (`<cache>/calibration/<key>.json`, written atomically), so a check reads it back
instead of measuring again; every report names where its tolerance came from.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eagle3_check.errors import InputError
from eagle3_check.judge.budget import BinomialBudget, rate_upper
from eagle3_check.judge.tolerance import SAFETY, TOP_N, ULPS, Tolerance

SCHEMA = 1
RESOLUTION = 1 / 64  # the absolute part is rounded up to this (logits): a record reads the same on every run


@dataclass(frozen=True)
class CalibrationKey:
    weights_sha256: str  # the target's parameters (names, dtypes, shapes, bytes)
    dtype: str  # float32 | bfloat16
    device: str  # cpu | cuda (the kind: every GPU of a kind runs the same kernels)
    kernels: str  # eager | compiled | exact | xnnpack ...

    @property
    def stem(self) -> str:
        return f"{self.weights_sha256[:16]}-{self.dtype}-{self.device}-{self.kernels}"


@dataclass
class Calibration:
    key: CalibrationKey
    k: int  # the verify window's K
    prompts: int
    rows: int  # positions measured (each with a verify and a decode row)
    max_shift: float  # largest margin shift, verify or decode against hf (logits)
    p99_shift: float
    flips: int  # rows where verify or decode picked another token than hf (the larger count of the two)
    max_flip_rank: int  # the largest rank under hf of a flipped token (0: no flip)
    max_flip_gap: float  # the largest hf top-1 minus the flipped token's logit
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    seconds: float = 0.0

    def tolerance(self) -> Tolerance:
        """SAFETY x the largest shift measured, rounded up to RESOLUTION, plus the dtype's ulp part."""
        steps = -(-SAFETY * self.max_shift // RESOLUTION)  # ceil
        return Tolerance(self.key.dtype, ULPS[self.key.dtype], max(TOP_N, self.max_flip_rank + 1),
                         steps * RESOLUTION, 1 / SAFETY)

    def budget(self) -> BinomialBudget:
        return BinomialBudget(rate_upper(self.flips, self.rows), self.describe_source())

    def describe_source(self) -> str:
        return (f"calibration {self.key.stem}: {self.flips} flips of {self.rows} rows, {self.prompts} prompts, "
                f"K {self.k}, {self.created}")

    def to_json(self) -> dict:
        return {"schema": SCHEMA, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict, where: str) -> Calibration:
        fix = "delete it; the next check measures the calibration again (`eagle3-check calibrate`)"
        try:
            if data.get("schema") != SCHEMA:
                raise ValueError(f"schema {data.get('schema')!r}")
            body = {k: v for k, v in data.items() if k != "schema"}
            return cls(**{**body, "key": CalibrationKey(**body["key"])})
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            raise InputError(f"calibration record {where} cannot be read ({e})",
                             f"a calibration record of schema {SCHEMA}", fix) from None


def store_dir() -> Path:
    from eagle3_check.gguf_fixture import cache_root

    return cache_root() / "calibration"


def record_path(key: CalibrationKey, directory: Path | None = None) -> Path:
    return (directory or store_dir()) / f"{key.stem}.json"


def load(key: CalibrationKey, directory: Path | None = None) -> Calibration | None:
    """The stored calibration of `key`, or None where none was measured."""
    path = record_path(key, directory)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"calibration record {path} cannot be read ({e})", "a JSON calibration record",
                         "delete it; the next check measures the calibration again") from None
    cal = Calibration.from_json(data, str(path))
    if cal.key != key:
        raise InputError(f"calibration record {path} holds key {cal.key.stem}", f"the key its name spells ({key.stem})",
                         "delete it; the next check measures the calibration again")
    return cal


def save(cal: Calibration, directory: Path | None = None) -> Path:
    from eagle3_check.atomic import write_text_atomic

    path = record_path(cal.key, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, json.dumps(cal.to_json(), indent=1) + "\n", "calibration record")
