"""Golden outputs: the exact tokens and stats of a configuration, recorded once, verified forever.

A golden file holds, per prompt, what a run emitted (ids, text, rounds, per-round accepted
counts, tau, stop reason) plus the HF reference's top-1/top-2 margin at every emitted
position, and the library versions it was recorded with. One file per configuration,
named by every parameter that changes the output:

    golden/<fixture>__<backend>__<device>__<dtype>__k<K>__n<max new tokens>[__exact].json

(`__exact`: recorded in exact mode, `--exact`: verified only in exact mode, and a golden recorded in
normal mode is not verified in exact mode; jobs/common/exact.py.)

Record time refuses a prompt whose minimum margin is below the tie tolerance (a numerical
tie would make the golden flaky) and a run that diverges from the reference. Verify time
is an exact comparison (`jobs.golden.diff.diff_golden`): the differences name the prompt,
the first differing token (both values and the recorded margin there) and the first
differing stat. Versions that differ from the recorded ones are notes, not failures:
they explain a drift, the tokens decide.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path

from eagle3_check.atomic import locked, os_error, write_text_atomic
from eagle3_check.errors import InputError
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.judge.tolerance import Tolerance
from eagle3_check.judge.verdict import PASS, TIE, judge
from eagle3_check.program.contract import read_metadata
from eagle3_check.runners.crash import crashed_run
from eagle3_check.runners.in_process import as_runner
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions, stop_set
from eagle3_check.runners.result import PluginRunner, RunResult

SCHEMA = 1
VERSIONED = ("torch", "transformers", "tokenizers", "executorch")
_NUM_LIST = re.compile(r"\[\s*([-+0-9.eE,\s]+?)\s*\]")
_NAME = re.compile(r"^(?P<fixture>.+)__(?P<backend>[^_]+)__(?P<device>[^_]+)__(?P<dtype>[^_]+)__k(?P<k>\d+)__n(?P<n>\d+)"
                   r"(?:__(?P<numerics>exact))?$")
NUMERICS = ("normal", "exact")  # the mode a golden was recorded in: torch's kernels, or exact mode's (--exact)


def golden_root() -> Path:
    """The repository's golden/ directory, beside the package."""
    return Path(__file__).resolve().parents[3] / "golden"


class GoldenError(InputError):
    """A golden cannot be recorded or read as asked."""


@dataclass(frozen=True)
class GoldenKey:
    """Every parameter that changes a golden's content; the file name spells all of them."""

    fixture: str
    backend: str  # eager | pte
    device: str  # cpu | cuda
    dtype: str  # float32 | bfloat16
    k: int
    max_new: int  # max new tokens asked for
    numerics: str = "normal"  # normal | exact (--exact: the shape-invariant kernels; named in the file name)

    @property
    def stem(self) -> str:
        mode = "__exact" if self.numerics == "exact" else ""
        return f"{self.fixture}__{self.backend}__{self.device}__{self.dtype}__k{self.k}__n{self.max_new}{mode}"

    def to_json(self) -> dict:
        """The key as a golden file holds it (`numerics` only when exact: normal goldens read as before)."""
        out = asdict(self)
        if self.numerics == "normal":
            del out["numerics"]
        return out

    @property
    def filename(self) -> str:
        return self.stem + ".json"

    @classmethod
    def from_path(cls, path: str | Path) -> GoldenKey:
        m = _NAME.match(Path(path).stem)
        if not m:
            raise GoldenError(
                f"golden file name '{Path(path).name}'",
                "<fixture>__<backend>__<device>__<dtype>__k<K>__n<N>[__exact].json",
                "record goldens with `eagle3-check golden record`; do not rename them",
            )
        return cls(m["fixture"], m["backend"], m["device"], m["dtype"], int(m["k"]), int(m["n"]),
                   m["numerics"] or "normal")


@dataclass
class GoldenPrompt:
    prompt_id: str
    prompt_text: str
    prompt_ids: list[int]
    tokens: list[int]  # emitted, the prefill bonus first
    text: str
    rounds: int
    accepted: list[int]
    tau: float
    stop_reason: str
    min_margin: float  # min over `margins`
    margins: list[float]  # reference top-1/top-2 margin at each emitted position
    # the draft's near-ties the acceptance hangs on ([]: none; None: not measured, e.g. on a .pte,
    # which returns ids only): jobs/golden/draft_margins.py
    draft_near_ties: list[dict] | None = None


