"""Sweeps and uncertainty: a grid of inputs, searched once per physics point, priced over arrays.

A sweep is the Cartesian product of ``vary`` axes (``PATH=SPEC``): ``hardware`` (an outer loop
over systems), ``price_usd_per_gpu_hour`` (the price of whichever system is evaluated) and any
input the estimate reads, by its ``--set`` path.

Sweeps compose with the searches (design/search.md). The varied paths split into *physics* paths
(specs, efficiencies, model and workload fields) and *cost* paths (prices, ``economics.*``, a
system's power and capex, and the workload's volumes: tasks per day, requests per task, the
horizon, the amortisation, the RL schedule or budget, the site: :func:`is_cost_path`). Per
system, the whole estimate (a scenario's lifecycle, or one pretrain or RL workload, with its plan,
deployment and split searches) runs once per distinct tuple of physics values over the whole
grid, on one in-memory catalog copy per tuple (``Catalog.with_overrides``), never a YAML re-parse;
its numbers form a table indexed by the tuple. Cost paths never change what a search chooses
(plans, deployments and RL splits are picked by speed, and no search reads a volume), so each
chunk of rows re-prices the chosen configurations over numpy arrays (:mod:`ipd_cli.engine.reprice`).
The one choice a volume moves is a scenario's serving deployment, sized for its traffic: the
distinct traffics of the rows choose again on their physics point's grid (searched once, kept in
``SweepPlan.grids``), all at once (:class:`~ipd_cli.engine.lifecycle.ServingSizer`,
:mod:`ipd_cli.engine.serving.traffic`: rows x traffics as arrays, the single estimate's choice).
At most :data:`MAX_SEARCHES` estimates run per sweep.

Rows come in chunks that are boxes of the grid (fixed leading axes, a range of one axis, every
value of the trailing ones), in the order of the axes. Each column is computed at the shape it
depends on and broadcast over the box; a :class:`Chunk` keeps that compact form, so a writer
formats each distinct value once.

With ``samples``, every input with a catalog ``range`` is drawn N times (triangular: low, catalog
value, high) and each metric is reported as P10/P50/P90. The draws of an input are the same at
every grid point and system (common random numbers): rows differ by what is varied, not by
sampling noise. The configuration is the one each search chooses at the catalog (nominal) values;
the draws move its cost and time: the pre-training plan, on the cluster chosen at the catalog
values (a deadline's cluster included), is priced again at each draw, and every cost input is
drawn. Serving and RL throughput are those of the chosen deployment and split at the catalog
values (their physics is not drawn), and a scenario's task success is its catalog value.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.overrides import entry_name, value_key
from ipd_cli.catalog.workloads import check_mfu_scope
from ipd_cli.errors import ExitCode, InfeasibleError, InputError, IpdError, did_you_mean

from . import formulas as f
from . import reprice
from .formulas import SECONDS_PER_DAY
from .results import priced_at_serving_point
from .trace import Trace

if TYPE_CHECKING:  # types only: the result models load lazily
    from ipd_cli.catalog.schema import Sourced

    from .results import RlResult, SystemPretraining

HARDWARE = "hardware"
PRICE = "price_usd_per_gpu_hour"
CHUNK = 131_072  # rows per chunk of a plain sweep
PERCENTILES = (10, 50, 90)
MAX_POINTS = 50_000_000  # values of one axis, and rows of a sweep (a range is not held in memory)
MAX_SEARCHES = 1_024  # estimates of one sweep: systems x distinct physics points (each about 0.1-1 s)
SAMPLE_BYTES = 500  # held per draw while a chunk is evaluated (arrays of draws and their metrics)
TABLE_BYTES = 160  # held per draw and physics point searched: the pre-training plan at each draw
MAX_SAMPLE_MEMORY = 1_000_000_000  # a sampled sweep needing more is refused
SAMPLED_ROWS_PER_CHUNK = 4_096  # a sampled chunk holds at most this many rows ...
SAMPLED_VALUES_PER_CHUNK = 262_144  # ... and at most this many rows x draws per array
CHECK_ALL_VALUES = 1_000  # an axis with more distinct values is checked at MAX_CHECKED_VALUES of them
MAX_CHECKED_VALUES = 64

# the blocks of a result, in output order, and the blocks each kind of workload has
BLOCKS = ("intelligence_per_dollar", "pretraining", "rl", "serving")
KIND_BLOCKS = {"scenario": BLOCKS, "pretrain": ("pretraining",), "rl": ("rl",)}
# not numbers: the chosen configuration, named, and whether the serving target was met (a row
# that misses it is no cheaper deployment of the same service: a spreadsheet must see it)
TEXT_METRICS = (
    "pretraining.plan",
    "serving.configuration",
    "serving.target_met",
    "intelligence_per_dollar.serving_target_met",
)
HEADLINE = {
    "intelligence_per_dollar": (
        "solved_tasks_per_kusd",
        "usd_per_solved_task",
        "solved_tasks_per_mwh",
        "lifecycle_cost_usd",
        "serving_target_met",  # a row that misses its serving target reads cheaper: said in the row
    ),
    "pretraining": ("gpus", "wall_days", "gpu_hours", "cost_usd", "energy_mwh"),
    "rl": ("step_seconds", "samples_per_s", "usd_per_step", "usd_per_1k_samples", "rollouts_per_kwh"),
    "serving": (
        "tokens_per_s_per_gpu",
        "tokens_per_s_per_user",
        "usd_per_million_output_tokens",
        "tokens_per_s_per_mw",
        "target_met",
    ),
}


# --- axes --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FloatRange:
    """The values of ``START:STOP:STEP`` without a list of them: value i is start + i x step.

    With ``scale`` (10^d, d the decimals START and STEP are written with), value i is the whole
    number ``units + i x unit_step`` divided by ``scale``: exact integer arithmetic and one
    correctly rounded division, so ``1.1:1.5:0.1`` gives 1.2 and 1.4 as typed (the float 1.2, not
    1.1 + 0.1 = 1.2000000000000002) in every format. Without it (over 22 decimals, or a value past
    2^53 units), start + i x step."""

    start: float
    step: float
    count: int
    units: int = 0
    unit_step: int = 0
    scale: float = 0.0

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: Any) -> Any:
        """One value (an int index), or an array of them (a slice, or an integer array of indices)."""
        if isinstance(index, int):
            if not -self.count <= index < self.count:
                raise IndexError(index)
            i = index % self.count
            if self.scale:
                return (self.units + i * self.unit_step) / self.scale
            return self.start + i * self.step
        import numpy as np

        if isinstance(index, slice):
            index = np.arange(*index.indices(self.count))
        if self.scale:
            whole = self.units + np.asarray(index, dtype=np.int64) * self.unit_step
            return whole.astype(float) / self.scale
        return self.start + np.asarray(index) * self.step

    def __iter__(self) -> Iterator[float]:
        return (self[i] for i in range(self.count))


MAX_DECIMALS = 22  # 10^22 is the largest power of ten a float holds exactly


def float_range(start_text: str, stop_text: str, step_text: str, count: int) -> FloatRange:
    """The range as typed: its values in whole units of the finest decimal START and STEP use,
    and its count exact in decimal (2:3:0.1 holds 11 values, whatever 0.1 is in binary)."""
    from decimal import ROUND_FLOOR, Decimal, InvalidOperation

    start, stop, step = (Decimal(t.strip()) for t in (start_text, stop_text, step_text))
    try:
        count = int(((stop - start) / step).to_integral_value(rounding=ROUND_FLOOR)) + 1
    except InvalidOperation:  # pragma: no cover - the float count bounds it first
        pass
    decimals = max(0, -int(start.as_tuple().exponent), -int(step.as_tuple().exponent))
    units, unit_step = int(start.scaleb(decimals)), int(step.scaleb(decimals))
    exact = decimals <= MAX_DECIMALS and max(abs(units), abs(units + (count - 1) * unit_step)) < 2**53
    if not exact:
        return FloatRange(float(start), float(step), count)
    return FloatRange(float(start), float(step), count, units, unit_step, float(10**decimals))


@dataclass(frozen=True)
class Axis:
    path: str
    values: Any  # hardware: a list of names; numbers: a list of floats or a FloatRange


def parse_spec(path: str, spec: str) -> Any:
    """``a:b:step`` (inclusive of b) or ``v1,v2,...``."""
    spec = spec.strip()
    if path == HARDWARE:
        return [s.strip() for s in spec.split(",") if s.strip()]
    if ":" in spec:
        parts = spec.split(":")
        if len(parts) != 3:
            raise InputError(f"`vary` {path}={spec}: a range is START:STOP:STEP, e.g. 2:6:0.5")
        try:
            start, stop, step = (float(p) for p in parts)
        except ValueError:
            raise InputError(f"`vary` {path}={spec}: START, STOP and STEP must be numbers") from None
        if not all(math.isfinite(v) for v in (start, stop, step)) or step <= 0 or stop < start:
            raise InputError(f"`vary` {path}={spec}: need START <= STOP and STEP > 0")
        count = int(math.floor((stop - start) / step + 1e-9)) + 1
        if count > MAX_POINTS:
            raise InputError(f"`vary` {path}={spec}: {count:,} values is more than {MAX_POINTS:,}")
        return float_range(parts[0], parts[1], parts[2], count)
    values = []
    for item in spec.split(","):
        try:
            v = float(item)
        except ValueError:
            raise InputError(
                f"`vary` {path}: '{item}' is not a number (only hardware varies over names; for a "
                "choice such as a precision, run one sweep per value with its override set)"
            ) from None
        if not math.isfinite(v):
            raise InputError(f"`vary` {path}: '{item}' is not a finite number")
        values.append(v)
    if len(values) > MAX_POINTS:
        raise InputError(f"`vary` {path}: {len(values):,} values is more than {MAX_POINTS:,}")
    return values


def parse_axes(cat: Catalog, items: list[str]) -> list[Axis]:
    axes: list[Axis] = []
    for item in items:
        path, sep, spec = item.partition("=")
        path = path.strip()
        if not sep or not path or not spec.strip():
            raise InputError(f"`vary` {item!r}: expected PATH=SPEC, e.g. economics.pue=1.1:1.6:0.1")
        path = canonical_path(cat, path)
        if path in {a.path for a in axes}:
            raise InputError(f"`vary` {path}: given twice")
        values = parse_spec(path, spec)
        if not values:
            raise InputError(f"`vary` {path}: no values")
        if path == HARDWARE:
            for v in values:
                cat.system(v)
            values = list(dict.fromkeys(cat.canonical("systems", v) for v in values))
        axes.append(Axis(path, values))
    return axes


def canonical_path(cat: Catalog, path: str) -> str:
    """Resolve aliases in ``systems.ALIAS...`` / ``models.ALIAS...`` paths."""
    keys = path.split(".")
    if len(keys) >= 3 and keys[0] in ("systems", "models"):
        names = {n: n for n in getattr(cat, keys[0])}
        names.update(cat.aliases.get(keys[0], {}))
        name, rest = entry_name(names, keys[0], keys)  # names may hold dots (llama-3.1-405b)
        return ".".join([keys[0], name, *rest])
    return ".".join(keys)


def grid_size(axes: list[Axis]) -> int:
    return math.prod(len(a.values) for a in axes)


COST_PREFIXES = ("economics.",)
COST_SUFFIXES = (".power_kw", ".capex_usd")


CALLS_PER_TASK = "workload.serving.requests_per_task"


def is_cost_path(path: str) -> bool:
    """A path that changes what the work costs (price, owning cost, power, PUE, or a volume of the
    workload: :func:`is_volume_path`), never how fast it runs: varying it re-prices the chosen
    configuration; any other path is physics."""
    return (
        path == PRICE
        or path.startswith(COST_PREFIXES)
        or (path.startswith("systems.") and (path.endswith(COST_SUFFIXES) or ".prices." in path))
        or is_volume_path(path)
    )


def is_volume_path(path: str) -> bool:
    """A workload field that scales what the lifecycle (or an RL run) costs and no search reads:
    tasks per day, the horizon, the amortisation, a given pre-training cost, the RL schedule or
    budget, the site (:data:`ipd_cli.engine.reprice.VOLUME`)."""
    return path in reprice.VOLUME


# --- metrics -----------------------------------------------------------------------------------


def _block_class(block: str) -> Any:
    from . import results

    return {
        "intelligence_per_dollar": results.IntelligencePerDollar,
        "pretraining": results.Pretraining,
        "rl": results.Rl,
        "serving": results.Serving,
    }[block]


@functools.cache
def _block_metrics(block: str) -> tuple[str, ...]:
    from ipd_cli.engine.results import metric_paths

    names = metric_paths(_block_class(block), f"{block}.")
    return (*names, *(t for t in TEXT_METRICS if t.startswith(f"{block}.")))


def metric_names(kind: str) -> list[str]:
    """Every metric a sweep of this kind of workload can report, in output order."""
    return [m for block in KIND_BLOCKS[kind] for m in _block_metrics(block)]


def select_metrics(kind: str, metrics: str) -> list[str]:
    """``headline``, ``all`` or a comma list of metric paths (checked: a did-you-mean)."""
    known = metric_names(kind)
    word = metrics.strip().lower()  # the two words in any case, as the command line's choices
    if word == "all":
        return known
    if word == "headline":
        return [f"{b}.{m}" for b in KIND_BLOCKS[kind] for m in HEADLINE[b]]
    wanted = list(dict.fromkeys(m.strip() for m in metrics.split(",") if m.strip()))
    if not wanted:
        raise InputError("`metrics`: give headline, all or a comma-separated list of metrics")
    for m in wanted:
        if m.lower() in ("all", "headline"):  # a CLI review: "all,headline" suggested rl.* metrics
            raise InputError(
                f"`metrics`: {m.lower()} stands alone (every metric or the headline ones); give it "
                "alone or list metric paths"
            )
        field = m not in known and _result_field_of(kind, m)  # a JSON field that is not a number
        if field:
            where = f"'{m}' is" if field == m else f"'{m}' is inside '{field}',"
            raise InputError(
                f"`metrics`: {where} a field of the result, not a sweep metric: a sweep gives the "
                "numbers and the configuration names (`metrics` all lists them; compare's JSON has the rest)"
            )
        if m not in known:
            raise InputError(f"`metrics`: unknown metric '{m}'{did_you_mean(m, known)}")
    return wanted


def _result_field_of(kind: str, path: str) -> str:
    """The longest leading part of ``path`` that names a field of this kind's result blocks ('' if
    none): ``pretraining.step_breakdown_s.gemm_s`` is inside ``pretraining.step_breakdown_s``, a
    record of named seconds that a sweep does not give."""
    parts = path.split(".")
    for n in range(len(parts), 1, -1):
        if _result_field(kind, ".".join(parts[:n])):
            return ".".join(parts[:n])
    return ""


def _result_field(kind: str, path: str) -> bool:
    """Whether ``path`` names a field of this kind's result blocks (a flag, a text, a record)."""
    from ipd_cli.catalog.validation import fields_at

    block, _, rest = path.partition(".")
    if block not in KIND_BLOCKS[kind] or not rest:
        return False
    *inner, name = rest.split(".")
    return name in fields_at(_block_class(block), tuple(inner))


