"""Intelligence per dollar: a lifecycle scenario joined to tasks solved, per system.

Over a horizon of H years (README "What intelligence per dollar means here"):

* pre-training: the scenario's pretrain workload estimated on the system, times
  H / amortisation years / deployments sharing it (0 with open weights, or a given cost);
* post-training: the RL workload's $ per step times steps per refresh x refreshes per year
  x H (or a yearly RL budget, which then sets the steps);
* serving: tasks per day x 365 x H attempted; each attempt makes ``requests_per_task``
  calls of the given input/output tokens; a failed attempt is retried up to ``max_attempts``
  and costs its tokens. Their output tokens per day are the traffic the deployment is sized
  for (``serve --tokens-per-day``: the fewest GPUs, whole aggregated instances or disaggregated
  pools sized for it, at the interactivity target), and the deployment is rented around the
  clock: its GPUs x 8,760 h x H x the price per GPU-hour, its energy at its power;
* success per attempt p: measured, r^k for k steps of reliability r, or the learning
  curve's score at the RL samples of the horizon; success per task 1 - (1 - p)^m;
  expected attempts (1 - (1 - p)^m) / p.

usd_per_solved_task = lifecycle cost / tasks solved; solved_tasks_per_kusd its inverse
per thousand dollars; solved_tasks_per_mwh the same per MWh of all-in energy.

Each block is one function returning a small typed result (:func:`pretraining_share`,
:func:`post_training`, :func:`task_success`, :func:`serving_share`, :func:`headline`,
:func:`site_budget`). A stage that cannot run on a system (the model does not fit, the
deadline cannot be met) leaves its block null with an :class:`Infeasible` note naming the
stage, and the headline that needs it says so; the other blocks are still computed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.plausibility import MONTHS_LIKE_YEARS
from ipd_cli.catalog.schema import PretrainWorkload, RlWorkload, Scenario
from ipd_cli.errors import ExitCode, InfeasibleError, InputError, IpdError

from . import formulas as f
from .formulas import (  # noqa: F401 - the lifecycle formulas, importable from here as before
    DAYS_PER_YEAR,
    amortised_share,
    expected_attempts,
    learning_curve,
    success_after_retries,
    workflow_success,
)
from .inputs import Inputs
from .pretraining import estimate_workload
from .results import (
    Assumption,
    CostBreakdown,
    Infeasible,
    IntelligencePerDollar,
    Pretraining,
    Rl,
    RlRun,
    Serving,
    SystemResult,
)

T = TypeVar("T")

# --- explanation -----------------------------------------------------------------------------------


@dataclass
class Step:
    """One line of `ipd explain`: a number, its formula, and the inputs in it."""

    metric: str
    value: float
    formula: str
    inputs: Mapping[str, float | str] = field(default_factory=dict)


@dataclass
class Lifecycle:
    system: SystemResult
    steps: list[Step]


# --- the blocks ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PretrainShare:
    """Pre-training as the horizon pays for it: the run (when computed here) and its share."""

    block: Pretraining | None
    cost_usd: float
    energy_mwh: float
    assumptions: list[Assumption]
    step: Step


@dataclass(frozen=True)
class PostTraining:
    """RL post-training over the horizon: the step estimate, its cost, energy and samples."""

    block: Rl | None
    cost_usd: float
    energy_mwh: float
    samples: float
    assumptions: list[Assumption]
    steps: list[Step]


NO_POST_TRAINING = PostTraining(None, 0.0, 0.0, 0.0, [], [])


@dataclass(frozen=True)
class Success:
    """Task success: per attempt, per task after retries, attempts per task, learning-curve score."""

    per_attempt: float
    per_task: float
    attempts: float
    score: float | None
    points_per_kusd: float | None
    steps: list[Step]


@dataclass(frozen=True)
class ServingShare:
    """Serving the horizon's tasks on the deployment sized for their traffic, around the clock."""

    block: Serving
    cost_usd: float
    energy_mwh: float
    tasks_attempted: float
    tokens_per_attempt: float
    pue: float
    assumptions: list[Assumption]
    steps: list[Step]


def pretraining_share(cat: Catalog, hardware: str, s: Scenario, pricing: str) -> PretrainShare:
    """The pre-training run on this system (or the given cost) times H / amortisation / deployments."""
    p, H = s.pretraining, s.horizon_years
    share = f.amortised_share(H, p.amortisation_years, p.deployments)
    terms = {"H": H, "amortisation_years": p.amortisation_years, "deployments": p.deployments}
    if p.workload is not None:
        origin = cat.origin("workloads", p.workload)
        r = estimate_workload(
            cat, hardware, stage_workload(cat, s, "pretraining"), pricing=pricing, origin=origin
        )
        pre = r.pretraining
        how = "pretraining cost_usd x H / amortisation_years / deployments"
        step = Step("pretraining_usd", pre.cost_usd * share, how, {"cost_usd": pre.cost_usd, **terms})
        assumptions = nested_paths(r.assumptions, "pretraining")
        return PretrainShare(pre, pre.cost_usd * share, pre.energy_mwh * share, assumptions, step)
    if p.cost_usd is not None:
        how = "given cost_usd x H / amortisation_years / deployments"
        step = Step("pretraining_usd", p.cost_usd * share, how, {"cost_usd": p.cost_usd, **terms})
        return PretrainShare(None, p.cost_usd * share, 0.0, [], step)
    return PretrainShare(
        None, 0.0, 0.0, [], Step("pretraining_usd", 0.0, "open weights: no pre-training cost")
    )


def nested_paths(assumptions: list[Assumption], stage: str) -> list[Assumption]:
    """A stage's workload inputs under the path that reaches them in a scenario
    (``workload.tokens`` of its pretrain workload is ``workload.pretraining.tokens``)."""
    out = []
    for a in assumptions:
        if a.path and a.path.startswith("workload.") and not a.path.startswith(f"workload.{stage}."):
            a = a.model_copy(update={"path": f"workload.{stage}.{a.path.removeprefix('workload.')}"})
        out.append(a)
    return out


def stage_workload(cat: Catalog, s: Scenario, stage: str, **update: Any) -> Any:
    """The workload a scenario's stage (``pretraining``, ``post_training``) runs: the one it names,
    on the scenario's model (``update``: more fields of the scenario's). A stage's workload is a
    recipe (tokens, deadline, batch, rollouts); the scenario decides what is trained and served, so
    every stage runs one model."""
    ref = getattr(s, stage).workload
    return cat.workload(ref).model_copy(update={"model": s.model, **update})


def stage_model_notes(cat: Catalog, s: Scenario) -> list[str]:
    """A line when the scenario's pretrain workload names another model than the one it runs
    (:func:`stage_workload`): its tokens and deadline were written for that model. RL workloads
    are generic recipes (a built-in scenario runs one on another model): no line for them. And a
    line when the horizon outlasts the pre-training's amortisation (it pays for more than one run)."""
    p, H = s.pretraining, s.horizon_years
    out = []
    paid = not p.open_weights  # a computed or given cost (exactly one of the three: the schema)
    if paid and H > p.amortisation_years:
        # a review: cost x H / amortisation charged 3 runs of a model "paid once", without a word
        out.append(
            f"the {H:g}-year horizon outlasts the pre-training's {p.amortisation_years:g}-year "
            f"amortisation: it pays for {H / p.amortisation_years:.3g} runs (a model replaced every "
            f"{p.amortisation_years:g} year(s)), shared by {p.deployments:g} deployment(s); "
            "amortisation_years >= horizon_years pays for one"
        )
    if paid and p.amortisation_years > MONTHS_LIKE_YEARS:
        # a review: 24 (months, meant) was taken silently as 24 years
        out.append(
            f"pre-training is amortised over {p.amortisation_years:g} years (amortisation_years is in "
            f"years: {p.amortisation_years:g} months would be {p.amortisation_years / 12:.3g})"
        )
    if s.serving.tokens_per_user_s is None:
        # a procurement review: a scenario without a target served Rubin at 9.5 tokens/s per user
        # and moved the ratio 1.55x -> 1.31x, without a word
        out.append(
            "the scenario's serving gives no tokens_per_user_s: each system serves at its deployment's "
            "maximum throughput, at whatever speed per user that gives (serving.tokens_per_s_per_user), "
            "so the systems are not compared at one speed; set serving.tokens_per_user_s to compare "
            "them at one"
        )
    return _other_model_notes(cat, s) + out


def _other_model_notes(cat: Catalog, s: Scenario) -> list[str]:
    ref = s.pretraining.workload
    if ref is None:
        return []
    named = cat.canonical("models", cat.workload(ref).model)
    if named == cat.canonical("models", s.model):
        return []
    return [
        f"pre-training runs {ref}'s recipe (tokens, deadline, precision) on the scenario's model "
        f"{s.model}, not the {named} that workload names (pretraining.model says which)"
    ]


def rl_workload(cat: Catalog, s: Scenario) -> RlWorkload:
    """The scenario's RL workload on its model, with the scenario's schedule."""
    assert s.post_training is not None
    pt = s.post_training
    cat.rl_workload(pt.workload)  # an rl one
    update: dict[str, Any] = {}
    # the scenario's schedule, so the RL block's run (rl.run) is the one the lifecycle prices
    if pt.steps_per_refresh is not None:
        update["steps_per_refresh"] = pt.steps_per_refresh
    if pt.refreshes_per_year is not None:
        update["refreshes_per_year"] = pt.refreshes_per_year
    return stage_workload(cat, s, "post_training", **update)


def rl_at_supported_precision(cat: Catalog, hardware: str, rw: RlWorkload, **kw: Any) -> Any:
    """An RL step (:func:`~ipd_cli.engine.rl.estimate_rl`, ``kw`` passed on) whose rollouts
    generate at the workload's inference_precision, or the next wider one the system supports
    (A100 has no fp8: bf16), as a scenario's serving and pre-training do; the result names the
    asked one (``generation_precision_requested``). A scenario's RL stage and an RL workload
    compared alone both run this, so a comparison stays like-for-like for the other systems
    (``ipd rl`` on one system refuses instead, naming the fix)."""
    from .rl import estimate_rl

    asked = rw.inference_precision
    precision = serving_precision(cat, hardware, asked)
    if precision == asked:
        return estimate_rl(cat, hardware, rw, **kw)
    rr = estimate_rl(cat, hardware, rw.model_copy(update={"inference_precision": precision}), **kw)
    return rr.model_copy(update={"rl": rr.rl.model_copy(update={"generation_precision_requested": asked})})


# a `sets` path an RL workload's message names: workload.X (its own field), or a path the message
# already gives in the scenario's form (workload.post_training.sync_transport, where the --set was
# given so: it read workload.post_training.post_training.sync_transport)
_RL_SET_PATH = re.compile(r"`sets` workload\.([a-z_]+)")


def _rl_stage_path(m: re.Match) -> str:
    """``sets`` workload.X as the scenario's RL stage field (workload.post_training.X); a path
    already under a stage, or the scenario's model, stays as it is."""
    name = m.group(1)
    if name in _STAGE_FIELDS or name == "model" or name not in RlWorkload.model_fields:
        return m.group(0)
    return f"`sets` workload.post_training.{name}"


# steps' worth a scheduled RL step costs (formulas.run_step_cost_factor), as explain writes it
RUN_STEP_COST = "staleness_steps_factor / goodput x (1 + periodic_s_per_step / step_seconds)"


def _run_cost_inputs(rl: Rl) -> dict[str, float | str]:
    """The inputs of :data:`RUN_STEP_COST` for an RL block."""
    run = rl.run
    return {
        "staleness_steps_factor": run.staleness_steps_factor,
        "goodput": run.goodput,
        "periodic_s_per_step": run.periodic_s_per_step,
        "step_seconds": rl.step_seconds,
    }


