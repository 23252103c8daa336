"""Re-pricing a chosen configuration: each block's cost and energy arithmetic over arrays.

A sweep axis that changes only prices (a price, ``economics.*``, a system's power or capex) or
a volume of the workload (:data:`VOLUME`: tasks per day, the horizon, the RL schedule ...)
leaves every search where it was: the training plan and the RL split are chosen by speed,
never by price, and read no volume. So a sweep searches once per distinct physics point, keeps
the numbers that do not depend on cost (GPU-hours, tokens/s per GPU, step seconds), and this
module turns them into the cost and energy metrics for whole arrays of prices, kW per GPU, PUE
and volumes at once. A scenario's serving deployment is the exception: it is sized for the
scenario's traffic (tasks per day x expected attempts x requests x output tokens), which a
volume (and, through the attempts, an RL budget or schedule on a learning curve) moves; each
row's traffic is sized by the physics point's :class:`~ipd_cli.engine.lifecycle.ServingSizer`
(``_life.serving``: traffic -> the serving numbers; the search runs once per physics point, then
every distinct traffic of a chunk is sized at once, rows x traffics as numpy arrays). The
formulas are those of
:func:`~ipd_cli.engine.pretraining.pretraining_core`,
:func:`~ipd_cli.engine.serving.point.serving`, :func:`~ipd_cli.engine.rl.result.assemble` and the
blocks of :mod:`~ipd_cli.engine.lifecycle`; tests/test_sweep.py checks that a re-priced row
equals the single estimate at that price, metric by metric.

``m`` maps a metric path (``rl.gpu_hours_per_step``) to its value at each point: plain numbers or
arrays that broadcast together. Quantities a block needs but does not report are derived once
per physics point by :func:`hidden` (``_rl.*``) and :func:`lifecycle_terms` (``_life.*``).
"""

from __future__ import annotations

from typing import Any

from ipd_cli.catalog.schema import Scenario

from . import formulas as f

Numbers = dict[str, Any]


def pretraining(m: Numbers, price: Any, kw: Any, pue: Any) -> Numbers:
    hours = m["pretraining.gpu_hours"]
    return {
        "pretraining.cost_usd": hours * price,
        "pretraining.energy_mwh": f.energy_mwh(hours, kw, pue),
        "pretraining.price_usd_per_gpu_hour": price,
        "pretraining.kw_per_gpu": kw,
    }


def serving(m: Numbers, price: Any, kw: Any, pue: Any) -> Numbers:
    tps = m["serving.tokens_per_s_per_gpu"]
    return {
        "serving.usd_per_million_output_tokens": f.usd_per_million_tokens(price, tps),
        "serving.usd_per_million_total_tokens": f.usd_per_million_tokens(
            price, m["serving.total_tokens_per_s_per_gpu"]
        ),
        "serving.tokens_per_s_per_mw": f.tokens_per_s_per_mw(tps, kw, pue),
        "serving.price_usd_per_gpu_hour": price,
        "serving.kw_per_gpu": kw,
        # the traffic on its deployment's GPUs (NaN without a traffic: no value)
        "serving.usd_per_million_output_tokens_at_traffic": f.usd_per_million_tokens_at_traffic(
            price,
            m["serving.traffic_requests_per_s"] * m["serving.output_tokens"],
            m["serving.gpus_for_traffic"],
        ),
    }


# rl.run's inputs, not re-priced (the goodput, phi and the periodic work are physics: a --set of any
# is a physics axis; --samples draws replace the goodput, phi and the checkpoint's terms)
SCHEDULE = (
    "steps_per_refresh",
    "refreshes_per_year",
    "goodput",
    "staleness_steps_factor",
    "periodic_s_per_step",
)


