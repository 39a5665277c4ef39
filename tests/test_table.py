"""eagle3_check/table.py: the one table formatter (tabulate, "plain") every text table goes through."""

import pytest

from eagle3_check.table import format_rows


def test_worked_example_from_the_docstring():
    assert format_rows([("prompt", "L", "verdict"), ("hi", "12", "identical")]) == [
        "prompt  L   verdict",
        "hi      12  identical",
    ]


def test_right_aligned_columns_and_no_trailing_blanks():
    lines = format_rows([("metric", "now", "change"), ("tau", "1.7500", "")], align=("left", "right", "left"))
    assert lines == ["metric     now  change", "tau     1.7500"]


def test_cells_are_printed_as_given_never_parsed_as_numbers():
    assert format_rows([("id", "v"), ("007", "1e3")]) == ["id   v", "007  1e3"]


@pytest.mark.parametrize("rows,align,match", [
    ([("a", "b"), ("c",)], None, r"table row \['c'\] has 1 cells, expected 2"),
    ([("a", "b"), ("c", 3)], None, r"table cell 3 is a int, expected str"),
    ([("a", "b")], ("left",), r"table align \['left'\] must name 2 columns"),
    ([("a", "b")], ("left", "centre"), r"must name 2 columns, each one of \('left', 'right'\)"),
], ids=["short-row", "int-cell", "align-too-short", "align-unknown"])
def test_malformed_tables_are_errors(rows, align, match):
    with pytest.raises(ValueError, match=match):
        format_rows(rows, align=align)


def test_bench_scripts_print_their_committed_results_through_format_rows(capsys):
    """bench/gpu_bench.py and bench/measure_tolerance.py tables, on the committed result files."""
    import json
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parent.parent / "bench"
    sys.path.insert(0, str(bench))
    try:
        import gpu_bench
        import measure_tolerance
    finally:
        sys.path.remove(str(bench))
    res = json.loads((bench / "results" / "h200.json").read_text())
    gpu_bench.print_table(res)
    rows: dict[str, list[str]] = {}
    for line in capsys.readouterr().out.splitlines():  # the method table comes before the ratios
        if line.strip():
            rows.setdefault(line.split()[0], line.split())
    for method, r in res["results"].items():
        assert rows[method][1:2] + rows[method][3:4] == [f"{r['tokens_per_s']:.1f}", f"{r['ms_per_round']:.3f}"]
    tol = json.loads((bench / "results" / "tolerance-cpu-float32-smollm2.json").read_text())
    lines = measure_tolerance.format_table([tol]).splitlines()
    assert lines[0].split()[:4] == ["fixture", "dtype", "rows", "pair"]
    pair, d = next(iter(tol["summary"]["pairs"].items()))
    assert lines[1].split()[:5] == [tol["fixture"], tol["dtype"], str(tol["summary"]["rows"]), pair,
                                    f"{d['shift']['max']:.3g}"]
