"""`golden verify --runner exec:... --pte FILE`: goldens re-run through a runner binary.

A binary runs one `.pte`, so the goldens that apply are those of that `.pte`'s fixture, on CPU,
in the program's own dtype (backend `pte`, and `eager`: an export emits the eager program's
tokens); the others skip, each with its reason, counted. The seed's runner reads features as
bf16 only, so through it a float32 program's goldens skip saying so (never a silent mismatch). Per prompt, exactly: the tokens (by ids when the binary prints
`[ids]`, else by bytes against the golden tokens' pieces), their count, L, rounds and tau
(as printed, 3 decimals); rounds and tau of an eager golden in a reduced precision are notes
(`jobs.golden.diff.stats_exact`: acceptance follows the backend's numerics). The accepted count per round and the stop reason are not printed
by the seed, so they are not compared (said in the notes).

Not folded into `verify` (which runs a golden's own program through a RunResult): a binary runs one .pte,
so which goldens apply and a comparison by printed ids or bytes, without accepted counts, are its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from eagle3_check.jobs.golden.diff import acceptance_note, compared_line, stats_exact
from eagle3_check.jobs.golden.draft_margins import describe
from eagle3_check.jobs.golden.file import Golden, GoldenKey, GoldenPrompt, load_golden
from eagle3_check.program.contract import Metadata, read_metadata
from eagle3_check.program.sidecar import sidecar_fixture
from eagle3_check.runners.binary.byte_pieces import BytePieces
from eagle3_check.runners.binary.runner import ExecRunner, binary_options, observed, program_data
from eagle3_check.runners.options import RunOptions, prompt_ids
from eagle3_check.runners.protections import protections_line

DTYPE_REFUSED = "unexpected scalar type"  # ExecuTorch's error when a binary feeds another dtype than the method's
# why a binary's golden runs cannot be gated against the metrics baseline
METRICS_NOT_GATED = "the metrics baseline counts program calls, which a binary does not report: not gated"


@dataclass
class ExecGoldenOutcome:
    diffs: list[str] = field(default_factory=list)
    verified: dict[str, int] = field(default_factory=dict)  # golden stem -> prompts run
    skipped: dict[str, str] = field(default_factory=dict)
    judged_by: dict[str, int] = field(default_factory=dict)  # ids | bytes -> prompts
    notes: list[str] = field(default_factory=list)
    none_applies: str = ""  # no golden ran: why, and how to record one (`jobs.golden.verify.no_golden_line`)
    isolation: dict | None = None  # what held the binary's processes in (runners.isolate.policy.isolation_info)

    @property
    def passed(self) -> bool:
        return bool(self.verified) and not self.diffs

    def to_json(self) -> dict:
        return {"passed": self.passed, "verified": self.verified, "skipped": self.skipped,
                "judged_by": self.judged_by, "diffs": self.diffs, "notes": self.notes,
                **({"none_applies": self.none_applies} if self.none_applies else {}),
                **({"isolation": self.isolation} if self.isolation else {})}

    def format(self) -> str:
        lines = [f"goldens: {len(self.verified)} ({', '.join(sorted(self.verified))}) through the binary, "
                 f"judged by {', '.join(f'{m}: {n}' for m, n in sorted(self.judged_by.items())) or 'nothing'}",
                 compared_line(sum(self.verified.values()), bool(self.diffs)),
                 *(f"  {d}" for d in self.diffs),
                 *(f"skipped {s}: {why}" for s, why in self.skipped.items()),
                 *(f"note: {n}" for n in self.notes),
                 *([self.none_applies] if self.none_applies else []),
                 *[p for p in [protections_line(self.isolation)] if p],
                 f"verdict: {'PASS' if self.passed else 'FAIL'}"]
        return "\n".join(lines)


def verify_exec_goldens(paths: Iterable[Path], runner: ExecRunner, pte: Path, program, tokenizer,
                        on_prompt: Callable[[str], None] | None = None) -> ExecGoldenOutcome:
    """Runs every applicable golden's prompts through the binary on `pte` and compares exactly."""
    out = ExecGoldenOutcome(notes=["per-round accepted counts and the stop reason are not printed by a "
                                   "seed-format binary: not compared"])
    fixture = sidecar_fixture(pte)
    md = read_metadata(program.metadata())
    data = program_data(program)
    runner.check_data(data)  # a template with no place for the .ptd: refused before any golden
    pieces = BytePieces.from_tokenizer_json(tokenizer.path)
    for path in paths:
        golden = load_golden(path)
        key = golden.key
        why = exec_unavailable(key, fixture, md, runner, pte, getattr(program_backend(program), "dtype", None))
        if why:
            out.skipped[key.stem] = why
            continue
        golden.check_vocab(md.vocab_size or tokenizer.vocab_size)
        options = binary_options(golden.run_options(), md)
        for n, want in enumerate(golden.prompts):
            diffs = compare_prompt(key.stem, want, golden, runner, pte, tokenizer, pieces, options, out.judged_by,
                                   data, out.notes)
            if n == 0 and diffs and all(DTYPE_REFUSED in d for d in diffs):  # the binary cannot run this dtype
                out.skipped[key.stem] = (f"a {key.dtype} golden; the binary cannot run a {key.dtype} program "
                                         f"({diffs[0].split(': ', 1)[-1][:160]}): the seed's runner reads features "
                                         "as bf16 only (export with --dtype bfloat16)")
                break
            out.diffs += diffs
            out.verified[key.stem] = out.verified.get(key.stem, 0) + 1
            if on_prompt:
                on_prompt(want.prompt_id)
    return out


