"""The routes through a runner binary (`--runner exec:PATH`; the binary itself is `runners.binary`,
its verdict `judge.binary`): the prompt-set
check (`check`), the edge suites (`suites`), the goldens (`golden`) and the gate's runner checks
(`gate`).

May import: program, runners, judge, suites, gating, report, shrink
(downward only: nothing below it imports it; the CLI, the session and the pytest plugin do).

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