def rl(m: Numbers, price: Any, kw: Any, pue: Any) -> Numbers:
    """The step's cost and energy, and its run (``rl.run.*``: a refresh cycle and a year of
    refreshes) at the schedule in ``m`` (a sweep's varied steps per refresh or refreshes per year
    replace the workload's there), as :func:`~ipd_cli.engine.rl.result.assemble` computes them."""
    hours = m["rl.gpu_hours_per_step"]
    usd, kwh = hours * price, hours * kw * pue
    run = f.rl_run(
        m["rl.run.steps_per_refresh"], m["rl.run.refreshes_per_year"], m["rl.step_seconds"], hours, usd, kwh,
        m["rl.run.goodput"], m["rl.run.staleness_steps_factor"], m["rl.run.periodic_s_per_step"],
    )  # fmt: skip
    cap = m.get("rl.gpus_cap")  # the pool search's cap (None: a pinned pool), its fastest step
    cap_usd = None if cap is None else cap * m["rl.gpus_cap_step_seconds"] / f.SECONDS_PER_HOUR * price
    return {
        "rl.usd_per_step": usd,
        "rl.gpus_cap_usd_per_step": cap_usd,
        "rl.energy_kwh_per_step": kwh,
        "rl.usd_per_1k_samples": usd / m["_rl.samples_per_step"] * 1000,
        "rl.usd_per_million_generated_tokens": usd / m["_rl.generated_mtokens"],
        "rl.rollouts_per_kwh": m["_rl.rollouts_per_step"] / kwh,
        "rl.price_usd_per_gpu_hour": price,
        **{f"rl.run.{k}": v for k, v in run.items() if k not in SCHEDULE},
    }


def hidden(numbers: Numbers) -> Numbers:
    """Per physics point, what re-pricing RL needs and the RL result reports only through a cost:
    samples, generated tokens (millions) and rollouts per step."""
    if numbers.get("rl.usd_per_step") is None:
        return {}
    return {
        "_rl.samples_per_step": numbers["rl.samples_per_s"] * numbers["rl.step_seconds"],
        "_rl.generated_mtokens": numbers["rl.usd_per_step"] / numbers["rl.usd_per_million_generated_tokens"],
        "_rl.rollouts_per_step": numbers["rl.rollouts_per_kwh"] * numbers["rl.energy_kwh_per_step"],
    }


# --- the lifecycle ---------------------------------------------------------------------------------


def lifecycle_shape(s: Scenario) -> tuple[str, str, str]:
    """Which formula each stage of the lifecycle uses: pre-training (workload, cost, open), RL
    post-training (budget, steps, none) and task success (rate, curve, workflow)."""
    p, pt, ts = s.pretraining, s.post_training, s.task_success
    pre = "workload" if p.workload is not None else "cost" if p.cost_usd is not None else "open"
    post = "none" if pt is None else "budget" if pt.budget_usd_per_year is not None else "steps"
    success = (
        "rate" if ts.success_rate is not None else "curve" if ts.learning_curve is not None else "workflow"
    )
    return pre, post, success


def lifecycle_terms(s: Scenario) -> Numbers:
    """The scenario's own numbers for one physics point. The volume fields (tasks per day, the
    horizon, the amortisation, a given pre-training cost, the RL budget, the site) are kept as
    given, so a sweep that varies one puts its values in their place (:data:`VOLUME`); the RL
    schedule is the RL block's run (``rl.run.steps_per_refresh`` x ``rl.run.refreshes_per_year``:
    the scenario's schedule, else its RL workload's, as
    :func:`~ipd_cli.engine.lifecycle.post_training` takes them)."""
    p, pt, ts, sv, H = s.pretraining, s.post_training, s.task_success, s.serving, s.horizon_years
    out: Numbers = {
        "_life.H": H,
        "_life.m": float(ts.max_attempts),
        "_life.tasks_per_day": sv.tasks_per_day,
        "_life.requests_per_task": float(sv.requests_per_task),
        "_life.output_tokens": float(sv.output_tokens_per_request),
    }
    if p.workload is not None or p.cost_usd is not None:
        out["_life.amortisation_years"] = p.amortisation_years
        out["_life.deployments"] = p.deployments
        out["_life.pre_cost_usd"] = p.cost_usd if p.cost_usd is not None else 0.0
    if pt is not None:
        out["_life.rl_budget"] = pt.budget_usd_per_year if pt.budget_usd_per_year is not None else 0.0
    if ts.success_rate is not None:
        out["_life.p"] = ts.success_rate.value
    elif ts.learning_curve is not None:
        lc = ts.learning_curve
        out |= {"_life.r0": lc.r0, "_life.A": lc.asymptote, "_life.x_mid": lc.midpoint_samples}
        out["_life.B"] = lc.exponent
    else:
        out["_life.p"] = f.workflow_success(*ts.reliability_and_steps())
    if s.site_mw is not None:
        out["_life.site_mw"] = s.site_mw
    return out


