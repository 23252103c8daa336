"""`ipd diff BASE.json NEW.json`: metric by metric, old, new, change and percent (infracost style).

Numbers get a change and a percent; text and on/off values (the pricing basis, a configuration,
a precision, the overrides given, whether a target was met) are listed where they differ, with
no change or percent, so a reader sees what else changed beside the numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ipd_cli.engine.result_base import SCHEMA_VERSION
from ipd_cli.engine.results import Listing
from ipd_cli.errors import InputError

SKIP = {"assumptions", "schema_version"}


Leaf = int | float | str | bool


def _item_key(v: Any) -> str | None:
    """What names a list item: its hardware, name, validation case id, summary group or calibrated
    parameter, and the metric of a row that has no case id (`ipd explain`'s rows: a system's
    metric; a review found two explain outputs 251 and 241 rows long paired by place, a tokens-per-
    step row against a bytes-per-weight row); None: its place names it."""
    if not isinstance(v, dict):
        return None
    parts = [v[k] for k in ("hardware", "name", "id", "group", "parameter") if isinstance(v.get(k), str)]
    if parts and "id" not in v and isinstance(v.get("metric"), str):
        parts.append(v["metric"])
    return ":".join(parts) or None


def _leaves(node: Any, prefix: str = "") -> dict[str, Leaf]:
    """Number, text and on/off leaves by dotted path (numbers as written: a JSON integer stays an
    integer, as a GPU count reads in the outputs diffed (a CLI review: 29952.0); nulls left out); list
    items are keyed by what names them (:func:`_item_key`), not position, and items sharing one (a
    sweep's rows of a system, a system compared with itself) by their place among those: the first
    as ``[h100-sxm]``, the next ``[h100-sxm#2]`` (so one row still pairs with the first of several)."""
    out: dict[str, Leaf] = {}
    if isinstance(node, dict):
        for k, v in node.items():
            if k not in SKIP:
                out.update(_leaves(v, f"{prefix}.{k}" if prefix else k))
    elif isinstance(node, list):
        keys = [_item_key(v) for v in node]
        seen: dict[Any, int] = {}
        for i, (v, key) in enumerate(zip(node, keys, strict=True)):
            if key:  # a sweep's rows of one system: the first by its name, the later by their place
                seen[key] = seen.get(key, 0) + 1
                key = key if seen[key] == 1 else f"{key}#{seen[key]}"
            out.update(_leaves(v, f"{prefix}[{key if key else i}]"))
    elif isinstance(node, int | float) and not isinstance(node, bool):
        out[prefix] = node
    elif isinstance(node, str | bool):
        out[prefix] = node
    return out


def _number(value: Leaf | None) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


MAX_JSON_BYTES = 50_000_000  # an ipd JSON output is a few hundred kB; a sweep as JSON may be large


def _finite(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(text)
    return value


def _refuse_constant(name: str) -> float:
    raise ValueError(name)


class _BeyondFloat(ValueError):
    """A JSON integer too large for a float (ipd writes none; its difference failed, exit 1)."""


def _whole(text: str) -> int:
    beyond = _BeyondFloat(f"an integer of {len(text.lstrip('-'))} digits")
    try:
        value = int(text)  # past Python's 4,300-digit limit a ValueError (a review)
        float(value)
    except (OverflowError, ValueError):
        raise beyond from None
    return value


class _TruncatedLines(Exception):
    """JSON lines whose last line is not a whole object (its number)."""


class _DuplicateKey(Exception):
    """A key given twice in one JSON object (ipd never writes one; json.loads kept the last)."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def read_json(path: Path | str) -> Any:
    """An ipd JSON output: a regular file (``-``: standard input) of at most MAX_JSON_BYTES,
    finite numbers only."""
    from .files import read_bounded, read_stdin_bounded

    if str(path) == "-":  # its messages name <stdin>
        path = "<stdin>"
        data = read_stdin_bounded(MAX_JSON_BYTES)
    else:
        data = read_bounded(path, MAX_JSON_BYTES, hint="give a JSON file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text; not ipd JSON output") from None
    try:
        doc = _rows_or_document(text)
    except _DuplicateKey as e:  # an input review: taken, the last one kept
        raise InputError(f"{path}: the key '{e}' appears twice in one object; not an ipd output") from None
    except _TruncatedLines as e:
        raise InputError(
            f"{path}: JSON lines whose last line ({e}) is cut short (a sweep stopped while writing?); "
            "drop that line or write the sweep again"
        ) from None
    except json.JSONDecodeError as e:
        csv = text.lstrip().split("\n", 1)[0].count(",") > 0 and not text.lstrip().startswith(("{", "["))
        kind = "a CSV table, not ipd JSON output" if csv else f"not ipd JSON output ({e})"
        raise InputError(f"{path}: {kind}; make it with --format json") from None
    except _BeyondFloat as e:  # a review: "numbers out of range", exit 1
        raise InputError(f"{path}: holds {e}, beyond a float; not an ipd output") from None
    except ValueError as e:
        raise InputError(
            f"{path}: holds a non-finite number ({e}); ipd never writes NaN or Infinity, so this "
            "file is not an ipd output"
        ) from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply; not an ipd output") from None
    # an ipd output is a document with its schema_version, or a sweep's rows, each with its hardware
    # (a fuzzing review: [1, 2], {} and {"a": 1} were compared as if they were)
    document = isinstance(doc, dict) and "schema_version" in doc
    rows = isinstance(doc, list) and bool(doc) and all(isinstance(r, dict) and "hardware" in r for r in doc)
    # `ipd schema`: a JSON Schema per output, compared between versions (a code review)
    schemas = (
        isinstance(doc, dict)
        and bool(doc)
        and all(isinstance(v, dict) and "properties" in v for v in doc.values())
    )
    version = doc.get("schema_version") if document else None
    if document and str(version).split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        # another major version is another contract (an input review: "9.9" was compared)
        raise InputError(
            f"{path}: schema_version {version!r} is not one this ipd reads ({SCHEMA_VERSION}); compare "
            "outputs of the same major version"
        )
    if not (document or rows or schemas):
        raise InputError(
            f"{path}: not ipd JSON output (a document with a schema_version, a sweep's rows or `ipd "
            "schema`); make it with --format json"
        )
    return doc


def _loads(text: str) -> Any:
    """One JSON text: finite numbers, no constants, no key twice in an object."""
    return json.loads(
        text,
        parse_float=_finite,
        parse_int=_whole,
        parse_constant=_refuse_constant,
        object_pairs_hook=_no_duplicate_keys,
    )


def _rows_or_document(text: str) -> Any:
    """One JSON document, or a sweep's JSON lines (``--format jsonl``: one object per line) as the
    list of rows ``--format json`` writes."""
    try:
        doc = _loads(text)
    except json.JSONDecodeError as e:
        if not e.msg.startswith("Extra data"):  # not several documents: not JSON lines either
            raise
        lines = [line for line in text.splitlines() if line.strip()]
        rows = []
        for n, line in enumerate(lines, 1):
            try:
                rows.append(_loads(line))
            except json.JSONDecodeError:
                if n > 1 and n == len(lines) and line.lstrip().startswith("{"):
                    # JSON lines whose last is cut short (a sweep stopped mid-write): say so (a CLI
                    # review: "Extra data: line 2 column 1" pointed at the second line)
                    raise _TruncatedLines(n) from None
                raise e from None  # not one document per line: the first error says where
        if not all(isinstance(r, dict) for r in rows):
            raise
        return rows
    if isinstance(doc, dict) and "hardware" in doc and "schema_version" not in doc:
        return [doc]  # a sweep's one row as JSON lines (every other output names its schema_version)
    return doc


def _kind(doc: Any) -> str:
    """Which command wrote an ipd JSON output (a listing names its kind)."""
    if not isinstance(doc, dict):
        return "a list"
    if isinstance(doc.get("kind"), str):
        return doc["kind"]
    for key, command in (
        ("systems", "compare"),
        ("serving", "serve"),
        ("pretraining", "train"),
        ("rl", "rl"),
    ):
        if key in doc:
            return command
    return "an unknown command's"


DIFF_COLUMNS = ("metric", "old", "new", "change", "percent")  # a diff row's fields, in order


def diff(base: Any, new: Any, only_changed: bool = True) -> Listing:
    if _kind(base) != _kind(new):  # every metric would read as removed and added
        raise InputError(
            f"the base is {_kind(base)} output and the new file {_kind(new)} output; diff two outputs "
            "of the same command"
        )
    a, b = _leaves(base), _leaves(new)
    rows = []
    for key in [*a, *(k for k in b if k not in a)]:
        old, cur = a.get(key), b.get(key)
        change = pct = None
        if _number(old) and _number(cur):
            # two integers: an integer
            change = cur - old  # type: ignore[operator]
            try:
                pct = None if old == 0 else 100.0 * change / abs(old)  # type: ignore[arg-type]
                finite = math.isfinite(change)
            except OverflowError:  # two integers a float holds whose difference it does not
                finite = False
            if not finite:  # 1.7e308 to -1.7e308: beyond a float, as the percent
                change = pct = None  # (an input review: the infinite change failed the output, exit 1)
        same = type(old) is type(cur) and old == cur  # True and 1.0 differ (a number became on/off)
        if only_changed and (change == 0 or (change is None and same)):
            continue
        pct = None if pct is None or not math.isfinite(pct) else pct
        rows.append(dict(zip(DIFF_COLUMNS, (key, old, cur, change, pct), strict=True)))
    return Listing(kind="diff", items=rows)
