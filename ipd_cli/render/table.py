"""Tables for terminals, as Rich draws them. Imported lazily: only table output pays for it.

Nothing a user reads or types is cut: a name, a number or a path is never shortened or split.
When a grid is wider than the terminal, text wraps between words; then optional columns are
dropped; then the grid is drawn vertically (one block per system or item). A grid that still
does not fit is drawn at its narrowest and the terminal wraps its lines.
"""

from __future__ import annotations

import io
import re
import sys
import textwrap
import unicodedata
from dataclasses import replace
from typing import TYPE_CHECKING

from . import OutputContext
from .views import Grid, View

if TYPE_CHECKING:
    from rich.box import Box

# a Rich table with the default box and padding: one space either side of each cell, a rule
# between columns and at both edges
CELL_PADDING = 2
UNLIMITED = 100_000


def table_width(widths: list[int]) -> int:
    return sum(widths) + CELL_PADDING * len(widths) + len(widths) + 1


def _lines(text: str) -> list[str]:
    return text.split("\n") or [""]


def _natural(grid: Grid) -> list[int]:
    """Each column's width with no wrapping."""
    cells = [grid.columns, *grid.rows]
    return [max(len(line) for row in cells for line in _lines(row[i])) for i in range(len(grid.columns))]


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def _narrowest(grid: Grid) -> list[int]:
    """Each column's width when its text wraps between words: its longest word (and indent)."""
    cells = [grid.columns, *grid.rows]
    return [
        max((_indent(row[i]) + len(w) for row in cells for w in row[i].split()), default=0)
        for i in range(len(grid.columns))
    ]


def fit_widths(grid: Grid, width: int) -> list[int] | None:
    """Column widths that fit ``width`` without breaking a word (the widest columns give way
    first), or None when even the narrowest layout is too wide."""
    natural, narrowest = _natural(grid), _narrowest(grid)
    if table_width(narrowest) > width:
        return None
    widths = list(natural)
    excess = table_width(widths) - width
    while excess > 0:
        # one column at a time, the widest first (the first of equals); a column wider than every
        # other gives way at once down to the next widest, its narrowest or the width needed
        give = [i for i in range(len(widths)) if widths[i] > narrowest[i]]
        wide = max(give, key=lambda i: widths[i])
        below = max((widths[i] for i in give if i != wide), default=0)
        step = max(1, min(excess, widths[wide] - max(below, narrowest[wide])))
        widths[wide] -= step
        excess -= step
    return widths


def _without(grid: Grid, drop: list[int]) -> Grid:
    keep = [i for i in range(len(grid.columns)) if i not in drop]
    return Grid(
        grid.title,
        [grid.columns[i] for i in keep],
        [[row[i] for i in keep] for row in grid.rows],
        right={n for n, i in enumerate(keep) if i in grid.right},
        sections=grid.sections,
    )


def layout(grid: Grid, width: int | None) -> list[tuple[Grid, list[int]]]:
    """The grids to draw for ``grid`` at a terminal ``width`` (None: as wide as it needs), with
    their column widths."""
    if width is None:
        return [(grid, _natural(grid))]
    widths = fit_widths(grid, width)
    if widths is not None:
        return [(grid, widths)]
    for n in range(1, len(grid.optional) + 1):
        fewer = _without(grid, grid.optional[:n])
        widths = fit_widths(fewer, width)
        if widths is not None:
            left_out = ", ".join(grid.columns[i] for i in grid.optional[:n])
            fewer.title += f" (left out on this terminal: {left_out}; --format csv or json has them)"
            return [(fewer, widths)]
    if grid.vertical:
        return [drawn for g in grid.vertical for drawn in layout(g, width)]
    return [(grid, _narrowest(grid))]  # wider than the terminal: its lines wrap, nothing is cut


def _title(text: str, width: int) -> str:
    """A table's title wrapped between words at the table's width, or its longest word's where that
    is wider (Rich cut `pretraining.memory_breakdown_gb_per_gpu` inside the name over a narrow
    table: a fresh-eyes review)."""
    words = [len(w) for w in text.split()]
    width = max(width, *words) if words else width
    lines = [
        part
        for line in _lines(text)
        for part in textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False) or [""]
    ]
    return "\n".join(lines)


