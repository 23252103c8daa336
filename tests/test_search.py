"""The configuration-search mechanism on small grids worked out by hand."""

from __future__ import annotations

import numpy as np

from ipd_cli.engine.search import Space, best, pareto_front, product


def test_product_enumerates_every_combination_first_axis_slowest():
    cols = product(tp=[1, 2], batch=[8, 16, 32])
    assert cols["tp"].tolist() == [1, 1, 1, 2, 2, 2]
    assert cols["batch"].tolist() == [8, 16, 32, 8, 16, 32]


def test_first_failure_names_the_first_requirement_a_row_misses():
    s = Space(product(tp=[1, 2, 4, 8]))
    s.require("weights do not fit", s["tp"] >= 2)
    s.require("tp beyond the scale-up domain", s["tp"] <= 4)
    assert s.feasible.tolist() == [False, True, True, False]
    assert s.why(0) == "weights do not fit" and s.why(3) == "tp beyond the scale-up domain"
    assert s.why(1) is None
    assert s.failures() == {"weights do not fit": 1, "tp beyond the scale-up domain": 1}


def test_require_keeps_each_mask_read_only_over_the_rows_whatever_it_was_given():
    # a boolean column of every row is kept as a view (no broadcast_to); a number, a shorter
    # array or another dtype is cast and broadcast as before: each kept mask is bool, of the
    # rows' length, read-only, and holds the values given
    s = Space(product(tp=[1, 2, 4]))
    column = s["tp"] >= 2  # bool, every row: the fast path
    s.require("column", column)
    s.require("number", True)
    s.require("one value", np.array([False]))
    s.require("ints", np.array([1, 0, 1]))
    s.require("strided", np.array([True, False, False, True, True, False])[::2])  # a view, every row
    masks = dict(s.checks)
    assert masks["column"].tolist() == [False, True, True]
    assert masks["number"].tolist() == [True] * 3 and masks["one value"].tolist() == [False] * 3
    assert masks["ints"].tolist() == [True, False, True]
    assert masks["strided"].tolist() == [True, False, True]
    for reason, mask in s.checks:
        assert mask.dtype == bool and mask.shape == (3,) and not mask.flags.writeable, reason
    column[0] = True  # the caller's array stays its own to write (the kept mask is a view of it)
    assert masks["column"].tolist() == [True, True, True]


def test_pin_filters_the_grid():
    s = Space(product(tp=[1, 2, 4], pp=[1, 2]))
    s.pin("pp", 2)
    assert s["tp"][s.feasible].tolist() == [1, 2, 4]


def test_best_takes_the_largest_feasible_objective_and_breaks_ties():
    objective = np.array([5.0, 9.0, 9.0, 1.0])
    mask = np.array([True, False, True, True])
    assert best(objective, mask) == 2
    assert best(np.array([3.0, 3.0]), np.array([True, True]), np.array([1, 2])) == 1
    assert best(objective, np.zeros(4, dtype=bool)) is None


def test_pareto_front_keeps_only_undominated_points():
    # (x, y): (1, 10) (2, 8) (2, 9) (3, 4) (1.5, 7) (4, 1) (3, 3)
    x = [1, 2, 2, 3, 1.5, 4, 3]
    y = [10, 8, 9, 4, 7, 1, 3]
    # (2, 8) is dominated by (2, 9); (1.5, 7) by (2, 9); (3, 3) by (3, 4)
    assert pareto_front(x, y).tolist() == [0, 2, 3, 5]
    assert pareto_front(x, y, np.array([True, True, False, True, True, True, True])).tolist() == [0, 1, 3, 5]


def _front_by_definition(x, y, mask=None):
    """Sort by x then y descending (stable), keep each row whose y beats every row before it."""
    idx = np.arange(len(x)) if mask is None else np.flatnonzero(mask)
    order = idx[np.lexsort((-y[idx], -x[idx]))]
    ys = y[order]
    keep = order[ys > np.concatenate(([-np.inf], np.maximum.accumulate(ys)[:-1]))]
    return keep[np.argsort(x[keep], kind="stable")]


def test_a_large_pareto_front_drops_only_what_the_definition_drops():
    # above 2,048 rows a pre-pass drops the rows a row in a higher bin of x beats (a serving grid of
    # 305,600 rows keeps ~125 to sort: 21.8 -> 4.1 ms); the front must be the definition's, ties,
    # NaN and infinite x included. By construction first: 10 points on y = 100 - x^2 at x = 0..9,
    # and 3,000 points each strictly below and left of one of them
    rng = np.random.default_rng(7)
    fx = np.arange(10.0)
    fy = 100.0 - fx**2
    owner = rng.integers(0, 10, 3000)
    x = np.concatenate([fx, fx[owner] - rng.uniform(0.01, 1.0, 3000)])
    y = np.concatenate([fy, fy[owner] - rng.uniform(0.01, 5.0, 3000)])
    assert pareto_front(x, y).tolist() == list(range(10))
    for trial in range(40):
        n = int(rng.integers(2100, 20000))
        x, y = rng.lognormal(0, 2, n), rng.lognormal(0, 2, n)
        if trial % 3 == 0:
            x, y = np.round(x, 1), np.round(y, 1)  # ties in x, in y and in both
        if trial % 4 == 0:
            k = rng.integers(0, n, 50)
            x[k], y[k] = np.nan, np.nan
        if trial % 5 == 0:
            y[rng.integers(0, n, 20)] = np.nan
        if trial % 7 == 0:
            x[rng.integers(0, n, 5)] = np.inf
        mask = rng.random(n) > 0.3 if trial % 2 else None
        assert pareto_front(x, y, mask).tolist() == _front_by_definition(x, y, mask).tolist(), trial


def test_merge_sorted_puts_each_new_key_in_its_place():
    from ipd_cli.engine.search import merge_sorted

    # keys 2, 5, 9 with values 20, 50, 90; new keys 1, 6, 10 (sorted, none among them): by hand the
    # merged table is 1, 2, 5, 6, 9, 10 with 10, 20, 50, 60, 90, 100, what np.insert gives
    keys, values = np.array([2, 5, 9], np.int64), np.array([20, 50, 90], np.int64)
    new_keys, new_values = np.array([1, 6, 10], np.int64), np.array([10, 60, 100], np.int64)
    k, v = merge_sorted(keys, values, new_keys, new_values)
    assert k.tolist() == [1, 2, 5, 6, 9, 10] and v.tolist() == [10, 20, 50, 60, 90, 100]
    assert v.dtype == values.dtype
    where = np.searchsorted(keys, new_keys)
    assert k.tolist() == np.insert(keys, where, new_keys).tolist()
    # into an empty table, floats kept as floats
    k, v = merge_sorted(np.empty(0, np.int64), np.empty(0), np.array([3, 4]), np.array([0.5, 0.25]))
    assert k.tolist() == [3, 4] and v.tolist() == [0.5, 0.25]
