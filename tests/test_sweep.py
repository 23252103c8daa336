"""ipd sweep: grid rows, searches once per physics point, re-pricing equal to single runs,
every block's metrics, RL workloads, sampling, streaming, xlsx, interruption."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest
from helpers import FIXED_RL_GPUS, builtin_yaml, run_cli, run_cli_once, write

import ipd_cli
from ipd_cli import compare, load
from ipd_cli.engine import sweep as sw
from ipd_cli.errors import InputError
from ipd_cli.output import stream_rows
from ipd_cli.render import OutputContext
from ipd_cli.render.stream import chunk_bytes

SMALL = "kind: pretrain\ndescription: a small run\nmodel: llama-3.1-8b\ntokens: 1.0e12\ngpus: 64\n"


@pytest.fixture
def small(tmp_path):
    """A pretrain workload whose plan search takes milliseconds."""
    return str(write(tmp_path / "small.yaml", SMALL))


def _rows(chunks) -> list[dict]:
    out = []
    for c in chunks:
        n = len(c["hardware"])
        out += [{k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in c.items()} for i in range(n)]
    return out


def _csv(*args: str) -> list[dict]:
    r = run_cli("sweep", *args, "--format", "csv")
    assert r.code == 0, r.stderr
    return list(csv.DictReader(io.StringIO(r.stdout)))


def _value(result, path: str):
    return _at(result.model_dump(), path)


def _at(node, path: str):
    """The value at a dotted path of a dumped result (None where it has none)."""
    for key in path.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


# --- cost axes re-price; physics axes search again --------------------------------------------


def test_cost_is_gpu_hours_times_price_at_every_price(catalog, small):
    chunks, total = ipd_cli.sweep(
        catalog, ["hardware=hopper", "price_usd_per_gpu_hour=2,3.5"], small, metrics="all"
    )
    a, b = _rows(chunks)
    assert total == 2
    # one plan, one run: GPU-hours do not depend on the price; cost = GPU-hours x price, exactly
    assert a["pretraining.gpu_hours"] == b["pretraining.gpu_hours"] > 0
    assert a["pretraining.cost_usd"] == a["pretraining.gpu_hours"] * 2
    assert b["pretraining.cost_usd"] == b["pretraining.gpu_hours"] * 3.5
    assert a["pretraining.price_usd_per_gpu_hour"] == 2 and a["pretraining.plan"] == b["pretraining.plan"]


def test_each_physics_point_is_searched_once(catalog, small, monkeypatch):
    from ipd_cli.engine import pretraining

    estimates, searches = [], []
    real_estimate, real_solve = sw.estimate, pretraining._solve

    def count_estimate(cat, plan, w, hw):
        estimates.append(hw)
        return real_estimate(cat, plan, w, hw)

    def count_solve(x, key):
        searches.append(x["hbm_bw"])
        return real_solve(x, key)

    monkeypatch.setattr(sw, "estimate", count_estimate)
    monkeypatch.setattr(pretraining, "_solve", count_solve)
    monkeypatch.setattr(pretraining, "_CACHE", {})
    axes = ["hardware=hopper", "price_usd_per_gpu_hour=1:4:1", "economics.pue=1.1,1.2,1.3"]
    chunks, total = ipd_cli.sweep(catalog, axes, small)
    assert total == 12 and len(_rows(chunks)) == 12
    assert estimates == ["h100-sxm"] and len(searches) == 1  # 12 points, one physics point: one search
    estimates.clear(), searches.clear()
    # 3.0 twice, 3.5: two distinct physics points, estimated after the catalog's own values (whose
    # plan search the process remembers from the sweep above)
    axes = ["hardware=hopper", "accelerators.h100-sxm.hbm_tb_per_s=3,3.5,3", "price_usd_per_gpu_hour=2,4"]
    rows = _rows(ipd_cli.sweep(catalog, axes, small, metrics="all")[0])
    assert len(estimates) == 3 and searches == [3e12, 3.5e12]
    assert len(rows) == 6 and rows[0]["pretraining.gpu_hours"] == rows[4]["pretraining.gpu_hours"]
    single = compare(catalog.with_overrides(["accelerators.h100-sxm.hbm_tb_per_s=3.5"]), ["hopper"], small)
    assert rows[2]["pretraining.gpu_hours"] == pytest.approx(
        single.systems[0].pretraining.gpu_hours, rel=1e-12
    )


@pytest.mark.parametrize(
    ("workload", "hardware", "pricing", "axes"),
    [
        # the lifecycle: pre-training share, RL refreshes and serving, all re-priced together
        (
            "frontier-agentic",
            "vera-rubin",
            "rental",
            ["economics.pue=1.1,1.45", "systems.vera-rubin.prices.reserved=3.5,7"],
        ),
        # a yearly RL budget (its steps follow the price) and a learning curve; owning cost
        ("open-model-agent", "blackwell", "tco", ["economics.electricity_usd_per_kwh=0.05,0.11"]),
        # volumes re-price too: the tasks served and the horizon (pre-training share, RL, serving)
        (
            "frontier-agentic",
            "vera-rubin",
            "rental",
            [
                "workload.serving.tasks_per_day=1e5,3e7",
                "workload.horizon_years=0.5,3",
                "workload.serving.requests_per_task=12",
            ],
        ),
        # the RL schedule (rl.run follows it), the amortisation and a site budget, with a price
        (
            "frontier-agentic",
            "blackwell",
            "rental",
            [
                "workload.post_training.steps_per_refresh=7,400",
                "workload.post_training.refreshes_per_year=4.5",
                "workload.pretraining.amortisation_years=3",
                "workload.pretraining.deployments=2",
                "workload.site_mw=40",
                "economics.pue=1.3",
                # each step paid phi / goodput times (a code review: every case ran at phi 1)
                "rl.staleness_steps_factor=1.1",
            ],
        ),
        # a yearly budget on a learning curve (more budget, more samples, a higher score), and a
        # site budget the scenario does not have
        (
            "open-model-agent",
            "blackwell",
            "tco",
            [
                "workload.post_training.budget_usd_per_year=5e5,8e6",
                "workload.horizon_years=2",
                "workload.site_mw=20",
                "rl.staleness_steps_factor=1.05",
                "efficiency.training_goodput=0.8",
            ],
        ),
        # refreshes a year on a budget scenario replace its budget, as --set does (a review: the
        # axis was dropped, every row the budget's $2M)
        ("open-model-agent", "vera-rubin", "rental", ["workload.post_training.refreshes_per_year=6,12"]),
        # an RL workload alone: its run
        (
            "rl-swe-agent",
            "vera-rubin",
            "rental",
            ["workload.steps_per_refresh=10,300", "workload.refreshes_per_year=2"],
        ),
    ],
)
def test_every_metric_of_a_repriced_row_equals_the_single_estimate(
    catalog, workload, hardware, pricing, axes
):
    _rows_equal_single_estimates(catalog, workload, hardware, pricing, axes)


def test_a_tasks_per_day_axis_sizes_the_serving_deployment(catalog):
    # a user review: serving was busy GPU-hours (tokens / tokens/s per GPU), so 1,000 tasks a day
    # cost $2,845 a year on Vera Rubin, a 1,000th of 1M tasks, on the same 2,104-GPU deployment
    # (118 prefill x DEP2 + 3 decode x DEP32, gpus_for_traffic empty). The deployment is now sized
    # for the row's traffic and rented around the clock: 1,000 tasks x 1.5373 attempts x 30 requests
    # x 400 tokens = 18.4M output tokens a day fit one 2-GPU instance, 2 x 8,760 h x $8.50 =
    # $148,920 a year, 2 x 8,760 h x 3.194 kW x PUE 1.3 = 72.76 MWh
    axes = ["hardware=vera-rubin", "workload.serving.tasks_per_day=1e3,1e5,1e7"]
    chunks, _ = ipd_cli.sweep(catalog, axes, "open-model-agent", metrics="all")
    rows = _rows(chunks)
    assert len(chunks.points) == 1  # one search: each row's traffic only chooses on its grid
    gpus = [r["serving.gpus_for_traffic"] for r in rows]
    serving = [r["intelligence_per_dollar.cost_breakdown_usd.serving"] for r in rows]
    assert gpus[0] == 2 and rows[0]["serving.configuration"].startswith(("DEP2", "TP2", "TP1 PP2"))
    assert serving[0] == pytest.approx(2 * 8760 * 8.5, rel=1e-12)
    assert rows[0]["intelligence_per_dollar.energy_breakdown_mwh.serving"] == pytest.approx(
        2 * 8760 * 3.194444444 * 1.3 / 1000, rel=1e-6
    )
    assert gpus[0] < gpus[1] < gpus[2] and serving[0] < serving[1] < serving[2]
    for row, tasks in zip(rows, (1e3, 1e5, 1e7), strict=True):
        traffic = tasks * row["intelligence_per_dollar.expected_attempts"] * 30 * 400 / 86400
        assert row["serving.traffic_requests_per_s"] * 400 == pytest.approx(traffic, rel=1e-12)
        capacity = row["serving.instances_for_traffic"] * row["serving.deployment_gpus"]
        assert capacity * row["serving.tokens_per_s_per_gpu"] >= traffic
        busy = traffic * 86400 * 365 * row["serving.usd_per_million_output_tokens"] / 1e6
        assert row["intelligence_per_dollar.cost_breakdown_usd.serving"] >= busy  # whole GPUs, always on
    _rows_equal_single_estimates(catalog, "open-model-agent", "vera-rubin", "rental", axes[1:])


def test_a_given_pretraining_cost_re_prices_with_its_amortisation(catalog, tmp_path):

    import yaml

    body = builtin_yaml("workloads/frontier-agentic.yaml")
    body["pretraining"] = {"cost_usd": 5e8, "amortisation_years": 2}
    path = str(write(tmp_path / "given.yaml", yaml.safe_dump(body)))
    axes = ["workload.pretraining.cost_usd=1e8,9e8", "workload.pretraining.amortisation_years=4"]
    _rows_equal_single_estimates(catalog, path, "vera-rubin", "rental", axes)


def _rows_equal_single_estimates(catalog, workload, hardware, pricing, axes):
    chunks, _ = ipd_cli.sweep(
        catalog, [f"hardware={hardware}", *axes], workload, metrics="all", pricing=pricing
    )
    rows = _rows(chunks)
    assert len(chunks.points) == 1  # one estimate: every axis re-prices
    names = [n for kind in ("scenario", "rl") for n in sw.metric_names(kind) if n in rows[0]]
    names = list(dict.fromkeys(names))
    for row in rows:
        paths = [sw.canonical_path(catalog, a.split("=")[0]) for a in axes]
        sets = [f"{p}={row[p]!r}" for p in paths]
        one = compare(catalog.with_overrides(sets), [hardware], workload, pricing=pricing).systems[0]
        dumped = one.model_dump()  # once: every metric is read from it
        for name in names:
            want = _at(dumped, name)
            if want is None:  # e.g. the score of a scenario without a learning curve
                assert row[name] is None or math.isnan(row[name]), name
            elif isinstance(want, str):
                assert row[name] == want, name
            else:
                assert row[name] == pytest.approx(want, rel=1e-12, abs=1e-300), (sets, name)


def test_a_row_whose_rl_cannot_run_keeps_its_points_serving_deployment(catalog):
    from ipd_cli.catalog.workloads import resolve_workload, with_nested_workloads
    from ipd_cli.engine.lifecycle import estimate_lifecycle

    # RL that cannot run (8 training GPUs) where success follows its learning curve: no success
    # rate, so no traffic; the single estimate serves on the deployment with the most tokens/s per
    # GPU. The sweep sized the row for max_attempts tries per task (a review: 1,657.7 tok/s/GPU on
    # 28 GPUs against the estimate's 1,921.7)
    cat = catalog.with_overrides(
        ["workload.post_training.gen_gpus=1008", "workload.post_training.train_gpus=1040"]
    )
    axes = ["hardware=blackwell", "workload.post_training.train_gpus=8,1040"]
    rows = _rows(ipd_cli.sweep(cat, axes, "open-model-agent", metrics="all")[0])
    for row in rows:
        sets = [f"workload.post_training.train_gpus={row['workload.post_training.train_gpus']!r}"]
        # the single estimate, its RL block failed (compare() raises when no system runs it all)
        c = cat.with_overrides(sets)
        _, w, _ = resolve_workload(c, "open-model-agent")
        one = estimate_lifecycle(with_nested_workloads(c, w), "blackwell", w).system
        for name in ("serving.tokens_per_s_per_gpu", "serving.configuration", "serving.deployment_gpus"):
            assert row[name] == _value(one, name), (sets, name)
    failed = rows[0]
    assert failed["rl.usd_per_step"] is None or math.isnan(failed["rl.usd_per_step"])
    assert failed["serving.gpus_for_traffic"] is None or math.isnan(failed["serving.gpus_for_traffic"])


def test_procurement_sweep_of_solved_tasks_per_kusd_against_price():
    rows = _csv(
        "--vary",
        "hardware=vera-rubin,blackwell",
        "--vary",
        "price_usd_per_gpu_hour=4:12:1",
        "--metrics",
        "intelligence_per_dollar.solved_tasks_per_kusd",
    )
    assert len(rows) == 18 and list(rows[0]) == [
        "hardware",
        "price_usd_per_gpu_hour",
        "intelligence_per_dollar.solved_tasks_per_kusd",
    ]
    for system in ("vera-rubin-nvl72", "gb200-nvl72"):
        mine = [r for r in rows if r["hardware"] == system]
        # every lifecycle cost is GPU-hours x the price, so tasks per $1k x price is one number
        # per system: 1000 x tasks solved / lifecycle GPU-hours
        products = [
            float(r["intelligence_per_dollar.solved_tasks_per_kusd"]) * float(r["price_usd_per_gpu_hour"])
            for r in mine
        ]
        assert products == pytest.approx([products[0]] * 9, rel=1e-12)
    # the CSV cells are the JSON numbers, every digit (a scripting review: %.10g in CSV only)
    r = run_cli("sweep", "--vary", "hardware=vera-rubin,blackwell", "--vary", "price_usd_per_gpu_hour=4:12:1",
                "--metrics", "intelligence_per_dollar.solved_tasks_per_kusd", "-f", "json")  # fmt: skip
    as_json = [row["intelligence_per_dollar.solved_tasks_per_kusd"] for row in json.loads(r.stdout)]
    assert [float(row["intelligence_per_dollar.solved_tasks_per_kusd"]) for row in rows] == as_json
    assert [row["intelligence_per_dollar.solved_tasks_per_kusd"] for row in rows] == [
        repr(v) for v in as_json
    ]
    rubin, gb200 = rows[0], rows[9]
    assert float(rubin["intelligence_per_dollar.solved_tasks_per_kusd"]) > float(
        gb200["intelligence_per_dollar.solved_tasks_per_kusd"]
    )


def test_rows_that_miss_the_serving_target_say_so():
    # a user review: in a spreadsheet the rows that miss the speed target looked like any other
    # (GB200's best for the 10T MoE is ~131 tokens/s per user at concurrency 1: 400 is missed)
    met = ("serving.target_met", "intelligence_per_dollar.serving_target_met")
    r = run_cli(
        "sweep",
        "--vary",
        "hardware=blackwell",
        "--vary",
        "workload.serving.tokens_per_user_s=50,400",
        "-f",
        "json",
    )
    assert r.code == 0, r.stderr
    at_50, at_400 = r.json()
    # in the default (headline) metrics: a procurement review read the missed row as 6.4x cheaper
    assert [at_50[m] for m in met] == [True, True] and [at_400[m] for m in met] == [False, False]
    assert "misses the target of 400 tokens/s per user" in r.stderr


def test_an_rl_workload_sweeps_its_rl_metrics(catalog):
    chunks, total = ipd_cli.sweep(
        catalog, ["hardware=vera-rubin", "price_usd_per_gpu_hour=2,5"], "rl-swe-agent", metrics="all"
    )
    a, b = _rows(chunks)
    assert set(k.split(".")[0] for k in a) == {"hardware", "price_usd_per_gpu_hour", "rl"}
    assert a["rl.step_seconds"] == b["rl.step_seconds"]  # the split search ran once
    assert a["rl.usd_per_step"] == a["rl.gpu_hours_per_step"] * 2
    # a whole run pays phi / goodput steps per scheduled one: one-step-off's phi 1 over 0.9, each
    # lengthened by its share of the evaluations and checkpoints (physics: the same at both prices)
    assert (b["rl.run.goodput"], b["rl.run.staleness_steps_factor"]) == (0.9, 1.0)
    assert a["rl.run.periodic_s_per_step"] == b["rl.run.periodic_s_per_step"] > 0
    periodic = 1 + b["rl.run.periodic_s_per_step"] / b["rl.step_seconds"]
    assert b["rl.run.usd_per_year"] == pytest.approx(
        b["rl.usd_per_step"]
        * a["rl.run.steps_per_refresh"]
        * a["rl.run.refreshes_per_year"]
        / 0.9
        * periodic,
        rel=1e-12,
    )
    r = run_cli("sweep", "--vary", "hardware=hopper", "--workload", "rl-swe-agent", "--mfu", "0.4")
    assert r.code == 2 and "--mfu applies to pretrain workloads" in r.stderr


def test_a_block_that_cannot_run_leaves_empty_cells_and_a_warning():
    # the 10T model's RL cannot be split on 2,048 H100s when its GPUs may not grow to fit (the
    # workload lets them by default): rl and the headline are empty there
    r = run_cli(
        "sweep",
        "--vary",
        "hardware=hopper,vera-rubin",
        "--vary",
        "economics.pue=1.2,1.3",
        *FIXED_RL_GPUS,
        "-f",
        "json",
    )
    assert r.code == 0, r.stderr
    rows = r.json()
    hopper, rubin = rows[0], rows[2]
    assert (
        hopper["intelligence_per_dollar.solved_tasks_per_kusd"] is None and hopper["rl.usd_per_step"] is None
    )
    assert hopper["pretraining.gpus"] > 0 and rubin["intelligence_per_dollar.solved_tasks_per_kusd"] > 0
    assert "h100-sxm: RL post-training (rl-swe-agent-10t) cannot run" in r.stderr
    csv_rows = _csv("--vary", "hardware=hopper,vera-rubin", "--vary", "economics.pue=1.2", *FIXED_RL_GPUS)
    assert csv_rows[0]["rl.usd_per_step"] == "" and float(csv_rows[0]["pretraining.gpus"]) > 0
    # as in compare: no point with the workload's headline is an error, naming the stage
    r = run_cli(
        "sweep", "--vary", "hardware=hopper", "--vary", "economics.pue=1.2", *FIXED_RL_GPUS, "-f", "csv"
    )
    assert r.code == 1 and r.stdout == ""
    needle = "'frontier-agentic' cannot run at any point of the sweep: h100-sxm: post_training: moe-10t"
    assert needle in r.stderr


def test_too_many_searches_are_refused_before_any():
    r = run_cli(
        "sweep",
        "--vary",
        "hardware=hopper,vera-rubin",
        "--vary",
        "accelerators.rubin.hbm_tb_per_s=10:30:0.01",
    )
    assert r.code == 2, r.stderr
    assert (
        "4,002 estimates (2 systems x 2,001 distinct values of accelerators.rubin.hbm_tb_per_s)" in r.stderr
    )
    assert "more than 1,024" in r.stderr and r.stderr.count("\n") == 1


def test_paths_split_into_physics_and_cost():
    assert all(
        sw.is_cost_path(p)
        for p in (
            "price_usd_per_gpu_hour",
            "economics.pue",
            "systems.hopper.prices.reserved",
            "systems.hopper.power_kw",
            "systems.hopper.capex_usd",
            "workload.serving.tasks_per_day",
            "workload.serving.requests_per_task",
            "workload.horizon_years",
            "workload.post_training.steps_per_refresh",
            "workload.post_training.budget_usd_per_year",
            "workload.pretraining.amortisation_years",
            "workload.site_mw",
            "workload.steps_per_refresh",
        )
    )
    assert not any(
        sw.is_cost_path(p)
        for p in (
            "accelerators.rubin.hbm_tb_per_s",
            "efficiency.attention_efficiency",
            "workload.tokens",
            "workload.pretraining.tokens",  # the plan search reads the pretrain workload
            "workload.serving.output_tokens_per_request",  # the deployment search reads the shape
        )
    )


def test_a_volume_axis_re_prices_one_estimate(catalog, monkeypatch):
    """2,000 RL schedules and a thousand task volumes: one lifecycle estimate, no refusal."""
    estimates = []
    real_estimate = sw.estimate

    def count_estimate(cat, plan, w, hw):
        estimates.append(hw)
        return real_estimate(cat, plan, w, hw)

    monkeypatch.setattr(sw, "estimate", count_estimate)
    axes = [
        "hardware=blackwell",
        "workload.post_training.steps_per_refresh=1:2000:1",
        "workload.serving.tasks_per_day=1e5:1e8:1e5",
    ]
    chunks, total = ipd_cli.sweep(catalog, axes, metrics="rl.run.steps_per_refresh,rl.run.usd_per_year")
    assert total == 2_000_000 and estimates == ["gb200-nvl72"]
    first = next(iter(chunks))
    steps, usd = first["rl.run.steps_per_refresh"], first["rl.run.usd_per_year"]
    assert steps[0] == 1 and usd[0] > 0
    i = int(np.flatnonzero(steps == 100)[0])
    assert usd[i] == pytest.approx(100 * usd[0], rel=1e-12)


# --- the grid and the rows ---------------------------------------------------------------------


def test_boxes_cover_the_grid_in_order():
    for shape, limit in [
        ((3, 4, 5), 7),
        ((3, 4, 5), 20),
        ((2, 1000), 131),
        ((10,), 4),
        ((), 5),
        ((4, 5), 100),
    ]:
        flat = []
        for box in sw.boxes(shape, limit):
            assert math.prod(box.shape) <= max(limit, math.prod(shape[1:]) if len(shape) > 1 else 1)
            index = np.arange(math.prod(shape)).reshape(shape)[box.index]
            assert index.reshape(-1)[0] == box.start and index.size == math.prod(box.shape)
            flat += index.reshape(-1).tolist()
        assert flat == list(range(math.prod(shape))), shape


def test_grid_has_one_row_per_point_and_matches_single_runs(catalog):
    rows = _csv(
        "--vary", "hardware=h100-sxm,gb200-nvl72,vera-rubin", "--vary", "price_usd_per_gpu_hour=2:6:1",
        "--workload", "pretrain-10t-moe",
    )  # fmt: skip
    assert len(rows) == 3 * 5
    assert [r["hardware"] for r in rows[:5]] == ["h100-sxm"] * 5
    assert [float(r["price_usd_per_gpu_hour"]) for r in rows[:5]] == [2, 3, 4, 5, 6]
    one = compare(
        catalog.with_overrides(["systems.gb200-nvl72.prices.reserved=4"]), ["gb200-nvl72"], "pretrain-10t-moe"
    )
    row = rows[5 + 2]
    assert row["hardware"] == "gb200-nvl72" and float(row["price_usd_per_gpu_hour"]) == 4
    assert float(row["pretraining.cost_usd"]) == pytest.approx(one.systems[0].pretraining.cost_usd, rel=1e-9)
    assert int(row["pretraining.gpus"]) == one.systems[0].pretraining.gpus


def test_writers_format_compact_and_plain_chunks_alike():
    compact = {
        "hardware": np.array("a,b", dtype=object),  # a name with a comma: quoted in CSV
        "x": np.array([[1.5], [2.5]]),
        "y": np.array([[10.0, 20.0, 30.0]]),
        "z": np.array([[np.nan, 0.25, 1e20]]),
    }
    chunk = sw.Chunk((2, 3), compact)
    plain = {k: np.asarray(v) for k, v in chunk.items()}
    for fmt in ("csv", "jsonl", "json"):
        assert chunk_bytes(chunk, fmt, True) == chunk_bytes(plain, fmt, True), fmt
    text = chunk_bytes(chunk, "csv", True).decode()
    assert text.splitlines()[:3] == ["hardware,x,y,z", '"a,b",1.5,10,', '"a,b",1.5,20,0.25']
    rows = json.loads(chunk_bytes(chunk, "json", True).decode() + "\n]")
    assert rows[0] == {"hardware": "a,b", "x": 1.5, "y": 10, "z": None} and rows[5]["z"] == 1e20


# --- sampling ------------------------------------------------------------------------------------


def test_samples_give_ordered_percentiles():
    args = ("sweep", "--vary", "hardware=vera-rubin,blackwell", "--samples", "400", "--format", "json")
    r = run_cli(*args)
    assert r.code == 0, r.stderr
    rows = r.json()
    assert len(rows) == 2
    for row in rows:
        for m in ("pretraining.cost_usd", "intelligence_per_dollar.solved_tasks_per_kusd"):
            assert row[f"{m}.p10"] <= row[f"{m}.p50"] <= row[f"{m}.p90"]
        assert row["pretraining.cost_usd.p10"] < row["pretraining.cost_usd.p90"]  # ranges do spread it
        # the cluster sized for the deadline at the catalog's values is kept; its time moves
        assert row["pretraining.gpus.p10"] == row["pretraining.gpus.p90"]
        assert row["pretraining.wall_days.p10"] < row["pretraining.wall_days.p90"]
    assert run_cli(*args).stdout == r.stdout  # same seed, same numbers


def test_samples_are_common_to_every_grid_point(catalog):
    chunks, _ = ipd_cli.sweep(
        catalog, ["hardware=vera-rubin", "price_usd_per_gpu_hour=4,8"], "pretrain-10t-moe", samples=300
    )
    a, b = _rows(chunks)
    # the same draws at both prices: cost = GPU-hours x price draw by draw, so each percentile doubles
    for p in (10, 50, 90):
        assert b[f"pretraining.cost_usd.p{p}"] == pytest.approx(
            2 * a[f"pretraining.cost_usd.p{p}"], rel=1e-12
        )
        assert b[f"pretraining.gpu_hours.p{p}"] == a[f"pretraining.gpu_hours.p{p}"]


def test_a_varied_input_is_not_drawn_at_its_catalog_value_either(catalog):
    # a sampling review: a varied path held its value at every point but the catalog's own, where
    # it was still drawn over its range (1-200 us of GEMM overhead around 8): the row at 8 read a
    # P50 of 38.4 days between 34.7 at 7.999 and 8.001. Every point now holds the value it names
    axis = "efficiency.gemm_call_overhead_us=7.999,8,8.001"
    chunks, _ = ipd_cli.sweep(catalog, ["hardware=vera-rubin", axis], "pretrain-10t-moe", samples=50)
    below, at, above = _rows(chunks)
    for p in (10, 50, 90):
        key = f"pretraining.wall_days.p{p}"
        assert below[key] <= at[key] <= above[key]
        assert above[key] == pytest.approx(below[key], rel=1e-4)


def test_draws_whose_memory_the_sampled_plan_no_longer_fits_are_counted(catalog, tmp_path):
    # a sampling review: the plan chosen at the catalog's values was priced at every draw, 25 % of
    # which held more bytes per GPU than the drawn usable HBM, without a word. The share and the
    # worst excess, by hand from the draws: usable HBM = hbm_gib x 2^30 x the drawn usable fraction
    # (the 10T month with its activations kept in HBM, the plan the search chose until tensor-
    # parallel ranks held MLA's down-projections whole: it now offloads them, and an offloading
    # plan sends what a draw's HBM does not hold to the host; TP2 PP2 since the plan the search
    # takes with them kept, once the 1F1B overlap paid for its unpaired chunks, holds 137 GB; TP4
    # PP2 since memory counts NVFP4's cached weight copy: TP2 PP2's plan then holds 224 GB)
    n = 200
    workload = tmp_path / "pretrain.yaml"
    write(
        workload,
        "kind: pretrain\ndescription: the 10T month, activations in HBM\nmodel: moe-10t\n"
        "tokens: 1.0e14\ndeadline_days: 30\nprecision: fp4\nplan: tp=4,pp=2,recompute=none\n",
    )
    chunks, _ = ipd_cli.sweep(
        catalog,
        ["hardware=vera-rubin,blackwell"],
        str(workload),
        samples=n,
        metrics="pretraining.memory_gb_per_gpu",
    )
    memory_gb = chunks.tables["vera-rubin-nvl72"].values["pretraining.memory_gb_per_gpu"][0]
    draws = sw.Draws(n, 0)  # the sweep's: the same seed draws the same values of a path
    hbm = catalog.accelerator_of(catalog.system("vera-rubin")).hbm_gib
    usable = catalog.efficiency.hbm_usable_fraction
    gib = draws("accelerators.rubin.hbm_gib", hbm.range[0], hbm.value, hbm.range[1])
    fraction = draws("efficiency.hbm_usable_fraction", usable.range[0], usable.value, usable.range[1])
    cap_gb = gib * 2**30 * fraction / 1e9
    over = memory_gb > cap_gb
    assert 0.1 < over.mean() < 0.9 and len(memory_gb) == n
    # GB200's plan fits every draw: no line for it (the deadline's lines are another test's)
    (note,) = [n for n in chunks.notes if "does not fit the memory" in n]
    assert note.startswith(
        "vera-rubin-nvl72: the pre-training plan, chosen at the catalog's values of the drawn inputs,"
    )
    worst = float(np.max(memory_gb - cap_gb))
    assert f"{np.count_nonzero(over)} of the 200 draws (up to {worst:,.1f} GB per GPU" in note
    plain, _ = ipd_cli.sweep(catalog, ["hardware=vera-rubin"], "pretrain-10t-moe")
    assert plain.notes == []  # nothing drawn: the plan fits where it was chosen
    r = run_cli("sweep", "--vary", "hardware=vera-rubin", "--workload", str(workload), "--samples", "50")
    assert r.code == 0 and "draws (up to" in r.stderr and "they price it as if it fit" in r.stderr
    # the search's own plan offloads its activations: no draw it does not fit
    r = run_cli("sweep", "--vary", "hardware=vera-rubin", "--workload", "pretrain-10t-moe", "--samples", "50")
    assert r.code == 0 and "draws (up to" not in r.stderr


def test_a_sampled_sweep_says_when_the_cluster_a_deadline_sized_misses_it(catalog):
    # a capacity planner's review: Vera Rubin's 29,952 GPUs meet the 10T month at the catalog's
    # values (29.3 days) and the draws' median is 39 days; the sweep printed the percentiles without
    # saying that the cluster it sized misses its deadline. The count and median by hand from the
    # draws the sweep priced, against pretrain-10t-moe's deadline_days: 30
    n = 200
    chunks, _ = ipd_cli.sweep(
        catalog, ["hardware=vera-rubin"], "pretrain-10t-moe", samples=n, metrics="pretraining.wall_days"
    )
    days = chunks.tables["vera-rubin-nvl72"].values["pretraining.wall_days"][0]
    late = int(np.count_nonzero(days > 30))
    assert len(days) == n and late > n / 2
    (note,) = [n for n in chunks.notes if "deadline" in n]
    assert note == (
        "vera-rubin-nvl72: the pre-training cluster sized at the catalog's values for the 30-day "
        f"deadline (29,952 GPUs) finishes past it in {late} of the 200 draws (median "
        f"{float(np.median(days)):,.1f} days): the draws keep that cluster; a run that must meet the "
        "deadline needs more GPUs (ipd train --gpus N)"
    )
    # a line where half the draws or more are late, none below; none without a deadline or draws
    from types import SimpleNamespace as NS

    plan = NS(metrics=["pretraining.wall_days"])
    half = {"pretraining.deadline_days": 30.0, "pretraining.gpus": np.full(4, 72.0)}
    found = [("x", "", half | {"pretraining.wall_days": np.array([29.0, 29.5, 30.7, 31.0])})]
    assert sw._deadline_notes(plan, found) == [
        "x: the pre-training cluster sized at the catalog's values for the 30-day deadline (72 GPUs) "
        "finishes past it in 2 of the 4 draws (median 30.1 days): the draws keep that cluster; a run "
        "that must meet the deadline needs more GPUs (ipd train --gpus N)"
    ]
    found = [("x", "", half | {"pretraining.wall_days": np.array([29.0, 29.5, 30.0, 31.0])})]
    assert sw._deadline_notes(plan, found) == []  # 30.0 is on time: 1 of 4 late
    # the sweep does not print the wall time: no line (an error after it broke one-line errors)
    assert sw._deadline_notes(NS(metrics=["pretraining.energy_mwh"]), found) == []
    plain, _ = ipd_cli.sweep(catalog, ["hardware=vera-rubin"], "pretrain-10t-moe")
    assert not any("deadline" in n for n in plain.notes)


def test_ratios_divide_each_system_by_the_first_at_the_same_point(catalog, small):
    # the ratio of the comparison's own numbers, at each price of a price axis (a cost axis: the
    # ratio of GPU-hours stays, the ratio of cost follows the price, the same at both)
    chunks, _ = ipd_cli.sweep(
        catalog, ["hardware=vera-rubin,blackwell", "price_usd_per_gpu_hour=4,8"], small, ratios=True,
        metrics="pretraining.gpu_hours,pretraining.cost_usd",
    )  # fmt: skip
    rows = _rows(chunks)
    r = compare(catalog, ["vera-rubin", "blackwell"], small)
    rubin, gb200 = (s.pretraining.gpu_hours for s in r.systems)
    assert [row["pretraining.gpu_hours.ratio"] for row in rows] == [1, 1, *[pytest.approx(gb200 / rubin)] * 2]
    assert [row["pretraining.cost_usd.ratio"] for row in rows[2:]] == [pytest.approx(gb200 / rubin)] * 2
    assert list(rows[0]) == [
        "hardware", "price_usd_per_gpu_hour", "pretraining.gpu_hours", "pretraining.gpu_hours.ratio",
        "pretraining.cost_usd", "pretraining.cost_usd.ratio",
    ]  # fmt: skip


def test_sampled_ratios_are_the_percentiles_of_the_ratio_draw_by_draw(catalog):
    # each draw of a shared input (an efficiency) moves both systems: the ratio's percentiles keep
    # that, the ratio of the percentiles does not. By hand from the drawn wall times
    n, metric = 300, "pretraining.wall_days"
    chunks, _ = ipd_cli.sweep(
        catalog, ["hardware=vera-rubin,blackwell"], "pretrain-10t-moe", samples=n, metrics=metric, ratios=True
    )
    rubin, gb200 = _rows(chunks)
    days = {hw: chunks.tables[hw].values[metric][0] for hw in ("vera-rubin-nvl72", "gb200-nvl72")}
    by_draw = days["gb200-nvl72"] / days["vera-rubin-nvl72"]
    assert len(by_draw) == n and np.ptp(by_draw) > 0
    for p in (10, 50, 90):
        assert gb200[f"{metric}.ratio.p{p}"] == pytest.approx(np.percentile(by_draw, p), rel=1e-12)
        assert rubin[f"{metric}.ratio.p{p}"] == 1
    assert "serving.configuration.ratio" not in _output_names(["serving.configuration"])


def _output_names(metrics: list[str]) -> list[str]:
    plan = sw.SweepPlan(None, "x", "x", [], metrics=metrics, samples=10, ratios=True)
    return sw._output_names(plan)


def test_ratios_need_two_different_systems(catalog):
    for systems in ("vera-rubin", "vera-rubin,rubin"):  # rubin names the same system
        r = run_cli("sweep", "--vary", f"hardware={systems}", "--ratios")
        assert r.code == 2 and r.stdout == ""
        assert r.stderr.strip() == (
            "ipd: error: --ratios divides each system's metrics by the first system's: give at least two "
            "different systems in --vary hardware (the names of one system count once)"
        )
    with pytest.raises(InputError, match="`ratios` must be true or false, got 'no'"):
        ipd_cli.sweep(catalog, ["hardware=vera-rubin,blackwell"], "pretrain-10t-moe", ratios="no")


def test_a_first_system_without_a_metric_warns_that_its_ratios_are_empty():
    # a review: v100 first, its pre-training, RL and serving cannot run: every ratio was empty
    # without a word
    metrics = "pretraining.gpus,serving.configuration,serving.tokens_per_s_per_gpu"
    r = run_cli("sweep", "--vary", "hardware=v100,vera-rubin", "--ratios", "--metrics", metrics, "-f", "json")
    assert r.code == 0, r.stderr
    assert {row["pretraining.gpus.ratio"] for row in r.json()} == {None}
    line = (
        "ipd: warning: --ratios: the first system, v100-sxm2, has no pretraining.gpus, "
        "serving.tokens_per_s_per_gpu: their ratios are empty (put a system that has them first)"
    )
    assert line in r.stderr.splitlines()
    assert "--ratios" not in run_cli("sweep", "--vary", "hardware=vera-rubin,v100", "--ratios").stderr
    # a metric no system has (the scenario gives no score) is empty anyway: not named
    r = run_cli(
        "sweep",
        "--vary",
        "hardware=vera-rubin,blackwell",
        "--ratios",
        "--metrics",
        "intelligence_per_dollar.score",
    )
    assert r.code == 0 and "--ratios" not in r.stderr


def test_the_draws_memory_note_is_said_once_for_the_points_it_holds_at():
    # a review: a serving axis repeated the same pre-training line at each of its values, and eight
    # of them hid the others; the plan is the same at every serving input size (its activations
    # pinned in HBM: test_draws_whose_memory_the_sampled_plan_no_longer_fits_are_counted)
    r = run_cli(
        "sweep", "--vary", "hardware=vera-rubin", "--vary",
        "workload.serving.input_tokens_per_request=2000,3000", "--samples", "100", "-f", "csv",
        "--set", "workload.pretraining.plan=tp=4,pp=2,recompute=none",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if "draws (up to" in line]
    assert len(lines) == 1 and lines[0].startswith("ipd: warning: vera-rubin-nvl72 at every point: ")
    # no metric asked for reads the plan: no line
    r = run_cli(
        "sweep",
        "--vary",
        "hardware=vera-rubin",
        "--samples",
        "100",
        "--metrics",
        "serving.tokens_per_s_per_gpu",
    )
    assert r.code == 0 and "draws (up to" not in r.stderr


def test_samples_cover_serving_cost_but_not_its_physics():
    r = run_cli("sweep", "--vary", "hardware=blackwell", "--samples", "300", "-f", "json")
    assert r.code == 0, r.stderr
    (row,) = r.json()
    # tokens/s per GPU is the chosen deployment's at the catalog's values; its $ per token follows the
    # price range
    assert row["serving.tokens_per_s_per_gpu.p10"] == row["serving.tokens_per_s_per_gpu.p90"]
    assert row["serving.usd_per_million_output_tokens.p10"] < row["serving.usd_per_million_output_tokens.p90"]


# --- output ----------------------------------------------------------------------------------------


def test_jsonl_lines_are_json():
    r = run_cli(
        "sweep", "--vary", "hardware=hopper", "--vary", "economics.pue=1.1:1.5:0.1",
        "--workload", "pretrain-10t-moe", "-f", "jsonl",
    )  # fmt: skip
    lines = r.stdout.splitlines()
    assert len(lines) == 5
    assert json.loads(lines[0])["economics.pue"] == pytest.approx(1.1)


def _price_axis_sweep(workload, out, metrics):
    """Hopper at $2, $2.5 and $3 a GPU-hour, written to ``out``."""
    return run_cli(
        "sweep", "--vary", "hardware=hopper", "--vary", "price_usd_per_gpu_hour=2:3:0.5",
        "--workload", workload, "--metrics", metrics, "-o", str(out),
    )  # fmt: skip


def test_xlsx_sweep_has_a_frozen_header_number_formats_and_its_inputs(tmp_path, small):
    openpyxl = pytest.importorskip("openpyxl")
    out = tmp_path / "s.xlsx"
    r = _price_axis_sweep(small, out, "pretraining.cost_usd,pretraining.plan")
    assert r.code == 0, r.stderr
    wb = openpyxl.load_workbook(out)
    assert wb.sheetnames == ["results", "assumptions", "sources"]
    ws = wb["results"]
    assert ws.freeze_panes == "B2" and ws["A1"].font.b
    header = [c.value for c in ws[1]]
    assert header == ["hardware", "price_usd_per_gpu_hour", "pretraining.cost_usd", "pretraining.plan"]
    assert [c.value for c in ws["B"][1:]] == [2, 2.5, 3] and ws.max_row == 4
    assert ws["C2"].number_format == "#,##0" and ws["B3"].number_format == "#,##0.00"
    paths = [c.value for c in wb["assumptions"]["H"][1:]]
    assert "accelerators.h100-sxm.hbm_tb_per_s" in paths
    assert out.stat().st_mode & 0o777 != 0o600
    r = run_cli("sweep", "--vary", "hardware=hopper", "--workload", small, "-f", "xlsx")
    assert r.code == 2 and "give -o FILE.xlsx" in r.stderr


def _inputs_sheet(path) -> dict[str, dict]:
    """The xlsx inputs sheet's rows by (system, path)."""
    openpyxl = pytest.importorskip("openpyxl")
    wb = openpyxl.load_workbook(path)
    assert wb.sheetnames == ["results", "assumptions", "sources"]
    rows = list(wb["assumptions"].iter_rows(values_only=True))
    return {(r[0], r[7]): dict(zip(rows[0], r, strict=True)) for r in rows[1:]}