# A workload field that only scales what the lifecycle (or an RL run) costs, by its ``--set`` path,
# -> the number it sets (a sweep puts its values there, per row, instead of searching again). No
# search reads one but the serving deployment's, which only chooses again for the row's traffic
# (lifecycle.ServingSizer, every traffic at once; the grid of its search is the physics point's); the
# RL split by the step, not by the schedule or budget (rl.result reads them only for rl.run;
# lifecycle.post_training multiplies by them); the pre-training plan by its pretrain workload, not
# by the horizon, amortisation, deployments or a given cost (pretraining_share); the site budget
# only divides the chosen deployment's power (site_budget).
VOLUME = {
    "workload.serving.tasks_per_day": "_life.tasks_per_day",
    "workload.serving.requests_per_task": "_life.requests_per_task",
    "workload.horizon_years": "_life.H",
    "workload.pretraining.amortisation_years": "_life.amortisation_years",
    "workload.pretraining.deployments": "_life.deployments",
    "workload.pretraining.cost_usd": "_life.pre_cost_usd",
    "workload.post_training.steps_per_refresh": "rl.run.steps_per_refresh",
    "workload.post_training.refreshes_per_year": "rl.run.refreshes_per_year",
    "workload.post_training.budget_usd_per_year": "_life.rl_budget",
    "workload.site_mw": "_life.site_mw",
    # an RL workload swept alone: its run
    "workload.steps_per_refresh": "rl.run.steps_per_refresh",
    "workload.refreshes_per_year": "rl.run.refreshes_per_year",
}
BUDGET = "workload.post_training.budget_usd_per_year"
REFRESHES = "workload.post_training.refreshes_per_year"


DEFINED = "_defined."  # a sweep row's own: whether a serving metric exists at the row's traffic


def lifecycle(shape: tuple[str, str, str], m: Numbers, price: Any, kw: Any, pue: Any) -> Numbers:
    """The intelligence-per-dollar block from the (re-priced) pre-training, RL and serving
    numbers: :func:`~ipd_cli.engine.lifecycle.pretraining_share`, ``post_training``,
    ``task_success``, ``serving_share``, ``headline`` and ``site_budget``, over arrays; with the
    serving block of each row's traffic (``_life.serving``), re-priced. ``price`` is the GPU-hour
    of the serving deployment, kept around the clock (under ``tco`` the owning cost at
    utilisation 1: :func:`~ipd_cli.engine.pricing.usd_per_gpu_hour` ``always_on``)."""
    import numpy as np

    with np.errstate(all="ignore"):  # a point out of range ends as inf or NaN, refused by the sweep
        return _lifecycle(shape, m, price, kw, pue)