def post_training(cat: Catalog, hardware: str, s: Scenario, pricing: str) -> PostTraining:
    """$ per RL step x steps per year (refreshes, or what the yearly budget buys) x H."""
    pt, H = s.post_training, s.horizon_years
    if pt is None:
        return NO_POST_TRAINING
    rw = rl_workload(cat, s)
    origin = cat.origin("workloads", pt.workload)
    kw = dict(workload_name=pt.workload, pricing=pricing, origin=origin)
    try:
        rr = rl_at_supported_precision(cat, hardware, rw, **kw)
    except InputError as e:  # a fix an RL workload names (`sets` workload.X), as the stage's field
        raise InputError(_RL_SET_PATH.sub(_rl_stage_path, str(e))) from None
    rl = rr.rl
    # prompts x group (whole numbers), back from the rate without its rounding (614,399.9999999999);
    # a rate that is not finite (extreme inputs) stays as it is, refused with the result
    per_step_samples = _step_samples(rl)
    run = rl.run
    # a scheduled step pays phi / goodput steps, each lengthened by its share of the periodic
    # evaluations and checkpoints
    terms = (run.goodput, run.staleness_steps_factor, rl.step_seconds, run.periodic_s_per_step)
    if pt.budget_usd_per_year is not None:
        steps_per_year = f.rl_steps_bought(pt.budget_usd_per_year, rl.usd_per_step, *terms)
        how = f"budget_usd_per_year / (usd_per_step x {RUN_STEP_COST})"
    else:
        steps_per_year = (pt.steps_per_refresh or rw.steps_per_refresh) * (
            pt.refreshes_per_year or rw.refreshes_per_year
        )
        how = "steps_per_refresh x refreshes_per_year"
    if pt.budget_usd_per_year is not None:  # the run the budget buys, in the RL block too
        steps = rl.run.steps_per_refresh
        bought = f.rl_run(
            steps, steps_per_year / steps, rl.step_seconds, rl.gpu_hours_per_step, rl.usd_per_step,
            rl.energy_kwh_per_step, run.goodput, run.staleness_steps_factor, run.periodic_s_per_step,
        )  # fmt: skip
        rl = rl.model_copy(update={"run": RlRun(**(run.model_dump() | bought))})
    cost, energy = f.post_training_cost(rl.usd_per_step, rl.energy_kwh_per_step, steps_per_year, H, *terms)
    step = Step(
        "post_training_usd",
        cost,
        f"usd_per_step x {RUN_STEP_COST} x steps_per_year ({how}) x H",
        {"usd_per_step": rl.usd_per_step, **_run_cost_inputs(rl), "steps_per_year": steps_per_year, "H": H},
    )
    assumptions = nested_paths(rr.assumptions, "post_training")
    return PostTraining(rl, cost, energy, per_step_samples * steps_per_year * H, assumptions, [step])


def task_success(s: Scenario, rl_samples: float, post_training_usd: float) -> Success:
    """Success per attempt (measured, r^k, or the learning curve at the horizon's RL samples),
    then per task after up to m attempts, and the attempts a task takes on average."""
    ts = s.task_success
    score = points = None
    if ts.success_rate is not None:
        p = ts.success_rate.value
        # the scenario's given rate: "measured" only where it is not flagged an estimate (a claim
        # audit: the frontier scenario's, a leaderboard's top score taken for a what-if model)
        how = "given, an estimate" if ts.success_rate.estimate else "measured"
        first = Step("success_per_attempt", p, f"{how} ({ts.success_rate.source})")
    elif ts.learning_curve is not None:
        lc = ts.learning_curve
        args = (lc.r0, lc.asymptote, lc.midpoint_samples, lc.exponent)
        score = f.learning_curve(rl_samples, *args)  # reached at the horizon's end
        p = f.learning_curve_mean(rl_samples, *args)  # what the horizon's tasks see, on average
        if post_training_usd > 0:
            points = f.points_per_kusd(score - lc.r0, post_training_usd)
        curve = {
            "x": rl_samples,
            "r0": lc.r0,
            "A": lc.asymptote,
            "x_mid": lc.midpoint_samples,
            "B": lc.exponent,
        }
        how = (
            "the mean over u from 0 to 1 of r0 + (A - r0) / (1 + (x_mid / (x u))^B), x = RL samples "
            "over the horizon, accruing evenly (the score at x, reached on its last day, is `score`)"
        )
        first = Step("success_per_attempt", p, how, curve)
    else:
        r, k = ts.reliability_and_steps()
        p = f.workflow_success(r, k)
        first = Step("success_per_attempt", p, "r^k", {"r": r, "k": k})
    m = ts.max_attempts
    per_task = f.success_after_retries(p, m)
    attempts = f.expected_attempts(p, m) if p > 0 else float(m)
    steps = [
        first,
        Step("success_per_task", per_task, "1 - (1 - p)^m", {"p": p, "m": m}),
        Step("expected_attempts", attempts, "(1 - (1 - p)^m) / p", {"p": p, "m": m}),
    ]
    return Success(p, per_task, attempts, score, points, steps)


def serving_share(cat: Catalog, s: Scenario, served: Any, success: Success) -> ServingShare:
    """The deployment sized for the horizon's traffic (``served``: :func:`serve_point` at
    :func:`traffic_per_day`), rented around the clock: GPUs x hours of the horizon x price, and
    its energy at its power."""
    sv, H, point = s.serving, s.horizon_years, served.serving
    tasks = sv.tasks_per_day * f.DAYS_PER_YEAR * H
    per_attempt = sv.requests_per_task * sv.output_tokens_per_request
    inp = Inputs(cat)
    pue = inp.read("economics.pue", "PUE")
    gpus = point.gpus_for_traffic
    assert gpus is not None, "the scenario's serving point is sized for its traffic"
    gpu_hours = f.deployment_gpu_hours(gpus, H)
    cost = gpu_hours * point.price_usd_per_gpu_hour
    energy = f.energy_mwh(gpu_hours, point.kw_per_gpu, pue)
    return ServingShare(
        point,
        cost,
        energy,
        tasks,
        per_attempt,
        pue,
        [*served.assumptions, *inp.trace.items],
        _serving_steps(sv, success, point, H, cost),
    )


def traffic_per_day(sv: Any, success: Success) -> float:
    """Output tokens per day of a scenario's serving: tasks x expected attempts x requests x tokens."""
    return f.output_tokens_per_day(
        sv.tasks_per_day, success.attempts, sv.requests_per_task, sv.output_tokens_per_request
    )


def _serving_steps(sv: Any, success: Success, point: Serving, H: float, cost: float) -> list[Step]:
    """``serving_usd`` from the traffic, through the deployment's GPUs (explain)."""
    per_day = traffic_per_day(sv, success)
    per_s = per_day / f.SECONDS_PER_DAY
    return [
        Step(
            "serving.traffic_output_tokens_per_s",
            per_s,
            "tasks_per_day x expected_attempts x requests x output_tokens / 86400",
            {
                "tasks_per_day": sv.tasks_per_day,
                "expected_attempts": success.attempts,
                "requests": sv.requests_per_task,
                "output_tokens": sv.output_tokens_per_request,
            },
        ),
        *serving_point_steps(point),
        _traffic_gpus_step(point, per_s),
        Step(
            "serving.systems_for_traffic",
            point.systems_for_traffic or 0,
            "ceil(gpus_for_traffic / gpus_per_system): whole nodes or racks, the instances packed; "
            "the last one's other GPUs are not priced (GPUs are priced one by one)",
            {"gpus_for_traffic": point.gpus_for_traffic or 0, "gpus_per_system": point.gpus_per_system},
        ),
        Step(
            "serving.usd_per_million_output_tokens_at_traffic",
            point.usd_per_million_output_tokens_at_traffic or 0.0,
            "price_usd_per_gpu_hour x gpus_for_traffic / (traffic_output_tokens_per_s x 3600) x 1e6 "
            "(the traffic's tokens on the GPUs kept for it around the clock)",
            {
                "price_usd_per_gpu_hour": point.price_usd_per_gpu_hour,
                "gpus_for_traffic": point.gpus_for_traffic or 0,
                "traffic_output_tokens_per_s": per_s,
            },
        ),
        Step(
            "serving_usd",
            cost,
            "gpus_for_traffic x 8760 x H x price_usd_per_gpu_hour (kept around the clock: a rental "
            "price, or the owning cost over every hour, utilisation 1)",
            {
                "gpus_for_traffic": point.gpus_for_traffic or 0,
                "H": H,
                "price_usd_per_gpu_hour": point.price_usd_per_gpu_hour,
            },
        ),
    ]


def serving_point_steps(point: Serving) -> list[Step]:
    """A serving point's own lines (its step, speed, latency, prefill and price per token), which
    need no traffic."""
    return [
        *decode_steps(point),
        *_latency_steps(point),
        *_prefill_steps(point),
        *_prefill_queue_steps(point),
        Step(
            "serving.usd_per_million_output_tokens",
            point.usd_per_million_output_tokens,
            "price_usd_per_gpu_hour / (tokens_per_s_per_gpu x 3600) x 1e6 (SemiAnalysis InferenceMAX's "
            "identity; every GPU of the deployment at the point, prefill pool included)",
            {
                "price_usd_per_gpu_hour": point.price_usd_per_gpu_hour,
                "tokens_per_s_per_gpu": point.tokens_per_s_per_gpu,
            },
        ),
        Step(
            "serving.total_tokens_per_s_per_gpu",
            point.total_tokens_per_s_per_gpu,
            "tokens_per_s_per_gpu x (input_tokens + output_tokens) / output_tokens (a request's new "
            "prompt and its output; its cached context not)",
            {
                "tokens_per_s_per_gpu": point.tokens_per_s_per_gpu,
                "input_tokens": point.input_tokens,
                "output_tokens": point.output_tokens,
            },
        ),
        Step(
            "serving.usd_per_million_total_tokens",
            point.usd_per_million_total_tokens,
            "price_usd_per_gpu_hour / (total_tokens_per_s_per_gpu x 3600) x 1e6",
            {
                "price_usd_per_gpu_hour": point.price_usd_per_gpu_hour,
                "total_tokens_per_s_per_gpu": point.total_tokens_per_s_per_gpu,
            },
        ),
    ]


def _prefill_steps(point: Serving) -> list[Step]:
    """What a request's prompt costs the instance that prefills it (an explain review: it sizes the
    prefill pool, 7,776 of Rubin's 11,088 GPUs, and had no row)."""
    if point.prefill_instance_s is None:
        return []
    where = point.prefill_configuration or point.configuration
    physics = (
        "the new prompt tokens' dense and attention FLOPs (attending to the cached context too) at the "
        "prefill GEMM rate and its routed experts' at the prefill MoE rate, plus its all-reduces and "
        "dispatches over the instance's links (two-batch overlap where the stack runs it and it is "
        "shorter); "
    )
    use = (
        "a pool of traffic_requests_per_s x prefill_instance_s instances keeps up (serving.gpus_for_traffic)"
        if point.disaggregated
        else "the prefills take turns with decode on the instance (tokens_per_s_per_gpu)"
    )
    inputs: dict[str, Any] = {
        "input_tokens": point.input_tokens,
        "context_tokens": point.context_tokens,
        "prefill_instance_gpus": point.prefill_instance_gpus or point.instance_gpus,
        "prefill_two_batch_overlap": int(bool(point.prefill_two_batch_overlap)),
    }
    how = f"seconds of a {where} instance per request: {physics}{use}"
    if point.prompt_stall is not None:  # a stack release's stall: the larger of the two
        prompt_s, stall_s = point.prompt_stall
        how = (
            f"max(prompt_s, prompt_stall_s): prompt_s, the seconds of a {where} instance per request: "
            f"{physics}prompt_stall_s, the least time an iteration holding a prompt takes under "
            f"{point.stack} {point.stack_release} (its prompt stall per aggregated iteration); {use}"
        )
        release = {"prompt_s": prompt_s, "prompt_stall_s": stall_s, "stack_release": point.stack_release}
        inputs = {**release, **inputs}
    return [Step("serving.prefill_instance_s", point.prefill_instance_s, how, inputs)]


