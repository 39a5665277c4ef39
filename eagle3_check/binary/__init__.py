"""Runner binaries (`--runner exec:PATH`): a runner the harness can only start and read.

What lives here, bottom up: the process (`runner`: ExecRunner, one process per request, its
timeout and the options a binary gets), the seed runner's flags and stdout format (`protocol`),
each token's bytes (`byte_pieces`), the verdict of one run by ids or by bytes (`judge`: the
reference's per-position judgement, `status.Status` and `run.rules`' lengths, so one oracle
judges a binary and an in-process runner), and the routes through a binary: the prompt-set
check (`check`), the edge suites (`suites`), the goldens (`golden`) and the gate's runner checks
(`gate`).

May import: program, run, judge, suites, gating, report, shrink
(downward only: nothing below it imports it; the CLI and the pytest plugin do, and
`run.plugin` builds an ExecRunner for `exec:` by name, as it loads any plug-in runner).

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
