"""Runner binaries (`--runner exec:PATH`): a runner the harness can only start and read.

What lives here, bottom up: the process (`runner`: ExecRunner, one process per request, its
timeout and the options a binary gets), the seed runner's flags and stdout format (`protocol`)
and each token's bytes (`byte_pieces`: byte-level BPE pieces, added tokens literally). Its verdict,
by ids or by bytes, is `judge.binary`'s.

May import: program, runners

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
