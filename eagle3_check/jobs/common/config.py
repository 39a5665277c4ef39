"""`Config`: every option of a command, typed, built once and checked where it is built.

A front end (the CLI's parsed flags, the pytest plugin's options) hands `Config.build` a
mapping of option name -> value; `build` refuses a name it does not know, fills the rest
with their defaults and runs every check that needs neither torch nor a model
(jobs/common/validate.py): a wrong value is one line before anything loads. Nothing here
imports torch. `present` is the option names the command has (a subcommand without
`--max-new-tokens` does not set it), `given` the ones the user typed (`-k 4` told from the
default), `options()` the mapping back, in the front end's order (the provenance block).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from eagle3_check.errors import OptionError


@dataclass(frozen=True)
class Config:
    command: str | None = None
    # --- the program (default: jobs/common/default_program.py: smollm2-135m for check / run, else tiny-llama) ---
    fixture: str | None = None
    target: str | None = None  # a directory (a hub id is resolved to its cache directory when built)
    draft: str | None = None
    tokenizer: str | None = None
    device: str = "cpu"
    devices: str | None = None  # --devices cuda:0,cuda:1: the target's layers over several GPUs (program/placement.py)
    dtype: str = "float32"
    cuda_graph: bool | None = None
    max_seq_len: int | None = None
    min_prefill: int | None = None
    max_prefill: int | None = None
    threads: int | None = None
    max_memory: float | None = None
    pte: str | None = None
    data_path: str | None = None
    aoti: str | None = None  # an AOTI package (.pt2) to run (jobs/common/aoti.py)
    compile: str | None = None  # off / layer / model (None: the command has no --compile)
    compile_mode: str | None = None
    compile_attention: str | None = None
    # --- runner options (runners/options.py; unset ones come from the tokenizer's files) ---
    prompt: str | None = None
    prompt_file: str | None = None
    chat_prefix: str | None = None
    chat_suffix: str | None = None
    raw: bool = False
    stop_ids: str | None = None
    stop_token: str | None = None
    bos_id: int | None = None
    eos_id: int | None = None
    allow_text_stops: bool = False
    max_new_tokens: int | None = None
    chain_len: int | None = None
    chunked_prefill: bool = False
    # --- what is judged and how ---
    prompts: str | None = None
    runner: str | None = None
    runner_timeout: float | None = None
    runner_profile: str | None = None  # the runner's rules (runners/profiles.py); default: detected / declared
    isolate: bool = False  # the reference/device runner in its own process too (eagle3_check/runners/isolate)
    in_process: bool = False  # a plug-in runner in the harness's process
    suite: str | None = None
    list: bool = False
    shuffle: int | None = None
    workers: int = 1
    shard: str | None = None
    expect_tau: float | None = None
    reference: str = "hf"
    tie_budget: float | None = None
    exact: bool = False  # exact mode: shape-invariant kernels, verdict as identity (jobs/common/exact.py)
    # --- shrinking and replaying (jobs/shrink_route.py) ---
    prompt_ids: str | None = None  # the prompt as comma-separated ids
    repro: str | None = None  # a repro file to replay
    repro_prompt_id: str | None = None  # set by --repro: the replayed request's name
    shrink: bool = False
    shrink_budget: float | None = None
    shrink_dir: str | None = None
    # --- quantization and its drift thresholds ---
    quantize: str | None = None
    group_size: int | None = None
    quantize_draft: bool = False
    min_agreement: float | None = None
    max_tau_drop: float | None = None
    far_rank: int | None = None
    max_far_share: float | None = None
    max_mean_gap: float | None = None
    # --- the gate and goldens ---
    all_k: bool = False
    golden: str | None = None
    goldens: tuple = ()
    baseline: str | None = None
    tau_tolerance: float | None = None
    report: str | None = None  # gate --report FILE
    golden_command: str | None = None  # the action of `golden`, `fixtures`, `draft`
    fixtures_command: str | None = None
    draft_command: str | None = None
    only: object = None  # golden record: "a,b" ids; mutants: a list of names
    dir: str | None = None
    force: bool = False
    no_baseline: bool = False
    # --- outputs ---
    json: bool = False
    html: str | None = None
    junit: str | None = None
    no_progress: bool = False
    output: str | None = None
    # --- export ---
    backend: str | None = None
    min_verify_len: int | None = None
    max_verify_len: int | None = None
    verify_kv_window: bool = False
    external_data: bool = False
    stock_lowering: bool = False
    omit_metadata: tuple = ()
    from_pte: str | None = None
    aoti_export: bool = False  # export --aoti: compile with AOTInductor into a .pt2
    # --- mutants ---
    first_kill: bool = False
    all: bool = False
    no_suites: bool = False
    placement: object = None
    strict_suites: bool = False
    # --- fixtures build, draft train / export ---
    name: str | None = None
    root: str | None = None
    steps: int | None = None
    batch_size: int | None = None
    seed: int | None = None
    no_card: bool = False
    source: str | None = None
    verifier: str | None = None
    train_prompts: str | None = None
    card_prompts: str | None = None
    lr: float | None = None
    ttt_steps: int | None = None
    self_prompts: int | None = None
    opened_prompts: int | None = None
    gen_batch: int | None = None
    draft_vocab: int | None = None
    intermediate_size: int | None = None
    checkpoint_every: int | None = None
    # --- report ---
    bench: str | None = None
    check: str | None = None
    gate: str | None = None
    # --- bookkeeping (not options) ---
    present: frozenset = field(default=frozenset(), compare=False)  # the option names the command has
    given: frozenset = field(default=frozenset(), compare=False)  # the ones the user typed (Given action)
    order: tuple = field(default=(), compare=False)  # the front end's option order (options())

    @classmethod
    def build(cls, values: dict, check: bool = True) -> Config:
        """The config of `values` (option name -> value), checked (jobs/common/validate.py) unless
        `check` is false; an unknown name is a one-line error, never dropped."""
        names = {f.name for f in dataclasses.fields(cls)} - BOOKKEEPING
        values = dict(values)
        given = frozenset(values.pop("given", ()))
        unknown = [k for k in values if k not in names]
        if unknown:
            raise OptionError(f"option {unknown[0]}", f"one of Config's options ({len(names)})",
                              "add it to eagle3_check/jobs/common/config.py")
        for k in ("goldens", "omit_metadata"):
            if isinstance(values.get(k), list):
                values[k] = tuple(values[k])
        cfg = cls(**values, present=frozenset(values), given=given, order=tuple(values))
        if not check:
            return cfg
        from eagle3_check.jobs.common.validate import validated

        return validated(cfg)

    def has(self, name: str) -> bool:
        """Whether the command has this option at all."""
        return name in self.present

    def options(self) -> dict:
        """The command's options in the front end's order (the provenance block's `options`)."""
        values = {k: getattr(self, k) for k in self.order}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}

    def replace(self, **changes) -> Config:
        return dataclasses.replace(self, **changes)


BOOKKEEPING = {"present", "given", "order"}