@dataclass
class Golden:
    key: GoldenKey
    options: dict  # RunOptions fields (chain_len and max_new_tokens as in the key)
    tie_tolerance: float
    versions: dict[str, str | None]
    prompts: list[GoldenPrompt] = field(default_factory=list)
    program_sha256: str | None = None  # a pte golden's program (acceptance is exact on it alone); None: eager
    source: str = field(default="", compare=False)  # the file it was loaded from (named in errors)

    def run_options(self) -> RunOptions:
        o = dict(self.options)
        o["stop_ids"] = tuple(o["stop_ids"])
        return RunOptions(**{**o, "chain_len": self.key.k, "max_new_tokens": self.key.max_new})

    def check_vocab(self, vocab: int, where: str = "") -> None:
        """Every recorded prompt id and token in [0, vocab) of the program it is verified on."""
        from eagle3_check.schema import check_ids

        where = where or (f"golden file {self.source}" if self.source else f"golden {self.key.stem}")
        for i, p in enumerate(self.prompts):
            check_ids(p.prompt_ids, vocab, f"{where}: prompts[{i}].prompt_ids", RERECORD)
            check_ids(p.tokens, vocab, f"{where}: prompts[{i}].tokens", RERECORD)

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "key": self.key.to_json(),
            "options": self.options,
            "tie_tolerance": self.tie_tolerance,
            "versions": self.versions,
            **({"program_sha256": self.program_sha256} if self.program_sha256 else {}),
            "prompts": [_prompt_json(p) for p in self.prompts],
        }

    @classmethod
    def from_json(cls, data: dict, where: str = "golden") -> Golden:
        """A golden from its parsed JSON, validated (schema.GoldenModel, then `consistency`)."""
        from eagle3_check.schema import GoldenModel, validate

        if isinstance(data, dict) and data.get("schema") != SCHEMA:
            raise GoldenError(f"{where} has schema {data.get('schema')!r}", f"schema {SCHEMA}", RERECORD)
        m = validate(GoldenModel, data, where, RERECORD)
        golden = cls(GoldenKey(**m.key.model_dump()), m.options.model_dump(), m.tie_tolerance, dict(m.versions),
                     [GoldenPrompt(**p.model_dump()) for p in m.prompts], m.program_sha256)
        problem = consistency(golden)
        if problem:
            raise GoldenError(f"{where}: {problem[0]}", problem[1], RERECORD)
        tie = recorded_tie(golden)
        if tie:
            raise GoldenError(f"{where}: {tie}", "every recorded margin above the tie bound (golden record refuses "
                              "near-ties: a golden resting on a tie flips on any rounding change)",
                              "re-record it on prompts whose margins clear the tolerance (`eagle3-check golden record "
                              "--force --only ID,...`), or drop that prompt")
        return golden


RERECORD = "re-record it with `eagle3-check golden record --force`"


def _prompt_json(p: GoldenPrompt) -> dict:
    """A prompt's JSON; `draft_near_ties` only where it was measured (goldens recorded before it stay as they were)."""
    out = asdict(p)
    if p.draft_near_ties is None:
        del out["draft_near_ties"]
    return out


def consistency(golden: Golden) -> tuple[str, str] | None:
    """(what, expected) of the first field that disagrees with another, else None: one margin per
    token, one accepted count in [0, K] per round, min_margin = min(margins), unique prompt ids."""
    k, seen = golden.key.k, set()
    for i, p in enumerate(golden.prompts):
        at = f"prompts[{i}]"
        if p.prompt_id in seen:
            return f"{at}.prompt_id = {p.prompt_id!r} appears twice", "unique prompt ids"
        seen.add(p.prompt_id)
        if len(p.margins) != len(p.tokens):
            return f"{at}.margins has {len(p.margins)} entries for {len(p.tokens)} tokens", "one margin per token"
        if len(p.accepted) != p.rounds:
            return f"{at}.accepted has {len(p.accepted)} entries for rounds = {p.rounds}", "one count per round"
        bad = next((j for j, a in enumerate(p.accepted) if a > k), None)
        if bad is not None:
            return f"{at}.accepted[{bad}] = {p.accepted[bad]}", f"an accepted count in [0, K = {k}]"
        if p.margins and p.min_margin != min(p.margins):
            return f"{at}.min_margin = {p.min_margin} but min(margins) = {min(p.margins)}", "min_margin = min(margins)"
        if len(p.tokens) > golden.key.max_new:
            return f"{at}.tokens has {len(p.tokens)} ids", f"at most max_new = {golden.key.max_new}"
    return None


