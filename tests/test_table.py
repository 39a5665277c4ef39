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