# --- the plan ----------------------------------------------------------------------------------


@dataclass
class SweepPlan:
    """What to sweep: the workload (a scenario, a pretrain or an RL workload), the axes, how."""

    workload: Any
    name: str
    origin: str
    axes: list[Axis]
    pricing: str = "rental"
    mfu: float | None = None
    metrics: list[str] = field(default_factory=list)
    samples: int | None = None
    seed: int = 0
    ratios: bool = False  # each metric's ratio to the first system's too
    # serving grids of the physics points, least recently used out: each row's traffic chooses
    # its deployment on its point's grid (lifecycle.ServingSizer)
    grids: Any = field(default_factory=lambda: grid_store(), compare=False, repr=False)

    @property
    def kind(self) -> str:
        return self.workload.kind

    @property
    def hardware(self) -> list[str]:
        return next(a.values for a in self.axes if a.path == HARDWARE)

    @property
    def numeric(self) -> list[Axis]:
        return [a for a in self.axes if a.path != HARDWARE]

    @property
    def physics(self) -> list[Axis]:
        """The axes a row's result is searched again for: every path but a cost's, and a
        scenario's calls per task where its calls carry their context (they set how much of it
        each call attends to: :func:`~ipd_cli.engine.lifecycle.carried_context_tokens`)."""
        carried = self._carries_context()
        return [a for a in self.numeric if not is_cost_path(a.path) or (carried and a.path == CALLS_PER_TASK)]

    def _carries_context(self) -> bool:
        """Whether the rows' calls carry their context (the scenario's serving, with its sets: a
        sweep varies numbers, not this choice)."""
        return getattr(getattr(self.workload, "serving", None), "context", None) == "carried"

    @property
    def rows(self) -> int:
        """Rows of one system."""
        return grid_size(self.numeric)

    def physics_points(self) -> int:
        """Distinct tuples of physics values (per system)."""
        return math.prod(
            len(set(a.values)) if isinstance(a.values, list) else len(a.values) for a in self.physics
        )


def grid_store() -> Any:
    from .serving.grid import GridStore

    return GridStore(SWEEP_GRIDS)


SWEEP_GRIDS = 4  # serving grids a sweep keeps (a large model's is tens of MB)


