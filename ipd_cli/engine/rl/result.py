"""The phases of one step turned into the result model: cost, energy, a refresh cycle, a year."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ipd_cli.engine import formulas as f
from ipd_cli.engine.pretraining import training_plan
from ipd_cli.engine.results import Rl, RlGeneration, RlPhases, RlRun, RlTrainer, RlTrainerMemory, RlWeightSync
from ipd_cli.engine.trainplan import fp8_recipe, routing_text

from .generation import in_flight_batches, sandbox_cap, sandbox_load, wanted_per_replica
from .periodic import NO_PERIODIC, Periodic
from .step import schedule
from .trainer import trainer_holding_gpus

if TYPE_CHECKING:
    from .estimate import Outcome, PoolChoice, Setup


def _weight_sync(out: Outcome) -> RlWeightSync:
    sync = out.sync.sync
    return RlWeightSync(
        transport=sync.transport,
        bytes_moved=sync.bytes_moved,
        bytes_per_sender=sync.bytes_per_sender,
        bytes_per_receiver=sync.bytes_per_receiver,
        bound=sync.bound,
        transfer_s=sync.transfer_s,
        load_s=sync.load_s,
        fixed_s=sync.fixed_s,
        offload_s=out.sync.offload_s + out.sync.switch_s,
        exposed_s=out.step.sync_exposed_s,
        hidden_s=max(0.0, out.sync.seconds - out.step.sync_exposed_s),
        terms_s=sync.terms,
        composition=sync.composition,
    )


def _trainer_memory(s: Setup, train_gpus: int, holding: int) -> RlTrainerMemory:
    """``train_gpus`` given, ``holding`` of them used by the plan (what a colocated step offloads
    from: :func:`~ipd_cli.engine.rl.trainer.trainer_holding_gpus`)."""
    m = s.memory
    return RlTrainerMemory(
        training_state_bytes=m.state_bytes,
        bytes_per_gpu=m.state_bytes / train_gpus,
        usable_hbm_bytes_per_gpu=m.usable_hbm_per_gpu,
        min_train_gpus=m.min_gpus,
        location_during_rollouts="host memory" if s.w.mode == "colocated" else "HBM",
        host_bytes_per_gpu=None if m.offload_bytes is None else m.offload_bytes / holding,
        host_capacity_bytes_per_gpu=m.host_per_gpu,
    )


def _trainer(s: Setup, out: Outcome) -> RlTrainer | None:
    tr = out.trainer
    c = tr.plan
    if c is None:
        return None
    return RlTrainer(
        plan=c.name + routing_text(s.rates.pins),
        parallelism=training_plan(c.plan),
        sequence_tokens=s.rates.y["seq"],
        global_batch=s.rates.sequences,
        training_pass_s=tr.step_s,
        forward_pass_s=tr.forward_s,
        fixed_s=s.rates.fixed_s,
        mfu=tr.mfu,
        memory_bytes_per_gpu=c.out["memory_bytes"],
        memory_gb_per_gpu=c.out["memory_bytes"] / f.GIGA,
        gpus_used=c.gpus_used,
        fp8_recipe=fp8_recipe(s.rates.pins, s.rates.precision),
    )


def _run(
    s: Setup, seconds: float, gpu_hours: float, usd: float, energy_kwh: float, periodic: Periodic
) -> RlRun:
    r = s.run
    return RlRun(
        **f.rl_run(
            s.w.steps_per_refresh, s.w.refreshes_per_year, seconds, gpu_hours, usd, energy_kwh,
            r.goodput, r.staleness_factor, periodic.per_step_s,
        ),
        staleness_bound_measured=r.bound_measured,
        **periodic.fields(),
    )  # fmt: skip


def _cores_bind(s: Setup, out: Outcome, gen_gpus: int, total_gpus: int, asynchronous: bool) -> bool:
    """Whether the host's cores, one sandbox per trajectory in flight, cost the step time: a
    synchronous step's concurrency capped below what its KV cache and the rollouts would give
    each replica; async, the soonest generation on these GPUs with as many sandboxes as it wants
    shorter than with the host's (which count the verifying trajectories too; a code review: a
    flag from the chosen point alone missed a step the cores had slowed 22 % and flagged one a
    whole-trajectory floor set). An RL review: the capped sequences showed as a longer generation,
    with env_bound false and the cores needed equal to those available, so nothing pointed at the
    CPUs."""
    n = s.nums
    if n.sandbox_cores <= 0:
        return False
    load = sandbox_load(n, s.host, total_gpus)
    if asynchronous:
        share, fixed, held = load
        if held >= n.generated * max(1, out.rollouts.staleness_bound):  # never fewer than the bound's
            return False
        _, capped = s.rollouts.in_group(n, gen_gpus, True, None, load)
        _, free = s.rollouts.in_group(n, gen_gpus, True, None, (share, fixed, math.inf))
        return free < capped * (1 - 1e-9)
    replicas = out.gen.replicas
    in_flight = n.generated * in_flight_batches(out.rollouts.staleness_bound, asynchronous)
    wanted = min(out.rollouts.max_batch, float(wanted_per_replica(in_flight, replicas, asynchronous)))
    cap = float(sandbox_cap(n, load, replicas, asynchronous))  # inf where the cores hold every rollout
    return cap < wanted and out.gen.concurrency >= cap


def _staleness(mode: str, out: Outcome) -> float:
    """Policy versions a rollout is behind the policy it trains, on average (``mode``: the schedule
    run): none in synchronous schedules, exactly one in one-step-off, in flight / batch in async
    (Little's law)."""
    if mode == "async":
        return float(out.gen.mean_staleness_steps or 0.0)
    return 1.0 if mode == "one-step-off" else 0.0


def assemble(
    s: Setup, out: Outcome, gen_gpus: int, train_gpus: int, workload: str, price: float, basis: str,
    kw: float, p_ue: float, requested: int | None = None, larger: tuple[int, float] | None = None,
    periodic: Periodic = NO_PERIODIC, pool: PoolChoice | None = None,
) -> Rl:  # fmt: skip
    """Cost and energy of the step; rollouts per kWh count every generated rollout (kept or not);
    ``requested``: the workload's GPUs where ``grow_gpus_to_fit`` ran the step on more; ``larger``:
    the GPUs and GPU-seconds a step of a larger run that costs less a step (``_cheaper_grown``);
    ``pool``: the pool search's answer under the workload's cap (None: a pinned or given pool)."""
    t, n = out.step.seconds, s.nums
    mode = schedule(s.w.mode, s.w.staleness_bound)  # the schedule run (async at 0: disaggregated)
    phases = RlPhases(
        generation_s=out.gen.seconds,
        environment_s=out.env.exposed_s,
        logprob_s=out.trainer.logprob_s,
        training_s=out.trainer.training_s,
        weight_sync_s=out.sync.seconds,
    )
    billed = gen_gpus if s.w.mode == "colocated" else gen_gpus + train_gpus
    gpu_hours = billed * t / f.SECONDS_PER_HOUR
    usd, energy_kwh = gpu_hours * price, gpu_hours * kw * p_ue
    return Rl(
        model=s.model,
        workload=workload,
        mode=s.w.mode,
        generation_precision=s.w.inference_precision,
        training_precision=s.rates.precision,
        training_precision_requested=(
            s.w.training_precision if s.w.training_precision != s.rates.precision else None
        ),
        step_seconds=t,
        usd_per_step=usd,
        gpu_hours_per_step=gpu_hours,
        samples_per_s=n.samples / t,
        phases=phases,
        generation=RlGeneration(  # the Generation's terms of its seconds, by their names
            **{k: getattr(out.gen, k) for k in RlGeneration.model_fields if k != "async_waste_fraction"},
            async_waste_fraction=out.rollouts.async_waste if mode == "async" else 0.0,
        ),
        hidden_by_overlap_s=max(0.0, sum(phases.model_dump().values()) - t),  # rounding: never below 0
        usd_per_1k_samples=usd / n.samples * 1000,
        usd_per_million_generated_tokens=usd / (n.generated * n.mean_response_tokens / 1e6),
        rollouts_per_kwh=n.generated / energy_kwh,
        gpus=billed,
        systems=int(f.whole_systems(billed, s.system_gpus)),
        gpus_per_system=s.system_gpus,
        gpus_requested=requested,
        cheaper_grown_gpus=larger[0] if larger else None,
        cheaper_grown_usd_per_step=larger[1] / f.SECONDS_PER_HOUR * price if larger else None,
        gpus_cap=pool.cap if pool else None,
        gpus_cap_step_seconds=pool.cap_step_s if pool else None,
        gpus_cap_usd_per_step=(pool.cap * pool.cap_step_s / f.SECONDS_PER_HOUR * price if pool else None),
        pool_fits_schedule=pool.fits if pool else None,
        gen_gpus=gen_gpus,
        train_gpus=train_gpus,
        instance_gpus=out.rollouts.gpus,
        replicas=out.gen.replicas,
        concurrency=out.gen.concurrency,
        max_concurrency=out.rollouts.max_batch,
        tail_concurrency=out.gen.tail_concurrency,
        decode_tokens_per_s_per_user=out.gen.decode_tokens_per_s_per_user,
        cpu_cores_needed=out.env.cores_needed,
        cpu_cores_available=out.env.cores_available,
        env_bound=out.env.env_bound,
        sandbox_stall_s=out.env.stall_s,
        sandbox_cores_bind=_cores_bind(s, out, gen_gpus, billed, mode == "async"),
        mean_staleness_steps=_staleness(mode, out),
        staleness_bound=s.w.staleness_bound if s.w.mode == "async" else None,
        longest_trajectory_in_flight_s=out.gen.critical_s if mode == "async" else None,
        longest_trajectory_policy_versions=out.gen.critical_s / t if mode == "async" else None,
        latency_bound=out.gen.latency_bound,
        price_usd_per_gpu_hour=price,
        pricing=basis,
        run=_run(s, t, gpu_hours, usd, energy_kwh, periodic),
        energy_kwh_per_step=energy_kwh,
        weight_sync=_weight_sync(out),
        trainer_memory=_trainer_memory(s, train_gpus, trainer_holding_gpus(out.trainer, train_gpus)),
        trainer=_trainer(s, out),
    )
