"""Rendering streamed rows (sweeps): column chunks in, csv / jsonl / json bytes out, chunk by chunk.

A chunk is a dict of column name -> numpy array (or list), one value per row; each is rendered
whole, so a reader of the stream never sees half a row. A sweep's chunks also carry each column in
compact form (``chunk.compact``: an array that broadcasts to ``chunk.shape``, the block of the grid
the rows fill): a column that depends on one axis of a million-point grid holds a thousand values.

The writer works column-wise: each distinct value of a column is formatted once, with what
precedes and follows it in a row (``,``, ``"name": ``, ``}\\n``), into a fixed-width byte array;
the columns are broadcast side by side into one byte matrix, one row per line, and the padding
is dropped. No Python code runs per row. NaN is an empty cell (CSV) or ``null`` (JSON): a block
that cannot run at that point. Table and markdown buffer the (small) result and draw it once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from ipd_cli.errors import ExitCode, IpdError

from . import OutputContext, render

INTEGRAL_BELOW = 1e15  # a column of whole numbers below this prints as integers


def check_chunk(cols: dict, before: int) -> None:
    """Refuse infinity in streamed rows (CSV would print 'inf', JSON would be invalid). NaN is a
    value that does not exist at that point (an empty cell), never an overflow: the sweep engine
    refuses a number that should exist and is not finite."""
    import numpy as np

    for name, values in compact_columns(cols).items():
        arr = np.asarray(values)
        if arr.dtype.kind in "fc":
            bad = np.isinf(arr)
            if bad.any():
                i = int(np.flatnonzero(np.broadcast_to(bad, chunk_shape(cols)).reshape(-1))[0])
                hw = cols.get("hardware")
                where = f" ({hw[i]})" if hw is not None and len(hw) > i else ""
                value = np.broadcast_to(arr, chunk_shape(cols)).reshape(-1)[i]
                raise IpdError(
                    f"row {before + i + 1}{where}: {name} is {value}; an input of the sweep is out of range "
                    "(check the --vary values)",
                    ExitCode.RUNTIME,
                )


def compact_columns(cols: dict) -> dict:
    """Each column in its compact form when the chunk has one, else as given."""
    return getattr(cols, "compact", None) or cols


def chunk_shape(cols: dict) -> tuple[int, ...]:
    shape = getattr(cols, "shape", None)
    if shape is not None and getattr(cols, "compact", None):
        return tuple(shape)
    return (len(next(iter(cols.values()))),) if cols else (0,)


def rows_in(cols: dict) -> int:
    return math.prod(chunk_shape(cols))


def _numbers(values: Any, fmt: str) -> list[str]:
    """Each value as text: whole numbers (every finite value of the column whole and below 1e15)
    as integers, else the shortest form that reads back to the same float (CSV and JSON alike, as
    `compare -f csv` writes it; a review found %.10g in CSV: 4.528695652e+14 bytes for
    452869565217392.2); NaN empty (CSV) or null."""
    import numpy as np

    finite = values[np.isfinite(values)]
    whole = (
        finite.size > 0
        and bool((finite == np.round(finite)).all())
        and float(np.abs(finite).max()) < INTEGRAL_BELOW
    )
    missing = "" if fmt == "csv" else "null"
    if whole:
        return [missing if v != v else str(int(v)) for v in values.tolist()]
    return [missing if v != v else repr(v) for v in values.tolist()]


def _text(value: Any, fmt: str) -> str:
    if value is None:
        return "" if fmt == "csv" else "null"
    if isinstance(value, bool) and fmt != "csv":  # JSON true/false; CSV True/False, as results write
        return json.dumps(value)
    text = str(value)
    if fmt != "csv":
        return json.dumps(text)
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _tokens(values: Any, fmt: str, before: str, after: str) -> Any:
    """A column's values as a fixed-width byte array of the same shape, each ``before + value +
    after`` (NUL-padded on the right)."""
    import numpy as np

    a = np.asarray(values)
    flat = a.reshape(-1)
    if a.dtype.kind in "OUS":
        texts = [_text(v, fmt) for v in flat.tolist()]
    else:
        texts = _numbers(flat.astype(float), fmt)
    data = [f"{before}{t}{after}".encode() for t in texts]
    return np.array(data, dtype=f"S{max(map(len, data))}").reshape(a.shape)


def _separators(fmt: str, names: list[str]) -> list[tuple[str, str]]:
    """What precedes and follows each column's value in a row."""
    last = len(names) - 1
    if fmt == "csv":
        return [("", "\n" if j == last else ",") for j in range(len(names))]
    keys = [json.dumps(n) + ": " for n in names]
    start = ",\n{" if fmt == "json" else "{"
    end = "}" if fmt == "json" else "}\n"
    return [((start if j == 0 else "") + keys[j], end if j == last else ", ") for j in range(len(names))]


