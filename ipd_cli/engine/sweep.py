"""Sweeps and uncertainty: the engine's cores evaluated over numpy arrays.

A sweep is the Cartesian product of ``--vary PATH=SPEC`` axes. ``hardware`` is a
categorical axis (an outer loop); every other path is any input the engine reads
through its :class:`Trace` (the ``--set`` paths), passed in as an array, so one
vectorised call evaluates a whole chunk of the grid. ``price_usd_per_gpu_hour``
replaces the price of whichever system is evaluated.

With ``samples``, each grid point is evaluated for N random draws of every input
that has a ``range`` in the catalog (triangular: low, catalog value, high) and the
P10/P50/P90 of each metric are reported.

Output is produced in chunks (dicts of column -> array), so a million-point sweep
streams instead of being held in memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.overrides import entry_name
from ipd_cli.errors import InputError, did_you_mean

from .lifecycle import serve_point
from .pretraining import pretraining_core, pretraining_inputs, workload_args
from .trace import Trace

HARDWARE = "hardware"
PRICE = "price_usd_per_gpu_hour"
CHUNK = 131_072
PERCENTILES = (10, 50, 90)
MAX_POINTS = 50_000_000  # values of one axis (a range is not held in memory: value i is computed)
SAMPLE_BYTES = 500  # held per draw while a grid point is evaluated (measured: 260 B, built-in catalog)
MAX_SAMPLE_MEMORY = 1_000_000_000  # a sampled sweep needing more is refused: at most 2,000,000 draws
SAMPLED_ROWS_PER_CHUNK = 64  # a sampled row costs a full estimate: chunks stay small, output steady
CHECK_ALL_VALUES = 1_000  # an axis with more distinct values is checked at MAX_CHECKED_VALUES of them
MAX_CHECKED_VALUES = 64


@dataclass(frozen=True)
class FloatRange:
    """The values of ``START:STOP:STEP`` without a list of them: value i is start + i x step."""

    start: float
    step: float
    count: int

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: Any) -> Any:
        """One value (an int index), or an array of them (an integer array of indices)."""
        if isinstance(index, int):
            if not -self.count <= index < self.count:
                raise IndexError(index)
            return self.start + (index % self.count) * self.step
        import numpy as np

        return self.start + np.asarray(index) * self.step

    def __iter__(self) -> Iterator[float]:
        return (self.start + i * self.step for i in range(self.count))


@dataclass(frozen=True)
class Axis:
    path: str
    values: Any  # hardware: a list of names; numbers: a list of floats or a FloatRange


def parse_spec(path: str, spec: str) -> list[Any]:
    """``a:b:step`` (inclusive of b), ``a:b:step`` with no step is an error, or ``v1,v2,...``."""
    spec = spec.strip()
    if path == HARDWARE:
        return [s.strip() for s in spec.split(",") if s.strip()]
    if ":" in spec:
        parts = spec.split(":")
        if len(parts) != 3:
            raise InputError(f"--vary {path}={spec}: a range is START:STOP:STEP, e.g. 2:6:0.5")
        try:
            start, stop, step = (float(p) for p in parts)
        except ValueError:
            raise InputError(f"--vary {path}={spec}: START, STOP and STEP must be numbers") from None
        if not all(math.isfinite(v) for v in (start, stop, step)) or step <= 0 or stop < start:
            raise InputError(f"--vary {path}={spec}: need START <= STOP and STEP > 0")
        count = int(math.floor((stop - start) / step + 1e-9)) + 1
        if count > MAX_POINTS:
            raise InputError(f"--vary {path}={spec}: {count:,} values is more than {MAX_POINTS:,}")
        return FloatRange(start, step, count)
    values = []
    for item in spec.split(","):
        try:
            v = float(item)
        except ValueError:
            raise InputError(f"--vary {path}: '{item}' is not a number") from None
        if not math.isfinite(v):
            raise InputError(f"--vary {path}: '{item}' is not a finite number")
        values.append(v)
    if len(values) > MAX_POINTS:
        raise InputError(f"--vary {path}: {len(values):,} values is more than {MAX_POINTS:,}")
    return values


def parse_axes(cat: Catalog, items: list[str]) -> list[Axis]:
    axes = []
    for item in items:
        path, sep, spec = item.partition("=")
        path = path.strip()
        if not sep or not path or not spec.strip():
            raise InputError(f"--vary {item!r}: expected PATH=SPEC, e.g. economics.pue=1.1:1.6:0.1")
        path = canonical_path(cat, path)
        if path in {a.path for a in axes}:
            raise InputError(f"--vary {path}: given twice")
        values = parse_spec(path, spec)
        if not values:
            raise InputError(f"--vary {path}: no values")
        if path == HARDWARE:
            values = [cat.canonical("systems", v) if v in cat.aliases["systems"] else v for v in values]
            for v in values:
                cat.system(v)
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


@dataclass
class SweepPlan:
    """What to evaluate: the pre-training workload and/or the serving point, the axes."""

    workload: Any  # a pretrain workload, or None
    origin: str
    axes: list[Axis]
    hardware: list[str]
    pricing: str
    mfu: float | None = None
    serving: Any = None  # a ScenarioServing, or None
    model: str | None = None  # the served model


# Paths that change what serving costs, not how fast it runs: serving physics is evaluated once
# per distinct value of the other (physics) paths, the cost arithmetic over whole arrays.
COST_PREFIXES = ("economics.",)
COST_SUFFIXES = (".power_kw", ".capex_usd")


def is_cost_path(path: str) -> bool:
    return (
        path == PRICE
        or path.startswith(COST_PREFIXES)
        or path.endswith(COST_SUFFIXES)
        or (path.startswith("systems.") and ".prices." in path)
    )


MAX_SERVING_POINTS = 256


def _serving(cat: Catalog, plan: SweepPlan, hw: str, subs: dict[str, Any], n: int, sampler: Any) -> dict:
    """Serving metrics: scalar physics per distinct physics point, vectorised cost and power."""
    import numpy as np

    from ipd_cli.catalog.loader import load_catalog

    from .inputs import Inputs
    from .pricing import kw_per_gpu, pue, usd_per_gpu_hour

    physics = sorted(p for p in subs if not is_cost_path(p))
    keys = (
        np.stack([np.broadcast_to(subs[p], (n,)) for p in physics], axis=1) if physics else np.zeros((n, 0))
    )
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    if len(uniq) > MAX_SERVING_POINTS:
        raise InputError(
            f"the serving metrics need one full estimate per value of {', '.join(physics)}: {len(uniq)} is "
            f"more than {MAX_SERVING_POINTS}; vary cost paths (prices, economics.*, power) or sweep a "
            "pretrain workload"
        )
    sv = plan.serving
    points = []
    for row in uniq:
        sets = [f"{p}={v!r}" for p, v in zip(physics, row.tolist(), strict=True)]
        c = load_catalog(sets=[*(o.text for o in cat.overrides), *sets]) if sets else cat
        points.append(serve_point(c, hw, plan.model, sv, pricing=plan.pricing).serving)
    inverse = np.asarray(inverse).reshape(-1)

    def col(field: str) -> Any:
        return np.array([getattr(p, field) for p in points], dtype=float)[inverse]

    cost_subs = {p: v for p, v in subs.items() if is_cost_path(p) and p != PRICE}
    inp = Inputs(cat, Trace(cat.sources, subs=cost_subs, sampler=sampler, record=False))
    name = cat.canonical("systems", hw)
    price = subs[PRICE] if PRICE in subs else usd_per_gpu_hour(inp, name, plan.pricing)[0]
    kw = kw_per_gpu(inp, name)
    tps = col("tokens_per_s_per_gpu")
    out = {
        "serving.tokens_per_s_per_gpu": tps,
        "serving.tokens_per_s_per_user": col("tokens_per_s_per_user"),
        "serving.ttft_s": col("ttft_s"),
        "serving.tpot_ms": col("tpot_ms"),
        "serving.usd_per_million_output_tokens": price / (tps * 3600.0) * 1e6,
        "serving.tokens_per_s_per_mw": tps / (kw * pue(inp)) * 1000.0,
        "serving.instance_gpus": col("instance_gpus"),
        "serving.concurrency": col("concurrency"),
    }
    return {k: np.broadcast_to(v, (n,)) for k, v in out.items()}


def _inputs(cat: Catalog, plan: SweepPlan, hw: str, trace: Trace) -> tuple[dict, dict]:
    return pretraining_inputs(
        cat,
        hw,
        mfu=plan.mfu,
        pricing=plan.pricing,
        origin=plan.origin,
        trace=trace,
        **workload_args(plan.workload),
    )


def _evaluate(
    cat: Catalog, plan: SweepPlan, hw: str, subs: dict[str, Any], n: int, sampler: Any = None
) -> dict:
    """Every output metric as an array of n values (n points, or n samples)."""
    import numpy as np

    out: dict[str, Any] = {}
    if plan.workload is not None:
        pre = dict(subs)
        price = pre.pop(PRICE, None)
        trace = Trace(cat.sources, subs=pre, sampler=sampler, record=False)
        x, _ = _inputs(cat, plan, hw, trace)
        if price is not None:
            x["price"] = price
        y = pretraining_core(x)
        out.update(
            {f"pretraining.{k}": np.broadcast_to(v, (n,)) for k, v in y.items() if k != "memory_bytes"}
        )
    if plan.serving is not None:
        out.update(_serving(cat, plan, hw, subs, n, sampler))
    return out


def check_paths(cat: Catalog, plan: SweepPlan) -> None:
    """Every varied path must be an input the engine reads for at least one system."""
    readable: set[str] = {PRICE}
    for hw in plan.hardware:
        if plan.workload is not None:
            seen = _PathRecorder(cat.sources)
            _inputs(cat, plan, hw, seen)
            readable |= seen.paths
        if plan.serving is not None:
            readable |= _serving_paths(cat, plan, hw)
    for axis in plan.axes:
        if axis.path != HARDWARE and axis.path not in readable:
            raise InputError(
                f"--vary {axis.path}: not an input of this estimate{did_you_mean(axis.path, readable)}"
                " (ipd compare ... --format json lists each input's path under assumptions)"
            )


def check_values(cat: Catalog, plan: SweepPlan) -> None:
    """Every varied value must pass the validation ``--set`` gives it, before any row is written.

    An axis with at most CHECK_ALL_VALUES distinct values is checked value by value. A longer
    one (a START:STOP:STEP range) is checked at its smallest and largest values, values evenly
    spaced between them (MAX_CHECKED_VALUES in all) and its first value that is not a whole
    number: each catalog constraint on a single value is a bound (> 0, a fraction, >= 1, <= another
    field) or asks for a whole number, so a range whose ends pass holds only valid values.
    """
    for axis in plan.axes:
        if axis.path == HARDWARE:
            continue
        values = _values_to_check(axis.values)
        if axis.path == PRICE:
            low = min(values)
            if not low > 0:
                raise InputError(f"--vary {PRICE}: a price must be > 0, got {low:g}")
            continue
        for v in values:
            _check_value(cat, plan, axis.path, v)


def _values_to_check(values: Any) -> list[float]:
    if isinstance(values, FloatRange):
        n = values.count
        if n <= CHECK_ALL_VALUES:
            return list(values)
        picks = {round(i * (n - 1) / (MAX_CHECKED_VALUES - 2)) for i in range(MAX_CHECKED_VALUES - 1)}
        fractional = next((i for i in range(min(n, 1000)) if not float(values[i]).is_integer()), None)
        return [values[i] for i in sorted(picks | ({fractional} if fractional is not None else set()))]
    distinct = sorted(set(values))
    if len(distinct) <= CHECK_ALL_VALUES:
        return distinct
    step = (len(distinct) - 1) / (MAX_CHECKED_VALUES - 2)
    picks = [distinct[round(i * step)] for i in range(MAX_CHECKED_VALUES - 1)]
    return picks + [next((v for v in distinct if not float(v).is_integer()), distinct[0])]


def _check_value(cat: Catalog, plan: SweepPlan, path: str, value: float) -> None:
    from ipd_cli.catalog.overrides import WORKLOAD, Override, apply_workload
    from ipd_cli.catalog.validation import validate_workload

    value = float(value)
    o = Override(path, value, f"{path}={value!r}")
    try:
        if path.startswith(WORKLOAD + "."):
            if plan.workload is None:
                return  # no pretrain workload reads it (check_paths has refused such a path)
            body = plan.workload.model_dump(exclude_none=True)
            apply_workload(body, [o])
            validate_workload(body, "workload")
        else:
            cat.with_overrides([o])
    except InputError as e:
        reason = str(e).split("Value error, ", 1)[-1] if "Value error, " in str(e) else str(e)
        raise InputError(f"--vary {path}: the value {value:g} is refused: {reason}") from None


def _serving_paths(cat: Catalog, plan: SweepPlan, hw: str) -> set[str]:
    r = serve_point(cat, hw, plan.model, plan.serving, pricing=plan.pricing)
    return {a.path for a in r.assumptions if a.path}


class _PathRecorder(Trace):
    def __init__(self, sources: dict) -> None:
        super().__init__(sources, record=False)
        self.paths: set[str] = set()

    def take(self, name, s, unit, origin, scale=1.0, path=None, borrowed=None):  # type: ignore[override]
        if path:
            self.paths.add(path)
        return super().take(name, s, unit, origin, scale, path, borrowed)

    def given(self, name, value, unit, origin, note=None, path=None, **kw):  # type: ignore[override]
        if path:
            self.paths.add(path)
        return super().given(name, value, unit, origin, note, path, **kw)


def _indexable(values: Any) -> Any:
    """Axis values that an array of indices picks from (a FloatRange computes them)."""
    import numpy as np

    return values if isinstance(values, FloatRange) else np.asarray(values, dtype=float)


def run(cat: Catalog, plan: SweepPlan, chunk: int = CHUNK) -> Iterator[dict[str, Any]]:
    """Yield column chunks: the varied inputs, then every output metric, one row per point."""
    import numpy as np

    numeric = [a for a in plan.axes if a.path != HARDWARE]
    shape = tuple(len(a.values) for a in numeric)
    total = math.prod(shape)
    arrays = [_indexable(a.values) for a in numeric]
    for hw in plan.hardware:
        for start in range(0, total, chunk):
            idx = np.unravel_index(np.arange(start, min(start + chunk, total)), shape) if shape else ()
            subs = {a.path: arrays[i][idx[i]] for i, a in enumerate(numeric)}
            n = min(chunk, total - start)
            cols: dict[str, Any] = {HARDWARE: np.full(n, hw, dtype=object)}
            cols.update(subs)
            cols.update(_evaluate(cat, plan, hw, subs, n))
            yield cols


def check_samples(plan: SweepPlan, samples: int, seed: int) -> None:
    """Refuse (before any row) a sampled sweep that could not run: a bad count or seed, or one whose
    draws would hold more than MAX_SAMPLE_MEMORY bytes at once."""
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise InputError(f"`samples` must be a whole number >= 1, got {samples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"`seed` must be a whole number >= 0, got {seed!r}")  # numpy refuses others
    need = samples * SAMPLE_BYTES
    if need > MAX_SAMPLE_MEMORY:
        raise InputError(
            f"`samples` {samples:,} would hold about {need / 1e9:,.1f} GB at once ({SAMPLE_BYTES} bytes per "
            f"draw); give at most {MAX_SAMPLE_MEMORY // SAMPLE_BYTES:,}"
        )


def run_samples(cat: Catalog, plan: SweepPlan, samples: int, seed: int) -> Iterator[dict[str, Any]]:
    """One row per (hardware, grid point): P10/P50/P90 of each metric over ``samples`` draws,
    yielded in chunks of rows; the grid is walked by index, never held in memory."""
    import numpy as np

    check_samples(plan, samples, seed)
    rng = np.random.default_rng(seed)

    def sampler(low: float, mode: float, high: float) -> Any:
        if high <= low:
            return np.full(samples, mode)
        return rng.triangular(low, min(max(mode, low), high), high, samples)

    numeric = [a for a in plan.axes if a.path != HARDWARE]
    shape = tuple(len(a.values) for a in numeric)
    total = math.prod(shape)
    arrays = [_indexable(a.values) for a in numeric]
    for hw in plan.hardware:
        rows: list[dict[str, Any]] = []
        for i in range(total):
            idx = np.unravel_index(i, shape) if shape else ()
            point = [float(arrays[k][int(j)]) for k, j in enumerate(idx)]
            subs = {a.path: np.full(samples, v) for a, v in zip(numeric, point, strict=True)}
            y = _evaluate(cat, plan, hw, subs, samples, sampler=sampler)
            row: dict[str, Any] = {HARDWARE: hw}
            row.update({a.path: v for a, v in zip(numeric, point, strict=True)})
            for key, values in y.items():
                for p, q in zip(PERCENTILES, np.percentile(values, PERCENTILES), strict=True):
                    row[f"{key}.p{p}"] = float(q)
            rows.append(row)
            if len(rows) == SAMPLED_ROWS_PER_CHUNK or i == total - 1:
                yield {
                    k: np.array([r[k] for r in rows], dtype=object if k == HARDWARE else float)
                    for k in rows[0]
                }
                rows = []