def _prefill_queue_steps(point: Serving) -> list[Step]:
    """At a traffic, a request's waits for a prefill instance (disaggregated) and for a sequence
    slot, and the TTFT with them (a capacity planner's audit: pools sized at 92-99 % utilisation
    printed a TTFT with no queueing)."""
    if point.ttft_at_traffic_s is None:
        return []
    copies = point.instances_for_traffic or 1
    share = f"; the {copies} copies' servers behind one router" if copies > 1 else ""
    pre = point.prefill_queue_s
    steps = []
    if pre is not None:
        steps.append(Step(
            "serving.prefill_queue_s",
            pre,
            "M/D/c mean wait, Poisson arrivals at lambda = traffic_requests_per_s, service S = "
            "prefill_instance_s, c = instances_for_traffic x prefill_instances, a = "
            "lambda x S, rho = a / c: 1/2 x C(c, a) x S / (c - a) x (1 + (1 - rho) (c - 1) "
            "(sqrt(4 + 5c) - 2) / (16 rho c)) (Cosmetatos 1976; C(c, a) Erlang C; exact for c = 1: "
            "rho S / (2 (1 - rho)))" + share,
            _prefill_inputs(point, copies),
        ))  # fmt: skip
    slot = point.slot_queue_s or 0.0
    steps.append(Step(
        "serving.slot_queue_s",
        slot,
        "the same M/D/c mean wait for a free sequence slot: lambda = traffic_requests_per_s, S = "
        "output_tokens / tokens_per_s_per_user (the seconds a request holds its slot, Little's law), "
        "c = instances_for_traffic x decode_instances x concurrency" + share,
        _slot_inputs(point, copies),
    ))  # fmt: skip
    parts = {"ttft_s": point.ttft_s, "slot_queue_s": slot}
    how = "ttft_s + slot_queue_s (the mean time to first token at the traffic; no prefill pool)"
    if pre is not None:
        parts = {"ttft_s": point.ttft_s, "prefill_queue_s": pre, "slot_queue_s": slot}
        how = "ttft_s + prefill_queue_s + slot_queue_s (the mean time to first token at the traffic)"
    steps.append(Step("serving.ttft_at_traffic_s", point.ttft_at_traffic_s, how, parts))
    return steps + _prefill_pool_steps(point, copies)


def _prefill_inputs(point: Serving, copies: int) -> dict[str, Any]:
    """The inputs of the prefill queue's wait and utilisation at the traffic."""
    return {
        "traffic_requests_per_s": point.traffic_requests_per_s or 0.0,
        "instances_for_traffic": copies,
        "prefill_instance_s": point.prefill_instance_s,
        "prefill_instances": point.prefill_instances,
    }


def _slot_inputs(point: Serving, copies: int) -> dict[str, Any]:
    """The inputs of the sequence-slot queue's wait and utilisation at the traffic."""
    return {
        "traffic_requests_per_s": point.traffic_requests_per_s or 0.0,
        "instances_for_traffic": copies,
        "output_tokens": point.output_tokens,
        "tokens_per_s_per_user": point.tokens_per_s_per_user,
        "decode_instances": point.decode_instances,
        "concurrency": point.concurrency,
    }


def _prefill_pool_steps(point: Serving, copies: int) -> list[Step]:
    """The queues' utilisations at the traffic, and the target the deployment was sized for."""
    steps = []
    if point.prefill_utilisation is not None:
        steps.append(Step(
            "serving.prefill_utilisation",
            point.prefill_utilisation,
            "traffic_requests_per_s / instances_for_traffic x prefill_instance_s / prefill_instances",
            _prefill_inputs(point, copies),
        ))  # fmt: skip
    if point.slot_utilisation is not None:
        steps.append(Step(
            "serving.slot_utilisation",
            point.slot_utilisation,
            "traffic_requests_per_s / instances_for_traffic x output_tokens / tokens_per_s_per_user / "
            "(decode_instances x concurrency): sequences in flight over the slots (Little's law)",
            _slot_inputs(point, copies),
        ))  # fmt: skip
    if point.ttft_target_s is None:
        return steps
    how = (
        "the fewest GPUs whose ttft_at_traffic_s is within it: a disaggregated deployment's "
        "prefill_instances and decode_instances (each queue's wait falls as its pool grows; the "
        "wait budget, ttft_target_s - ttft_s, tried at each pool's least stable count and split "
        "in half), or the fewest instances_for_traffic copies of an aggregated instance or of "
        "pinned pools (their servers behind one router: the waits fall as copies are added)"
        if point.ttft_target_met
        else "no configuration's ttft_s is below ttft_target_s: every queue at its least stable "
        "count (rho < 1)"
    )
    steps.append(Step(
        "serving.ttft_target_s",
        point.ttft_target_s,
        "the mean time to first token at the traffic the deployment is sized for: " + how,
        {"ttft_target_s": point.ttft_target_s},
    ))  # fmt: skip
    return steps


def _latency_steps(point: Serving) -> list[Step]:
    """Time per output token from the decode step, and time to first token (a claim audit: the
    table printed both and `ipd explain` had no row for them)."""
    spec = point.speculative_speedup
    if point.disaggregated:
        tpot = Step(
            "serving.tpot_ms",
            point.tpot_ms,
            "step_time_ms / speculative_speedup (each decode step gives every sequence "
            "speculative_speedup tokens; the prompts run on the prefill pool)",
            {"step_time_ms": point.step_time_ms, "speculative_speedup": spec},
        )
        ttft = (
            "a lone prompt on a prefill instance, no queueing (at a traffic the pool's wait is "
            "serving.prefill_queue_s): its layers (each at least the floor its "
            "kernels need), its all-reduces and dispatches from its one attention rank, the hand-offs "
            "between its stages, then its KV cache's hand-off to the decode instance"
        )
    else:
        prefill_s = point.prefill_instance_s or 0.0
        tpot = Step(
            "serving.tpot_ms",
            point.tpot_ms,
            "((concurrency - 1) x prefill_instance_s x 1000 + output_tokens x step_time_ms / "
            "speculative_speedup) / output_tokens: the decode steps plus the other requests' prefills "
            "taking turns on the instance (its own prompt is its TTFT)",
            {
                "concurrency": point.concurrency,
                "prefill_instance_s": prefill_s,
                "output_tokens": point.output_tokens,
                "step_time_ms": point.step_time_ms,
                "speculative_speedup": spec,
            },
        )
        ttft = (
            "a lone prompt on the instance, no queueing: its layers (each at least the floor its "
            "kernels need), its all-reduces and dispatches from its one attention rank and the "
            "hand-offs between its stages"
        )
        if point.prompt_stall is not None:
            ttft += f", at least prompt_stall_s ({point.stack} {point.stack_release}'s prompt stall)"
    return [
        tpot,
        Step(
            "serving.ttft_s",
            point.ttft_s,
            ttft,
            {
                "input_tokens": point.input_tokens,
                "context_tokens": point.context_tokens,
                "prefill_configuration": point.prefill_configuration or point.configuration,
                **({} if point.prompt_stall is None else {"prompt_stall_s": point.prompt_stall[1]}),
            },
        ),
    ]


def decode_steps(point: Serving) -> list[Step]:
    """Where the serving point's tokens/s per GPU comes from: its decode step's parts, and Little's
    law over the deployment (a vendor-claim review: the printed parts did not add up to the step)."""
    step_inputs = {
        "kernel_time_ms": point.kernel_time_ms,
        "memory_time_ms": point.memory_time_ms,
        "compute_time_ms": point.compute_time_ms,
        "collective_time_ms": point.collective_time_ms,
        "overhead_ms": point.overhead_ms,
    }
    host = ""
    if point.host_time_ms:  # the stack prices its host loop (a serving review: name it where it counts)
        step_inputs["host_time_ms"] = point.host_time_ms
        host = (
            "; overhead_ms holds what the host's loop over a rank's sequences (host_time_ms) adds: "
            "all of it where the stack runs it between GPU steps, only what exceeds the GPU's time "
            "where it overlaps them"
        )
    return [
        Step(
            "serving.step_time_ms",
            point.step_time_ms,
            "kernel_time_ms + collective_time_ms + overhead_ms; kernel_time_ms: each kernel at the "
            "slower of its memory and compute time (between the larger of memory_time_ms and "
            "compute_time_ms and their sum)" + host,
            step_inputs,
        ),
        # its own row (a review of the outputs: explain named it only inside the next one)
        Step(
            "serving.tokens_per_s_per_user",
            point.tokens_per_s_per_user,
            "1000 / tpot_ms (disaggregated: the prompt runs on the prefill pool)"
            if point.disaggregated
            else "output_tokens / (ttft_s + output_tokens x tpot_ms / 1000) (aggregated: the request's "
            "own prefill is its TTFT)",
            {"tpot_ms": point.tpot_ms}
            if point.disaggregated
            else {"output_tokens": point.output_tokens, "ttft_s": point.ttft_s, "tpot_ms": point.tpot_ms},
        ),
        # the serving block's other speeds and prices, each its own row (a review of the outputs:
        # JSON carried them with no row)
        Step(
            "serving.interactivity_tokens_per_s",
            point.interactivity_tokens_per_s,
            "1000 / tpot_ms (the decode rate a user sees between tokens, the target's measure)",
            {"tpot_ms": point.tpot_ms},
        ),
        Step(
            "serving.request_tokens_per_s",
            point.request_tokens_per_s,
            "output_tokens / (ttft_s + output_tokens x tpot_ms / 1000): one request from arrival to its "
            "last token, no queueing",
            {"output_tokens": point.output_tokens, "ttft_s": point.ttft_s, "tpot_ms": point.tpot_ms},
        ),
        Step(
            "serving.tokens_per_s_per_gpu",
            point.tokens_per_s_per_gpu,
            "deployment_concurrency x tokens_per_s_per_user / deployment_gpus (Little's law); "
            + (
                "tokens_per_s_per_user = 1000 / tpot_ms, tpot_ms = step_time_ms / speculative_speedup "
                "(disaggregated: the prompt runs on the prefill pool)"
                if point.disaggregated
                else "tokens_per_s_per_user = output_tokens / (ttft_s + output_tokens x tpot_ms / 1000) "
                "(aggregated: the request's own prefill is its TTFT), tpot_ms = step_time_ms / "
                "speculative_speedup plus the other requests' prefills taking turns"
            ),
            {
                "deployment_concurrency": point.deployment_concurrency,
                "tokens_per_s_per_user": point.tokens_per_s_per_user,
                "deployment_gpus": point.deployment_gpus,
                "tpot_ms": point.tpot_ms,
                "speculative_speedup": point.speculative_speedup,
                **(
                    {}
                    if point.disaggregated
                    else {"ttft_s": point.ttft_s, "output_tokens": point.output_tokens}
                ),
                "configuration": point.configuration,
            },
        ),
    ]