def _merge(parts: list[Any]) -> list[Any]:
    """Neighbouring columns that vary along the same axes (or one of them along none) joined into
    one: fewer, wider columns to place, and less padding."""
    import numpy as np

    out = [parts[0]]
    for p in parts[1:]:
        q = out[-1]
        both = np.broadcast_shapes(q.shape, p.shape)
        if math.prod(both) <= max(q.size, p.size):
            out[-1] = np.char.add(np.broadcast_to(q, both), np.broadcast_to(p, both))
        else:
            out.append(p)
    return out


def _assemble(parts: list[Any], shape: tuple[int, ...]) -> bytes:
    """Rows of the broadcast columns side by side (a record array, one field per column), the
    padding dropped."""
    import numpy as np

    layout = np.dtype([(f"c{j}", p.dtype) for j, p in enumerate(parts)])
    rows = np.empty(shape, dtype=layout)
    padded = False
    for j, p in enumerate(parts):
        rows[f"c{j}"] = p
        padded = padded or bool((np.char.str_len(p) < p.dtype.itemsize).any())
    data = rows.tobytes()
    return data.replace(b"\0", b"") if padded else data


PIECE_BYTES = 1 << 20  # rows are assembled in pieces of about this size: they stay in the CPU cache


def chunk_pieces(cols: dict, fmt: str, first: bool) -> Iterator[bytes]:
    """A chunk's rows as csv, jsonl or json (an array's rows, each after ",\\n"; "[\\n" first), in
    pieces of whole rows. Columns hold numbers (floats; NaN: no value) or text."""
    compact = compact_columns(cols)
    names = list(compact)
    shape = chunk_shape(cols)
    if not names or math.prod(shape) == 0:
        return
    parts = [
        _tokens(compact[name], fmt, before, after)
        for name, (before, after) in zip(names, _separators(fmt, names), strict=True)
    ]
    parts = _merge(parts)
    if fmt == "csv" and first:
        yield (",".join(_text(n, "csv") for n in names) + "\n").encode()
    width = sum(p.dtype.itemsize for p in parts)
    axis = next((i for i, d in enumerate(shape) if d > 1), 0)
    inner = math.prod(shape[axis + 1 :])
    step = max(1, PIECE_BYTES // max(1, inner * width))
    for a in range(0, max(shape[axis], 1) if shape else 1, step):
        if shape:
            b = min(a + step, shape[axis])
            cut = (*(slice(None),) * axis, slice(a, b))
            sub = [p[cut] if p.ndim > axis and p.shape[axis] > 1 else p for p in parts]
            body = _assemble(sub, (*shape[:axis], b - a, *shape[axis + 1 :]))
        else:
            body = _assemble(parts, shape)
        if fmt == "json" and first and a == 0:
            body = b"[\n" + body[2:]
        yield body


def chunk_bytes(cols: dict, fmt: str, first: bool) -> bytes:
    return b"".join(chunk_pieces(cols, fmt, first))


def chunk_text(cols: dict, fmt: str, first: bool) -> str:
    return chunk_bytes(cols, fmt, first).decode("utf-8")


def chunk_rows(cols: dict) -> list[dict]:
    """The rows of a chunk as dicts (NaN as None)."""
    import numpy as np

    shape = chunk_shape(cols)
    full = {
        k: np.broadcast_to(np.asarray(v), shape).reshape(-1).tolist()
        for k, v in compact_columns(cols).items()
    }
    names = list(full)
    return [
        {k: (None if isinstance(v, float) and v != v else v) for k, v in zip(names, r, strict=True)}
        for r in zip(*full.values(), strict=True)
    ]


def small_table(chunks: list[dict], fmt: str, ctx: OutputContext) -> str:
    from ipd_cli.engine.results import Listing

    items = [row for c in chunks for row in chunk_rows(c)]
    # a column of whole numbers prints as the other tables print counts, 72 not 72.00 (an output
    # review: "TP 1.00", "draft depth 2.00"; the sweep's CSV and JSON print them whole already)
    for key in {k for row in items for k in row}:
        values = [row.get(key) for row in items]
        numbers = [v for v in values if isinstance(v, float)]
        if numbers and all(v.is_integer() and abs(v) < 1e15 for v in numbers):
            for row in items:
                if isinstance(row.get(key), float):
                    row[key] = int(row[key])
    return render(Listing(kind="sweep", items=items), fmt, ctx)