def _wrap(text: str, width: int) -> str:
    """Text wrapped between words (never inside one), an indented label indented on every line."""
    lines = []
    for line in _lines(text):
        indent = _indent(line)
        body = line.strip()
        if width - indent >= max(len(body), 1) and body.isprintable():
            lines.append(" " * indent + body if body else "")  # what textwrap gives a line that fits
            continue
        pad = " " * indent
        wrapped = textwrap.wrap(body, width - len(pad), break_long_words=False, break_on_hyphens=False)
        lines += [pad + part for part in wrapped] or [""]
    return "\n".join(lines)


# Characters the catalog and the views use, spelt in ASCII; anything else loses its accents
# (NFKD) or is escaped.
_ASCII = str.maketrans(
    {
        "\u2014": "-",  # em dash
        "\u2013": "-",  # en dash
        "\u2212": "-",  # minus
        "\u00d7": "x",
        "\u2265": ">=",
        "\u2264": "<=",
        "\u2026": "...",
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2192": "->",
        "\u2248": "~",
        "\u00b5": "u",
        "\u03bc": "u",
        "\u00b1": "+/-",
        "\u00b7": "*",
        "\u00a0": " ",
        "\u1d40": "T",
    }
)


def ascii_text(text: str) -> str:
    """``text`` in ASCII: common symbols spelt out, accents dropped, anything else escaped."""
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKD", text.translate(_ASCII))
    text = "".join(c for c in text if not unicodedata.combining(c))
    return text.encode("ascii", "backslashreplace").decode("ascii")


def _ascii_view(v: View) -> View:
    """The view spelt in ASCII before it is laid out, so column widths match what is drawn."""
    grids = [
        replace(
            g,
            title=ascii_text(g.title),
            columns=[ascii_text(c) for c in g.columns],
            rows=[[ascii_text(c) for c in row] for row in g.rows],
        )
        for g in v.grids
    ]
    return View(grids, [ascii_text(n) for n in v.notes])


def to_table(v: View, ctx: OutputContext) -> str:
    if ctx.ascii_only:
        v = _ascii_view(v)
    drawn = [d for grid in v.grids for d in layout(grid, ctx.width)]
    needed = max((table_width(w) for _, w in drawn), default=0)
    width = max(ctx.width or UNLIMITED, needed)
    rich = _Rich(ctx, width)
    parts = [_table_text(grid, widths, width, ctx) or rich.table(grid, widths) for grid, widths in drawn]
    parts += [_plain_note(note, ctx.width or UNLIMITED) or rich.note(note) for note in v.notes]
    text = "".join(parts)
    return ascii_text(text) if ctx.ascii_only else text  # anything Rich added itself


# What Rich draws for a table (Table with the box below, show_header, one space of padding) and
# for a note (Console.print, markup off), drawn here without Rich where the result is the same
# bytes: no colour (styles print nothing), no text Rich would change (a control character or tab,
# a character whose cell width is not 1: Rich measures cells, the layout counts characters; an
# emoji code such as :smile: in a note), no line wider than its column, table or terminal (Rich
# would cut it). A comparison's table took 61 ms to render, 5.4 ms so; an explanation's 330 -> 34 ms
# (1,070 -> 105 ms at 100 columns). tests/test_output.py checks it against Rich's own drawing.


def _plain(line: str, width: int) -> bool:
    """Whether Rich prints ``line`` unchanged in ``width`` cells."""
    if len(line) > width or not line.isprintable():
        return False
    if line.isascii():
        return True
    from rich.cells import cell_len

    return cell_len(line) == len(line)


def _box(ctx: OutputContext) -> Box:
    from rich import box

    return box.ASCII if ctx.ascii_only else box.HEAVY_HEAD


