"""Intelligence per dollar: a lifecycle scenario joined to tasks solved, per system.

Over a horizon of H years (README "What intelligence per dollar means here"):

* pre-training: the scenario's pretrain workload estimated on the system, times
  H / amortisation years / deployments sharing it (0 with open weights, or a given cost);
* post-training: the RL workload's $ per step times steps per refresh x refreshes per year
  x H (or a yearly RL budget, which then sets the steps);
* serving: tasks per day x 365 x H attempted; each attempt makes ``requests_per_task``
  calls of the given input/output tokens at the serving operating point's $ per output
  token (the throughput per GPU already pays for prefill); a failed attempt is retried
  up to ``max_attempts`` and costs its tokens;
* success per attempt p: measured, r^k for k steps of reliability r, or the learning
  curve's score at the RL samples of the horizon; success per task 1 - (1 - p)^m;
  expected attempts (1 - (1 - p)^m) / p.

usd_per_solved_task = lifecycle cost / tasks solved; solved_tasks_per_kusd its inverse
per thousand dollars; solved_tasks_per_mwh the same per MWh of all-in energy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.schema import Scenario

from . import formulas as f
from .inputs import Inputs
from .pretraining import estimate_workload
from .results import Assumption, CostBreakdown, IntelligencePerDollar, SystemResult

DAYS_PER_YEAR = 365.0


# --- formulas (plain arithmetic; arrays work too) -------------------------------------------------


def success_after_retries(p, attempts):
    return 1.0 - (1.0 - p) ** attempts


def expected_attempts(p, attempts):
    """Mean attempts per task when each succeeds with p and at most ``attempts`` are made."""
    return success_after_retries(p, attempts) / p


def workflow_success(step_reliability, steps):
    return step_reliability**steps


def learning_curve(x, r0, asymptote, midpoint, exponent):
    """ScaleRL's sigmoid: r0 at x = 0, rising to ``asymptote``; half way at ``midpoint``."""
    if x <= 0:
        return r0
    return r0 + (asymptote - r0) / (1.0 + (midpoint / x) ** exponent)


def amortised_share(horizon_years, amortisation_years, deployments):
    return horizon_years / amortisation_years / deployments


# --- explanation -----------------------------------------------------------------------------------


@dataclass
class Step:
    """One line of `ipd explain`: a number, its formula, and the inputs in it."""

    metric: str
    value: float
    formula: str
    inputs: dict[str, float] = field(default_factory=dict)


@dataclass
class Lifecycle:
    system: SystemResult
    steps: list[Step]


