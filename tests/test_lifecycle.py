"""Intelligence per dollar: metric arithmetic by hand and its invariants."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import yaml
from helpers import builtin_yaml, run_cli, run_cli_once, write

from ipd_cli import compare
from ipd_cli.engine import lifecycle as lc
from ipd_cli.render import views


def test_retry_arithmetic_by_hand():
    # p = 0.6, up to 3 attempts: solved 1 - 0.4^3 = 0.936; attempts (1 + 0.4 + 0.16) = 1.56 = 0.936 / 0.6
    assert lc.success_after_retries(0.6, 3) == pytest.approx(0.936)
    assert lc.expected_attempts(0.6, 3) == pytest.approx(1.56)
    assert lc.expected_attempts(1.0, 5) == 1.0
    # a tiny p: about m attempts, never more (1 - (1 - p)^m cancelled: 3e-16 gave 3.33 of at most
    # 3, and 0.99^5000 = 1.5e-22 gave 0); m - m (m - 1) p / 2 to first order
    for p in (3e-16, 0.99**3700, 0.99**5000):
        assert lc.expected_attempts(p, 3) == pytest.approx(3 - 3 * p, rel=1e-12)
        assert lc.success_after_retries(p, 3) == pytest.approx(3 * p, rel=1e-9)
    import numpy as np

    arr = lc.expected_attempts(np.array([0.6, 3e-16, 1.0]), 3)  # the sweep's arrays, the same way
    assert arr == pytest.approx([1.56, 3.0, 1.0])
    # r^k: five tool calls at 0.95 each = 0.77378
    assert lc.workflow_success(0.95, 5) == pytest.approx(0.7737809375)
    # amortisation: 1 year of a 2-year life shared by 4 deployments = 1/8
    assert lc.amortised_share(1, 2, 4) == 0.125


def test_learning_curve_shape():
    # r0 at zero samples, halfway at the midpoint, approaching the asymptote
    assert lc.learning_curve(0, 0.4, 0.65, 3e5, 1.0) == 0.4
    assert lc.learning_curve(3e5, 0.4, 0.65, 3e5, 1.0) == pytest.approx(0.525)
    assert lc.learning_curve(3e9, 0.4, 0.65, 3e5, 1.0) == pytest.approx(0.65, abs=1e-4)


@pytest.mark.parametrize("ratio", [1e-3, 0.1, 1.0, 10.0, 1e3])
def test_the_horizons_mean_score_is_the_curves_integral(ratio):
    # samples accrue evenly to x over the horizon: the tasks see the mean of the curve at x u, u in
    # [0, 1]; at exponent 1, by hand: r0 + (A - r0) (1 - c ln(1 + 1 / c)), c = x_mid / x
    from ipd_cli.engine.formulas import learning_curve_mean

    x, c = 3e5 * ratio, 1 / ratio
    exact = 0.4 + 0.25 * (1 - c * math.log(1 + 1 / c))
    assert learning_curve_mean(x, 0.4, 0.65, 3e5, 1.0) == pytest.approx(exact, rel=1e-9)
    assert learning_curve_mean(x, 0.4, 0.65, 3e5, 1.0) < lc.learning_curve(x, 0.4, 0.65, 3e5, 1.0)
    # arrays of the samples and of the curve's parameters, as a sweep gives them
    import numpy as np

    got = learning_curve_mean(np.array([x, x]), np.array([0.4, 0.3]), 0.65, 3e5, np.array([1.0, 1.0]))
    assert got == pytest.approx([exact, 0.3 + 0.35 * (1 - c * math.log(1 + 1 / c))], rel=1e-9)
    assert learning_curve_mean(0.0, 0.4, 0.65, 3e5, 1.0) == 0.4
    # another exponent takes the quadrature: at 2, by hand, r0 + (A - r0) (1 - c atan(1 / c))
    at_two = 0.4 + 0.25 * (1 - c * math.atan(1 / c))
    assert learning_curve_mean(x, 0.4, 0.65, 3e5, 2.0) == pytest.approx(at_two, rel=1e-9)
    mixed = learning_curve_mean(np.array([x, x]), 0.4, 0.65, 3e5, np.array([1.0, 2.0]))
    assert mixed == pytest.approx([exact, at_two], rel=1e-9)


def test_headline_is_cost_over_tasks_solved(catalog):
    r = compare(catalog, ["vera-rubin"]).systems[0]
    i = r.intelligence_per_dollar
    b = i.cost_breakdown_usd
    assert i.lifecycle_cost_usd == pytest.approx(b.pretraining + b.post_training + b.serving)
    # pre-training: 1 year of a 2-year amortisation, one deployment -> half of the run's cost
    assert b.pretraining == pytest.approx(r.pretraining.cost_usd / 2)
    # RL: 100 steps x 12 refreshes x $/step over the goodput (0.9, as pre-training; one-step-off's
    # phi is 1), each step lengthened by its share of an evaluation and a checkpoint every 10 steps
    run = r.rl.run
    assert (run.goodput, run.staleness_steps_factor) == (0.9, 1.0)
    assert (run.eval_interval_steps, run.checkpoint_interval_steps, run.checkpoint_async) == (10, 10, False)
    # the checkpoint by hand: (2 B weights + 12 B optimizer) x 1e13 parameters at the storage's
    # 0.244 GB/s for each of the run's 1,168 GPUs (the pool search's, within the workload's 2,048;
    # DGX SuperPOD's best tier, 250 GB/s per 1,024 GPUs), which the trainer's 1,024 writers could
    # exceed (2.5 GB/s each, 20 GB/s a node): 1.4e14 / 2.850e11 = 491.2 s, all of it exposed
    # (blocking; 280.2 s on all 2,048 GPUs)
    assert (r.rl.gpus, r.rl.trainer.gpus_used, r.rl.gpus_cap) == (1168, 1024, 2048)
    assert run.checkpoint_write_gb_per_s == pytest.approx(min(1168 * 0.244, 1024 * 2.5))
    assert run.checkpoint_write_s == pytest.approx(14 * 1e13 / (1168 * 0.244e9)) == run.checkpoint_exposed_s
    assert run.checkpoint_write_s == pytest.approx(491.24, abs=0.01)
    # the evaluation: 500 SWE-bench Verified tasks x 1 attempt, generated as one batch like a step's
    assert run.eval_trajectories == 500 and 0 < run.eval_s
    assert run.periodic_s_per_step == pytest.approx(run.eval_s / 10 + run.checkpoint_exposed_s / 10)
    periodic = 1 + run.periodic_s_per_step / r.rl.step_seconds
    assert b.post_training == pytest.approx(r.rl.usd_per_step * 1200 / 0.9 * periodic)
    # serving: the deployment for 1e7 tasks/day x attempts x 30 calls x 400 tokens, rented around
    # the clock: its GPUs x 8,760 h x $/GPU-h (busy GPU-hours priced at $/M output tokens before)
    per_s = 1e7 * i.expected_attempts * 30 * 400 / 86400
    s = r.serving
    assert s.traffic_requests_per_s * 400 == pytest.approx(per_s)
    assert s.gpus_for_traffic == math.ceil(s.instances_for_traffic * s.deployment_gpus)
    assert s.instances_for_traffic * s.deployment_gpus * s.tokens_per_s_per_gpu >= per_s
    assert b.serving == pytest.approx(s.gpus_for_traffic * 8760 * s.price_usd_per_gpu_hour)
    busy = per_s * 365 * 86400 * s.usd_per_million_output_tokens / 1e6  # what serving cost before
    assert busy <= b.serving <= busy * 1.02  # whole copies at 10M tasks a day: near the busy hours
    assert i.success_per_task == pytest.approx(1 - (1 - 0.59) ** 3)
    assert i.tasks_solved == pytest.approx(1e7 * 365 * i.success_per_task)
    assert i.usd_per_solved_task == pytest.approx(i.lifecycle_cost_usd / i.tasks_solved)
    assert i.solved_tasks_per_kusd == pytest.approx(1000 / i.usd_per_solved_task)


def test_owned_serving_spreads_its_capital_over_every_hour(catalog):
    # the scenario's serving GPUs are kept for it around the clock (their idle headroom is in
    # gpus_for_traffic x 8,760 h), so under tco their capital and opex spread over every hour,
    # not over the 85 % utilised share a busy hour of a shared cluster carries (charged twice)
    r = compare(catalog, ["blackwell"], pricing="tco").systems[0]
    # GB200 by hand: $3.75M / 72 = $52,083 per GPU x (crf(10 %, 5 y) 0.263797 + 6 % opex) / 8,760 h
    # + 1.7361 kW x 1.3 x $0.08 = 1.92515 + 0.18056 = 2.1057 $/GPU-h (per busy hour: 2.4455)
    crf = 0.1 / (1 - 1.1**-5)
    kept = 3.75e6 / 72 * (crf + 0.06) / 8760 + 125 / 72 * 1.3 * 0.08
    assert kept == pytest.approx(2.1057, abs=1e-4)
    assert r.serving.price_usd_per_gpu_hour == pytest.approx(kept, rel=1e-12)
    assert r.pretraining.price_usd_per_gpu_hour == pytest.approx(2.4455, abs=1e-4)  # a busy hour
    s, b = r.serving, r.intelligence_per_dollar.cost_breakdown_usd
    assert b.serving == pytest.approx(s.gpus_for_traffic * 8760 * kept, rel=1e-12)
    assert s.usd_per_million_output_tokens == pytest.approx(kept / (s.tokens_per_s_per_gpu * 3600) * 1e6)
    # serve at the scenario's traffic prices the traffic's GPUs the same way (a review: $8.61/M
    # from serve, $7.42/M from compare, for the same 27,792 GPUs)
    from ipd_cli.api import serve
    from ipd_cli.engine.lifecycle import carried_context_tokens

    sv = catalog.workload("frontier-agentic").serving
    alone = serve(
        catalog, "blackwell", "moe-10t", input_tokens=sv.input_tokens_per_request,
        output_tokens=sv.output_tokens_per_request, context_tokens=carried_context_tokens(sv),
        precision=sv.precision,
        tokens_per_user_s=sv.tokens_per_user_s, requests_per_s=s.traffic_requests_per_s, pricing="tco",
    ).serving  # fmt: skip
    assert alone.gpus_for_traffic == s.gpus_for_traffic
    assert alone.usd_per_million_output_tokens_at_traffic == pytest.approx(
        s.usd_per_million_output_tokens_at_traffic, rel=1e-9
    )
    per_s = s.traffic_requests_per_s * s.output_tokens
    assert s.usd_per_million_output_tokens_at_traffic == pytest.approx(
        kept * s.gpus_for_traffic / (per_s * 3600) * 1e6, rel=1e-12
    )
    # a rental price is per hour whatever the use: the serving and pre-training prices agree
    rented = compare(catalog, ["blackwell"]).systems[0]
    assert rented.serving.price_usd_per_gpu_hour == rented.pretraining.price_usd_per_gpu_hour == 4.05


def test_a_scenario_traffic_beyond_any_cluster_names_the_scenario_input():
    # a review: it blamed --tokens-per-day, a flag compare does not have; a sweep's rows were told
    # to --set the value their axis gives
    for args, fix in (
        (("compare", "blackwell", "--set", "workload.serving.tasks_per_day=1e12"), "give fewer tasks (--set "
         "workload.serving.tasks_per_day=...)"),
        (("sweep", "--vary", "hardware=blackwell", "--vary", "workload.serving.tasks_per_day=1e7,1e12"),
         "give the sweep's axes a range whose rows a cluster can serve (fewer tasks_per_day, "),
    ):  # fmt: skip
        r = run_cli(*args, "-f", "json")
        assert r.code == 2 and r.stdout == "", r.stderr
        assert "ipd: error: the scenario's serving traffic, " in r.stderr
        assert fix in r.stderr
        assert "--tokens-per-day" not in r.stderr


def test_doubling_every_price_doubles_cost_per_solved_task(catalog):
    base = compare(catalog, ["vera-rubin"]).systems[0].intelligence_per_dollar
    price = catalog.system("vera-rubin").prices[0]
    cat = catalog.with_overrides(
        [f"systems.vera-rubin.prices.{price.label}={2 * price.usd_per_gpu_hour.value}"]
    )
    doubled = compare(cat, ["vera-rubin"]).systems[0].intelligence_per_dollar
    assert doubled.usd_per_solved_task == pytest.approx(2 * base.usd_per_solved_task)
    assert doubled.tasks_solved == base.tasks_solved


@pytest.mark.parametrize("rate", [0.3, 0.5, 0.59, 0.8, 1.0])
def test_higher_success_never_lowers_solved_tasks_per_kusd(catalog, rate):
    path = "workload.task_success.success_rate.value"
    lower = compare(catalog.with_overrides([f"{path}={rate * 0.9}"]), ["vera-rubin"])
    higher = compare(catalog.with_overrides([f"{path}={rate}"]), ["vera-rubin"])
    lo = lower.systems[0].intelligence_per_dollar.solved_tasks_per_kusd
    hi = higher.systems[0].intelligence_per_dollar.solved_tasks_per_kusd
    assert hi >= lo


def test_identical_hardware_compares_at_ratio_one(catalog):
    r = compare(catalog, ["gb300-nvl72", "blackwell-ultra"], "open-model-agent")
    a, b = (s.intelligence_per_dollar for s in r.systems)
    assert a == b


def test_open_weights_pay_no_pretraining_and_rl_budget_buys_score(catalog):
    r = compare(catalog, ["vera-rubin", "blackwell"], "open-model-agent")
    for s in r.systems:
        i = s.intelligence_per_dollar
        assert i.cost_breakdown_usd.pretraining == 0 and s.pretraining is None
        assert i.cost_breakdown_usd.post_training == pytest.approx(2e6)  # the yearly budget, spent
        assert 0.40 < i.score < 0.65
        # the tasks of the year see the curve's mean as its samples accrue, not the score its last
        # day reaches (a procurement review): exponent 1, by hand, c = x_mid / samples
        c = 3e5 / i.rl_samples
        assert i.success_per_attempt == pytest.approx(0.4 + 0.25 * (1 - c * math.log(1 + 1 / c)), rel=1e-9)
        assert i.success_per_task == pytest.approx(1 - (1 - i.success_per_attempt) ** 3)
    rubin = r.systems[0].intelligence_per_dollar
    quoted = f"Rubin {rubin.success_per_attempt:.3f} and {rubin.score:.3f} at "
    quoted += f"{rubin.rl_samples / 1e6:.2f}M samples"
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert quoted in readme, quoted
    # the headline is tasks per dollar, not net value: less RL reads better (README's omissions)
    small = compare(catalog.with_overrides(["workload.post_training.budget_usd_per_year=1e5"]),
                    ["vera-rubin"], "open-model-agent").systems[0].intelligence_per_dollar  # fmt: skip
    quoted = f"open-model-agent's Rubin reads {small.solved_tasks_per_kusd:,.0f} solved tasks per $1k at a "
    quoted += f"$100K RL budget and {rubin.solved_tasks_per_kusd:,.0f} at its $2M"
    assert small.solved_tasks_per_kusd > rubin.solved_tasks_per_kusd and quoted in readme, quoted
    # the system with the cheaper RL sample reaches the higher score on the same budget
    cheaper = min(r.systems, key=lambda s: s.rl.usd_per_1k_samples)
    assert cheaper.intelligence_per_dollar.score == max(s.intelligence_per_dollar.score for s in r.systems)


def test_explain_reproduces_the_headline():
    r = run_cli_once("explain", "vera-rubin", "--format", "json")
    assert r.code == 0, r.stderr
    rows = {row["metric"]: row for row in r.json()["items"]}
    compared = run_cli_once("compare", "vera-rubin", "--format", "json").json()
    c = compared["systems"][0]["intelligence_per_dollar"]
    assert rows["usd_per_solved_task"]["value"] == pytest.approx(c["usd_per_solved_task"])
    assert "lifecycle_cost_usd / tasks_solved" in rows["usd_per_solved_task"]["formula"]
    assert any(m.startswith("input: ") for m in rows)
    # the stages' own numbers are derived where the headline uses them (an auditor's review: the
    # pre-training GPU-hours, 4.7x apart between the headline's systems, were a bare input): the
    # GPU-hours from GPUs and wall days, the wall days from the plan's step, the RL step's phases
    pre = run_cli("compare", "vera-rubin", "--format", "json").json()["systems"][0]
    hours = rows["pretraining.gpu_hours"]
    assert hours["value"] == pytest.approx(pre["pretraining"]["gpus"] * pre["pretraining"]["wall_days"] * 24)
    assert hours["field"] == "pretraining.gpu_hours" and "in 30 days" in rows["pretraining.gpus"]["formula"]
    for metric in ("pretraining.step_time_s", "pretraining.mfu", "pretraining.wall_days"):
        assert rows[metric]["value"] == pytest.approx(pre["pretraining"][metric.split(".")[1]])
    for metric in ("rl.phases.generation_s", "rl.step_seconds", "rl.gpu_hours_per_step", "rl.usd_per_step"):
        assert rows[metric]["field"] == metric
    # the run's evaluations and checkpoints, each row recomputed from the inputs beside it, and the
    # storage bandwidth's input with its source
    periodic = ("checkpoint_write_s", "checkpoint_exposed_s", "periodic_s_per_step", "usd_per_year")
    assert _recomputed([rows[f"rl.run.{m}"] for m in periodic]) == 4 and rows["rl.run.eval_s"]["value"] > 0
    assert rows["input: storage write bandwidth per GPU"]["source"] == "dgx-superpod-ra-h100"
    order = list(rows)
    assert (
        order.index("pretraining.gpu_hours")
        < order.index("pretraining.cost_usd")
        < order.index("pretraining_usd")
    )


def _recomputed(items: list[dict]) -> int:
    """How many of explain's rows recompute their value from the inputs beside them (each must)."""
    checked = 0
    for item in items:
        pairs = (p.split(" = ") for p in item["inputs"].split("; ") if " = " in p)
        env = {k: float(v) for k, v in pairs if not v.startswith("'")}
        expr = item["formula"].replace(" x ", " * ")
        names = set(re.findall(r"\b[a-z_][a-z0-9_]*\b", expr))
        if re.fullmatch(r"[\w\s.*/+(),-]+", expr) and names <= set(env):
            assert eval(expr, {}, env) == pytest.approx(item["value"], rel=1e-9), item["metric"]
            checked += 1
    return checked