def make_plan(cat: Catalog, axes: list[Axis], workload: Any, name: str, origin: str, **kw: Any) -> SweepPlan:
    if not any(a.path == HARDWARE for a in axes):
        raise InputError("give the systems to sweep, e.g. `vary` hardware=vera-rubin,blackwell")
    if {reprice.BUDGET, reprice.REFRESHES} <= {a.path for a in axes}:  # as compare refuses both
        raise InputError(
            f"`vary` {reprice.BUDGET} and {reprice.REFRESHES}: the budget sets the refreshes a year "
            "(what it buys); vary one of them"
        )
    if workload.kind not in KIND_BLOCKS:
        raise InputError(
            f"a sweep takes a scenario, a pretrain or an RL workload; '{name}' is {workload.kind}"
        )
    check_mfu_scope(kw.get("mfu"), workload.kind, name)
    if not kw.get("pricing", "rental").startswith("rental") and any(a.path == PRICE for a in axes):
        raise InputError(
            f"`vary` {PRICE} is a rental price; with `pricing` tco vary the owning costs instead "
            "(e.g. economics.electricity_usd_per_kwh or systems.<name>.capex_usd), or sweep rental prices"
        )
    plan = SweepPlan(workload, name, origin, axes, **kw)
    if not isinstance(plan.ratios, bool):
        raise InputError(f"`ratios` must be true or false, got {plan.ratios!r}")
    if plan.ratios and len(plan.hardware) < 2:
        raise InputError(
            "`ratios` divides each system's metrics by the first system's: give at least two "
            "different systems in `vary` hardware (the names of one system count once)"
        )
    rows = len(plan.hardware) * plan.rows
    if rows > MAX_POINTS:  # each axis within the bound, their product far beyond it (a fuzzing review)
        sizes = " x ".join(f"{len(a.values):,}" for a in plan.numeric)
        raise InputError(
            f"the sweep would write {rows:,} rows ({len(plan.hardware)} system"
            f"{'s' if len(plan.hardware) > 1 else ''} x {sizes} values), more "
            f"than {MAX_POINTS:,}; narrow an axis or take a coarser step"
        )
    points = plan.physics_points()
    if points > MAX_SEARCHES:  # more than any system may run, whatever it reads
        names = ", ".join(a.path for a in plan.physics)
        what = f"{len(plan.hardware)} systems x {points:,} distinct values of {names}"
        _too_many(plan, len(plan.hardware) * points, what)
    return plan


def check_seed(seed: int) -> None:
    """A seed numpy takes (a whole number >= 0), checked with or without samples to draw."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"`seed` must be a whole number >= 0, got {seed!r}")  # numpy refuses others


def check_samples(plan: SweepPlan, samples: int, seed: int) -> None:
    """Refuse (before any search) a sampled sweep that could not run: a bad count or seed, or one
    whose draws would hold more than MAX_SAMPLE_MEMORY bytes at once."""
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise InputError(f"`samples` must be a whole number >= 1, got {samples!r}")
    check_seed(seed)
    points = len(plan.hardware) * plan.physics_points() if "pretraining" in KIND_BLOCKS[plan.kind] else 0
    per_draw = SAMPLE_BYTES * (2 if plan.ratios else 1) + TABLE_BYTES * points  # ratios: the first's too
    need = samples * per_draw
    if need > MAX_SAMPLE_MEMORY:
        raise InputError(
            f"`samples` {samples:,} would hold about {need / 1e9:,.{0 if need >= 1e11 else 1}f} GB at once "
            f"({per_draw:,} bytes per "
            f"draw with {points:,} physics points searched); give at most {MAX_SAMPLE_MEMORY // per_draw:,}"
        )


# --- one physics point -------------------------------------------------------------------------


def with_physics(cat: Catalog, w: Any, sets: list[Any]) -> tuple[Catalog, Any]:
    """One in-memory catalog copy (and workload) with a physics point's values: catalog paths
    through :meth:`Catalog.with_overrides`, workload fields on the resolved workload (a scenario's
    ``workload.pretraining.*`` and ``workload.post_training.*`` reach the workloads it runs)."""
    if not sets:
        return cat, w
    from ipd_cli.catalog.overrides import WORKLOAD
    from ipd_cli.catalog.validation import validate_workload
    from ipd_cli.catalog.workloads import _nested_stage, apply_own_sets, with_nested_workloads

    c = cat.with_overrides(sets)
    body = w.model_dump(exclude_none=True)
    own = [o for o in sets if o.path.startswith(WORKLOAD + ".") and _nested_stage(body, o) is None]
    if own:
        w = validate_workload(apply_own_sets(body, own), WORKLOAD)
    return with_nested_workloads(c, w), w


def estimate(cat: Catalog, plan: SweepPlan, w: Any, hw: str) -> Any:
    """The single estimate a sweep repeats: a :class:`SystemResult` (blocks that cannot run are
    null, with their reason under ``infeasible``)."""
    from .lifecycle import estimate_lifecycle, infeasible
    from .results import SystemResult
    from .serving.grid import memoized

    if w.kind == "scenario":
        with memoized(plan.grids):  # the serving grid, kept for the rows' traffic (ServingSizer)
            return estimate_lifecycle(cat, hw, w, pricing=plan.pricing, origin=plan.origin).system
    key, stage = ("rl", "post_training") if w.kind == "rl" else ("pretraining", "pretraining")
    system = cat.system(hw)
    head: dict[str, Any] = {
        "hardware": cat.canonical("systems", hw),
        "description": system.description,
        "status": system.status,
    }
    r: RlResult | SystemPretraining
    try:
        if w.kind == "rl":
            from .rl import estimate_rl

            r = estimate_rl(cat, hw, w, workload_name=plan.name, pricing=plan.pricing, origin=plan.origin)
        else:
            from .pretraining import estimate_workload

            r = estimate_workload(cat, hw, w, mfu=plan.mfu, pricing=plan.pricing, origin=plan.origin)
    except InfeasibleError as e:
        return SystemResult(**head, infeasible={key: infeasible(stage, str(e), plan.name)}, assumptions=[])
    return SystemResult(**head, assumptions=r.assumptions, **{key: getattr(r, key)})


@dataclass
class Point:
    """One system at one physics point: every number of its blocks at the catalog's costs (None
    where a block cannot run or a field is unset), the result they came from, and (a scenario
    whose serving runs) the serving deployment at any traffic."""

    numbers: dict[str, Any]
    result: Any  # SystemResult
    sizer: Any = None  # lifecycle.ServingSizer


def _flatten(result: Any, kind: str) -> dict[str, Any]:
    """Every metric of the result's blocks by its path (None: the block is null or the field unset)."""
    out: dict[str, Any] = {}
    for block in KIND_BLOCKS[kind]:
        value = getattr(result, block)
        data = value.model_dump() if value is not None else {}
        for name in _block_metrics(block):
            node: Any = data
            for key in name.split(".")[1:]:
                node = node.get(key) if isinstance(node, dict) else None
            out[name] = node
    return out


def point(cat: Catalog, plan: SweepPlan, hw: str, sets: list[Any], draws: Any = None) -> Point:
    """Search and estimate once at a physics point (``sets``: its values as overrides)."""
    c, w = with_physics(cat, plan.workload, sets)
    try:
        result = estimate(c, plan, w, hw)
    except InfeasibleError:
        raise
    except IpdError as e:
        if e.exit_code != ExitCode.RUNTIME:
            raise
        where = ", ".join(o.text for o in sets) or "the catalog's values"
        raise IpdError(f"{c.canonical('systems', hw)} at {where}: {e}", ExitCode.RUNTIME) from None
    numbers = _flatten(result, plan.kind)
    numbers |= reprice.hidden(numbers)
    sizer = None
    if plan.kind == "scenario":
        numbers |= reprice.lifecycle_terms(w)
        sizer = _sizer(c, plan, w, hw, result)
    if draws is not None and result.pretraining is not None:
        numbers |= _pretraining_draws(c, plan, w, hw, draws)
    if draws is not None and result.rl is not None:
        numbers |= _rl_run_draws(c, result.rl, draws)
    return Point(numbers, result, sizer)


def _rl_run_draws(cat: Catalog, rl: Any, draws: Any) -> dict[str, Any]:
    """An RL run's goodput and (off-policy) staleness factor at every draw, the same draws the
    pre-training run takes of the goodput (a code review: a draw held RL's at 0.9 while
    pre-training's moved, and never drew phi): re-pricing multiplies the run by them."""
    out: dict[str, Any] = {}
    terms = [("rl.run.goodput", "efficiency.training_goodput", cat.efficiency.training_goodput)]
    if rl.run.staleness_bound_measured is not None:  # off-policy: phi read
        terms.append(
            ("rl.run.staleness_steps_factor", "rl.staleness_steps_factor", cat.rl.staleness_steps_factor)
        )
    for name, path, value in terms:
        if value.range is not None:
            out[name] = draws(path, value.range[0], value.value, value.range[1])
    out |= _checkpoint_draws(cat, rl, draws)
    return out


