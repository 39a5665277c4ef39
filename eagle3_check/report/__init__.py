"""Reports: what a finished check writes for people and CI, from its results or its JSON.

What lives here: the HTML page (`html_page`: inline CSS, escaped tables, the atomic write), the
HTML reports of check, gate and golden verify (`html_report`, from their JSON reports) and of a
benchmark JSON (`bench_report`), their plots (`plots`: matplotlib figures as inline SVG), the
JUnit XML writer (`junit`) and `check --junit`'s suites (`check_junit`), and what reproduces a
report (`provenance`: options, versions, input files' hashes).

A report formats; it never judges. The jobs import it, never the reverse:
its functions take plain results or JSON (a report object read through its fields).

May import: nothing else (the leaves only: never the jobs, the judge, suites, the runners or the CLI).

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status, atomic) and fixtures.registry.
"""
