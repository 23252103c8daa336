"""xlsx output (needs openpyxl: ``pip install '.[xlsx]'`` in a checkout; imported lazily)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ipd_cli.errors import IpdError


def workbook(result: BaseModel) -> Any:
    """An openpyxl Workbook with one sheet of the result's flat rows."""
    try:
        from openpyxl import Workbook
    except ImportError:
        raise IpdError(
            "xlsx output needs openpyxl: pip install 'intelligence-per-dollar[xlsx]' "
            "(from a checkout: pip install '.[xlsx]'), or use --format csv"
        ) from None
    from ipd_cli.render import records

    rows = records(result)
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    wb = Workbook()
    ws = wb.active
    ws.title = "ipd"
    ws.append(columns)
    for row in rows:
        ws.append([row.get(c) for c in columns])
    return wb