def _traffic_gpus_step(point: Serving, per_s: float) -> Step:
    """``serving.gpus_for_traffic``: whole copies of an aggregated instance (or of pinned pools),
    or disaggregated pools sized for the traffic, as the deployment search chose them."""
    gpus = float(point.gpus_for_traffic or 0)
    inputs: dict[str, float | str] = {"traffic_output_tokens_per_s": per_s}
    if point.disaggregated and point.instances_for_traffic == 1:
        inputs |= {
            "traffic_requests_per_s": point.traffic_requests_per_s or 0.0,
            "concurrency": point.concurrency,
            "output_tokens": point.output_tokens,
            "tokens_per_s_per_user": point.tokens_per_s_per_user,
            "decode_instances": point.decode_instances,
            "instance_gpus": point.instance_gpus,
            "prefill_instance_s": point.prefill_instance_s,
            "prefill_instances": point.prefill_instances,
            "prefill_instance_gpus": point.prefill_instance_gpus or 0,
            "stranded_gpus": point.stranded_gpus,
            "configuration": point.configuration,
        }
        how = (
            "decode_instances x instance_gpus + prefill_instances x prefill_instance_gpus + "
            "stranded_gpus, with decode_instances x concurrency > traffic_requests_per_s x "
            "output_tokens / tokens_per_s_per_user and prefill_instances > traffic_requests_per_s x "
            "prefill_instance_s (rho < 1), each the fewest that hold ttft_at_traffic_s within "
            "ttft_target_s: pools sized for the traffic, the fewest GPUs at the target"
        )
        return Step("serving.gpus_for_traffic", gpus, how, inputs)
    inputs |= {
        "tokens_per_s_per_gpu": point.tokens_per_s_per_gpu,
        "deployment_gpus": point.deployment_gpus,
        "instances_for_traffic": point.instances_for_traffic or 0,
        "configuration": point.configuration,
    }
    how = (
        "ceil(instances_for_traffic x deployment_gpus): whole copies of the deployment, at least "
        "ceil(traffic / (tokens_per_s_per_gpu x deployment_gpus)) and, with a TTFT target, the "
        "fewest whose queues hold ttft_at_traffic_s within it; the fewest GPUs at the target"
    )
    return Step("serving.gpus_for_traffic", gpus, how, inputs)


def _cost_steps(metric: str, value: float, hours_name: str, hours: float, price: float) -> list[Step]:
    """A stage's cost from its GPU-hours at its price (``pretraining_usd`` and
    ``post_training_usd`` start from it)."""
    inputs: dict[str, float | str] = {hours_name: hours, "price_usd_per_gpu_hour": price}
    return [Step(metric, value, f"{hours_name} x price_usd_per_gpu_hour", inputs)]


def pretraining_steps(p: Pretraining | None, deadline_days: float | None) -> list[Step]:
    """The explain lines of a pre-training block: its step, MFU, wall days, GPUs and GPU-hours, then
    its cost (none without a block)."""
    if p is None:
        return []
    how = (
        f"the fewest whole systems whose fastest plan finishes in {deadline_days:g} days, each "
        "scale-up domain holding whole copies of the plan's in-domain groups (the rest idle)"
        if deadline_days
        else "the workload's GPUs"
    )
    return [
        Step("pretraining.step_time_s", p.step_time_s,
             f"one step of the fastest plan found: {p.plan}; the sum of its terms (step_breakdown_s)",
             {"plans_evaluated": p.plans_evaluated, "global_batch_tokens": p.global_batch_tokens,
              **{f"term: {k}": v for k, v in p.step_breakdown_s.items()}}),
        *_step_term_steps(p),
        *_plan_steps(p),
        Step("pretraining.flops_per_token", p.flops_per_token,
             "6 x counted_active_params + attention_flops_per_token (attention_flops_per_token: the "
             "causal attention's score and value products, forward and backward, 3 x layers x "
             "sequence length x (query-key width + value width) x the share of layers with attention, "
             "and a sliding-window layer's band: 2 x the keys a query sees in its window instead of the "
             "sequence length)",
             {"counted_active_params": p.counted_active_params,
              "attention_flops_per_token": p.attention_flops_per_token}),
        Step("pretraining.mfu", p.mfu,
             "flops_per_token x global_batch_tokens / (step_time_s x gpus_used x peak_tflops_per_gpu"
             " x 1e12)" + (" (pinned)" if p.mfu_pinned else ""),
             {"flops_per_token": p.flops_per_token, "global_batch_tokens": p.global_batch_tokens,
              "step_time_s": p.step_time_s, "gpus_used": p.gpus_used,
              "peak_tflops_per_gpu": p.peak_tflops_per_gpu}),
        Step("pretraining.recipe_batch_tokens", p.recipe_batch_tokens,
             "the model's training_global_batch_tokens where its recipe publishes one, else "
             "default_batch_coefficient x training_flops ^ default_batch_exponent (DeepSeek LLM's rule)",
             {"training_flops": p.training_flops}),
        Step("pretraining.batch_token_multiplier", p.batch_token_multiplier,
             "max(1, (1 + global_batch_tokens / recipe_batch_tokens) / 2): the tokens a batch beyond "
             "the recipe's needs for the same loss (McCandlish et al., the recipe batch as B_noise)",
             {"global_batch_tokens": p.global_batch_tokens, "recipe_batch_tokens": p.recipe_batch_tokens}),
        Step("pretraining.wall_days", p.wall_days,
             "tokens x step_time_s x batch_token_multiplier / global_batch_tokens / scale_efficiency"
             " / 86400",
             {"tokens": p.tokens, "step_time_s": p.step_time_s,
              "batch_token_multiplier": p.batch_token_multiplier,
              "global_batch_tokens": p.global_batch_tokens, "scale_efficiency": p.scale_efficiency}),
        Step("pretraining.gpus", p.gpus, f"{how} (the plan uses gpus_used)",
             {"gpus_used": p.gpus_used, "systems": p.systems}),
        Step("pretraining.gpu_hours", p.gpu_hours, "gpus x wall_days x 24",
             {"gpus": p.gpus, "wall_days": p.wall_days}),
        Step("pretraining.tokens_per_s_per_gpu", p.tokens_per_s_per_gpu,
             "global_batch_tokens / (step_time_s x gpus)" + (" (pinned)" if p.mfu_pinned else ""),
             {"global_batch_tokens": p.global_batch_tokens, "step_time_s": p.step_time_s, "gpus": p.gpus}),
        Step("pretraining.effective_mfu", p.effective_mfu,
             "flops_per_token x tokens / (gpus x wall_days x 86400 x peak_tflops_per_gpu x 1e12): the "
             "useful FLOPs over every GPU paid for the whole run (idle GPUs of whole systems, the "
             "goodput and the batch's extra tokens included)" + (" (pinned)" if p.mfu_pinned else ""),
             {"flops_per_token": p.flops_per_token, "tokens": p.tokens, "gpus": p.gpus,
              "wall_days": p.wall_days, "peak_tflops_per_gpu": p.peak_tflops_per_gpu}),
        *_cost_steps("pretraining.cost_usd", p.cost_usd, "gpu_hours", p.gpu_hours, p.price_usd_per_gpu_hour),
    ]  # fmt: skip


def _plan_steps(p: Pretraining) -> list[Step]:
    """The rows of the plan's batch, systems, memory per GPU and exposed expert all-to-all (an
    explain audit: the compare table printed them with no formula). None without the plan."""
    par = p.parallelism
    if par is None:
        return []
    steps = [
        Step("pretraining.global_batch_tokens", p.global_batch_tokens,
             "dp x micro_batches x micro_batch x sequence_length",
             {"dp": par.dp, "micro_batches": par.micro_batches, "micro_batch": par.micro_batch,
              "sequence_length": p.global_batch_tokens / par.global_batch}),
        Step("pretraining.systems", p.systems,
             "gpus / gpus_per_system rounded up, or the scale-up domains the plan's gpus_used span in "
             "whole copies of its in-domain groups where more",
             {"gpus": p.gpus, "gpus_per_system": p.gpus_per_system, "gpus_used": p.gpus_used}),
    ]  # fmt: skip
    parts = p.memory_breakdown_gb_per_gpu
    if parts:
        how = (
            "weights + gradients + optimizer_state + activations: the parameters a GPU holds (its "
            "tp, pp and ep shares) at efficiency.training_bytes_per_param's parts, the optimizer state "
            "sharded over the data-parallel group from ZeRO-1, the gradients from ZeRO-2, the weights "
            "under FSDP (zero_stage 3, with two gathered layers); activations: the in-flight "
            "micro-batches' checkpoints under the recompute policy, the last stage's logits and the "
            "recompute working set"
        )
        if p.host_offload_gb_per_gpu > 0:
            how += (
                "; an offloading plan keeps what the usable HBM leaves, host_offload_gb_per_gpu goes to "
                "host memory"
            )
        steps.append(Step("pretraining.memory_gb_per_gpu", p.memory_gb_per_gpu, how,
                          {**parts, "zero_stage": par.zero_stage, "recompute": par.recompute}))  # fmt: skip
    if par.ep > 1:
        steps.append(Step(
            "pretraining.moe_comm_exposed_fraction", p.moe_comm_exposed_fraction,
            "the expert all-to-all's exposed seconds a step (dispatch and combine, forward and backward, "
            "on the most loaded stage, less what hides behind compute; the chunks the 1F1B overlap "
            "cannot pair included) / step_time_s: a part of step_breakdown_s.exposed_comm_s",
            {"step_time_s": p.step_time_s, "exposed_comm_s": p.step_breakdown_s.get("exposed_comm_s", 0.0)},
        ))  # fmt: skip
    return steps


# what each term of a pre-training step holds (engine/trainstep.py), per micro-batch on the most
# loaded pipeline stage x micro_batches unless said; forward + backward, recomputed passes included
_STEP_TERMS = {
    "gemm_s": "the linear layers' GEMMs, 3 passes (forward, input and weight gradients): FLOPs x "
    "(low-precision GEMM share / its rate + the rest / BF16's rate), a rate = dense peak x "
    "largest-GEMM share of peak x GEMM share kept in training x recipe share (x the FP8 recipe's "
    "share on an FP8 run), + GEMM call overhead per call; the LM head at BF16's rate, a 1/pp share "
    "of it on each stage",
    "attention_s": "the causal attention's score and value products in BF16: FLOPs / (bf16 dense "
    "peak x attention efficiency), the backward attention backward / forward times the forward, + "
    "GEMM call overhead per fused-attention call (a pass makes one, cp under context parallelism: "
    "one per ring step)",
    "memory_bound_s": "norms, residuals, RoPE, activations, the router's permute and combine, the "
    "casts to the GEMMs' precision, and a 1/pp share of the vocabulary's cross-entropy: bytes / "
    "(HBM bandwidth x memory-bound HBM efficiency)",
    "exposed_comm_s": "the tensor-parallel (sequence-parallel) all-gathers and reduce-scatters (around "
    "attention, MLA gathering its latents; a dense layer's MLP; a routed layer's shared experts; the "
    "gathers at the recipe's quantized width, efficiency.training_sp_gather_bytes and "
    "training_sp_grad_gather_bytes; userbuffers hide efficiency.tp_comm_overlap of them where the "
    "recipe has them, efficiency.training_tp_userbuffers, else the backward's column-parallel ones hide "
    "behind their GEMMs), the context-parallel ring and the expert all-to-alls, less what hides behind "
    "compute (each hidden part still taxes the compute it overlaps), and FP8 current scaling's and "
    "NVFP4's amax all-reduces over the tensor-parallel group (efficiency.training_amax_reductions), "
    "exposed",
    "activation_offload_s": "activations sent to host memory and back over the host link where the "
    "plan offloads them",
    "host_bound_s": "an MoE layer's forward waiting for the host without CUDA graphs (host-bound time "
    "of an MoE layer run eagerly x MoE layers on the stage)",
    "pipeline_p2p_s": "activations forward and gradients back at each of a stage's interleave chunk "
    "boundaries (2 x interleave sends): tokens x hidden x bytes / tp over the pipeline's link, plus "
    "its latency; under DualPipe only what the paired chunks' compute does not hide",
    "data_parallel_exposed_s": "the gradient reduce-scatter and the weights' all-gather over the "
    "data-parallel group (ZeRO stage; an FP8 run gathers at its recipe's width, "
    "efficiency.training_fp8_param_gather_bytes), less what hides behind the last micro-batch's backward and "
    "the first's forward (with the all-to-all those unpaired chunks expose)",
    "tensor_parallel_grad_sync_s": "the all-reduce of the gradients of the weights every "
    "tensor-parallel rank holds whole",
    "optimizer_s": "one Adam step over the parameters this GPU updates (sharded over the "
    "data-parallel group from ZeRO-1 on): parameters x optimizer step traffic / (HBM bandwidth x "
    "memory-bound HBM efficiency)",
    "step_overhead_s": "the fixed time a step spends beyond the terms above (the optimizer's "
    "launches outside the CUDA graph, the gradient-norm sync, callbacks and logging): "
    "efficiency.training_step_overhead_ms, once a step",
}
_MICRO_TERMS = ("gemm_s", "attention_s", "memory_bound_s", "exposed_comm_s", "activation_offload_s",
                "host_bound_s", "pipeline_p2p_s")  # fmt: skip
