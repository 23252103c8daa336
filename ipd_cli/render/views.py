"""Format-neutral tables: a result becomes titled grids of strings plus footnotes.

Both the Rich table (terminals) and Markdown (PR comments, reports) draw these, so
the two show the same rows. Sections of a result that a view does not know (added
by later engines) are shown generically as metric/value rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# (key, label, unit) per block of a per-system result; "drivers" explain the headline rows.
BLOCKS: dict[str, list[tuple[str, str, str]]] = {
    "intelligence_per_dollar": [
        ("solved_tasks_per_kusd", "Solved tasks per $1k", "tasks/k$"),
        ("usd_per_solved_task", "Cost per solved task", "USD"),
        ("solved_tasks_per_mwh", "Solved tasks per MWh", "tasks/MWh"),
        ("lifecycle_cost_usd", "Lifecycle cost", "USD"),
        ("cost_breakdown_usd.pretraining", "  pre-training (amortised)", "USD"),
        ("cost_breakdown_usd.post_training", "  RL post-training", "USD"),
        ("cost_breakdown_usd.serving", "  serving", "USD"),
        ("tasks_solved", "Tasks solved", "tasks"),
        ("success_per_task", "Success per task (with retries)", "fraction"),
        ("score", "Learning-curve score", "fraction"),
        ("score_points_per_kusd", "Score gain per $1k of RL", "points/k$"),
        ("rl_rollouts_per_kwh", "RL rollouts per kWh", "rollouts/kWh"),
        ("site_gpus", "GPUs in the site power budget", "GPUs"),
        ("site_tasks_solved_per_day", "Tasks solved per day by the site", "tasks/day"),
    ],
    "rl": [
        ("step_seconds", "Step time", "s"),
        ("phases.generation_s", "  generation", "s"),
        ("phases.environment_s", "  environment (exposed)", "s"),
        ("phases.logprob_s", "  log-prob passes", "s"),
        ("phases.training_s", "  training", "s"),
        ("phases.weight_sync_s", "  weight sync", "s"),
        ("hidden_by_overlap_s", "  hidden by overlap", "s"),
        ("usd_per_step", "Cost per step", "USD"),
        ("gpu_hours_per_step", "GPU-hours per step", "GPU-h"),
        ("samples_per_s", "Samples per second", "samples/s"),
        ("usd_per_1k_samples", "Cost per 1k samples", "USD"),
        ("usd_per_million_generated_tokens", "Cost per M generated tokens", "USD"),
        ("gpus", "GPUs (generation + training)", "GPUs"),
        ("gen_gpus", "  generation GPUs", "GPUs"),
        ("cpu_cores_needed", "CPU cores needed", "cores"),
        ("cpu_cores_available", "  available", "cores"),
        ("run.usd_per_year", "RL cost per year", "USD"),
    ],
    "serving": [
        ("tokens_per_s_per_gpu", "Output tokens/s per GPU", "tok/s/GPU"),
        ("tokens_per_s_per_user", "Tokens/s per user", "tok/s"),
        ("ttft_s", "Time to first token", "s"),
        ("tpot_ms", "Time per output token", "ms"),
        ("usd_per_million_output_tokens", "Cost per M output tokens", "USD"),
        ("tokens_per_s_per_mw", "Output tokens/s per MW", "tok/s/MW"),
        ("instance_gpus", "Instance size", "GPUs"),
        ("concurrency", "Concurrency per instance", "sequences"),
    ],
    "pretraining": [
        ("plan", "Parallelism plan", ""),
        ("gpus", "GPUs", "GPUs"),
        ("systems", "Systems (nodes/racks)", "count"),
        ("wall_days", "Wall time", "days"),
        ("gpu_hours", "GPU-hours", "GPU-h"),
        ("cost_usd", "Cost", "USD"),
        ("energy_mwh", "Energy (incl. PUE)", "MWh"),
    ],
}
DRIVERS: dict[str, list[tuple[str, str, str]]] = {
    "pretraining": [
        ("peak_tflops_per_gpu", "Dense peak at precision", "TFLOP/s/GPU"),
        ("mfu", "MFU of the plan (or --mfu)", "fraction"),
        ("step_time_s", "Step time", "s"),
        ("global_batch_tokens", "Global batch", "tokens"),
        ("memory_gb_per_gpu", "Memory per GPU", "GB"),
        ("scale_efficiency", "Goodput (useful share of wall time)", "fraction"),
        ("moe_comm_exposed_fraction", "Exposed MoE all-to-all", "share of time"),
        ("effective_mfu", "Effective MFU", "fraction"),
        ("min_gpus_for_memory", "Min GPUs for memory", "GPUs"),
        ("price_usd_per_gpu_hour", "Price", "USD/GPU-h"),
        ("kw_per_gpu", "Power per GPU (system)", "kW"),
    ],
}


@dataclass
class Grid:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    right: set[int] = field(default_factory=set)  # column indexes aligned right
    sections: list[int] = field(default_factory=list)  # row indexes that start a new section


@dataclass
class View:
    grids: list[Grid]
    notes: list[str] = field(default_factory=list)


def fmt_num(v: Any) -> str:
    if v is None:
        return ""
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


def view(data: dict) -> View:
    """Pick the view for a dumped result."""
    if "systems" in data:
        return _compare(data)
    if "items" in data:
        v = _items(data)
        if data.get("summary"):
            v.grids.append(_items({"kind": "summary", "items": data["summary"]}).grids[0])
        return v
    if isinstance(data.get("serving"), list):
        return _curve(data)
    blocks = [k for k, v in data.items() if isinstance(v, dict) and k not in ("entry", "sources")]
    if blocks and "hardware" in data:
        grids = []
        for b in blocks:
            grids.append(_single(f"{b} on {data['hardware']}", data[b]))
            grids += [_single(f"{b}.{k}", v) for k, v in data[b].items() if isinstance(v, dict)]
            grids += [_rows(f"{b}.{k}", v) for k, v in data[b].items() if _dict_list(v)]
        grids += [_assumptions(data["assumptions"])] if data.get("assumptions") else []
        return View(grids)
    return View([_mapping(data.get("name", ""), data)])


def _compare(data: dict) -> View:
    systems = data["systems"]
    names = [s["hardware"] for s in systems]
    wl = data["workload"]
    cols = ["Metric", "Unit", *names, *[f"{n} / {names[0]}" for n in names[1:]]]
    grid = Grid(f"{wl['name']}: {wl['description']}", cols, right=set(range(2, len(cols))))
    blocks = [k for k in systems[0] if any(isinstance(s.get(k), dict) for s in systems)]
    for block in blocks:
        rows = BLOCKS.get(block) or _generic_rows(next(s[block] for s in systems if s.get(block)))
        grid.sections.append(len(grid.rows))
        grid.rows.append([block, "", *[""] * (len(cols) - 2)])
        _add_rows(grid, systems, block, rows)
        if block in DRIVERS:
            grid.sections.append(len(grid.rows))
            grid.rows.append([f"{block} drivers", "", *[""] * (len(cols) - 2)])
            _add_rows(grid, systems, block, DRIVERS[block])
    notes = []
    if "intelligence_per_dollar" in blocks:
        notes.append(
            "Solved tasks per $1k = 1000 x tasks solved / (amortised pre-training + RL + serving cost) "
            "over the "
            "horizon; `ipd explain` shows each formula with its inputs."
        )
    if "pretraining" in blocks:
        prec = ", ".join(
            f"{s['hardware']}: {s['pretraining']['precision']}" for s in systems if s.get("pretraining")
        )
        notes.append(f"Pre-training precision used: {prec}.")
        notes.append(
            "Pre-training runs the fastest parallelism plan the search finds (tensor, pipeline, data, "
            "expert, context parallelism, micro-batch, recompute, sharding); its step is priced from "
            "GEMMs, attention, memory-bound work, exposed collectives, the pipeline bubble and the "
            "optimizer, so MFU is an output. Deadline mode takes the fewest whole systems that finish "
            "in time. `ipd train --plans N` lists the runners-up."
        )
    first = systems[0]
    pricing = next((first[b]["pricing"] for b in ("pretraining", "rl", "serving") if first.get(b)), None)
    if pricing:
        notes.append(f"Pricing: {pricing}.")
    estimates = sorted({a["name"] for s in systems for a in s.get("assumptions", []) if a.get("estimate")})
    if estimates:
        notes.append(f"Estimates (not measured or published specs): {', '.join(estimates)}.")
    if data.get("overrides"):
        notes.append(f"Overrides: {'; '.join(data['overrides'])}.")
    return View([grid], notes)


def _generic_rows(block: dict) -> list[tuple[str, str, str]]:
    return [(k, k, "") for k, v in block.items() if isinstance(v, int | float) and not isinstance(v, bool)]


def _get(d: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        d = d.get(key) if isinstance(d, dict) else None
    return d


def _add_rows(grid: Grid, systems: list[dict], block: str, rows: list[tuple[str, str, str]]) -> None:
    for key, label, unit in rows:
        values = [_get(s.get(block), key) for s in systems]
        if all(v is None for v in values):
            continue
        base = values[0]
        ratios = [
            fmt_num(v / base) + "x"
            if isinstance(v, int | float) and isinstance(base, int | float) and base
            else ""
            for v in values[1:]
        ]
        grid.rows.append([label, unit, *[fmt_num(v) for v in values], *ratios])


def _dict_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and isinstance(v[0], dict)


def _rows(title: str, items: list[dict]) -> Grid:
    """A list of records (e.g. the runners-up plans): one row each, their plain fields as columns."""
    columns = [k for k, v in items[0].items() if not isinstance(v, dict | list)]
    grid = Grid(title, columns, right=set(range(1, len(columns))))
    for item in items:
        grid.rows.append([fmt_num(item.get(c)) for c in columns])
    return grid


def _single(title: str, body: dict) -> Grid:
    grid = Grid(title, ["Metric", "Value"], right={1})
    for key, value in body.items():
        if not isinstance(value, dict | list):
            grid.rows.append([key, fmt_num(value)])
    return grid


def _assumptions(assumptions: list[dict]) -> Grid:
    grid = Grid("Inputs and their sources", ["Input", "Value", "Unit", "Source", "From"])
    for a in assumptions:
        src = (a.get("source") or "") + (" (estimate)" if a.get("estimate") else "")
        grid.rows.append([a["name"], fmt_num(a["value"]), a["unit"], src, a["origin"]])
    return grid


CURVE_COLUMNS = [
    ("concurrency", "concurrency"),
    ("tokens_per_s_per_user", "tok/s per user"),
    ("tokens_per_s_per_gpu", "tok/s per GPU"),
    ("ttft_s", "TTFT s"),
    ("tpot_ms", "TPOT ms"),
    ("usd_per_million_output_tokens", "USD per M output"),
    ("tokens_per_s_per_mw", "tok/s per MW"),
    ("decode_bound", "bound"),
]


def _curve(data: dict) -> View:
    title = (
        f"{data['model']} on {data['hardware']} ({data['precision']}, {data['instance_gpus']}-GPU instances)"
    )
    grid = Grid(title, [label for _, label in CURVE_COLUMNS], right=set(range(len(CURVE_COLUMNS) - 1)))
    for p in data["serving"]:
        grid.rows.append([fmt_num(p.get(key)) for key, _ in CURVE_COLUMNS])
    notes = [
        "Throughput per GPU against speed per user as concurrency grows (SemiAnalysis InferenceMAX style)."
    ]
    return View([grid, _assumptions(data["assumptions"])] if data.get("assumptions") else [grid], notes)


def _items(data: dict) -> View:
    items = data["items"]
    columns = list(items[0]) if items else []
    grid = Grid(data.get("kind", ""), columns)
    for item in items:
        grid.rows.append([fmt_num(item.get(c)) for c in columns])
    return View([grid])


def _mapping(title: str, data: dict) -> Grid:
    grid = Grid(title, ["Field", "Value"])
    for key, value in _walk(data):
        grid.rows.append([key, value])
    return grid


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
        yield prefix, fmt_num(d)