def _table_text(grid: Grid, widths: list[int], width: int, ctx: OutputContext) -> str | None:
    """The table as Rich draws it, or None where that is left to Rich."""
    if ctx.color or not grid.columns or sys.platform == "win32":  # Windows: Rich may swap the box
        return None
    title = _title(grid.title, table_width(widths))
    if not all(_plain(line, width) for line in title.split("\n")):
        return None
    b = _box(ctx)
    spans = [w + CELL_PADDING for w in widths]
    out = [line + "\n" for line in title.split("\n")] if title else []

    def rule(left: str, line: str, cross: str, end: str) -> None:
        out.append(left + cross.join(line * n for n in spans) + end + "\n")

    def draw(cells: list[list[str]] | None, left: str, mid: str, end: str) -> bool:
        if cells is None:
            return False
        out.extend(f"{left} {f' {mid} '.join(line)} {end}\n" for line in zip(*cells, strict=True))
        return True

    rule(b.top_left, b.top, b.top_divider, b.top_right)
    if not draw(_cells(grid, grid.columns, widths, header=True), b.head_left, b.head_vertical, b.head_right):
        return None
    rule(b.head_row_left, b.head_row_horizontal, b.head_row_cross, b.head_row_right)
    last = len(grid.rows) - 1
    for i, row in enumerate(grid.rows):
        if i in grid.sections and i:
            rule(b.row_left, b.row_horizontal, b.row_cross, b.row_right)
        edges = (
            (b.foot_left, b.foot_vertical, b.foot_right)
            if i == last
            else (b.mid_left, b.mid_vertical, b.mid_right)
        )
        if not draw(_cells(grid, row, widths, header=False), *edges):
            return None
    rule(b.bottom_left, b.bottom, b.bottom_divider, b.bottom_right)
    return "".join(out)


def _cells(grid: Grid, row: list[str], widths: list[int], header: bool) -> list[list[str]] | None:
    """A row's cells, each as its lines at its column's width (right-justified lines lose their
    trailing spaces first), as tall as the tallest; a header at the bottom of its cell, a row at
    the top. None where a line does not fit its column as it is."""
    cells = []
    for i, (text, w) in enumerate(zip(row, widths, strict=True)):
        lines = _wrap(text, w).split("\n")
        if not all(_plain(line, w) for line in lines):
            return None
        cells.append([line.rstrip().rjust(w) if i in grid.right else line.ljust(w) for line in lines])
    height = max(len(c) for c in cells)
    for c, w in zip(cells, widths, strict=True):
        blank = [" " * w] * (height - len(c))
        c[:] = blank + c if header else c + blank
    return cells


def _plain_note(note: str, width: int) -> str | None:
    """A note as Rich prints it, or None where that is left to Rich."""
    if ":" in note and _EMOJI_CODE.search(note):
        return None
    lines = note.split("\n")
    return note + "\n" if all(_plain(line, width) for line in lines) else None


# what Rich may read as an emoji code (its own pattern, rich._emoji_replace, matches less)
_EMOJI_CODE = re.compile(r":\S*?:")


class _Rich:
    """Rich's drawing of a table or a note, for what is not drawn here; Rich is imported only
    when something needs it."""

    def __init__(self, ctx: OutputContext, width: int) -> None:
        self.ctx, self.width = ctx, width

    def table(self, grid: Grid, widths: list[int]) -> str:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        ctx, buf = self.ctx, io.StringIO()
        console = Console(
            file=buf,
            width=self.width,
            force_terminal=ctx.color,
            no_color=not ctx.color,
            highlight=False,
            soft_wrap=False,
        )
        table = Table(
            title=Text(_title(grid.title, table_width(widths)), overflow="ignore"),
            title_justify="left",
            box=_box(ctx),
        )
        for i, (col, w) in enumerate(zip(grid.columns, widths, strict=True)):
            # Text(), not str: catalog names like "systems[gb200]" must not be read as Rich markup
            table.add_column(
                Text(_wrap(col, w)), justify="right" if i in grid.right else "left", width=w, no_wrap=True
            )
        for i, row in enumerate(grid.rows):
            if i in grid.sections and i:
                table.add_section()
            cells = [Text(_wrap(c, w)) for c, w in zip(row, widths, strict=True)]
            table.add_row(*cells, style="bold" if i in grid.sections else None)
        console.print(table)
        return buf.getvalue()

    def note(self, note: str) -> str:
        from rich.console import Console

        buf = io.StringIO()
        Console(file=buf, width=self.ctx.width or UNLIMITED, no_color=True, highlight=False).print(
            note, markup=False
        )
        return buf.getvalue()