_PER_MICRO_BATCH = "; over the micro_batches, on the most loaded stage"
_ONCE_A_STEP = ("data_parallel_exposed_s", "tensor_parallel_grad_sync_s", "optimizer_s", "step_overhead_s")


def _step_term_steps(p: Pretraining) -> list[Step]:
    """A row for each term of the step: what it holds, and the bubble from the others (an explain
    audit: the step's terms were numbers without a formula). None without the plan's layout."""
    par, terms = p.parallelism, p.step_breakdown_s
    if par is None:
        return []
    mb: dict[str, float | str] = {"micro_batches": par.micro_batches}
    pinned = " (pinned: the plan's terms scaled to the step the pinned MFU gives)" if p.mfu_pinned else ""
    steps = [
        Step(f"pretraining.step_breakdown_s.{k}", v,
             _STEP_TERMS[k] + ("" if k in _ONCE_A_STEP else _PER_MICRO_BATCH) + pinned,
             {} if k in _ONCE_A_STEP else mb)
        for k, v in terms.items()
        if k in _STEP_TERMS
    ]  # fmt: skip
    shape: dict[str, float | str] = {"pp": par.pp, "interleave": par.interleave, **mb}
    bubble = "pretraining.step_breakdown_s.pipeline_bubble_s"
    if par.pipeline_schedule == "dualpipe":
        how = (
            "(pp / 2 - 1) x (a forward-backward pair + a backward - 3 x its weight-gradient GEMMs), "
            "DualPipe's bubble (the weight gradients fill it)"
        )
        return [*steps, Step(bubble, terms["pipeline_bubble_s"], how + pinned, shape)]
    how = f"(pp - 1) / interleave x ({' + '.join(_MICRO_TERMS)}) / micro_batches: 1F1B's bubble{pinned}"
    return [
        *steps,
        Step(bubble, terms["pipeline_bubble_s"], how, {**shape, **{k: terms[k] for k in _MICRO_TERMS}}),
    ]


def rl_steps(r: Rl | None) -> list[Step]:
    """The explain lines of an RL block: its generation terms, step, GPU-hours, then its cost (none
    without a block)."""
    if r is None:
        return []
    ph, ws = r.phases, r.weight_sync
    return [
        _rl_generation_step(r),
        _rl_environment_step(r),
        # the trainer's and the update's phases, each from the terms the result prints (a user
        # review: explain gave the step's formula, not where training_s or weight_sync_s came from)
        *_rl_trainer_steps(r),
        Step("rl.phases.weight_sync_s", ph.weight_sync_s,
             f"fixed_s + transfer_s + load_s + offload_s ({ws.transport}: transfer_s the senders' "
             f"gather, wire and quantisation under the stack's schedule, load_s the per-tensor work "
             f"not hidden behind it: {ws.composition or 'see terms'}; bound: {ws.bound}); "
             "exposed_s = weight_sync_s - hidden_s",
             {"fixed_s": ws.fixed_s, "transfer_s": ws.transfer_s, "load_s": ws.load_s,
              "offload_s": ws.offload_s, "hidden_s": ws.hidden_s,
              "bytes_per_receiver": ws.bytes_per_receiver,
              **{f"term: {k}": v for k, v in ws.terms_s.items()}}),
        Step("rl.step_seconds", r.step_seconds, _RL_STEP[_rl_schedule(r)],
             {"generation_s": ph.generation_s, "environment_s": ph.environment_s,
              "logprob_s": ph.logprob_s, "training_s": ph.training_s,
              "weight_sync_s": ph.weight_sync_s, "sync_fixed_s": ws.fixed_s,
              "sync_transfer_s": ws.transfer_s}),
        Step("rl.systems", r.systems,
             "ceil(gpus / gpus_per_system): whole nodes or racks, the trainer and the generation pool "
             "packed; the last one's other GPUs are not priced (GPUs are priced one by one)",
             {"gpus": r.gpus, "gpus_per_system": r.gpus_per_system}),
        Step("rl.gpu_hours_per_step", r.gpu_hours_per_step, "gpus x step_seconds / 3600",
             {"gpus": r.gpus, "step_seconds": r.step_seconds}),
        *_cost_steps("rl.usd_per_step", r.usd_per_step, "gpu_hours_per_step", r.gpu_hours_per_step,
                     r.price_usd_per_gpu_hour),
        # the samples' rows (a review of the outputs: compare printed both, explain neither)
        Step("rl.samples_per_s", r.samples_per_s, "samples / step_seconds (prompts x group_size a step)",
             {"samples": _step_samples(r), "step_seconds": r.step_seconds}),
        Step("rl.usd_per_1k_samples", r.usd_per_1k_samples, "usd_per_step / samples x 1000",
             {"usd_per_step": r.usd_per_step, "samples": _step_samples(r)}),
        *_rl_periodic_steps(r),
        # the run pays each step phi / goodput times (a code review: no row used either), each step
        # lengthened by its share of the evaluations and checkpoints
        Step("rl.run.usd_per_year", r.run.usd_per_year,
             f"usd_per_step x steps_per_refresh x refreshes_per_year x {RUN_STEP_COST}",
             {"usd_per_step": r.usd_per_step, "steps_per_refresh": r.run.steps_per_refresh,
              "refreshes_per_year": r.run.refreshes_per_year, **_run_cost_inputs(r)}),
    ]  # fmt: skip


# what a checkpoint stops the run for, by whether it is written in the background (blocking: the
# whole write; asynchronous: the copy to host memory, then any write still running when the next
# checkpoint is due)
_EXPOSED = {
    True: "checkpoint_staging_s + max(0, checkpoint_write_s - checkpoint_interval_steps x step_seconds)",
    False: "checkpoint_write_s",
}


def _rl_periodic_steps(r: Rl) -> list[Step]:
    """Where the run's evaluations and checkpoints come from (none where the workload has neither);
    the formulas recompute from the inputs beside them."""
    run = r.run
    steps, terms = [], []
    inputs: dict[str, float | str] = {}
    if run.eval_interval_steps is not None:
        steps.append(Step(
            "rl.run.eval_s", run.eval_s,
            "generation + environment of eval_trajectories (eval_tasks x eval_attempts) of the step's "
            "shape on the step's rollout replicas, as one synchronous batch (the step's generation "
            "physics); the run's other GPUs wait",
            {"eval_trajectories": run.eval_trajectories, "gen_gpus": r.gen_gpus,
             "rollout replica GPUs": r.instance_gpus},
        ))  # fmt: skip
        terms.append("eval_s / eval_interval_steps")
        inputs |= {"eval_s": run.eval_s, "eval_interval_steps": run.eval_interval_steps}
    if run.checkpoint_interval_steps is not None:
        steps += [
            Step("rl.run.checkpoint_write_gb_per_s", run.checkpoint_write_gb_per_s,
                 "min(run_gpus x storage_write_gb_per_s_per_gpu, writer_gpus x "
                 "storage_node_write_gb_per_s_per_gpu): the storage's share for the run's GPUs, unless "
                 "the GPUs holding the state write slower over their nodes' links",
                 {"run_gpus": r.gpus, "writer_gpus": r.holding_gpus}),
            Step("rl.run.checkpoint_write_s", run.checkpoint_write_s,
                 "checkpoint_bytes / (checkpoint_write_gb_per_s x 1e9)",
                 {"checkpoint_bytes": run.checkpoint_bytes,
                  "checkpoint_write_gb_per_s": run.checkpoint_write_gb_per_s}),
            Step("rl.run.checkpoint_exposed_s", run.checkpoint_exposed_s, _EXPOSED[run.checkpoint_async],
                 {"checkpoint_write_s": run.checkpoint_write_s,
                  "checkpoint_staging_s": run.checkpoint_staging_s,
                  "checkpoint_interval_steps": run.checkpoint_interval_steps,
                  "step_seconds": r.step_seconds}),
        ]  # fmt: skip
        terms.append("checkpoint_exposed_s / checkpoint_interval_steps")
        inputs |= {
            "checkpoint_exposed_s": run.checkpoint_exposed_s,
            "checkpoint_interval_steps": run.checkpoint_interval_steps,
        }
    if steps:
        steps.append(Step("rl.run.periodic_s_per_step", run.periodic_s_per_step, " + ".join(terms), inputs))
    return steps


def _step_samples(r: Rl) -> float:
    """An RL step's samples (prompts x group, whole), back from its rate without the rounding
    (511.99999999999994 in explain's inputs, a code review), as post_training counts them."""
    samples = r.samples_per_s * r.step_seconds
    return float(round(samples)) if math.isfinite(samples) else samples


def _rl_environment_step(r: Rl) -> Step:
    """Where the step's environment time comes from (an explain review: 74 and 121 s of the
    headline steps had no formula)."""
    return Step(
        "rl.phases.environment_s",
        r.phases.environment_s,
        "sandbox_boot_s + verify_s / host core speed after the last rollout (the async mode hides "
        "both), plus sandbox_stall_s where the sandboxes' core-seconds exceed cpu_cores_available x the "
        f"generation time (env_bound: {str(r.env_bound).lower()}); the workload's sandbox_boot_s and "
        "verify_s and the host core speed are inputs below",
        {"sandbox_stall_s": r.sandbox_stall_s, "cpu_cores_needed": r.cpu_cores_needed,
         "cpu_cores_available": r.cpu_cores_available},
    )  # fmt: skip


def _rl_trainer_steps(r: Rl) -> list[Step]:
    """The log-prob and training phases from the trainer's passes (none without a trainer)."""
    t, ph = r.trainer, r.phases
    if t is None:
        return []
    epochs = round((ph.training_s - t.fixed_s) / t.training_pass_s) if t.training_pass_s else 0
    passes = round(ph.logprob_s / t.forward_pass_s) if t.forward_pass_s else 0
    on = f"{t.global_batch:,} samples of {t.sequence_tokens:,.0f} tokens on {t.plan}"
    return [
        Step("rl.phases.logprob_s", ph.logprob_s, f"logprob_passes x forward_pass_s (a forward over {on})",
             {"logprob_passes": passes, "forward_pass_s": t.forward_pass_s}),
        Step("rl.phases.training_s", ph.training_s,
             f"ppo_epochs x training_pass_s + fixed_s (an optimizer step over {on}, MFU {t.mfu:.3f})",
             {"ppo_epochs": epochs, "training_pass_s": t.training_pass_s, "fixed_s": t.fixed_s}),
    ]  # fmt: skip


# an RL step by the schedule it runs (engine/rl/step.py): phases in series; one-step-off overlaps
# rollouts with training, then the update; async keeps generating, pausing the engines for the
# update while the trainer drives only its barrier and transfer
_RL_STEP = {
    "colocated": "generation_s + environment_s + logprob_s + training_s + weight_sync_s (in series; "
    "the update includes parking the training state and switching the GPUs)",
    "disaggregated": "generation_s + environment_s + logprob_s + training_s + weight_sync_s (in series)",
    "one-step-off": "max(generation_s + environment_s, logprob_s + training_s) + weight_sync_s",
    "async": "max(generation_s + environment_s + weight_sync_s, logprob_s + training_s + sync_fixed_s"
    " + sync_transfer_s)",
}