def _checkpoint_draws(cat: Catalog, rl: Any, draws: Any) -> dict[str, Any]:
    """A run's checkpoint at every draw of the storage's write bandwidths (the share a GPU of the
    run has, a node's own): the write rate and time, what the write exposes and each step's
    periodic seconds follow (the evaluation's seconds are the rollouts' physics: not drawn)."""
    run = rl.run
    if run.checkpoint_interval_steps is None:
        return {}
    bandwidths = []
    for name in ("storage_write_gb_per_s_per_gpu", "storage_node_write_gb_per_s_per_gpu"):
        value = getattr(cat.rl, name)
        lo, hi = value.range if value.range is not None else (value.value, value.value)
        bandwidths.append(draws(f"rl.{name}", lo, value.value, hi) * f.GIGA)
    rate = f.checkpoint_write_bytes_per_s(rl.gpus, rl.holding_gpus, *bandwidths)
    write_s = f.checkpoint_write_seconds(run.checkpoint_bytes, rate)
    exposed = f.checkpoint_exposed_seconds(
        write_s,
        run.checkpoint_staging_s,
        run.checkpoint_interval_steps,
        rl.step_seconds,
        run.checkpoint_async,
    )
    periodic = f.periodic_s_per_step(
        run.eval_s, run.eval_interval_steps, exposed, run.checkpoint_interval_steps
    )
    return {
        "rl.run.checkpoint_write_gb_per_s": rate / f.GIGA,
        "rl.run.checkpoint_write_s": write_s,
        "rl.run.checkpoint_exposed_s": exposed,
        "rl.run.periodic_s_per_step": periodic,
    }


def _sizer(cat: Catalog, plan: SweepPlan, w: Any, hw: str, result: Any) -> Any:
    """The scenario's serving deployment at any traffic on this physics point, knowing the one
    its own traffic took (None where serving cannot run)."""
    from .lifecycle import ServingSizer

    point = result.serving
    if point is None:
        return None
    sizer = ServingSizer(cat, hw, w.model, w.serving, plan.pricing, plan.origin, plan.grids)
    if point.traffic_requests_per_s is not None:
        sizer.seed(point.traffic_requests_per_s * SECONDS_PER_DAY * point.output_tokens)
    return sizer


def serving_numbers(point: Any) -> dict[str, Any]:
    """A serving block's metrics by path (``serving.tokens_per_s_per_gpu``), None where unset."""
    data = point.model_dump()
    out: dict[str, Any] = {}
    for name in _block_metrics("serving"):
        node: Any = data
        for key in name.split(".")[1:]:
            node = node.get(key) if isinstance(node, dict) else None
        out[name] = node
    return out


def _served(sizers: Any, traffic: Any) -> dict[str, Any]:
    """Each row's serving numbers at its traffic (output tokens per day): its physics point's
    sizer (``sizers``, an object array that broadcasts with ``traffic``), every distinct traffic
    of a sizer at once (:meth:`~ipd_cli.engine.lifecycle.ServingSizer.numbers`)."""
    import numpy as np

    shape = np.broadcast_shapes(np.shape(sizers), np.shape(traffic))
    distinct = list(dict.fromkeys(s for s in np.ravel(np.asarray(sizers, dtype=object)) if s is not None))
    code = np.array([distinct.index(s) if s is not None else -1 for s in np.ravel(sizers)] + [0])[:-1]
    code = np.broadcast_to(code.reshape(np.shape(sizers)), shape).reshape(-1)
    tr = np.broadcast_to(np.asarray(traffic, dtype=float), shape).reshape(-1)
    names = _block_metrics("serving")
    n = len(tr)
    out: dict[str, Any] = {}
    for name in names:
        out[DEFINED + name] = np.zeros(n, dtype=bool)
        out[name] = np.full(n, None, dtype=object) if name in TEXT_METRICS else np.full(n, np.nan)
    with np.errstate(invalid="ignore"):
        valid = np.isfinite(tr) & (tr > 0)
    for k, sizer in enumerate(distinct):
        at = np.flatnonzero((code == k) & valid)
        if not len(at):
            continue
        values, inv = np.unique(tr[at], return_inverse=True)
        numbers = sizer.numbers(values, names)
        for name in names:
            out[DEFINED + name][at] = numbers[("defined", name)][inv]
            column = numbers[name][inv]
            if name not in TEXT_METRICS:  # a deployment without a field at this traffic: empty
                column = np.where(numbers[("defined", name)][inv], column, np.nan).astype(float)
            out[name][at] = column
    return {k: v.reshape(shape) for k, v in out.items()}


DEFINED = reprice.DEFINED  # a row's own: whether the metric exists at the row's traffic


def _pretraining_draws(cat: Catalog, plan: SweepPlan, w: Any, hw: str, draws: Any) -> dict[str, Any]:
    """The pre-training plan chosen at the catalog's values, priced again at every draw: its step,
    wall time and GPU-hours move; the GPUs do not (a deadline's cluster is the one sized at the
    catalog's values: at a draw it finishes before or after the deadline)."""
    from .lifecycle import stage_workload
    from .pretraining import plan_at, pretraining_inputs, solve, workload_args

    pw = w if w.kind == "pretrain" else stage_workload(cat, w, "pretraining")
    origin = plan.origin if w.kind == "pretrain" else cat.origin("workloads", w.pretraining.workload)
    mfu = plan.mfu if w.kind == "pretrain" else None
    args = dict(mfu=mfu, pricing=plan.pricing, origin=origin, **workload_args(pw))
    x, _ = pretraining_inputs(cat, hw, trace=Trace(cat.sources, record=False), **args)
    nominal, found, _why = solve(x)
    if found is None:
        return {}
    xs, _ = pretraining_inputs(cat, hw, trace=SweepTrace(cat.sources, draws=draws), **args)
    deadline = xs.get("deadline_days")
    if deadline is not None:  # the cluster sized for the deadline is kept: draws move its time
        xs = {k: v for k, v in xs.items() if k != "deadline_days"} | {"gpus": nominal["gpus"]}
    y = plan_at(xs, found, nominal, draws.n)
    if deadline is not None:  # for :func:`_deadline_notes`
        y["deadline_days"] = deadline
    return {f"pretraining.{k}": v for k, v in y.items()}


class Draws:
    """``n`` draws per input that has a range, by its path: every grid point, physics point and
    system sees the same draws of an input (common random numbers). A path the sweep varies
    (``fixed``) is never drawn: each point holds its own value, the catalog's one included (a
    review: at exactly its catalog value a varied input was still drawn over its range, so a
    row of `--vary` jumped there, P50 34.7 -> 38.4 days between 7.999 and 8 us of GEMM overhead)."""

    def __init__(self, n: int, seed: int, fixed: frozenset[str] = frozenset()) -> None:
        self.n, self.seed, self.fixed = n, seed, fixed
        self.cache: dict[str, Any] = {}

    def __call__(self, key: str, low: float, mode: float, high: float) -> Any:
        if key in self.fixed:
            import numpy as np

            return np.full(self.n, float(mode))
        if key not in self.cache:
            import zlib

            import numpy as np

            if high <= low:
                self.cache[key] = np.full(self.n, float(mode))
            else:
                rng = np.random.default_rng([self.seed, zlib.crc32(key.encode())])
                self.cache[key] = rng.triangular(low, min(max(mode, low), high), high, self.n)
        return self.cache[key]


def plan_draws(plan: SweepPlan) -> Draws | None:
    """The sweep's draws (None without ``samples``); the paths its axes vary are not drawn."""
    return Draws(plan.samples, plan.seed, frozenset(a.path for a in plan.numeric)) if plan.samples else None


class SweepTrace(Trace):
    """A trace that records nothing: a varied path gives its array of values, an input with a range
    its draws (with ``draws``), any other the catalog value."""

    def __init__(self, sources: dict, subs: dict[str, Any] | None = None, draws: Draws | None = None):
        super().__init__(sources, subs=subs or {}, record=False)
        self.draws = draws

    def take(
        self,
        name: str,
        s: Sourced,
        unit: str,
        origin: str,
        scale: float = 1.0,
        path: str | None = None,
        borrowed: str | None = None,
    ) -> Any:
        if path is not None and path in self.subs:
            value = self.subs[path]
        elif self.draws is not None and s.range is not None:
            value = self.draws(path or name, s.range[0], s.value, s.range[1])
        else:
            value = s.value
        return value * scale

    def quiet(self) -> Trace:
        return self


# --- checks before any row -----------------------------------------------------------------------


def check_set_beside_axis(cat: Catalog, plan: SweepPlan) -> None:
    """A `sets` value whose catalog path an axis varies is replaced by the axis's values: refused
    (it was dropped silently: a fuzzing review). A workload field may need a value beside the axis
    for the workload to be whole (`gen_gpus` with the `train_gpus` an axis varies): let be."""
    varied = {a.path for a in plan.numeric}  # canonical (an alias of a system is its name)
    for o in cat.overrides:
        # however spelt: `X.value` and a price's `.usd_per_gpu_hour` set X (they slipped past)
        if value_key(cat, o.path) in varied and not o.path.startswith("workload."):
            raise InputError(
                f"`sets` {o.path}: the same path is a `vary` axis, whose values replace it; drop one"
            )


