"""Rich tables for terminals. Imported lazily: only table output pays for Rich."""

from __future__ import annotations

import io
import unicodedata

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from . import OutputContext
from .views import View

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


def to_table(v: View, ctx: OutputContext) -> str:
    plain = ascii_text if ctx.ascii_only else str
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=ctx.width or 200,
        force_terminal=ctx.color,
        no_color=not ctx.color,
        highlight=False,
        soft_wrap=False,
    )
    for grid in v.grids:
        table = Table(
            title=Text(plain(grid.title)),
            title_justify="left",
            box=box.ASCII if ctx.ascii_only else box.HEAVY_HEAD,
        )
        for i, col in enumerate(grid.columns):
            table.add_column(Text(plain(col)), justify="right" if i in grid.right else "left")
        for i, row in enumerate(grid.rows):
            if i in grid.sections and i:
                table.add_section()
            # Text(), not str: catalog names like "systems[gb200]" must not be read as Rich markup
            table.add_row(*(Text(plain(c)) for c in row), style="bold" if i in grid.sections else None)
        console.print(table)
    for note in v.notes:
        console.print(plain(note), markup=False)
    text = buf.getvalue()
    return ascii_text(text) if ctx.ascii_only else text  # Rich's own ellipsis, if it cut a cell