def test_xlsx_inputs_an_axis_varies_say_so_not_the_catalogs_value(tmp_path, small):
    # a review of the secondary outputs: a sweep's inputs sheet listed a varied PUE at the
    # catalog's 1.3 citing its source while the rows ran at 1.1 and 1.5, a price axis the catalog's
    # price, and an HBM axis its first value as a `--set` (the first grid point's inputs)
    pytest.importorskip("openpyxl")
    out = tmp_path / "s.xlsx"
    hbm = "accelerators.h100-sxm.hbm_gib"
    r = run_cli(
        "sweep", "--vary", "hardware=hopper", "--vary", f"{hbm}=100,120", "--vary", "economics.pue=1.1,1.5",
        "--workload", small, "--metrics", "pretraining.cost_usd", "-o", str(out),
    )  # fmt: skip
    assert r.code == 0, r.stderr
    rows = _inputs_sheet(out)
    pue = rows["h100-sxm", "economics.pue"]
    assert pue["value"] == "varied: 1.1, 1.5 (the results sheet's economics.pue column)"
    assert (pue["source"], pue["origin"]) == (None, "--vary")
    assert pue["note"] == "each row reads its own value (the catalog's: 1.3)"
    assert rows["h100-sxm", hbm]["value"] == f"varied: 100, 120 (the results sheet's {hbm} column)"
    assert rows["h100-sxm", hbm]["note"] == "each row reads its own value (the catalog's: 80)"
    assert not any(row["source"] == "cli-set" for row in rows.values())
    # an input no axis varies keeps its catalog value and source
    price = rows["h100-sxm", "systems.h100-sxm.prices.reserved"]
    assert (price["value"], price["source"]) == (2.35, "P9")
    # a price axis replaces each system's rental price
    out = tmp_path / "p.xlsx"
    r = _price_axis_sweep(small, out, "pretraining.cost_usd")
    assert r.code == 0, r.stderr
    price = _inputs_sheet(out)["h100-sxm", "systems.h100-sxm.prices.reserved"]
    assert price["value"] == "varied: 2, 2.5, 3 (the results sheet's price_usd_per_gpu_hour column)"
    assert price["note"] == "each row reads its own value (the catalog's: 2.35)" and price["source"] is None


