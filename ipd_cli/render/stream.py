"""Rendering streamed rows (sweeps): column chunks in, csv / jsonl / json text out, chunk by chunk.

A chunk is a dict of column name -> numpy array (or list); each is rendered whole, so a reader of
the stream never sees half a row. Table and markdown buffer the (small) result and draw it once.
"""

from __future__ import annotations

from ipd_cli.errors import ExitCode, IpdError

from . import OutputContext, render


def _formats(columns: dict) -> list[str]:
    """printf format per column: %d for integral floats columns, %.10g for others, %s for text."""
    out = []
    for v in columns.values():
        kind = getattr(v, "dtype", None)
        if kind is None or kind.kind in "OUS":
            out.append("%s")
        elif kind.kind in "iu" or (
            kind.kind == "f" and len(v) and bool((v == v.round()).all()) and abs(v).max() < 1e15
        ):
            out.append("%d")
        else:
            out.append("%.10g")
    return out


def check_chunk(cols: dict, before: int) -> None:
    """Refuse NaN and infinity in streamed rows (CSV would print 'nan', JSON would be invalid)."""
    import numpy as np

    for name, values in cols.items():
        arr = np.asarray(values)
        if arr.dtype.kind in "fc":
            bad = np.flatnonzero(~np.isfinite(arr))
            if bad.size:
                i = int(bad[0])
                hw = cols.get("hardware")
                where = f" ({hw[i]})" if hw is not None and len(hw) > i else ""
                raise IpdError(
                    f"row {before + i + 1}{where}: {name} is {arr[i]}; an input of the sweep is out of "
                    "range (check the --vary values)",
                    ExitCode.RUNTIME,
                )


def chunk_text(cols: dict, fmt: str, first: bool) -> str:
    names = list(cols)
    lists = [c.tolist() for c in cols.values()]
    if fmt == "csv":
        line = ",".join(_formats(cols))
        body = "\n".join(line % r for r in zip(*lists, strict=True)) + "\n"
        return (",".join(names) + "\n" + body) if first else body
    import json

    text = [json.dumps(dict(zip(names, r, strict=True))) for r in zip(*lists, strict=True)]
    if fmt == "jsonl":
        return "\n".join(text) + "\n"
    return ("[\n" if first else ",\n") + ",\n".join(text)


def small_table(chunks: list[dict], fmt: str, ctx: OutputContext) -> str:
    from ipd_cli.engine.results import Listing

    items = [
        dict(zip(c, r, strict=True))
        for c in chunks
        for r in zip(*[v.tolist() for v in c.values()], strict=True)
    ]
    return render(Listing(kind="sweep", items=items), fmt, ctx)