def _lifecycle(shape: tuple[str, str, str], m: Numbers, price: Any, kw: Any, pue: Any) -> Numbers:
    import numpy as np

    pre_kind, post_kind, success_kind = shape
    H = m["_life.H"]
    zero = 0.0 * H
    pre_usd, pre_mwh = _pretraining_share(pre_kind, m, zero)
    post_usd, post_mwh, samples = _post_training(post_kind, m, H, zero)
    out, p = _success_per_attempt(success_kind, m, samples, post_usd, zero)
    _, attempts = _attempts(m, p)
    traffic = f.output_tokens_per_day(
        m["_life.tasks_per_day"], attempts, m["_life.requests_per_task"], m["_life.output_tokens"]
    )
    # no success rate (RL cannot run where success follows its learning curve): no traffic, and the
    # row keeps its point's own deployment (the most tokens/s per GPU), as the single estimate does
    traffic = np.where(np.isnan(p), np.nan, traffic)
    served = m["_life.serving"](traffic)  # the deployment each row's traffic takes
    none = ~np.isfinite(traffic)
    if np.any(none):
        for name, column in served.items():
            own = True if name.startswith(DEFINED) else m.get(name)
            if own is not None:
                served[name] = np.where(none, own, column)
    served |= serving(served, price, kw, pue)
    out |= served
    m = {**m, **served}
    out |= _headline(m, price, kw, pue, p, (pre_usd, post_usd), (pre_mwh, post_mwh), samples)
    if post_kind != "none":
        out["intelligence_per_dollar.rl_rollouts_per_kwh"] = m["rl.rollouts_per_kwh"]
    if post_kind == "budget":  # the RL block's run is what the budget buys at these prices
        out |= _budget_run(m)
    if "_life.site_mw" in m:
        out |= _site_budget(m, kw, pue, p)
    return out


def _pretraining_share(pre_kind: str, m: Numbers, zero: Any) -> tuple[Any, Any]:
    """(USD, MWh) of the pre-training run this lifecycle carries (its amortised share)."""
    if pre_kind == "open":
        return zero, zero
    share = f.amortised_share(m["_life.H"], m["_life.amortisation_years"], m["_life.deployments"])
    if pre_kind == "workload":
        return m["pretraining.cost_usd"] * share, m["pretraining.energy_mwh"] * share
    return m["_life.pre_cost_usd"] * share, zero


def _budget_run(m: Numbers) -> Numbers:
    """rl.run of a yearly RL budget: the steps it buys at the re-priced cost per step
    (:func:`~ipd_cli.engine.lifecycle.post_training`)."""
    steps = m["rl.run.steps_per_refresh"]
    terms = _run_terms(m)
    refreshes = f.rl_steps_bought(m["_life.rl_budget"], m["rl.usd_per_step"], *terms) / steps
    run = f.rl_run(
        steps, refreshes, m["rl.step_seconds"], m["rl.gpu_hours_per_step"], m["rl.usd_per_step"],
        m["rl.energy_kwh_per_step"], terms[0], terms[1], terms[3],
    )  # fmt: skip
    return {f"rl.run.{k}": v for k, v in run.items() if k not in SCHEDULE or k == "refreshes_per_year"}


def _run_terms(m: Numbers) -> tuple[Any, Any, Any, Any]:
    """What a scheduled step pays beyond itself: the goodput, phi, the step's seconds and its share of
    the periodic evaluations and checkpoints (:func:`~ipd_cli.engine.formulas.run_step_cost_factor`)."""
    return (
        m["rl.run.goodput"], m["rl.run.staleness_steps_factor"], m["rl.step_seconds"],
        m["rl.run.periodic_s_per_step"],
    )  # fmt: skip


def _post_training(post_kind: str, m: Numbers, H: Any, zero: Any) -> tuple[Any, Any, Any]:
    """(USD, MWh, RL samples) of post-training over the horizon: a budget or a number of steps."""
    if post_kind == "none":
        return zero, zero, zero
    terms = _run_terms(m)
    if post_kind == "budget":
        steps_per_year = f.rl_steps_bought(m["_life.rl_budget"], m["rl.usd_per_step"], *terms)
    else:
        steps_per_year = m["rl.run.steps_per_refresh"] * m["rl.run.refreshes_per_year"]
    post_usd, post_mwh = f.post_training_cost(
        m["rl.usd_per_step"], m["rl.energy_kwh_per_step"], steps_per_year, H, *terms
    )
    return post_usd, post_mwh, m["_rl.samples_per_step"] * steps_per_year * H


