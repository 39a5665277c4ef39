"""Regression gating: re-run committed goldens, compare tokens exactly and metrics with the baseline.

Every golden runs on graph-owned outputs (`owned.graph_owned`), as `check` and the suites do, so a
runner that reads an output after the method's next call fails here too.
One pass runs each golden's prompts once; the same runs feed both comparisons
(`diff_golden` for the tokens and stats, `compare_baseline` for the deterministic
metrics). `eagle3-check golden verify`, `make check` and `eagle3-check gate --golden`
all come through `gate_goldens`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from eagle3_check.errors import InputError
from eagle3_check.jobs.golden.diff import (
    GoldenDiff,
    compared_line,
    diff_golden,
    format_diffs,
    stats_exact,
)
from eagle3_check.jobs.golden.file import (
    GoldenKey,
    golden_root,
    load_golden,
    run_golden,
    version_notes,
)
from eagle3_check.jobs.golden.metrics import (
    MetricDiff,
    compare_metrics,
    compute_metrics,
    format_metric_diffs,
    load_baseline,
)
from eagle3_check.program.owned import graph_owned
from eagle3_check.runners.crash import CRASHED
from eagle3_check.runners.result import PluginRunner, RunResult
from eagle3_check.status import skip_note

BACKENDS = ("eager", "pte")


def golden_paths(paths: Iterable[str | Path] = ()) -> list[Path]:
    """The given golden files (directories expand to their *.json), default: all of golden/."""
    paths = list(paths) or [golden_root()]
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob("*.json"))
            if not found:  # else verify reports "goldens: 0" and fails without a reason, baseline writes nothing
                raise InputError(f"golden directory {p} holds no *.json file", "golden files (NAME.json) in it",
                                 "pass the directory the goldens are in, or record one with `eagle3-check golden record`")
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            raise InputError(f"golden path {p} does not exist", "a golden file or a directory of them",
                             "list golden/ or record one with `eagle3-check golden record`")
    return out


def unavailable(key: GoldenKey, pte: str | Path | None = None) -> str | None:
    """Why a golden cannot run here, or None when it can."""
    if key.backend not in BACKENDS:
        return f"backend '{key.backend}' is not one of {BACKENDS}"
    if key.backend == "pte" and pte is None:
        return f"a .pte golden: pass --pte FILE (an export of fixture {key.fixture}) to verify it"
    if key.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return "needs a CUDA device (none here)"
    return None


def program_for_key(key: GoldenKey, pte: str | Path | None = None, data_path: str | Path | None = None):
    """Builds (program, tokenizer) for a golden key: the embedded fixture, eager or its .pte export
    (with its .ptd data file when given)."""
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.program.eager import EagerBackend
    from eagle3_check.tokenizer import Tokenizer

    why = unavailable(key, pte)
    if why:
        raise InputError(f"golden {key.stem}: {why}", "a golden this machine can run", "verify it elsewhere")
    fx = load_fixture(key.fixture)
    if key.backend == "pte":
        from eagle3_check.program.pte_probe import load_probed

        return load_probed(pte, data_path), Tokenizer.load(fx.tokenizer_path)  # probed: a corrupt file is one line
    return EagerBackend.from_fixture(fx, key.device, key.dtype), Tokenizer.load(fx.tokenizer_path)


@dataclass
class GateOutcome:
    golden_diffs: list[GoldenDiff] = field(default_factory=list)
    metric_diffs: list[MetricDiff] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    runs: dict[str, dict[str, RunResult]] = field(default_factory=dict)  # key stem -> prompt -> run
    keys: dict[str, GoldenKey] = field(default_factory=dict)  # key stem -> key
    skipped: dict[str, str] = field(default_factory=dict)  # key stem -> why it could not run here
    baseline: str | None = None
    interrupted: str | None = None  # Ctrl-C of the harness stopped it (runners/interrupt.py): what was not run
    shrunk: dict = field(default_factory=dict)  # --shrink: key stem -> prompt id -> its shrunk request (JSON)
    shrunk_lines: list[str] = field(default_factory=list, compare=False)  # --shrink: what to print after it
    numerics: str = "normal"  # the mode the goldens ran in: normal | exact (--exact)

    @property
    def passed(self) -> bool:
        """Nothing differs, and at least one golden ran (an all-skipped gate proves nothing)."""
        return bool(self.runs) and not self.golden_diffs and not self.metric_diffs and not self.interrupted

    def to_json(self) -> dict:
        return {
            **({"interrupted": self.interrupted} if self.interrupted else {}),
            "passed": self.passed,
            "goldens": sorted(self.runs),
            "skipped": self.skipped,
            "baseline": self.baseline,
            "golden_diffs": [d.to_json() for d in self.golden_diffs],
            "metric_diffs": [d.to_json() for d in self.metric_diffs],
            "notes": self.notes,
            "numerics": self.numerics,
            **({"shrunk": self.shrunk} if self.shrunk else {}),
            "runs": {stem: {"k": self.keys[stem].k, "prompts": [r.summary(pid) for pid, r in runs.items()]}
                     for stem, runs in sorted(self.runs.items()) if stem in self.keys},
        }

    def format(self) -> str:
        ran = sum(len(r) for r in self.runs.values())
        lines = [f"goldens: {len(self.runs)} ({', '.join(sorted(self.runs))})",
                 format_diffs(self.golden_diffs) if ran else compared_line(0, False)]
        if self.baseline:
            lines.append(format_metric_diffs(self.metric_diffs, self.baseline))
        lines.extend(f"skipped {stem}: {why}" for stem, why in self.skipped.items())
        lines.extend(f"note: {n}" for n in self.notes)
        if self.numerics == "exact":
            lines.append("numerics: exact (shape-invariant kernels): each golden recorded in exact mode")
        if self.interrupted:
            lines.append(self.interrupted)
        lines.append(f"verdict: {'PASS' if self.passed else 'FAIL'}")
        return "\n".join(lines)


def gate_goldens(
    paths: Iterable[str | Path] = (),
    baseline: str | Path | None = None,
    runner: PluginRunner | None = None,
    build: Callable[[GoldenKey], tuple] | None = None,
    on_prompt: Callable[[str], None] | None = None,
    pte: str | Path | None = None,
    fixture: str | None = None,
    data_path: str | Path | None = None,
    dtype: str | None = None,
    run_backend: str | None = None,
    numerics: str = "normal",
) -> GateOutcome:
    """Runs every golden once; compares tokens (always) and metrics (when `baseline` is given).

    Goldens this machine cannot run (a .pte golden without `pte`, a CUDA golden without a
    GPU) are listed in `skipped` with the reason; `build` replaces the program factory.
    With `fixture` (the gate's one program), goldens of other fixtures are skipped too, and with
    `dtype` (that program's), goldens of another dtype (a bf16 program's near-ties differ from a
    float32 golden's tokens: never a silent mismatch).

    With `pte` and no `build` (`golden verify --pte FILE`), every golden runs on that `.pte`: its
    own `pte` goldens and the eager goldens of its fixture and dtype (an export emits the eager
    program's tokens), the others skipped with the reason; `run_backend` (the backend the goldens
    run on: the gate's program) decides which stats are exact (`jobs.golden.diff.stats_exact`)."""
    if build is None and pte is not None:
        build, fixture, dtype = _pte_build(pte, data_path, fixture, dtype)
        run_backend = "pte"
    run_sha256 = program_sha256(pte) if run_backend == "pte" else None
    build = build or (lambda key: program_for_key(key, pte, data_path))
    out = GateOutcome(baseline=str(baseline) if baseline else None, numerics=numerics)
    paths = golden_paths(paths)
    try:
        _verify(out, paths, baseline, runner, build, on_prompt, pte, fixture, dtype, run_backend, run_sha256,
                numerics)
    except KeyboardInterrupt:  # Ctrl-C of the harness: the goldens verified so far (runners/interrupt.py)
        from eagle3_check.runners.interrupt import interrupted_line

        out.interrupted = interrupted_line(len(out.runs) + len(out.skipped), len(paths), "goldens")
    return out


def program_sha256(pte) -> str | None:
    """sha256 of the `.pte` the goldens run on (None where it is not a file: a gate's program given
    as an object): a `pte` golden's acceptance is exact on its own program alone (`stats_exact`)."""
    from eagle3_check.program.sidecar import pte_digest

    return pte_digest(Path(pte)) if pte is not None and Path(str(pte)).is_file() else None


def _pte_build(pte, data_path, fixture: str | None, dtype: str | None):
    """(build, fixture, dtype) of `golden verify --pte FILE`: the one `.pte` (loaded once, probed) for
    every golden, its fixture from the export sidecar and its dtype from its feature output."""
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.program.contract import program_dtype
    from eagle3_check.program.pte_probe import load_probed
    from eagle3_check.program.sidecar import sidecar_fixture
    from eagle3_check.tokenizer import Tokenizer

    program = load_probed(pte, data_path)  # probed: a corrupt file is one line
    fixture = fixture or sidecar_fixture(pte)
    dtype = dtype or program_dtype(program)
    return (lambda key: (program, Tokenizer.load(load_fixture(key.fixture).tokenizer_path))), fixture, dtype


def mode_skip(key: GoldenKey, numerics: str) -> str | None:
    """Why a golden recorded in another numerics mode than this run's is not verified here, or None."""
    if key.numerics == numerics:
        return None
    return (f"recorded in {key.numerics} mode; this run is in {numerics} mode (a golden verifies only in the "
            "mode it was recorded in)")


def mode_refusal(skipped: dict[str, str], numerics: str) -> InputError:
    """Every golden given was recorded in the other mode: one line naming the mode and the fix."""
    stem = next(iter(skipped))
    other = "exact" if numerics == "normal" else "normal"
    fix = ("verify it with --exact" if other == "exact" else
           "verify it without --exact, or record an exact-mode golden: `eagle3-check golden record --exact ...`")
    return InputError(f"golden {stem} was recorded in {other} mode ({len(skipped)} golden(s) so)",
                      f"a golden recorded in {numerics} mode, the mode of this run", fix)


def _verify(out: GateOutcome, paths: list, baseline, runner, build, on_prompt, pte, fixture, dtype,
            run_backend: str | None = None, run_sha256: str | None = None, numerics: str = "normal") -> None:
    entries = load_baseline(baseline) if baseline else {}
    cache: dict[tuple, tuple] = {}
    by_mode: dict[str, str] = {}
    for path in paths:
        golden = load_golden(path)
        key = golden.key
        why = unavailable(key, pte) or mode_skip(key, numerics)
        if mode_skip(key, numerics):
            by_mode[key.stem] = why
        if fixture and key.fixture != fixture:
            why = f"a golden of fixture {key.fixture}; this program is {fixture}"
        elif dtype and key.dtype != dtype and not why:
            why = f"a {key.dtype} golden; this program is a {dtype} program (a golden applies in its own dtype)"
        if why:
            out.skipped[key.stem] = why
            if on_prompt:
                for p in golden.prompts:
                    on_prompt(p.prompt_id)
            continue
        pk = (key.fixture, key.backend, key.device, key.dtype)
        if pk not in cache:
            cache[pk] = build(key)
        program, tokenizer = cache[pk]
        program = graph_owned(program)  # outputs valid until the method's next call, as check's (program/owned.py)
        runs = run_golden(program, tokenizer, golden, runner, on_prompt)
        out.runs[key.stem] = runs
        out.keys[key.stem] = key
        out.golden_diffs.extend(diff_golden(runs, golden, run_backend, out.notes, run_sha256))
        out.notes.extend(version_notes(golden))
        if baseline:
            metric_diffs, note = gated_metrics(key, run_backend, compare_metrics(key.stem, compute_metrics(
                [r for r in runs.values() if r.stop_reason != CRASHED], key.k), entries.get(key.stem)),
                golden.program_sha256, run_sha256)
            out.metric_diffs.extend(metric_diffs)
            out.notes.extend([note] if note else [])
    if by_mode and not out.runs and len(by_mode) == len(out.skipped):  # nothing ran: the mode is the reason
        raise mode_refusal(by_mode, numerics)


def gated_metrics(key: GoldenKey, run_backend: str | None, diffs: list[MetricDiff], golden_sha256: str | None = None,
                  run_sha256: str | None = None) -> tuple[list[MetricDiff], str | None]:
    """(the metric diffs that fail, a note or None): the baseline's metrics are acceptance's (calls per
    token, tau, n-alpha), so where `stats_exact` says no they are a note, as the stats are; a missing
    baseline entry always fails."""
    if not diffs or stats_exact(key.backend, key.dtype, run_backend, golden_sha256, run_sha256) or any(
            d.direction == "missing" for d in diffs):
        return diffs, None
    where = "another" if (run_backend or key.backend) == key.backend else f"a {run_backend}"
    return [], (f"{key.stem}: metrics not gated on {where} program ({len(diffs)} differ from its "
                f"{key.backend} baseline; {key.dtype} acceptance follows the program's numerics)")


def total_prompts(paths: Iterable[str | Path] = ()) -> int:
    return sum(len(load_golden(p).prompts) for p in golden_paths(paths))


def no_golden_line(skipped: dict[str, str], pte: str | Path | None = None, fixture: str | None = None,
                   dtype: str | None = None, golden: str | Path | None = None, gate: bool = True) -> str:
    """The line of a golden check where no golden ran. It fails (the skip rule, `status.passes`:
    asked to compare with goldens, it compared nothing; a pass would read as a regression check
    that never happened), so it says why each golden skipped and how to record one that applies.
    Example: one float32 golden skipped on a bfloat16 `s.pte` of tiny-gemma4 -> "no golden applies
    to this program (a bfloat16 program of fixture tiny-gemma4), 1 skipped (first: NAME: a float32
    golden; ...); record one for it: `eagle3-check golden record --pte s.pte --fixture tiny-gemma4
    --dir golden` (it refuses prompts whose reference margin is inside the bfloat16 tie tolerance:
    where it refuses every prompt, goldens cannot gate this program), or drop --golden"."""
    what = f" (a {dtype + ' ' if dtype else ''}program{f' of fixture {fixture}' if fixture else ''})" \
        if dtype or fixture else ""
    where = golden or golden_root()
    where = Path(where).parent if Path(where).suffix == ".json" else Path(where)
    cmd = " ".join(["eagle3-check golden record", *([f"--pte {pte}"] if pte else []),
                    *([f"--fixture {fixture}"] if fixture else []), *([f"--dtype {dtype}"] if dtype and not pte else []),
                    f"--dir {where}"])
    refuses = (f" (it refuses prompts whose reference margin is inside the {dtype} tie tolerance: where it refuses "
               "every prompt, goldens cannot gate this program)" if dtype and dtype != "float32" else "")
    return (f"no golden applies to this program{what}{skip_note(skipped.items())}; record one for it: `{cmd}`"
            f"{refuses}{', or drop --golden' if gate else ''}")