def check_price_axis(cat: Catalog, plan: SweepPlan) -> None:
    """A ``price_usd_per_gpu_hour`` axis replaces the price each system is priced at: a price input
    varied or set beside it (a rental price point, capex, the owning cost's economics) would
    change nothing, which a spreadsheet of its rows would not show (a user review: a
    rental-price axis of 8 and 9 gave the same rows)."""
    from .pricing import owning_input, rental_input

    if not any(a.path == PRICE for a in plan.numeric):
        return
    given = [("`vary`", a.path, a.path) for a in plan.numeric]
    given += [("`sets`", o.path, value_key(cat, o.path)) for o in cat.overrides]  # `X.value` is X
    priced = [f"{how} {path}" for how, path, key in given if rental_input(key) or owning_input(key)]
    if priced:
        raise InputError(
            f"{priced[0]}: not read where `vary` {PRICE} gives every system's price; drop one of them"
        )


def check_paths(cat: Catalog, plan: SweepPlan, results: dict[str, Any]) -> None:
    """Every varied path must be an input the estimate reads for at least one system (a workload
    field is checked by :func:`check_values`); while a system's block cannot run at the catalog's
    values, any path but another system's or accelerator's may be one (as :func:`_physics_of`: a
    fresh-eyes review, "how much HBM makes it fit?" was refused as "not an input")."""
    readable: set[str] = {PRICE}
    for r in results.values():
        readable |= {a.path for a in r.assumptions if a.path}
    for axis in plan.numeric:
        if axis.path in readable or axis.path.startswith("workload."):
            continue
        from .pricing import owning_input

        if owning_input(axis.path) and plan.pricing.startswith("rental"):  # the price basis
            raise InputError(
                f"`vary` {axis.path}: an owning-cost input, not read under rental prices; "
                "vary it with `pricing` tco"
            )
        if not any(r.infeasible and _may_read(cat, plan, hw, axis.path) for hw, r in results.items()):
            stuck = [r.hardware for r in results.values() if r.infeasible]
            # a system that cannot run read nothing: its own paths are inputs too (a README review:
            # the choices offered were the price alone)
            also = (
                f"; {', '.join(stuck)} cannot run at the catalog's values: its own paths may be varied"
                if stuck
                else ""
            )
            raise InputError(
                f"`vary` {axis.path}: not an input of this estimate{did_you_mean(axis.path, readable)}"
                f" (a comparison's result lists each input's path under its systems' assumptions{also})"
            )


def check_values(cat: Catalog, plan: SweepPlan) -> None:
    """Every varied value must pass the validation ``--set`` gives it, before any row is written.

    An axis with at most CHECK_ALL_VALUES distinct values is checked value by value. A longer
    one (a START:STOP:STEP range) is checked at its smallest and largest values, values evenly
    spaced between them (MAX_CHECKED_VALUES in all) and its first value that is not a whole
    number: each catalog constraint on a single value is a bound (> 0, a fraction, >= 1, <= another
    field) or asks for a whole number, so a range whose ends pass holds only valid values.
    """
    for axis in plan.numeric:
        values = _values_to_check(axis.values)
        if axis.path == PRICE:
            low = min(values)
            if not low > 0:
                raise InputError(f"`vary` {PRICE}: a price must be > 0, got {low:g}")
            continue
        for v in values:
            _check_value(cat, plan, axis.path, v)


def _values_to_check(values: Any) -> list[float]:
    if isinstance(values, FloatRange):
        n = values.count
        if n <= CHECK_ALL_VALUES:
            return list(values)
        rows = {round(i * (n - 1) / (MAX_CHECKED_VALUES - 2)) for i in range(MAX_CHECKED_VALUES - 1)}
        fractional = next((i for i in range(min(n, 1000)) if not float(values[i]).is_integer()), None)
        return [values[i] for i in sorted(rows | ({fractional} if fractional is not None else set()))]
    distinct = sorted(set(values))
    if len(distinct) <= CHECK_ALL_VALUES:
        return distinct
    step = (len(distinct) - 1) / (MAX_CHECKED_VALUES - 2)
    picks = [distinct[round(i * step)] for i in range(MAX_CHECKED_VALUES - 1)]
    return picks + [next((v for v in distinct if not float(v).is_integer()), distinct[0])]


def _override(path: str, value: float) -> Any:
    from ipd_cli.catalog.overrides import Override

    value = float(value)
    return Override(path, value, f"{path}={value!r}")


def _check_value(cat: Catalog, plan: SweepPlan, path: str, value: float) -> None:
    try:
        with_physics(cat, plan.workload, [_override(path, value)])
    except InputError as e:
        # the value and its path are named already: a validator's own sentence alone
        reason = getattr(e, "reason", None) or re.sub(r"^`sets` \S+: ", "", str(e))
        raise InputError(f"`vary` {path}: the value {float(value):g} is refused: {reason}") from None


# --- the searches --------------------------------------------------------------------------------


@dataclass
class Table:
    """One system's numbers at every position of the physics axes (C order): ``values[m]`` is
    (positions, draws or 1), ``defined[m]`` whether the number exists there (False where its block
    cannot run or the field is unset: the row's cell is then empty)."""

    dims: tuple[int, ...]  # the grid's shape, with 1 on the axes that do not change the estimate
    values: dict[str, Any]
    defined: dict[str, Any]
    split: tuple[bool, ...]  # per numeric axis: whether the estimate was run per value
    sizers: Any = None  # per position: the scenario's serving at any traffic (None: none)


HIDDEN_RL = ("_rl.samples_per_step", "_rl.generated_mtokens", "_rl.rollouts_per_step")


def _table(plan: SweepPlan, points: list[Point], split: list[bool]) -> Table:
    import numpy as np

    dims = tuple(len(a.values) if cut else 1 for a, cut in zip(plan.numeric, split, strict=True))
    hidden = HIDDEN_RL if "rl" in KIND_BLOCKS[plan.kind] else ()
    keys = dict.fromkeys([*metric_names(plan.kind), *hidden, *(k for p in points for k in p.numbers)])
    values, defined = {}, {}
    for key in keys:
        column = [p.numbers.get(key) for p in points]
        defined[key] = np.array([v is not None for v in column])
        if key in TEXT_METRICS:
            values[key] = np.array(column + [None], dtype=object)[:-1, None]  # None: no value
            continue
        width = max((np.size(v) for v in column if v is not None), default=1)
        table = np.full((len(points), width), np.nan)
        for i, v in enumerate(column):
            if v is not None:
                table[i] = v
        values[key] = table
    sizers = np.array([p.sizer for p in points] + [None], dtype=object)[:-1]
    return Table(dims, values, defined, tuple(split), sizers)


def search(
    cat: Catalog, plan: SweepPlan, progress: Callable[[int, int], None] | None = None
) -> tuple[dict[str, Table], list[tuple[str, Any]], list[Any], list[str]]:
    """Every estimate the sweep needs, before any row: at the catalog's values per system (which
    tells the inputs each reads: :func:`check_paths`), then once per distinct tuple of the values
    of the physics paths that system reads. Returns the table of each system, per system and
    physics point its values (text) and result (at the catalog's costs, without its inputs), per
    system the result whose inputs the xlsx sheet lists (:func:`_inputs_of`), and warnings on its
    draws and ratios (:func:`_memory_notes`, :func:`_ratio_notes`)."""
    draws = plan_draws(plan)
    total = len(plan.hardware) * (1 + plan.physics_points())  # at most; told exactly below
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total)

    check_set_beside_axis(cat, plan)
    check_price_axis(cat, plan)
    nominal = {}
    for hw in plan.hardware:
        nominal[hw] = point(cat, plan, hw, [], draws)
        tick()
    check_paths(cat, plan, {hw: p.result for hw, p in nominal.items()})
    unread = _unread_axis_notes(cat, plan, {hw: p.result for hw, p in nominal.items()})
    check_values(cat, plan)
    split = {hw: _physics_of(cat, plan, hw, nominal[hw].result) for hw in plan.hardware}
    todo = {hw: _distinct(cat, plan, axes) for hw, axes in split.items()}
    total = done + sum(len(t) for t in todo.values())
    if progress and done >= total:  # nothing left to search: the counter ends here (a review: the
        progress(done, total)  # terminal's line stayed at "searched 2 of 4" with no newline)
    if total > MAX_SEARCHES:
        what = "each system at the catalog's values and at each distinct tuple of the physics values it reads"
        _too_many(plan, total, what)
    tables: dict[str, Table] = {}
    results: list[tuple[str, Any]] = []
    inputs: list[Any] = []
    drawn: list[tuple[str, str, dict[str, Any]]] = []
    read: set[str] = set()  # the paths some point read
    for hw in plan.hardware:
        axes = split[hw]
        found: dict[tuple, Point] = {}
        for values in itertools.product(*(a.values for a in axes)):
            if values in found:
                continue
            if values in todo[hw]:
                sets = [_override(a.path, v) for a, v in zip(axes, values, strict=True)]
                found[values] = point(cat, plan, hw, sets, draws)
                tick()
            else:
                found[values] = nominal[hw]  # the catalog's own values: searched already
        points = [found[t] for t in itertools.product(*(a.values for a in axes))]
        tables[hw] = _table(plan, points, [a in axes for a in plan.numeric])
        for values, p in found.items():
            read |= {a.path for a in p.result.assumptions if a.path}
            where = ", ".join(f"{a.path}={v:g}" for a, v in zip(axes, values, strict=True))
            results.append((where, _lean(p.result)))
            if draws is not None:
                drawn.append((p.result.hardware, where, p.numbers))
        inputs += _inputs_of(nominal[hw], found.values())
    _refuse_all_infeasible(plan, [r for _, r in results])
    unread += _never_read_notes(plan, read)
    notes = _memory_notes(plan, drawn) + _deadline_notes(plan, drawn) + _ratio_notes(plan, tables)
    return tables, results, inputs, unread + notes


