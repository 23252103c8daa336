"""Plots: PNG through the optional `plot` extra (matplotlib, imported lazily), or a text plot.

A plot is a list of named series of (x, y) points (lines) or of named bar stacks. The CLI
builds them from results (serving curves, lifecycle cost breakdowns) or from a sweep's output file.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ipd_cli.errors import IpdError


@dataclass
class Series:
    name: str
    x: list[float]
    y: list[float]


@dataclass
class Figure:
    title: str
    xlabel: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    bars: dict[str, dict[str, float]] | None = None  # category -> stack part -> value
    logx: bool = False


MAX_CSV_BYTES = 100_000_000  # about a million rows of a headline sweep: more than a plot can show


def sweep_series(csv_file: Path, x: str, y: str) -> list[Series]:
    """The lines of column ``y`` against ``x`` from a sweep's CSV, JSON lines or JSON (``ipd sweep
    -f csv|jsonl|json``: JSON lines were read as one CSV column), one per system and per value of
    each other varied input, read as a stream from a regular file of at most MAX_CSV_BYTES (``-``:
    standard input, as bounded)."""
    return sweep_lines(csv_file, x, y).series


def _csv_rows(csv_file: str, first: str, text: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, {column: cell}) of a sweep CSV whose header line is ``first``."""
    import csv
    import itertools

    from ipd_cli.errors import InputError

    try:
        reader = csv.reader(itertools.chain([first], text))
        columns = next(reader, [])
        yield 1, dict.fromkeys(columns)  # the header: which columns there are
        for line, row in enumerate(reader, start=2):
            yield line, dict(zip(columns, row, strict=False))
    except csv.Error as e:
        raise InputError(f"{csv_file}: not a CSV file ({e})") from None


def _json_rows(csv_file: str, first: str, text: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, row) of a sweep's JSON lines (one object a line) or JSON (the same lines between
    ``[`` and ``]``, each ending in a comma, or the whole array on one line); the header is the
    first row's keys."""
    header = False
    for line, row in _json_objects(csv_file, first, text):
        if not header:
            header = True
            yield 1, dict.fromkeys(row)
        yield line, row