def _rl_schedule(r: Rl) -> str:
    from .rl.step import schedule

    return schedule(r.mode, r.staleness_bound or 0)


def _rl_generation_step(r: Rl) -> Step:
    """How the step's rollouts are generated: Little's law on the replicas' slots, and in
    synchronous schedules the drain of the longest response or the longest trajectory (every term
    a number of rl.generation, so the value can be recomputed from what explain shows)."""
    g = r.generation
    if _rl_schedule(r) == "async":
        how = (
            "max(decode_and_tools_s + prefill_s, staleness_window_s) x (1 + async_waste_fraction); "
            "decode_and_tools_s = rollouts x (mean response tokens / decode_tokens_per_s_per_user + "
            "turns x tool latency) / (replicas x concurrency), concurrency up to staleness_bound x "
            "rollouts / replicas; prefill_s = rollouts x prompt_prefill_s / replicas; "
            "staleness_window_s = rollouts x (one slot's decode and tool waits + the sandbox's start "
            "and verification) / L + prefill_s, L = staleness_bound x rollouts or the host's sandboxes "
            "where fewer (every trajectory in flight counts against the bound; with partial_rollouts "
            "false at least (the longest trajectory + start + verification) / staleness_bound + "
            "prefill_s)"
        )
        terms = {"async_waste_fraction": g.async_waste_fraction, "staleness_window_s": g.staleness_window_s}
    else:
        how = (
            "max(decode_and_tools_s + prefill_s + drain_s, longest_trajectory_s); decode_and_tools_s = "
            "rollouts x (mean response tokens / decode_tokens_per_s_per_user + turns x tool latency) "
            "/ (replicas x concurrency); prefill_s = rollouts x prompt_prefill_s / replicas; "
            "drain_s = (max - mean response tokens) / tail_decode_tokens_per_s_per_user; "
            "longest_trajectory_s = queued_start_s (its wait for a slot) + mean response tokens / "
            "decode_tokens_per_s_per_user + drain_s + max turns x tool latency"
            + ("; here the longest trajectory" if r.latency_bound else "; here the bulk")
        )
        terms = {
            "drain_s": g.drain_s,
            "longest_trajectory_s": g.longest_trajectory_s,
            "queued_start_s": g.queued_start_s,
        }
    return Step("rl.phases.generation_s", r.phases.generation_s, how,
                {"decode_and_tools_s": g.decode_and_tools_s, "prefill_s": g.prefill_s,
                 "prompt_prefill_s": g.prompt_prefill_s, **terms,
                 "rollouts": g.rollouts, "replicas": r.replicas, "instance_gpus": r.instance_gpus,
                 "concurrency": r.concurrency, "decode_tokens_per_s_per_user": r.decode_tokens_per_s_per_user,
                 "tail_concurrency": r.tail_concurrency,
                 "tail_decode_tokens_per_s_per_user": g.tail_decode_tokens_per_s_per_user,
                 "gen_gpus": r.gen_gpus})  # fmt: skip


def price_steps(cat: Catalog, hardware: str, pricing: str) -> list[Step]:
    """The GPU-hour price the stages' costs start from: the rental point read, or the owning
    cost's formula and inputs (``--pricing tco``), where serving's GPUs, kept around the clock,
    are owned at utilisation 1 (a second step)."""
    from .pricing import price_formula

    system = cat.canonical("systems", hardware)
    inp = Inputs(cat)
    steps = [Step("price_usd_per_gpu_hour", *price_formula(inp, system, pricing))]
    if pricing == "tco":
        steps.append(Step("serving.price_usd_per_gpu_hour", *price_formula(inp, system, pricing, True)))
    return steps


def headline(
    s: Scenario, pre: PretrainShare, post: PostTraining, success: Success, served: ServingShare
) -> tuple[IntelligencePerDollar, list[Step]]:
    """Lifecycle cost, tasks solved, and the headline ratios (per $1k, per MWh), with the site budget."""
    solved = served.tasks_attempted * success.per_task
    if not solved > 0:  # a success of 0: no cost per solved task exists (was a ZeroDivisionError)
        raise IpdError(
            f"no task is ever solved: success per attempt is {success.per_attempt:g} (task_success: a "
            "success rate of 0, or a learning curve's r0 0 with no RL samples to raise it); give a "
            "success above 0",
            ExitCode.RUNTIME,
        )
    total = pre.cost_usd + post.cost_usd + served.cost_usd
    energy = pre.energy_mwh + post.energy_mwh + served.energy_mwh
    site, site_steps = site_budget(s, success, served)
    ipd = IntelligencePerDollar(
        usd_per_solved_task=total / solved,
        solved_tasks_per_kusd=f.per_kusd(solved, total),
        solved_tasks_per_mwh=solved / energy,
        lifecycle_cost_usd=total,
        cost_breakdown_usd=CostBreakdown(
            pretraining=pre.cost_usd, post_training=post.cost_usd, serving=served.cost_usd
        ),
        energy_breakdown_mwh=CostBreakdown(
            pretraining=pre.energy_mwh, post_training=post.energy_mwh, serving=served.energy_mwh
        ),
        horizon_years=s.horizon_years,
        tasks_attempted=served.tasks_attempted,
        tasks_solved=solved,
        success_per_attempt=success.per_attempt,
        success_per_task=success.per_task,
        expected_attempts=success.attempts,
        rl_samples=post.samples,
        score=success.score,
        score_points_per_kusd=success.points_per_kusd,
        rl_rollouts_per_kwh=post.block.rollouts_per_kwh if post.block else None,
        serving_target_met=served.block.target_met,
        **site,
    )
    return ipd, [*_headline_steps(s, ipd), *_energy_steps(s, pre, post, served), *site_steps]


def pretraining_energy_steps(p: Pretraining | None, pue: float) -> list[Step]:
    """A pre-training run's energy from its GPU-hours (none without a run)."""
    if p is None:
        return []
    inputs: dict[str, float | str] = {"gpu_hours": p.gpu_hours, "kw_per_gpu": p.kw_per_gpu, "pue": pue}
    return [Step("pretraining.energy_mwh", p.energy_mwh, "gpu_hours x kw_per_gpu x pue / 1000", inputs)]


def rl_energy_steps(r: Rl | None, kw_per_gpu: float, pue: float) -> list[Step]:
    """An RL step's energy from its GPU-hours (none without a step)."""
    if r is None:
        return []
    inputs: dict[str, float | str] = {
        "gpu_hours_per_step": r.gpu_hours_per_step,
        "kw_per_gpu": kw_per_gpu,
        "pue": pue,
    }
    per_kwh: dict[str, float | str] = {
        "rollouts": r.generation.rollouts,
        "energy_kwh_per_step": r.energy_kwh_per_step,
    }
    return [
        Step(
            "rl.energy_kwh_per_step", r.energy_kwh_per_step, "gpu_hours_per_step x kw_per_gpu x pue", inputs
        ),
        Step(
            "rl.rollouts_per_kwh", r.rollouts_per_kwh, "rollouts / energy_kwh_per_step (kept or not)", per_kwh
        ),
    ]


def _energy_steps(s: Scenario, pre: PretrainShare, post: PostTraining, served: ServingShare) -> list[Step]:
    """Each stage's energy from its GPU-hours at the system's power and the PUE (an energy review:
    explain derived the costs stage by stage, the energy only as solved_tasks_per_mwh's inputs).
    Every GPU paid for draws its system's full power, idle GPUs of whole systems included."""
    point, pue = served.block, served.pue
    steps = pretraining_energy_steps(pre.block, pue) + rl_energy_steps(post.block, point.kw_per_gpu, pue)
    if post.block is not None:
        run = post.block.run
        steps.append(
            Step("post_training_mwh", post.energy_mwh,
                 f"energy_kwh_per_step x {RUN_STEP_COST} x steps_per_year x H / 1000",
                 {"energy_kwh_per_step": post.block.energy_kwh_per_step, **_run_cost_inputs(post.block),
                  "steps_per_year": run.steps_per_refresh * run.refreshes_per_year, "H": s.horizon_years})
        )  # fmt: skip
    steps.append(
        Step("serving_mwh", served.energy_mwh, "gpus_for_traffic x 8760 x H x kw_per_gpu x pue / 1000",
             {"gpus_for_traffic": point.gpus_for_traffic or 0, "H": s.horizon_years,
              "kw_per_gpu": point.kw_per_gpu, "pue": pue})
    )  # fmt: skip
    steps.append(serving_energy_step(point, pue))
    return steps


def serving_energy_step(point: Serving, pue: float) -> Step:
    """A serving point's tokens per MW, from its speed, its system's power and the PUE."""
    inputs: dict[str, float | str] = {
        "tokens_per_s_per_gpu": point.tokens_per_s_per_gpu,
        "kw_per_gpu": point.kw_per_gpu,
        "pue": pue,
    }
    how = "tokens_per_s_per_gpu x 1000 / (kw_per_gpu x pue)"
    return Step("serving.tokens_per_s_per_mw", point.tokens_per_s_per_mw, how, inputs)


def _headline_steps(s: Scenario, i: IntelligencePerDollar) -> list[Step]:
    b, e = i.cost_breakdown_usd, i.energy_breakdown_mwh
    total, solved = i.lifecycle_cost_usd, i.tasks_solved
    per_total = {"tasks_solved": solved, "lifecycle_cost_usd": total}
    return [
        Step(
            "lifecycle_cost_usd",
            total,
            "pretraining + post_training + serving",
            {"pretraining": b.pretraining, "post_training": b.post_training, "serving": b.serving},
        ),
        Step(
            "tasks_solved",
            solved,
            "tasks_per_day x 365 x H x success_per_task",
            {
                "tasks_per_day": s.serving.tasks_per_day,
                "H": s.horizon_years,
                "success_per_task": i.success_per_task,
            },
        ),
        Step(
            "usd_per_solved_task",
            i.usd_per_solved_task,
            "lifecycle_cost_usd / tasks_solved",
            {"lifecycle_cost_usd": total, "tasks_solved": solved},
        ),
        Step(
            "solved_tasks_per_kusd",
            i.solved_tasks_per_kusd,
            "1000 x tasks_solved / lifecycle_cost_usd",
            per_total,
        ),
        Step(
            "solved_tasks_per_mwh",
            i.solved_tasks_per_mwh,
            "tasks_solved / (pretraining_mwh + post_training_mwh + serving_mwh); pretraining_mwh is "
            "the run's energy_mwh x H / amortisation_years / deployments, as pretraining_usd",
            {
                "tasks_solved": solved,
                "pretraining_mwh": e.pretraining,
                "post_training_mwh": e.post_training,
                "serving_mwh": e.serving,
            },
        ),
    ]


def site_budget(s: Scenario, success: Success, served: ServingShare) -> tuple[dict[str, Any], list[Step]]:
    """With ``site_mw``: the GPUs a site power budget holds and the tasks per day they solve."""
    if s.site_mw is None:
        return {}, []
    point = served.block
    gpus = int(f.gpus_in_power_budget(s.site_mw, point.kw_per_gpu, served.pue, point.gpus_per_system))
    tokens_per_task = success.attempts * served.tokens_per_attempt
    per_day = f.tasks_per_day(gpus, point.tokens_per_s_per_gpu, tokens_per_task, success.per_task)
    step = Step(
        "site_tasks_solved_per_day",
        per_day,
        "site_gpus x tokens_per_s_per_gpu x 86400 / tokens_per_task x success_per_task; site_gpus = "
        "floor(site_mw x 1000 / (kw_per_gpu x gpus_per_system x pue)) x gpus_per_system (whole "
        "systems); tokens_per_task = expected_attempts x "
        "requests x output tokens (output tokens, as tokens_per_s_per_gpu counts them)",
        {
            "site_mw": s.site_mw,
            "kw_per_gpu": point.kw_per_gpu,
            "pue": served.pue,
            "gpus_per_system": point.gpus_per_system,
            "site_gpus": gpus,
            "tokens_per_s_per_gpu": point.tokens_per_s_per_gpu,
            "tokens_per_task": tokens_per_task,
            "success_per_task": success.per_task,
        },
    )
    return {"site_mw": s.site_mw, "site_gpus": gpus, "site_tasks_solved_per_day": per_day}, [step]