def tie_bound(golden: Golden) -> float:
    """The margin at or below which a recorded position is a tie: the golden's tie_tolerance, capped at
    the absolute part of its dtype's tolerance now (record refused every margin <= the tolerance at its
    own token, which is >= that part, so a golden recorded by the tool never falls under it)."""
    from eagle3_check.judge.tolerance import ABSOLUTE

    if golden.key.numerics == "exact":  # identity: only a margin of exactly 0 is a tie
        return 0.0
    floor = ABSOLUTE.get(golden.key.dtype, 0.0)
    return min(golden.tie_tolerance, floor) if golden.tie_tolerance > 0 else floor


def recorded_tie(golden: Golden) -> str | None:
    """The first recorded position whose margin is a tie (<= `tie_bound`), named, else None."""
    bound = tie_bound(golden)
    for i, p in enumerate(golden.prompts):
        j = next((j for j, m in enumerate(p.margins) if m <= bound), None)
        if j is not None:
            ties = sum(m <= bound for m in p.margins)
            return (f"prompt '{p.prompt_id}' (prompts[{i}]) margins[{j}] = {p.margins[j]:g} is a tie ({ties} of "
                    f"{len(p.margins)} margins <= {bound:g}, the tie bound: tie_tolerance {golden.tie_tolerance:g} "
                    f"capped at the {golden.key.dtype} tolerance's absolute part)")
    return None


