"""Running a program: the runner loop (DESIGN §2) and what it needs.

What lives here: the one reference runner loop (`loop`), its result (`result`: RunResult, what
references and the verdict read without importing the loop), the options and the stop set
(`options`), the stop reasons and the output lengths the rules fix (`rules`), plug-in runners (`plugin`:
`module:factory`) and, until it is merged into `loop`, the loop with data on the program's
device (`device_loop`).

May import: program

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
