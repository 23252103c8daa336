"""Rich tables for terminals. Imported lazily: only table output pays for Rich."""

from __future__ import annotations

import io
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from . import OutputContext

# (key in the pretraining result, label, unit); drivers explain the headline rows.
PRETRAINING_ROWS = [
    ("gpus", "GPUs", "GPUs"),
    ("systems", "Systems (nodes/racks)", "count"),
    ("wall_days", "Wall time", "days"),
    ("gpu_hours", "GPU-hours", "GPU-h"),
    ("cost_usd", "Cost", "USD"),
    ("energy_mwh", "Energy (incl. PUE)", "MWh"),
]
DRIVER_ROWS = [
    ("peak_tflops_per_gpu", "Dense peak at precision", "TFLOP/s/GPU"),
    ("mfu", "MFU (catalog or --mfu)", "fraction"),
    ("scale_efficiency", "Scale efficiency", "fraction"),
    ("moe_comm_exposed_fraction", "Exposed MoE all-to-all", "share of time"),
    ("effective_mfu", "Effective MFU", "fraction"),
    ("min_gpus_for_memory", "Min GPUs for memory", "GPUs"),
    ("price_usd_per_gpu_hour", "Price", "USD/GPU-h"),
    ("kw_per_gpu", "Power per GPU (system)", "kW"),
]


def fmt_num(v: Any) -> str:
    if isinstance(v, list):
        return ", ".join(map(str, v))
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, int) and abs(v) < 1e15:
        return f"{v:,}"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e15 or a < 1e-3:
        return f"{v:.3g}"
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 1:
        return f"{v:,.2f}"
    return f"{v:.3f}"


def _console(ctx: OutputContext) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=ctx.width or 200,
        force_terminal=ctx.color,
        no_color=not ctx.color,
        highlight=False,
        soft_wrap=False,
    )
    return console, buf


def to_table(result: BaseModel, ctx: OutputContext) -> str:
    console, buf = _console(ctx)
    data = result.model_dump(mode="json")
    if "systems" in data:
        _compare(console, data)
    elif "pretraining" in data:
        _single(
            console, f"Pre-training on {data['hardware']}", data["pretraining"], data.get("assumptions", [])
        )
    elif "items" in data:
        _items(console, data)
    else:
        _mapping(console, data.get("name", ""), data)
    return buf.getvalue()


def _compare(console: Console, data: dict) -> None:
    systems = data["systems"]
    wl = data["workload"]
    table = Table(title=f"{wl['name']}: {wl['description']}", title_justify="left")
    table.add_column("Metric")
    table.add_column("Unit")
    for s in systems:
        table.add_column(s["hardware"], justify="right")
    for s in systems[1:]:
        table.add_column(f"{s['hardware']} / {systems[0]['hardware']}", justify="right")
    _rows(table, systems, PRETRAINING_ROWS, "pretraining")
    table.add_section()
    table.add_row(
        "[dim]drivers[/dim]" if console.no_color is False else "drivers", "", *[""] * (2 * len(systems) - 1)
    )
    _rows(table, systems, DRIVER_ROWS, "pretraining")
    console.print(table)
    prec = ", ".join(f"{s['hardware']}: {s['pretraining']['precision']}" for s in systems)
    console.print(f"Precision used: {prec}. Pricing: {systems[0]['pretraining']['pricing']}.")
    console.print(
        "GPUs = tokens x time per token per GPU / (deadline x scale efficiency); time per token = "
        "FLOPs / (dense peak x MFU) + exposed all-to-all. `ipd hardware show NAME` lists the sources."
    )
    estimates = sorted({a["name"] for s in systems for a in s["assumptions"] if a.get("estimate")})
    if estimates:
        console.print(f"Estimates (not measured or published specs): {', '.join(estimates)}.")


def _rows(table: Table, systems: list[dict], rows: list[tuple[str, str, str]], section: str) -> None:
    for key, label, unit in rows:
        values = [s[section][key] for s in systems]
        base = values[0]
        ratios = [fmt_num(v / base) + "x" if isinstance(v, int | float) and base else "" for v in values[1:]]
        table.add_row(label, unit, *[fmt_num(v) for v in values], *ratios)


def _single(console: Console, title: str, body: dict, assumptions: list[dict]) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column("Metric")
    table.add_column("Value", justify="right")
    for key, value in body.items():
        table.add_row(key, fmt_num(value))
    console.print(table)
    if assumptions:
        _assumptions(console, assumptions)


def _assumptions(console: Console, assumptions: list[dict]) -> None:
    table = Table(title="Inputs and their sources", title_justify="left")
    for col in ("Input", "Value", "Unit", "Source", "From"):
        table.add_column(col)
    for a in assumptions:
        src = a.get("source") or ""
        if a.get("estimate"):
            src += " (estimate)"
        table.add_row(a["name"], fmt_num(a["value"]), a["unit"], src, a["origin"])
    console.print(table)


def _items(console: Console, data: dict) -> None:
    items = data["items"]
    table = Table(title=data.get("kind", ""), title_justify="left")
    columns = list(items[0]) if items else []
    for col in columns:
        table.add_column(col)
    for item in items:
        table.add_row(*[fmt_num(item.get(c)) if item.get(c) is not None else "" for c in columns])
    console.print(table)


def _mapping(console: Console, title: str, data: dict) -> None:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("Field")
    table.add_column("Value")
    for key, value in _walk(data):
        table.add_row(key, value)
    console.print(table)


def _walk(d: Any, prefix: str = ""):
    if isinstance(d, dict):
        if "value" in d and "source" in d:
            extra = " (estimate)" if d.get("estimate") else ""
            rng = f" range {d['range']}" if d.get("range") else ""
            yield prefix, f"{fmt_num(d['value'])}  [{d['source']}{extra}]{rng}"
            return
        for k, v in d.items():
            if v is None:
                continue
            yield from _walk(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(d, list) and d and isinstance(d[0], dict):
        for i, v in enumerate(d):
            yield from _walk(v, f"{prefix}[{i}]")
    else:
        yield prefix, fmt_num(d) if not isinstance(d, list) else ", ".join(map(str, d))