def versions() -> dict[str, str | None]:
    """Installed versions of the libraries that can change the tokens (None: not installed)."""
    out: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            out[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            out[name] = None
    return out


def load_golden(path: str | Path) -> Golden:
    from eagle3_check.inputs import read_json

    p = Path(path)
    if not p.exists():
        raise GoldenError(f"golden file {p} does not exist", "a file under golden/",
                          "record it with `eagle3-check golden record`, or list golden/")
    data = read_json(p, "golden file", "a golden in its JSON format", RERECORD)
    golden = Golden.from_json(data, f"golden file {p}")
    golden.source = str(p)
    if golden.key != GoldenKey.from_path(p):
        raise GoldenError(f"golden file {p.name} holds key {golden.key.stem}", "the key its name spells",
                          "re-record it; do not rename golden files")
    return golden


def save_golden(golden: Golden, directory: str | Path, force: bool = False) -> Path:
    """Writes `directory/<key>.json`; refuses to overwrite an existing golden unless `force`."""
    path = Path(directory) / golden.key.filename
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # the golden store is the tool's own directory
    except OSError as e:
        raise os_error(path, e, "golden") from None
    with locked(path, "golden"):  # two recorders of one golden: the check and the write in turn
        if path.exists() and not force:
            raise GoldenError(f"golden {path} already exists", "a configuration without a golden",
                              "pass --force to re-record it (review the diff before committing)")
        write_text_atomic(path, dumps(golden.to_json()), "golden")
    return path


def dumps(data: dict) -> str:
    """Indented JSON with lists of numbers kept on one line (a golden diffs line by line in git)."""
    text = json.dumps(data, indent=1)
    return _NUM_LIST.sub(lambda m: "[" + ", ".join(x.strip() for x in m[1].split(",")) + "]", text) + "\n"


def record_golden(
    program,
    tokenizer,
    reference,
    prompts: Iterable[Prompt],
    key: GoldenKey,
    tolerance: Tolerance,
    options: RunOptions | None = None,
    runner: PluginRunner | None = None,
    on_prompt: Callable[[str], None] | None = None,
    program_sha256: str | None = None,
) -> Golden:
    """Runs every prompt and the reference; refuses divergent runs and near-tie prompts.

    `reference` is anything with `score(prompt_ids, tokens) -> Scores` (the verdict) and
    `greedy(prompt_ids, max_new, stop_ids) -> ReferenceResult` that carries margins (the HF
    reference; the recorded margins). A run with a tie is refused like a failing one (a golden
    records only identical runs), and so is a prompt whose greedy margin at some emitted token
    is within the tolerance at that token's logit. The golden's `tie_tolerance` is the largest
    such absolute tolerance over its tokens. K and max new tokens come from `key`. The draft's
    near-ties each prompt's acceptance hangs on are stored with it (jobs/golden/draft_margins.py), and a
    `.pte` golden names its program (`program_sha256`): acceptance is exact on that program alone.
    """
    from eagle3_check.jobs.golden.draft_margins import draft_margin_probe, near_ties

    options = options or RunOptions()
    opts = RunOptions(**{**asdict(options), "chain_len": key.k, "max_new_tokens": key.max_new})
    runner = runner or ReferenceRunner()
    md = read_metadata(program.metadata())
    stops = stop_set(tokenizer, md, opts)
    out = Golden(key, {**asdict(opts), "stop_ids": list(opts.stop_ids)}, 0.0, versions(),
                 program_sha256=program_sha256)
    refused: list[str] = []
    for p in prompts:
        with draft_margin_probe(program) as draft_margins:
            run = runner.run(program, tokenizer, p.text, opts)
        scores = reference.score(run.prompt_ids, list(run.tokens))
        verdict = judge(run, scores, stops.ids, opts.max_new_tokens, md.max_seq_len, tolerance)
        if verdict.status != PASS:
            what = f"{verdict.ties} tie(s): {verdict.message}" if verdict.status == TIE else verdict.message
            raise GoldenError(f"prompt '{p.id}': {what}", "a run identical to the reference at every token",
                              "fix the runner or program first (`eagle3-check check`), or pick another prompt "
                              "(--only ID,...): goldens record runs without ties")
        ref = reference.greedy(run.prompt_ids, max(run.max_new, 1), stops.ids)
        margins = [float(f"{m:.6g}") for m in ref.margins[: len(run.tokens)]]
        tols = [tolerance.at(t) for t in scores.top1[: len(run.tokens)]]
        out.tie_tolerance = max([out.tie_tolerance, *tols])
        low = min(margins)
        near = [i for i, (m, t) in enumerate(zip(margins, tols)) if m <= t]
        if near:
            at = near[0]
            refused.append(f"'{p.id}' (margin {margins[at]:.3g} at token {at}, tolerance {tols[at]:.3g})")
        draft = None if draft_margins is None else near_ties(draft_margins, key.k, list(run.accepted), tolerance.at)
        out.prompts.append(GoldenPrompt(p.id, p.text, run.prompt_ids, run.tokens, run.text, run.rounds,
                                        run.accepted, run.tau, run.stop_reason, low, margins, draft))
        if on_prompt:
            on_prompt(p.id)
    if refused:
        raise GoldenError(
            f"prompt{'s' if len(refused) > 1 else ''} {', '.join(refused)}: reference margin within the "
            f"tie tolerance ({tolerance.describe()})",
            "every emitted position decided by a margin >= the tolerance (a near-tie makes a golden flaky)",
            "pick another prompt (--only ID,... or --prompts FILE)",
        )
    return out


def run_golden(
    program, tokenizer, golden: Golden, runner: PluginRunner | None = None,
    on_prompt: Callable[[str], None] | None = None,
) -> dict[str, RunResult]:
    """Re-runs the golden's prompts (by their recorded ids) with its recorded options."""
    seam = as_runner(runner or ReferenceRunner())
    opts = golden.run_options()
    golden.check_vocab(read_metadata(program.metadata()).vocab_size or tokenizer.vocab_size)
    runs: dict[str, RunResult] = {}
    for p in golden.prompts:
        obs = seam.observe(program, tokenizer, list(p.prompt_ids), opts, what=f"'{p.prompt_id}'")
        runs[p.prompt_id] = obs.run
        if obs.failure:  # a crash is this prompt's finding (a 'crashed' diff), not the end of verification
            runs[p.prompt_id] = crashed_run(list(p.prompt_ids), golden.key.k, opts.max_new_tokens)
            runs[p.prompt_id].notes.append(obs.failure)
        if on_prompt:
            on_prompt(p.prompt_id)
    return runs


def version_notes(golden: Golden) -> list[str]:
    """One line per library whose installed version differs from the recorded one."""
    now = versions()
    return [f"{golden.key.stem}: recorded with {name} {golden.versions.get(name)}, now {now[name]}"
            for name in VERSIONED if golden.versions.get(name) != now[name]]
