"""The program contract and its backends.

What lives here: the contract a speculator program honours (`contract`: SpeculatorProgram,
ProgramWrapper, the metadata reader), the target and draft models (`target`, `draft`), the
speculator over them (`speculator`), the backends that run one (`eager`, `pte_backend`, CUDA
graphs in `cuda_graph`), `.pte` export and editing (`export`, `pte_edit`), the files beside a
`.pte` and what it is judged with (`sidecar`: its fixture or target, from its export sidecar), and the
metadata checks against a tokenizer and target (`metadata_check`).

May import: nothing else (never the runners, the judge, suites, the jobs, shrinking, report, fixture building, mutants or the CLI).

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
