"""Format-neutral tables: a result becomes titled grids of strings plus footnotes.

Both the Rich table (terminals) and Markdown (PR comments, reports) draw these, so
the two show the same rows. Sections of a result that a view does not know (added
by later engines) are shown generically as metric/value rows.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any

from ipd_cli.errors import counted
from ipd_cli.render import EXPLAIN_INPUT_FIELDS

# (key, label, unit, better) per block of a per-system result; "drivers" explain the headline rows.
# better: "higher" or "lower" is better for the reader (the ratio columns then say "1.85x better"),
# or "" where neither is (instance size, concurrency): a plain ratio.
HI, LO, NA = "higher", "lower", ""
# a lifecycle's cost parts (cost_breakdown_usd), as tables and plots name them
COST_PARTS = {
    "pretraining": "pre-training (amortised)",
    "post_training": "RL post-training",
    "serving": "serving",
}
BLOCKS: dict[str, list[tuple[str, str, str, str]]] = {
    "intelligence_per_dollar": [
        ("solved_tasks_per_kusd", "Solved tasks per $1k", "tasks/$1k", HI),
        ("usd_per_solved_task", "Cost per solved task", "USD", LO),
        ("solved_tasks_per_mwh", "Solved tasks per MWh", "tasks/MWh", HI),
        ("lifecycle_cost_usd", "Lifecycle cost", "USD", LO),
        *((f"cost_breakdown_usd.{k}", f"  {label}", "USD", LO) for k, label in COST_PARTS.items()),
        ("tasks_solved", "Tasks solved", "tasks", HI),
        ("success_per_task", "Success per task (with retries)", "fraction", HI),
        ("score", "Learning-curve score", "fraction", HI),
        ("score_points_per_kusd", "Score gain per $1k of RL", "points/$1k", HI),
        ("rl_rollouts_per_kwh", "RL rollouts per kWh", "rollouts/kWh", HI),
        ("site_gpus", "GPUs in the site power budget", "GPUs", NA),
        ("site_tasks_solved_per_day", "Tasks solved per day by the site", "tasks/day", HI),
    ],
    "rl": [
        ("step_seconds", "Step time", "s", LO),
        ("phases.generation_s", "  generation", "s", LO),
        ("phases.environment_s", "  environment (exposed)", "s", LO),
        ("phases.logprob_s", "  log-prob passes", "s", LO),
        ("phases.training_s", "  training", "s", LO),
        ("trainer.plan", "    trainer plan (plan search)", "", NA),
        ("trainer.mfu", "    trainer MFU", "fraction", HI),
        ("phases.weight_sync_s", "  weight sync", "s", LO),
        ("weight_sync.exposed_s", "    exposed (on the critical path)", "s", LO),
        ("weight_sync.transport", "    transport", "", NA),
        ("weight_sync.bytes_moved", "    bytes moved", "bytes", NA),
        ("weight_sync.bound", "    bound by", "", NA),
        ("hidden_by_overlap_s", "  hidden by overlap", "s", NA),
        ("usd_per_step", "Cost per step", "USD", LO),
        # each stage's own price: under tco serving is priced at its utilisation, not pre-training's
        # (a units review: the serving cost could not be traced to a printed price)
        ("price_usd_per_gpu_hour", "  price", "USD/GPU-h", LO),
        ("gpu_hours_per_step", "GPU-hours per step", "GPU-h", LO),
        ("samples_per_s", "Samples per second", "samples/s", HI),
        ("usd_per_1k_samples", "Cost per 1k samples", "USD", LO),
        ("usd_per_million_generated_tokens", "Cost per M generated tokens", "USD", LO),
        # colocated, both pools are every GPU: the sub-rows add up only for separate pools (a diff
        # review read two rows equal to the total as a double count)
        ("gpus", "GPUs (generation + training; colocated: shared)", "GPUs", NA),
        ("gen_gpus", "  generation GPUs", "GPUs", NA),
        ("train_gpus", "  training GPUs", "GPUs", NA),
        # the smallest trainer a plan fits on (activations and the plan's degrees included), not the
        # state over usable HBM: the row read "(memory)" beside pre-training's memory bound, 1,024
        # against 629 Rubin GPUs for the same 160 TB (a cross-command review)
        ("trainer_memory.min_train_gpus", "    fewest a trainer plan fits on", "GPUs", NA),
        ("systems", "Systems (nodes/racks)", "count", LO),
        ("cpu_cores_needed", "CPU cores needed", "cores", NA),
        ("cpu_cores_available", "  available", "cores", NA),
        ("run.usd_per_year", "RL cost per year", "USD", LO),
    ],
    "serving": [
        ("configuration", "Configuration (deployment search)", "", NA),
        ("precision", "Weight precision", "", NA),
        ("stack", "Serving stack", "", NA),
        ("stack_borrowed_from", "  efficiencies borrowed from", "", NA),
        ("stack_release", "  release measured apart", "", NA),
        ("speculation", "Speculative decoding", "", NA),
        ("tokens_per_s_per_gpu", "Output tokens/s per GPU", "tok/s/GPU", HI),
        ("tokens_per_s_per_user", "Tokens/s per user (in a decode slot)", "tok/s", HI),
        ("request_tokens_per_s", "Tokens/s per request (TTFT + output)", "tok/s", HI),
        ("interactivity_tokens_per_s", "Interactivity (1 / TPOT)", "tok/s", HI),
        ("target_met", "  meets the interactivity target", "", NA),
        ("ttft_s", "Time to first token (a lone prompt)", "s", LO),
        ("ttft_at_traffic_s", "  at the traffic (prefill and slot queues included)", "s", LO),
        ("ttft_target_s", "  target at the traffic (the deployment sized for it)", "s", NA),
        ("ttft_target_met", "  met at the traffic", "", NA),
        ("prefill_utilisation", "  prefill pool utilisation at the traffic", "", NA),
        ("slot_queue_s", "  wait for a sequence slot at the traffic", "s", LO),
        ("slot_utilisation", "  sequence slot utilisation at the traffic", "", NA),
        ("tpot_ms", "Time per output token", "ms", LO),
        ("usd_per_million_output_tokens", "Cost per M output tokens", "USD", LO),
        ("usd_per_million_output_tokens_at_traffic", "  at the traffic (its GPUs all day)", "USD", LO),
        ("price_usd_per_gpu_hour", "  price", "USD/GPU-h", LO),
        ("tokens_per_s_per_mw", "Output tokens/s per MW (incl. PUE)", "tok/s/MW", HI),
        ("instance_gpus", "Instance size", "GPUs", NA),
        ("deployment_gpus", "Deployment unit (prefill pool, stranded GPUs)", "GPUs", NA),
        # Little's law from the table: tokens/s per GPU x these GPUs = this x tokens/s per user (a
        # cross-command review could not check it: per instance, 1,525 x 50 / 72 is not 236)
        ("deployment_concurrency", "  sequences in flight (Little's law)", "sequences", NA),
        ("gpus_for_traffic", "GPUs for the traffic", "GPUs", LO),
        ("systems_for_traffic", "  systems (nodes/racks)", "count", LO),
        ("concurrency", "Concurrency per instance", "sequences", NA),
    ],
    "pretraining": [
        ("plan", "Parallelism plan", "", NA),
        ("precision", "Precision", "", NA),
        ("gpus", "GPUs", "GPUs", LO),
        # paid GPUs the plan's groups leave idle show here (a vendor-claim review: GB200's 16-GPU
        # groups use 64 of each NVL72's 72, so 124,416 GPUs are paid and 110,592 run)
        ("gpus_used", "  running the plan", "GPUs", LO),
        ("systems", "Systems (nodes/racks)", "count", LO),
        ("wall_days", "Wall time", "days", LO),
        ("gpu_hours", "GPU-hours", "GPU-h", LO),
        ("cost_usd", "Cost", "USD", LO),
        ("energy_mwh", "Energy (incl. PUE)", "MWh", LO),
    ],
}
DRIVERS: dict[str, list[tuple[str, str, str, str]]] = {
    "pretraining": [
        ("peak_tflops_per_gpu", "Dense peak at precision", "TFLOP/s/GPU", HI),
        ("mfu", "MFU of the plan (or --mfu)", "fraction", HI),
        ("step_time_s", "Step time", "s", NA),
        ("global_batch_tokens", "Global batch", "tokens", NA),
        ("recipe_batch_tokens", "Recipe batch", "tokens", NA),
        ("batch_token_multiplier", "Tokens beyond the recipe batch", "x", LO),
        ("memory_gb_per_gpu", "Memory per GPU", "GB", NA),
        ("host_offload_gb_per_gpu", "  activations offloaded to host", "GB/GPU", NA),
        ("scale_efficiency", "Goodput (useful share of wall time)", "fraction", HI),
        ("moe_comm_exposed_fraction", "Exposed MoE all-to-all", "share of time", LO),
        ("effective_mfu", "Effective MFU", "fraction", HI),
        ("min_gpus_for_memory", "GPUs for memory (lower bound)", "GPUs", NA),
        ("price_usd_per_gpu_hour", "Price", "USD/GPU-h", LO),
        ("kw_per_gpu", "Power per GPU (system)", "kW", NA),
    ],
}
# section rows of a comparison: words that wrap on a narrow terminal (the JSON keys are in `ipd schema`)
SECTION_LABELS = {
    "intelligence_per_dollar": "Intelligence per dollar",
    "pretraining": "Pre-training",
    "rl": "RL post-training",
    "serving": "Serving",
}
# the stage that fills each block (the engine's Infeasible.stage), in words
STAGE_WORDS = {"pretraining": "pre-training", "post_training": "RL post-training", "serving": "serving"}
BLOCK_OF_STAGE = {"pretraining": "pretraining", "post_training": "rl", "serving": "serving"}
# fields of a listing's items that JSON, CSV and YAML carry for scripts but a table leaves out
# (explain: its inputs' unit, source and its date, origin and --set path, already in its text
# columns; the source's title and address and the catalog's note, too long for a table column)
TABLE_HIDDEN: dict[str, tuple[str, ...]] = {"explain": (*EXPLAIN_INPUT_FIELDS, "field", "note")}
# listing columns a narrow terminal may drop, in this order (names, numbers and paths are never cut)
OPTIONAL_COLUMNS: dict[str, list[str]] = {
    "hardware": [
        "description",
        "capex_usd",
        "price_term_years",
        "pricing",
        "scale_up_domain",
        "bf16_dense_tflops",
        "fp8_dense_tflops",
        "power_kw",
        "hbm_gb",
        "hbm_gib",
        "status",
    ],
    "models": ["estimate", "attention", "experts_per_token", "hidden_size", "layers", "experts"],
    "workloads": ["description"],
}


@dataclass
class Grid:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    right: set[int] = field(default_factory=set)  # column indexes aligned right
    sections: list[int] = field(default_factory=list)  # row indexes that start a new section
    optional: list[int] = field(default_factory=list)  # columns a narrow terminal may drop, in order
    vertical: list[Grid] | None = None  # the same cells, one grid per system or item (narrow terminals)


@dataclass
class View:
    grids: list[Grid]
    notes: list[str] = field(default_factory=list)
    # what a report (markdown) adds below its grids and a terminal table leaves out: explain's
    # catalog notes, too long for a column (a hand-check review: the prices' lower-bound caveats
    # showed in JSON only)
    footnotes: list[str] = field(default_factory=list)


def fmt_num(v: Any, extra: int = 0) -> str:
    """A value as a table shows it: counts in full, other numbers to a few significant figures
    (``extra`` more decimals where fixed-point, see :func:`fmt_column`)."""
    if v is None:
        return ""
    if isinstance(v, list):
        return ", ".join(map(str, v))
    if isinstance(v, bool):  # as the compare table says it (tables showed True/False beside yes/no)
        return "yes" if v else "no"
    if not isinstance(v, int | float):
        return str(v)
    if isinstance(v, int) and abs(v) < 1e15:
        return f"{v:,}"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e15 or a < 1e-3:
        return f"{v:.3g}"
    if a >= 100:
        return f"{v:,.{extra}f}"
    if a >= 1:
        return f"{v:,.{2 + extra}f}"
    if a < 0.1:  # three significant figures (0.00636 read "0.006", 6 % off: a review of ratios)
        return f"{v:#.{3 + extra}g}"
    return f"{v:.{3 + extra}f}"


MAX_EXTRA_DECIMALS = 3  # beyond that, values a table cannot tell apart are shown alike


def fmt_column(values: list[Any]) -> list[str]:
    """A column of values, with as many more decimals as it takes (up to MAX_EXTRA_DECIMALS) for
    different values to read differently: a frontier's 120.754 and 121.348 tokens/s per user both
    read "121", as if one point were dominated; two listed plans read alike (an output review)."""
    numbers = {v for v in values if isinstance(v, float)}
    extra = 0
    while extra < MAX_EXTRA_DECIMALS and len({fmt_num(v, extra) for v in numbers}) < len(numbers):
        extra += 1
    return [fmt_num(v, extra) for v in values]


def view(data: dict) -> View:
    """Pick the view for a dumped result."""
    if "systems" in data:
        return _compare(data)
    if "items" in data:
        v = _items(data)
        if data.get("summary"):
            v.grids += _items({"kind": "summary", "items": data["summary"]}).grids
        return v
    if isinstance(data.get("serving"), list):
        return _curve(data)
    blocks = [k for k, v in data.items() if isinstance(v, dict) and k not in ("entry", "sources")]
    if blocks and "hardware" in data:
        grids = []
        for b in blocks:
            grids.append(_single(f"{b} on {data['hardware']}", data[b]))
            grids += _nested(b, data[b])
        grids += [_assumptions(data["assumptions"])] if data.get("assumptions") else []
        return View(grids, [f"Warning: {w}." for w in warnings(data)])
    return View([_mapping(data.get("name", ""), data)])


def _spanned_lines(hw: str, pre: dict[str, Any]) -> list[str]:
    """A fixed GPU count whose plan spans more systems than the count fills (its in-domain groups
    do not tile a system): the systems counted are the spanned ones."""
    per, gpus, systems = pre.get("gpus_per_system") or 0, pre.get("gpus") or 0, pre.get("systems") or 0
    filled = -(-gpus // per) if per else 0
    if not per or systems <= filled:
        return []
    return [
        f"{hw}: the plan's {pre.get('gpus_used', 0):,} GPUs take whole copies of its groups on each "
        f"{per}-GPU system, so they span {systems:,} systems ({systems * per:,} GPUs), not the "
        f"{filled:,} that {gpus:,} GPUs fill; the GPUs given are priced (--days sizes whole systems)"
    ]


def _idle_and_long_lines(hw: str, pre: dict[str, Any]) -> list[str]:
    """A fixed GPU count that is no whole number of systems, whose plan leaves GPUs idle but priced,
    and a run longer than a year (a procurement review: 100 H200 GPUs, 12.5 nodes, ran 96 for
    1,631 days without a word). The hint holds in both modes (a CLI review: it offered `--days` to a
    run that a 3,000-day deadline had sized, and a flag to `compare`, which has none)."""
    out = []
    per, gpus, used = pre.get("gpus_per_system") or 0, pre.get("gpus") or 0, pre.get("gpus_used") or 0
    if per and gpus % per and 0 < used < gpus:
        out.append(
            f"{hw}: {gpus:,} GPUs are {gpus / per:.3g} {per}-GPU systems; the plan runs on {used:,} and "
            f"the other {gpus - used:,} are idle but priced"
        )
    from ipd_cli.engine.formulas import DAYS_PER_YEAR

    days = pre.get("wall_days") or 0
    if days > DAYS_PER_YEAR:
        out.append(
            f"{hw}: pre-training takes {days:,.0f} days ({days / DAYS_PER_YEAR:.3g} years) on "
            f"{gpus:,} GPUs: more GPUs shorten it (a shorter deadline sizes more)"
        )
    return out


def _in_flight(rl: dict[str, Any]) -> str:
    """The seconds the policy versions of the longest async trajectory come from (an RL review: 2.9
    could not be recomputed from the printed fields, 914.9 s of trajectory over a 434.2 s step)."""
    flight, step = rl.get("longest_trajectory_in_flight_s"), rl.get("step_seconds")
    if flight is None or not step:
        return ""
    return (
        f" (in flight {flight:,.4g} s, its prefill waits and sandbox included, over the {step:,.4g} s step)"
    )


def _nested(name: str, block: dict[str, Any]) -> list[Grid]:
    """A grid for each mapping inside ``block`` and the mappings inside those (the weight sync's
    terms under `rl.weight_sync`, which the table left out while JSON and CSV carried them; a user
    review), and a table for each list of mappings."""
    grids: list[Grid] = []
    for k, v in block.items():
        if isinstance(v, dict):
            grids.append(_single(f"{name}.{k}", v))
            grids += _nested(f"{name}.{k}", v)
        elif _dict_list(v):
            grids.append(_rows(f"{name}.{k}", v))
    return grids


# --- compare: one column per system, ratios against the first ---------------------------------------


def ratio_text(value: Any, base: Any, better: str) -> str:
    """A system against the baseline: '1.85x better' / '3.54x worse' where a direction is known,
    else the plain ratio ('0.500x', '2.97x'); 'same' for equal values."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not isinstance(base, int | float):
        return ""
    if not base or not value:
        return ""
    r = value / base
    if abs(r - 1) <= 1e-9:  # float noise: two $2M budgets summed in different orders read "1.00x better"
        return "same"
    if not better:  # three significant figures, as the directed ratios ('1.50x', not '1.5x')
        return f"{f'{r:#.3g}'.rstrip('.')}x"
    good = r > 1 if better == HI else r < 1
    factor = r if r > 1 else 1 / r
    shown = f"{factor:.2f}" if factor < 10 else f"{factor:.3g}"
    return f"{shown}x {'better' if good else 'worse'}"


