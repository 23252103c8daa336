"""Rich tables for terminals. Imported lazily: only table output pays for Rich."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from . import OutputContext
from .views import View


def to_table(v: View, ctx: OutputContext) -> str:
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
        table = Table(title=Text(grid.title), title_justify="left")
        for i, col in enumerate(grid.columns):
            table.add_column(Text(col), justify="right" if i in grid.right else "left")
        for i, row in enumerate(grid.rows):
            if i in grid.sections and i:
                table.add_section()
            # Text(), not str: catalog names like "systems[gb200]" must not be read as Rich markup
            table.add_row(*(Text(c) for c in row), style="bold" if i in grid.sections else None)
        console.print(table)
    for note in v.notes:
        console.print(note, markup=False)
    return buf.getvalue()