def none_applies(out: ExecGoldenOutcome, pte: Path, program, golden: Path | None, gate: bool,
                 fixture: str | None = None) -> str:
    """Where no golden ran through the binary: each golden's reason and how to record one for `pte`
    (an export of `fixture`, else of its sidecar's)."""
    from eagle3_check.jobs.golden.verify import no_golden_line

    return no_golden_line(out.skipped, pte, fixture or sidecar_fixture(pte),
                          getattr(program_backend(program), "dtype", None), golden, gate)


def program_backend(program):
    """The backend under the program's wrappers (the `.pte` itself)."""
    p = program
    while getattr(p, "inner", None) is not None:
        p = p.inner
    return p


def exec_unavailable(key: GoldenKey, fixture: str | None, md: Metadata, runner: ExecRunner, pte: Path,
                     dtype: str | None = None) -> str | None:
    """Why a golden cannot run through the binary on `pte` (an export of `fixture`, whose features are
    `dtype`), or None. A golden applies in its own dtype only (a binary that cannot run the program's
    dtype at all is found by its first run: `verify_exec_goldens`)."""
    if key.device != "cpu":
        return f"a {key.device} {key.dtype} golden; a .pte runs on CPU"
    if dtype is not None and key.dtype != dtype:
        return f"a {key.dtype} golden; {pte.name} is a {dtype} program (a binary runs the program's own dtype)"

    if fixture != key.fixture:
        return f"a golden of fixture {key.fixture}; {pte.name} is an export of {fixture or 'an unknown fixture'}"
    if not md.k_range[0] <= key.k <= md.k_range[1]:
        return f"K = {key.k} is outside {pte.name}'s range {list(md.k_range)}"
    if key.k != md.chain_len and not runner.supports_chain():
        return f"K = {key.k} is not {pte.name}'s default {md.chain_len} and the binary has no --chain flag"
    return None


def compare_prompt(stem: str, want: GoldenPrompt, golden: Golden, runner: ExecRunner, pte: Path, tokenizer,
                   pieces: BytePieces, options: RunOptions, judged_by: dict[str, int],
                   data: Path | None = None, notes: list[str] | None = None) -> list[str]:
    """One golden prompt through the binary (with the golden's options as the binary gets them,
    `binary_options`, and the program's `.ptd` when it has one), compared exactly: one line per
    difference ([] when identical); the judging mode (ids | bytes) is counted in `judged_by`."""
    where = f"{stem} '{want.prompt_id}'"
    if prompt_ids(tokenizer, want.prompt_text, golden.run_options()) != want.prompt_ids:
        return [f"{where}: the golden's prompt ids are not this tokenizer's encoding of its text"]
    obs = observed(runner.execute(pte, tokenizer.path, want.prompt_text, options, data), runner.timeout)
    if obs.failure:  # hung, crashed, an error exit, or output off the protocol
        return [f"{where}: {obs.failure}"]
    got = obs.output
    mode = "ids" if got.ids is not None else "bytes"
    judged_by[mode] = judged_by.get(mode, 0) + 1
    diffs = []
    if got.ids is not None and got.ids != want.tokens:
        i = next((i for i, (a, b) in enumerate(zip(got.ids, want.tokens)) if a != b), min(len(got.ids), len(want.tokens)))
        diffs.append(f"{where}: ids differ at token {i}: got {got.ids[i] if i < len(got.ids) else None}, "
                     f"golden {want.tokens[i] if i < len(want.tokens) else None}")
    elif got.ids is None and got.text != pieces.of(want.tokens):
        at = next((i for i, (a, b) in enumerate(zip(got.text, pieces.of(want.tokens))) if a != b),
                  min(len(got.text), len(pieces.of(want.tokens))))
        i = pieces.locate(want.tokens, at)
        diffs.append(f"{where}: bytes differ at offset {at} (golden token {i}): got {got.text[at:at + 16]!r}")
    stats = [("L", got.prompt_len, len(want.prompt_ids)), ("tokens", got.tokens, len(want.tokens))]
    diffs += [f"{where}: {name} {a}, golden {b}" for name, a, b in stats if a != b]
    acceptance = [f"rounds {got.rounds}, golden {want.rounds}"] if got.rounds != want.rounds else []
    if abs(got.tau - want.tau) > 5e-4 + 1e-9:
        acceptance.append(f"tau {got.tau:.3f}, golden {want.tau:.3f}")
    from eagle3_check.jobs.golden.verify import program_sha256

    run_sha = program_sha256(pte)
    if acceptance and not stats_exact(golden.key.backend, golden.key.dtype, "pte", golden.program_sha256, run_sha):
        if notes is not None:
            notes.append(acceptance_note(f"{where}: {'; '.join(acceptance)}", golden.key, "pte", golden.program_sha256,
                                         run_sha, describe(want.draft_near_ties)))
        return diffs
    return diffs + [f"{where}: {a}" for a in acceptance]


def golden_files(paths: Iterable[str | Path]) -> list[Path]:
    from eagle3_check.jobs.golden.verify import golden_paths

    return golden_paths(paths)
