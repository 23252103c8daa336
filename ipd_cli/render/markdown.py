"""Markdown tables (GitHub flavour) for PR comments and reports."""

from __future__ import annotations

from .views import View


def _cell(text: str) -> str:
    """A table cell: pipes escaped, one line, and a sub-row's indent kept (rendered markdown drops
    leading spaces, so a breakdown's parts read as rows of their own: an output review)."""
    body = text.lstrip(" ")
    indent = "&nbsp;" * (len(text) - len(body))
    return indent + body.replace("|", "\\|").replace("\n", " ")


def to_markdown(v: View) -> str:
    out: list[str] = []
    for grid in v.grids:
        if grid.title:
            out.append(f"**{_cell(grid.title)}**\n")
        out.append("| " + " | ".join(_cell(c) for c in grid.columns) + " |")
        out.append(
            "|" + "|".join("---:" if i in grid.right else "---" for i in range(len(grid.columns))) + "|"
        )
        for i, row in enumerate(grid.rows):
            cells = [f"**{_cell(c)}**" if i in grid.sections and c else _cell(c) for c in row]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    out += [f"{n}\n" for n in v.notes]
    if v.footnotes:
        out += ["**Notes**\n", *(f"- {_cell(n)}" for n in v.footnotes), ""]
    return "\n".join(out).rstrip("\n") + "\n"
