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