def test_explain_sizes_the_disaggregated_pools_from_the_inputs_it_lists():
    # the headline's serving on Vera Rubin is one copy of disaggregated pools sized for the traffic:
    # explain's gpus_for_traffic step names every input of its formula and of the two stability
    # conditions beside it (output_tokens was used there but not listed)
    items = run_cli_once("explain", "vera-rubin", "-f", "json").json()["items"]
    step = next(i for i in items if i["metric"] == "serving.gpus_for_traffic")
    assert "stranded_gpus, with decode_instances x concurrency >" in step["formula"]
    x = {k: v for k, v in (p.split(" = ") for p in step["inputs"].split("; ")) if not v.startswith("'")}
    x = {k: float(v) for k, v in x.items()}
    gpus = x["decode_instances"] * x["instance_gpus"] + x["prefill_instances"] * x["prefill_instance_gpus"]
    assert step["value"] == gpus + x["stranded_gpus"]
    rps = x["traffic_requests_per_s"]
    assert x["decode_instances"] * x["concurrency"] > rps * x["output_tokens"] / x["tokens_per_s_per_user"]
    assert x["prefill_instances"] > rps * x["prefill_instance_s"]


def test_explain_gives_the_stages_that_ran_where_another_cannot(catalog):
    # a review of the secondary outputs: A100 cannot pre-train the 10T MoE in 30 days, and explain
    # gave it only "cannot be computed" rows while compare gives its RL and serving blocks
    from ipd_cli.api import explain_compared

    listing, result = explain_compared(catalog, ["vera-rubin", "a100"])  # an alias (a KeyError once)
    a100 = result.systems[1]
    assert a100.pretraining is None and a100.rl is not None and a100.serving is not None
    rows = {i["metric"]: i for i in listing.items if i["hardware"] == "a100-sxm"}
    rubin = {i["metric"] for i in listing.items if i["hardware"] == "vera-rubin-nvl72"}
    # each RL and serving line Rubin has, A100 has, at the value of its own block
    # but the prefill pool's wait at the traffic: A100 serves aggregated, with no prefill pool
    assert a100.serving.disaggregated is False and a100.serving.prefill_queue_s is None
    pool = {"serving.prefill_queue_s", "serving.prefill_utilisation"}
    # its sequence slots' wait and the TTFT at the traffic with it, it has (a slot queue alone)
    assert {"serving.slot_queue_s", "serving.ttft_at_traffic_s", "serving.ttft_target_s"} <= set(rows)
    for metric in (m for m in rubin - pool if m.startswith(("rl.", "serving."))):
        assert metric in rows, metric
        field = rows[metric]["field"]
        if field is not None:
            block, *keys = field.split(".")
            node = getattr(a100, block).model_dump()
            for k in keys:
                node = node[k]
            assert rows[metric]["value"] == pytest.approx(node, rel=1e-12), metric
    # and they hold by hand: $/M tokens = A100's on-demand $2.45 / (tok/s/GPU x 3600) x 1e6
    usd = rows["serving.usd_per_million_output_tokens"]
    assert usd["value"] == pytest.approx(2.45 / (a100.serving.tokens_per_s_per_gpu * 3600) * 1e6, rel=1e-12)
    assert rows["price_usd_per_gpu_hour"]["value"] == 2.45
    computed = [i for m, i in rows.items() if not m.startswith("input:") and i["value"] is not None]
    # usd_per_step, energy_kwh_per_step, rollouts_per_kwh, usd_per_million_output_tokens, tokens_per_s_per_mw
    assert _recomputed(computed) >= 5
    # no pre-training line, nor the lifecycle's shares and headline, which need every stage; the
    # rows that say which could not run stay
    assert not [m for m in rows if m.startswith("pretraining.")]
    for share in (
        "pretraining_usd",
        "post_training_usd",
        "serving_usd",
        "serving_mwh",
        "usd_per_solved_task",
    ):
        assert share in rubin and share not in rows, share
    assert rows["pretraining: cannot be computed (pretraining)"]["field"] == "infeasible.pretraining"
    assert "intelligence_per_dollar: cannot be computed (pretraining)" in rows


