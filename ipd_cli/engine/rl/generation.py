"""Generation (rollouts on the serving model) and the environment (sandboxes on host CPUs)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ipd_cli.catalog.schema import RlWorkload
from ipd_cli.engine import serving as sv
from ipd_cli.engine.inputs import Inputs
from ipd_cli.engine.search import best
from ipd_cli.errors import InfeasibleError

from .workload import RlNumbers

MAX_CONCURRENCIES = 256  # concurrencies tried per configuration: every one up to this, else a geometric grid
MAX_STEP_TABLE = 4096  # decode steps tabulated per configuration up to this batch, else computed per split


@dataclass(frozen=True)
class Rollouts:
    """The rollout engine: the serving configurations generation can use, the one in use
    (``choice``), and how generation uses it."""

    candidates: sv.RolloutCandidates
    choice: int  # index into the candidates
    tail_fraction: float
    async_waste: float
    staleness_bound: int
    concurrency: int | None = None  # sequences a replica runs at (None: as many as fit and are wanted)
    chosen: dict[tuple[int, bool], tuple[int, int]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def inst(self) -> sv.Deployment:
        return self.candidates.deployment(self.choice)

    @property
    def gpus(self) -> int:
        return int(self.candidates.gpus[self.choice])

    @property
    def max_batch(self) -> int:
        return max(1, int(self.candidates.max_batch[self.choice]))

    def on(self, nums: RlNumbers, gen_gpus: int, asynchronous: bool) -> Rollouts:
        """The configuration that generates the step's rollouts soonest on ``gen_gpus`` GPUs
        (:func:`generation_seconds` over every candidate; ties: fewer GPUs per replica)."""
        import numpy as np

        key = (gen_gpus, asynchronous)
        if key not in self.chosen:
            seconds, batch = generation_seconds(self, nums, gen_gpus, asynchronous)
            k = best(-seconds, np.isfinite(seconds), -self.candidates.gpus)
            if k is None:  # none fits: generation() names the smallest replica
                k = int(np.argmin(self.candidates.gpus))
            self.chosen[key] = (k, int(batch[k]))
        k, b = self.chosen[key]
        return replace(self, choice=k, concurrency=b, chosen=self.chosen)


def rollout_engine(ctx: sv.ServingContext, w: RlWorkload, nums: RlNumbers, pricing: str) -> Rollouts:
    """The serving deployment search's configurations for the step's rollouts, starting from the
    one with the most tokens/s per GPU at its KV limit (its size sets the split search's grain);
    :meth:`Rollouts.on` picks, for each generation pool, the one that generates the step soonest."""
    cands = sv.rollout_candidates(
        ctx,
        input_tokens=int(nums.prompt_tokens + nums.observation_tokens),
        output_tokens=int(round(nums.mean_response_tokens)),
        precision=w.inference_precision,
        speculative=w.speculative,
        pricing=pricing,
    )
    import numpy as np

    densest = cands.densest()
    rollouts_in_flight = nums.generated * ((w.staleness_bound + 1) if w.mode == "async" else 1)
    top = int(min(np.maximum(1, cands.max_batch).max(), math.ceil(rollouts_in_flight)))
    if top <= MAX_STEP_TABLE:  # drop the configurations another of the same size always beats
        keep = np.union1d(cands.undominated(top), [densest])
        cands, densest = cands.subset(keep), int(np.searchsorted(keep, densest))
    inp = ctx.inp
    return Rollouts(
        candidates=cands,
        choice=densest,
        tail_fraction=inp.read("rl.tail_concurrency_fraction", "tail concurrency share"),
        async_waste=inp.read("rl.async_waste_fraction", "async waste"),
        staleness_bound=w.staleness_bound,
    )


def generation_seconds(r: Rollouts, nums: RlNumbers, gen_gpus: int, asynchronous: bool) -> tuple[Any, Any]:
    """:func:`generation`'s seconds for every candidate configuration at once, each at the
    concurrency (at most what its KV cache holds and the rollouts fill) that generates soonest,
    and that concurrency; inf where a replica does not fit in ``gen_gpus``. Fewer sequences per
    replica decode each faster: a latency-bound step can gain more from that than it loses."""
    import numpy as np

    c = r.candidates
    n = c.gpus.size
    replicas = gen_gpus // c.gpus
    ok = replicas >= 1
    replicas = np.maximum(replicas, 1)
    wanted = np.ceil(nums.generated * ((r.staleness_bound + 1) if asynchronous else 1) / replicas)
    cap = np.maximum(1, np.minimum(np.maximum(1, c.max_batch), wanted))
    top = int(cap.max())
    grid = np.arange(1.0, top + 1) if top <= MAX_CONCURRENCIES else np.unique(
        np.round(np.geomspace(1, top, MAX_CONCURRENCIES))
    )  # fmt: skip
    b = np.minimum(grid[None, :], cap[:, None])  # (candidate, concurrency): each row ends at its cap
    b_tail = np.maximum(1, np.floor(b * r.tail_fraction))
    if top <= MAX_STEP_TABLE:  # batches are whole numbers: look the steps up
        table, rows = c.step_table(top), np.arange(n)[:, None]
        step_bulk, step_tail = table[rows, b.astype(int) - 1], table[rows, b_tail.astype(int) - 1]
    else:
        k = np.repeat(np.arange(n), grid.size)
        step_bulk = c.step_s(b.ravel(), k).reshape(b.shape)
        step_tail = c.step_s(b_tail.ravel(), k).reshape(b.shape)
    v_bulk, v_tail = c.speculative[:, None] / step_bulk, c.speculative[:, None] / step_tail
    rep = replicas[:, None]
    prefill = nums.generated * c.prefill_s[:, None] / rep
    slot_s = nums.mean_response_tokens / v_bulk + nums.turns * nums.tool_s
    bulk = nums.generated * slot_s / (rep * b) + prefill
    if asynchronous:
        seconds = bulk * (1 + r.async_waste)
    else:
        drained = bulk + (nums.max_response_tokens - nums.mean_response_tokens) / v_tail
        seconds = np.maximum(drained, nums.max_response_tokens / v_tail + nums.max_turns * nums.tool_s)
    j = grid.size - 1 - np.argmin(seconds[:, ::-1], axis=1)  # ties: the larger concurrency
    rows = np.arange(n)
    return np.where(ok, seconds[rows, j], np.inf), b[rows, j]


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
    b = max(1, min(r.max_batch, wanted, r.concurrency or wanted))
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