def difference_text(value: Any, base: Any, better: str, unit: str) -> str:
    """A wait against the baseline's as their difference ('0.368 s worse'): a wait adds to a time (the
    time to first token), and a ratio against a wait of ~0 said nothing ('3.4e+06x worse' for 0.368 s
    against 1.08e-07 s, a newcomer audit); 'same' for equal values."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not isinstance(base, int | float):
        return ""
    d = value - base
    if abs(d) <= 1e-9 * max(abs(value), abs(base)):  # float noise, as ratio_text's
        return "same"
    good = d > 0 if better == HI else d < 0
    return f"{fmt_num(abs(d))} {unit} {'better' if good else 'worse'}"


# rows whose value is a wait that adds to another time: the difference, not the ratio
WAITS = {"slot_queue_s", "prefill_queue_s"}


def _cell(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "NO"
    return fmt_num(v)


@dataclass
class _Row:
    label: str
    unit: str
    cells: list[str]
    ratios: list[str]
    section: bool = False


def _compare(data: dict) -> View:
    systems = data["systems"]
    names = [s["hardware"] for s in systems]
    marks, notes = _infeasible_notes(systems)
    rows = _status_rows(systems)
    for block in _blocks(systems):
        rows.append(_section_row(block, systems, marks))
        rows += _block_rows(systems, block, BLOCKS.get(block) or _generic_rows(systems, block))
        if block in DRIVERS:
            label = f"{SECTION_LABELS.get(block, block)} drivers"
            rows.append(_Row(label, "", [""] * len(systems), [""] * (len(systems) - 1), True))
            rows += _block_rows(systems, block, DRIVERS[block])
    wl = data["workload"]
    title = f"{wl['name']}: {wl['description']}"
    grid = _wide(title, names, rows)
    grid.vertical = [_tall(f"{title} - {name}", names, rows, i) for i, name in enumerate(names)]
    return View([grid], notes + _compare_notes(data, systems))


def _blocks(systems: list[dict]) -> list[str]:
    keys = [k for k in systems[0] if k not in ("infeasible", "assumptions")]
    return [
        k for k in keys if any(isinstance(s.get(k), dict) or k in s.get("infeasible", {}) for s in systems)
    ]


def _status_rows(systems: list[dict]) -> list[_Row]:
    """A status row when any system is not shipping (a roadmap system's figures are plans)."""
    if all(s.get("status", "shipping") == "shipping" for s in systems):
        return []
    return [_Row("Status", "", [s.get("status", "") for s in systems], [""] * (len(systems) - 1))]


def _section_row(block: str, systems: list[dict], marks: dict[tuple[int, str], str]) -> _Row:
    cells = [f"cannot run {marks[(i, block)]}" if (i, block) in marks else "" for i in range(len(systems))]
    return _Row(SECTION_LABELS.get(block, block), "", cells, [""] * (len(systems) - 1), True)


MISSED = "n/a: misses target"


def _block_rows(systems: list[dict], block: str, rows: list[tuple[str, str, str, str]]) -> list[_Row]:
    out = []
    # a review: GB200 at 172 tokens/s per user (its best 137) read "1.62x better" than Rubin,
    # which met the target, priced at the slower speed it could serve
    from ipd_cli.engine.results import priced_at_serving_point

    missed = [(s.get("serving") or {}).get("target_met") is False for s in systems]
    unlike = [missed[0] or m for m in missed[1:]]
    for key, label, unit, better in rows:
        values = [_get(s.get(block), key) for s in systems]
        if all(v is None for v in values):
            continue
        missing = [block in s.get("infeasible", {}) for s in systems]
        cells = ["-" if gone else _cell(v) for v, gone in zip(values, missing, strict=True)]
        at_target = priced_at_serving_point(f"{block}.{key}")
        against = [
            difference_text(v, values[0], better, unit) if key in WAITS else ratio_text(v, values[0], better)
            for v in values[1:]
        ]
        ratios = [MISSED if off and at_target and r else r for r, off in zip(against, unlike, strict=True)]
        if key in PER_UNIT:  # counts of unlike units (8-GPU nodes against 72-GPU racks: "168x worse")
            size = [_system_size(s.get(block), PER_UNIT[key], key) for s in systems]
            ratios = [r if size[i] == size[0] else "" for i, r in enumerate(ratios, start=1)]
        out.append(_Row(label, unit, cells, ratios))
    return out


# rows that count systems: a ratio only between systems of as many GPUs (a claim audit)
PER_UNIT = {"systems": "gpus", "systems_for_traffic": "gpus_for_traffic"}


def _system_size(block: Any, whole: str, key: str) -> Any:
    """The GPUs of one of the systems a row counts: the block's ``gpus_per_system``, else ``whole``
    per ``key`` (an RL pool of 1,168 GPUs on 17 racks and one of 1,600 on 23 are both of 72-GPU
    racks, though 68.7 and 69.6 GPUs a rack)."""
    per = _get(block, "gpus_per_system")
    return per if isinstance(per, int | float) and per else _per(block, whole, key)


def _per(block: Any, whole: str, key: str) -> Any:
    """``whole`` per ``key`` of a block (GPUs per system), None where either is missing."""
    a, b = _get(block, whole), _get(block, key)
    return a / b if isinstance(a, int | float) and isinstance(b, int | float) and b else None


def _wide(title: str, names: list[str], rows: list[_Row]) -> Grid:
    ratio_cols = [f"{n} vs {names[0]}" for n in names[1:]]
    cols = ["Metric", "Unit", *names, *ratio_cols]
    grid = Grid(title, cols, right=set(range(2, len(cols))), optional=[1])
    for r in rows:
        if r.section:
            grid.sections.append(len(grid.rows))
        grid.rows.append([r.label, r.unit, *r.cells, *r.ratios])
    return grid


def _tall(title: str, names: list[str], rows: list[_Row], i: int) -> Grid:
    cols = ["Metric", "Unit", "Value"] + ([f"vs {names[0]}"] if i else [])
    grid = Grid(title, cols, right=set(range(2, len(cols))), optional=[1])
    for r in rows:
        if r.section:
            grid.sections.append(len(grid.rows))
        grid.rows.append([r.label, r.unit, r.cells[i]] + ([r.ratios[i - 1]] if i else []))
    return grid


def _infeasible_notes(systems: list[dict]) -> tuple[dict[tuple[int, str], str], list[str]]:
    """A footnote mark per (system, block) that cannot be computed, one footnote per failing stage."""
    marks: dict[tuple[int, str], str] = {}
    notes: list[str] = []
    for i, s in enumerate(systems):
        by_stage: dict[str, str] = {}
        for block, why in s.get("infeasible", {}).items():
            if why["stage"] not in by_stage:
                by_stage[why["stage"]] = f"[{len(notes) + 1}]"
                notes.append(f"{by_stage[why['stage']]} {_infeasible_line(s['hardware'], why, s)}")
            marks[(i, block)] = by_stage[why["stage"]]
    return marks, notes


def _replicas(rl: dict) -> str:
    """``2 x 144-GPU replicas``, or ``one 216-GPU replica``."""
    n, g = rl.get("replicas") or 0, rl.get("instance_gpus") or 0
    return f"one {g:,}-GPU replica" if n == 1 else f"{n:,} x {g:,}-GPU replicas"


def _infeasible_line(hardware: str, why: dict, system: dict) -> str:
    stage = STAGE_WORDS.get(why["stage"], why["stage"])
    workload = f" ({why['workload']})" if why.get("workload") else ""
    blocks = [b for b, w in system.get("infeasible", {}).items() if w["stage"] == why["stage"]]
    # the stage's own reason, not the headline's "needs the ... block"
    own = system["infeasible"].get(BLOCK_OF_STAGE.get(why["stage"], ""), why)
    hint = f" Hint: {own['hint']}." if own.get("hint") else ""
    names = f"{' and '.join(blocks)} {'is' if len(blocks) == 1 else 'are'}"
    return f"{hardware}: {stage}{workload} cannot run, so {names} empty: {own['reason']}.{hint}"


def _training_draw_notes(systems: list[dict]) -> list[str]:
    """Where a scenario names a site: the power pre-training draws while it runs (its energy over
    its hours, PUE in it) against the site's, which its rows fill with serving alone (an energy
    review: Rubin's 26,928 GPUs draw 111.8 MW, GB200's 124,416 GPUs 280.8 MW, beside a 100 MW site,
    and nothing said so)."""
    draws, site = [], None
    for s in systems:
        p, ipd = s.get("pretraining"), s.get("intelligence_per_dollar")
        if not isinstance(p, dict) or not isinstance(ipd, dict) or ipd.get("site_mw") is None:
            continue
        hours = (p.get("wall_days") or 0.0) * 24.0
        if hours > 0 and p.get("energy_mwh"):
            site = ipd["site_mw"]
            draws.append(f"{s['hardware']} {fmt_num(p['energy_mwh'] / hours)} MW")
    if not draws:
        return []
    return [
        f"Pre-training draws {', '.join(draws)} while it runs (PUE included); the {site:g} MW site's "
        "rows count serving alone."
    ]


def _compare_notes(data: dict, systems: list[dict]) -> list[str]:
    blocks = _blocks(systems)
    notes = []
    if len(systems) > 1:
        waits = any((s.get("serving") or {}).get(k) is not None for s in systems for k in WAITS)
        wait = "; a queue's wait by the difference, as it adds to the time to first token" if waits else ""
        notes.append(
            f"'X vs {systems[0]['hardware']}': how each system compares with the first, per metric "
            f"('better' and 'worse' follow whether more or less is better; a plain ratio otherwise{wait}); "
            "none where the first has no value."
        )
    if "intelligence_per_dollar" in blocks:
        notes.append(
            "Solved tasks per $1k = 1000 x tasks solved / (amortised pre-training + RL + serving cost) "
            "over the horizon; `ipd explain` shows each formula with its inputs."
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
    notes += _training_draw_notes(systems)
    bases = pricing_bases(systems)
    if len(bases) == 1:
        notes.append(f"Pricing: {next(iter(bases))}.")
    elif bases:
        notes.append(f"Pricing: {_by_basis(bases)}.")
    # the mixed-pricing line says what the Pricing note above already says
    notes += [f"Warning: {w}." for w in warnings(data) if "cannot run" not in w and not w.startswith(MIXED)]
    estimates = sorted({a["name"] for s in systems for a in s.get("assumptions", []) if a.get("estimate")})
    if estimates:
        notes.append(f"Estimates (not measured or published specs): {', '.join(estimates)}.")
    if data.get("overrides"):
        notes.append(f"Overrides: {'; '.join(data['overrides'])}.")
    return notes


def _generic_rows(systems: list[dict], block: str) -> list[tuple[str, str, str, str]]:
    body: dict[str, Any] = next((s[block] for s in systems if isinstance(s.get(block), dict)), {})
    return [(k, k, "", NA) for k, v in body.items() if isinstance(v, int | float) and not isinstance(v, bool)]


def _get(d: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        d = d.get(key) if isinstance(d, dict) else None
    return d


# --- what a reader could miss: for stderr and the notes -------------------------------------------


def _precision_lines(hw: str, s: dict) -> list[str]:
    """A precision the GPU lacks, run at the next wider one: pre-training, serving, RL's two."""
    asked_ran = []
    for block, verb in (("pretraining", "pre-trains"), ("serving", "serves")):
        b = s.get(block)
        if isinstance(b, dict) and b.get("precision_requested"):
            asked_ran.append((verb, b["precision_requested"], b.get("precision")))
    rl = s.get("rl")
    for phase, verb in (("generation", "generates RL rollouts"), ("training", "trains (RL)")):
        if isinstance(rl, dict) and rl.get(f"{phase}_precision_requested"):
            asked_ran.append((verb, rl[f"{phase}_precision_requested"], rl.get(f"{phase}_precision")))
    return [
        f"{hw} {verb} at {ran}, not {asked}: it has no dense {asked} figure" for verb, asked, ran in asked_ran
    ]


MIXED = "the systems are priced on different bases"


def pricing_bases(systems: list[dict]) -> dict[str, list[str]]:
    """Each price basis ('rental:reserved') and the systems priced on it: a system that lacks the
    preferred rental point takes the next one (A100 has no reserved price: on-demand)."""
    out: dict[str, list[str]] = {}
    for s in systems:
        blocks = [s.get(b) for b in ("pretraining", "rl", "serving")]
        basis = next((b["pricing"] for b in blocks if isinstance(b, dict) and b.get("pricing")), None)
        if basis and s.get("hardware", "") not in out.get(basis, []):
            out.setdefault(basis, []).append(s.get("hardware", ""))
    return out


def _by_basis(bases: dict[str, list[str]]) -> str:
    return "; ".join(f"{basis} ({', '.join(names)})" for basis, names in bases.items())


STALENESS_PATHS = ("workload.staleness_bound", "workload.post_training.staleness_bound")


def _idle_generation_lines(hw: str, rl: dict) -> list[str]:
    """Generation GPUs that hold no replica (a quarter or more of those that do), and in async
    replicas the staleness bound leaves without rollouts: idle but paid (colocated: idle while
    the rollouts run, training after). Each with its own reason (a review: a 48-GPU async pool of
    one 36-GPU replica was said to be held back by the bound, where no second replica fits)."""
    inst, gen, replicas = rl.get("instance_gpus") or 0, rl.get("gen_gpus") or 0, rl.get("replicas") or 0
    if not (inst and replicas):
        return []
    held = gen // inst  # replicas the pool holds
    active, stranded = replicas * inst, gen - held * inst
    colocated = rl.get("mode") == "colocated"
    idle = "idle while the rollouts run (they train after)" if colocated else "idle but paid"
    out = []
    if replicas < held:
        out.append(
            f"{hw}: RL generation runs {replicas:,} replica(s), {active:,} of its {gen:,} GPUs: the "
            "staleness bound lets no more rollouts be in flight; the rest are idle but paid (a smaller "
            "generation pool runs the same step for less)"
        )
    if stranded and 4 * stranded >= held * inst:
        out.append(
            # "1 replica of 72 GPUs fits" (a review: "(1 of 72 GPUs fit)" read as a GPU count)
            f"{hw}: {stranded:,} of the {gen:,} RL generation GPUs hold no replica ({held:,} "
            f"{'replica' if held == 1 else 'replicas'} of {inst:,} GPUs {'fits' if held == 1 else 'fit'}) "
            f"and are {idle}"
        )
    return out


def _rl_lines(hw: str, rl: dict) -> list[str]:
    """An RL step's warnings: a grown split, idle generation GPUs, a long trajectory beyond the
    staleness bound, an idle trainer."""
    out: list[str] = []
    if rl.get("gpus_requested"):
        out.append(
            # "asked for": the workload's GPUs or a given total (a review: `--gpus 64` read as the
            # workload's 64)
            f"{hw}: RL post-training runs on {counted(rl['gpus'])}, not the "
            f"{rl['gpus_requested']:,} asked for: {rl['train_gpus']:,} training (the fewest that hold the "
            f"training state) + {rl['gen_gpus']:,} generating ({_replicas(rl)}: of the pools of whole "
            "rollout replicas up to the trainer's size, the one with the least cost per step)"
        )
    if rl.get("cheaper_grown_gpus"):  # the request binds; say which larger one costs less a step
        out.append(
            f"{hw}: RL post-training runs on the {counted(rl['gpus'])} asked for, at "
            f"${fmt_num(rl['usd_per_step'])} a step; {rl['cheaper_grown_gpus']:,} GPUs (the trainer's fewest "
            "plus the generation pool a smaller request grows to) would cost "
            f"${fmt_num(rl['cheaper_grown_usd_per_step'])}: ask for them to get that step"
        )
    if rl.get("sandbox_cores_bind"):
        out.append(
            f"{hw}: the host's {fmt_num(rl['cpu_cores_available'])} cores cap the trajectories in flight "
            f"(one sandbox each, verifying ones included): each replica runs {rl['concurrency']:,} "
            "sequences, fewer than its KV cache and the rollouts allow, or the step waits for "
            "sandboxes, and phases.generation_s is longer for it (more host cores, or fewer cores a "
            "sandbox, would shorten the step)"
        )
    out += _idle_generation_lines(hw, rl)
    from ipd_cli.engine.formulas import DAYS_PER_YEAR, beyond_a_year

    run = rl.get("run")
    if isinstance(run, dict) and isinstance(run.get("wall_days_per_refresh"), int | float):
        days = run["wall_days_per_refresh"] * (run.get("refreshes_per_year") or 0)
        if beyond_a_year(days):  # a review: 1,000 refreshes of 0.59 days said nothing
            out.append(
                f"{hw}: the RL schedule ({run['refreshes_per_year']:,.4g} refreshes a year of "
                f"{run['wall_days_per_refresh']:,.3g} days each) takes {fmt_num(days)} days a year: "
                f"{days / DAYS_PER_YEAR:,.3g} such RL deployments run side by side (its cost counts "
                "them all), or fewer refreshes fit one"
            )
    versions = rl.get("longest_trajectory_policy_versions")
    if versions is not None and versions > (rl.get("staleness_bound") or 0):
        digits = next((n for n in range(1, 16) if round(versions, n) > rl["staleness_bound"]), 15)
        out.append(
            f"{hw}: the longest RL trajectory spans {versions:.{digits}f} policy updates"
            f"{_in_flight(rl)}, beyond the "
            f"staleness bound of {rl['staleness_bound']}: it runs on through in-flight weight "
            "updates as a mixed-version rollout (or is aborted); a longer step or a larger bound "
            "keeps it within (workload.partial_rollouts=false holds every trajectory within it)"
        )
    measured = run.get("staleness_bound_measured") if isinstance(run, dict) else None
    bound = rl.get("staleness_bound") or 0
    if isinstance(run, dict) and measured is not None and rl.get("mode") == "async" and bound > measured:
        out.append(
            f"{hw}: the RL staleness bound of {bound} is beyond the largest bound the steps an "
            f"off-policy run needs were measured at ({measured}, rl.staleness_bound_measured): "
            f"rl.run counts {fmt_num(run['staleness_steps_factor'])} steps per synchronous step "
            "(rl.staleness_steps_factor), which may understate the steps it needs"
        )
    trainer = rl.get("trainer") if rl.get("mode") != "colocated" else None
    if isinstance(trainer, dict):
        used, given = trainer.get("gpus_used") or 0, rl.get("train_gpus") or 0
        # given a quarter or more GPUs than it uses (80 for 64): the split is worth a second look
        if used and 4 * (given - used) >= used:
            gen = rl.get("gen_gpus") or 0
            fewer = f", {gen + used:,} GPUs in all with the {gen:,} generating" if gen else ""
            out.append(
                f"{hw}: the RL trainer's plan uses {used:,} of its {given:,} GPUs; the rest are idle "
                f"but paid (as many as it uses{fewer}, would run the same plan for less)"
            )
    return out


def _energy_lines(s: dict) -> list[str]:
    """A pre-training cost given as dollars (``cost_usd``) has no energy: say that solved tasks per
    MWh leaves it out (a scenario author's review: 0 MWh of pre-training beside $5M, silently)."""
    ipd = s.get("intelligence_per_dollar")
    if not isinstance(ipd, dict):
        return []
    usd, mwh = ipd.get("cost_breakdown_usd") or {}, ipd.get("energy_breakdown_mwh") or {}
    if (usd.get("pretraining") or 0) > 0 and mwh.get("pretraining") == 0:
        return [  # the scenario's, not a system's: one line for every system (deduplicated)
            "pre-training is given as a cost, which carries no energy: solved tasks per MWh counts "
            "the other stages' energy only (a pretraining workload prices both)"
        ]
    return []


def _rl_budget_lines(hw: str, s: dict) -> list[str]:
    """A lifecycle whose RL schedule runs less than one step over its horizon (a procurement
    review: $100 a year bought 0.145 of a step, 74 of its 512 rollouts, silently; a code review:
    over the horizon, not a year, and not for an RL estimate alone, which has no horizon)."""
    rl, ipd = s.get("rl"), s.get("intelligence_per_dollar")
    if not isinstance(rl, dict) or not isinstance(ipd, dict) or not isinstance(rl.get("run"), dict):
        return []
    run, years = rl["run"], ipd.get("horizon_years") or 0
    steps = run["steps_per_refresh"] * run["refreshes_per_year"] * years
    if not 0 < steps < 1 - 1e-9:  # a whole step, rounded: bought (budget / cost x cost)
        return []
    from ipd_cli.engine.formulas import run_step_cost_factor

    per_step = rl["usd_per_step"] * run_step_cost_factor(
        run["goodput"], run["staleness_steps_factor"], rl["step_seconds"], run.get("periodic_s_per_step", 0.0)
    )
    samples = rl["samples_per_s"] * rl["step_seconds"]
    return [
        f"{hw}: the RL post-training runs {steps:.3g} of one ${fmt_num(per_step)} step over the "
        f"{years:g}-year horizon (its goodput, staleness factor, evaluations and checkpoints included; a "
        "step is "
        f"{fmt_num(round(samples))} samples, then one update): the lifecycle counts that fraction of a "
        f"step's samples and cost, which no run can spend; ${fmt_num(per_step)} buys one"
    ]


def _borrowed_training_share_lines(hw: str, s: dict, cat: Any = None) -> list[str]:
    """A training run (pre-training or an RL trainer) on an accelerator of a user catalog with no
    training GEMM share of its own, nor among those the default was fitted on: it trains on
    ``efficiency.training_share``, as serving on the reference stack (a capacity planner's audit: a
    copy of GB200 under a new name borrowed 0.684 where GB200's own is 0.652, said only in its
    assumptions). The built-in accelerators that borrow it (Rubin, AMD's) are the catalog's choice,
    each recorded as an estimate. ``cat``: the catalog the result was computed on (none: no line)."""
    trains = isinstance(s.get("pretraining"), dict) or isinstance(s.get("rl"), dict)
    if cat is None or not trains or not hw:
        return []
    from ipd_cli.engine.trainplan import training_share_path

    accelerator = cat.system(hw).accelerator
    eff = cat.efficiency
    if (
        cat.origin("accelerators", accelerator).startswith("builtin:")
        or training_share_path(cat, accelerator) != "efficiency.training_share"
        or accelerator in eff.training_share_fitted_on
    ):
        return []
    return [
        f"{hw}: no training GEMM share is fitted on its accelerator {accelerator}: it trains on "
        f"efficiency.training_share ({eff.training_share.value:g}, fitted on "
        f"{', '.join(eff.training_share_fitted_on)}), an estimate; give its own in a --catalog "
        f"file, `efficiency: {{training_share_by_accelerator: {{{accelerator}: {{value: SHARE, "
        "source: ID}}}`"
    ]


def _owned_system_lines(hw: str, s: dict, cat: Any = None) -> list[str]:
    """Serving whose deployment fills its last node or rack only in part: owned (``tco``), the rest
    is not priced (README: GPUs are priced one by one), and an owner buying for this service alone
    pays for it too (a finance review: 20 GPUs of a GB200 NVL72 rack priced, 72 bought); rented,
    a rack of several nodes (``cat``'s system: an 8-GPU node is rented by the GPU, a review: an
    H100 GPU read "8.00x") is priced by the GPU, and where it is rented only whole, the rest too."""
    point = s.get("serving")
    if not isinstance(point, dict):
        return []
    need, per = point.get("gpus_for_traffic") or 0, point.get("gpus_per_system") or 0
    if not need or not per or need % per == 0:
        return []
    rest = per - need % per
    if (need + rest) / need < 1.005:  # under half a percent (it would read 1.00x): GB200's 26,748
        return []  # GPUs leave 36 of their 372nd rack unpriced, 0.13 % of the systems
    if point.get("pricing") != "tco":
        system = cat.system(hw) if cat is not None else None
        nodes = system is not None and (system.gpus_per_node or system.accelerators) < system.accelerators
        if not nodes:
            return []
        # a procurement review: Rubin's 15-GPU deployment of open-model-agent was priced GPU by
        # GPU under rental, silently, where a rack-scale system may be rented only whole (whole
        # racks, GB200 led 1.63x instead of trailing)
        return [
            f"{hw}: rented by the GPU, the serving deployment's {counted(need)} "
            f"fill{'s' if need == 1 else ''} {per - rest:,} of "
            f"the {per} GPUs of its last system; where the system is rented only whole, the systems "
            f"cost {(need + rest) / need:.2f}x its serving cost"
        ]
    return [
        f"{hw}: owned (tco), the serving deployment's {need:,} GPUs leave {rest:,} of its last "
        f"{per}-GPU system unpriced (they are taken to serve other work); bought for this service "
        f"alone, the systems cost {(need + rest) / need:.2f}x its serving cost"
    ]


def fewest_site_gpus(cat: Any, hw: str, site_mw: float, axes: list[Any], draws: Any = None) -> float:
    """The GPUs the smallest site of a sweep's rows holds for ``hw``: its site's MW at the axis's
    smallest, the PUE and the system's power at the largest an axis gives them, or the largest
    of the sweep's draws of them (``draws``: its :class:`~ipd_cli.engine.sweep.Draws`, the same
    values its rows drew; a sampled-sweep review: the ranges' tops warned where every draw fit),
    whole systems. A deployment within it fits every row (a scripting review: every frontier
    sweep of the PUE warned of a site none of its rows missed)."""
    import numpy as np

    from ipd_cli.engine.formulas import gpus_in_power_budget

    system = cat.system(hw)
    power, site = f"systems.{cat.canonical('systems', hw)}.power_kw", "workload.site_mw"
    # the ends of the axes read here only (a range's first and last: it is monotone; a code review:
    # every axis was expanded, a 10M-value price axis included)
    ends = {
        a.path: (float(a.values[0]), float(a.values[len(a.values) - 1]))
        for a in axes
        if a.path in ("economics.pue", power, site) and len(a.values)
    }

    def top(path: str, sourced: Any) -> float:
        if path in ends:
            return max(ends[path])
        if draws is not None and sourced.range:
            return float(np.max(draws(path, sourced.range[0], sourced.value, sourced.range[1])))
        return sourced.value

    pue, kw = top("economics.pue", cat.economics.pue), top(power, system.power_kw)
    smallest = min(ends[site]) if site in ends else site_mw
    return gpus_in_power_budget(smallest, kw / system.accelerators, pue, system.accelerators)


def _site_lines(hw: str, s: dict, varies: bool | str = False, fewest: float | None = None) -> list[str]:
    """A site power budget smaller than the scenario's own serving deployment: the site figures
    are what the site would serve, not a cap on the deployment (a scenario author's review: 0.1 MW
    held no GB200 rack while the scenario's serving took 148 GPUs, and nothing said so). Where a
    sweep's rows vary the site (``varies``, :func:`site_inputs_vary`): the GPUs a row's site must
    hold, whatever the estimate's own site; where they vary the deployment (``varies`` "deployment",
    :func:`deployment_inputs_vary`): each row's own GPUs against its site."""
    ipd, point = s.get("intelligence_per_dollar"), s.get("serving")
    if not isinstance(ipd, dict) or ipd.get("site_gpus") is None or not isinstance(point, dict):
        return []
    need, held = point.get("gpus_for_traffic") or 0, ipd["site_gpus"]
    if varies == DEPLOYMENT_VARIES:
        return [
            f"{hw}: the rows size the serving deployment for their own traffic: a row whose "
            "serving.gpus_for_traffic is above its intelligence_per_dollar.site_gpus has a site it does "
            "not fit (the site rows say what the site would serve, not a cap; the lifecycle prices the "
            "whole deployment)"
        ]
    if varies:
        if fewest is not None and need <= fewest:  # every row's site holds it
            return []
        return [
            f"{hw}: the scenario's serving deployment takes {need:,} GPUs: a row whose "
            "intelligence_per_dollar.site_gpus is below that has a site it does not fit (the site rows "
            "say what the site would serve, not a cap; the lifecycle prices the whole deployment)"
        ]
    if need <= held:
        return []
    # the deployment's all-in draw: tokens/s per GPU over tokens/s per MW is MW per GPU (PUE in it)
    per_mw = point.get("tokens_per_s_per_mw") or 0.0
    draw, site_mw = "", ipd.get("site_mw") or 0.0
    if per_mw:
        mw_per_gpu = point["tokens_per_s_per_gpu"] / per_mw
        mw = need * mw_per_gpu
        per_system = point.get("gpus_per_system") or 0
        if mw <= site_mw and per_system:  # the GPUs' draw fits: whole systems do not (a review:
            # "(14 GPUs, 0.1 MW) does not fit the site's 0.1 MW" where one 72-GPU rack takes 0.3)
            return [
                f"{hw}: the scenario's serving deployment ({need:,} GPUs, {round(mw, 9):.3g} MW) fits the "
                f"site's {site_mw:g} MW by its draw but not in whole systems: a {per_system:,}-GPU "
                f"system draws {round(per_system * mw_per_gpu, 9):.3g} MW at the PUE, and the site holds "
                f"{held:,} GPUs in whole ones: the site rows say what the site would serve, not a "
                "cap; the lifecycle prices the whole deployment"
            ]
        shown = fmt_num(mw)
        if float(shown.replace(",", "")) <= site_mw:  # 100.3 MW read "100 MW"
            shown = f"{mw:,.1f}"
        draw = f", {shown} MW"
    return [
        f"{hw}: the scenario's serving deployment ({need:,} GPUs{draw}) does not fit the site's "
        f"{ipd.get('site_mw'):g} MW ({held:,} GPUs in whole systems at the PUE): the site rows "
        "say what the site would serve, not a cap; the lifecycle prices the whole deployment"
    ]


DEPLOYMENT_VARIES = "deployment"
# what a sweep re-prices that sizes the serving deployment again (engine/reprice.py VOLUME: the
# traffic; a post-training budget buys a score, which moves the attempts a task takes)
TRAFFIC_PATHS = (
    "workload.serving.tasks_per_day",
    "workload.serving.requests_per_task",
    "workload.post_training.budget_usd_per_year",
)


def deployment_inputs_vary(paths: list[str]) -> bool:
    """Whether a sweep's rows size the serving deployment for traffic of their own (a review: `--vary
    workload.serving.tasks_per_day=1e5` warned that the 1e7 tasks' 51,696 GPUs did not fit the site,
    which the row's 648 did, and a 1e8 row's 516,384 got no line)."""
    return any(p in TRAFFIC_PATHS for p in paths)


def site_inputs_vary(paths: list[str]) -> bool:
    """Whether a sweep varies what its rows' site figures follow (the site's MW, the PUE, a system's
    power; ``--samples`` draws the last two): the site line of the estimate it searched, at the
    catalog's values, would judge another site than its rows' (an energy review: `--vary
    workload.site_mw=10,38.8` warned about none of the rows the deployment does not fit, and about
    a 100 MW site none of them had)."""
    return any(
        p in ("workload.site_mw", "economics.pue") or (p.startswith("systems.") and p.endswith(".power_kw"))
        for p in paths
    )


def warnings(
    data: dict,
    statuses: dict[str, tuple[str, bool]] | None = None,
    site_varies: bool | str = False,
    cat: Any = None,
    fewest_site: dict[str, float] | None = None,
) -> list[str]:
    """One line each: a system that is not shipping, a stage that cannot run, a missed service target.
    ``statuses``: hardware -> (status, unstable), for results that do not carry the status;
    ``site_varies``: a sweep's rows vary the site's budget (:func:`site_inputs_vary`), or their
    deployment (``DEPLOYMENT_VARIES``, :func:`deployment_inputs_vary`), so the site line says how to
    read each row instead of judging the estimate's own site. ``cat``: the catalog the result was
    computed on, for the overrides it never read (:func:`unread_overrides`; without it their paths
    are taken as given). ``fewest_site``: hardware -> the GPUs the smallest site of a sweep's rows
    holds (:func:`fewest_site_gpus`), below which a varied site line is said at all."""
    rows = data["systems"] if isinstance(data.get("systems"), list) else [data] if "hardware" in data else []
    out = []
    names = [s.get("hardware", "") for s in rows]
    for hw in dict.fromkeys(n for n in names if names.count(n) > 1):  # `compare vera-rubin rubin`
        out.append(
            f"{hw} is given {names.count(hw)} times (names or aliases of one system): its columns are "
            "the same"
        )
    for s in rows:
        hw = s.get("hardware", "")
        status, unstable = (statuses or {}).get(hw) or (s.get("status"), False)
        if status and status != "shipping":
            flag = " flagged unstable" if unstable else ""
            article = "an" if status[0] in "aeiou" else "a"  # "an announced system" (a fresh-eyes review)
            out.append(
                f"{hw} is {article} {status} system{flag}: its specs and prices are plans, not measurements"
            )
        stages = {w["stage"]: w for w in (s.get("infeasible") or {}).values()}
        out += [_infeasible_line(hw, why, s) for why in stages.values()]
        rl = s.get("rl")
        out += _rl_lines(hw, rl) if isinstance(rl, dict) else []
        if isinstance(rl, dict) and rl.get("mode") != "async":
            out += [
                f"{hw}: --set {o}: the staleness bound applies to async RL only; the {rl['mode']} step "
                f"ignores it (--set {o.split('=', 1)[0].removesuffix('staleness_bound')}mode=async)"
                for o in data.get("overrides") or []
                if o.split("=", 1)[0] in STALENESS_PATHS
            ]
        pre = s.get("pretraining")
        # only what the printed multiplier shows (1.0008 read "needs 1.00x the tokens")
        if isinstance(pre, dict) and round(pre.get("batch_token_multiplier") or 1.0, 2) > 1.0:
            tokens, more = pre.get("global_batch_tokens"), pre["batch_token_multiplier"]
            out.append(
                f"{hw}: pre-training runs a global batch of {fmt_num(tokens)} tokens, beyond the recipe's "
                f"{fmt_num(pre.get('recipe_batch_tokens'))}: it needs "
                f"{more:.2f}x the tokens for the same loss, counted in its time and cost (the best plan's "
                "replicas x micro-batches, a pinned global batch, or so many GPUs that no smaller batch "
                "fills them: a later deadline needs fewer)"
            )
        out += _spanned_lines(hw, pre) + _idle_and_long_lines(hw, pre) if isinstance(pre, dict) else []
        out += _precision_lines(hw, s)
        point = s.get("serving")
        if isinstance(point, dict) and point.get("stack") == "reference":
            out.append(
                f"{hw}: no serving stack is measured on its accelerator (a catalog `serving.families` "
                "entry names its family): the reference serving efficiencies apply, estimates that no "
                "stack's measurements fit and that can move the answer far from a measured family's; "
                "list the accelerator in `serving.families.FAMILY.accelerators` to read that family's"
            )
        out += _borrowed_training_share_lines(hw, s, cat)
        if isinstance(point, dict) and point.get("target_met"):
            # met, but by running fewer sequences than GPUs on a decode instance: next to nothing is
            # batched (user reviews: 405B on A100 at 50 tokens/s per user, TP128 over 16 nodes, one
            # sequence, 0.39 tok/s/GPU; the 10T MoE on H200, TEP8 PP9, two sequences on 72 GPUs)
            users, gpus = point.get("concurrency") or 0, point.get("instance_gpus") or 1
            if 0 < users < gpus:
                out.append(
                    f"{hw}: serving meets {fmt_num(point.get('target_tokens_per_s_per_user'))} tokens/s "
                    f"per user only with {users:,} sequence{'s' if users > 1 else ''} per {gpus:,}-GPU "
                    f"decode instance, fewer than one per GPU ({fmt_num(point.get('tokens_per_s_per_gpu'))} "
                    "tokens/s per GPU): next to nothing is batched, so a lower target or another system "
                    "serves it far cheaper"
                )
        out += _site_lines(hw, s, site_varies, (fewest_site or {}).get(hw))
        out += _energy_lines(s) + _owned_system_lines(hw, s, cat) + _rl_budget_lines(hw, s)
        if isinstance(point, dict) and point.get("target_met") is False:
            out.append(
                f"{hw}: serving misses the target of {fmt_num(point.get('target_tokens_per_s_per_user'))} "
                f"tokens/s per user (1 / TPOT); its best is "
                f"{fmt_num(point.get('interactivity_tokens_per_s'))} "
                f"(concurrency {point.get('concurrency')})"
                + (
                    ", at which its serving and headline are priced: not like for like with a system "
                    f"that meets it (compare's ratio columns say '{MISSED}', a sweep's ratios are empty)"
                    if isinstance(s.get("intelligence_per_dollar"), dict)
                    else ""
                )
            )
        if isinstance(point, dict) and point.get("ttft_target_met") is False:
            out.append(
                f"{hw}: serving misses the time-to-first-token target of "
                f"{fmt_num(point.get('ttft_target_s'))} s (serving.ttft_target_s): no configuration's "
                f"lone prompt is within it (the chosen one's takes {fmt_num(point.get('ttft_s'))} s), "
                "so its queues (prefill pool, sequence slots) are the least stable ones (rho < 1), not "
                "sized for the target; raise the target or serve on another system"
            )
    bases = pricing_bases(rows)
    if len(bases) > 1:
        out.append(
            f"{MIXED}, not like for like: {_by_basis(bases)}: each takes the first point of "
            "economics.rental_label_preference it has; --pricing tco (or a rental:LABEL every system "
            "has) prices all on one"
        )
    out += unread_overrides(data.get("overrides") or [], rows, cat)
    return list(dict.fromkeys(out))  # a system given twice warns once


def _dict_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and isinstance(v[0], dict)


def _rows(title: str, items: list[dict]) -> Grid:
    """A list of records (e.g. the runners-up plans): one row each, their plain fields as columns."""
    columns = [k for k, v in items[0].items() if not isinstance(v, dict | list)]
    grid = Grid(title, columns, right=set(range(1, len(columns))))
    cells = [fmt_column([item.get(c) for item in items]) for c in columns]
    grid.rows.extend(map(list, zip(*cells, strict=True)))
    # narrow terminals: one small grid per record (`train --plans 3` drew 162 columns on 80)
    grid.vertical = [
        Grid(f"{title}: {row[0]}", ["Field", "Value"], [[c, v] for c, v in zip(columns, row, strict=True)])
        for row in grid.rows
    ]
    return grid


def _single(title: str, body: dict) -> Grid:
    grid = Grid(title, ["Metric", "Value"], right={1})
    for key, value in body.items():
        # a field with no value here (None: precision_requested when none was refused, a staleness
        # bound outside async) is left out of the table, as an empty row explained nothing (a user
        # review); JSON, CSV and YAML keep it
        if value is not None and not isinstance(value, dict | list):
            grid.rows.append([key, fmt_num(value)])
    return grid


def _assumptions(assumptions: list[dict]) -> Grid:
    columns = ["Input", "Value", "Unit", "Source", "From"]
    grid = Grid("Inputs and their sources", columns, right={1}, optional=[4])
    for a in assumptions:
        # an estimate with no source reads "(estimate)", not " (estimate)" (a fresh-eyes review)
        src = " ".join(p for p in (a.get("source"), "(estimate)" if a.get("estimate") else None) if p)
        grid.rows.append([a["name"], _item_cell(a, "value"), a["unit"], src, a["origin"]])
    grid.vertical = [
        Grid(f"Input: {row[0]}", ["Field", "Value"], [list(p) for p in zip(columns, row, strict=True)])
        for row in grid.rows
    ]
    return grid


CURVE_COLUMNS = [
    ("configuration", "configuration"),
    ("interactivity_tokens_per_s", "tok/s per user (1/TPOT)"),
    ("tokens_per_s_per_gpu", "tok/s per GPU"),
    ("ttft_s", "TTFT s"),
    ("usd_per_million_output_tokens", "USD per M output"),
    ("tokens_per_s_per_mw", "tok/s per MW"),
    ("deployment_gpus", "GPUs"),
    ("bottleneck", "bound"),
]


CURVE_AXES = ("interactivity_tokens_per_s", "tokens_per_s_per_gpu")


def _fmt_all(values: list[Any]) -> list[str]:
    return [fmt_num(v) for v in values]


def _curve(data: dict) -> View:
    searched = data.get("configurations_searched") or 0
    title = f"{data['model']} on {data['hardware']} ({data['precision']}): Pareto frontier"
    columns = [label for _, label in CURVE_COLUMNS]
    grid = Grid(title, columns, right=set(range(1, len(CURVE_COLUMNS) - 1)))
    # the frontier's two axes read apart wherever they differ (a point must not look dominated)
    cells = [
        (fmt_column if key in CURVE_AXES else _fmt_all)([p.get(key) for p in data["serving"]])
        for key, _ in CURVE_COLUMNS
    ]
    grid.rows.extend(map(list, zip(*cells, strict=True)))
    notes = [
        f"Throughput per GPU against speed per user: the configurations no other beats on both, among "
        f"{searched:,} searched (instance size, layout, batch per rank, aggregated or disaggregated). "
        "Batch is per scheduler rank; GPUs count the whole deployment unit."
    ]
    return View([grid, _assumptions(data["assumptions"])] if data.get("assumptions") else [grid], notes)


# the columns of a listing whose items are none, and what its table then says (an output review:
# `ipd diff` of two equal files printed a CSV with no header and a markdown table with no columns)
EMPTY_NOTE = {"diff": "no differences"}


def empty_columns(kind: str) -> list[str]:
    """The columns of a listing of ``kind`` with no items (none where its kind has no fixed ones)."""
    if kind == "diff":
        from ipd_cli.diff import DIFF_COLUMNS

        return list(DIFF_COLUMNS)
    return []


def _items(data: dict) -> View:
    items = data["items"]
    kind = data.get("kind", "")
    hidden = TABLE_HIDDEN.get(kind, ())
    if not items and kind in EMPTY_NOTE:
        return View([Grid(kind, empty_columns(kind))], notes=[EMPTY_NOTE[kind]])
    columns = [c for c in dict.fromkeys(c for item in items for c in item) if c not in hidden]
    numeric = {
        c for c in columns if all(_is_number(item.get(c)) for item in items if item.get(c) is not None)
    }
    right = {
        i for i, c in enumerate(columns) if c in numeric and any(item.get(c) is not None for item in items)
    }
    optional = [columns.index(c) for c in OPTIONAL_COLUMNS.get(kind, []) if c in columns]
    grid = Grid(kind, columns, right=right, optional=optional)
    for item in items:
        grid.rows.append([_item_cell(item, c) for c in columns])
    # narrow terminals: one small grid per item, every field kept
    grid.vertical = [
        Grid(f"{kind}: {row[0]}", ["Field", "Value"], [[c, v] for c, v in zip(columns, row, strict=True)])
        for row in grid.rows
    ]
    notes: dict[tuple, list[str]] = {}  # (metric, note) -> the systems it holds for
    for item in items if "note" in hidden else []:
        if item.get("note"):
            notes.setdefault((item.get("metric"), item["note"]), []).append(str(item.get("hardware") or ""))
    footnotes = [f"{m} ({', '.join(h for h in hw if h)}): {n}" for (m, n), hw in notes.items()]
    return View([grid], footnotes=footnotes)


# units of things counted: an explain input of one read as a float (32.0 GPUs) prints as 32
COUNT_UNITS = frozenset(
    {"GPUs", "instances", "turns", "experts", "ranks", "scale-up domains", "cores", "tokens",
     "sequences", "passes", "parameters", "prompts", "layers", "replicas", "tasks"}
)  # fmt: skip


def _item_cell(item: dict, column: str) -> str:
    v = item.get(column)
    if column == "value" and item.get("unit") in COUNT_UNITS and isinstance(v, float) and v.is_integer():
        return fmt_num(int(v))
    if column == "inputs" and isinstance(v, str):  # explain's "k = v; ..." (JSON keeps every digit)
        return _FLOAT_TEXT.sub(_shorter, v)
    return fmt_num(v)


_FLOAT_TEXT = re.compile(r"(?<![\w.])-?\d+\.\d+(?:e[+-]?\d+)?(?![\w.])")
SHOWN_DIGITS = 6  # significant digits of an input a table shows (0.31672999999999996: 0.31673)


def _shorter(m: re.Match[str]) -> str:
    """A float written in full as at most SHOWN_DIGITS significant digits (whole from 1e5 up to
    1e15; beyond, where a float's whole digits are not its own, in exponent form: an explain review
    read `training_flops = 312884901888000031474057216` for 3.12884901888e+26)."""
    text = m.group(0)
    x = float(text)
    digits = text.replace("-", "").replace(".", "").lstrip("0")
    if len(digits) <= SHOWN_DIGITS + 2 or text.endswith(".0") or not math.isfinite(x):
        return text  # 0.25, 55050240.0: nothing to shorten
    return f"{x:.0f}" if 10**5 <= abs(x) < 10**15 else f"{x:.{SHOWN_DIGITS}g}"


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


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
            yield prefix, f"{_sourced_text(prefix, d['value'])}  [{d['source']}{extra}]{rng}"
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


def _sourced_text(path: str, value: Any) -> str:
    """A cited value as an entry's table shows it: a flag (a field of unit "flag": 1 or 0) as yes or
    no, a system's cited count (``field_sources``) whole, as its plain counts are shown; an audit
    read `host_link_dedicated 1.00` and `field_sources.gpus_per_node 4.00` (JSON keeps 1.0, 4.0)."""
    from ipd_cli.catalog.schema import SYSTEM_COUNTS

    parts = set(path.split("."))
    if parts & _flag_fields() and value in (0, 1) and not isinstance(value, bool):
        return "yes" if value else "no"
    if "field_sources" in parts and parts & set(SYSTEM_COUNTS) and float(value).is_integer():
        return fmt_num(int(value))
    return fmt_num(value)


@functools.cache
def _flag_fields() -> frozenset[str]:
    """The catalog fields whose unit is "flag" (1 or 0), from the schema's declarations."""
    from pydantic import BaseModel

    from ipd_cli.catalog import schema

    models = [m for m in vars(schema).values() if isinstance(m, type) and issubclass(m, BaseModel)]
    return frozenset(
        n for m in models for n in m.model_fields if (schema.field_unit(m, n) or ("",))[0] == "flag"
    )


def unread_overrides(overrides: list, rows: list, cat: Any = None) -> list[str]:
    """A `--set` of an owning-cost input (`economics.utilisation`, a system's `capex_usd`, ...)
    or of a rental price point (under tco, another label, a system not compared) that the
    estimate never read: under rental prices nothing reads the former, so it changed nothing,
    which a reader would not guess (a user review). Only those paths are checked: not every catalog
    read is listed under assumptions (a model's shape, a CPU's cores are read without a record), so
    "not listed" alone does not mean "not read" (a code review)."""
    if not overrides:
        return []  # (and no engine import on the listing's fast path)
    from ipd_cli.catalog.overrides import value_key
    from ipd_cli.catalog.schema import REFERENCE_ONLY
    from ipd_cli.engine.pricing import owning_input, rental_input

    read = {a.get("path") for s in rows if isinstance(s, dict) for a in s.get("assumptions") or []}
    # a compared system that ran no block (every one infeasible) read no price: it was not passed
    # over for another (a code review)
    idle = {
        s.get("hardware")
        for s in rows
        if isinstance(s, dict)
        and not any(isinstance(s.get(b), dict) for b in ("pretraining", "rl", "serving"))
    }
    out = []
    for item in overrides:
        path = str(item).partition("=")[0].strip()
        if cat is not None:  # one spelling of a value: `X.value` as `X`, a price's field as its label
            path = value_key(cat, path)
        parts = path.split(".")
        if len(parts) >= 3 and parts[0] == "accelerators" and parts[2] in REFERENCE_ONLY:
            out.append(
                f"--set {path}: read by no estimate, so it changed nothing (a reference figure: "
                f"{REFERENCE_ONLY[parts[2]]})"
            )
        elif owning_input(path) and path not in read:
            out.append(
                f"--set {path}: not an input of this estimate, so it changed nothing (an owning-cost "
                "input: priced with --pricing tco)"
            )
        elif rental_input(path) and path not in read:  # another system's, another label, or tco
            _, system, _, label = path.split(".")
            if system not in idle:
                out.append(
                    f"--set {path}: not an input of this estimate, so it changed nothing (a rental "
                    f"price point: read by --pricing rental:{label} on {system})"
                )
    return out