def test_explain_of_a_serving_point_without_traffic_gives_its_own_lines(catalog):
    # RL that cannot run where success follows its learning curve (8 training GPUs cannot hold Kimi
    # K2): no traffic, so serving is the point alone, without the traffic's lines
    from ipd_cli.catalog.workloads import resolve_workload, with_nested_workloads

    cat = catalog.with_overrides(["workload.post_training.gen_gpus=8", "workload.post_training.train_gpus=8"])
    _, w, _ = resolve_workload(cat, "open-model-agent")
    life = lc.estimate_lifecycle(with_nested_workloads(cat, w), "h800", w)
    assert set(life.system.infeasible) == {"rl", "intelligence_per_dollar"}
    steps = {st.metric: st for st in life.steps}
    assert not [m for m in steps if m.startswith("rl.")]
    assert "serving.traffic_output_tokens_per_s" not in steps and "serving.gpus_for_traffic" not in steps
    point = life.system.serving
    mw = steps["serving.tokens_per_s_per_mw"]
    assert mw.value == pytest.approx(point.tokens_per_s_per_gpu * 1000 / (point.kw_per_gpu * 1.3), rel=1e-12)
    usd = steps["serving.usd_per_million_output_tokens"]
    assert usd.value == pytest.approx(2.0 / (point.tokens_per_s_per_gpu * 3600) * 1e6, rel=1e-12)


