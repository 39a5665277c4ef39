"""What a runner is judged against, and the judging.

What lives here: the references, greedy decoding with Transformers (`hf`; over the program's own
weight tensors, one copy: `shared`) and through the
program's own target methods (`self_ref`); the tie tolerance and budget (`tolerance`); the verdict
(`verdict`: comparison, first-divergence forensics); and the audit of a run's fields against
the rules and its call log (`audit`); a runner binary's run judged by ids, recovered ids or bytes
(`binary`, with `recover`: a text-only binary's ids recovered from its bytes).

May import: program, runners.result, runners.rules, runners.options, runners.instrument, runners.binary.byte_pieces, runners.binary.protocol, runners.seam
(never the runner loop: a judge must not share the code it judges).

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
