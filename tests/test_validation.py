"""The model against published measurements (configs/validation/cases.yaml).

Run with -s to see every case's error. The bound below is the documented regression bound
(README "How accurate is ipd"): the checking-set median absolute error was 26.4 % when it was set.
"""

from __future__ import annotations

import pytest
from helpers import run_cli

from ipd_cli import validate as val

CHECKING_MEDIAN_BOUND_PCT = 30.0
# pre-training (issue 12): the checking-set median was 11.0 % and 9 of 71 cases were off by more than
# 1.5x when these bounds were set; the target (10 %, none beyond 1.5x) is not met
PRETRAIN_MEDIAN_BOUND_PCT = 12.0
PRETRAIN_BEYOND_1_5X = 9


def test_checking_set_median_error_is_within_the_documented_bound():
    r = run_cli("validate", "--set", "checking", "--format", "json")
    assert r.code == 0, r.stderr
    d = r.json()
    for row in d["items"]:
        err = "not reached" if row["error_pct"] is None else f"{row['error_pct']:+.1f} %"
        print(f"{row['id']:45s} {row['metric']:22s} measured {row['measured']:>12.4g} error {err}")
    overall = d["summary"][0]
    assert overall["group"] == "all"
    assert {row["split"] for row in d["items"]} == {"checking"}
    assert overall["median_abs_error_pct"] <= CHECKING_MEDIAN_BOUND_PCT
    pretrain = next(g for g in d["summary"] if g["group"] == "pretrain")
    assert pretrain["reached"] == pretrain["cases"]
    assert pretrain["median_abs_error_pct"] <= PRETRAIN_MEDIAN_BOUND_PCT
    ratios = [1 + r["error_pct"] / 100 for r in d["items"] if r["kind"] == "pretrain"]
    assert sum(not 1 / 1.5 <= q <= 1.5 for q in ratios) <= PRETRAIN_BEYOND_1_5X


def test_catalog_defaults_are_the_calibrated_values(catalog):
    # re-running the calibration must not move any default by more than 5 %: the catalog cites it
    for row in val.calibrate(catalog).items:
        assert row["fitted"] == pytest.approx(row["current"], rel=0.05), row["parameter"]


def test_cases_are_well_formed(catalog):
    cases, sources = val.load_cases()
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))
    assert {c.split for c in cases} == {"fitting", "checking"}
    for c in cases:
        assert c.source in sources or c.source in catalog.sources, c.id


def test_error_sign_and_summary_by_hand():
    rows = [
        {"id": "a", "kind": "serve", "error_pct": 10.0},
        {"id": "b", "kind": "serve", "error_pct": -30.0},
        {"id": "c", "kind": "pretrain", "error_pct": 150.0},
        {"id": "d", "kind": "pretrain", "error_pct": None},
    ]
    s = {g["group"]: g for g in val.summary(rows)}
    assert s["all"]["median_abs_error_pct"] == 30.0  # median of 10, 30, 150
    assert s["all"]["within_25_pct"] == pytest.approx(1 / 3)
    assert s["all"]["worst_case"] == "c" and s["all"]["over_2x"] == 1
    assert s["pretrain"]["reached"] == 1


def test_bad_split_is_a_usage_error():
    r = run_cli("validate", "--set", "everything")
    assert r.code == 2 and "unknown split" in r.stderr