def _inputs_of(nominal: Point, found: Iterable[Point]) -> list[Any]:
    """The result whose inputs a system's rows in the xlsx sheet are: its run at the catalog's
    values (a review: the first grid point's were listed, so a varied PUE read the catalog's 1.3 and
    a varied HBM its first value as a `--set`), or where that read none (cannot run there) the first
    point that did (a review: the sheets were missing where the first point could not run); none
    where no point ran. The sheet marks the inputs an axis varies (``render.xlsx.SweepBook``)."""
    for p in (nominal, *found):
        if p.result.assumptions:
            return [p.result]
    return []


def _unread_axis_notes(cat: Catalog, plan: SweepPlan, results: dict[str, Any]) -> list[str]:
    """An axis some systems read and another does not, though it is no other system's or
    accelerator's path: that system's rows do not move with it (a scripting review: GB200 reads its
    own `efficiency.training_share_by_accelerator.gb200`, so an `efficiency.training_share` axis
    gave it 122,904 GPUs on every row, without a word)."""
    out = []
    for axis in plan.numeric:
        if axis.path == PRICE or axis.path.startswith("workload."):
            continue
        reads = {hw: axis.path in {a.path for a in r.assumptions} for hw, r in results.items()}
        if not any(reads.values()):
            continue
        for hw, read in reads.items():
            r = results[hw]
            if read or r.infeasible or _others_path(cat, hw, axis.path):
                continue
            out.append(
                f"{r.hardware}: does not read `vary` {axis.path} (another value stands in for it: its "
                "assumptions say which), so its rows do not move with it"
            )
    return out


def _may_read(cat: Catalog, plan: SweepPlan, hw: str, path: str) -> bool:
    """Whether system ``hw``, which cannot run at the catalog's values (so reads nothing there),
    might read ``path`` at another: not another system's, accelerator's or family's path, nor
    another model's (a code review: `models.llama-3.1-8b.layers` on a 405B sweep was taken)."""
    if _others_path(cat, hw, path):
        return False
    section, _, rest = path.partition(".")
    return section != "models" or rest.startswith(cat.canonical("models", plan.workload.model) + ".")


def _never_read_notes(plan: SweepPlan, read: set[str]) -> list[str]:
    """An axis no point of the sweep read (taken because a system could not run at the catalog's
    values, :func:`check_paths`): its rows do not move with it, said rather than left to be seen."""
    return [
        f"`vary` {a.path}: no point of the sweep read it (taken as an input of a system that cannot "
        "run at the catalog's values), so the rows do not move with it"
        for a in plan.numeric
        if a.path != PRICE and not a.path.startswith("workload.") and a.path not in read
    ]


def _others_path(cat: Catalog, hw: str, path: str) -> bool:
    """Whether ``path`` is another system's, another accelerator's, or a serving stack profile of
    another accelerator family, none of whose values this system's profile borrows (a code review:
    an axis of Blackwell's TensorRT-LLM profile was said to be unread by H100)."""
    system = cat.system(hw)
    mine = {"systems": cat.canonical("systems", hw), "accelerators": system.accelerator}
    section, _, rest = path.partition(".")
    if section in mine:
        return not rest.startswith(mine[section] + ".")
    parts = path.split(".")
    if len(parts) > 4 and parts[:2] == ["serving", "stacks"] and parts[3] == "profiles":
        from .serving.stack import accelerator_family, chain_of

        stack, family = parts[2], accelerator_family(cat, system.accelerator)
        if stack not in cat.serving.stacks or family not in cat.serving.stacks[stack].profiles:
            return True
        return all(fam != parts[4] or st != stack for st, fam, _ in chain_of(cat, stack, family).chain)
    return False


