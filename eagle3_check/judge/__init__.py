"""What a runner is judged against, and the judging.

What lives here: the references, greedy decoding with Transformers (`hf`) and through the
program's own target methods (`self_ref`); the tie tolerance and budget (`tolerance`); the verdict
(`verdict`: comparison, first-divergence forensics); and the audit of a run's fields against
the rules and its call log (`audit`).

May import: program, run.result, run.rules, run.options, suites.instrument
(never the runner loop: a judge must not share the code it judges).

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