def _json_objects(csv_file: str, first: str, text: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, row) of each row of :func:`_json_rows`."""
    import itertools
    import json

    from ipd_cli.errors import InputError

    whole = False  # the sweep was one JSON array on line 1: nothing may follow it
    for line, body in enumerate(itertools.chain([first], text), start=1):
        body = body.strip().rstrip(",")
        if body == "":
            continue
        if whole:  # rows after the array were merged into it (a review)
            raise InputError(f"{csv_file}: line {line}: more after the JSON array of line 1; give one sweep")
        if body in ("[", "]"):
            continue
        if line == 1 and body.startswith("["):
            # the whole sweep as one JSON array on its first line (`jq -c` of `-f json`; `[]`: no
            # rows), decoded a row at a time (a review: parsed whole, 95 MB of it took 2.5 GB); a
            # stray [] among rows is not one
            yield from ((1, row) for row in _array_rows(csv_file, body))
            whole = True
            continue
        try:
            row = json.loads(body)
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict):
            raise InputError(
                f"{csv_file}: line {line}: not a row of a sweep's JSON lines; give what `ipd sweep` "
                "wrote with -f csv, jsonl or json"
            )
        yield line, row


def _array_rows(csv_file: str, body: str) -> Iterator[dict[str, Any]]:
    """The rows of a JSON array written on one line (``body``, from its ``[``), one at a time."""
    import json

    from ipd_cli.errors import InputError

    decoder, end = json.JSONDecoder(), len(body)

    def skip(i: int) -> int:
        while i < end and body[i] in " \t\r\n":
            i += 1
        return i

    def refused(k: int) -> InputError:
        return InputError(
            f"{csv_file}: line 1: not a row of a sweep's JSON lines (element {k} of its array); give "
            "what `ipd sweep` wrote with -f csv, jsonl or json"
        )

    i, k = skip(1), 1
    if body[i : i + 1] == "]":  # [] : no rows
        if skip(i + 1) != end:
            raise refused(1)
        return
    while True:
        try:
            row, i = decoder.raw_decode(body, i)
        except json.JSONDecodeError:
            raise refused(k) from None
        if not isinstance(row, dict):
            raise refused(k)
        yield row
        i = skip(i)
        if i >= end:
            raise InputError(f"{csv_file}: line 1: the JSON array does not close (no ']' after element {k})")
        if body[i] == "]" and skip(i + 1) == end:
            return
        if body[i] != ",":
            raise refused(k + 1)
        i, k = skip(i + 1), k + 1


@dataclass
class SweepLines:
    """What :func:`sweep_lines` drew from a sweep: its lines, the varied inputs that tell them
    apart (besides the system), those that kept one value (``column=value``, for the title), and
    the varied input each line traces where ``x`` is a metric (None where ``x`` is varied)."""

    series: list[Series]
    by: list[str]
    fixed: list[str]
    traced: str | None


def sweep_lines(csv_file: Path, x: str, y: str, where: list[str] | None = None) -> SweepLines:
    """:func:`sweep_series` with what tells its lines apart, keeping only the rows whose columns
    hold the ``where`` items' values (``COLUMN=VALUE``)."""
    import io

    from ipd_cli.errors import InputError
    from ipd_cli.files import open_bounded, read_stdin_bounded, shown_name

    stdin = str(csv_file) == "-"
    name = shown_name(csv_file)
    pins = _pins(where or [])
    source = (
        io.BytesIO(read_stdin_bounded(MAX_CSV_BYTES))
        if stdin
        else open_bounded(csv_file, MAX_CSV_BYTES, hint="give a CSV file")
    )
    with source as raw:
        try:
            text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
            first = text.readline()
            read = _json_rows if first.lstrip()[:1] in ("{", "[") else _csv_rows
            return _lines(name, x, y, read(name, first, text), pins)
        except UnicodeDecodeError:
            raise InputError(f"{name}: not UTF-8 text; give a CSV file written by ipd sweep") from None


def _pins(where: list[str]) -> dict[str, str]:
    """``--where COLUMN=VALUE`` items: column -> the value, as a label shows it."""
    from ipd_cli.errors import InputError

    pins: dict[str, str] = {}
    for item in where:
        column, eq, value = item.partition("=")
        if not eq or not column.strip() or not value.strip():
            raise InputError(f"--where '{item}': give COLUMN=VALUE, e.g. --where economics.pue=1.1")
        pins[column.strip()] = _shown(value.strip())
    return pins


def _is_metric(column: str) -> bool:
    """Whether a sweep writes ``column`` after its varied inputs: a metric (its ``.ratio``, its
    ``.p10``/``.p50``/``.p90`` over draws) or the ``overrides`` column."""
    from ipd_cli.engine.sweep import OVERRIDES, PERCENTILES, RATIO

    for p in PERCENTILES:
        column = column.removesuffix(f".p{p}")
    return column == OVERRIDES or column.removesuffix(RATIO) in _metrics()


@cache
def _metrics() -> frozenset[str]:
    from ipd_cli.engine.sweep import metric_names

    return frozenset(metric_names("scenario"))


def _inputs(columns: list[str]) -> list[str]:
    """A sweep's varied inputs besides the system: the columns between ``hardware`` and the first
    metric (a sweep writes the system, its varied inputs, then its metrics); every column but the
    system's where none is a metric (a file not written by ipd sweep)."""
    from ipd_cli.engine.sweep import HARDWARE

    after = columns[columns.index(HARDWARE) + 1 :] if HARDWARE in columns else columns
    end = next((i for i, c in enumerate(after) if _is_metric(c)), len(after))
    return after[:end]


def _lines(
    csv_file: str,
    x: str,
    y: str,
    rows: Iterator[tuple[int, dict[str, Any]]],
    pins: dict[str, str] | None = None,
) -> SweepLines:
    """The lines of a sweep: one per system and per value of each other varied input, each in the
    order of ``x`` where ``x`` is varied; where ``x`` is a metric, each traces the last varied input
    in the rows' order (a sweep of two varied inputs was one sawtooth line per system: a review)."""
    from ipd_cli.errors import InputError, did_you_mean

    first = next(rows, None)
    if first is None or not first[1]:  # an empty file was "no column 'x'" (a review)
        raise InputError(f"{csv_file}: no rows and no columns; give a sweep's output with its rows")
    columns = list(first[1])
    pins = pins or {}
    for col in (x, y, *pins):
        if col not in columns:
            raise InputError(f"{csv_file}: no column '{col}'{did_you_mean(col, columns)}")
    inputs = _inputs(columns)
    others = [c for c in inputs if c not in (x, y)]
    traced = None
    if x not in inputs and others:  # x is a metric: each line follows the last varied input
        traced = others.pop()
    points: dict[tuple[str, ...], tuple[list[float], list[float]]] = {}
    seen: dict[str, set[str]] = {c: set() for c in pins}
    rows_read = 0
    for line, row in rows:
        rows_read += 1
        if pins and not _kept(row, pins, seen):
            continue
        key = (str(row.get("hardware") or ""), *(_shown(row.get(c)) for c in others))
        xs, ys = points.setdefault(key, ([], []))
        point = _point(csv_file, line, row, x, y)
        if point is not None:
            xs.append(point[0])
            ys.append(point[1])
    if not rows_read:  # a header alone drew "(no points)" and exited 0 (the input review)
        raise InputError(f"{csv_file}: no rows, only the columns' names; give a sweep's output with its rows")
    if not points:  # the --where items pick no row
        raise _no_row(csv_file, pins, seen)
    # an input that kept one value (a --where, or a single-value --vary) goes to the title; the
    # labels name those that tell lines apart
    varies = [k for k in range(len(others)) if len({key[k + 1] for key in points}) > 1]
    fixed = [f"{c}={next(iter(points))[k + 1]}" for k, c in enumerate(others) if k not in varies]
    series = []
    for key, (xs, ys) in points.items():
        if traced is None:  # joined in the order of x, not of the rows (--vary X=8,4,6)
            order = sorted(range(len(xs)), key=xs.__getitem__)
            xs, ys = [xs[i] for i in order], [ys[i] for i in order]
        name = ", ".join([key[0]] * bool(key[0]) + [f"{others[k]}={key[k + 1]}" for k in varies])
        series.append(Series(name, xs, ys))
    return SweepLines(series, [others[k] for k in varies], fixed, traced)


def _kept(row: dict[str, Any], pins: dict[str, str], seen: dict[str, set[str]]) -> bool:
    """Whether a row holds every --where value (each value it holds added to ``seen``)."""
    cells = {c: _shown(row.get(c)) for c in pins}
    for c, v in cells.items():
        seen[c].add(v)
    return all(cells[c] == v for c, v in pins.items())


def _point(csv_file: str, line: int, row: dict[str, Any], x: str, y: str) -> tuple[float, float] | None:
    """A row's (x, y), None where a cell is empty (the block cannot run at that point)."""
    from ipd_cli.errors import InputError

    if x in row and y in row and (row[x] in ("", None) or row[y] in ("", None)):
        return None
    try:
        xv, yv = _number(row[x]), _number(row[y])
    except (ValueError, TypeError, KeyError):
        raise InputError(
            f"{csv_file}: line {line}: no number in column '{x}' or '{y}'; --x and --y must "
            "be numeric columns"
        ) from None
    if not (math.isfinite(xv) and math.isfinite(yv)):  # a plot has no place for them
        raise InputError(
            f"{csv_file}: line {line}: column '{x}' or '{y}' is not a finite number "
            f"({row[x]}, {row[y]}); plot columns whose values are finite"
        )
    return xv, yv


def _no_row(csv_file: str, pins: dict[str, str], seen: dict[str, set[str]]) -> Exception:
    """The error of --where items that pick no row: the first value no row holds, and the values
    its column holds."""
    from ipd_cli.errors import InputError

    missing = [(c, v) for c, v in pins.items() if v not in seen[c]]
    if not missing:
        given = " ".join(f"--where {c}={v}" for c, v in pins.items())
        return InputError(f"{csv_file}: no row has every value of {given}")
    c, v = missing[0]
    held = ", ".join(sorted(seen[c], key=_order)[:8]) + (", ..." if len(seen[c]) > 8 else "")
    return InputError(f"{csv_file}: no row has {c}={v}; its values: {held}")


def _shown(v: Any) -> str:
    """A cell as a label shows it: a number in its shortest form (CSV's "4" and JSON's 4.0 alike),
    else its text."""
    try:
        f = _number(v)
    except (ValueError, TypeError):
        return "" if v is None else str(v)
    short = f"{f:g}"
    return short if float(short) == f else repr(f)


def _order(v: str) -> tuple[int, float, str]:
    try:
        return (0, float(v), "")
    except ValueError:
        return (1, 0.0, v)


def _number(v: Any) -> float:
    """A cell as a number: CSV text, or a JSON number (not a JSON true/false)."""
    if isinstance(v, bool):
        raise ValueError(v)
    return float(v)


MISSING = (
    "PNG plots need matplotlib: pip install 'intelligence-per-dollar[plot]' "
    "(from a checkout: pip install '.[plot]'), or leave out -o for a text plot"
)


def check_installed() -> None:
    """Refuse a PNG before anything is computed where matplotlib is not installed."""
    from ipd_cli.errors import require_extra

    require_extra("matplotlib", MISSING)


def to_png(fig: Figure, path: Path) -> None:
    """Write a PNG (needs matplotlib: ``pip install '.[plot]'`` from a checkout)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise IpdError(MISSING) from None
    f, ax = plt.subplots(figsize=(8, 5), dpi=120)
    if fig.bars:
        parts = sorted({p for stack in fig.bars.values() for p in stack})
        bottoms = [0.0] * len(fig.bars)
        names = list(fig.bars)
        for part in parts:
            values = [fig.bars[n].get(part, 0.0) for n in names]
            ax.bar(names, values, bottom=bottoms, label=part)
            bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
    for s in fig.series:
        ax.plot(s.x, s.y, marker="o", markersize=3, label=s.name)
    if fig.logx:
        ax.set_xscale("log")
    ax.set_title(fig.title)
    ax.set_xlabel(fig.xlabel)
    ax.set_ylabel(fig.ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend()
    f.tight_layout()
    import io

    from ipd_cli.output import write_bytes

    buf = io.BytesIO()
    f.savefig(buf, format="png")
    plt.close(f)
    write_bytes(path, buf.getvalue())  # atomically, never over a link or a device


def to_text(fig: Figure, width: int = 72, height: int = 20) -> str:
    """A dependency-free text plot for terminals: one letter per series, or horizontal bars."""
    lines = [fig.title]
    if fig.bars:
        total = {n: sum(parts.values()) for n, parts in fig.bars.items()}
        top = max(total.values()) or 1.0
        for name, value in total.items():
            bar = "#" * max(1, round((width - 30) * value / top))
            lines.append(f"{name[:18]:>18} {bar} {value:,.4g}")
        lines.append(f"{'':>18} {fig.ylabel}")
        return "\n".join(lines) + "\n"
    points = [(x, y) for s in fig.series for x, y in zip(s.x, s.y, strict=True)]
    if not points:
        return fig.title + "\n(no points)\n"
    fx = (lambda v: math.log10(v)) if fig.logx else (lambda v: v)
    xs, ys = [fx(x) for x, _ in points], [y for _, y in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    grid = [[" "] * width for _ in range(height)]

    def at(v: float, lo: float, hi: float, n: int) -> int:
        span = hi - lo
        if span == 0:
            return 0
        if math.isfinite(span):
            return round((v - lo) / span * (n - 1))
        return round((v / 2 - lo / 2) / (hi / 2 - lo / 2) * (n - 1))  # halves: 1e308 - -1e308 overflows

    for k, s in enumerate(fig.series):
        mark = chr(ord("a") + k % 26)
        for x, y in zip(s.x, s.y, strict=True):
            grid[height - 1 - at(y, y0, y1, height)][at(fx(x), x0, x1, width)] = mark
    lines.append(f"{fig.ylabel}: {y0:,.4g} .. {y1:,.4g}")
    lines += ["|" + "".join(r) for r in grid]
    lines.append("+" + "-" * width)
    lines.append(f"{fig.xlabel}: {min(x for x, _ in points):,.4g} .. {max(x for x, _ in points):,.4g}")
    lines += [f"  {chr(ord('a') + k % 26)} = {s.name}" for k, s in enumerate(fig.series)]
    return "\n".join(lines) + "\n"
