"""Rich tables for terminals. Imported lazily: only table output pays for Rich.

Nothing a user reads or types is cut: a name, a number or a path is never shortened or split.
When a grid is wider than the terminal, text wraps between words; then optional columns are
dropped; then the grid is drawn vertically (one block per system or item). A grid that still
does not fit is drawn at its narrowest and the terminal wraps its lines.
"""

from __future__ import annotations

import io
import textwrap
import unicodedata
from dataclasses import replace

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from . import OutputContext
from .views import Grid, View

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
    while table_width(widths) > width:
        wide = max((i for i in range(len(widths)) if widths[i] > narrowest[i]), key=lambda i: widths[i])
        widths[wide] -= 1
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


def _title(text: str, width: int) -> Text:
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
    return Text("\n".join(lines), overflow="ignore")


def _wrap(text: str, width: int) -> Text:
    """Text wrapped between words (never inside one), an indented label indented on every line."""
    lines = []
    for line in _lines(text):
        pad = " " * _indent(line)
        body = line.strip()
        wrapped = textwrap.wrap(body, width - len(pad), break_long_words=False, break_on_hyphens=False)
        lines += [pad + part for part in wrapped] or [""]
    # Text(), not str: catalog names like "systems[gb200]" must not be read as Rich markup
    return Text("\n".join(lines))


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
    buf = io.StringIO()
    drawn = [d for grid in v.grids for d in layout(grid, ctx.width)]
    needed = max((table_width(w) for _, w in drawn), default=0)
    console = Console(
        file=buf,
        width=max(ctx.width or UNLIMITED, needed),
        force_terminal=ctx.color,
        no_color=not ctx.color,
        highlight=False,
        soft_wrap=False,
    )
    for grid, widths in drawn:
        table = Table(
            title=_title(grid.title, table_width(widths)),
            title_justify="left",
            box=box.ASCII if ctx.ascii_only else box.HEAVY_HEAD,
        )
        for i, (col, w) in enumerate(zip(grid.columns, widths, strict=True)):
            table.add_column(
                _wrap(col, w), justify="right" if i in grid.right else "left", width=w, no_wrap=True
            )
        for i, row in enumerate(grid.rows):
            if i in grid.sections and i:
                table.add_section()
            cells = [_wrap(c, w) for c, w in zip(row, widths, strict=True)]
            table.add_row(*cells, style="bold" if i in grid.sections else None)
        console.print(table)
    notes = Console(file=buf, width=ctx.width or UNLIMITED, no_color=True, highlight=False)
    for note in v.notes:
        notes.print(note, markup=False)
    text = buf.getvalue()
    return ascii_text(text) if ctx.ascii_only else text  # anything Rich added itself
