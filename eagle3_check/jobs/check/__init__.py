"""`check` over a prompt set: every request run and judged per position.

What lives here: `prompt_set` (a runner over a prompt set against a reference; a judged report's
counts and tie budget), `job` (check on a context: in process, isolated or over worker
processes, with draft health), `workers` (--workers and --shard), `draft_health` (step-0
agreement and per-position acceptance beside tau), `drift` (a quantized program's drift from HF
full precision), `observe` (the one request loop: each prompt observed through the runner seam),
`binary` (the prompt set through a runner judged by what it prints: a binary), `outcomes` (the prompt
set's outcomes, printed by the front end) and `shrink` (the probe: one request as check runs it, a
report's failing requests shrunk).
`options`: its sections of the Config (`CheckOptions`: `cfg.check`; `DriftOptions`: `cfg.drift`).

May import: jobs.common, jobs.shrink_route

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