def test_site_power_budget_by_hand():
    d = run_cli("compare", "vera-rubin", "--site-mw", "50", "-f", "json").json()
    s = d["systems"][0]
    i, sv = s["intelligence_per_dollar"], s["serving"]
    # whole racks: floor(50,000 kW / (72 x 3.1944 kW x PUE 1.3) = 299.0 kW) = 167 racks = 12,024
    # GPUs (the GPUs alone: 12,040, 16 of a 168th rack); tasks/day = GPUs x tok/s/GPU x 86,400 /
    # tokens x p
    gpus = int(50_000 // (sv["kw_per_gpu"] * 72 * 1.3)) * 72
    assert i["site_gpus"] == gpus == 12_024
    tokens_per_task = i["expected_attempts"] * 30 * 400
    assert i["site_tasks_solved_per_day"] == pytest.approx(
        gpus * sv["tokens_per_s_per_gpu"] * 86400 / tokens_per_task * i["success_per_task"]
    )


def test_each_block_is_its_own_function_with_a_typed_result(catalog):
    s = catalog.workloads["frontier-agentic"]
    # task success alone: measured 0.59, 3 attempts -> 1 - 0.41^3 = 0.931079; (1 + 0.41 + 0.1681) = 1.5781
    ok = lc.task_success(s, rl_samples=0.0, post_training_usd=0.0)
    assert ok.per_attempt == 0.59 and ok.score is None
    assert ok.per_task == pytest.approx(0.931079) and ok.attempts == pytest.approx(1.5781)
    # the pre-training share: 1 year of a 2-year amortisation, one deployment
    pre = lc.pretraining_share(catalog, "vera-rubin", s, "rental")
    assert pre.cost_usd == pytest.approx(pre.block.cost_usd / 2)
    # the block functions compose to what estimate_lifecycle reports
    post = lc.post_training(catalog, "vera-rubin", s, "rental")
    # serving: the deployment for the tasks' traffic (1e7 x 1.5781 x 30 x 400 output tokens a day)
    traffic = lc.traffic_per_day(s.serving, ok)
    assert traffic == pytest.approx(1e7 * 1.5781 * 30 * 400)
    point = lc.serve_point(catalog, "vera-rubin", s.model, s.serving, traffic=traffic)
    served = lc.serving_share(catalog, s, point, ok)
    assert served.cost_usd == pytest.approx(point.serving.gpus_for_traffic * 8760 * 8.5)
    ipd, _ = lc.headline(s, pre, post, ok, served)
    whole = lc.estimate_lifecycle(catalog, "vera-rubin", s).system.intelligence_per_dollar
    assert ipd.solved_tasks_per_kusd == pytest.approx(whole.solved_tasks_per_kusd)


def test_an_infeasible_stage_names_itself_and_maps_its_hint_to_the_scenario_path():
    why = lc.infeasible("serving", "m at bf16 needs 20 TB; --precision fp8 fits on 80 GPUs", nested=True)
    assert why.reason == "m at bf16 needs 20 TB"
    assert why.hint == "`sets` workload.serving.precision=fp8 fits on 80 GPUs"
    why = lc.infeasible(
        "post_training",
        "8 GPUs cannot be split; give at least 9 GPUs or use `mode` colocated",
        "rl-x",
        nested=True,
    )
    assert why.hint == "give at least 9 GPUs or use `sets` workload.post_training.mode=colocated"
    assert why.workload == "rl-x"
    # "...; got `gpus` 8" reports a value, it is no hint
    why = lc.infeasible("pretraining", "needs 956 GPUs to hold its state; got `gpus` 8")
    assert why.hint is None and why.reason.endswith("got `gpus` 8")


@pytest.mark.parametrize("workload", ["pretrain-10t-moe", "rl-swe-agent"])
def test_explain_of_a_workload_gives_its_numbers_from_their_inputs(catalog, workload):
    # a pretrain or RL workload explained only its inputs; now its numbers too, and each formula
    # written with names and x recomputes its value from the inputs listed beside it
    from ipd_cli.api import explain

    items = [
        i for i in explain(catalog, ["vera-rubin"], workload).items if not i["metric"].startswith("input")
    ]
    assert len(items) >= 3
    checked = 0
    for item in items:
        pairs = (p.split(" = ") for p in item["inputs"].split("; ") if " = " in p)
        env = {k: float(v) for k, v in pairs if not v.startswith("'")}  # a price basis is text
        expr = re.sub(r" \((pinned|in series[^)]*)\)$", "", item["formula"]).replace(" x ", " * ")
        names = set(re.findall(r"\b[a-z_][a-z0-9_]*\b", expr)) - {"max"}
        if re.fullmatch(r"[\w\s.*/+(),-]+", expr) and names <= set(env):
            assert eval(expr, {"max": max}, env) == pytest.approx(item["value"], rel=1e-9), item["metric"]
            checked += 1
    assert checked >= (4 if workload.startswith("pretrain") else 3)
    # the GPU-hour price the cost lines cite comes first, under tco with the owning cost's inputs (a
    # scripting review: no line of a workload derived its tco price): capex 3.75M / 72 x (CRF 0.2638
    # at 10 % over 5 years + opex 0.06) / (8,760 x 0.85) + 125 kW / 72 x PUE 1.3 x $0.08 = $2.4455
    cost = next(i for i in items if i["metric"].endswith(("cost_usd", "usd_per_step")))
    for pricing in ("rental", "tco"):
        rows = explain(catalog, ["blackwell"], workload, pricing=pricing).items
        price = rows[0]
        assert price["metric"] == "price_usd_per_gpu_hour", pricing
        if pricing == "tco":
            by_hand = 3.75e6 / 72 * (0.1 / (1 - 1.1**-5) + 0.06) / (8760 * 0.85) + 125 / 72 * 1.3 * 0.08
            assert (
                price["value"] == pytest.approx(by_hand, rel=1e-4) and "capex_usd_per_gpu" in price["formula"]
            )
    assert "price_usd_per_gpu_hour" in cost["inputs"]
    if workload.startswith("rl"):  # a step's samples, whole (511.99999999999994, a code review)
        rate = next(i for i in items if i["metric"] == "rl.samples_per_s")
        assert "samples = 512.0;" in rate["inputs"]  # 16 prompts x 32 rollouts
    if workload.startswith("pretrain"):  # the step is the sum of the terms it lists
        step = next(i for i in items if i["metric"] == "pretraining.step_time_s")
        env = dict(p.split(" = ") for p in step["inputs"].split("; "))
        terms = [float(v) for k, v in env.items() if k.startswith("term: ")]
        assert len(terms) > 3 and sum(terms) == pytest.approx(step["value"], rel=1e-9)


@pytest.mark.parametrize(
    ("sets", "scenario"),
    [
        (["workload.post_training.steps_per_refresh=50", "workload.post_training.refreshes_per_year=4",
          "workload.horizon_years=2"], "frontier-agentic"),
        ([], "open-model-agent"),  # a yearly RL budget sets the steps
    ],
)  # fmt: skip
def test_the_rl_block_runs_the_schedule_the_lifecycle_prices(sets, scenario):
    # the RL block's run (rl.run, which --budget-metric can check) showed the RL workload's own 100
    # steps x 12 refreshes while the lifecycle priced the scenario's schedule or budget
    args = [a for s in sets for a in ("--set", s)]
    r = run_cli("compare", "vera-rubin", "--scenario", scenario, *args, "-f", "json")
    assert r.code == 0, r.stderr
    assert "on the scenario's model" not in r.stderr  # a built-in scenario's stages name its model
    s = r.json()["systems"][0]
    cost = s["intelligence_per_dollar"]["cost_breakdown_usd"]["post_training"]
    years = s["intelligence_per_dollar"]["horizon_years"]
    assert s["rl"]["run"]["usd_per_year"] * years == pytest.approx(cost, rel=1e-9)
    if sets:
        assert (s["rl"]["run"]["steps_per_refresh"], s["rl"]["run"]["refreshes_per_year"]) == (50, 4)


MID_SCENARIO = """kind: scenario
description: "a 1T MoE company naming the 10T MoE's pretrain workload"
model: kimi-k2
pretraining: {workload: pretrain-10t-moe, amortisation_years: 2}
post_training: {workload: rl-swe-agent, steps_per_refresh: 50, refreshes_per_year: 12}
serving: {tasks_per_day: 1.0e+5, requests_per_task: 30, input_tokens_per_request: 3000,
          output_tokens_per_request: 400, tokens_per_user_s: 50, precision: fp8}
task_success: {success_rate: {value: 0.45}, max_attempts: 3}
"""


def test_every_stage_of_a_scenario_runs_its_model(tmp_path):
    # a scenario on kimi-k2 naming pretrain-10t-moe pre-trained moe-10t ($10.5M at 5e12 tokens)
    # while its RL and serving ran kimi-k2
    scenario = write(tmp_path / "mid.yaml", MID_SCENARIO)
    tokens = "workload.pretraining.tokens=5e12"
    r = run_cli("compare", "blackwell", "--scenario", str(scenario), "--set", tokens, "-f", "json")
    assert r.code == 0, r.stderr
    s = r.json()["systems"][0]
    assert [s[b]["model"] for b in ("pretraining", "rl", "serving")] == ["kimi-k2"] * 3
    # the pretrain workload's recipe on the scenario's model, as the workload compared alone on it
    alone = run_cli(
        "compare", "blackwell", "--workload", "pretrain-10t-moe", "--set", "workload.model=kimi-k2",
        "--set", "workload.tokens=5e12", "-f", "json",
    ).json()["systems"][0]["pretraining"]  # fmt: skip
    assert s["pretraining"]["cost_usd"] == pytest.approx(alone["cost_usd"], rel=1e-12)
    notes = [line for line in r.stderr.splitlines() if line.startswith("ipd: note:")]
    assert notes[0] == (
        "ipd: note: pre-training runs pretrain-10t-moe's recipe (tokens, deadline, precision) on the "
        "scenario's model kimi-k2, not the moe-10t that workload names (pretraining.model says which)"
    )
    assert notes[1:] and "pre-training is charged for the days it rents" in notes[1]  # the reserved term
    # explain of the same scenario says so too (a review: only compare did)
    r = run_cli("explain", "blackwell", "--scenario", str(scenario), "--set", tokens, "-f", "json")
    assert [line for line in r.stderr.splitlines() if line.startswith("ipd: note:")] == notes


def test_a_stage_model_set_is_refused_naming_the_scenario_model():
    # it was dropped silently: every stage runs the scenario's model
    r = run_cli("compare", "blackwell", "--set", "workload.pretraining.model=kimi-k2", "-f", "json")
    assert r.code == 2 and r.stdout == ""
    assert r.stderr == (
        "ipd: error: --set workload.pretraining.model=kimi-k2: every stage of a scenario runs the "
        "scenario's model; set workload.model instead\n"
    )


@pytest.mark.parametrize("mode", ["colocated", "disaggregated", "one-step-off", "async"])
def test_explain_gives_the_rl_step_of_its_schedule(catalog, mode):
    # the step's formula was the phases minus `hidden_by_overlap_s`, defined as whatever remained,
    # so it held for any schedule (a user review); now each mode's rule, recomputed here, and the
    # inputs that set it (mode, turns, epochs, passes) are listed
    from ipd_cli.api import explain

    cat = catalog.with_overrides([f"workload.mode={mode}"])
    items = {i["metric"]: i for i in explain(cat, ["gb200-nvl72"], "rl-swe-agent").items}
    step = items["rl.step_seconds"]
    env = {k: float(v) for k, v in (p.split(" = ") for p in step["inputs"].split("; "))}
    expr = re.sub(r" \(in series[^)]*\)$", "", step["formula"])
    assert eval(expr, {"max": max}, env) == pytest.approx(step["value"], rel=1e-12)
    assert ("max(" in expr) == (mode in ("one-step-off", "async"))
    # the generation time follows from the terms explain lists (an auditor's review: 302.6 s of
    # decode and tool waits against 692.8 s reported, the prefills and the longest response's
    # drain named but not given)
    gen = items["rl.phases.generation_s"]
    terms = {k: float(v) for k, v in (p.split(" = ") for p in gen["inputs"].split("; "))}
    if mode == "async":
        bulk = terms["decode_and_tools_s"] + terms["prefill_s"]
        rebuilt = max(bulk, terms["staleness_window_s"]) * (1 + terms["async_waste_fraction"])
    else:
        bulk = terms["decode_and_tools_s"] + terms["prefill_s"] + terms["drain_s"]
        rebuilt = max(bulk, terms["longest_trajectory_s"])
        assert terms["drain_s"] > 0
    assert rebuilt == pytest.approx(gen["value"], rel=1e-12)
    assert terms["prefill_s"] > 0 and terms["decode_and_tools_s"] > 0
    # the prompts' prefills from one prompt's (an RL review: no input gave it)
    assert terms["prefill_s"] == pytest.approx(
        terms["rollouts"] * terms["prompt_prefill_s"] / terms["replicas"], rel=1e-12
    )
    # the trainer's phases and the update from their own terms (a user review: explain gave no
    # formula for training_s, logprob_s or weight_sync_s)
    got = {m: {k: float(v) for k, v in (p.split(" = ") for p in items[m]["inputs"].split("; "))}
           for m in ("rl.phases.training_s", "rl.phases.logprob_s", "rl.phases.weight_sync_s")}  # fmt: skip
    t, lp, ws = got["rl.phases.training_s"], got["rl.phases.logprob_s"], got["rl.phases.weight_sync_s"]
    assert t["ppo_epochs"] >= 1 and lp["logprob_passes"] >= 1
    assert t["ppo_epochs"] * t["training_pass_s"] + t["fixed_s"] == pytest.approx(
        items["rl.phases.training_s"]["value"], rel=1e-12
    )
    assert lp["logprob_passes"] * lp["forward_pass_s"] == pytest.approx(items["rl.phases.logprob_s"]["value"])
    parts = ws["fixed_s"] + ws["transfer_s"] + ws["load_s"] + ws["offload_s"]
    assert parts == pytest.approx(items["rl.phases.weight_sync_s"]["value"], rel=1e-12)
    assert any(k.startswith("term: ") for k in ws)

    # and its slots' term from the workload's inputs listed beside it
    w = {name: float(items[f"input: {name}"]["value"]) for name in (
        "prompts per step", "group size", "keep fraction", "mean response tokens", "max response tokens",
        "turns", "tool latency s")}  # fmt: skip
    rollouts = w["prompts per step"] * w["group size"] / w["keep fraction"]
    decode_s = w["mean response tokens"] / terms["decode_tokens_per_s_per_user"]
    slot_s = decode_s + w["turns"] * w["tool latency s"]
    assert terms["rollouts"] == rollouts
    assert terms["decode_and_tools_s"] == pytest.approx(
        rollouts * slot_s / (terms["replicas"] * terms["concurrency"]), rel=1e-12
    )
    if mode != "async":
        extra = w["max response tokens"] - w["mean response tokens"]
        tail = terms["tail_decode_tokens_per_s_per_user"]
        assert terms["drain_s"] == pytest.approx(extra / tail, rel=1e-12)
    for name in ("mode", "turns", "ppo epochs", "logprob passes"):
        assert f"input: {name}" in items, name
    assert ("input: staleness bound" in items) == (mode == "async")


def test_a_deployment_shares_at_most_the_whole_pre_training_run():
    # `deployments` 0.25 charged four times the run to one year's deployment (a user review)
    r = run_cli("compare", "vera-rubin", "--set", "workload.pretraining.deployments=0.25", "-f", "json")
    assert r.code == 2 and r.stdout == "" and "workload.pretraining.deployments" in r.stderr
    assert ">= 1" in r.stderr or "greater than or equal to 1" in r.stderr


def test_explain_carries_each_inputs_catalog_note():
    # an auditor's review: the catalog says Vera Rubin's $8.50 is a lower bound; explain dropped it
    r = run_cli_once("explain", "vera-rubin", "-f", "json")
    items = r.json()["items"]
    price = next(i for i in items if i["metric"] == "input: rental price (reserved)")
    assert price["value"] == 8.5 and "lower bound" in price["note"]
    assert all("note" in i for i in items)
    table = run_cli("explain", "vera-rubin", "-f", "table").stdout
    assert "lower bound" not in table  # too long for a table column: JSON, CSV and YAML carry it


@pytest.mark.parametrize("workload", ["frontier-agentic", "pretrain-10t-moe", "rl-swe-agent"])
def test_every_explained_number_has_its_unit(workload):
    # an auditor's review: every headline line's unit was null
    r = run_cli("explain", "vera-rubin", "--workload", workload, "--pricing", "tco", "-f", "json")
    lines = [i for i in r.json()["items"] if not i["metric"].startswith("input: ")]
    assert lines and all(i["unit"] for i in lines), [i["metric"] for i in lines if not i["unit"]]
    units = {i["metric"]: i["unit"] for i in lines}
    expected = {"pretraining.gpu_hours": "GPU-h", "rl.step_seconds": "s", "usd_per_solved_task": "USD/task"}
    assert all(units[m] == u for m, u in expected.items() if m in units)


def test_a_site_of_exactly_n_systems_holds_n():
    from ipd_cli.engine import formulas as f

    # 10 DGX H100 at 10.2 kW x PUE 1.3 = 132.6 kW: the system's power rebuilt from 10.2 / 8 per GPU
    # divides to 9.999999999999998 systems; the floor gave 9 (a code review)
    assert f.gpus_in_power_budget(0.1326, 10.2 / 8, 1.3, 8) == 80
    assert f.gpus_in_power_budget(0.1325, 10.2 / 8, 1.3, 8) == 72


def test_a_site_holds_whole_racks_and_a_deployment_beyond_it_is_warned():
    # 0.1 MW holds no GB200 NVL72 rack (125 kW x PUE 1.3 = 162.5 kW): 0 GPUs, not the 44 that
    # 100 kW / (1.736 kW x 1.3) gave; the scenario's own serving deployment needs far more, which
    # the site does not cap: said on stderr (a scenario author's review)
    r = run_cli("compare", "gb200", "--site-mw", "0.1", "-f", "json")
    assert r.code == 0
    i, sv = r.json()["systems"][0]["intelligence_per_dollar"], r.json()["systems"][0]["serving"]
    assert i["site_gpus"] == 0 and i["site_tasks_solved_per_day"] == 0
    # its draw: GPUs x 1.7361 kW (125 kW / 72) x PUE 1.3
    mw = sv["gpus_for_traffic"] * 125 / 72 * 1.3 / 1000
    line = next(ln for ln in r.stderr.splitlines() if "does not fit the site" in ln)
    assert f"serving deployment ({sv['gpus_for_traffic']:,} GPUs, " in line and "the site's 0.1 MW" in line
    assert float(re.search(r"GPUs, ([\d.,]+) MW\)", line).group(1).replace(",", "")) == pytest.approx(
        mw, rel=5e-3
    )
    # the headline's 100 MW holds both deployments (Rubin's 24,048 GPUs in whole racks, GB200's
    # 44,280), and nothing is said; a site a rack short of GB200's (615 racks of 162.5 kW at 100 MW,
    # its deployment 601 racks' worth): said, with the draw
    roomy = run_cli_once("compare", "vera-rubin", "blackwell", "-f", "json")
    gpus = {s["hardware"]: s["serving"]["gpus_for_traffic"] for s in roomy.json()["systems"]}
    sites = {s["hardware"]: s["intelligence_per_dollar"]["site_gpus"] for s in roomy.json()["systems"]}
    assert all(gpus[hw] <= sites[hw] for hw in gpus)
    assert "the scenario's serving deployment" not in roomy.stderr
    racks = -(-gpus["gb200-nvl72"] // 72)
    tight = run_cli("compare", "blackwell", "--site-mw", f"{(racks - 0.5) * 0.1625:.4f}", "-f", "json")
    assert tight.code == 0 and "gb200-nvl72: the scenario's serving deployment" in tight.stderr


def test_the_site_warning_shows_a_draw_to_a_decimal_where_three_figures_read_the_sites():
    # 44,424 GPUs of 125 kW / 72 at PUE 1.3 draw 100.26 MW, which three figures would print as the
    # site's own 100: shown as 100.3 (the headline's GB200 deployment of 2026-12-05, a review)
    mw_per_gpu = 0.125 / 72 * 1.3
    point = {"gpus_for_traffic": 44_424, "tokens_per_s_per_gpu": 1.0, "tokens_per_s_per_mw": 1 / mw_per_gpu}
    ipd = {"site_gpus": 44_280, "site_mw": 100.0}
    (line,) = views._site_lines("gb200-nvl72", {"intelligence_per_dollar": ipd, "serving": point})
    assert "(44,424 GPUs, 100.3 MW) does not fit the site's 100 MW (44,280 GPUs" in line
    (line,) = views._site_lines(
        "gb200-nvl72", {"intelligence_per_dollar": {**ipd, "site_mw": 90.0}, "serving": point}
    )
    assert "(44,424 GPUs, 100 MW) does not fit the site's 90 MW" in line
    # 14 GPUs draw 14 x 1.736 kW x 1.3 = 31.6 kW, inside 0.1 MW; one 72-GPU rack draws 162.5 kW:
    # the whole systems do not fit, not the draw ("(14 GPUs, 0.1 MW) does not fit the site's 0.1
    # MW", a capacity planner's review)
    small = {"gpus_for_traffic": 14, "tokens_per_s_per_gpu": 1.0, "tokens_per_s_per_mw": 1 / mw_per_gpu}
    small["gpus_per_system"] = 72
    (line,) = views._site_lines(
        "gb200-nvl72", {"intelligence_per_dollar": {"site_gpus": 0, "site_mw": 0.1}, "serving": small}
    )
    assert "(14 GPUs, 0.0316 MW) fits the site's 0.1 MW by its draw but not in whole systems" in line
    assert "a 72-GPU system draws 0.163 MW at the PUE, and the site holds 0 GPUs in whole ones" in line


SCENARIO = """kind: scenario
description: a planner's what-if
model: llama-3.1-70b
pretraining: {pre}
post_training: {post}
serving: {{tasks_per_day: 1.0e6, input_tokens_per_request: 1500, output_tokens_per_request: 300}}
task_success: {{success_rate: {{value: 0.5}}}}
source: user
"""


@pytest.mark.parametrize(
    ("pre", "post", "error"),
    [
        # open weights have no cost to share: the fields that share one were read by nothing
        (
            "{open_weights: true, amortisation_years: 7, deployments: 3}",
            "{workload: rl-math-reasoning, budget_usd_per_year: 5.0e5}",
            "workload.pretraining: amortisation_years and deployments share a pre-training cost, and "
            "open weights have none: remove them, or give workload or cost_usd instead of open_weights",
        ),
        # the budget buys the refreshes: a count of them beside it was dropped
        (
            "{cost_usd: 1.0e7}",
            "{workload: rl-math-reasoning, refreshes_per_year: 12, budget_usd_per_year: 1.0e6}",
            "workload.post_training: budget_usd_per_year sets the refreshes a year (what it buys); "
            "remove refreshes_per_year or the budget",
        ),
        # a stage's workload of the wrong kind, or unknown: the file, then the field, then the fix
        (
            "{workload: rl-swe-agent}",
            "{workload: rl-math-reasoning}",
            ": pretraining.workload: 'rl-swe-agent' is an rl workload; give a pretrain one",
        ),
        (
            "{cost_usd: 1.0e7}",
            "{workload: rl-nope}",
            ": post_training.workload: 'rl-nope'; choose one of: rl-math-reasoning, rl-swe-agent, "
            "rl-swe-agent-10t",
        ),
    ],
)
def test_a_scenario_field_that_would_be_ignored_or_misplaced_is_a_one_line_error(tmp_path, pre, post, error):
    path = write(tmp_path / "what-if.yaml", SCENARIO.format(pre=pre, post=post))
    r = run_cli("compare", "h100", "--scenario", str(path), "-f", "json")
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.startswith("ipd: error: ") and error in r.stderr and "Value error" not in r.stderr
    assert f"{path}: " in r.stderr and f"{path}." not in r.stderr  # not glued to the field's path
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_user_file_may_cite_the_user_source_with_every_value_sourced(tmp_path):
    # README: a what-if file's values are cited as 'user'; naming it as the workload's source was
    # refused ("unknown source id 'user'") unless some value in the file had no source
    text = SCENARIO.format(pre="{cost_usd: 1.0e7}", post="{workload: rl-math-reasoning}").replace(
        "{value: 0.5}", "{value: 0.5, source: user}"
    )
    r = run_cli("compare", "h100", "--scenario", str(write(tmp_path / "cited.yaml", text)), "-f", "json")
    assert r.code == 0, r.stderr


def test_a_pretraining_cost_given_in_dollars_is_said_to_carry_no_energy(tmp_path):
    # cost_usd adds dollars and no MWh: solved tasks per MWh then counts RL and serving alone
    text = SCENARIO.format(pre="{cost_usd: 1.0e7}", post="{workload: rl-math-reasoning}")
    r = run_cli("compare", "h100", "--scenario", str(write(tmp_path / "given.yaml", text)), "-f", "json")
    assert r.code == 0, r.stderr
    ipd = r.json()["systems"][0]["intelligence_per_dollar"]
    assert ipd["cost_breakdown_usd"]["pretraining"] > 0 and ipd["energy_breakdown_mwh"]["pretraining"] == 0
    assert "pre-training is given as a cost, which carries no energy" in r.stderr
    assert "carries no energy" not in run_cli_once("compare", "vera-rubin", "blackwell", "-f", "json").stderr


def test_a_set_rl_budget_replaces_the_scenarios_refreshes():
    # frontier-agentic runs 12 refreshes a year; a --set budget runs what it buys instead (both in
    # one file is an error, but a --set switches the schedule: the file's count is not read)
    r = run_cli(
        "compare", "blackwell", "--set", "workload.post_training.budget_usd_per_year=2e6", "-f", "json"
    )
    assert r.code == 0, r.stderr
    system = r.json()["systems"][0]
    cost = system["intelligence_per_dollar"]["cost_breakdown_usd"]["post_training"]
    assert cost == pytest.approx(2e6)  # one year's budget, spent
    # on steps that each cost phi / goodput of the steady step (one-step-off: 1 / 0.9), lengthened by
    # their share of the evaluations and checkpoints: $2M buys 2e6 x 0.9 / (usd_per_step x (1 +
    # periodic_s_per_step / step_seconds)) scheduled steps
    rl_ = system["rl"]
    bought = rl_["run"]["steps_per_refresh"] * rl_["run"]["refreshes_per_year"]
    periodic = 1 + rl_["run"]["periodic_s_per_step"] / rl_["step_seconds"]
    assert rl_["run"]["periodic_s_per_step"] > 0
    assert bought == pytest.approx(2e6 * 0.9 / (rl_["usd_per_step"] * periodic))
    assert rl_["run"]["usd_per_year"] == pytest.approx(2e6)


def test_a_budget_that_buys_less_than_a_step_and_a_serving_without_target_are_said(tmp_path):
    # a procurement review: $100 bought 0.145 of a Rubin step silently; a scenario without
    # tokens_per_user_s served at 9.5 tokens/s per user without a word
    r = run_cli(
        "compare", "vera-rubin", "--scenario", "open-model-agent",
        "--set", "workload.post_training.budget_usd_per_year=100", "-f", "json",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    rl_ = r.json()["systems"][0]["rl"]
    # one-step-off: phi 1, over the goodput, each step with its share of the evaluations and checkpoints
    per_step = rl_["usd_per_step"] / 0.9 * (1 + rl_["run"]["periodic_s_per_step"] / rl_["step_seconds"])
    assert rl_["run"]["refreshes_per_year"] * rl_["run"]["steps_per_refresh"] == pytest.approx(100 / per_step)
    line = (
        f"the RL post-training runs {100 / per_step:.3g} of one ${per_step:,.0f} step over the 1-year horizon"
    )
    assert line in r.stderr and f"${per_step:,.0f} buys one" in r.stderr
    assert "buys one" not in run_cli_once("compare", "vera-rubin", "blackwell", "-f", "json").stderr
    # over the horizon, not a year: half a step a year over two years is one step (a code review)
    r = run_cli(
        "compare", "vera-rubin", "--scenario", "open-model-agent", "-f", "json",
        "--set", f"workload.post_training.budget_usd_per_year={per_step / 2}",
        "--set", "workload.horizon_years=2",
    )  # fmt: skip
    assert r.code == 0 and "buys one" not in r.stderr, r.stderr
    scenario = tmp_path / "s.yaml"
    body = builtin_yaml("workloads/open-model-agent.yaml")
    del body["serving"]["tokens_per_user_s"]
    body["field_sources"].pop("serving.tokens_per_user_s")
    scenario.write_text(yaml.safe_dump(body))
    r = run_cli("compare", "vera-rubin", "--scenario", str(scenario), "-f", "json")
    assert r.code == 0, r.stderr
    assert (
        "ipd: note: the scenario's serving gives no tokens_per_user_s: each system serves at its" in r.stderr
    )


def test_no_rl_by_set_says_how_to_run_a_scenario_without_it():
    # a procurement review: refreshes or steps of 0 were refused without saying how to leave RL out
    for field in ("refreshes_per_year", "steps_per_refresh"):
        r = run_cli("compare", "vera-rubin", "--set", f"workload.post_training.{field}=0", "-f", "json")
        assert (r.code, r.stdout) == (2, ""), r.stderr
        assert "a scenario without RL post-training leaves out its post_training block" in r.stderr


def test_owned_serving_that_fills_part_of_a_rack_is_warned():
    # open-model-agent on GB200 serves on 36 GPUs (5 prefill x DEP4 + 1 decode x DEP16; 18 before
    # its agent's calls carried their context) of a 72-GPU rack: under tco the other 36 are not
    # priced; bought for this alone, 72 / 36 = 2.00x
    r = run_cli("compare", "gb200", "--scenario", "open-model-agent", "--pricing", "tco", "-f", "json")
    assert r.code == 0, r.stderr
    sv = r.json()["systems"][0]["serving"]
    assert (sv["gpus_for_traffic"], sv["gpus_per_system"]) == (36, 72)
    assert sv["configuration"].startswith("5 prefill x DEP4 EPLB + 1 decode x DEP16 EPLB")
    assert "serving deployment's 36 GPUs leave 36 of its last 72-GPU system unpriced" in r.stderr
    assert "the systems cost 2.00x its serving cost" in r.stderr
    rented = run_cli("compare", "gb200", "--scenario", "open-model-agent", "-f", "json")
    assert "unpriced" not in rented.stderr  # a renter pays for the GPUs it rents
    # but a rack-scale system may be rented only whole (a procurement review: priced by the rack,
    # open-model-agent's ranking flips): rented, the $2M buys fewer RL samples (its evaluations and
    # checkpoints paid; 40 GPUs, 1.80x, until the RL pool search bought them at the cheapest pool's
    # cost, 2026-12-05), the same 36 GPUs: 72 / 36 = 2.00x
    assert (
        "gb200-nvl72: rented by the GPU, the serving deployment's 36 GPUs fill 36 of the 72 GPUs of "
        "its last system; where the system is rented only whole, the systems cost 2.00x its serving cost"
    ) in rented.stderr
    # an 8-GPU node is rented by the GPU: no such line (a code review: one H100 read "8.00x")
    served = ["--model", "llama-3.1-8b", "--tokens-per-day", "1e6", "-f", "json"]
    assert "rented by the GPU" not in run_cli("serve", "--hardware", "h100", *served).stderr
    assert (
        "deployment's 1 GPU fills 1 of the 72 GPUs" in run_cli("serve", "--hardware", "gb200", *served).stderr
    )


def test_explain_prints_the_warnings_of_the_comparison_it_explains():
    # explain printed none of compare's warnings (a warning audit): the same lines, in the same order
    compared = run_cli("compare", "h100-sxm", "mi355x", "-f", "json")
    explained = run_cli("explain", "h100-sxm", "mi355x", "-f", "json")
    assert compared.code == explained.code == 0
    warned = [ln for ln in compared.stderr.splitlines() if ln.startswith("ipd: warning:")]
    assert any("different terms" in ln for ln in warned) and any("serves at fp8" in ln for ln in warned)
    assert [ln for ln in explained.stderr.splitlines() if ln.startswith("ipd: warning:")] == warned


def test_a_scenario_pins_speculative_decoding_as_serve_does():
    # the headline moves most with the estimated EAGLE-3 acceptance, yet compare could not turn
    # drafting off (`workload.serving.speculative` was an unknown field; a hand-check review)
    off = ("--set", "workload.serving.speculative=off")
    r = run_cli("compare", "blackwell", *off, "-f", "json")
    assert r.code == 0, r.stderr
    point = r.json()["systems"][0]["serving"]
    assert point["speculative_speedup"] == 1.0 and "EAGLE" not in point["configuration"]
    # the serving block is the one `ipd serve --speculative off` gives at that shape and traffic
    served = run_cli(
        "serve", "--hardware", "blackwell", "--model", "moe-10t", "--precision", "fp4", "--speculative=off",
        "--tokens-per-user-s", "50", "--input-tokens", "3000", "--output-tokens", "400",
        "--context-tokens", "49300", "--requests-per-s", repr(point["traffic_requests_per_s"]), "-f", "json",
    ).json()["serving"]  # fmt: skip
    assert served["configuration"] == point["configuration"]
    assert served["gpus_for_traffic"] == point["gpus_for_traffic"]
    assert served["tokens_per_s_per_gpu"] == pytest.approx(point["tokens_per_s_per_gpu"], rel=1e-9)
    # a sweep's rows price the same pinned deployment
    rows = run_cli("sweep", "--vary", "hardware=blackwell", "--vary", "price_usd_per_gpu_hour=4.05", *off,
                   "--metrics", "serving.tokens_per_s_per_gpu", "-f", "json").json()  # fmt: skip
    assert rows[0]["serving.tokens_per_s_per_gpu"] == pytest.approx(point["tokens_per_s_per_gpu"], rel=1e-9)
    # the serving stage's own entry credits the --set (it was merged into the RL workload's entry
    # of the same name and value, a code review)
    origins = {
        a["origin"] for a in r.json()["systems"][0]["assumptions"] if a["name"] == "speculative decoding"
    }
    assert any(o.endswith("frontier-agentic.yaml + --set") for o in origins), origins
    r = run_cli("compare", "blackwell", "--set", "workload.serving.speculative=1.5")
    assert r.code == 2 and "speculative: must be off, on, auto or a draft depth" in r.stderr


def test_speculative_as_yaml_writes_it_and_a_sweep_varies_it():
    # `off` (YAML's false) was refused for an RL workload with pydantic's literal text, and a sweep
    # over draft depths refused 0 (the values come as floats; a code review)
    r = run_cli(
        "rl", "--hardware", "h100", "--workload", "rl-math-reasoning", "--set", "workload.speculative=off"
    )
    assert r.code == 0, r.stderr
    rows = run_cli("sweep", "--vary", "hardware=blackwell", "--vary", "workload.serving.speculative=0,2",
                   "--metrics", "serving.speculative_speedup", "-f", "json").json()  # fmt: skip
    assert [row["serving.speculative_speedup"] for row in rows][0] == 1.0 and rows[1][
        "serving.speculative_speedup"
    ] > 1


def test_an_rl_schedule_longer_than_a_year_is_warned():
    # a review: 1,000 refreshes a year of 0.59 wall-days each (590 days a year) said nothing; the
    # cost is linear in the steps, so it counts the side-by-side deployments such a year needs
    args = ("compare", "vera-rubin", "--workload", "open-model-agent", "-f", "json")
    r = run_cli(*args, "--set", "workload.post_training.refreshes_per_year=1000")
    assert r.code == 0, r.stderr
    run = r.json()["systems"][0]["rl"]["run"]
    days = run["wall_days_per_refresh"] * 1000
    assert days > 365
    line = f"takes {days:,.0f} days a year: {days / 365:,.3g} such RL deployments run side by side"
    assert line in r.stderr
    assert "RL schedule" not in run_cli(*args, "--set", "workload.post_training.refreshes_per_year=12").stderr


def test_a_horizon_longer_than_the_amortisation_says_it_pays_for_more_than_one_run(tmp_path):
    # a review: cost_usd 1e8 amortised over 1 year on a 3-year horizon charged $300M, silently
    body = """kind: scenario
model: llama-3.1-8b
horizon_years: 3
pretraining: {cost_usd: 1.0e8, amortisation_years: 1}
serving: {tasks_per_day: 1.0e3, requests_per_task: 3, input_tokens_per_request: 300,
          output_tokens_per_request: 100, tokens_per_user_s: 20}
task_success: {success_rate: {value: 0.6}, max_attempts: 3}
"""
    path = write(tmp_path / "s.yaml", body)
    r = run_cli("compare", "h100", "--workload", str(path), "-f", "json")
    assert r.code == 0, r.stderr
    assert r.json()["systems"][0]["intelligence_per_dollar"]["cost_breakdown_usd"]["pretraining"] == 3e8
    assert (
        "ipd: note: the 3-year horizon outlasts the pre-training's 1-year amortisation: it pays for 3 runs"
        in r.stderr
    )
    amortised = ("compare", "h100", "--workload", str(path), "--set")
    once = run_cli(*amortised, "workload.pretraining.amortisation_years=3")
    assert once.code == 0 and "outlasts" not in once.stderr and "months" not in once.stderr
    # 24 months typed as years is said back
    months = run_cli(*amortised, "workload.pretraining.amortisation_years=24")
    assert months.code == 0 and "amortisation_years is in years: 24 months would be 2)" in months.stderr


def test_a_scenario_serving_value_out_of_range_names_the_file_and_field(tmp_path):
    # a review: "speculative 7: eagle3 acceptance is measured up to 3 ..." and "kimi-k2 holds at
    # most 131,072 tokens; a request of input_tokens ..." named neither the file nor the field
    serving = (
        "serving: {tasks_per_day: 1.0e3, requests_per_task: 3, input_tokens_per_request: %s, "
        "output_tokens_per_request: 100, tokens_per_user_s: 20%s}\n"
    )
    head = "kind: scenario\nmodel: llama-3.1-8b\nhorizon_years: 1\npretraining: {open_weights: true}\n"
    tail = "task_success: {success_rate: {value: 0.6}, max_attempts: 3}\n"
    deep = write(tmp_path / "deep.yaml", head + serving % (300, ", speculative: 7") + tail)
    r = run_cli("compare", "h100", "--workload", str(deep))
    assert r.code == 2 and r.stderr.startswith(f"ipd: error: {deep}: workload.serving.speculative 7: ")
    assert r.stderr.rstrip().endswith("draft tokens per step; give a depth of 1 to 3, on or off")
    long = write(tmp_path / "long.yaml", head + serving % (2_000_000, "") + tail)
    r = run_cli("compare", "h100", "--workload", str(long))
    assert r.code == 2 and r.stderr.startswith(f"ipd: error: {long}: llama-3.1-8b holds at most ")
    assert "a request of workload.serving.input_tokens_per_request 2,000,000 + " in r.stderr
    # and an RL workload's lengths say both values
    r = run_cli("rl", "--hardware", "h100", "--workload", "rl-swe-agent", "--set", "workload.max_turns=1")
    assert r.code == 2 and "max_turns (1) must be >= turns (30)" in r.stderr


def test_a_scenarios_own_inputs_are_listed_with_their_paths_and_set_ones_cite_cli_set():
    # a review: the horizon, amortisation, RL budget, tasks a day, requests and attempts were in no
    # assumption list (nor in explain), the serving inputs had no path, and a --set one cited nothing
    # (fresh contexts: 30 carried calls of 5,400 tokens would exceed Kimi K2's 131,072)
    r = run_cli("compare", "vera-rubin", "--workload", "open-model-agent", "-f", "json",
                "--set", "workload.serving.input_tokens_per_request=5000",
                "--set", "workload.serving.context=fresh")  # fmt: skip
    assert r.code == 0, r.stderr
    listed = {a["path"]: a for a in r.json()["systems"][0]["assumptions"] if a["path"]}
    for path, value in [
        ("workload.horizon_years", 1.0),
        ("workload.post_training.budget_usd_per_year", 2.0e6),
        ("workload.serving.tasks_per_day", 1.0e5),
        ("workload.serving.requests_per_task", 30),
        ("workload.serving.output_tokens_per_request", 400),
        ("workload.serving.tokens_per_user_s", 50.0),
        ("workload.task_success.max_attempts", 3),
        ("workload.task_success.learning_curve.asymptote", 0.65),
    ]:
        assert listed[path]["value"] == value, path
    assert listed["workload.task_success.learning_curve.r0"]["source"] == "scalerl-paper"
    given = listed["workload.serving.input_tokens_per_request"]
    assert (given["value"], given["source"]) == (5000, "cli-set")
    assert listed["workload.serving.tasks_per_day"]["source"] is None  # the file's, not a --set
    # an RL workload's --set input cites it too
    rl = run_cli("rl", "--hardware", "vera-rubin", "--set", "workload.turns=10", "-f", "json")
    turns = [a for a in rl.json()["assumptions"] if a["path"] == "workload.turns"]
    assert [(a["value"], a["source"]) for a in turns] == [(10.0, "cli-set")]


def test_a_scenario_file_with_a_stage_written_wrong_is_told_where_it_goes(tmp_path, catalog):
    # a review: an RL workload's `gpus` under post_training was only "unknown field; choose one of
    # budget_usd_per_year, ...", a missing pretraining stage "Field required", and a file named as
    # the RL workload "unknown rl workload"
    head = "kind: scenario\nmodel: llama-3.1-8b\n"
    rest = (
        "serving: {tasks_per_day: 1.0e3, input_tokens_per_request: 300, output_tokens_per_request: 100}\n"
        "task_success: {success_rate: {value: 0.6}}\n"
    )
    pre = "pretraining: {open_weights: true}\n"
    gpus = write(
        tmp_path / "gpus.yaml", head + pre + "post_training: {workload: rl-swe-agent, gpus: 96}\n" + rest
    )
    r = run_cli("compare", "h100", "--workload", str(gpus))
    assert r.code == 2 and r.stderr == (
        f"ipd: error: {gpus}: workload.post_training.gpus: unknown field (got 96); gpus is a field of the RL "
        "workload the stage runs: set it in that workload (a catalog directory given with --catalog), "
        "or with --set workload.post_training.gpus=96\n"
    )
    bare = write(tmp_path / "bare.yaml", head + rest)
    r = run_cli("compare", "h100", "--workload", str(bare))
    assert r.code == 2 and r.stderr.startswith(
        f"ipd: error: {bare}: workload.pretraining: missing: every scenario says how its model is "
        "pre-trained: "
    )
    named = write(tmp_path / "named.yaml", head + pre + "post_training: {workload: myrl.yaml}\n" + rest)
    r = run_cli("compare", "h100", "--workload", str(named))
    assert r.code == 2 and "'myrl.yaml' is a file; a stage names a catalog workload" in r.stderr
    assert "workloads/ (given with --catalog) and give its name, 'myrl'" in r.stderr
    # the library names its parameter, not the flag
    from ipd_cli.errors import InputError

    with pytest.raises(InputError, match=r"workloads/ \(given with `extra_dirs`\) and give its name"):
        compare(catalog, ["h100"], str(named))


def test_a_set_of_another_workload_kinds_field_says_so():
    # a review: --set workload.horizon_years on an RL workload suggested 'observation_tokens'
    r = run_cli("rl", "--hardware", "vera-rubin", "--set", "workload.horizon_years=2")
    assert r.code == 2
    assert (
        r.stderr
        == "ipd: error: --set workload.horizon_years: a field of scenario workloads; this is an rl workload\n"
    )
    r = run_cli("compare", "h100", "--workload", "pretrain-10t-moe", "--set", "workload.max_turns=2")
    assert (
        r.code == 2 and "workload.max_turns: a field of rl workloads; this is a pretrain workload" in r.stderr
    )


def test_a_success_of_zero_is_a_one_line_error_naming_the_task_success(tmp_path):
    # a code review: a learning curve from r0 0 without RL (or a success rate of 0) ended in
    # "numbers out of range (ZeroDivisionError: float division by zero)"
    body = (
        "kind: scenario\nmodel: llama-3.1-8b\npretraining: {open_weights: true}\n"
        "serving: {tasks_per_day: 1.0e3, input_tokens_per_request: 300, output_tokens_per_request: 100}\n"
        "task_success: {learning_curve: {r0: 0, asymptote: 0.5, midpoint_samples: 1e5, exponent: 1}}\n"
    )
    path = write(tmp_path / "zero.yaml", body)
    r = run_cli("compare", "h100", "--workload", str(path))
    assert r.code == 1 and r.stdout == ""
    assert r.stderr.startswith("ipd: error: no task is ever solved: success per attempt is 0 (task_success")
    assert "ZeroDivisionError" not in r.stderr


def test_explain_derives_each_stages_energy_from_its_gpu_hours():
    # an energy review: explain derived the costs stage by stage, the energy only as the inputs of
    # solved_tasks_per_mwh (Rubin: 19,681,702 GPU-h x 230 kW / 72 x PUE 1.3 / 1000 = 81,734 MWh;
    # 19,754,985 GPU-h until the overlap windows counted the unpaired chunks' all-to-all;
    # 22,317,911 GPU-h while the 10T model's recipe batch was Kimi K2's, not the rule's;
    # 19,228,498 GPU-h until tensor-parallel ranks held MLA's down-projections whole, 19,286,813
    # until they held the routers whole too, 19,289,079 until the plans all-reduced what the ranks
    # hold whole over the tensor-parallel group, 19,389,294 until Megatron's 1F1B overlap paid for
    # the chunks it cannot pair, 21,786,066 until DualPipe paid for its own)
    rows = {row["metric"]: row for row in run_cli_once("explain", "vera-rubin", "-f", "json").json()["items"]}
    system = run_cli_once("compare", "vera-rubin", "-f", "json").json()["systems"][0]
    kw = 230 / 72

    def inputs(metric):
        return {k: float(v) for k, v in (p.split(" = ") for p in rows[metric]["inputs"].split("; "))}

    pre = inputs("pretraining.energy_mwh")
    assert pre["kw_per_gpu"] == pytest.approx(kw) and pre["pue"] == 1.3
    assert rows["pretraining.energy_mwh"]["value"] == pytest.approx(pre["gpu_hours"] * kw * 1.3 / 1000)
    # 21,177,995 GPU-hours x 230 kW / 72 x 1.3 = 87,947.50 MWh (87,450.04 until each fused-attention
    # call paid its fixed cost, 2026-12-06: 21,058,203 GPU-hours; 81,733.73 on the plan before the
    # shared experts' TP collectives, 82,173.77 before MLA's collectives were counted op by op,
    # 82,179.07 before a step paid its fixed time: 28,440 GPUs, not 27,648; 82,816.28 before the
    # refit that priced MXFP8 cases at their recipe and made 26.06's Qwen3-30B-A3B GB rows checking
    # cases: 29,232 GPUs on TP4 PP8, the generic training share 0.673 -> 0.684; 86,782.30 before the
    # step's fixed time went 18 -> 20.4 ms, 2026-12-05; 86,857.52 on TP4 PP8 before NVFP4 runs lost
    # userbuffers' TP overlap, the same day; 86,379.44 on 29,232 GPUs until a cast paid its HBM
    # traffic by recipe, the same day: 29,952 GPUs on TP1 PP4 (interleave 16) CP4 now)
    assert rows["pretraining.energy_mwh"]["value"] == pytest.approx(87_947.50, rel=1e-6)
    rl = inputs("rl.energy_kwh_per_step")
    assert rows["rl.energy_kwh_per_step"]["value"] == pytest.approx(rl["gpu_hours_per_step"] * kw * 1.3)
    assert rows["rl.energy_kwh_per_step"]["value"] == pytest.approx(system["rl"]["energy_kwh_per_step"])
    sv = inputs("serving_mwh")
    assert rows["serving_mwh"]["value"] == pytest.approx(
        sv["gpus_for_traffic"] * 8760 * sv["H"] * kw * 1.3 / 1000
    )
    assert (
        rows["serving_mwh"]["value"] == system["intelligence_per_dollar"]["energy_breakdown_mwh"]["serving"]
    )
    assert [rows[m]["unit"] for m in ("pretraining.energy_mwh", "rl.energy_kwh_per_step", "serving_mwh")] == [
        "MWh", "kWh", "MWh"
    ]  # fmt: skip


@pytest.mark.parametrize(("workload", "metric"), [("pretrain-10t-moe", "pretraining.energy_mwh"),
                                                  ("rl-swe-agent", "rl.energy_kwh_per_step")])  # fmt: skip
def test_explain_of_a_workload_alone_derives_its_energy(workload, metric):
    rows = {
        r["metric"]: r
        for r in run_cli_once("explain", "vera-rubin", "--workload", workload, "-f", "json").json()["items"]
    }
    block = run_cli_once("compare", "vera-rubin", "--workload", workload, "-f", "json").json()["systems"][0]
    inputs = {k: float(v) for k, v in (p.split(" = ") for p in rows[metric]["inputs"].split("; "))}
    hours = inputs.get("gpu_hours", inputs.get("gpu_hours_per_step"))
    per = 1000 if metric.endswith("_mwh") else 1  # MWh of kWh
    assert rows[metric]["value"] == pytest.approx(hours * 230 / 72 * 1.3 / per)
    assert rows[metric]["value"] == pytest.approx(block[metric.split(".")[0]][metric.split(".")[1]])


def test_a_scenario_number_its_file_leaves_out_is_listed_as_ipds_default(catalog):
    # a magic-constant audit: a scenario file without amortisation_years listed the schema's 2
    # years under that file, and one without an RL schedule listed none (the RL workload's ran)
    from ipd_cli.catalog.schema import Scenario

    s = Scenario.model_validate({
        "kind": "scenario", "description": "defaults", "model": "moe-10t", "source": "N1",
        "pretraining": {"workload": "pretrain-10t-moe"},
        "post_training": {"workload": "rl-swe-agent-10t"},
        "serving": {"tasks_per_day": 1e7, "requests_per_task": 30, "input_tokens_per_request": 3000,
                    "output_tokens_per_request": 400, "tokens_per_user_s": 50},
        "task_success": {"success_rate": {"value": 0.59, "source": "N1"}},
    })  # fmt: skip
    listed = {a.path: a for a in lc.scenario_assumptions(catalog, s, "mine.yaml")}
    left_out = ["horizon_years", "pretraining.amortisation_years", "pretraining.deployments"]
    left_out += ["task_success.max_attempts"]
    for path, value in zip(left_out, (1.0, 2.0, 1.0, 1), strict=True):
        a = listed[f"workload.{path}"]
        assert (a.value, a.origin, a.estimate) == (value, lc.DEFAULTED, True), path
    for key, value in (("steps_per_refresh", 100), ("refreshes_per_year", 12)):
        a = listed[f"workload.post_training.{key}"]  # rl-swe-agent-10t.yaml gives both
        assert (a.value, a.origin, a.estimate) == (
            value,
            catalog.origin("workloads", "rl-swe-agent-10t"),
            False,
        ), key
    given = listed["workload.serving.requests_per_task"]
    assert (given.value, given.origin, given.estimate) == (30, "mine.yaml", False)


def test_a_catalog_scenario_that_leaves_a_number_out_lists_the_default_too(tmp_path):
    # a review of the change above: a scenario named from a --catalog directory was rebuilt from its
    # whole dump (every default then counted as given), so its left-out horizon and attempts read as
    # the file's own; a --set on the scenario (or on its RL stage) did the same
    import yaml

    from ipd_cli import load

    body = load().workloads["open-model-agent"].model_dump(mode="json", exclude_none=True, exclude_unset=True)
    del body["horizon_years"], body["task_success"]["max_attempts"]
    write(tmp_path / "workloads" / "mine.yaml", yaml.safe_dump(body))
    args = ("compare", "gb200", "--catalog", str(tmp_path), "--scenario", "mine", "-f", "json")
    for extra in ((), ("--set", "workload.serving.tasks_per_day=2e5")):
        r = run_cli(*args, *extra)
        assert r.code == 0, r.stderr
        listed = {a["path"]: a for a in r.json()["systems"][0]["assumptions"] if a["path"]}
        for path in ("workload.horizon_years", "workload.task_success.max_attempts"):
            assert (listed[path]["origin"], listed[path]["estimate"]) == (lc.DEFAULTED, True), (path, extra)
        assert listed["workload.serving.requests_per_task"]["origin"].startswith(str(tmp_path))


def test_an_agent_tasks_calls_carry_its_context():
    # a review: the agentic scenario's 30 calls of 3,000 new prompt and 400 output tokens each
    # attended to their own 3,400 tokens only. Carried, call k attends to the k - 1 calls before it:
    # (30 - 1) / 2 x 3,400 = 49,300 cached tokens on average, read from the scenario's own fields
    r = run_cli_once("compare", "vera-rubin", "-f", "json")
    items = {a["name"]: (a["value"], a["path"]) for a in r.json()["systems"][0]["assumptions"]}
    assert items["cached context tokens per request"] == (49300, None)  # derived from the fields below
    assert items["serving context"] == ("carried", "workload.serving.context")
    fresh = run_cli("compare", "vera-rubin", "--set", "workload.serving.context=fresh", "-f", "json")
    assert fresh.code == 0, fresh.stderr
    names = [a["name"] for a in fresh.json()["systems"][0]["assumptions"]]
    assert "cached context tokens per request" not in names
    # fresh contexts (the old reading) need fewer serving GPUs for the same traffic
    carried_gpus = r.json()["systems"][0]["serving"]["gpus_for_traffic"]
    assert fresh.json()["systems"][0]["serving"]["gpus_for_traffic"] < carried_gpus


def test_a_carried_context_whose_last_call_does_not_fit_is_refused():
    # a review: 60 calls of 3,000 + 400 tokens ran on the mean call's 100,300 (59 / 2 x 3,400 +
    # 3,400) though the last carries 60 x 3,400 = 204,000, past the 10T model's 131,072
    r = run_cli("compare", "vera-rubin", "--set", "workload.serving.requests_per_task=60", "-f", "json")
    assert r.code == 2 and r.stdout == ""
    assert (
        "the last of a task's 60 calls carries 204,000 tokens (60 x 3,400), past moe-10t's 131,072"
        in r.stderr
    )
    assert "requests_per_task" in r.stderr and "Traceback" not in r.stderr
    # 38 calls: the last 129,200 fits
    assert (
        run_cli("compare", "vera-rubin", "--set", "workload.serving.requests_per_task=38", "-f", "json").code
        == 0
    )


def test_a_scenarios_rl_context_error_names_the_stages_path():
    # it named `--set workload.max_response_tokens`, which the same command then refused: a
    # scenario's RL fields are under workload.post_training (a capacity planner's review). 4,000
    # prompt + 24,000 tool output + 32,768 response tokens = 60,768, over a 16,384-token context
    r = run_cli("compare", "vera-rubin", "--set", "models.moe-10t.max_context=16384")
    assert r.code == 2 and r.stdout == ""
    assert "longest trajectory is 60,768" in r.stderr
    assert "(--set workload.post_training.max_response_tokens=N)" in r.stderr


def test_an_rl_workload_alone_says_its_busy_hours_too():
    # `ipd rl` and a comparison of the RL workload price the year of steps a scenario's RL stage
    # does (100 steps x 12 refreshes), and said nothing: the pool search's 1,168 Rubin GPUs (of the
    # workload's 2,048) 21.1 days a year, the pool kept all year 1,168 x 8,760 h x $8.50 = $87M
    said = "vera-rubin-nvl72's 1,168 GPUs 21.1 days a year (5.8%), $87M a year kept for RL all year"
    rl = ("rl", "--hardware", "vera-rubin", "--workload", "rl-swe-agent-10t", "-f", "json")
    for args in (rl, ("compare", "vera-rubin", "--workload", "rl-swe-agent-10t", "-f", "json")):
        r = run_cli_once(*args)
        assert r.code == 0 and said in r.stderr, r.stderr
    # owned, the same hours at the owning cost, other work keeping the pool busy at utilisation
    # 0.85 (a procurement review: nothing was said): 1,168 GPUs are 17 racks (16.2 rounded up) x
    # $7.8M = $133M
    owned = run_cli_once(*rl, "--pricing", "tco").stderr
    assert "vera-rubin-nvl72's 1,168 GPUs (17 systems, $133M to buy) 21.1 days a year (5.8%)" in owned


def test_a_scenarios_rl_transport_error_names_the_stage_path_once():
    # the RL stage's own --set path is named as given: the context error's rewrite of workload.X
    # into workload.post_training.X read `workload.post_training.post_training.sync_transport`
    # here, a path the command refuses (colocated sync on the one-step-off frontier RL stage)
    r = run_cli("compare", "vera-rubin", "--set", "workload.post_training.sync_transport=colocated")
    assert r.code == 2 and r.stdout == ""
    assert "--set workload.post_training.sync_transport=colocated does not work in mode one-step-off" in (
        r.stderr
    )
    assert "post_training.post_training" not in r.stderr


def test_rl_charged_for_its_busy_hours_says_so():
    # a scenario's RL pays the GPU-hours its steps run: 2,048 GPUs some days a year, the pool's
    # other hours paid by other work, as pre-training's contract days are; said as pre-training's is
    # (a capacity planner's review: nothing said it)
    r = run_cli_once("compare", "vera-rubin", "blackwell", "-f", "json")
    line = next(ln for ln in r.stderr.splitlines() if "RL post-training is charged" in ln)
    for s in r.json()["systems"]:
        rl = s["rl"]
        days = rl["run"]["gpu_hours_per_year"] / rl["gpus"] / 24
        kept = rl["gpus"] * 8760 * rl["price_usd_per_gpu_hour"]
        said = f"{s['hardware']}'s {rl['gpus']:,} GPUs {days:.3g} days a year ({days / 365:.1%}), "
        said += f"${kept / 1e6:.3g}M a year"
        assert said in line
    assert "$87M a year kept for RL all year" in line  # the pool search's 1,168 x 8,760 h x $8.50
    tco = run_cli_once("compare", "vera-rubin", "blackwell", "--pricing", "tco", "-f", "json")
    # owned, the owning cost's utilisation (0.85) makes the same assumption, said with what the
    # pool costs to buy (a procurement review: "owning prices every hour already" was not so)
    assert "RL post-training is charged the owning cost of the hours its steps run" in tco.stderr
    assert "kept for RL all year" not in tco.stderr


def test_the_prefill_pools_wait_at_the_traffic_is_its_md_c_queues_by_hand(catalog):
    # a capacity planner's audit: frontier-agentic's prefill pools run at 99.8 % and the TTFT
    # printed had no queue. By hand from the JSON's own numbers: Erlang B by its recursion, Erlang
    # C, the M/M/c wait, halved with Cosmetatos's correction for a deterministic prompt
    sv = compare(catalog, ["vera-rubin"]).systems[0].serving
    assert sv.disaggregated and sv.instances_for_traffic == 1
    lam, s, c = sv.traffic_requests_per_s, sv.prefill_instance_s, sv.prefill_instances
    a = lam * s
    rho = a / c
    assert 0.99 < rho < 1  # sized at its rate: ceil(requests/s x prefill_instance_s) instances
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    erlang_c = b / (1 - rho * (1 - b))
    mmc = erlang_c * s / (c - a)
    wait = 0.5 * mmc * (1 + (1 - rho) * (c - 1) * (math.sqrt(4 + 5 * c) - 2) / (16 * rho * c))
    assert sv.prefill_queue_s == pytest.approx(wait, rel=1e-9)
    assert 0.01 < sv.prefill_queue_s < sv.ttft_s  # 41 ms on a 0.62 s TTFT (2026-12-05)
    # and the decode pool's sequence slots, the same queue by hand: 47 x 26 = 1,222 slots, each
    # request holding one output_tokens / tokens_per_s_per_user seconds (Little's law)
    s, c = sv.output_tokens / sv.tokens_per_s_per_user, sv.decode_instances * sv.concurrency
    a = lam * s
    rho = a / c
    assert 0.9 < rho < 1 and sv.slot_utilisation == pytest.approx(rho, rel=1e-12)
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    mmc = b / (1 - rho * (1 - b)) * s / (c - a)
    slot = 0.5 * mmc * (1 + (1 - rho) * (c - 1) * (math.sqrt(4 + 5 * c) - 2) / (16 * rho * c))
    assert sv.slot_queue_s == pytest.approx(slot, rel=1e-9)
    total = sv.ttft_s + sv.prefill_queue_s + sv.slot_queue_s
    assert sv.ttft_at_traffic_s == pytest.approx(total, rel=1e-12)


RELEASE_SCENARIO = """kind: scenario
description: "DeepSeek-R1 at FP4, 1k/1k agent calls"
model: deepseek-r1
pretraining: {{open_weights: true}}
serving: {{tasks_per_day: 1000, input_tokens_per_request: 1000, output_tokens_per_request: 1000,
          precision: fp4{release}}}
task_success: {{success_rate: {{value: 0.5}}}}
source: user
"""


def test_explain_gives_a_stack_releases_prompt_stall_and_the_max_it_takes(tmp_path):
    """A scenario served under TensorRT-LLM 1.1.0rc2 (its serving.stack_release, or compare's and
    explain's --stack-release): on B200 at FP4 the aggregated instance's prompt (ipd's ~15.6 ms at
    1,000 new tokens) is priced at the release's 42.1 ms stall; explain writes that step as
    max(prompt_s, prompt_stall_s) naming the release, and the stall's input row with its source."""
    field = write(tmp_path / "field.yaml", RELEASE_SCENARIO.format(release=", stack_release: 1.1.0rc2"))
    r = run_cli("explain", "b200", "--workload", str(field), "-f", "json")
    assert r.code == 0, r.stderr
    items = {i["metric"]: i for i in r.json()["items"]}
    pre = items["serving.prefill_instance_s"]
    inputs = dict(kv.split(" = ") for kv in pre["inputs"].split("; "))
    prompt_s, stall_s = float(inputs["prompt_s"]), float(inputs["prompt_stall_s"])
    assert prompt_s < 0.0421 == pytest.approx(stall_s) and inputs["stack_release"] == "'1.1.0rc2'"
    assert pre["value"] == max(prompt_s, stall_s) and pre["formula"].startswith(
        "max(prompt_s, prompt_stall_s)"
    )
    assert "under trtllm 1.1.0rc2" in pre["formula"]
    row = items["input: prompt stall per aggregated iteration (trtllm 1.1.0rc2)"]
    assert (row["value"], row["unit"], row["source"], row["estimate"]) == (
        42.1,
        "ms",
        "inferencex-trt-1.1-stall",
        True,
    )
    assert row["path"] == "serving.stacks.trtllm.releases.1.1.0rc2.profiles.blackwell.prompt_stall_ms.fp4"
    # the time per token counts the other requests' prompts at the stall: (c - 1) x 42.1 ms +
    # 1,000 x step / speedup, over 1,000 tokens
    tpot = dict(kv.split(" = ") for kv in items["serving.tpot_ms"]["inputs"].split("; "))
    c, step, spec = int(tpot["concurrency"]), float(tpot["step_time_ms"]), float(tpot["speculative_speedup"])
    assert float(tpot["prefill_instance_s"]) == pre["value"]
    assert items["serving.tpot_ms"]["value"] == pytest.approx(((c - 1) * 42.1 + 1000 * step / spec) / 1000)
    assert "prompt_stall_s" in items["serving.ttft_s"]["inputs"]
    # --stack-release gives the scenario the same field: the same comparison
    plain = write(tmp_path / "plain.yaml", RELEASE_SCENARIO.format(release=""))
    by_flag = run_cli(
        "compare", "b200", "--workload", str(plain), "--stack-release", "1.1.0rc2", "-f", "json"
    )
    by_field = run_cli("compare", "b200", "--workload", str(field), "-f", "json")
    assert by_flag.code == by_field.code == 0, (by_flag.stderr, by_field.stderr)
    sv = by_flag.json()["systems"][0]["serving"]
    assert sv == by_field.json()["systems"][0]["serving"]
    assert sv["stack_release"] == "1.1.0rc2" and sv["prefill_instance_s"] == pre["value"]
    # a sweep of the scenario sizes its rows under the release too (its traffic sizer's search)
    metrics = "serving.tokens_per_s_per_gpu,serving.prefill_instance_s"
    swept = run_cli(
        "sweep", "--workload", str(field), "--vary", "hardware=b200", "--metrics", metrics, "-f", "json"
    )
    assert swept.code == 0, swept.stderr
    row = swept.json()[0]
    assert (row["serving.tokens_per_s_per_gpu"], row["serving.prefill_instance_s"]) == (
        sv["tokens_per_s_per_gpu"],
        pre["value"],
    )
    # none picked: no stall step, no stall row, the release null
    none = run_cli("explain", "b200", "--workload", str(plain), "-f", "json")
    assert none.code == 0, none.stderr
    assert not [i for i in none.json()["items"] if "stall" in i["metric"] + i["formula"] + i["inputs"]]


def test_a_scenarios_release_is_checked_against_every_systems_stack_first(tmp_path):
    field = write(tmp_path / "field.yaml", RELEASE_SCENARIO.format(release=', stack_release: "1.2"'))
    plain = write(tmp_path / "plain.yaml", RELEASE_SCENARIO.format(release=""))
    held = "releases measured apart: 1.1.0rc2 (leave it out for the stack's profile)"
    for args, line in (
        # MI355X serves with SGLang, which holds no 1.1.0rc2: refused before b200's stages run
        (
            ("compare", "b200", "mi355x", "--workload", str(plain), "--stack-release", "1.1.0RC2"),
            "ipd: error: unknown --stack-release '1.1.0rc2' for sglang (the serving stack of mi355x); "
            "releases measured apart: 0.5.7-mori-0122 (leave it out for the stack's profile)",
        ),
        (
            ("explain", "b200", "--workload", str(plain), "--stack-release", "1.2"),
            f"ipd: error: unknown --stack-release '1.2' for trtllm (the serving stack of b200); {held}",
        ),
        (
            ("compare", "b200", "--workload", str(field)),
            f"ipd: error: {field}: unknown workload.serving.stack_release '1.2' for trtllm (the serving "
            f"stack of b200); {held}",
        ),
    ):
        r = run_cli(*args, "-f", "json")
        assert (r.code, r.stdout, r.stderr.splitlines()) == (2, "", [line]), args
