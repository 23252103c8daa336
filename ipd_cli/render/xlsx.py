"""xlsx output (needs openpyxl: ``pip install '.[xlsx]'`` in a checkout; imported lazily).

Sheet ``results``: the same flat rows as CSV (raw numbers, units in the column names), the header
row and first column frozen, numbers formatted for reading. Sheet ``assumptions``: every input of
every system with its unit, source, catalog file and ``--set`` path (a sweep's: one an axis
varies says so, :func:`varied_input`). Sheet ``sources``: each source id with its title, URL and
date.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ipd_cli.catalog.overrides import CLI_SOURCE
from ipd_cli.errors import IpdError, require_extra

ASSUMPTION_COLUMNS = (
    "name",
    "value",
    "unit",
    "source",
    "estimate",
    "origin",
    "path",
    "note",
)
MAX_COLUMN_WIDTH = 60


def number_format(values: list[Any]) -> str | None:
    """An Excel number format for a column: thousands separators, decimals by magnitude."""
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if not numbers:
        return None
    if all(float(v).is_integer() for v in numbers) or max(abs(v) for v in numbers) >= 100:
        return "#,##0"
    if max(abs(v) for v in numbers) >= 1:
        return "#,##0.00"
    return "0.0000"


def cell_format(value: float, fmt: str) -> str:
    """A cell's format: its column's, unless that would hide the value's digits (a column of
    costs in the hundreds chose no decimals from its first rows; a later system's $0.229 per task
    showed as 0: a user review)."""
    if float(value).is_integer():
        return fmt
    if abs(value) < 1e-3:  # 8e-06 read 0.0000 (a review of the xlsx outputs): its own digits
        return "0.00E+00"
    own = number_format([value]) or fmt
    decimals = lambda f: len(f.partition(".")[2])  # noqa: E731 - digits after the point
    return own if decimals(own) > decimals(fmt) else fmt


def _clean(value: Any) -> Any:
    """A string as a worksheet takes it: control characters (which openpyxl refuses: a note with
    one failed the whole workbook, a review) written as their escapes, ``\\x07``."""
    if not isinstance(value, str):
        return value
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

    return ILLEGAL_CHARACTERS_RE.sub(lambda m: m.group().encode("unicode_escape").decode(), value)


def _text_cell(ws: Any, value: str) -> Any:
    """A write-only sheet's string: plain, or a text cell where openpyxl would store a formula
    (a string that starts with "="; a catalog note "=HYPERLINK(...)" became a live link, a review)."""
    value = _clean(value)
    if not value.startswith("="):
        return value
    from openpyxl.cell import WriteOnlyCell

    cell = WriteOnlyCell(ws, value)
    cell.data_type = "s"
    return cell


def _append_text(ws: Any, row: list[Any]) -> None:
    """A row of a sheet in memory, its strings text (see :func:`_text_cell`)."""
    ws.append([_clean(v) for v in row])
    for cell in ws[ws.max_row]:
        if cell.data_type == "f":
            cell.data_type = "s"


def _sheet(wb: Any, title: str, columns: list[str], rows: list[list[Any]], first: bool = False) -> None:
    from openpyxl.styles import Font

    ws = wb.active if first else wb.create_sheet()
    ws.title = title
    _append_text(ws, columns)
    for cell in ws[1]:
        cell.font = Font(bold=True)
    for row in rows:
        _append_text(ws, row)
    ws.freeze_panes = "B2"  # the header row and the first column stay in view
    for i, col in enumerate(columns, start=1):
        values = [row[i - 1] for row in rows]
        fmt = number_format(values)
        letter = ws.cell(row=1, column=i).column_letter
        if fmt:
            for cell in ws[letter][1:]:
                if isinstance(cell.value, int | float) and not isinstance(cell.value, bool):
                    cell.number_format = cell_format(cell.value, fmt)
        width = max([len(str(col)), *(len(f"{v:,.2f}" if isinstance(v, float) else str(v)) for v in values)])
        ws.column_dimensions[letter].width = min(width + 2, MAX_COLUMN_WIDTH)


def _assumptions(data: dict) -> tuple[list[str], list[list[Any]], dict[str, dict]]:
    """Rows of every input (one per system and input) and the sources they cite."""
    per_system = data["systems"] if isinstance(data.get("systems"), list) else [data]
    rows: list[list[Any]] = []
    sources: dict[str, dict] = {}
    for system in per_system:
        for a in system.get("assumptions") or []:
            rows.append([system.get("hardware", ""), *(a.get(c) for c in ASSUMPTION_COLUMNS)])
            if a.get("source"):
                # the URL too (the sheet's url column was empty: a cross-command review)
                cited = {k: a.get(f"source_{k}") for k in ("title", "url", "date")}
                sources.setdefault(a["source"], cited)
    for sid, src in (data.get("sources") or {}).items():  # `hardware show` and friends
        sources.setdefault(sid, src)
    return ["hardware", *ASSUMPTION_COLUMNS], rows, sources


def workbook(result: BaseModel) -> Any:
    """An openpyxl Workbook: results, assumptions and sources."""
    Workbook = _openpyxl().Workbook
    from ipd_cli.render import record_columns, records

    rows = records(result)
    columns = record_columns(result, rows)
    wb = Workbook()
    _sheet(wb, "results", columns, [[row.get(c) for c in columns] for row in rows], first=True)
    data = result.model_dump(mode="json")
    cols, inputs, sources = _assumptions(data)
    if inputs:
        _sheet(wb, "assumptions", cols, inputs)
    if sources:
        src_rows = [[sid, s.get("title"), s.get("url"), s.get("date")] for sid, s in sorted(sources.items())]
        _sheet(wb, "sources", ["source", "title", "url", "date"], src_rows)
    return wb


MAX_ROWS = 1_048_575  # an Excel sheet's rows, less the header


MISSING = (
    "xlsx output needs openpyxl: pip install 'intelligence-per-dollar[xlsx]' "
    "(from a checkout: pip install '.[xlsx]'), or use --format csv"
)


def check_installed() -> None:
    """Refuse xlsx before anything is computed where openpyxl is not installed."""
    require_extra("openpyxl", MISSING)


def _openpyxl() -> Any:
    try:
        import openpyxl
    except ImportError:
        raise IpdError(MISSING) from None
    return openpyxl


SHOWN_VALUES = 6  # an axis of more values is shown by its first ones and its last


def axis_values(values: Any) -> str:
    """An axis's values as the inputs sheet says them: all of them, or its first and last few
    and how many."""
    n = len(values)
    shown = [values[i] for i in range(n)] if n <= SHOWN_VALUES else [values[0], values[1], values[2]]
    text = ", ".join(f"{v:g}" for v in shown)
    return text if n <= SHOWN_VALUES else f"{text}, ..., {values[n - 1]:g}: {n:,} values"


def varied_input(a: dict, axes: dict[str, Any]) -> dict:
    """An inputs sheet's row (an assumption, as JSON) as a sweep takes it: one an axis varies (its
    path, or a system's rental price under a ``price_usd_per_gpu_hour`` axis) says so, with the
    axis's values and the results sheet's column that has each row's, citing no source (a review:
    a varied PUE was listed at the catalog's 1.3, citing its source, while the rows ran at 1.1 and
    1.5); the value it replaces is in its note."""
    from ipd_cli.engine.pricing import rental_input
    from ipd_cli.engine.sweep import PRICE  # the axis that replaces each system's rental price

    path = a.get("path") or ""
    column = path if path in axes else PRICE if PRICE in axes and rental_input(path) else None
    if column is None:
        return a
    replaced = a.get("value")
    shown = f"{replaced:g}" if isinstance(replaced, int | float) else str(replaced)
    # a grid point's value (the first point that ran, not the catalog's: SweepBook) is not said
    was = "" if a.get("source") == CLI_SOURCE else f" (the catalog's: {shown})"
    cited = {f"source_{k}": None for k in ("title", "url", "date")}
    return {
        **a,
        **cited,
        "value": f"varied: {axis_values(axes[column])} (the results sheet's {column} column)",
        "source": None,
        "estimate": None,
        "origin": "--vary",
        "note": f"each row reads its own value{was}",
    }


class SweepBook:
    """A sweep as a workbook, row by row (openpyxl's write-only mode: rows are written as they come,
    not held as cells). Sheet ``results``: the rows of the CSV (raw numbers, units in the column
    names), the header row and first column frozen, each column's number format chosen from its
    first chunk; an empty cell where a block cannot run. Sheets ``assumptions`` and ``sources``:
    every input of each system searched (at the catalog's values, or where it cannot run there at
    the first point that ran), as in other workbooks, but an input an axis varies, which says
    ``varied:`` and its values (:func:`varied_input`)."""

    def __init__(self) -> None:
        self.wb = _openpyxl().Workbook(write_only=True)
        self.ws = self.wb.create_sheet("results")
        self.columns: list[str] = []
        self.formats: list[str | None] = []
        self.whole = True  # the sheet ends at a row boundary (a signal is deferred to the row's end)

    def add(self, cols: dict) -> None:
        import numpy as np
        from openpyxl.cell import WriteOnlyCell

        from ipd_cli.render.stream import chunk_shape, compact_columns

        shape = chunk_shape(cols)
        names = list(compact_columns(cols))
        lists = [
            np.broadcast_to(np.asarray(v), shape).reshape(-1).tolist() for v in compact_columns(cols).values()
        ]
        if not lists or not lists[0]:
            return
        if not self.columns:
            sample = [dict(zip(names, r, strict=True)) for r in zip(*(v[:1000] for v in lists), strict=True)]
            self._header(names, sample)
        ws, formats = self.ws, self.formats
        for row in zip(*lists, strict=True):
            cells = []
            for value, fmt in zip(row, formats, strict=True):
                if isinstance(value, float) and value != value:
                    value = None  # NaN: the block cannot run at this point
                if isinstance(value, str):
                    cells.append(_text_cell(ws, value))
                    continue
                if fmt is None or not isinstance(value, int | float):
                    cells.append(value)
                    continue
                cell = WriteOnlyCell(ws, value)
                cell.number_format = cell_format(value, fmt)
                cells.append(cell)
            self._append(cells)

    def _append(self, cells: list[Any]) -> None:
        """One row, whole: a first signal waits for its end (raised there); a second one cuts it
        (``whole`` stays False: the workbook is not kept). openpyxl writes a write-only sheet
        through a generator that a signal raised inside leaves with its XML cut mid-row (a
        review: 8 of 9 interrupted sweeps left a workbook Excel could not open)."""
        from ipd_cli import signals

        self.whole = False
        with signals.deferred():
            self.ws.append(cells)
            self.whole = True

    def discard(self) -> None:
        """Drop a workbook that will not be written (a second signal cut a row, or an error): its
        sheet's writer is closed now, while its temporary file is open; left to the garbage
        collector it closed on a closed file ('Exception ignored in ... WriteOnlyWorksheet')."""
        import contextlib

        with contextlib.suppress(Exception):  # a sheet cut mid-row may fail to close: dropped anyway
            self.ws.close()

    def _header(self, names: list[str], sample: list[dict]) -> None:
        from openpyxl.cell import WriteOnlyCell
        from openpyxl.styles import Font
        from openpyxl.utils import get_column_letter

        self.columns = names
        sample = [{k: None if isinstance(v, float) and v != v else v for k, v in r.items()} for r in sample]
        self.formats = [number_format([r[c] for r in sample]) for c in self.columns]
        self.ws.freeze_panes = "B2"
        for i, name in enumerate(self.columns, start=1):
            shown = [len(f"{r[name]:,.2f}" if isinstance(r[name], float) else str(r[name])) for r in sample]
            width = max([len(name), *shown])
            self.ws.column_dimensions[get_column_letter(i)].width = min(width + 2, MAX_COLUMN_WIDTH)
        header = []
        for name in self.columns:
            cell = WriteOnlyCell(self.ws, name)
            cell.font = Font(bold=True)
            header.append(cell)
        self._append(header)

    def finish(self, results: list[Any], axes: dict[str, Any] | None = None) -> bytes:
        """The workbook's bytes, with the inputs of ``results`` (SystemResult models), each one an
        axis of ``axes`` (a path: its values) varies marked as varied (:func:`varied_input`)."""
        import io

        data = {"systems": [r.model_dump(mode="json") for r in results if r.assumptions]}
        for system in data["systems"]:
            system["assumptions"] = [varied_input(a, axes or {}) for a in system["assumptions"]]
        cols, inputs, sources = _assumptions(data)
        if inputs:
            self._sheet("assumptions", cols, inputs)
        if sources:
            src_rows = [
                [sid, s.get("title"), s.get("url"), s.get("date")] for sid, s in sorted(sources.items())
            ]
            self._sheet("sources", ["source", "title", "url", "date"], src_rows)
        buf = io.BytesIO()
        self.wb.save(buf)
        return buf.getvalue()

    def _sheet(self, title: str, columns: list[str], rows: list[list[Any]]) -> None:
        from openpyxl.cell import WriteOnlyCell
        from openpyxl.styles import Font

        ws = self.wb.create_sheet(title)
        ws.freeze_panes = "B2"
        header = []
        for name in columns:
            cell = WriteOnlyCell(ws, name)
            cell.font = Font(bold=True)
            header.append(cell)
        ws.append(header)
        for row in rows:
            ws.append([_text_cell(ws, v) if isinstance(v, str) else v for v in row])