def _memory_notes(plan: SweepPlan, found: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    """Lines where the pre-training plan, chosen at the catalog's values of the drawn inputs, does
    not fit the memory of some draws (their usable HBM, bytes per parameter ...): they price it all
    the same (a sampling review: 27 % of 2,000 draws of the 10T month on Vera Rubin, by up to 18.8
    GB). ``found``: (system, point, numbers) per physics point; one line per system and distinct
    count, naming the points it holds at; none where no metric asked for reads the plan."""
    import numpy as np

    if not any(m.split(".")[0] in ("pretraining", "intelligence_per_dollar") for m in plan.metrics):
        return []
    groups: dict[tuple, list[str]] = {}
    points: dict[str, int] = {}
    for hw, where, numbers in found:
        points[hw] = points.get(hw, 0) + 1
        fits = numbers.get("pretraining.plan_fits_memory")
        if fits is None or bool(np.all(fits)):
            continue
        over = float(np.max(numbers["pretraining.memory_over_gb_per_gpu"]))
        key = (hw, int(np.size(fits) - np.count_nonzero(fits)), int(np.size(fits)), round(over, 1), over > 0)
        groups.setdefault(key, []).append(where)
    lines = []
    for (hw, missed, n, over, hbm), wheres in groups.items():
        if not wheres[0]:
            at = ""
        elif len(wheres) == points[hw] > 1:
            at = " at every point"
        else:
            at = " at " + "; ".join(wheres[:3]) + (f" and {len(wheres) - 3} more" if len(wheres) > 3 else "")
        size = "its host memory" if not hbm else f"up to {max(over, 0.1):,.1f} GB per GPU over the usable HBM"
        lines.append(
            f"{hw}{at}: the pre-training plan, chosen at the catalog's values of the drawn inputs, does "
            f"not fit the memory of {missed:,} of the {n:,} draws ({size}); they price it as if it fit "
            "(a plan that fits there is not searched)"
        )
    return lines


def _deadline_notes(plan: SweepPlan, found: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    """Lines where the cluster a deadline sized at the catalog's values finishes past the deadline
    in at least half of the draws (a capacity planner's review: Vera Rubin's 29,952 GPUs for the
    10T month read 29.3 days, and 39.0 at the median of the draws; the sweep printed the
    percentiles without saying that the run it sized misses its deadline). ``found``: (system,
    point, numbers) per physics point; none where the sweep does not print the run's wall time."""
    import numpy as np

    if "pretraining.wall_days" not in plan.metrics:
        return []
    lines = []
    for hw, where, numbers in found:
        deadline, days = numbers.get("pretraining.deadline_days"), numbers.get("pretraining.wall_days")
        if deadline is None or days is None or np.size(days) < 2:
            continue
        late = int(np.count_nonzero(np.asarray(days) > float(deadline)))
        if 2 * late < np.size(days):
            continue
        gpus = float(np.max(numbers["pretraining.gpus"]))
        at = f" at {where}" if where else ""
        lines.append(
            f"{hw}{at}: the pre-training cluster sized at the catalog's values for the "
            f"{float(deadline):g}-day deadline ({gpus:,.0f} GPUs) finishes past it in {late:,} of the "
            f"{np.size(days):,} draws "
            f"(median {float(np.median(days)):,.1f} days): the draws keep that cluster; a run that must "
            "meet the deadline needs more GPUs (ipd train --gpus N)"
        )
    return lines


def _ratio_notes(plan: SweepPlan, tables: dict[str, Table]) -> list[str]:
    """A line when the first system has no value of a metric anywhere that another system has: every
    ratio of it is empty (a metric no system has is empty anyway)."""
    import numpy as np

    if not plan.ratios:
        return []
    base = plan.hardware[0]

    def has(hw: str, m: str) -> bool:
        return bool(np.any(tables[hw].defined.get(_defined_as(plan, m), False)))

    empty = [
        m
        for m in plan.metrics
        if m not in TEXT_METRICS and not has(base, m) and any(has(hw, m) for hw in plan.hardware[1:])
    ]
    if not empty:
        return []
    named = ", ".join(empty[:3]) + (f" and {len(empty) - 3} more" if len(empty) > 3 else "")
    return [
        f"`ratios`: the first system, {base}, has no {named}: their ratios are empty (put a system "
        "that has them first)"
    ]


def _physics_of(cat: Catalog, plan: SweepPlan, hw: str, result: Any) -> list[Axis]:
    """The physics axes that change this system's estimate: the paths it reads at the catalog's
    values and every workload field; while a block cannot run there, any it may read
    (:func:`_may_read`, as :func:`check_paths` takes: a path that block reads might make it run)."""
    reads = {a.path for a in result.assumptions if a.path}
    return [
        a
        for a in plan.physics
        if a.path in reads
        or a.path.startswith("workload.")
        or (result.infeasible and _may_read(cat, plan, hw, a.path))
    ]


def _distinct(cat: Catalog, plan: SweepPlan, axes: list[Axis]) -> set[tuple]:
    """The distinct physics tuples to estimate (the catalog's own values are estimated already)."""
    tuples = set(itertools.product(*(a.values for a in axes))) if axes else set()
    return tuples - {_catalog_tuple(cat, plan, axes)}


def _too_many(plan: SweepPlan, searches: int, what: str) -> None:
    raise InputError(
        f"`vary`: {searches:,} estimates ({what}) is more than {MAX_SEARCHES:,}: each changes the "
        "physics, so the plan, deployment and RL searches run again (0.1-1 s each); vary fewer physics "
        "values, or cost paths (prices, economics.*, power_kw, capex_usd, workload volumes such as "
        "workload.serving.tasks_per_day), which re-price the chosen configurations"
    )


def _catalog_tuple(cat: Catalog, plan: SweepPlan, physics: list[Axis]) -> tuple | None:
    """The physics values the catalog (and workload) hold, where every one is a plain number."""
    from .inputs import resolve

    out = []
    for a in physics:
        try:
            if a.path.startswith("workload."):
                node: Any = plan.workload.model_dump()
                for key in a.path.split(".")[1:]:
                    node = node[key]
            else:
                node = resolve(cat, a.path).value
            node = getattr(node, "value", node)
            out.append(float(node))
        except (KeyError, TypeError, ValueError, StopIteration):
            return None
    return tuple(out)


def _lean(result: Any) -> Any:
    """A result without its inputs (a system's own are kept once: :func:`_inputs_of`)."""
    return result.model_copy(update={"assumptions": []})


def _refuse_all_infeasible(plan: SweepPlan, results: list[Any]) -> None:
    """A sweep in which no point has the workload's headline block is an error (exit 1)."""
    block = KIND_BLOCKS[plan.kind][0]
    if any(getattr(r, block) is not None for r in results):
        return
    from .lifecycle import STAGES

    parts = []
    for r in results:
        why = r.infeasible.get(block)
        if why is not None:
            why = r.infeasible.get(STAGES[why.stage][0], why)  # the stage's own reason
            parts.append(f"{r.hardware}: {why.stage}: {why.reason}")
    raise InfeasibleError(
        f"'{plan.name}' cannot run at any point of the sweep: {' | '.join(dict.fromkeys(parts))}"
    )


# --- rows ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Box:
    """A block of the grid: fixed leading axes, a range of one axis, every value of the trailing
    ones; its rows are contiguous (C order) from ``start``."""

    start: int
    index: tuple  # per axis: an int (fixed) or a slice
    shape: tuple[int, ...]


def boxes(shape: tuple[int, ...], limit: int) -> Iterator[Box]:
    """The grid of ``shape`` in boxes of at most ``limit`` rows (whole trailing axes where they fit)."""
    n = len(shape)
    j, trailing = n, 1
    while j > 0 and trailing * shape[j - 1] <= limit:
        j -= 1
        trailing *= shape[j]
    if j == 0:
        yield Box(0, tuple(slice(None) for _ in shape), tuple(shape))
        return
    k = j - 1
    step = max(1, limit // trailing)
    for lead in itertools.product(*(range(d) for d in shape[:k])):
        base = 0
        for i, d in zip(lead, shape[:k], strict=True):
            base = base * d + i
        for a in range(0, shape[k], step):
            b = min(a + step, shape[k])
            index = (*lead, slice(a, b), *(slice(None) for _ in shape[k + 1 :]))
            yield Box((base * shape[k] + a) * trailing, index, (*(1,) * k, b - a, *shape[k + 1 :]))


class Chunk(dict):
    """Columns of a box of rows (name -> numpy array, one value per row), and each column's compact
    form (``compact``: an array that broadcasts to ``shape``, the box, in C order), so a writer
    formats each distinct value once."""

    def __init__(self, shape: tuple[int, ...], compact: dict[str, Any]) -> None:
        import numpy as np

        super().__init__({k: np.broadcast_to(v, shape).reshape(-1) for k, v in compact.items()})
        self.shape = shape
        self.compact = compact


@dataclass
class Sweep:
    """A prepared sweep: iterate it for chunks of rows. ``points``: per system and physics point
    searched, its values (text, empty without physics axes) and result at the catalog's costs
    (without its inputs), for warnings; ``inputs``: per system that ran somewhere, the result whose
    inputs the xlsx sheet lists (at the catalog's values where it runs there: :func:`_inputs_of`)."""

    plan: SweepPlan
    tables: dict[str, Table]
    points: list[tuple[str, Any]]
    cat: Catalog
    total: int
    inputs: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # warnings on the draws and the ratios
    columns: list[str] = field(default_factory=list)
    _rows: Iterator[Chunk] | None = None

    def __post_init__(self) -> None:
        self.columns = [HARDWARE, *(a.path for a in self.plan.numeric), *_output_names(self.plan)]

    def __iter__(self) -> Sweep:
        return self

    def __next__(self) -> Chunk:
        if self._rows is None:
            self._rows = _rows(self)
        return next(self._rows)


def _output_names(plan: SweepPlan) -> list[str]:
    out = []
    for m in plan.metrics:
        if m in TEXT_METRICS:
            out.append(m)
            continue
        for name in (m, f"{m}{RATIO}") if plan.ratios else (m,):
            out += [f"{name}.p{p}" for p in PERCENTILES] if plan.samples else [name]
    return out


def prepare(cat: Catalog, plan: SweepPlan, progress: Callable[[int, int], None] | None = None) -> Sweep:
    """Check the plan, run every search it needs, and return the sweep, ready to stream."""
    if plan.samples is not None:
        check_samples(plan, plan.samples, plan.seed)
    check_seed(plan.seed)
    tables, results, inputs, notes = search(cat, plan, progress)
    return Sweep(plan, tables, results, cat, len(plan.hardware) * plan.rows, inputs, notes)


def _rows(sw: Sweep) -> Iterator[Chunk]:
    import numpy as np

    plan = sw.plan
    shape = tuple(len(a.values) for a in plan.numeric)
    limit = CHUNK
    if plan.samples:
        limit = max(1, min(SAMPLED_ROWS_PER_CHUNK, SAMPLED_VALUES_PER_CHUNK // plan.samples))
    draws = plan_draws(plan)
    life = None
    if plan.kind == "scenario":
        pre, post, success = reprice.lifecycle_shape(plan.workload)
        varied = {a.path for a in plan.numeric}
        if reprice.BUDGET in varied:  # a budget, given per row, wins
            post = "budget"
        elif reprice.REFRESHES in varied and post == "budget":
            # refreshes given per row replace the file's budget, as `--set` does in compare (a
            # review: the axis was dropped, each row the budget's cost)
            post = "steps"
        life = (pre, post, success)
    axis_values = [_as_array(a.values) for a in plan.numeric]
    base = plan.hardware[0] if plan.ratios else None
    # the `sets` items the rows ran with, as compare's CSV gives them (`;`-joined), where there are
    # any (an output review: two sweeps with other --set values could not be told apart)
    sets = ";".join(o.text for o in sw.cat.overrides)
    for h, hw in enumerate(plan.hardware):
        for box in boxes(shape, limit):
            own = _box_values(sw, hw, box, axis_values, draws, life, h * plan.rows)
            against = None
            if base is not None:  # the first system's values at the same points (and draws)
                against = own if hw == base else _box_values(sw, base, box, axis_values, draws, life, 0)
            cols = _box_columns(plan, hw, own, against, draws is not None)
            if sets:
                cols[OVERRIDES] = np.array(sets, dtype=object)
            yield Chunk(box.shape, cols)


OVERRIDES = "overrides"  # the column of the rows' `sets` items, where there are any


def _as_array(values: Any) -> Any:
    import numpy as np

    return values if isinstance(values, FloatRange) else np.asarray(values, dtype=float)


def _box_values(
    sw: Sweep, hw: str, box: Box, axis_values: list, draws: Draws | None, life: Any, before: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One system's values in one box: the varied inputs, and each metric (compact arrays, with the
    draws last when sampled; NaN where the metric has no value)."""
    import numpy as np

    plan, table, sampled = sw.plan, sw.tables[hw], draws is not None
    vals = _axis_columns(plan, box, axis_values, sampled)
    m, defined = _table_cut(table, box, sampled)
    if life is not None:  # each row's traffic sized on its physics point's serving grid
        sizers = _sizers_cut(table, box, sampled)
        m["_life.serving"] = lambda traffic: _served(sizers, traffic)
    m |= _priced(sw, hw, vals, m, draws, life)
    out: dict[str, Any] = {}
    for name in plan.metrics:
        if name in TEXT_METRICS:
            out[name] = m[name][..., 0] if sampled else m[name]
            continue
        ok = defined[_defined_as(plan, name)]
        if DEFINED + name in m:  # the serving deployment of the row's traffic
            ok = ok & (m[DEFINED + name][..., 0] if sampled else m[DEFINED + name])
        ok = ok[..., None] if sampled else ok
        value = np.asarray(m[name], dtype=float)
        _check_finite(name, value, ok, box, hw, before)
        out[name] = np.where(ok, value, np.nan)  # no value: an empty cell
    met = m.get("serving.target_met")
    if met is not None and plan.ratios:  # where the serving point misses its target (ratios)
        met = np.asarray(met[..., 0] if sampled else met, dtype=object)
        out[MISSED] = np.vectorize(lambda v: v is False, otypes=[bool])(met) if met.size else met
    return vals, out


MISSED = "_serving.target_missed"  # a box's points whose serving misses the target (not a metric)


def _box_columns(
    plan: SweepPlan, hw: str, own: tuple[dict, dict], against: tuple[dict, dict] | None, sampled: bool
) -> dict[str, Any]:
    """The columns of one box: the system, the varied inputs, then each metric (its percentiles
    when sampled) and, with ``against`` (the first system's values), its ratio to the first
    system's at the same point, draw by draw (common random numbers: the ratio's percentiles, not
    the ratio of percentiles)."""
    import numpy as np

    vals, values = own
    cols: dict[str, Any] = {HARDWARE: np.array(hw, dtype=object)}
    cols |= {p: v[..., 0] if sampled else v for p, v in vals.items()}
    for name in plan.metrics:
        if name in TEXT_METRICS:
            cols[name] = values[name]
            continue
        cols |= _summary(name, values[name], sampled)
        if against is not None:
            with np.errstate(all="ignore"):
                ratio = values[name] / against[1][name]
            ok = np.isfinite(ratio)
            if priced_at_serving_point(name) and (MISSED in values or MISSED in against[1]):
                # either system priced at a speed below the target: not like for like, as compare's
                # ratio column says
                unlike = values.get(MISSED, False) | against[1].get(MISSED, False)
                ok = ok & ~(unlike[..., None] if sampled else unlike)
            cols |= _summary(f"{name}{RATIO}", np.where(ok, ratio, np.nan), sampled)
    return cols


RATIO = ".ratio"  # the column suffix of a metric's ratio to the first system's


def _summary(name: str, value: Any, sampled: bool) -> dict[str, Any]:
    """A metric's column, or its percentile columns over the draws (the last axis)."""
    import numpy as np

    if not sampled:
        return {name: value}
    if value.shape[-1] == 1:  # not drawn
        return {f"{name}.p{p}": value[..., 0] for p in PERCENTILES}
    q = np.percentile(value, PERCENTILES, axis=-1)
    return {f"{name}.p{p}": q[i] for i, p in enumerate(PERCENTILES)}


SITE_METRICS = ("site_mw", "site_gpus", "site_tasks_solved_per_day")


def _defined_as(plan: SweepPlan, name: str) -> str:
    """The metric whose existence a metric's follows: a site budget given per row exists wherever
    the headline does (the scenario may have none)."""
    block, _, field = name.partition(".")
    if block == "intelligence_per_dollar" and field in SITE_METRICS:
        if any(a.path == "workload.site_mw" for a in plan.numeric):
            return "intelligence_per_dollar.usd_per_solved_task"
    return name


def _axis_columns(plan: SweepPlan, box: Box, axis_values: list, sampled: bool) -> dict[str, Any]:
    """Each varied input's values in the box, shaped to broadcast over it (and over the draws)."""
    import numpy as np

    nd = len(box.shape)
    out = {}
    for k, (axis, values) in enumerate(zip(plan.numeric, axis_values, strict=True)):
        index = box.index[k]
        v = np.array([float(values[index])]) if isinstance(index, int) else np.asarray(values[index], float)
        out[axis.path] = v.reshape(
            (*(len(v) if j == k else 1 for j in range(nd)), *((1,) if sampled else ()))
        )
    return out


def _table_cut(table: Table, box: Box, sampled: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The table's numbers (and whether each exists) at the physics points of the box."""
    cut = tuple(
        (slice(i, i + 1) if isinstance(i, int) else i) if split else slice(None)
        for i, split in zip(box.index, table.split, strict=True)
    )
    m = {k: v.reshape(*table.dims, v.shape[-1])[(*cut, slice(None))] for k, v in table.values.items()}
    if not sampled:
        m = {k: v[..., 0] for k, v in m.items()}
    return m, {k: v.reshape(table.dims)[cut] for k, v in table.defined.items()}


def _sizers_cut(table: Table, box: Box, sampled: bool) -> Any:
    """The serving sizers at the physics points of the box (shaped as its numbers)."""
    cut = tuple(
        (slice(i, i + 1) if isinstance(i, int) else i) if split else slice(None)
        for i, split in zip(box.index, table.split, strict=True)
    )
    sizers = table.sizers.reshape(table.dims)[(*cut, ...)]  # an array, also with no axes
    return sizers[..., None] if sampled else sizers


def _priced(sw: Sweep, hw: str, vals: dict, m: dict, draws: Draws | None, life: Any) -> dict[str, Any]:
    """The cost inputs of the box (varied, drawn or the catalog's) and every metric they price."""
    import numpy as np

    from .inputs import Inputs
    from .pricing import kw_per_gpu, pue, usd_per_gpu_hour

    plan = sw.plan
    subs = {p: v for p, v in vals.items() if is_cost_path(p) and p != PRICE and not is_volume_path(p)}
    inp = Inputs(sw.cat, SweepTrace(sw.cat.sources, subs=subs, draws=draws))
    price = vals[PRICE] if PRICE in vals else usd_per_gpu_hour(inp, hw, plan.pricing)[0]
    kw, pue_ = kw_per_gpu(inp, hw), pue(inp)
    # a varied volume (tasks per day, the horizon, the RL schedule ...) in place of the scenario's
    out: dict[str, Any] = {reprice.VOLUME[p]: v for p, v in vals.items() if is_volume_path(p)}
    m = {**m, **out}
    blocks = KIND_BLOCKS[plan.kind]
    with np.errstate(all="ignore"):  # a value out of range ends as inf or NaN: refused per row
        for name, f in (
            ("pretraining", reprice.pretraining),
            ("serving", reprice.serving),
            ("rl", reprice.rl),
        ):
            if name in blocks:
                out |= f(m, price, kw, pue_)
        if life is not None:  # the scenario's serving is kept around the clock (serve_point)
            always_on = price if PRICE in vals else usd_per_gpu_hour(inp, hw, plan.pricing, always_on=True)[0]
            out |= reprice.lifecycle(life, {**m, **out}, always_on, kw, pue_)
    return out


def _check_finite(name: str, value: Any, ok: Any, box: Box, hw: str, before: int) -> None:
    """A number that should exist and is not finite: an input of the sweep is out of range."""
    import numpy as np

    bad = ok & ~np.isfinite(value)
    if not bad.any():
        return
    why = "an input of the sweep is out of range (check the `vary` values)"
    draw = None
    if bad.ndim > len(box.shape):  # sampled: the row's first draw that is not finite, as it is
        value = np.broadcast_to(value, bad.shape)
        draw = np.argmax(bad, axis=-1)
        value = np.take_along_axis(value, draw[..., None], axis=-1)[..., 0]
        bad = bad.any(axis=-1)
    i = int(np.flatnonzero(np.broadcast_to(bad, box.shape).reshape(-1))[0])
    if draw is not None:
        k = int(np.broadcast_to(draw, box.shape).reshape(-1)[i])
        why = (
            f"at draw {k + 1} of `samples`: a range reaches values the estimate cannot price (check the "
            "ranges of the catalog and of `sets`, and the `vary` values)"
        )
    shown = np.broadcast_to(value, box.shape).reshape(-1)[i]
    raise IpdError(f"row {before + box.start + i + 1} ({hw}): {name} is {shown}; {why}", ExitCode.RUNTIME)