# --- one system, every block -----------------------------------------------------------------------


def estimate_lifecycle(
    cat: Catalog, hardware: str, scenario: Scenario, *, pricing: str = "rental", origin: str = "command line"
) -> Lifecycle:
    """Every block (pre-training, RL, serving) and the intelligence-per-dollar headline on one system.

    A stage that cannot run on this system leaves its block (and the headline) null, with the
    reason under ``infeasible``; the blocks that can run are still estimated.
    """
    s = scenario
    system = cat.system(hardware)
    failed: dict[str, Infeasible] = {}
    pre = _stage(failed, "pretraining", s, lambda: pretraining_share(cat, hardware, s, pricing))
    post = _stage(failed, "post_training", s, lambda: post_training(cat, hardware, s, pricing))
    success = None
    if post is not None or s.task_success.learning_curve is None:  # a curve reads the RL samples
        success = task_success(s, post.samples, post.cost_usd) if post else task_success(s, 0.0, 0.0)
    # the traffic needs the attempts a task takes; without them (RL post-training cannot run and
    # success follows its learning curve) the block is the deployment with the most tokens/s per GPU
    traffic = traffic_per_day(s.serving, success) if success is not None else None
    if success is not None and traffic is not None and not (math.isfinite(traffic) and traffic > 0):
        raise IpdError(
            f"the scenario's serving traffic is {traffic:g} output tokens a day (tasks_per_day x expected "
            f"attempts {success.attempts:g} x requests x output tokens); check the task success inputs "
            "for extreme values",
            ExitCode.RUNTIME,
        )
    served = _stage(
        failed,
        "serving",
        s,
        lambda: serve_point(
            cat, hardware, s.model, s.serving, pricing=pricing, origin=origin, traffic=traffic
        ),
    )
    ipd, steps, assumptions = None, [], []
    if pre is None or post is None or served is None:
        cause = next(iter(failed.values()))
        failed["intelligence_per_dollar"] = cause.model_copy(
            update={
                "reason": f"needs the {STAGE_LABELS[cause.stage]} block, which cannot run: {cause.reason}"
            }
        )
        steps = _stage_steps(cat, hardware, s, pricing, pre, post, success, served)
    else:
        assert success is not None
        share = serving_share(cat, s, served, success)
        ipd, head_steps = headline(s, pre, post, success, share)
        steps = [
            *price_steps(cat, hardware, pricing),
            *pretraining_steps(pre.block, _stage_deadline(cat, s)),
            pre.step,
            *rl_steps(post.block),
            *post.steps,
            *success.steps,
            *share.steps,
            *head_steps,
        ]
        assumptions = [*pre.assumptions, *post.assumptions, *serving_paths(share.assumptions, origin)]
        assumptions = [*scenario_assumptions(cat, s, origin), *assumptions]
    result = SystemResult(
        hardware=cat.canonical("systems", hardware),
        description=system.description,
        status=system.status,
        intelligence_per_dollar=ipd,
        pretraining=pre.block if pre else None,
        rl=post.block if post else None,
        serving=served.serving if served else None,
        infeasible=failed,
        assumptions=_dedupe(assumptions or _partial_assumptions(pre, post, served)),
    )
    return Lifecycle(result, steps)


def _stage_steps(
    cat: Catalog,
    hardware: str,
    s: Scenario,
    pricing: str,
    pre: PretrainShare | None,
    post: PostTraining | None,
    success: Success | None,
    served: Any,
) -> list[Step]:
    """The explain lines of the stages that ran where another cannot (a review: A100, whose
    pre-training cannot run, had no line for the RL and serving blocks compare gives): the price,
    then each block's own lines and energy, as where every stage runs. The lifecycle's shares
    (``pretraining_usd``, ``serving_mwh``, ...) and the headline need every stage and are left out;
    the ``infeasible`` rows say which stage could not run."""
    from .pricing import kw_per_gpu, pue

    inp = Inputs(cat).quiet()  # the values the estimate read (its assumptions list them)
    power = pue(inp)
    steps = price_steps(cat, hardware, pricing)
    if pre is not None:
        steps += pretraining_steps(pre.block, _stage_deadline(cat, s))
        steps += pretraining_energy_steps(pre.block, power)
    if post is not None:
        steps += rl_steps(post.block)
        steps += rl_energy_steps(post.block, kw_per_gpu(inp, cat.canonical("systems", hardware)), power)
    if served is not None:
        if success is not None:  # the deployment sized for the traffic
            steps += serving_share(cat, s, served, success).steps
        else:  # no traffic without the attempts a task takes: the point alone
            steps += serving_point_steps(served.serving)
        steps.append(serving_energy_step(served.serving, power))
    ran = {block for block, stage in (("pretraining", pre), ("rl", post), ("serving", served)) if stage}
    return [st for st in steps if st.metric.split(".")[0] in ran or st.metric == "price_usd_per_gpu_hour"]


def _stage_deadline(cat: Catalog, s: Scenario) -> float | None:
    """The deadline of a scenario's computed pre-training stage (None: a fixed GPU count or none)."""
    if s.pretraining.workload is None:
        return None
    return getattr(stage_workload(cat, s, "pretraining"), "deadline_days", None)


def carried_context_tokens(sv: Any, max_context: int | None = None, model: str = "the model") -> int:
    """The cached context a scenario's call attends to on average: none where each call starts
    fresh; where a task carries its context, the prompts and outputs of the calls before it, (n -
    1) / 2 x (input + output) over a task's n calls (rounded down; 30 calls of 3,000 + 400: 49,300).
    ``max_context``: the model's, which a task's last call, n x (input + output), must fit (the
    mean call's is what the estimate prices)."""
    if sv.context != "carried":
        return 0
    call = sv.input_tokens_per_request + sv.output_tokens_per_request
    if max_context is not None and sv.requests_per_task * call > max_context:
        raise InputError(
            f"the last of a task's {sv.requests_per_task:,} calls carries {sv.requests_per_task * call:,} "
            f"tokens ({sv.requests_per_task:,} x {call:,}), past {model}'s {max_context:,}: fewer "
            "`workload.serving.requests_per_task`, shorter calls, or `workload.serving.context` fresh"
        )
    return (sv.requests_per_task - 1) * call // 2


def _serve_args(cat: Catalog, hardware: str, model: str, sv: Any) -> dict[str, Any]:
    """What :func:`serve_point` asks the deployment search for a scenario's serving."""
    return dict(
        input_tokens=sv.input_tokens_per_request,
        output_tokens=sv.output_tokens_per_request,
        context_tokens=carried_context_tokens(sv, cat.model(model).max_context, model),
        precision=serving_precision(cat, hardware, sv.precision),
        tokens_per_user_s=sv.tokens_per_user_s,
        speculative=sv.speculative,
        instance="best",
        ttft_target_s=sv.ttft_target_s,
        stack_release=sv.stack_release,
    )


def serve_point(
    cat: Catalog,
    hardware: str,
    model: str,
    sv: Any,
    *,
    pricing: str = "rental",
    origin: str = "",
    traffic: float | None = None,
) -> Any:
    """A scenario's serving deployment on one system: its shape and interactivity target, at a
    precision the system supports, sized for ``traffic`` output tokens per day as ``serve
    --tokens-per-day`` sizes it (the fewest GPUs: whole aggregated instances, or disaggregated pools
    sized for it; None: the deployment with the most tokens/s per GPU), priced as kept around the
    clock, as any serving estimate (under ``tco``: capital over every hour,
    :func:`~ipd_cli.engine.pricing.usd_per_gpu_hour` ``always_on``)."""
    from .serving import estimate_serving
    from .serving.estimate import TrafficBeyondClusters

    args = _serve_args(cat, hardware, model, sv)
    try:
        result = estimate_serving(
            cat,
            hardware,
            model,
            **args,
            output_tokens_per_day=traffic,
            pricing=pricing,
            origin=origin or "command line",
        )
    except TrafficBeyondClusters as e:
        raise scenario_traffic_error(e) from None
    except InfeasibleError:
        raise
    except InputError as e:  # a value of the scenario's serving stage: named as its field there
        raise stage_input_error(str(e), "serving", origin) from None
    update: dict[str, Any] = {}
    if args["precision"] != sv.precision:
        update["precision_requested"] = sv.precision
    if not update:
        return result
    return result.model_copy(update={"serving": result.serving.model_copy(update=update)})


def stage_input_error(message: str, stage: str, origin: str) -> InputError:
    """An estimate's input error about a scenario stage's value, its parameter names as the
    stage's fields and the scenario's file named (a review: "speculative 7: eagle3 acceptance is
    measured up to 3 ..." named neither the file nor ``workload.serving.speculative``)."""
    fields = _STAGE_FIELDS[stage]

    def path(m: re.Match) -> str:
        return f"workload.{stage}.{fields[m.group(1)]}" if m.group(1) in fields else m.group(0)

    text = re.sub(r"`([a-z_][a-z0-9_]*)`", path, message)
    return InputError(f"{origin}: {text}" if origin and not text.startswith(origin) else text)


def scenario_traffic_error(e: Any, swept: bool = False) -> InputError:
    """A scenario's traffic beyond any cluster, named by the scenario's inputs (a ``serve`` traffic
    names ``output_tokens_per_day``, which a scenario has not); ``swept``: a sweep row's traffic,
    which the sweep's axes set (a review: it told a sweep to `--set` the value)."""
    fix = (
        "give the sweep's axes a range whose rows a cluster can serve (fewer tasks_per_day, "
        "requests_per_task or output_tokens_per_request)"
        if swept
        else "give fewer tasks (`sets` workload.serving.tasks_per_day=...)"
    )
    return InputError(
        f"the scenario's serving traffic, {e.value:g} output tokens a day (tasks_per_day x expected "
        f"attempts x requests_per_task x output_tokens_per_request), needs {e.count}; {fix}"
    )


