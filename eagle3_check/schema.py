"""Typed, validated loading of every JSON file the tool reads: one schema each, one-line errors.

Each file kind has a pydantic model (strict: an id is an int, never a bool, a float or a string;
unknown keys are errors, since anything the tool cannot interpret exactly is an error) and
`load(Model, path)` maps the first problem to one line that names the file, the field path, the
value, what was expected and the fix:

    golden golden/x.json: prompts[0].tokens[3] = -4; expected an integer >= 0. Fix: re-record ...

Kinds: prompt sets (`{"prompts": [{"id", "text"}]}`, a `description` allowed), goldens,
metrics baselines, tau baselines, fixture cards (fixture.json: registry.read_spec, by hand). Token ids are range-checked against the
vocab where it is known (`check_ids`): a golden's ids when it is verified on a program.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eagle3_check.errors import InputError
from eagle3_check.inputs import JSON_LIMIT, read_json

Id = Annotated[int, Field(ge=0)]
Count = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(ge=1)]
Share = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Finite = Annotated[float, Field(allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class PromptEntry(Strict):
    id: Annotated[str, Field(min_length=1)]
    text: str


class PromptSet(Strict):
    description: str | None = None
    prompts: Annotated[list[PromptEntry], Field(min_length=1)]


class GoldenKeyModel(Strict):
    fixture: Annotated[str, Field(min_length=1)]
    backend: Literal["eager", "pte"]
    device: Annotated[str, Field(pattern=r"^(cpu|cuda(:\d+)?)$")]
    dtype: Literal["float32", "bfloat16"]
    k: Positive
    max_new: Positive
    numerics: Literal["normal", "exact"] = "normal"  # exact: recorded with --exact (jobs/golden/file.py)


class GoldenOptions(Strict):
    """RunOptions as a golden records them (chain_len and max_new_tokens as in the key)."""

    chat_prefix: str
    chat_suffix: str
    raw: bool
    stop_ids: list[Id]
    stop_token: str | None
    bos_id: Annotated[int, Field(ge=-1)]
    eos_id: Annotated[int, Field(ge=-1)] | None
    max_new_tokens: Positive
    chain_len: Positive | None
    chunked_prefill: bool = False


class DraftNearTie(Strict):
    """A proposal whose draft top-1/top-2 margin was inside the tie tolerance when the golden was recorded."""

    round: Count
    proposal: Count
    margin: NonNegative


class GoldenPromptModel(Strict):
    prompt_id: Annotated[str, Field(min_length=1)]
    prompt_text: str
    prompt_ids: Annotated[list[Id], Field(min_length=1)]
    tokens: Annotated[list[Id], Field(min_length=1)]
    text: str
    rounds: Count
    accepted: list[Count]
    tau: NonNegative
    stop_reason: Annotated[str, Field(min_length=1)]
    min_margin: NonNegative
    margins: list[NonNegative]
    draft_near_ties: list[DraftNearTie] | None = None


class GoldenModel(Strict):
    schema_: Literal[1] = Field(alias="schema")
    key: GoldenKeyModel
    options: GoldenOptions
    tie_tolerance: NonNegative
    versions: dict[str, str | None]
    program_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    prompts: Annotated[list[GoldenPromptModel], Field(min_length=1)]


class MetricsEntry(Strict):
    requests: Positive
    emitted: Count
    rounds: Count
    target_forwards: Count
    draft_forwards: Count
    target_per_token: NonNegative
    draft_per_token: NonNegative
    tau: NonNegative
    n_alpha: list[Share]


class MetricsBaseline(Strict):
    schema_: Literal[1] = Field(alias="schema")
    refresh: str | None = None
    entries: dict[str, MetricsEntry]


class CardRow(Strict):
    tau: NonNegative
    n_alpha: list[Share]
    passed: bool
    rounds: Count
    tokens: Count


class Card(Strict):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)  # training notes (final_loss, ...)
    fixture: str
    command: str
    measured_by: str
    prompts: str
    max_new_tokens: Positive
    k: dict[Annotated[str, Field(pattern=r"^[1-9][0-9]*$")], CardRow]


class TauBaseline(Strict):
    """Any JSON with a top-level tau (a gate or check report, or {"tau": 2.1, "k": 4})."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
    tau: NonNegative
    k: Positive | list[Positive] | None = None
    info: dict | None = None


def path_of(loc: tuple) -> str:
    """('prompts', 0, 'tokens', 3) -> 'prompts[0].tokens[3]'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _expected(err: dict) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "missing":
        return "the field to be present"
    if kind == "extra_forbidden":
        return "only the fields this file kind defines"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sign = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        return f"a number {sign} {next(iter(ctx.values()))}"
    if kind == "too_short":
        return f"at least {ctx.get('min_length', 1)} item(s)"
    msg = err["msg"]
    return msg.removeprefix("Input should be ").removeprefix("Value error, ") or kind


def validation_error(e: ValidationError, where: str, fix: str) -> InputError:
    """The first problem of `e` as one line: file, field path, value, expectation, fix."""
    err = e.errors()[0]
    path = path_of(tuple(p for p in err["loc"] if p != "schema_")) if err["loc"] != ("schema_",) else "schema"
    if err["type"] == "missing":
        what = f"{where}: {path} is missing"
    elif err["type"] == "extra_forbidden":
        what = f"{where}: unknown field {path}"
    else:
        what = f"{where}: {path} = {_short(err.get('input'))}"
    return InputError(what, _expected(err), fix)


def validate(model: type[BaseModel], data: Any, where: str, fix: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise validation_error(e, where, fix) from None


def load(model: type[BaseModel], path: str | Path, what: str, fix: str, limit: int = JSON_LIMIT) -> Any:
    """Reads `path` (a regular file, bounded, strict UTF-8 JSON) and validates it against `model`."""
    expected = f"a {what} in its JSON format"
    return validate(model, read_json(path, what, expected, fix, limit), f"{what} {path}", fix)


def check_ids(ids: list[int], vocab: int, where: str, fix: str) -> None:
    """Every id in [0, vocab); the first one outside is a one-line error naming its index."""
    i = next((i for i, t in enumerate(ids) if not 0 <= t < vocab), None)
    if i is not None:
        raise InputError(f"{where}[{i}] = {ids[i]}", f"a token id in [0, {vocab - 1}] (the vocab has {vocab})", fix)


class ReproRequest(Strict):
    prompt_ids: Annotated[list[Id], Field(min_length=1)]
    max_new_tokens: Positive
    k: Positive
    spec: dict[str, Positive] = {}


class ReproModel(Strict):
    """A shrunk failing request (shrink/repro.py): what replays it and what it showed."""

    format: Literal["eagle3-check-repro/1"]
    prompt_id: str
    program: dict[str, Any]  # {"flags": [...], "sha256": ..., "files": {...}}
    runner: str
    options: dict[str, Any]  # the RunOptions the runner got (the request's fields replaced)
    request: ReproRequest
    prompt_text: str | None  # the prompt as text when the original was text (the runner builds its ids)
    rule: str
    message: str
    index: int | None
    expected: list[Id] | None
    got: list[Id] | None
    original: ReproRequest
    original_message: str
    command: str
    kept: list[str] = []  # the dimensions the route could not shrink, and why
