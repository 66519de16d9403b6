# hw4p1: instructor-only
"""The class tools' one CSV writer and reader (autograder/classroom/spreadsheet.py), cell by cell:
which cells a spreadsheet would run as a formula (each start, numbers excepted) and get an
apostrophe, the apostrophe taken off again on reading and only then, a missing or short cell,
the header left out, the byte-order mark, and the refusals naming the fix. Every expected value
is worked out by hand here.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_spreadsheet_units.py
"""
import pytest

from autograder.classroom.spreadsheet import read_csv, restored_cell, safe_cell, write_csv

# (value, cell written): each formula start quoted, a number as it is, an own apostrophe doubled
CELLS = [("=1+1", "'=1+1"), ("+cmd", "'+cmd"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"),
         ("\tx", "'\tx"), ("\rx", "'\rx"), ("'=x", "''=x"), ("'", "''"), ("-", "'-"),
         ("-.", "'-."), ("-3.5", "-3.5"), ("+1e3", "+1e3"), ("-.5", "-.5"), ("+7.", "+7."),
         ("-2E-4", "-2E-4"), ("plain", "plain"), ("a=b", "a=b"), ("12", "12"), ("", "")]


@pytest.mark.parametrize("value, written", CELLS)
def test_a_cell_a_spreadsheet_would_run_is_quoted_and_read_back_as_given(value, written):
    assert safe_cell(value) == written
    assert restored_cell(written) == value


def test_cells_that_are_not_strings_are_written_as_their_text():
    assert [safe_cell(value) for value in (None, 0, -1.5, False)] == ["", "0", "-1.5", "False"]


def test_only_an_apostrophe_that_safe_cell_added_is_taken_off():
    assert restored_cell("'plain") == "'plain"
    assert restored_cell("it's") == "it's"


def test_rows_are_written_by_the_header_s_names_or_cell_by_cell(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("old\n")
    write_csv(path, ["student", "=total"], [{"=total": -3, "student": "@ann"}, {"student": "bo"},
                                            ["cy", "+x"]])
    assert path.read_bytes() == b"student,'=total\r\n'@ann,-3\r\nbo,\r\ncy,'+x\r\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]
    assert read_csv(path) == (["student", "=total"], [{"student": "@ann", "=total": "-3"},
                                                      {"student": "bo", "=total": ""},
                                                      {"student": "cy", "=total": "+x"}])
    write_csv(path, None, [["ann@x.edu", 80]])
    assert path.read_text() == "ann@x.edu,80\n"


def test_a_byte_order_mark_blank_lines_and_short_rows_are_read(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_bytes("\ufeffStudent,ID,Email\r\nLee,7\r\n\r\nChen,8,'=b\r\n".encode())
    assert read_csv(path) == (["Student", "ID", "Email"], [
        {"Student": "Lee", "ID": "7", "Email": ""},
        {"Student": "Chen", "ID": "8", "Email": "=b"}])


def test_a_file_that_is_missing_not_utf8_or_not_a_csv_is_refused_naming_the_fix(tmp_path):
    with pytest.raises(SystemExit, match=r"missing.csv not found$"):
        read_csv(tmp_path / "missing.csv")
    path = tmp_path / "excel.csv"
    path.write_bytes(b"Student\nL\xe9e\n")
    with pytest.raises(SystemExit, match=r'is not UTF-8 \(byte 9\): export it again, or save it '
                                         r'from the spreadsheet as "CSV UTF-8"'):
        read_csv(path)
    path.write_text("Student\n" + "x" * 200_000 + "\n")
    with pytest.raises(SystemExit, match=r"is not a CSV file \(field larger than field limit"):
        read_csv(path)