class ServingSizer:
    """A scenario's serving deployment on one system at any traffic (output tokens per day), as
    :func:`serve_point` sizes it: the deployment search runs once (its grid kept in ``store``,
    shared by the sizers of a sweep, least recently used out), then :meth:`numbers` sizes an
    array of traffics at once (:class:`~ipd_cli.engine.serving.estimate.TrafficSizer`, the
    single estimate's own). A sweep whose rows change the traffic (tasks per day, requests per
    task, the attempts a task takes) sizes each row with it."""

    def __init__(
        self, cat: Catalog, hardware: str, model: str, sv: Any, pricing: str, origin: str, store: Any
    ):
        self.cat, self.hardware, self.model, self.sv = cat, hardware, model, sv
        self.pricing, self.origin = pricing, origin
        self.store = store
        self.seeded: float | None = None
        self._key = object()  # its searched grid's entry in ``store``
        self._blocks: dict[int, dict[str, Any]] = {}  # a chosen row's block numbers
        self._last: tuple[Any, dict[str, Any]] | None = None

    def seed(self, traffic: float) -> None:
        """The traffic the estimate itself sized: a row's traffic equal to it but for
        rounding (12 significant digits) is sized at it, so that row equals the estimate."""
        self.seeded = traffic

    def sizer(self) -> Any:
        """The deployment search's grid, ready to size any traffic: kept in ``store`` with the
        grids (a sweep's memory holds a few, however many physics points it has), searched
        again (from the grids kept, when there) once it is out."""
        from .serving.estimate import traffic_sizer
        from .serving.grid import MEMO_GRIDS, memoized

        store = self.store
        sizers = getattr(store, "sizers", store)  # a GridStore keeps its sizers apart from its grids
        if self._key in sizers:
            sizers.move_to_end(self._key)
            return sizers[self._key]
        with memoized(store):
            sizer = traffic_sizer(
                self.cat, self.hardware, self.model,
                **_serve_args(self.cat, self.hardware, self.model, self.sv),
                pricing=self.pricing, origin=self.origin or "command line",
            )  # fmt: skip
        sizers[self._key] = sizer
        while len(sizers) > getattr(store, "limit", MEMO_GRIDS):
            sizers.popitem(last=False)  # the least recently used
        return sizer

    def numbers(self, per_day: Any, names: tuple[str, ...]) -> dict[str, Any]:
        """The serving block's metrics ``names`` (``serving.tokens_per_s_per_gpu``) at each of
        ``per_day`` (distinct output tokens per day, finite and positive): arrays, one value per
        traffic (None where a block has no such field), and under ``("defined", name)`` whether
        it has it."""
        import numpy as np

        from .serving.estimate import TrafficBeyondClusters, check_traffic_gpus
        from .serving.point import UNMODELLED
        from .sweep import serving_numbers

        per_day = np.asarray(per_day, dtype=float)
        if self.seeded is not None:
            near = np.abs(per_day - self.seeded) <= 5e-13 * abs(self.seeded)
            per_day = np.where(near, self.seeded, per_day)
        if self._last is not None and np.array_equal(self._last[0], per_day):
            return self._last[1]
        sizer = self.sizer()
        rps = per_day / f.SECONDS_PER_DAY / sizer.g.ph.osl
        sized, fields = sizer.size(rps)
        try:
            check_traffic_gpus(fields, "output_tokens_per_day", per_day, sizer.name)
        except TrafficBeyondClusters as e:
            raise scenario_traffic_error(e, swept=True) from None
        distinct, inv = np.unique(sized.rows, return_inverse=True)
        blocks = []
        widened = serving_precision(self.cat, self.hardware, self.sv.precision) != self.sv.precision
        for i in distinct:  # one block per distinct chosen row; a traffic sets its own fields
            if int(i) not in self._blocks:
                point = sizer.point(int(i), sized.met)
                if widened:  # as serve_point reports it
                    point = point.model_copy(update={"precision_requested": self.sv.precision})
                self._blocks[int(i)] = serving_numbers(point)
            blocks.append(self._blocks[int(i)])
        out: dict[Any, Any] = {}
        for name in names:
            key = name.split(".", 1)[1]
            if key in fields:
                value = np.asarray(fields[key])
                defined = ~np.isnan(value) if key in UNMODELLED else np.ones(len(value), dtype=bool)
                out[name], out[("defined", name)] = value, defined  # NaN: an aggregated row's None
                continue
            column = np.array([b.get(name) for b in blocks] + [None], dtype=object)[:-1]
            out[("defined", name)] = np.array([v is not None for v in column], dtype=bool)[inv]
            out[name] = column[inv]
        self._last = (per_day, out)
        return out


def serving_precision(cat: Catalog, hardware: str, wanted: str | None) -> str | None:
    """A scenario's serving precision, or the next wider one the system supports (Hopper has no fp4),
    as pre-training does, so one scenario can compare every generation."""
    if wanted is None:
        return None
    from .pretraining import supported_precision

    return supported_precision(cat.accelerator_of(cat.system(hardware)), wanted)


# the origin of a scenario number its file leaves out: the schema's default (ipd's choice)
DEFAULTED = "ipd default (not in the scenario)"


def scenario_assumptions(cat: Catalog, s: Scenario, origin: str) -> list[Assumption]:
    """The scenario's own numbers, each with its ``workload.*`` path and the file that gives it (a
    review: the horizon, amortisation, RL schedule, traffic and retries were in no assumption list
    and not in ``ipd explain``'s inputs); a success rate or learning curve cites its own source.
    A number the scenario leaves out is the schema's default (:data:`DEFAULTED`, an estimate: a
    magic-constant audit found a user file without ``amortisation_years`` listing the default 2
    years under that file), and an RL schedule it leaves out is its RL workload's."""
    from .trace import Trace

    t = Trace(cat.sources)
    p, pt, sv, ts = s.pretraining, s.post_training, s.serving, s.task_success

    def add(
        name: str,
        value: Any,
        unit: str,
        path: str,
        source: str | None = None,
        estimate: bool = False,
        of: Any = None,
        where: str = origin,
    ):
        if value is None:
            return
        if of is not None and path.rsplit(".", 1)[-1] not in of.model_fields_set:
            where, estimate = DEFAULTED, True
        t.given(name, value, unit, where, path=f"workload.{path}", source=source, estimate=estimate)

    add("horizon", s.horizon_years, "years", "horizon_years", of=s)
    if not p.open_weights:  # a cost to amortise
        add("pre-training cost given", p.cost_usd, "USD", "pretraining.cost_usd")
        years, shared = p.amortisation_years, p.deployments
        add("pre-training amortisation", years, "years", "pretraining.amortisation_years", of=p)
        add("deployments sharing pre-training", shared, "deployments", "pretraining.deployments", of=p)
    if pt is not None:
        add("RL budget a year", pt.budget_usd_per_year, "USD", "post_training.budget_usd_per_year")
        rw = cat.rl_workload(pt.workload)
        schedule = [("RL steps per refresh", "steps_per_refresh", "steps")]
        if pt.budget_usd_per_year is None:  # a budget sets the refreshes it buys (a derived step)
            schedule.append(("RL refreshes a year", "refreshes_per_year", "refreshes"))
        for name, key, unit in schedule:
            path = f"post_training.{key}"
            if getattr(pt, key) is not None:
                add(name, getattr(pt, key), unit, path)
            else:  # the RL workload's, which the lifecycle runs (rl_workload)
                add(name, getattr(rw, key), unit, path, of=rw, where=cat.origin("workloads", pt.workload))
    add("tasks a day", sv.tasks_per_day, "tasks", "serving.tasks_per_day")
    add("requests per task attempt", sv.requests_per_task, "requests", "serving.requests_per_task", of=sv)
    add("serving context", sv.context, "", "serving.context", of=sv)  # its cached tokens: the serving's
    if ts.success_rate is not None:
        r = ts.success_rate
        add("success per attempt", r.value, "", "task_success.success_rate", r.source, r.estimate)
    if ts.learning_curve is not None:
        lc = ts.learning_curve
        for name, value, unit, field_ in (
            ("learning curve r0", lc.r0, "", "r0"),
            ("learning curve asymptote", lc.asymptote, "", "asymptote"),
            ("learning curve midpoint", lc.midpoint_samples, "samples", "midpoint_samples"),
            ("learning curve exponent", lc.exponent, "", "exponent"),
        ):
            add(name, value, unit, f"task_success.learning_curve.{field_}", lc.source, lc.estimate)
    add("step reliability", ts.step_reliability, "", "task_success.step_reliability")
    add("steps per workflow", ts.steps_per_workflow, "steps", "task_success.steps_per_workflow")
    add("attempts at most", ts.max_attempts, "attempts", "task_success.max_attempts", of=ts)
    add("site power budget", s.site_mw, "MW", "site_mw")  # the site rows' (an explain review)
    return t.items


# the scenario serving stage's inputs, as the serving estimate names them -> their scenario field
_SERVING_INPUTS = {
    "serving precision": "precision",
    "input tokens per request": "input_tokens_per_request",
    "output tokens per request": "output_tokens_per_request",
    "target speed per user": "tokens_per_user_s",
    "speculative decoding": "speculative",
    "TTFT target at a traffic": "ttft_target_s",
}


def serving_paths(items: list[Assumption], origin: str) -> list[Assumption]:
    """The scenario's serving inputs with their ``workload.serving.*`` path (the serving estimate
    records them as its options, which have none)."""
    return [
        a.model_copy(update={"path": f"workload.serving.{_SERVING_INPUTS[a.name]}"})
        if a.path is None and a.name in _SERVING_INPUTS and a.origin == origin
        else a
        for a in items
    ]


def _dedupe(items: list[Assumption]) -> list[Assumption]:
    seen: set[tuple] = set()
    out = []
    for a in items:
        key = (a.name, a.path, str(a.value), a.origin)
        if key not in seen:
            seen.add(key)
            out.append(a)
    return out


def _partial_assumptions(*blocks: Any) -> list[Assumption]:
    """The inputs of the blocks that could be computed, when the headline could not."""
    out: list[Assumption] = []
    for b in blocks:
        if b is not None:
            out += b.assumptions
    return out


# --- stages that cannot run ------------------------------------------------------------------------

# stage -> (the block it fills, words for it)
STAGES = {
    "pretraining": ("pretraining", "pre-training"),
    "post_training": ("rl", "RL post-training"),
    "serving": ("serving", "serving"),
}
STAGE_LABELS = {stage: label for stage, (_, label) in STAGES.items()}


def _stage(failed: dict[str, Infeasible], stage: str, s: Any, compute: Callable[[], T]) -> T | None:
    """Run one stage; when it cannot run on this system, note why under its block and return None."""
    try:
        return compute()
    except InfeasibleError as e:
        block, _ = STAGES[stage]
        failed[block] = infeasible(stage, str(e), _stage_workload(s, stage), nested=True)
        return None


def _stage_workload(s: Any, stage: str) -> str | None:
    part = getattr(s, stage, None)
    return getattr(part, "workload", None)


# what each stage's engine calls a parameter -> the workload field that sets it in a comparison
# (compare has no --precision or --gpus: it takes `--set workload.<stage>.<field>=...`)
_STAGE_FIELDS: dict[str, dict[str, str]] = {
    "pretraining": {name: name for name in PretrainWorkload.model_fields},
    "post_training": {**{name: name for name in RlWorkload.model_fields}, "precision": "inference_precision"},
    "serving": {
        "precision": "precision",
        "tokens_per_user_s": "tokens_per_user_s",
        "ttft_target_s": "ttft_target_s",
        "input_tokens": "input_tokens_per_request",
        "output_tokens": "output_tokens_per_request",
        "speculative": "speculative",
        "stack_release": "stack_release",
    },
}
_HINT_STARTS = ("use ", "give ", "add ", "set ", "try ", "choose ", "pick ", "lower ", "raise ", "--", "`")
_PARAMETER = re.compile(r"(?:--([a-z][a-z0-9-]*)|`([a-z_][a-z0-9_]*)`)(?:[ =]([\w.+-]+))?")


def infeasible(stage: str, message: str, workload: str | None = None, *, nested: bool = False) -> Infeasible:
    """An engine's one-line message ("what cannot be met; what to change") as an :class:`Infeasible`,
    its hint naming the workload field to set (``sets`` ``workload.<stage>.<field>=...`` in a
    scenario, ``workload.<field>=...`` for a workload compared alone)."""
    reason, sep, hint = message.rpartition("; ")
    if not sep or not hint.startswith(_HINT_STARTS):  # "...; got `gpus` 8" is no hint
        reason, hint = message, ""
    fields = _STAGE_FIELDS[stage]
    prefix = f"workload.{stage}." if nested else "workload."

    def as_path(m: re.Match) -> str:
        name = (m.group(1) or "").replace("-", "_") or m.group(2)
        if name not in fields:
            return m.group(0)
        if nested and name == "model":  # every stage runs the scenario's model (a review: the hint
            return f"`sets` workload.model={m.group(3) or '...'}"  # named a refused stage path)
        return f"`sets` {prefix}{fields[name]}={m.group(3) or '...'}"

    return Infeasible(
        stage=stage, workload=workload, reason=reason, hint=_PARAMETER.sub(as_path, hint) or None
    )
