"""Configuration search: one mechanism for serving deployments, training plans and RL splits.

A configuration space is a table of columns, numpy arrays of equal length (tp, pp, dp, ep,
instance GPUs, batch, micro-batch, recompute, ...). The search:

1. enumerates the valid combinations as arrays (:func:`product`, then divisibility and
   placement rules as masks while enumerating);
2. marks what cannot run with named masks (:meth:`Space.require`): the reason a row is
   dropped is the first requirement it fails, which is what an infeasibility message reports;
3. evaluates the same plain formulas the single-point estimate uses over the whole columns;
4. keeps the best row (:func:`best`) or the Pareto frontier (:func:`pareto_front`) and names it.

Pins (``--instance-gpus``, ``--plan tp=4``) are filters on the columns (:meth:`Space.pin`),
never a different code path. Nothing here loops over configurations in Python.

numpy is imported inside the functions: importing this module costs nothing until a search runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Columns = dict[str, Any]  # name -> 1-D numpy array, all of one length


def array_bytes(node: Any, seen: set[int] | None = None) -> int:
    """The bytes of the numpy arrays ``node`` holds, in dicts, lists, tuples and dataclasses, each
    array once (``seen``: the ids counted so far, shared across calls): what a cache of searched
    tables or grids keeps."""
    seen = set() if seen is None else seen
    if id(node) in seen:
        return 0
    seen.add(id(node))
    if hasattr(node, "nbytes") and hasattr(node, "shape"):
        return int(node.nbytes)
    if isinstance(node, dict):
        return sum(array_bytes(v, seen) for v in node.values())
    if isinstance(node, list | tuple):
        return sum(array_bytes(v, seen) for v in node)
    if hasattr(node, "__dataclass_fields__"):
        return sum(array_bytes(getattr(node, k), seen) for k in node.__dataclass_fields__)
    return 0


def product(**axes: Any) -> Columns:
    """The Cartesian product of 1-D value lists, as columns (the first axis varies slowest)."""
    import numpy as np

    values = [np.asarray(v) for v in axes.values()]
    if not values:
        return {}
    grids = np.meshgrid(*values, indexing="ij")
    return {name: g.reshape(-1) for name, g in zip(axes, grids, strict=True)}


def distinct(values: Any, inverse: bool = False) -> Any:
    """``np.unique(values)`` (sorted, each value once) by hand: numpy 2's ``np.unique`` without
    ``return_index``/``return_inverse``/``return_counts`` asks ``np.ma.is_masked`` and so imports
    numpy.ma (~7 ms) in a process that needs nothing else of it. The same sort, the same values.
    ``inverse``: also where each value is among them (a stable argsort, for int arrays)."""
    import numpy as np

    if inverse:
        a = np.asarray(values)
        order = np.argsort(a, kind="stable")
        s = a[order]
        first = np.ones(a.size, bool)
        first[1:] = s[1:] != s[:-1]
        inv = np.empty(a.size, np.intp)
        inv[order] = np.cumsum(first) - 1
        return s[first], inv
    a = np.sort(np.asarray(values).ravel())
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if len(a) else a


def member(values: Any, of: Any) -> Any:
    """``np.isin(values, of)`` (where each of ``values`` is among ``of``) by binary search in
    ``of``'s :func:`distinct` values: ``np.isin`` sorts with ``np.unique`` where ``of`` spans a
    wide range and so imports numpy.ma (see :func:`distinct`). Whole numbers, as the searches use
    it (a NaN is among nothing)."""
    import numpy as np

    sorted_of = distinct(of)
    if not len(sorted_of):
        return np.zeros(np.shape(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_of, values), len(sorted_of) - 1)
    return sorted_of[at] == values


def merge_sorted(keys: Any, values: Any, new_keys: Any, new_values: Any) -> tuple[Any, Any]:
    """Sorted int64 ``keys`` (and their ``values``) with sorted ``new_keys`` (and ``new_values``),
    none of them among ``keys``, each put in its place: one pass over the table, what
    ``np.insert`` at ``np.searchsorted`` places gives without its general case (a sort of the
    concatenation cost 2.7x as much at 171k keys and 480 new ones). The kept decode steps of an RL
    search and its kept rows use it."""
    import numpy as np

    size = keys.size + new_keys.size
    at = np.searchsorted(keys, new_keys) + np.arange(new_keys.size)  # the new keys' places
    old = np.ones(size, bool)
    old[at] = False
    merged_keys, merged_values = np.empty(size, np.int64), np.empty(size, values.dtype)
    merged_keys[at], merged_values[at] = new_keys, new_values
    merged_keys[old], merged_values[old] = keys, values
    return merged_keys, merged_values


def take(cols: Columns, rows: Any) -> Columns:
    """The rows ``rows`` (a boolean mask or an index array) of every column. A mask is turned into
    row numbers once: indexing each column with the mask would count its rows again per column."""
    if getattr(getattr(rows, "dtype", None), "kind", "") == "b" and getattr(rows, "ndim", 0) == 1:
        import numpy as np

        rows = np.flatnonzero(rows)
    return {k: v[rows] for k, v in cols.items()}


def kept_for(store: dict, arrays: tuple, key: tuple, make: Any, most: int = 8) -> Any:
    """``make()`` for the read-only arrays ``arrays`` (a process's shared grid columns) and ``key``
    (what else it reads), kept in ``store`` by the arrays' identity: their ids, checked, the entry
    holding the arrays so that their ids stay theirs. A value kept is made read-only; beyond
    ``most`` entries the oldest goes. Nothing is kept where an array is writeable (it could
    change) or ``make`` gives None."""
    import numpy as np

    at = (tuple(map(id, arrays)), key)
    kept = store.get(at)
    if kept is not None and all(a is b for a, b in zip(kept[0], arrays, strict=True)):
        return kept[1]
    value = make()
    if value is not None and all(isinstance(a, np.ndarray) and not a.flags.writeable for a in arrays):
        if len(store) >= most:
            store.pop(next(iter(store)))
        _read_only(value)
        store[at] = (tuple(arrays), value)
    return value


def _read_only(value: Any) -> None:
    """Every array in ``value`` (an array, or dicts, tuples and lists of them) made read-only."""
    import numpy as np

    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        for v in value:
            _read_only(v)
    elif isinstance(value, np.ndarray):
        value.flags.writeable = False


BLOCK = 16384  # rows per block of :func:`by_blocks`


def by_blocks(fn: Any, *tables: dict) -> Any:
    """``fn(*tables)`` for a function that works row by row on row-aligned tables (dicts of arrays,
    or of tuples of arrays), run on blocks of ``BLOCK`` rows and joined (an array, or a dict of
    arrays and tuples of arrays): the same numbers, with temporaries small enough to stay in cache
    and in memory the allocator reuses (a fresh process otherwise pays page faults for each large
    temporary). Each block's result is written into the joined arrays as it comes (allocated at the
    first block's dtypes), so the blocks' own results reuse one block's memory; a block whose result
    does not fit them (another dtype or shape) has the blocks joined as ``np.concatenate`` would."""
    import numpy as np

    n = size(tables[0])
    if n <= BLOCK:
        return fn(*tables)

    def cut(v: Any, a: int) -> Any:
        if isinstance(v, tuple):
            return tuple(cut(e, a) for e in v)
        return v[a : a + BLOCK] if np.ndim(v) else v

    def block(a: int) -> Any:
        return fn(*({k: cut(v, a) for k, v in t.items()} for t in tables))

    first = block(0)
    out = _joined_like(first, n)
    if _put(out, first, 0, n) and all(_put(out, block(a), a, n) for a in range(BLOCK, n, BLOCK)):
        return out
    parts = [block(a) for a in range(0, n, BLOCK)]
    if isinstance(parts[0], dict):
        return {k: _join([p[k] for p in parts]) for k in parts[0]}
    return _join(parts)


def _joined_like(v: Any, n: int) -> Any:
    """Empty arrays of ``n`` rows shaped as :func:`by_blocks` joins ``v`` (a block's result)."""
    import numpy as np

    if isinstance(v, dict):
        return {k: _joined_like(e, n) for k, e in v.items()}
    if isinstance(v, tuple):
        return tuple(_joined_like(e, n) for e in v)
    return np.empty((n, *np.shape(v)[1:]), dtype=np.asarray(v).dtype) if np.ndim(v) else v


def _put(out: Any, v: Any, a: int, n: int) -> bool:
    """Block ``a``'s result ``v`` written into ``out`` (:func:`_joined_like`); False where it does
    not fit (another structure, dtype or shape: then joined as ``np.concatenate`` would)."""
    import numpy as np

    if isinstance(out, dict):
        return isinstance(v, dict) and v.keys() == out.keys() and all(_put(out[k], v[k], a, n) for k in out)
    if isinstance(out, tuple):
        fits = isinstance(v, tuple) and len(v) == len(out)
        return fits and all(_put(o, e, a, n) for o, e in zip(out, v, strict=True))
    if not isinstance(out, np.ndarray):
        return not np.ndim(v)  # a value the first block gave (kept, as joined)
    rows = min(BLOCK, n - a)
    if not isinstance(v, np.ndarray) or v.dtype != out.dtype or v.shape != (rows, *out.shape[1:]):
        return False
    out[a : a + rows] = v
    return True


def _join(values: list) -> Any:
    import numpy as np

    first = values[0]
    if isinstance(first, tuple):
        return tuple(_join([v[i] for v in values]) for i in range(len(first)))
    return np.concatenate(values) if np.ndim(first) else first


def size(cols: Columns) -> int:
    return len(next(iter(cols.values()))) if cols else 0


@dataclass
class Space:
    """Columns plus named feasibility masks, in the order they were required."""

    cols: Columns
    checks: list[tuple[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return size(self.cols)

    def __getitem__(self, name: str) -> Any:
        return self.cols[name]

    def require(self, reason: str, ok: Any) -> None:
        """Rows where ``ok`` is false cannot run, because of ``reason`` (e.g. 'weights do not fit').
        Kept as a read-only view of ``ok`` over the rows (a number or a shorter array broadcast);
        a boolean column of every row is viewed as it is, without ``np.broadcast_to``'s dispatch
        (a grid asks nine of them, most of its grids have a handful of rows)."""
        import numpy as np

        n = len(self)
        if type(ok) is np.ndarray and ok.dtype.kind == "b" and ok.shape == (n,):
            mask = ok.view()
            mask.setflags(write=False)
        else:
            mask = np.broadcast_to(np.asarray(ok, dtype=bool), (n,))
        self.checks.append((reason, mask))

    def pin(self, name: str, value: Any, reason: str | None = None) -> None:
        """Keep only rows whose column ``name`` equals ``value`` (an option that fixes it)."""
        self.require(reason or f"{name} pinned to {value}", self.cols[name] == value)

    @property
    def feasible(self) -> Any:
        import numpy as np

        ok = np.ones(len(self), dtype=bool)
        for _, mask in self.checks:
            ok &= mask
        return ok

    def first_failure(self) -> Any:
        """Per row, the index in ``checks`` of the first requirement it fails (-1: feasible)."""
        import numpy as np

        out = np.full(len(self), -1, dtype=np.int64)
        for i, (_, mask) in enumerate(self.checks):
            out = np.where((out == -1) & ~mask, i, out)
        return out

    def why(self, row: int) -> str | None:
        """The reason row ``row`` was dropped, or None when it is feasible."""
        i = int(self.first_failure()[row])
        return None if i < 0 else self.checks[i][0]

    def failures(self) -> dict[str, int]:
        """How many rows each requirement dropped first (for messages and ``explain``)."""
        import numpy as np

        first = self.first_failure()
        return {reason: int(np.sum(first == i)) for i, (reason, _) in enumerate(self.checks)}


def best(objective: Any, mask: Any, *tiebreaks: Any) -> int | None:
    """Index of the feasible row with the largest ``objective`` (ties: larger tiebreaks first,
    then the lowest index); None when no row is feasible."""
    import numpy as np

    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return None
    # key by key, keep the rows at its largest value (NaN ranks below every number): linear where a
    # sort of every feasible row was not (a traffic-sized choice runs once per traffic of a sweep)
    for key in (objective, *tiebreaks):
        if idx.size == 1:
            break
        v = np.asarray(key, dtype=float)[idx]
        known = ~np.isnan(v)
        if known.any():
            idx = idx[known & (v == np.max(v[known]))]
    return int(idx[0])


def best_of(objective: Any, mask: Any, *tiebreaks: Any) -> int:
    """:func:`best` where the caller knows some row is feasible (a search that always has a row)."""
    row = best(objective, mask, *tiebreaks)
    if row is None:
        raise ValueError("no feasible row: the caller must check the mask before choosing")
    return row


NEAR = 1e-9  # relative: two values closer than this are the same (rounding, not a difference)


def near_max(values: Any, mask: Any) -> Any:
    """``values`` with those within :data:`NEAR` of the largest under ``mask`` set to it, so that a
    tie broken by the last bits of a float goes to the next key (a dominance review: two serving
    layouts one ulp apart in 1 / TPOT swapped on a spec change, 8 % more GPUs)."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    known = np.asarray(mask, dtype=bool) & ~np.isnan(v)
    if not known.any():
        return v
    top = np.max(v[known])
    return np.where(known & (v >= top - abs(top) * NEAR), top, v)


PARETO_BINS = 256  # x bins of the pre-pass of :func:`pareto_front` (large inputs only)


def _not_beaten_by_a_higher_bin(x: Any, y: Any, idx: Any) -> Any:
    """``idx`` less the finite rows that a finite row in a higher bin of x (so of strictly larger x)
    matches or beats in y: rows :func:`pareto_front` would drop anyway, and whose dropping changes
    no other row's running maximum (DeepSeek-R1's GB200 serving grid: ~125 of 305,600 rows left to sort)."""
    import numpy as np

    xs, ys = x[idx], y[idx]
    finite = np.isfinite(xs) & np.isfinite(ys)
    if finite.all():  # the usual case: no copies of the finite rows
        xs_f, ys_f, finite = xs, ys, True
    elif finite.any():
        xs_f, ys_f = xs[finite], ys[finite]
    else:
        return idx
    lo, hi = xs_f.min(), xs_f.max()
    span = hi - lo
    if not 0.0 < span < np.inf:
        return idx
    with np.errstate(over="ignore"):
        scale = PARETO_BINS / span
    if not scale < np.inf:  # a span of a few ulps: no bins
        return idx
    # bins by arithmetic, not a search among edges (ten times faster): any map of x to bins that
    # never decreases with x serves, as a row in a higher bin then has a strictly larger x
    b = np.where(finite, np.minimum((xs - lo) * scale, PARETO_BINS - 1), 0).astype(np.intp)
    top = np.full(PARETO_BINS + 1, -np.inf)
    np.maximum.at(top, b if finite is True else b[finite], ys_f)
    above = np.maximum.accumulate(top[::-1])[::-1][1:]  # best y in the bins strictly above each
    beaten = finite & (ys <= above[b])
    return idx[~beaten]


def pareto_front(x: Any, y: Any, mask: Any = None) -> Any:
    """Indices of the rows not dominated in (x, y), both to be maximised, sorted by x ascending.

    Sort by x descending (ties: y descending), keep each row whose y beats every row before it:
    the running maximum of y. O(n log n), no Python loop.
    """
    import numpy as np

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    idx = np.arange(len(x)) if mask is None else np.flatnonzero(mask)
    if idx.size == 0:
        return idx
    if idx.size > PARETO_BINS * 8:
        idx = _not_beaten_by_a_higher_bin(x, y, idx)
    order = idx[np.lexsort((-y[idx], -x[idx]))]
    ys = y[order]
    running = np.maximum.accumulate(ys)
    prev = np.concatenate(([-np.inf], running[:-1]))
    keep = order[ys > prev]
    return keep[np.argsort(x[keep], kind="stable")]