def test_a_long_axis_is_shown_by_its_ends_and_count():
    from ipd_cli.render.xlsx import axis_values

    assert axis_values(sw.parse_spec("economics.pue", "1.1:1.5:0.1")) == "1.1, 1.2, 1.3, 1.4, 1.5"
    assert axis_values(sw.parse_spec("price_usd_per_gpu_hour", "4:12:0.5")) == "4, 4.5, 5, ..., 12: 17 values"
    assert axis_values([3.0, 1.0, 2.0, 8.0, 5.0, 6.0, 7.0]) == "3, 1, 2, ..., 7: 7 values"


def test_xlsx_inputs_sheets_are_kept_where_the_first_point_or_the_catalogs_cannot_run(tmp_path, small):
    # a review: where the first grid point could not run (1 GiB: the 8B's state needs 192 GPUs,
    # not 64) the workbook had no inputs or sources sheet; they list the run at the catalog's values
    pytest.importorskip("openpyxl")
    hbm = "accelerators.h100-sxm.hbm_gib"
    out = tmp_path / "s.xlsx"
    r = run_cli(
        "sweep", "--vary", "hardware=hopper", "--vary", f"{hbm}=1,80", "--workload", small,
        "--metrics", "pretraining.cost_usd", "-o", str(out),
    )  # fmt: skip
    assert r.code == 0, r.stderr
    rows = _inputs_sheet(out)
    assert rows["h100-sxm", hbm]["value"] == f"varied: 1, 80 (the results sheet's {hbm} column)"
    assert rows["h100-sxm", "economics.pue"]["value"] == 1.3
    # where the catalog's values cannot run (the 405B on 64 H100s at 80 GiB needs 96), the first
    # point that ran (160 GiB) is listed: the axis's row has no value of its own to give
    work = write(tmp_path / "w.yaml", "model: llama-3.1-405b\ntokens: 1.0e12\ngpus: 64\nprecision: fp8\n")
    r = run_cli(
        "sweep", "--workload", str(work), "--vary", "hardware=h100", "--vary", f"{hbm}=80,160",
        "--metrics", "pretraining.wall_days", "-o", str(out), "--force",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    rows = _inputs_sheet(out)
    assert rows["h100-sxm", hbm]["value"] == f"varied: 80, 160 (the results sheet's {hbm} column)"
    assert rows["h100-sxm", hbm]["note"] == "each row reads its own value"


def test_a_small_cost_in_a_column_of_large_ones_keeps_its_digits_in_xlsx(tmp_path):
    # the column's format came from the first system's rows (H100, $0.229k-$ tasks -> "#,##0"), so
    # Vera Rubin's $0.229 per task showed as 0 (a user review)
    openpyxl = pytest.importorskip("openpyxl")
    from ipd_cli.render.xlsx import cell_format

    assert cell_format(0.2295, "#,##0") == "0.0000" and cell_format(9.997, "#,##0") == "#,##0.00"
    assert cell_format(150.5, "#,##0") == "#,##0" and cell_format(3.0, "#,##0") == "#,##0"
    assert cell_format(0.004, "#,##0.00") == "0.0000" and cell_format(-0.2, "#,##0") == "0.0000"
    assert cell_format(5.5, "0.0000") == "0.0000"  # never fewer digits than its column's
    # below 0.001 four decimals hide it (8e-06 read 0.0000): scientific, 8.00E-06
    assert cell_format(8e-06, "0.0000") == "0.00E+00" and cell_format(-2.5e-4, "#,##0") == "0.00E+00"
    out = tmp_path / "s.xlsx"
    metric = "intelligence_per_dollar.usd_per_solved_task"
    r = run_cli("sweep", "--vary", "hardware=h100,vera-rubin", "--vary", "price_usd_per_gpu_hour=8.5",
                "--metrics", metric, "-o", str(out))  # fmt: skip
    assert r.code == 0, r.stderr
    ws = openpyxl.load_workbook(out)["results"]
    rows = {row[0].value: row[2] for row in ws.iter_rows(min_row=2)}
    cell = rows["vera-rubin-nvl72"]
    assert cell.value < 1 and cell.number_format == "0.0000"


def test_bad_vary_is_a_usage_error(small):
    for args, msg in [
        (["--vary", "hardware=vera-rubin", "--vary", "economics.pu=1:2:0.5"], "did you mean 'economics.pue'"),
        (["--vary", "hardware=vera-rubin", "--vary", "economics.pue=2:1:0.5"], "START <= STOP"),
        (["--vary", "economics.pue=1,2"], "give the systems to sweep"),
        (["--vary", "hardware=nope"], "unknown hardware 'nope'"),
        (["--vary", "hardware=hopper", "--metrics", "pretraining.cots_usd"], "did you mean"),
        (["--vary", "hardware=hopper", "--vary", "workload.tokens=1e12"], "use workload.pretraining.tokens"),
    ]:
        r = run_cli("sweep", *args, "-f", "csv")
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


def test_varying_a_catalog_path_equals_set(catalog):
    rows = _csv(
        "--vary", "hardware=vera-rubin", "--vary", "accelerators.rubin.fp4_dense_tflops=20000,35000",
        "--workload", "pretrain-10t-moe",
    )  # fmt: skip
    for row in rows:
        v = float(row["accelerators.rubin.fp4_dense_tflops"])
        single = compare(
            catalog.with_overrides([f"accelerators.rubin.fp4_dense_tflops={v}"]),
            ["vera-rubin"],
            "pretrain-10t-moe",
        )
        assert int(row["pretraining.gpus"]) == single.systems[0].pretraining.gpus
    assert int(rows[0]["pretraining.gpus"]) > int(rows[1]["pretraining.gpus"])


def test_vary_paths_with_dotted_model_names():
    # "llama-3.1-8b" holds dots: the path must still resolve to that model, not to "llama-3"
    r = run_cli(
        "sweep", "--vary", "hardware=hopper", "--vary", "models.llama-3.1-8b.active_params=8e9,9e9",
        "--workload", "pretrain-10t-moe", "-f", "csv",
    )  # fmt: skip
    assert r.code == 2 and "--vary models.llama-3.1-8b.active_params: not an input" in r.stderr


def test_a_spec_axis_is_an_input_where_the_workload_does_not_fit_at_the_catalogs_value(tmp_path):
    # a fresh-eyes review: "how much HBM makes it fit?" was refused as "not an input of this
    # estimate", because the run at the catalog's 80 GiB, infeasible, read no inputs. The 405B's
    # training state needs 96 H100s at 80 GiB (the error says so), so 64 do not hold it; at 160 GiB
    # the row is the single estimate at that value
    work = write(tmp_path / "w.yaml", "model: llama-3.1-405b\ntokens: 1.0e12\ngpus: 64\nprecision: fp8\n")
    hbm = "accelerators.h100-sxm.hbm_gib"
    r = run_cli(
        "sweep", "--workload", str(work), "--vary", "hardware=h100", "--vary", f"{hbm}=80,160",
        "--metrics", "pretraining.wall_days", "-f", "csv",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [row[hbm] for row in rows] == ["80", "160"]
    assert rows[0]["pretraining.wall_days"] == ""  # cannot run: empty, with a warning
    assert "cannot run" in r.stderr and "needs at least 96 GPUs" in r.stderr
    single = run_cli("compare", "h100", "--workload", str(work), "--set", f"{hbm}=160", "-f", "json")
    assert single.code == 0, single.stderr
    days = single.json()["systems"][0]["pretraining"]["wall_days"]
    assert float(rows[1]["pretraining.wall_days"]) == pytest.approx(days, rel=1e-12)
    # another system's path, or another model's, is still refused where no system reads it, and an
    # owning cost under rental prices (a code review)
    for axis in ("accelerators.b200.hbm_gib=180,200", "models.llama-3.1-8b.layers=30,32"):
        other = run_cli(
            "sweep", "--workload", str(work), "--vary", "hardware=h100", "--vary", axis, "-f", "csv"
        )
        assert other.code == 2 and "not an input of this estimate" in other.stderr, axis
        assert "h100-sxm cannot run at the catalog's values: its own paths may be varied" in other.stderr
    owning = run_cli(
        "sweep", "--workload", str(work), "--vary", "hardware=h100",
        "--vary", "economics.utilisation=0.5,0.6",
    )  # fmt: skip
    assert owning.code == 2 and "an owning-cost input, not read under rental prices" in owning.stderr
    # taken, then read by no point: said (H100's TDP prices nothing and H100 never runs)
    tdp = run_cli(
        "sweep", "--workload", str(work), "--vary", "hardware=h100,b200",
        "--vary", "accelerators.h100-sxm.tdp_w=700,800", "--metrics", "pretraining.wall_days", "-f", "csv",
    )  # fmt: skip
    assert (
        tdp.code == 0
        and (
            "--vary accelerators.h100-sxm.tdp_w: no point of the sweep read it (taken as an input of a "
            "system that cannot run at the catalog's values), so the rows do not move with it"
        )
        in tdp.stderr
    )


def test_scenario_serving_cost_is_linear_in_price():
    r = run_cli(
        "sweep", "--vary", "hardware=vera-rubin", "--vary", "price_usd_per_gpu_hour=2,4", "-f", "json"
    )
    assert r.code == 0, r.stderr
    a, b = r.json()
    # serving physics does not depend on the price; $/M output tokens = price / (tok/s/GPU x 3600) x 1e6
    assert a["serving.tokens_per_s_per_gpu"] == b["serving.tokens_per_s_per_gpu"]
    expected = 2 / (a["serving.tokens_per_s_per_gpu"] * 3600) * 1e6
    assert a["serving.usd_per_million_output_tokens"] == pytest.approx(expected, rel=1e-12)
    assert b["serving.usd_per_million_output_tokens"] == pytest.approx(2 * expected, rel=1e-12)


def test_physics_points_are_catalog_copies_in_memory(monkeypatch, small):
    # one catalog copy per physics point (Catalog.with_overrides), never a YAML re-parse
    from ipd_cli.catalog import layers, loader, yamlio

    cat = load()
    parsed, loads = [], []
    real = yamlio.read_yaml
    for module in (yamlio, layers):
        monkeypatch.setattr(module, "read_yaml", lambda *a, **k: parsed.append(str(a[0])) or real(*a, **k))
    monkeypatch.setattr(loader, "load_catalog", lambda *a, **k: loads.append(a) or cat)
    axes = ["hardware=hopper", "accelerators.h100-sxm.hbm_tb_per_s=3,3.5", "economics.pue=1.1,1.2"]
    chunks, _ = ipd_cli.sweep(cat, axes, small)
    assert len(_rows(chunks)) == 4 and loads == []
    assert parsed == [small]  # the workload file, read once


def test_a_rental_price_axis_under_tco_is_a_usage_error():
    # it was silently swept as rental prices (the rows equal the rental sweep's)
    r = run_cli(
        "sweep", "--vary", "hardware=vera-rubin", "--vary", "price_usd_per_gpu_hour=4,8", "--pricing", "tco"
    )
    assert r.code == 2 and r.stdout == "" and "--vary price_usd_per_gpu_hour is a rental price" in r.stderr


def test_a_seed_without_samples_is_warned():
    # a scripting review: `--seed 5` without `--samples` changed nothing, without a word
    r = run_cli(
        "sweep",
        "--vary",
        "hardware=vera-rubin",
        "--vary",
        "price_usd_per_gpu_hour=4,5",
        "--seed",
        "5",
        "-f",
        "csv",
    )
    assert r.code == 0 and "--seed without --samples: nothing is drawn" in r.stderr
    quiet = run_cli(
        "sweep", "--vary", "hardware=vera-rubin", "--vary", "price_usd_per_gpu_hour=4,5", "-f", "csv"
    )
    assert "--seed" not in quiet.stderr and quiet.stdout == r.stdout


def test_a_budget_axis_on_a_scenario_that_runs_refreshes_spends_each_budget():
    # frontier-agentic runs 12 refreshes a year; a varied yearly budget replaces them as a --set
    # does (a code review: the scenario check refused every value once budget and refreshes were
    # exclusive in a file)
    metric = "intelligence_per_dollar.cost_breakdown_usd.post_training"
    budgets = "workload.post_training.budget_usd_per_year=1e6,2e6"
    r = run_cli("sweep", "--vary", "hardware=blackwell", "--vary", budgets, "--metrics", metric, "-f", "csv")
    assert r.code == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    # (to the last bit but one: the budget buys budget / $ per step steps at $ per step each)
    assert [float(row[metric]) for row in rows] == pytest.approx([1e6, 2e6], rel=1e-15)


def test_varying_both_rl_schedules_is_refused_as_compare_refuses_both():
    # a code review: the budget won and the refreshes axis was dropped without a word
    axes = ["hardware=vera-rubin", "workload.post_training.refreshes_per_year=6,12",
            "workload.post_training.budget_usd_per_year=1e6"]  # fmt: skip
    r = run_cli("sweep", *(a for axis in axes for a in ("--vary", axis)), "--workload", "open-model-agent")
    assert r.code == 2 and r.stdout == ""
    assert "the budget sets the refreshes a year (what it buys); vary one of them" in r.stderr


def test_the_search_counter_ends_at_the_searches_it_ran(catalog):
    # an output review: a price axis re-prices without searching again, so the counter's first
    # bound (4: each system at the catalog's values and at one physics point) was never reached
    # and a terminal's line stayed at "searched 2 of 4" with no newline
    calls = []
    ipd_cli.sweep(catalog, ["hardware=vera-rubin,blackwell", "price_usd_per_gpu_hour=4,8"],
                  progress=lambda done, total: calls.append((done, total)))  # fmt: skip
    assert calls[-1] == (2, 2)


def test_a_sweep_varying_the_site_says_how_to_read_each_rows_site():
    # an energy review: `--vary workload.site_mw=10,38.8` (Rubin's 9,360-GPU deployment drew
    # 130 racks x 230 kW x 1.3 = 38.87 MW) warned about none of its rows, and with a 1000 MW row
    # about the catalog's 100 MW site, which no row had (1,000 MW: 3,344 racks of 299 kW); a price
    # axis keeps the estimate's own line. Its 8,712 GPUs drew 121 racks x 299 kW = 36.18 MW (9,024
    # GPUs, 125.3 racks, since the NVFP4 checkpoint keeps attention inputs in BF16; 9,048, 125.7
    # racks, since attention TP holds MLA's down-projections whole; 9,180, 127.5 racks, since it holds
    # the routers whole too; 9,324, 129.5 racks, since EAGLE-3 drafts take their published shapes and
    # run over the prompt; 11,556, 160.5 racks, since an agent task's calls carry its context;
    # 11,088, 154 racks, since TensorRT-LLM dispatches an NVFP4 model's experts at NVFP4; 11,484,
    # 159.5 racks, since a prompt up-projects its cached MLA latents; 11,556, 160.5 racks, since a
    # draft pass pays the kernels around its layer; 11,412, 158.5 racks, since a disaggregated decode
    # pool pays no attention-DP imbalance; 10,152, 141 racks, since a TensorRT-LLM prefill instance
    # takes its own MoE share): 35.5 MW holds 118 racks (8,496 GPUs)
    r = run_cli("sweep", "--vary", "hardware=vera-rubin", "--vary", "workload.site_mw=10,35.5,1000",
                "--metrics", "intelligence_per_dollar.site_gpus", "-f", "csv")  # fmt: skip
    assert r.code == 0, r.stderr
    assert [row.split(",")[2] for row in r.stdout.split()[1:]] == ["2376", "8496", "240768"]
    assert (
        "warning: vera-rubin-nvl72: the scenario's serving deployment takes 10,152 GPUs: a row " in r.stderr
    )
    assert "does not fit the site's" not in r.stderr
    r = run_cli("sweep", "--vary", "hardware=vera-rubin", "--vary", "price_usd_per_gpu_hour=2,3",
                "--set", "workload.site_mw=10", "--metrics", "intelligence_per_dollar.site_gpus")  # fmt: skip
    assert r.code == 0 and "does not fit the site's 10 MW (2,376 GPUs" in r.stderr


def test_a_traffic_axis_judges_each_rows_deployment_against_its_site():
    # a new user's review: `--vary workload.serving.tasks_per_day=1e5` warned that the default 1e7
    # tasks' 51,696 GB200 GPUs did not fit the 100 MW site, which the row's 648 did (a 1e8 row's
    # 516,384 GPUs, 522,720 since a prompt up-projects its cached MLA latents, got no line of its
    # own): the rows re-price the traffic, so the line speaks of each row's own deployment (the GPUs
    # are compare's at each traffic, test_sweep's repricing tests). 504 and 443,808 since GB200's
    # TensorRT-LLM floor is its own 2026 sweep's (73.8 us a layer, not B200's 2025 100); 432,000
    # since the Blackwell systems' decode pools share one 2026 floor (68.3); 442,368 since a draft
    # pass pays the kernels around its layer (serving.draft_pass_overhead_layers); 428,184 since a
    # disaggregated decode pool pays no attention-DP imbalance (2026-12-06); 432 and 390,744 since a
    # TensorRT-LLM prefill instance takes its own MoE share; 390,528 since the draft pass's kernels
    # refit 3.05 -> 2.77 floors (NVFP4 DeepSeek-R1's MTP layer read at BF16, 2026-12-06)
    axes = ("--vary", "hardware=blackwell", "--vary", "workload.serving.tasks_per_day=1e5,1e8")
    r = run_cli("sweep", *axes, "--metrics", "serving.gpus_for_traffic,intelligence_per_dollar.site_gpus",
                "-f", "csv")  # fmt: skip
    assert r.code == 0, r.stderr
    rows = [row.split(",") for row in r.stdout.split()[1:]]
    assert [(int(a), int(b)) for *_, a, b in rows] == [(432, 44280), (390528, 44280)]
    assert "(52,344 GPUs" not in r.stderr
    assert "a row whose serving.gpus_for_traffic is above its intelligence_per_dollar.site_gpus" in r.stderr


def test_a_sweeps_inputs_cite_the_workloads_field_sources_but_an_axis():
    # a diff review: compare and explain cited N1 on the 10T run's tokens, a sweep's inputs (the
    # xlsx sheet) did not; a field an axis varies is the axis's value, not the file's source's
    from ipd_cli import api

    run, _ = api.sweep(
        load(), ["hardware=vera-rubin", "workload.deadline_days=30,60"], workload="pretrain-10t-moe",
        metrics="pretraining.gpus",
    )  # fmt: skip
    first, *_ = run.inputs  # the run at the catalog's values (the sheet marks the axis's row)
    assert all(not r.assumptions for _, r in run.points)
    cites = {a.path: a.source for a in first.assumptions if (a.path or "").startswith("workload.")}
    assert cites == {"workload.tokens": "N1", "workload.deadline_days": None}


def test_an_axis_one_system_does_not_read_is_named_for_that_system():
    # a scripting review: GB200 reads its own training share (by accelerator), so an
    # `efficiency.training_share` axis gave it the same 122,904 GPUs on every row, without a word;
    # Rubin, which reads the general share, moves
    args = ("sweep", "--vary", "hardware=vera-rubin,blackwell", "--vary", "efficiency.training_share=0.6,0.7")
    r = run_cli(*args, "--workload", "pretrain-10t-moe", "--metrics", "pretraining.gpus", "-f", "csv")
    assert r.code == 0, r.stderr
    gpus = {}
    for row in r.stdout.split()[1:]:
        hw, _, n = row.split(",")
        gpus.setdefault(hw, set()).add(int(n))
    assert len(gpus["gb200-nvl72"]) == 1 and len(gpus["vera-rubin-nvl72"]) == 2
    assert (
        "ipd: warning: gb200-nvl72: does not read --vary efficiency.training_share (another value stands in "
        "for it: its assumptions say which), so its rows do not move with it\n"
    ) in r.stderr
    assert "vera-rubin-nvl72: does not read" not in r.stderr
    # another system's own path is no such case: Rubin's power is GB200's to ignore
    # nor is another family's serving profile that this system's profile does not borrow from (a
    # code review: H100 was said not to read an axis of Blackwell's TensorRT-LLM profile)
    from ipd_cli.engine.sweep import _others_path

    profile = "serving.stacks.trtllm.profiles.blackwell.decode_hbm_efficiency"
    cat = load()
    assert _others_path(cat, "h100-sxm", profile) and not _others_path(cat, "gb200-nvl72", profile)
    assert not _others_path(cat, "b200", profile) and not _others_path(cat, "vera-rubin", profile)
    assert _others_path(cat, "b200", "serving.stacks.trtllm.profiles.hopper.decode_hbm_efficiency")
    power = "systems.vera-rubin-nvl72.power_kw=190,230"
    r = run_cli(
        "sweep", "--vary", "hardware=vera-rubin,blackwell", "--vary", power,
        "--workload", "pretrain-10t-moe", "--metrics", "pretraining.energy_mwh", "-f", "csv",
    )  # fmt: skip
    assert r.code == 0 and "does not read" not in r.stderr, r.stderr


def test_a_sweep_of_the_site_inputs_warns_only_where_its_smallest_site_misses_the_deployment():
    # a scripting review: every frontier sweep of the PUE warned that "a row whose site_gpus is below"
    # the deployment misses its site, where no row did. GB200's serving GPUs (43,272) against the
    # 100 MW site: 162.5 kW racks at PUE 1.3 hold 615 racks (44,280 GPUs, every row fits); at PUE
    # 1.5, 100,000 / (125 x 1.5) = 533 racks, 38,376 GPUs: that row does not; Rubin's 11,484 fit all
    metric = ("--metrics", "intelligence_per_dollar.solved_tasks_per_kusd", "-f", "csv")
    line = "the scenario's serving deployment takes"
    quiet = run_cli(
        "sweep", "--vary", "hardware=vera-rubin,blackwell", "--vary", "economics.pue=1.1,1.3", *metric
    )
    assert quiet.code == 0 and line not in quiet.stderr, quiet.stderr
    need = next(
        s["serving"]["gpus_for_traffic"]
        for s in run_cli_once("compare", "vera-rubin", "blackwell", "-f", "json").json()["systems"]
        if s["hardware"] == "gb200-nvl72"
    )
    assert 533 * 72 < need <= 615 * 72  # between the two sites, by hand
    r = run_cli(
        "sweep", "--vary", "hardware=vera-rubin,blackwell", "--vary", "economics.pue=1.1,1.5", *metric
    )
    assert r.code == 0 and f"gb200-nvl72: {line} {need:,} GPUs" in r.stderr
    assert f"vera-rubin-nvl72: {line}" not in r.stderr


def test_a_sweep_names_the_set_items_its_rows_ran_with():
    # an output review: compare's CSV rows carry an `overrides` column with the --set items, a
    # sweep's none, so two sweeps with other --set values could not be told apart
    sets = ("--set", "economics.pue=1.5", "--set", "economics.electricity_usd_per_kwh=0.1")
    args = ("sweep", "--vary", "hardware=vera-rubin,blackwell", *sets)
    rows = list(csv.DictReader(io.StringIO(run_cli(*args, "-f", "csv").stdout)))
    compare = list(csv.DictReader(io.StringIO(run_cli("compare", "gb200", *sets, "-f", "csv").stdout)))
    assert len(rows) == 2 and {r["overrides"] for r in rows} == {compare[0]["overrides"]}
    assert compare[0]["overrides"] == "economics.pue=1.5;economics.electricity_usd_per_kwh=0.1"
    assert run_cli(*args, "-f", "json").json()[0]["overrides"] == compare[0]["overrides"]
    plain = run_cli("sweep", "--vary", "hardware=vera-rubin", "-f", "csv").stdout
    assert "overrides" not in plain.splitlines()[0]  # none given: no column


def test_a_sweep_table_prints_whole_numbers_whole():
    # an output review: a sweep's table printed "72.00" GPUs per system and "TP 1.00", where every
    # other table prints 72 and 1 (the sweep's CSV and JSON print them whole)
    metrics = "pretraining.gpus_per_system,pretraining.parallelism.tp,pretraining.wall_days"
    args = ("sweep", "--vary", "hardware=vera-rubin,blackwell", "--metrics", metrics)
    rows = run_cli(*args, "-f", "json").json()
    md = run_cli(*args, "-f", "markdown").stdout
    for row in rows:
        line = next(ln for ln in md.splitlines() if ln.startswith(f"| {row['hardware']} "))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1:3] == [str(row["pretraining.gpus_per_system"]), str(row["pretraining.parallelism.tp"])]
        assert cells[3] == f"{row['pretraining.wall_days']:.2f}"  # not whole: as before


@pytest.mark.parametrize("seed", ["0", "6"])
def test_a_sampled_sweeps_site_line_reads_its_own_draws(seed):
    # a sampled-sweep review: the site line sized the smallest site at the ranges' tops (PUE 1.58,
    # 132 kW a GB200 rack), so one draw whose site holds the 43,272-GPU deployment was warned of
    # (44,280 GPUs since a draft pass pays the kernels around its layer: seed 7's one draw, a
    # 44,064-GPU site, no longer holds it; seed 2's, 45,432, does; seed 4 since the deployment took
    # 39,168 GPUs, a TensorRT-LLM prefill instance at its own MoE share: seed 2's 200 draws all hold it;
    # seed 6 since 39,096, the draft pass's BF16 MTP layer: seed 4's 200 draws' P10 39,153.6 holds it)
    args = (
        "sweep",
        "--vary",
        "hardware=blackwell",
        "--metrics",
        "intelligence_per_dollar.site_gpus",
        "-f",
        "csv",
    )
    one = run_cli(*args, "--samples", "1", "--seed", seed)
    row = next(csv.DictReader(io.StringIO(one.stdout)))
    need = run_cli("compare", "blackwell", "-f", "json").json()["systems"][0]["serving"]["gpus_for_traffic"]
    assert float(row["intelligence_per_dollar.site_gpus.p10"]) >= need  # the one draw holds it
    assert "has a site it does not fit" not in one.stderr
    many = run_cli(*args, "--samples", "200", "--seed", seed)
    low = float(next(csv.DictReader(io.StringIO(many.stdout)))["intelligence_per_dollar.site_gpus.p10"])
    assert low < need and "has a site it does not fit" in many.stderr  # some draws miss it


def test_a_sampled_rl_run_draws_its_goodput_and_staleness_factor():
    # a code review: a draw held RL's goodput at 0.9 while pre-training's moved, and never drew phi;
    # both are drawn from their catalog ranges (0.85-0.95, 1.0-1.1), the run's cost with them; so is
    # the storage's write bandwidth where the run checkpoints (0.029-2.5 GB/s per GPU)
    sets = ["workload.model=llama-3.1-8b", "workload.gpus=64", "workload.mode=one-step-off",
            "workload.checkpoint_interval_steps=5"]  # fmt: skip
    checkpoint = "rl.run.checkpoint_write_s,rl.run.checkpoint_exposed_s,rl.run.periodic_s_per_step"
    chunks, _ = ipd_cli.sweep(
        load(sets=sets), ["hardware=hopper"], "rl-math-reasoning", samples=200, seed=0,
        metrics=f"rl.run.goodput,rl.run.staleness_steps_factor,rl.run.usd_per_year,rl.usd_per_step,{checkpoint}",
    )  # fmt: skip
    (row,) = _rows(chunks)
    assert 0.85 < row["rl.run.goodput.p10"] < 0.9 < row["rl.run.goodput.p90"] < 0.95
    assert 1.0 < row["rl.run.staleness_steps_factor.p10"] < row["rl.run.staleness_steps_factor.p90"] < 1.1
    # blocking, no evaluation: every draw exposes its whole write, a fifth of it a step
    assert row["rl.run.checkpoint_write_s.p10"] < row["rl.run.checkpoint_write_s.p90"]
    for p in ("p10", "p50", "p90"):
        write = row[f"rl.run.checkpoint_write_s.{p}"]
        assert row[f"rl.run.checkpoint_exposed_s.{p}"] == write
        assert row[f"rl.run.periodic_s_per_step.{p}"] == pytest.approx(write / 5, rel=1e-12)
    # the steady step is not drawn here (its throughput is the catalog's): the year moves by the run
    # terms alone, 4,000 steps x usd_per_step x phi / goodput at each draw
    assert row["rl.usd_per_step.p10"] == row["rl.usd_per_step.p90"]
    assert (
        row["rl.run.usd_per_year.p10"]
        < 4000 * row["rl.usd_per_step.p50"] / 0.9
        < row["rl.run.usd_per_year.p90"]
    )


def test_the_warnings_a_sweep_leaves_out_say_whose_and_how_to_read_them():
    # a fresh-eyes review: "ipd: warning: ... and 4 more" named neither the system nor a way to read
    # them; A100 on the 10T model warns of its pre-training, RL pool and serving, H100 of its own
    r = run_cli("sweep", "--vary", "hardware=h100,a100", "-f", "csv")
    assert r.code == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if line.startswith("ipd: warning: ")]
    assert len(warned) == 9, r.stderr  # MAX_SWEEP_WARNINGS, then the line for the rest
    assert warned[-1].startswith("ipd: warning: ... and "), warned[-1]
    assert warned[-1].endswith(
        " more (of a100-sxm; `ipd compare a100-sxm` with the sweep's --workload and a row's --set "
        "prints them)"
    ), warned[-1]