def _success_per_attempt(
    success_kind: str, m: Numbers, samples: Any, post_usd: Any, zero: Any
) -> tuple[Numbers, Any]:
    """(the learning curve's score fields, or none; success per attempt)."""
    import numpy as np

    if success_kind != "curve":
        return {}, m["_life.p"] + zero
    r0 = m["_life.r0"]
    args = (r0, m["_life.A"], m["_life.x_mid"], m["_life.B"])
    score = f.learning_curve(samples, *args)
    points = f.points_per_kusd(score - r0, post_usd)
    return {
        "intelligence_per_dollar.score": score,
        "intelligence_per_dollar.score_points_per_kusd": np.where(post_usd > 0, points, np.nan),
    }, f.learning_curve_mean(samples, *args)  # the horizon's mean (lifecycle.task_success)


def _attempts(m: Numbers, p: Any) -> tuple[Any, Any]:
    """(success per task after up to m attempts, attempts a task takes on average)."""
    import numpy as np

    M = m["_life.m"]
    return f.success_after_retries(p, M), np.where(p > 0, f.expected_attempts(p, M), M)


def _headline(
    m: Numbers,
    price: Any,
    kw: Any,
    pue: Any,
    p: Any,
    costs: tuple[Any, Any],
    energies: tuple[Any, Any],
    samples: Any,
) -> Numbers:
    """Serving the tasks (the deployment for their traffic, around the clock), then the
    lifecycle's cost and energy per solved task."""
    (pre_usd, post_usd), (pre_mwh, post_mwh) = costs, energies
    per_task, attempts = _attempts(m, p)
    tasks = m["_life.tasks_per_day"] * f.DAYS_PER_YEAR * m["_life.H"]
    gpu_hours = f.deployment_gpu_hours(m["serving.gpus_for_traffic"], m["_life.H"])
    serve_usd = gpu_hours * price
    serve_mwh = f.energy_mwh(gpu_hours, kw, pue)
    solved = tasks * per_task
    total = pre_usd + post_usd + serve_usd
    energy = pre_mwh + post_mwh + serve_mwh
    ipd = "intelligence_per_dollar."
    return {
        ipd + "usd_per_solved_task": total / solved,
        ipd + "solved_tasks_per_kusd": f.per_kusd(solved, total),
        ipd + "solved_tasks_per_mwh": solved / energy,
        ipd + "lifecycle_cost_usd": total,
        ipd + "cost_breakdown_usd.pretraining": pre_usd,
        ipd + "cost_breakdown_usd.post_training": post_usd,
        ipd + "cost_breakdown_usd.serving": serve_usd,
        ipd + "energy_breakdown_mwh.pretraining": pre_mwh,
        ipd + "energy_breakdown_mwh.post_training": post_mwh,
        ipd + "energy_breakdown_mwh.serving": serve_mwh,
        ipd + "horizon_years": m["_life.H"],
        ipd + "tasks_attempted": tasks,
        ipd + "tasks_solved": solved,
        ipd + "success_per_attempt": p,
        ipd + "success_per_task": per_task,
        ipd + "expected_attempts": attempts,
        ipd + "rl_samples": samples,
    }


def _per_attempt(m: Numbers) -> Any:
    """Output tokens per task attempt: requests per task x output tokens per request."""
    return m["_life.requests_per_task"] * m["_life.output_tokens"]


def _site_budget(m: Numbers, kw: Any, pue: Any, p: Any) -> Numbers:
    """A site power budget filled with serving GPUs, and the tasks they solve per day."""
    per_task, attempts = _attempts(m, p)
    site_mw = m["_life.site_mw"]
    gpus = f.gpus_in_power_budget(site_mw, kw, pue, m["serving.gpus_per_system"])
    per_task_tokens = attempts * _per_attempt(m)
    tasks_per_day = f.tasks_per_day(gpus, m["serving.tokens_per_s_per_gpu"], per_task_tokens, per_task)
    return {
        "intelligence_per_dollar.site_mw": site_mw,
        "intelligence_per_dollar.site_gpus": gpus,
        "intelligence_per_dollar.site_tasks_solved_per_day": tasks_per_day,
    }
