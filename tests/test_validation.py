"""The model against published measurements (configs/validation/cases.yaml).

Run with -s to see every case's error. The bound below is the documented regression bound
(README "How accurate is ipd"): the checking-set median absolute error was 26.4 % when it was set.
"""

from __future__ import annotations

import statistics

import pytest
from helpers import run_cli, run_cli_once

from ipd_cli import validate as val

CHECKING_MEDIAN_BOUND_PCT = 30.0
# Weight sync (issue 15): the target is a checking-set median of 30 % with no case off by 2x. The
# transfer schedule with each framework's software (rl.sync_stacks) reaches 27.0 % with none beyond
# 2x over 18 cases (it was 40.5 % and 3 of 17 with one loader cost for every framework).
WEIGHT_SYNC_MEDIAN_BOUND_PCT = 28.0
WEIGHT_SYNC_OVER_2X_MAX = 0

# pre-training (issue 12): the checking-set median was 11.0 % and 9 of 71 cases were off by more than
# 1.5x when these bounds were set; the target (10 %, none beyond 1.5x) is not met
PRETRAIN_MEDIAN_BOUND_PCT = 12.0
PRETRAIN_BEYOND_1_5X = 9


@pytest.fixture(scope="module")
def checking_rows(catalog):
    return val.run(catalog, "checking").items


def test_checking_set_median_error_is_within_the_documented_bound():
    r = run_cli_once("validate", "--set", "checking")  # as the README runs it: JSON when piped
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


# Serving checking set (issue 11): the median bound is the issue's; the 1.5x bound holds for all but
# the cases listed, each off for a reason the model does not capture (README "How accurate is ipd"):
# a memory-starved 70B on one 80 GB H100 (TensorRT engine flow, 2025-02), Hopper's and Blackwell
# Ultra's different latency per layer at small batch (one calibrated value serves both), and an
# InferenceX best point whose layout is not published.
SERVING_MEDIAN_BOUND_PCT = 15.0
SERVING_WORST_RATIO = 1.5
SERVING_BEYOND_1_5X = {
    "trtllm-v017-llama31-70b-h100-tp1",
    "ix-dsr1-1k1k-h200-max",
    "ix-dsr1-h200-disagg-1k1k-c288",
    "ix-dsr1-gb300-trt-disagg-1k1k-c96",
}
SERVING_WORST_RATIO_ANY = 3.5


def test_serving_checking_set_meets_the_fidelity_bound(checking_rows):
    rows = [r for r in checking_rows if r["kind"] == "serve"]
    assert len(rows) >= 60 and all(r["error_pct"] is not None for r in rows), "every case reached"
    errors = [abs(r["error_pct"]) for r in rows]
    ratios = {r["id"]: max(1 + r["error_pct"] / 100, 1 / (1 + r["error_pct"] / 100)) for r in rows}
    assert statistics.median(errors) <= SERVING_MEDIAN_BOUND_PCT
    beyond = {cid for cid, ratio in ratios.items() if ratio > SERVING_WORST_RATIO}
    assert beyond <= SERVING_BEYOND_1_5X, beyond - SERVING_BEYOND_1_5X
    assert max(ratios.values()) <= SERVING_WORST_RATIO_ANY


def test_serving_cases_where_a_maximum_is_published_let_the_search_choose():
    # a case that publishes a maximum throughput, not a layout, pins no layout or instance size
    cases, _ = val.load_cases()
    chosen = [
        c for c in cases if c.kind == "serve" and c.inputs.get("mode") == "max-throughput-model-chooses"
    ]
    assert len(chosen) >= 8
    for c in chosen:
        assert not {"layout", "instance_gpus", "attention_tp"} & set(c.inputs), c.id


def test_weight_sync_checking_cases_within_the_fidelity_bound(checking_rows):
    ws = next(g for g in val.summary(checking_rows) if g["group"] == "weight-sync")
    assert ws["reached"] == ws["cases"] >= 18
    assert ws["median_abs_error_pct"] <= WEIGHT_SYNC_MEDIAN_BOUND_PCT
    assert ws["over_2x"] <= WEIGHT_SYNC_OVER_2X_MAX


def test_catalog_defaults_are_the_calibrated_values():
    # through the command (it exited 1 on every run while one knob's only case was unreachable):
    # re-running the calibration must not move any default by more than 5 %: the catalog cites it
    r = run_cli_once("calibrate")  # as the README runs it: JSON when piped
    assert r.code == 0, r.stderr
    rows = r.json()["items"]
    fitted = [row for row in rows if row["status"] == "fitted"]
    assert len(fitted) >= 8
    for row in fitted:
        assert row["fitted"] == pytest.approx(row["current"], rel=0.05), row["parameter"]
    # a knob whose fitting cases the model cannot reach is reported and left at its value
    skipped = {row["parameter"]: row for row in rows if row["status"] != "fitted"}
    for row in skipped.values():
        assert row["fitted"] is None and row["set"] == "" and "reached" in row["status"]


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
