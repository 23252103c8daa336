"""Generation (rollouts on the serving model) and the environment (sandboxes on host CPUs)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ipd_cli.catalog.schema import RlWorkload
from ipd_cli.engine import serving as sv
from ipd_cli.engine.inputs import Inputs
from ipd_cli.errors import InfeasibleError

from .workload import RlNumbers


@dataclass(frozen=True)
class Rollouts:
    """The rollout engine: one serving instance, and how generation uses it."""

    inst: sv.Deployment
    max_batch: int
    tail_fraction: float
    async_waste: float
    staleness_bound: int

    @property
    def gpus(self) -> int:
        return self.inst.gpus


def rollout_engine(ctx: sv.ServingContext, w: RlWorkload, nums: RlNumbers, pricing: str) -> Rollouts:
    """The rollout replica the serving deployment search picks: with a fixed generation pool, the
    configuration that generates the step's rollouts fastest on it; when the split is searched,
    the one with the most tokens/s per GPU at its KV limit."""
    inst = sv.rollout_deployment(
        ctx,
        rollouts=nums.generated,
        gen_gpus=w.gen_gpus if w.mode != "colocated" else (w.gpus or w.gen_gpus),
        input_tokens=int(nums.prompt_tokens + nums.observation_tokens),
        output_tokens=int(round(nums.mean_response_tokens)),
        precision=w.inference_precision,
        speculative=w.speculative,
        pricing=pricing,
    )
    inp = ctx.inp
    inp.given(
        "rollout replica",
        inst.configuration,
        "",
        "deployment search",
        note="chosen by the serving deployment search for the step's rollouts",
    )
    return Rollouts(
        inst=inst,
        max_batch=max(1, inst.max_batch),
        tail_fraction=inp.read("rl.tail_concurrency_fraction", "tail concurrency share"),
        async_waste=inp.read("rl.async_waste_fraction", "async waste"),
        staleness_bound=w.staleness_bound,
    )


@dataclass(frozen=True)
class Generation:
    seconds: float
    replicas: int
    concurrency: int
    tail_concurrency: int
    decode_tokens_per_s_per_user: float
    live_sequences: float
    latency_bound: bool
    mean_staleness_steps: float | None


def generation(r: Rollouts, nums: RlNumbers, gen_gpus: int, asynchronous: bool, where: str) -> Generation:
    """Bulk decode by Little's law on ``gen_gpus // instance`` replicas; synchronous modes also
    drain the longest response at the tail concurrency, or wait for the longest trajectory."""
    replicas = gen_gpus // r.gpus
    if replicas < 1:
        raise InfeasibleError(
            f"{where} needs {r.gpus}-GPU inference instances; {gen_gpus} generation GPUs hold none"
        )
    # synchronous: one wave of the step's rollouts; async: in flight up to the staleness bound
    wanted = math.ceil(nums.generated * ((r.staleness_bound + 1) if asynchronous else 1) / replicas)
    b = max(1, min(r.max_batch, wanted))
    b_tail = max(1, int(b * r.tail_fraction))
    v_bulk, v_tail = r.inst.decode_speed(b), r.inst.decode_speed(b_tail)
    prefill = nums.generated * r.inst.prefill_s / replicas  # prefills share the instance with decode
    # Little's law: each of the b slots holds one trajectory for its decode time plus tool waits
    slot_s = nums.mean_response_tokens / v_bulk + nums.turns * nums.tool_s
    bulk = nums.generated * slot_s / (replicas * b) + prefill
    crit = nums.max_response_tokens / v_tail + nums.max_turns * nums.tool_s
    live: float  # trajectories in flight
    if asynchronous:
        seconds, latency_bound, live = bulk * (1 + r.async_waste), False, replicas * b
    else:
        drained = bulk + (nums.max_response_tokens - nums.mean_response_tokens) / v_tail
        seconds, latency_bound, live = max(drained, crit), crit > drained, min(nums.generated, replicas * b)
    return Generation(
        seconds=seconds,
        replicas=replicas,
        concurrency=b,
        tail_concurrency=b_tail,
        decode_tokens_per_s_per_user=v_bulk,
        live_sequences=live,
        latency_bound=latency_bound,
        mean_staleness_steps=replicas * b / nums.generated if asynchronous else None,
    )


@dataclass(frozen=True)
class HostCpus:
    cores_per_gpu: float
    core_speed: float  # relative to a Grace core


def host_cpus(inp: Inputs, system_name: str) -> HostCpus:
    cat = inp.cat
    system = cat.systems[system_name]
    cpu = cat.cpus[system.host_cpu]
    cores = system.host_cpus * cpu.cores / system.accelerators
    note = f"{system.host_cpus} x {cpu.cores}-core {system.host_cpu} per {system.accelerators} GPUs"
    inp.given("host cores per GPU", cores, "cores", cat.origin("systems", system_name), note=note)
    speed = 1.0
    if cpu.relative_core_throughput is not None:
        speed = inp.read(f"cpus.{system.host_cpu}.relative_core_throughput", "host core speed (Grace = 1)")
    return HostCpus(cores, speed)


@dataclass(frozen=True)
class Environment:
    exposed_s: float  # sandbox start, verification and CPU stalls not hidden by generation
    cores_needed: float
    cores_available: float
    env_bound: bool


def environment(
    nums: RlNumbers, host: HostCpus, gen: Generation, total_gpus: int, asynchronous: bool
) -> Environment:
    """Sandboxes hold cores for a whole trajectory; too few cores stretch generation."""
    verify = nums.verify_s / host.core_speed
    cores_avail = host.cores_per_gpu * total_gpus
    traj_s = nums.mean_response_tokens / gen.decode_tokens_per_s_per_user + nums.turns * nums.tool_s
    traj_s += nums.boot_s + verify
    env_bound_s = (
        nums.generated * nums.sandbox_cores * traj_s / cores_avail if nums.sandbox_cores > 0 else 0.0
    )
    stall = max(0.0, env_bound_s - gen.seconds)
    return Environment(
        exposed_s=stall + (0.0 if asynchronous else nums.boot_s + verify),
        cores_needed=nums.sandbox_cores * gen.live_sequences,
        cores_available=cores_avail,
        env_bound=stall > 0,
    )
