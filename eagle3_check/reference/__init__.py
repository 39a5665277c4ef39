"""What a runner is judged against, and the judging.

What lives here: greedy decoding with Transformers (`hf`; over the program's own weight
tensors, one copy: `shared`), greedy decoding through the program's own target methods
(`self_ref`) and the verdict (`verdict`: comparison,
first-divergence forensics, tie tolerance).

May import: program, run.result, run.rules, run.options
(never the runner loop: a reference must not share the code it judges).

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