def estimate_lifecycle(
    cat: Catalog, hardware: str, scenario: Scenario, *, pricing: str = "rental", origin: str = "command line"
) -> Lifecycle:
    """Every block (pre-training, RL, serving) and the intelligence-per-dollar headline on one system."""
    from .rl import estimate_rl

    s = scenario
    system = cat.system(hardware)
    name = cat.canonical("systems", hardware)
    H = s.horizon_years
    steps: list[Step] = []
    assumptions: list[Assumption] = []

    # pre-training
    pre = None
    pre_cost = pre_energy = 0.0
    p = s.pretraining
    if p.workload is not None:
        w = cat.workloads[p.workload]
        r = estimate_workload(cat, hardware, w, pricing=pricing, origin=cat.origin("workloads", p.workload))
        pre, assumptions = r.pretraining, assumptions + r.assumptions
        share = amortised_share(H, p.amortisation_years, p.deployments)
        pre_cost, pre_energy = pre.cost_usd * share, pre.energy_mwh * share
        steps.append(
            Step(
                "pretraining_usd",
                pre_cost,
                "pretraining cost_usd x H / amortisation_years / deployments",
                {
                    "cost_usd": pre.cost_usd,
                    "H": H,
                    "amortisation_years": p.amortisation_years,
                    "deployments": p.deployments,
                },
            )
        )
    elif p.cost_usd is not None:
        pre_cost = p.cost_usd * amortised_share(H, p.amortisation_years, p.deployments)
        steps.append(
            Step(
                "pretraining_usd",
                pre_cost,
                "given cost_usd x H / amortisation_years / deployments",
                {
                    "cost_usd": p.cost_usd,
                    "H": H,
                    "amortisation_years": p.amortisation_years,
                    "deployments": p.deployments,
                },
            )
        )
    else:
        steps.append(Step("pretraining_usd", 0.0, "open weights: no pre-training cost"))

    # post-training (RL)
    rl = None
    post_cost = post_energy = samples = 0.0
    rollouts_per_kwh = None
    if s.post_training is not None:
        pt = s.post_training
        rw = cat.workloads[pt.workload].model_copy(update={"model": s.model})
        rr = estimate_rl(
            cat,
            hardware,
            rw,
            workload_name=pt.workload,
            pricing=pricing,
            origin=cat.origin("workloads", pt.workload),
        )
        rl, assumptions = rr.rl, assumptions + rr.assumptions
        per_step_samples = rl.samples_per_s * rl.step_seconds
        if pt.budget_usd_per_year is not None:
            steps_per_year = pt.budget_usd_per_year / rl.usd_per_step
            how = "budget_usd_per_year / usd_per_step"
        else:
            steps_per_year = (pt.steps_per_refresh or rw.steps_per_refresh) * (
                pt.refreshes_per_year or rw.refreshes_per_year
            )
            how = "steps_per_refresh x refreshes_per_year"
        post_cost = rl.usd_per_step * steps_per_year * H
        samples = per_step_samples * steps_per_year * H
        energy_kwh_per_step = rl.energy_kwh_per_step  # every generated rollout, kept or not
        post_energy = energy_kwh_per_step * steps_per_year * H / 1000
        rollouts_per_kwh = rl.rollouts_per_kwh
        steps.append(
            Step(
                "post_training_usd",
                post_cost,
                f"usd_per_step x steps_per_year ({how}) x H",
                {"usd_per_step": rl.usd_per_step, "steps_per_year": steps_per_year, "H": H},
            )
        )

    # task success
    ts = s.task_success
    score = points = None
    if ts.success_rate is not None:
        p_attempt = ts.success_rate.value
        steps.append(Step("success_per_attempt", p_attempt, f"measured ({ts.success_rate.source})"))
    elif ts.learning_curve is not None:
        lc = ts.learning_curve
        p_attempt = score = learning_curve(samples, lc.r0, lc.asymptote, lc.midpoint_samples, lc.exponent)
        if post_cost > 0:
            points = (score - lc.r0) * 100 / (post_cost / 1000)
        steps.append(
            Step(
                "success_per_attempt",
                p_attempt,
                "r0 + (A - r0) / (1 + (x_mid / x)^B), x = RL samples over the horizon",
                {
                    "x": samples,
                    "r0": lc.r0,
                    "A": lc.asymptote,
                    "x_mid": lc.midpoint_samples,
                    "B": lc.exponent,
                },
            )
        )
    else:
        p_attempt = workflow_success(ts.step_reliability, ts.steps_per_workflow)
        steps.append(
            Step(
                "success_per_attempt",
                p_attempt,
                "r^k",
                {"r": ts.step_reliability, "k": ts.steps_per_workflow},
            )
        )
    m = ts.max_attempts
    p_task = success_after_retries(p_attempt, m)
    attempts = expected_attempts(p_attempt, m) if p_attempt > 0 else float(m)
    steps.append(Step("success_per_task", p_task, "1 - (1 - p)^m", {"p": p_attempt, "m": m}))
    steps.append(Step("expected_attempts", attempts, "(1 - (1 - p)^m) / p", {"p": p_attempt, "m": m}))

    # serving
    sv = s.serving
    served = serve_point(cat, hardware, s.model, sv, pricing=pricing, origin=origin)
    serving, assumptions = served.serving, assumptions + served.assumptions
    tasks = sv.tasks_per_day * DAYS_PER_YEAR * H
    out_tokens_per_attempt = sv.requests_per_task * sv.output_tokens_per_request
    serve_tokens = tasks * attempts * out_tokens_per_attempt
    serve_cost = serve_tokens * serving.usd_per_million_output_tokens / 1e6
    serve_gpu_hours = serve_tokens / serving.tokens_per_s_per_gpu / f.SECONDS_PER_HOUR
    inp = Inputs(cat)
    pue = inp.read("economics.pue", "PUE")
    assumptions = assumptions + inp.trace.items
    serve_energy = f.energy_mwh(serve_gpu_hours, serving.kw_per_gpu, pue)
    steps.append(
        Step(
            "serving_usd",
            serve_cost,
            "tasks_per_day x 365 x H x expected_attempts x requests x output_tokens x usd_per_M_output / 1e6",
            {
                "tasks_per_day": sv.tasks_per_day,
                "H": H,
                "expected_attempts": attempts,
                "requests": sv.requests_per_task,
                "output_tokens": sv.output_tokens_per_request,
                "usd_per_M_output": serving.usd_per_million_output_tokens,
            },
        )
    )

    solved = tasks * p_task
    total = pre_cost + post_cost + serve_cost
    energy = pre_energy + post_energy + serve_energy
    steps.append(
        Step(
            "lifecycle_cost_usd",
            total,
            "pretraining + post_training + serving",
            {"pretraining": pre_cost, "post_training": post_cost, "serving": serve_cost},
        )
    )
    steps.append(
        Step(
            "tasks_solved",
            solved,
            "tasks_per_day x 365 x H x success_per_task",
            {"tasks_per_day": sv.tasks_per_day, "H": H, "success_per_task": p_task},
        )
    )
    steps.append(
        Step(
            "usd_per_solved_task",
            total / solved,
            "lifecycle_cost_usd / tasks_solved",
            {"lifecycle_cost_usd": total, "tasks_solved": solved},
        )
    )
    steps.append(
        Step(
            "solved_tasks_per_kusd",
            1000 * solved / total,
            "1000 x tasks_solved / lifecycle_cost_usd",
            {"tasks_solved": solved, "lifecycle_cost_usd": total},
        )
    )
    steps.append(
        Step(
            "solved_tasks_per_mwh",
            solved / energy,
            "tasks_solved / (pretraining + RL + serving MWh)",
            {
                "tasks_solved": solved,
                "pretraining_mwh": pre_energy,
                "post_training_mwh": post_energy,
                "serving_mwh": serve_energy,
            },
        )
    )

    site: dict[str, Any] = {}
    if s.site_mw is not None:
        gpus = int(s.site_mw * 1000 // (serving.kw_per_gpu * pue))
        per_day = (
            gpus
            * serving.tokens_per_s_per_gpu
            * f.SECONDS_PER_DAY
            / (attempts * out_tokens_per_attempt)
            * p_task
        )
        site = {"site_mw": s.site_mw, "site_gpus": gpus, "site_tasks_solved_per_day": per_day}
        steps.append(
            Step(
                "site_tasks_solved_per_day",
                per_day,
                "floor(site_MW x 1000 / (kW/GPU x PUE)) x tokens/s/GPU x 86400 / tokens per task x p_task",
                {
                    "site_mw": s.site_mw,
                    "kw_per_gpu": serving.kw_per_gpu,
                    "pue": pue,
                    "tokens_per_s_per_gpu": serving.tokens_per_s_per_gpu,
                },
            )
        )

    ipd = IntelligencePerDollar(
        usd_per_solved_task=total / solved,
        solved_tasks_per_kusd=1000 * solved / total,
        solved_tasks_per_mwh=solved / energy,
        lifecycle_cost_usd=total,
        cost_breakdown_usd=CostBreakdown(pretraining=pre_cost, post_training=post_cost, serving=serve_cost),
        energy_breakdown_mwh=CostBreakdown(
            pretraining=pre_energy, post_training=post_energy, serving=serve_energy
        ),
        horizon_years=H,
        tasks_attempted=tasks,
        tasks_solved=solved,
        success_per_attempt=p_attempt,
        success_per_task=p_task,
        expected_attempts=attempts,
        rl_samples=samples,
        score=score,
        score_points_per_kusd=points,
        rl_rollouts_per_kwh=rollouts_per_kwh,
        serving_target_met=serving.target_met,
        **site,
    )
    result = SystemResult(
        hardware=name,
        description=system.description,
        status=system.status,
        intelligence_per_dollar=ipd,
        pretraining=pre,
        rl=rl,
        serving=serving,
        assumptions=_dedupe(assumptions),
    )
    return Lifecycle(result, steps)


def serve_point(
    cat: Catalog, hardware: str, model: str, sv: Any, *, pricing: str = "rental", origin: str = ""
) -> Any:
    """A scenario's serving operating point on one system: its shape and interactivity target, at
    a precision the system supports, on the instance size with the most tokens/s per GPU."""
    from .serving import estimate_serving

    return estimate_serving(
        cat,
        hardware,
        model,
        input_tokens=sv.input_tokens_per_request,
        output_tokens=sv.output_tokens_per_request,
        precision=serving_precision(cat, hardware, sv.precision),
        tokens_per_user_s=sv.tokens_per_user_s,
        instance="best",
        pricing=pricing,
        origin=origin or "command line",
    )


def serving_precision(cat: Catalog, hardware: str, wanted: str | None) -> str | None:
    """A scenario's serving precision, or the next wider one the system supports (Hopper has no fp4),
    as pre-training does, so one scenario can compare every generation."""
    if wanted is None:
        return None
    from .pretraining import supported_precision

    return supported_precision(cat.accelerator_of(cat.system(hardware)), wanted)


def _dedupe(items: list[Assumption]) -> list[Assumption]:
    seen: set[tuple] = set()
    out = []
    for a in items:
        key = (a.name, a.path, str(a.value))
        if key not in seen:
            seen.add(key)
            out.append(a)
    return out
