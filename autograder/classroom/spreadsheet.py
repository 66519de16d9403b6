"""The one CSV writer and reader of the class tools (grades.csv, gradebook.csv, canvas_import.csv,
pairs.csv, runtime_code.csv). Standard library only.

Names and emails come from students (Gradescope's metadata, archive names, a Canvas roster), and a
spreadsheet may run a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return
as a formula. :func:`safe_cell` writes such a cell with a leading apostrophe, which
spreadsheets show as text and do not display; a cell that is a number (``-3.5``, ``+1e3``) is
written as it is. :func:`read_csv` removes that apostrophe again, so what the tools read back from
their own files has the same keys and joins as what they wrote: ``restored_cell(safe_cell(x)) ==
x`` for every string ``x`` (an apostrophe that was the cell's own first character is doubled on
writing for that reason).

Files are UTF-8 without a byte-order mark (Canvas imports it; LibreOffice and Google Sheets read it;
Excel reads it through Data > From Text/CSV, File origin UTF-8), written atomically: a reader, or
an interrupted run, never sees half a file.
"""
from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

# What a spreadsheet may run when it opens a cell that starts with it; the apostrophe is escaped
# too so that restoring a cell is exact.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
QUOTE = "'"
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def safe_cell(value: object) -> str:
    """``value`` as the text of a cell no spreadsheet runs as a formula."""
    text = "" if value is None else str(value)
    if text.startswith(FORMULA_STARTS + (QUOTE,)) and not NUMBER.fullmatch(text):
        return QUOTE + text
    return text


def restored_cell(text: str) -> str:
    """The value :func:`safe_cell` wrote as ``text``."""
    if text.startswith(QUOTE) and text[1:].startswith(FORMULA_STARTS + (QUOTE,)):
        return text[1:]
    return text


def write_csv(path: Path, header: Sequence[str] | None,
              rows: Iterable[Mapping[str, object] | Sequence[object]]) -> None:
    """Write ``header`` (None: no header row, as Autolab's grade import has none) then ``rows``
    (mappings, read by the header's names, a missing name an empty cell; or sequences, cell by
    cell) to ``path``, every cell through :func:`safe_cell`, replacing the file atomically."""
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        if header is not None:
            writer.writerow([safe_cell(name) for name in header])
        for row in rows:
            cells = ([row.get(name, "") for name in header] if isinstance(row, Mapping)
                     else row)
            writer.writerow([safe_cell(cell) for cell in cells])
    partial.replace(path)


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """(header, one {column: cell} per row) of a CSV with a header row, each cell as
    :func:`write_csv` was given it (a short row's missing cells ''); a byte-order mark (Canvas
    writes one) is skipped. A file that is not UTF-8 (Excel's plain "CSV" is cp1252) or not a
    CSV is a SystemExit naming the fix."""
    if not path.is_file():
        raise SystemExit(f"{path} not found")
    try:
        with open(path, newline="", encoding="utf-8-sig") as file:
            reader = csv.reader(file)
            header = [restored_cell(name) for name in next(reader, [])]
            rows = [{name: restored_cell(cells[index]) if index < len(cells) else ""
                     for index, name in enumerate(header)} for cells in reader if cells]
    except UnicodeDecodeError as error:
        raise SystemExit(f"{path} is not UTF-8 (byte {error.start}): export it again, or save "
                         f"it from the spreadsheet as \"CSV UTF-8\"") from None
    except csv.Error as error:
        raise SystemExit(f"{path} is not a CSV file ({error}): export it again") from None
    return header, rows
