"""ipd sweep: grid rows, equality with single runs, sampling, streaming, interruption."""

from __future__ import annotations

import csv
import io
import json

import pytest
from helpers import run_cli

from ipd_cli import compare
from ipd_cli.output import stream_rows
from ipd_cli.render import OutputContext

np = pytest.importorskip("numpy")


def _csv(*args: str) -> list[dict]:
    r = run_cli("sweep", *args, "--workload", "pretrain-10t-moe", "--format", "csv")
    assert r.code == 0, r.stderr
    return list(csv.DictReader(io.StringIO(r.stdout)))


def test_grid_has_one_row_per_point_and_matches_single_runs(catalog):
    rows = _csv(
        "--vary", "hardware=h100-sxm,gb200-nvl72,vera-rubin", "--vary", "price_usd_per_gpu_hour=2:6:1"
    )
    assert len(rows) == 3 * 5
    assert [r["hardware"] for r in rows[:5]] == ["h100-sxm"] * 5
    assert [float(r["price_usd_per_gpu_hour"]) for r in rows[:5]] == [2, 3, 4, 5, 6]
    single = (
        compare(
            catalog.with_overrides(["systems.gb200-nvl72.prices.reserved=4"]),
            ["gb200-nvl72"],
            "pretrain-10t-moe",
        )
        .systems[0]
        .pretraining
    )
    row = rows[5 + 2]
    assert row["hardware"] == "gb200-nvl72" and float(row["price_usd_per_gpu_hour"]) == 4
    assert float(row["pretraining.cost_usd"]) == pytest.approx(single.cost_usd, rel=1e-9)
    assert int(row["pretraining.gpus"]) == single.gpus


def test_varying_a_catalog_path_equals_set(catalog):
    rows = _csv("--vary", "hardware=vera-rubin", "--vary", "accelerators.rubin.fp4_dense_tflops=20000,35000")
    for row in rows:
        v = float(row["accelerators.rubin.fp4_dense_tflops"])
        single = compare(
            catalog.with_overrides([f"accelerators.rubin.fp4_dense_tflops={v}"]),
            ["vera-rubin"],
            "pretrain-10t-moe",
        )
        assert int(row["pretraining.gpus"]) == single.systems[0].pretraining.gpus
    assert int(rows[0]["pretraining.gpus"]) > int(rows[1]["pretraining.gpus"])


def test_samples_give_ordered_percentiles():
    r = run_cli("sweep", "--vary", "hardware=vera-rubin,blackwell", "--samples", "400", "--format", "json")
    assert r.code == 0, r.stderr
    rows = r.json()
    assert len(rows) == 2
    for row in rows:
        assert (
            row["pretraining.cost_usd.p10"]
            <= row["pretraining.cost_usd.p50"]
            <= row["pretraining.cost_usd.p90"]
        )
        assert row["pretraining.cost_usd.p10"] < row["pretraining.cost_usd.p90"]  # ranges do spread it
    again = run_cli(
        "sweep", "--vary", "hardware=vera-rubin,blackwell", "--samples", "400", "--format", "json"
    )
    assert again.stdout == r.stdout  # same seed, same numbers


def test_jsonl_lines_are_json():
    r = run_cli(
        "sweep",
        "--vary",
        "hardware=hopper",
        "--vary",
        "economics.pue=1.1:1.5:0.1",
        "--workload",
        "pretrain-10t-moe",
        "-f",
        "jsonl",
    )
    lines = r.stdout.splitlines()
    assert len(lines) == 5
    assert json.loads(lines[0])["economics.pue"] == pytest.approx(1.1)


def test_bad_vary_is_a_usage_error():
    for args, msg in [
        (["--vary", "hardware=vera-rubin", "--vary", "economics.pu=1:2:0.5"], "did you mean 'economics.pue'"),
        (["--vary", "hardware=vera-rubin", "--vary", "economics.pue=2:1:0.5"], "START <= STOP"),
        (["--vary", "economics.pue=1,2"], "give the systems to sweep"),
        (["--vary", "hardware=nope"], "unknown hardware 'nope'"),
        (["--vary", "hardware=hopper", "--metrics", "pretraining.cots_usd"], "did you mean"),
    ]:
        r = run_cli("sweep", *args, "--workload", "pretrain-10t-moe", "-f", "csv")
        assert r.code == 2 and msg in r.stderr, (args, r.stderr)


def test_interrupt_leaves_complete_rows(tmp_path):
    def chunks():
        yield {"hardware": np.array(["a", "b"], dtype=object), "x": np.array([1.5, 2.5])}
        raise KeyboardInterrupt

    out = tmp_path / "s.csv"
    with pytest.raises(KeyboardInterrupt):
        stream_rows(chunks(), "csv", OutputContext(), out)
    assert out.read_text() == "hardware,x\na,1.5\nb,2.5\n"
    with pytest.raises(KeyboardInterrupt):
        stream_rows(chunks(), "json", OutputContext(), tmp_path / "s.json")
    assert json.loads((tmp_path / "s.json").read_text()) == [
        {"hardware": "a", "x": 1.5},
        {"hardware": "b", "x": 2.5},
    ]


def test_scenario_sweep_has_serving_metrics_and_cost_is_linear_in_price():
    r = run_cli(
        "sweep", "--vary", "hardware=vera-rubin", "--vary", "price_usd_per_gpu_hour=2,4", "-f", "json"
    )
    assert r.code == 0, r.stderr
    a, b = r.json()
    # serving physics does not depend on the price; $/M output tokens = price / (tok/s/GPU x 3600) x 1e6
    assert a["serving.tokens_per_s_per_gpu"] == b["serving.tokens_per_s_per_gpu"]
    expected = 2 / (a["serving.tokens_per_s_per_gpu"] * 3600) * 1e6
    assert a["serving.usd_per_million_output_tokens"] == pytest.approx(expected)
    assert b["serving.usd_per_million_output_tokens"] == pytest.approx(2 * expected)


def test_samples_cover_serving_cost_but_not_its_physics():
    r = run_cli("sweep", "--vary", "hardware=blackwell", "--samples", "300", "-f", "json")
    assert r.code == 0, r.stderr
    (row,) = r.json()
    # tokens/s per GPU is evaluated once (physics is not sampled); its $ per token follows the price range
    assert row["serving.tokens_per_s_per_gpu.p10"] == row["serving.tokens_per_s_per_gpu.p90"]
    assert row["serving.usd_per_million_output_tokens.p10"] < row["serving.usd_per_million_output_tokens.p90"]


def test_vary_paths_with_dotted_model_names():
    # "llama-3.1-8b" holds dots: the path must still resolve to that model, not to "llama-3"
    r = run_cli(
        "sweep",
        "--vary",
        "hardware=hopper",
        "--vary",
        "models.llama-3.1-8b.active_params=8e9,9e9",
        "--workload",
        "pretrain-10t-moe",
        "-f",
        "csv",
    )
    assert r.code == 2 and "--vary models.llama-3.1-8b.active_params: not an input" in r.stderr
