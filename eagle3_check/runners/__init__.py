"""Runners: every kind of runner the harness judges, and the run contract they share.

The seam (`seam`): one `Runner` protocol every kind implements (`capabilities`, `observe` ->
`Observation`); the jobs adapt to a runner's capabilities, never to its kind.
What lives here: the one reference runner loop (`loop`, DESIGN §2), its result (`result`: RunResult,
what the judge reads without importing the loop), the options and the stop set (`options`), the stop
reasons and the output lengths the rules fix (`rules`), the recording of a program's calls
(`instrument`: the call log a judge audits), plug-in runners (`plugin`: `module:factory`) and, until it
is merged into `loop`, the loop with data on the program's device (`device_loop`). The other kinds are
subpackages: a runner in its own process (`isolate`) and a runner binary (`binary`).

May import: program

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
