"""The one render layer: a result model in, text out (table, json, csv, yaml, markdown).

The engine returns pydantic results; the CLI asks :func:`render` for text in the
chosen format and writes it to stdout. Rich is imported only for tables
(:mod:`ipd_cli.render.table`), so JSON output stays cheap to start.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ipd_cli.errors import InputError

# the structured fields an `ipd explain` input row carries beside its text columns (the same in
# its text; empty on a row that is not an input, api.NO_INPUT; a table leaves them out)
EXPLAIN_INPUT_FIELDS = (
    "unit", "source", "source_title", "source_date", "source_url", "range", "estimate", "origin", "path",
)  # fmt: skip

if TYPE_CHECKING:
    from pydantic import BaseModel

# Every output format, once: the file extensions that pick it under --format auto, and whether
# it renders one result (a document), streamed rows (sweeps), or both.
EXTENSIONS: dict[str, tuple[str, ...]] = {
    "table": (".txt",),
    "json": (".json",),
    "csv": (".csv",),
    "yaml": (".yaml", ".yml"),
    "markdown": (".md",),
    "jsonl": (".jsonl",),
    "xlsx": (".xlsx",),
}
DOCUMENT_FORMATS = ("table", "json", "csv", "yaml", "markdown", "xlsx")
STREAM_FORMATS = ("csv", "jsonl", "json", "table", "markdown", "xlsx")
EXTENSION_FORMATS = {ext: fmt for fmt, exts in EXTENSIONS.items() for ext in exts}
FORMATS = ("auto", *DOCUMENT_FORMATS)


@dataclass(frozen=True)
class OutputContext:
    """What the renderer may know about the terminal (injected, never read deep inside)."""

    is_tty: bool = False
    width: int | None = None
    color: bool = False
    ascii_only: bool = False  # stdout cannot encode box drawing (PYTHONIOENCODING=ascii, LC_ALL=C)


def resolve_format(fmt: str, ctx: OutputContext) -> str:
    if fmt not in FORMATS or fmt == "xlsx":
        raise InputError(f"unknown format '{fmt}'; choose one of: {', '.join(FORMATS)}")
    if fmt == "auto":
        return "table" if ctx.is_tty else "json"
    return fmt


def dumped(result: BaseModel, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """``data``, here and in the renderers: the result's ``model_dump(mode="json")`` where the
    caller has it (emit dumps a result once for the text and the warnings; never changed), else
    that dump made now."""
    return result.model_dump(mode="json") if data is None else data


def to_json(result: BaseModel, data: dict[str, Any] | None = None) -> str:
    """The result as JSON text (``data``: :func:`dumped`'s)."""
    data = dumped(result, data)
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def to_yaml(result: BaseModel, data: dict[str, Any] | None = None) -> str:
    import yaml

    data = dumped(result, data)
    # libyaml's emitter writes what PyYAML's pure-Python one writes, 5-7x faster (a comparison's
    # 392 kB: 0.67 s -> 0.09 s), for text printed as it is; it folds a long double-quoted string
    # (one with a newline, tab or control character to escape) without PyYAML's escaped line
    # ends, escapes characters beyond U+FFFF, and takes a longer key as a simple one (libyaml: up
    # to 128 bytes; PyYAML: under 128 characters counting the "!!str" tag it does not write)
    dumper = getattr(yaml, "CSafeDumper", None) if _libyaml_safe(data) else None
    return yaml.dump(data, Dumper=dumper or yaml.SafeDumper, sort_keys=False, allow_unicode=True)


def _libyaml_safe(node: Any, key: bool = False) -> bool:
    """Whether libyaml writes ``node`` (JSON data) byte for byte as PyYAML does: every string
    printable (no newline, tab or control character), within U+FFFF, and every key a simple one to
    both: under 123 characters (PyYAML counts its unwritten "!!str" tag against 128), at most 128
    bytes (libyaml counts bytes)."""
    if isinstance(node, str):
        return (
            node.isprintable()
            and (node.isascii() or max(node) <= "\uffff")
            and (not key or (len(node) < 123 and len(node.encode("utf-8")) <= 128))
        )
    if isinstance(node, dict):
        return all(_libyaml_safe(k, True) and _libyaml_safe(v) for k, v in node.items())
    if isinstance(node, list):
        return all(_libyaml_safe(v) for v in node)
    return True


def records(result: BaseModel, data: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Flat rows for CSV: one per system, listing item, frontier point or estimate."""
    data = dumped(result, data)
    if "systems" in data:
        # a block the workload does not have (null) is not a column
        rows = [
            {k: v for k, v in _without(s, "assumptions").items() if v is not None} for s in data["systems"]
        ]
        # the --set items on each row, as train, serve and rl write them (a scripting review: a
        # spreadsheet of a comparison could not tell which overrides made it)
        given = {"overrides": data["overrides"]} if "overrides" in data else {}
        return [_flat({**row, **given}) for row in rows]
    if "items" in data:
        rows = [_flat(item) for item in data["items"]]
        return _whole_columns(rows) if data.get("kind") in CATALOG_LISTINGS else rows
    if isinstance(data.get("serving"), list):
        # a serving frontier: one row per point, its numbers in their own columns
        base = _without(data, "schema_version", "assumptions", "serving")
        return [_flat({**base, "serving": point}) for point in data["serving"]]
    plans = (data.get("pretraining") or {}).get("plans")
    if plans:
        # `train --plans N`: one row per plan, ranked, each plan's numbers in the columns a one-plan
        # run uses; the first row is the run itself (its cost, GPU-hours, energy, breakdown: a code
        # review, a script adding --plans lost them), the others carry the run's names
        base = _without(data, "schema_version", "assumptions", "pretraining")
        whole = _without(data["pretraining"], "plans")
        run = {k: whole[k] for k in PLAN_RUN_KEYS if k in whole}
        return [
            _flat({**base, "pretraining": {**(whole if i == 1 else run), "rank": i, **plan}})
            for i, plan in enumerate(plans, 1)
        ]
    return [_flat(_without(data, "schema_version", "assumptions"))]


# what identifies a `train --plans N` run on each of its CSV rows (the rest is the plan's)
PLAN_RUN_KEYS = (
    "model", "precision", "fp8_recipe", "tokens", "gpus", "systems", "pricing", "price_usd_per_gpu_hour"
)  # fmt: skip


# `ipd hardware|models|workloads list`: the catalog's entries (not an estimate's or a sweep's rows)
CATALOG_LISTINGS = ("hardware", "models", "workloads")


def _whole_columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A catalog listing's column whose every number is whole, written whole: the catalog keeps
    counts such as a model's parameters as floats, which its CSV wrote as `6740000000.0` (an audit).
    JSON keeps the floats; a column with one fractional value keeps them all as they are."""
    columns = {k for row in rows for k in row}
    whole = {
        k
        for k in columns
        if any(isinstance(r.get(k), float) for r in rows)
        and all(
            r.get(k) is None
            or (isinstance(r[k], float) and r[k].is_integer() and abs(r[k]) < 2**53)
            or (isinstance(r[k], int) and not isinstance(r[k], bool))
            for r in rows
        )
    }
    return [{k: int(v) if k in whole and isinstance(v, float) else v for k, v in r.items()} for r in rows]


def _without(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            # nested blocks keep their name as a prefix: the same dotted names as sweeps and diffs
            out.update(_flat(v, f"{key}."))
        elif isinstance(v, list) and any(isinstance(x, dict | list) for x in v):
            # records inside a row: one JSON text, which a reader can parse back
            import json

            out[key] = json.dumps(v, separators=(",", ":"))
        elif isinstance(v, list):
            out[key] = ";".join(str(x) for x in v)
        else:
            out[key] = v
    return out


def record_columns(result: BaseModel, rows: list[dict[str, Any]]) -> list[str]:
    """The columns of ``records(result)``, in first-seen order; a listing with no items still has
    its header (views.empty_columns: an empty diff's CSV had one, its workbook none, a review)."""
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    if not rows:
        from .views import empty_columns

        columns = empty_columns(getattr(result, "kind", ""))
    return columns


def to_csv(result: BaseModel, data: dict[str, Any] | None = None) -> str:
    import csv

    rows = records(result, data)
    columns = record_columns(result, rows)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def render(result: BaseModel, fmt: str, ctx: OutputContext, data: dict[str, Any] | None = None) -> str:
    fmt = resolve_format(fmt, ctx)
    if fmt == "json":
        return to_json(result, data)
    if fmt == "yaml":
        return to_yaml(result, data)
    if fmt == "csv":
        return to_csv(result, data)
    from .views import view

    v = view(dumped(result, data))
    if fmt == "markdown":
        from .markdown import to_markdown

        return to_markdown(v)
    from .table import to_table

    return to_table(v, ctx)
