"""`estimate_rl`: the phases put together, the split chosen, the result assembled."""

from __future__ import annotations

import math
from collections import OrderedDict
from contextvars import ContextVar
from dataclasses import dataclass, replace
from itertools import takewhile
from typing import Any

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.schema import Model, RlWorkload
from ipd_cli.engine import formulas as f
from ipd_cli.engine import serving as sv
from ipd_cli.engine.inputs import Inputs, KeptInputs
from ipd_cli.engine.pricing import kw_per_gpu, pue, usd_per_gpu_hour
from ipd_cli.engine.results import RlResult
from ipd_cli.engine.trace import CLI
from ipd_cli.errors import InfeasibleError, InputError

from .generation import (
    AHEAD_POOLS,
    NO_LOAD,
    Environment,
    Generation,
    HostCpus,
    Load,
    Rollouts,
    active_replicas,
    environment,
    exposed_floor,
    fewest_in_flight,
    generation,
    host_cpus,
    in_flight_batches,
    rollout_engine,
    rollout_floors,
    sandbox_load,
)
from .periodic import periodic_terms
from .result import assemble
from .step import (
    Step,
    SyncPhase,
    fewest_split_gpus,
    grown_split,
    pool_candidates,
    schedule,
    split_gpus,
    step,
    step_floor,
    step_seconds,
    whole_nodes,
)
from .sync import (
    NO_SYNC,
    Links,
    SyncPlan,
    WeightSync,
    bulk_on_gpu,
    reshard_floor,
    sync_links,
    weight_sync,
)
from .trainer import (
    Trainer,
    TrainerMemory,
    TrainerRates,
    check_trainer_memory,
    min_trainer_gpus,
    no_trainer,
    trainer,
    trainer_holding_gpus,
    trainer_memory,
    trainer_rates,
    trainer_seconds,
    trainer_sizes,
)
from .workload import RlNumbers, check_own_transport, resolve_request, workload_numbers


def weight_tensor_counts(arch: Model) -> tuple[int, int]:
    """The tensors of ``arch``'s checkpoint a weight update iterates over, and how many of them are
    routed experts' (:func:`formulas.weight_tensors`)."""
    matrices = 3 if arch.gated_ffn else 2
    routed = arch.routed_layers  # 0 for a dense model
    attention = f.attention_tensors(
        arch.kv_lora_rank is not None,
        arch.q_lora_rank is not None,
        arch.qk_norm,
        arch.attention_biases,
        arch.attention_sinks,
    )
    experts = f.routed_expert_tensors(arch.experts, matrices, arch.fused_expert_tensors or 0)
    router = 1 + arch.router_bias
    tensors = f.weight_tensors(
        arch.layers, routed, experts, arch.shared_experts, matrices, attention, router, arch.tied_embeddings
    )
    return int(tensors), int(routed * experts)


@dataclass(frozen=True)
class InstancePlan:
    """What :func:`sync_plan` works out of a rollout instance, the model and the catalog alone
    (the wire and training precisions, the transport): the same for every split and replica
    count, so a split search works it out once per configuration (:func:`_sync`)."""

    arch: Model
    transport: str
    b_wire: float  # bytes per weight on the wire
    b_train: float  # bytes per weight at the training precision
    model_bytes: float
    instance_bytes: float
    instance_gpus: int  # paid per replica (the GPUs its layout strands included)
    tensors: int
    on_receiver: float  # HBM bytes a receiver reads and writes to change precision (0: none)
    bulk: float | None
    misc_bytes: float
    misc_tensors: float
    fullest: float | None
    mean: float | None
    holding_gpus: int  # of a replica's GPUs, those that hold weights (its layout's)

    @property
    def fullest_bulk_bytes(self) -> float:
        """The bulk bytes on the fullest receiving GPU (:func:`sync.bulk_on_gpu`)."""
        return bulk_on_gpu(self.bulk, self.instance_bytes, self.holding_gpus, self.fullest)

    def quantize_bytes(self, trainer_gpus: int) -> float:
        """HBM bytes per GPU to change precision (the trainer's or the receivers', the larger)."""
        arch, b_wire, b_train = self.arch, self.b_wire, self.b_train
        on_trainer = arch.total_params * (b_train + b_wire) / trainer_gpus if b_wire < b_train else 0.0
        return max(on_trainer, self.on_receiver)

    def plan(
        self,
        *,
        trainer_gpus: int,
        inference_gpus: int,
        colocated: bool,
        senders: int | None = None,
        engine_load: bool | None = None,
        shard_group_gpus: int | None = None,
        stack: str = "nemo-rl",
        trainer_stages: int = 1,
        gather_gpus: int | None = None,
        overhead: bool = True,
    ) -> SyncPlan:
        """The update into these instances from a trainer of ``trainer_gpus`` (:func:`sync_plan`)."""
        return SyncPlan(
            transport=self.transport,
            model_bytes=self.model_bytes,
            instance_bytes=self.instance_bytes,
            tensors=self.tensors,
            trainer_gpus=trainer_gpus,
            inference_gpus=inference_gpus,
            instance_gpus=self.instance_gpus,
            colocated=colocated,
            senders=senders,
            engine_load=engine_load,
            quantize_bytes_per_gpu=self.quantize_bytes(trainer_gpus),
            shard_group_gpus=shard_group_gpus,
            stack=stack,
            train_bytes=self.arch.total_params * self.b_train,
            trainer_stages=trainer_stages,
            gather_gpus=gather_gpus,
            overhead=overhead,
            bulk_bytes=self.bulk,
            bulk_fullest_share=self.fullest,
            bulk_mean_share=self.mean,
            misc_bytes=self.misc_bytes,
            misc_tensors=self.misc_tensors,
            holding_gpus=self.holding_gpus,
        )


def instance_plan(
    inp: Inputs,
    arch: Model,
    inst: sv.Deployment,
    *,
    transport: str,
    wire: str,
    training: str,
    bulk_share: float | None = None,
) -> InstancePlan:
    """:func:`sync_plan`'s part that depends on neither the trainer nor the receivers' count."""
    b_wire = inp.read(f"serving.bytes_per_weight.{wire}", f"wire bytes per weight ({wire})")
    b_train = inp.quiet().read(f"serving.bytes_per_weight.{training}")
    b_inf = inp.quiet().read(f"serving.bytes_per_weight.{inst.precision}")
    dense, expert, _ = sv.weight_split(arch, b_wire)
    # every rank of an attention TP group holds MLA's down-projections and the routers whole: t - 1
    # more copies of them in each attention data-parallel rank's, and on each GPU 1 - 1/t more of
    # them a stage
    whole, t = sv.held_whole_params(arch) * b_wire, inst.attention_tp
    instance_bytes = f.stored_weight_bytes(dense, expert, inst.dense_replicas)
    instance_bytes += whole * inst.dense_replicas * (t - 1)
    # the fullest receiver's weights: its share of the dense copies and of the routed experts (a
    # review: the instance's bytes over its paid GPUs, the stranded ones and uneven experts spread)
    fullest_gpu = dense * inst.dense_replicas / inst.instance_gpus + expert * inst.experts_on_fullest_gpu
    fullest_gpu += whole * (1 - 1 / t) / inst.stages
    on_receiver = fullest_gpu * (1 + b_inf / b_wire) if b_inf < b_wire else 0.0
    tensors, experts = weight_tensor_counts(arch)
    bulk, misc_bytes, misc_tensors, fullest, mean = None, 0.0, 0.0, None, None
    if transport == "nccl-reshard" and (arch.is_moe or bulk_share is not None):  # routed experts: bulk
        b_bf16 = inp.quiet().read("serving.bytes_per_weight.bf16")
        bulk, misc_bytes = expert, dense
        # the routed experts' share the fullest and the mean GPU hold
        fullest, mean = inst.experts_on_fullest_gpu, inst.experts_on_mean_gpu
        if bulk_share is not None:  # the share a measurement publishes for its model
            bulk, misc_bytes = bulk_share * (dense + expert), (1 - bulk_share) * (dense + expert)
            fullest = mean = None
        misc_tensors = f.misc_tensors(tensors, experts, scaled=b_wire < b_bf16)
    return InstancePlan(
        arch=arch,
        transport=transport,
        b_wire=b_wire,
        b_train=b_train,
        model_bytes=arch.total_params * b_wire,
        instance_bytes=instance_bytes,
        instance_gpus=inst.gpus,
        tensors=tensors,
        on_receiver=on_receiver,
        bulk=bulk,
        misc_bytes=misc_bytes,
        misc_tensors=misc_tensors,
        fullest=fullest,
        mean=mean,
        holding_gpus=inst.instance_gpus,
    )


def sync_plan(
    inp: Inputs,
    arch: Model,
    inst: sv.Deployment,
    *,
    transport: str,
    wire: str,
    training: str,
    trainer_gpus: int,
    inference_gpus: int,
    colocated: bool,
    senders: int | None = None,
    engine_load: bool | None = None,
    shard_group_gpus: int | None = None,
    stack: str = "nemo-rl",
    trainer_stages: int = 1,
    gather_gpus: int | None = None,
    overhead: bool = True,
    bulk_share: float | None = None,
) -> SyncPlan:
    """What an update moves into rollout instances like ``inst`` at the ``wire`` precision, and the
    quantisation it needs on the trainer (wire narrower than ``training``) or the receivers."""
    parts = instance_plan(
        inp, arch, inst, transport=transport, wire=wire, training=training, bulk_share=bulk_share
    )
    return parts.plan(
        trainer_gpus=trainer_gpus, inference_gpus=inference_gpus, colocated=colocated, senders=senders,
        engine_load=engine_load, shard_group_gpus=shard_group_gpus, stack=stack,
        trainer_stages=trainer_stages, gather_gpus=gather_gpus, overhead=overhead,
    )  # fmt: skip


def estimate_weight_sync(
    cat: Catalog,
    hardware: str,
    model: str,
    *,
    transport: str,
    trainer_gpus: int,
    inference_gpus: int,
    instance_gpus: int | None = None,
    instance_tp: int | None = None,
    wire: str = "bf16",
    training: str = "bf16",
    colocated: bool = False,
    senders: int | None = None,
    engine_load: bool | None = None,
    stack: str | None = None,
    trainer_stages: int = 1,
    gather_gpus: int | None = None,
    overhead: bool = True,
    bulk_share: float | None = None,
) -> WeightSync:
    """One weight update on its own (``ipd validate``'s weight-sync cases): rollout instances of
    ``instance_gpus`` (default: the smallest that holds the model) serving at the wire precision,
    attention tensor parallel over ``instance_tp`` GPUs (default: the serving model's layout),
    driven by the framework ``stack`` (default: the catalog's), a trainer of ``trainer_stages``
    pipeline stages whose senders gather from ``gather_gpus`` GPUs (default: its shard group);
    ``bulk_share``: the share of the bytes nccl_reshard moves shard to shard, where published."""
    ctx = sv.serving_context(cat, hardware, model)
    tp = instance_tp if ctx.model.is_moe else None  # dense models are tensor parallel anyway
    inst = sv.serving_instance(ctx, precision=wire, instance_gpus=instance_gpus, attention_tp=tp)
    memory = trainer_memory(ctx.inp, ctx.name, ctx.system.accelerator, ctx.model, colocated=False)
    plan = sync_plan(
        ctx.inp, ctx.model, inst, transport=transport, wire=wire, training=training,
        trainer_gpus=trainer_gpus, inference_gpus=inference_gpus, colocated=colocated,
        senders=senders, engine_load=engine_load, shard_group_gpus=min(trainer_gpus, memory.sharded_gpus),
        stack=stack or ctx.inp.cat.rl.default_sync_stack.value, trainer_stages=trainer_stages,
        gather_gpus=gather_gpus, overhead=overhead, bulk_share=bulk_share,
    )  # fmt: skip
    # a published run's inference GPUs are those its instances run on: a layout that would strand
    # GPUs of a scale-up domain under a search (TP32 in a 72-GPU rack pays 36) strands none of them
    plan = replace(plan, instance_gpus=plan.holders)
    return weight_sync(
        ctx.inp, sync_links(ctx.inp, ctx.name, ctx.system.accelerator, ctx.system.accelerators), plan
    )


@dataclass(frozen=True)
class RunTerms:
    """A whole run's terms beyond its steps: the goodput (failures, restarts) and, off-policy, the
    staleness factor phi and the largest bound it was measured at."""

    goodput: float
    staleness_factor: float
    bound_measured: int | None


def run_terms(inp: Inputs, w: RlWorkload) -> RunTerms:
    """As a pre-training run, an RL run loses ``efficiency.training_goodput``'s complement of its
    time; an off-policy schedule (one-step-off, async with a bound) takes phi steps per
    synchronous one (rl-loop.md 7.7: S_async = S_sync x phi(eta))."""
    goodput = inp.read("efficiency.training_goodput", "scale efficiency (training goodput)")
    if schedule(w.mode, w.staleness_bound) not in ("one-step-off", "async"):
        return RunTerms(goodput, 1.0, None)
    factor = inp.read("rl.staleness_steps_factor", "steps per synchronous step off-policy (phi)")
    measured = inp.read("rl.staleness_bound_measured", "staleness bound phi was measured at")
    return RunTerms(goodput, factor, int(measured))


@dataclass(frozen=True)
class Setup:
    """Everything a step needs that does not depend on the split."""

    w: RlWorkload
    model: str
    where: str
    transport: str
    stack: str
    nums: RlNumbers
    rollouts: Rollouts
    host: HostCpus
    rates: TrainerRates
    links: Links
    memory: TrainerMemory
    inp: Inputs
    arch: Model
    offload_bytes: float
    switch_s: float
    system_gpus: int  # GPUs per system: the generation pool's grain in a searched split
    run: RunTerms  # what a whole run pays beyond its steps
    kept: Inputs  # ``inp`` recording nothing and keeping what it reads (the steps a search tries)


def _transport(inp: Inputs, w: RlWorkload, origin: str) -> str:
    if w.sync_transport is not None:
        return inp.given(
            "weight-sync transport", w.sync_transport, "", origin, path="workload.sync_transport"
        )
    if w.mode == "colocated":
        return inp.given(
            "weight-sync transport", "colocated", "", origin, note="colocated mode reloads in place"
        )
    choice = inp.cat.rl.default_sync_transport
    return inp.trace.given(
        "weight-sync transport", choice.value, "", inp.cat.origin("rl", "default_sync_transport"),
        note=choice.note, source=choice.source,
    )  # fmt: skip


def _stack(inp: Inputs, w: RlWorkload, origin: str) -> str:
    if w.sync_stack is not None:
        return inp.given("weight-sync stack", w.sync_stack, "", origin, path="workload.sync_stack")
    choice = inp.cat.rl.default_sync_stack
    return inp.trace.given(
        "weight-sync stack", choice.value, "", inp.cat.origin("rl", "default_sync_stack"),
        note=choice.note, source=choice.source,
    )  # fmt: skip


def _largest_trainer(w: RlWorkload, split: str | None) -> int:
    """The most GPUs the request can give the trainer: all of them colocated, the given trainer,
    else (the split searched) all but one: generation takes a pool of at least one GPU
    (:func:`choose_split`: a searched split's trainer has at most ``gpus`` less the smallest pool,
    a grown one the fewest GPUs that hold the state, read from a table of its own where more). A
    trainer table of 2,047 GPUs costs less than one of 2,048: an RL batch of 2^k sequences runs
    on powers of two, and the plans on exactly 2,048 were most of compare's trainer searches."""
    given = w.given_split()
    if w.mode == "colocated":
        return w.total_gpus()
    if given is not None and split is None:
        return given[1]
    return w.total_gpus() - 1


def check_context(ctx: sv.ServingContext, nums: RlNumbers) -> None:
    """The longest trajectory (prompt, tool output and the longest response) must fit the model's
    context: the KV cache admits it and the critical path decodes it (the rollout engine's own
    check sees the mean response only)."""
    longest = nums.prompt_tokens + nums.observation_tokens + nums.max_response_tokens
    if longest > ctx.model.max_context:
        raise InputError(
            f"{ctx.mname} holds at most {ctx.model.max_context:,} tokens; the RL workload's longest "
            f"trajectory is {longest:,.0f} (prompt_tokens {nums.prompt_tokens:,.0f} + observation_tokens "
            f"{nums.observation_tokens:,.0f} + max_response_tokens {nums.max_response_tokens:,.0f}); "
            f"lower {(term := _largest_term(nums))} (`sets` workload.{term}=N) or use a longer-context "
            "model"
        )


def _largest_term(nums: RlNumbers) -> str:
    terms = {
        "max_response_tokens": nums.max_response_tokens,
        "observation_tokens": nums.observation_tokens,
        "prompt_tokens": nums.prompt_tokens,
    }
    return max(terms, key=lambda k: terms[k])  # ties: the response first


def setup(
    ctx: sv.ServingContext, w: RlWorkload, pricing: str, origin: str, split: str | None = None
) -> Setup:
    inp, system = ctx.inp, ctx.system
    nums = workload_numbers(ctx.trace, w, origin)
    check_context(ctx, nums)
    colocated = w.mode == "colocated"
    rates = trainer_rates(
        inp, ctx.name, system.accelerator, ctx.model, ctx.mname, w, nums, _largest_trainer(w, split)
    )
    where = f"{ctx.mname} on {ctx.name}"
    need, plan = min_trainer_gpus(rates)
    memory = trainer_memory(inp, ctx.name, system.accelerator, ctx.model, colocated, need, plan)
    if need is None:
        raise no_trainer(where, memory, rates.y["seq"], w.training_plan)
    host = host_cpus(inp, ctx.name)
    offload, switch = 0.0, 0.0
    if colocated:
        offload = (
            inp.read("rl.offload_bytes_per_param", "offload bytes per parameter") * ctx.model.total_params
        )
        switch = inp.read("rl.engine_switch_s", "engine switch")
    return Setup(
        w=w,
        model=ctx.mname,
        where=where,
        transport=_transport(inp, w, origin),
        stack=_stack(inp, w, origin),
        nums=nums,
        rollouts=rollout_engine(ctx, w, nums, pricing, after_s=exposed_floor(nums, host, False)),
        host=host,
        rates=rates,
        links=sync_links(inp, ctx.name, system.accelerator, system.accelerators),
        memory=memory,
        inp=inp,
        arch=ctx.model,
        offload_bytes=offload,
        switch_s=switch,
        system_gpus=int(system.accelerators),
        run=run_terms(inp, w),
        kept=inp.kept(),
    )


@dataclass(frozen=True)
class Outcome:
    rollouts: Rollouts
    gen: Generation
    env: Environment
    trainer: Trainer
    sync: SyncPhase
    step: Step


def evaluate(s: Setup, gen_gpus: int, train_gpus: int, quiet: bool = False) -> Outcome:
    """One step on ``gen_gpus`` + ``train_gpus`` (the same GPUs when colocated), on the rollout
    configuration and concurrency with the shortest step: the soonest rollouts (generation, or the
    sandboxes' bound where longer) of each group of configurations that take the same weight
    update (:meth:`Rollouts.in_group`), so a faster generation on replicas whose update is
    slower is not taken where the update costs the step more (a looser staleness bound never
    lengthens a step). Groups whose rollout floor, with the environment every step exposes and no
    update (then with their own update), cannot beat the best step found are not evaluated."""
    mode = schedule(s.w.mode, s.w.staleness_bound)
    asynchronous = mode == "async"
    total = gen_gpus if s.w.mode == "colocated" else gen_gpus + train_gpus
    load = sandbox_load(s.nums, s.host, total)  # the sandboxes' bound, part of each choice
    first, gen_s = s.rollouts.in_group(s.nums, gen_gpus, asynchronous, None, load)
    if math.isinf(gen_s):  # no replica fits: generation names the smallest
        generation(first, s.nums, gen_gpus, asynchronous, s.where)
    tr = _trainer(s, train_gpus)
    best = _outcome(s, first, mode, gen_gpus, train_gpus, tr, quiet=True)
    best = _other_groups(s, best, mode, gen_gpus, train_gpus, tr, load)
    slack = best.step.seconds - best.sync.seconds
    if asynchronous and best.gen.seconds + best.env.exposed_s < slack * (1 - 1e-9):
        # the trainer sets the step: the same step with the fewest trajectories in flight (the least
        # staleness), not the most the bound allows
        b = fewest_in_flight(best.rollouts, s.nums, gen_gpus, load, slack)
        if b < (best.rollouts.concurrency or b):
            r = replace(best.rollouts, concurrency=b)
            best = _outcome(s, r, mode, gen_gpus, train_gpus, tr, quiet=True, sync=best.sync)
    if quiet:
        return best
    out = _outcome(s, best.rollouts, mode, gen_gpus, train_gpus, tr, quiet=False)  # its inputs recorded
    pinned = s.w.generation_layout
    note = (
        "the serving deployment search's configuration with the shortest step: the soonest generation "
        "of the step's rollouts, unless another's weight update is enough faster"
    )
    if pinned is not None:
        note += f", within the workload's generation_layout {pinned}"
    s.inp.given("rollout replica", out.rollouts.inst.configuration, "", "deployment search", note=note)
    return out


def _trainer(s: Setup, train_gpus: int) -> Trainer:
    """:func:`trainer` on ``train_gpus``, a pure function of them and the setup's rates and
    workload: kept for the search where values are (``s.kept``), as a split search asks for each
    trainer size on pool after pool (9,705 asks in tests/test_rl*.py)."""
    memo = s.kept.memo if isinstance(s.kept, KeptInputs) else None
    if memo is None:
        return trainer(s.rates, s.w, train_gpus)
    key = ("rl trainer", train_gpus)
    have = memo.get(key)
    if have is None:
        have = memo[key] = trainer(s.rates, s.w, train_gpus)
    return have


def _other_groups(
    s: Setup, best: Outcome, mode: str, gen_gpus: int, train_gpus: int, tr: Trainer, load: Load
) -> Outcome:
    """:func:`evaluate`'s step on the other groups of configurations (:meth:`Rollouts.alternatives`)
    where one is shorter than ``best``, the soonest generation's; those whose floors cannot beat
    the best step found are not evaluated. At the first group whose soonest rollouts are not
    kept, it and the next groups that may still beat the best are made at once
    (:meth:`Rollouts.guess`: one by one, a step that went on to a tenth group paid ten searches)."""
    asynchronous = mode == "async"
    training = tr.logprob_s + tr.training_s
    env = exposed_floor(s.nums, s.host, asynchronous)  # what any rollout exposes besides
    holding = trainer_holding_gpus(tr, train_gpus)
    no_update = SyncPhase(NO_SYNC)
    none_s, none_busy = no_update.seconds, no_update.sender_busy_s
    best_s = best.step.seconds  # (the steps compared as :func:`timed`'s seconds: step_seconds)
    replicas: dict[int, int] = {}  # _replicas by GPUs per replica (all it reads of a configuration)
    # each group's update and its seconds and senders' busy seconds (None: ruled out by a floor)
    syncs: dict[int, tuple[SyncPhase, float, float] | None] = {}

    def may_beat(alternative: tuple[int, float]) -> bool:  # the group's floor with no update
        return step_seconds(mode, alternative[1] + env, training, none_s, none_busy) < best_s

    def update(group: int, floor: float) -> tuple[SyncPhase, float, float] | None:
        """The group's own update (with its seconds and senders' busy seconds) where, with its
        rollout floor, it may still beat the best step; None where a floor under its update, or
        the update itself, rules the group out."""
        if group not in syncs:  # a group ruled out stays out: the best only shortens
            r = s.rollouts.member(group)
            n = replicas.get(r.gpus)
            if n is None:
                n = replicas[r.gpus] = _replicas(s, r, gen_gpus, asynchronous)
            under = _sync_floor(s, r, holding, n)
            if (
                under is not None
                and step_seconds(mode, floor + env, training, under.seconds, under.sender_busy_s) >= best_s
            ):
                syncs[group] = None  # a floor under the group's own update: no shorter, nor the update
            else:
                sync = _sync(s, r, holding, n, quiet=True)
                syncs[group] = (sync, sync.seconds, sync.sender_busy_s)
        have = syncs[group]
        if have is None or step_seconds(mode, floor + env, training, have[1], have[2]) >= best_s:
            return None  # the group's own update: still no shorter
        return have

    alternatives = s.rollouts.alternatives(s.nums, gen_gpus, asynchronous, load)
    for i, (group, floor) in enumerate(alternatives):
        if not may_beat((group, floor)):
            break  # nor any group after it (no update: a floor)
        have = update(group, floor)
        if have is None:
            continue
        if isinstance(s.kept, KeptInputs) and not s.rollouts.made(gen_gpus, asynchronous, group, load):
            # with the next groups that may beat the best as it stands (their updates are read
            # once and kept; where reads are sampled, only the groups a step asks for read theirs)
            rest = [a for a, f in takewhile(may_beat, alternatives[i + 1 :]) if update(a, f) is not None]
            s.rollouts.guess(s.nums, gen_gpus, asynchronous, [group, *rest], load)
        r, gen_s = s.rollouts.in_group(s.nums, gen_gpus, asynchronous, group, load)
        sync, sync_s, busy_s = have
        if step_seconds(mode, gen_s + env, training, sync_s, busy_s) < best_s:
            out = _outcome(s, r, mode, gen_gpus, train_gpus, tr, quiet=True, sync=sync)
            if out.step.seconds < best_s:
                best, best_s = out, out.step.seconds
    return best


def _replicas(s: Setup, r: Rollouts, gen_gpus: int, asynchronous: bool) -> int:
    """Replicas of ``r``'s configuration that generate on ``gen_gpus`` (as :func:`generation`)."""
    in_flight = s.nums.generated * in_flight_batches(r.staleness_bound, asynchronous)
    return int(active_replicas(gen_gpus // r.gpus, in_flight, asynchronous))


def _sync(s: Setup, r: Rollouts, holding: int, replicas: int, quiet: bool) -> SyncPhase:
    """The weight update into ``replicas`` of ``r``'s configuration (async: only the replicas that
    generate take it; the others idle, see active_replicas) from the ``holding`` trainer GPUs
    (:func:`trainer_holding_gpus`), plus a colocated step's offload."""
    kept = s.kept if quiet and isinstance(s.kept, KeptInputs) else None
    if kept is not None:  # a pure function of these (the rest is the setup's): kept for the search
        key = ("rl sync", r.choice, holding, replicas)
        have = kept.memo.get(key)
        if have is None:
            have = kept.memo[key] = _priced_sync(s, r, holding, replicas, quiet)
        return have
    return _priced_sync(s, r, holding, replicas, quiet)


def _priced_sync(s: Setup, r: Rollouts, holding: int, replicas: int, quiet: bool) -> SyncPhase:
    """:func:`_sync`, worked out."""
    colocated = s.w.mode == "colocated"
    inp = s.kept if quiet else s.inp
    parts = _kept_instance_plan(s, r) if quiet else None
    if parts is None:
        parts = _instance_plan(s, inp, r)
    plan = parts.plan(
        # the replicas' GPUs: a pool's GPUs that hold no replica take no update (an audit: 68 such
        # GPUs beside one 72-GPU replica lengthened its sync 2.44 -> 2.48 s; async: the active ones)
        trainer_gpus=holding, inference_gpus=replicas * r.gpus,
        colocated=colocated, shard_group_gpus=min(holding, s.memory.sharded_gpus), stack=s.stack,
    )  # fmt: skip
    # the training state goes out to host memory from the GPUs that hold it
    offload = f.offload_seconds(s.offload_bytes, holding, s.links.host) if colocated else 0.0
    return SyncPhase(weight_sync(s.kept if quiet else s.inp, s.links, plan), offload, s.switch_s)


def _kept_instance_plan(s: Setup, r: Rollouts) -> InstancePlan | None:
    """:func:`_instance_plan` read once per configuration where reads record nothing and nothing
    is sampled (``s.kept`` keeps its values), else None."""
    inp = s.kept
    if not isinstance(inp, KeptInputs):
        return None
    key = ("rl instance plan", r.choice)
    parts = inp.memo.get(key)
    if parts is None:
        parts = inp.memo[key] = _instance_plan(s, inp, r)
    return parts


def _sync_floor(s: Setup, r: Rollouts, holding: int, replicas: int) -> SyncPhase | None:
    """A floor under :func:`_sync`'s quiet update of ``replicas`` of ``r``'s configuration from
    ``holding`` trainer GPUs (a disaggregated step's nccl-reshard, where values are kept; else None:
    no floor, the update is priced); kept for the search by those (the rest is the setup's), with
    the :class:`sync.ReshardFloor` of each receiving GPUs and misc bytes."""
    if s.transport != "nccl-reshard" or s.w.mode == "colocated":
        return None
    parts = _kept_instance_plan(s, r)
    if parts is None or not isinstance(s.kept, KeptInputs):  # (the one is None where the other is)
        return None
    memo = s.kept.memo
    key = ("rl sync floor", r.choice, holding, replicas)
    have = memo.get(key)
    if have is not None:
        return have
    receivers = replicas * r.gpus  # as _sync's
    at = ("rl reshard floor", holding, receivers, parts.misc_bytes)
    floor = memo.get(at)
    if floor is None:
        floor = memo[at] = reshard_floor(
            s.kept, s.links, trainer_gpus=holding, inference_gpus=receivers, misc_bytes=parts.misc_bytes
        )
    update = floor(parts.fullest_bulk_bytes, parts.quantize_bytes(holding))
    have = memo[key] = SyncPhase(update, 0.0, s.switch_s)
    return have


def _instance_plan(s: Setup, inp: Inputs, r: Rollouts) -> InstancePlan:
    """:func:`instance_plan` of ``r``'s configuration under the workload's transport and precisions
    (the same for every configuration of its sync group)."""
    return instance_plan(
        inp, s.arch, r.inst, transport=s.transport, wire=s.w.sync_precision, training=s.w.training_precision
    )


def _outcome(
    s: Setup,
    r: Rollouts,
    mode: str,
    gen_gpus: int,
    train_gpus: int,
    tr: Trainer,
    quiet: bool,
    sync: SyncPhase | None = None,
) -> Outcome:
    """The step on ``r`` (``sync``: its update where already computed)."""
    total = gen_gpus if s.w.mode == "colocated" else gen_gpus + train_gpus
    asynchronous = mode == "async"
    gen = generation(r, s.nums, gen_gpus, asynchronous, s.where, sandbox_load(s.nums, s.host, total))
    env = environment(s.nums, s.host, gen, total, asynchronous)
    sync = sync or _sync(s, r, trainer_holding_gpus(tr, train_gpus), gen.replicas, quiet)
    return Outcome(r, gen, env, tr, sync, step(mode, gen, env, tr, sync))


# the key of a trainer size's seconds in ``kept.memo`` (:meth:`_StepSeconds.floors` prices every
# size's at once, :meth:`_StepSeconds.soonest_floor` reads them)
TRAINER_S = "rl trainer s"


@dataclass(frozen=True)
class _StepSeconds:
    """A split search's balance: the step's seconds on ``gen`` + ``train`` GPUs (:func:`evaluate`);
    :meth:`ahead` makes the soonest rollouts of many pools at once (:meth:`Rollouts.ahead`)."""

    s: Setup

    def __call__(self, gen: int, train: int) -> float:
        return evaluate(self.s, gen, train, quiet=True).step.seconds

    def floors(self, total: int, gens: list[int]) -> Any:
        """A floor under the step on each of ``gens`` GPUs beside a trainer of the rest of
        ``total`` (:func:`evaluate`'s), as :func:`cheapest_pool`'s: the rollout floor
        (:func:`rollout_floors`, no sandbox bound) with the environment every step exposes, beside
        the trainer, with no update (:func:`step_floor`). None (every size evaluated) where reads
        are sampled (each evaluation draws its own: skipping one changes the next), where a size
        has no finite floor (its evaluation names why it cannot run) or a trainer no plan holds."""
        import numpy as np

        s = self.s
        if not isinstance(s.kept, KeptInputs):
            return None
        mode = schedule(s.w.mode, s.w.staleness_bound)
        asynchronous = mode == "async"
        try:
            training = trainer_seconds(s.rates, s.w, [total - g for g in gens])
        except InfeasibleError:
            return None
        rollout = rollout_floors(s.rollouts, s.nums, gens, asynchronous, NO_LOAD)
        floor = self._no_update(mode, rollout, training)
        if not np.isfinite(floor).all():
            return None
        # kept for :meth:`soonest_floor` (a pure function of the trainer's GPUs, as _trainer's)
        s.kept.memo.update(zip([(TRAINER_S, total - g) for g in gens], training.tolist(), strict=True))
        return floor

    def soonest_floor(self, total: int, gen: int) -> float:
        """A floor under the step on ``gen`` GPUs beside a trainer of the rest of ``total``, above
        :meth:`floors`' where generation does not run at its first rung's speed (GB200's
        one-step-off SWE step on 2,048 GPUs: 859 s on 80 generating, where :meth:`floors` says
        771 s): the pool's soonest rollouts (:meth:`Rollouts.in_group` among all groups, the
        sandboxes' bound included: no configuration or concurrency :func:`evaluate` takes is
        sooner; its first ask, made here if :meth:`ahead` did not) with the environment every step
        exposes, beside the trainer (:func:`trainer_seconds`, as :meth:`floors` prices it), with no
        update (:func:`step_floor`, as :meth:`floors`); -inf where reads are sampled (every size is
        evaluated), or no plan holds the trainer or no replica fits (its evaluation says why)."""
        s = self.s
        if not isinstance(s.kept, KeptInputs):  # (sampled reads: every size is evaluated)
            return -math.inf
        training = s.kept.memo.get(key := (TRAINER_S, total - gen))
        if training is None:  # a trainer size floors() did not price (a grown split's)
            try:
                training = s.kept.memo[key] = float(trainer_seconds(s.rates, s.w, [total - gen])[0])
            except InfeasibleError:
                return -math.inf  # (its evaluation says why)
        mode = schedule(s.w.mode, s.w.staleness_bound)
        asynchronous = mode == "async"
        load = sandbox_load(s.nums, s.host, total)  # as evaluate's (a searched split is not colocated)
        rollout = s.rollouts.in_group(s.nums, gen, asynchronous, None, load)[1]
        if math.isinf(rollout):
            return -math.inf
        floor = float(self._no_update(mode, rollout, training))
        # less a hair: the step adds the sandboxes' stall to the environment, not to generation (the
        # soonest's sum), so the same terms may round a bit the other way
        return floor * (1 - 1e-9)

    def _no_update(self, mode: str, rollout: Any, training: Any) -> Any:
        """The step of ``rollout`` seconds of generation, with the environment every step exposes,
        beside ``training`` seconds of the trainer, with no update (:func:`step_floor`): what
        :meth:`floors` and :meth:`soonest_floor` price of their rollouts."""
        s = self.s
        return step_floor(mode, rollout + exposed_floor(s.nums, s.host, mode == "async"), training)

    def ahead(self, total: int, gens: list[int]) -> None:
        """Pools of ``gens`` GPUs beside trainers of the rest of ``total`` (as :func:`evaluate`)."""
        s = self.s
        asynchronous = schedule(s.w.mode, s.w.staleness_bound) == "async"
        s.rollouts.ahead(s.nums, gens, asynchronous, sandbox_load(s.nums, s.host, total))

    def ahead_each(self, splits: list[tuple[int, int]]) -> None:
        """Pools of ``gen`` GPUs beside trainers of ``train`` each (as :func:`evaluate`): each with
        its own sandboxes' bound (:func:`sandbox_load` of its total), all at once."""
        s = self.s
        asynchronous = schedule(s.w.mode, s.w.staleness_bound) == "async"
        colocated = s.w.mode == "colocated"
        loads = [sandbox_load(s.nums, s.host, g if colocated else g + t) for g, t in splits]
        s.rollouts.ahead(s.nums, [g for g, _ in splits], asynchronous, loads)


@dataclass(frozen=True)
class PoolChoice:
    """The pool search's answer under a cap (:func:`cheapest_pool`): the pool, and the fastest
    split of the whole cap it was weighed against (its step with the periodic share, seconds)."""

    gen_gpus: int
    train_gpus: int
    cap: int
    cap_gen_gpus: int
    cap_train_gpus: int
    cap_step_s: float  # the cap's fastest step (its phases alone)
    fits: bool  # the chosen pool's schedule fits its year (False: none fits, the fastest is taken)
    tried: int  # (generation, trainer) pools evaluated (the rest were ruled out by their floors)


def _run_step_s(s: Setup, out: Outcome, gen: int, train: int) -> float:
    """A step's seconds with its share of the periodic evaluations and checkpoints (read quietly):
    what each scheduled step holds the run's GPUs, before phi / goodput."""
    return out.step.seconds + periodic_terms(s, out, gen, train, "", quiet=True).per_step_s


def schedule_step_s(s: Setup) -> float:
    """The most seconds a step (with its periodic share) may take for the run's schedule to fit a
    year: wall days per refresh x refreshes per year <= 365 (:func:`formulas.rl_run`)."""
    steps = s.w.steps_per_refresh * s.w.refreshes_per_year
    steps *= f.run_steps_per_step(s.run.goodput, s.run.staleness_factor)
    return f.DAYS_PER_YEAR * f.SECONDS_PER_DAY / steps


def _pool_gpus(s: Setup, gen: int, train: int) -> int:
    """The GPUs a pool of ``gen`` generating and ``train`` training holds (the same GPUs when
    colocated)."""
    return gen if s.w.mode == "colocated" else gen + train


def _split_grid(s: Setup, pools: list[int], cap: int, asynchronous: bool) -> Any:
    """:func:`cheapest_pool`'s pools of a disaggregated step: a trainer of one of the plan search's
    sizes (in whole nodes) beside each generation size; the generation sizes, the trainer sizes,
    and each pool's index into each (generation-major). None: no trainer fits beside a replica."""
    import numpy as np

    lo_gen = min(pools)
    # the plan search's sizes in whole nodes (a size between two runs the smaller one's plan)
    node = int(s.links.node)
    sizes = trainer_sizes(s.rates, max(1, s.memory.min_gpus), cap - lo_gen)
    trains = sorted({t for t in (whole_nodes(t, node) for t in sizes) if t <= cap - lo_gen})
    if not trains:
        return None
    units = [*pools, s.system_gpus] if s.system_gpus else list(pools)
    # more replicas than trajectories in flight only idle (paid): no pool past one a trajectory on
    # the widest unit is cheaper (an absurd cap, 10M GPUs, evaluated ~1,150 sizes, 2.2 s, for none)
    in_flight = math.ceil(s.nums.generated * in_flight_batches(s.w.staleness_bound, asynchronous))
    gens = pool_candidates(lo_gen, min(cap - trains[0], max(units) * in_flight), units)
    gi = np.repeat(np.arange(len(gens)), len(trains))
    return gens, trains, gi, np.tile(np.arange(len(trains)), len(gens))


def _colocated_grid(s: Setup, pools: list[int], cap: int) -> Any:
    """:func:`cheapest_pool`'s pools of a colocated step: sizes in whole rollout replicas (or whole
    systems holding one, as a split's generation: :func:`step.pool_candidates`' grid, the cap only
    ends it) of at least the whole nodes that hold the training state (and park it in host memory
    while rollouts run: :func:`check_trainer_memory`), each generating and training on all its GPUs
    (each its own generation and trainer size). None: no such size within the cap. Not bounded by
    the trajectories in flight, as a split's generation is: a colocated pool's GPUs also train."""
    import numpy as np

    mem = s.memory
    least = max(1, mem.min_gpus, mem.min_gpus_for_host or 0)
    units = [*pools, s.system_gpus] if s.system_gpus else list(pools)
    sizes = pool_candidates(max(min(pools), whole_nodes(least, int(s.links.node))), cap, units)
    if not sizes:
        return None
    each = np.arange(len(sizes))
    return sizes, sizes, each, each


def cheapest_pool(s: Setup, pools: list[int], cap: int, gen: int, train: int) -> PoolChoice:
    """The RL deployment's size: of the pools of ``cap`` GPUs at most, a trainer of one of the plan
    search's sizes (:func:`trainer_sizes`, from the fewest GPUs that hold the training state) beside
    whole rollout replicas (or whole systems holding one: :func:`step.pool_candidates`, a grid the
    cap only ends), or colocated, whole replicas (or systems) that hold the training state
    (:func:`_colocated_grid`), the one with the least cost per scheduled step, GPUs x
    (step + its periodic share) (the price and phi / goodput are the same for every pool; the
    samples per step fixed, so also the least per sample; ties: fewer GPUs), among those whose
    schedule fits the year (:func:`schedule_step_s`). ``gen`` + ``train``: the cap's fastest split
    (:func:`split_gpus`; colocated, the whole cap for both), taken where no pool's schedule fits (it
    is the fastest; a smaller pool is not faster).

    The grid of pools is weighed at once (numpy): each pool's floor, its soonest rollouts with no
    sandbox bound beside its trainer with no update (:func:`step.step_floor`), x its GPUs; pools are
    evaluated in the order of that floor until it reaches the cheapest found, which it cannot beat.
    A size's soonest rollouts are made only once the search reaches one of its pools (before, a
    floor under them stands in: :func:`generation.rollout_floors`), so the sizes whose pools all
    cost more than the cheapest found are never made (the soonest rollouts of all ~300 sizes were
    most of a search's time)."""
    import numpy as np

    mode = schedule(s.w.mode, s.w.staleness_bound)
    asynchronous = mode == "async"
    allowed = schedule_step_s(s)
    fast = evaluate(s, gen, train, quiet=True)
    fast_run_s = _run_step_s(s, fast, gen, train)
    capped = PoolChoice(gen, train, cap, gen, train, fast.step.seconds, True, 1)
    if fast_run_s > allowed:  # no pool fits the year: the fastest on the whole cap
        return replace(capped, fits=False)
    best = (_pool_gpus(s, gen, train) * fast_run_s, _pool_gpus(s, gen, train), gen, train)
    colocated = s.w.mode == "colocated"
    grid = _colocated_grid(s, pools, cap) if colocated else _split_grid(s, pools, cap, asynchronous)
    if grid is None:
        return capped
    gens, trains, gi, ti = grid  # the pools, flat: each one's generation and trainer size's index
    env = exposed_floor(s.nums, s.host, asynchronous)
    training = trainer_seconds(s.rates, s.w, trains)  # every trainer size's seconds, one array
    g_flat, t_flat = np.array(gens)[gi], np.array(trains)[ti]
    gpus = g_flat if colocated else g_flat + t_flat
    firsts = np.searchsorted(gi, np.arange(len(gens)))  # each generation size's first pool
    # each generation size's rollouts: a floor under its soonest (one cheap pass over every size)
    # until the search reaches one of its pools, then its soonest, made with the next sizes it
    # would reach (Rollouts.soonest); a floor under a floor, so the pools are taken in the same
    # order, (floor, then grid position), as the soonest of every size would take them
    rollout = rollout_floors(s.rollouts, s.nums, gens, asynchronous, NO_LOAD) + env
    made = np.zeros(len(gens), bool)
    left = gpus <= cap  # pools not yet taken

    def weighed() -> Any:  # each pool left's floor x its GPUs (inf: none, or past the schedule)
        floor = step_floor(mode, rollout[gi], training[ti])
        with np.errstate(invalid="ignore"):
            bound = gpus * floor
            return np.where(left & (floor <= allowed) & np.isfinite(bound), bound, np.inf)

    bound = weighed()
    tried = 1
    while True:
        k = int(np.argmin(bound))  # the first of the least
        if not bound[k] < best[0]:
            break  # nor any pool after it (inf: none left)
        i = gi[k]
        if not made[i]:  # its size's soonest, with the next unmade sizes by their least pool's floor
            nearest = np.minimum.reduceat(bound, firsts)
            batch = np.flatnonzero(~made & (nearest < best[0]))
            batch = batch[np.argsort(nearest[batch], kind="stable")][:AHEAD_POOLS]
            rollout[batch] = s.rollouts.soonest(s.nums, [gens[j] for j in batch], asynchronous, NO_LOAD) + env
            made[batch] = True
            bound = weighed()
            continue
        left[k] = False
        bound[k] = np.inf
        g, t = int(g_flat[k]), int(t_flat[k])
        if (g, t) == (gen, train):
            continue
        if not s.rollouts.made(g, asynchronous, None, sandbox_load(s.nums, s.host, _pool_gpus(s, g, t))):
            # with the next pools the search would take as the bounds stand (their sizes' soonest
            # made, under the best), each beside its trainer, made at once (:data:`POOLS_AHEAD`)
            near = np.argsort(bound, kind="stable")[: POOLS_AHEAD - 1]
            near = near[(bound[near] < best[0]) & made[gi[near]]]
            if near.size:  # (one pool alone: fastest()'s own call costs less)
                splits = zip(g_flat[near].tolist(), t_flat[near].tolist(), strict=True)
                _StepSeconds(s).ahead_each([(g, t), *splits])
        out = evaluate(s, g, t, quiet=True)
        tried += 1
        run_s = _run_step_s(s, out, g, t)
        n = _pool_gpus(s, g, t)
        if run_s <= allowed and (n * run_s, n) < best[:2]:
            best = (n * run_s, n, g, t)
    return replace(capped, gen_gpus=best[2], train_gpus=best[3], tried=tried)


# pools :func:`cheapest_pool` makes at once where it reaches one not made (the next it would take):
# some are never taken (the best found rules them out), but one fastest() a pool cost more (18 RL
# estimates, in-process CPU in the pool search, 3 runs each: 0.50-0.54 s at 8 or 16, 0.71-0.89 s
# one by one through fastest_many, 0.55-0.66 s through fastest)
POOLS_AHEAD = 16


def _min_train(s: Setup) -> int:
    """The fewest trainer GPUs a searched split takes: the whole nodes that hold the training state."""
    return whole_nodes(max(1, s.memory.min_gpus), int(s.links.node))


def _replica_pools(s: Setup) -> list[int]:
    """The whole nodes holding whole replicas of each rollout candidate: a searched pool's
    generation units."""
    node = int(s.links.node)
    return sorted({whole_nodes(int(g), node) for g in s.rollouts.candidates.gpus})


def _pool_note(w: RlWorkload, pool: PoolChoice, note: str = "") -> str:
    """The note on the GPUs the pool search chose (``note``: the split search's, where it ran)."""
    if not pool.fits:
        where = f" on all {pool.cap:,} GPUs of the RL workload's gpus"
        if w.mode == "colocated":
            note = "colocated"
        return f"{note}{where}: no smaller pool's schedule fits the year, so the fastest"
    held = (
        "whole rollout replicas (or systems) generating and training on the same GPUs"
        if w.mode == "colocated"
        else "the trainer and whole rollout replicas"
    )
    return (
        f"of the pools of at most the RL workload's gpus ({pool.cap:,}: a cap, its pin_gpus: true runs "
        f"on all of it), {held} with the least cost per step whose schedule fits the year"
    )


def choose_split(
    s: Setup, split: str | None, origin: str, advise_larger: bool = False
) -> tuple[int, int, int | None, tuple[int, float] | None, PoolChoice | None]:
    """The GPUs of each role: colocated uses the same GPUs for both, all of a pinned pool
    (``pin_gpus``, a given total), else the cheapest pool within the workload's ``gpus``
    (:func:`cheapest_pool`); given sizes are checked; otherwise the fastest split among those
    whose trainer holds the training state, of all of a pinned pool (``pin_gpus``, a given total
    or ``split`` auto), else of the cheapest pool within the workload's ``gpus``. Third, the GPUs
    requested where ``grow_gpus_to_fit`` ran on more (else None: given pools are the run, not a
    resize); fourth, where it could grow and the GPUs asked for ran as asked, the larger run a
    smaller request would grow to, with its GPU-seconds a step, where that costs less a step (else
    None); fifth, the pool search's answer where it ran (else None)."""
    w, mem = s.w, s.memory
    given = w.given_split()
    requested, searched, note, larger, pool = None, False, None, None, None
    if w.mode == "colocated":
        total = w.total_gpus()
        check_trainer_memory(mem, total, "gpus", s.where, s.rates.y["seq"])
        gg = tg = total
        if not w.pin_gpus:  # `gpus` caps the pool, as a searched split's: the cheapest within it
            pool = cheapest_pool(s, _replica_pools(s), total, total, total)
            gg, tg, searched = pool.gen_gpus, pool.train_gpus, pool.fits
            note = None if pool.fits else _pool_note(w, pool)
    elif given is not None and split is None:
        check_trainer_memory(mem, given[1], "train_gpus", s.where, s.rates.y["seq"])
        gg, tg = given
    else:
        total, searched = w.total_gpus(), True

        seconds = _StepSeconds(s)
        # a searched split takes whole nodes: generation in whole nodes holding whole replicas of
        # any candidate, a trainer of at least the whole nodes holding the training state
        node = int(s.links.node)
        pools = _replica_pools(s)
        min_train = _min_train(s)
        # grown where the request cannot hold the trainer and one replica of the densest candidate
        # (the one the split search starts from), not the smallest: a trainer beside one small
        # replica runs, but slowly (the 10T SWE step on 1,096 GB200 GPUs: 72 + 1,024 where growing
        # steps faster and cheaper), so `grow_gpus_to_fit` grows it
        if w.grow_gpus_to_fit and total < fewest_split_gpus(whole_nodes(s.rollouts.gpus, node), min_train):
            # too few to split: the trainer's fewest GPUs plus the pool with the least cost per step
            gg, tg = grown_split(pools, min_train, seconds, grain=s.system_gpus)
            if gg + tg > total:
                requested = total
            else:  # a smaller replica's pool fits the GPUs given: generation takes all the rest
                gg = total - tg
        else:
            try:
                gg, tg = split_gpus(total, pools, seconds, min_train, grain=s.system_gpus)
            except InfeasibleError as e:
                # a searched split takes whole nodes; a given one need not (an RL review: --gpus 50
                # on Rubin read "replicas of 4 GPUs at least", where --gen-gpus 2 --train-gpus 48 runs)
                smallest, fewest = min(int(g) for g in s.rollouts.candidates.gpus), max(1, s.memory.min_gpus)
                part = (
                    f"; a searched split takes whole {node}-GPU nodes, while the smallest replica is "
                    f"{smallest} GPUs: `gen_gpus` {smallest} and `train_gpus` {fewest} give a split of "
                    f"{smallest + fewest} GPUs"
                    if smallest < min(pools)
                    else ""
                )
                raise InfeasibleError(f"{s.where}: {e}{part}") from None
            if not w.pin_gpus:  # `gpus` caps the pool: the cheapest within it and the schedule
                pool = cheapest_pool(s, pools, total, gg, tg)
                gg, tg = pool.gen_gpus, pool.train_gpus
            if w.grow_gpus_to_fit and advise_larger:
                larger = _cheaper_grown(s, seconds, pools, total, gg, tg)
    if searched:  # the split search chose them, not the workload or the command line
        origin, note = "split search", "the generation / training split with the shortest step"
        if requested is not None:  # grown: the trainer's fewest GPUs and the cheapest pool
            note = "the trainer's fewest GPUs plus the generation pool with the least cost per step"
        elif pool is not None:
            origin = "pool search" if pool.fits else origin
            note = _pool_note(w, pool, note)
    # the two paths are set together or not at all (an explain review: each row's path, set alone,
    # was refused)
    for label, value, field, other in (("generation GPUs", gg, "gen_gpus", "train_gpus"),
                                       ("training GPUs", tg, "train_gpus", "gen_gpus")):  # fmt: skip
        both = f"set with {other}: the two are given together or not at all"
        s.inp.given(label, value, "GPUs", origin, note=f"{note}; {both}" if note else both,
                    path=f"workload.{field}")  # fmt: skip
    return gg, tg, requested, larger, pool


def _cheaper_grown(
    s: Setup, seconds: _StepSeconds, pools: list[int], total: int, gen: int, train: int
) -> tuple[int, float] | None:
    """The run a request too small to split grows to (:func:`grown_split`), where it holds more GPUs
    than ``total`` and costs less a step than ``gen`` + ``train`` (``total``, or the pool search's
    pool within it) do: its GPUs and
    GPU-seconds a step, else None. A physics audit: B300's 10T SWE step on ``gpus`` 1,151 grew to
    1,536 GPUs at 1,599 s, on 1,152 ran as asked at 2,770 s and 30 % more a step, as the rule says
    (the request binds where it can run), but nothing said which larger request gives the cheaper
    step. Only where such a run can exceed the request (a grown pool holds at most the trainer's
    GPUs or one unit: :func:`grown_split`'s replica sizes and the whole systems that hold them)."""
    grain, min_train = s.system_gpus, _min_train(s)
    units = {*pools, *(whole_nodes(g, grain) for g in pools)} if grain else set(pools)
    if total >= min_train + max(min_train, *units):
        return None
    gg, tg = grown_split(pools, min_train, seconds, grain=s.system_gpus)
    grown = (gg + tg) * seconds(gg, tg)
    if gg + tg > total and grown < (gen + train) * seconds(gen, train) * (1 - 1e-9):
        return gg + tg, grown
    return None


def estimate_rl(
    cat: Catalog,
    hardware: str,
    workload: RlWorkload,
    *,
    workload_name: str = "",
    model: str | None = None,
    mode: str | None = None,
    gpus: int | None = None,
    gen_gpus: int | None = None,
    train_gpus: int | None = None,
    split: str | None = None,
    transport: str | None = None,
    pricing: str = "rental",
    origin: str = CLI,
    advise_larger: bool = False,
) -> RlResult:
    """One RL step of ``workload`` on ``hardware``; command-line values override the workload's.
    Where :data:`MEMO` holds a store, a request it already answered is answered from it.
    ``advise_larger``: where the GPUs asked for run as asked and the workload may grow, price the
    larger run a smaller request grows to (``rl.cheaper_grown_gpus``; ``ipd rl`` asks for it, a
    comparison or sweep does not: it costs a search of its own, ~3x an estimate's)."""
    kw: dict[str, Any] = dict(
        workload_name=workload_name, model=model, mode=mode, gpus=gpus, gen_gpus=gen_gpus,
        train_gpus=train_gpus, split=split, transport=transport, pricing=pricing, origin=origin,
        advise_larger=advise_larger,
    )  # fmt: skip
    store = MEMO.get()
    if store is None:
        return _estimate_rl(cat, hardware, workload, **kw)
    import pickle

    key = content_key(cat, hardware, workload, kw)
    hit = store.get(key)
    if hit is None:
        result = _estimate_rl(cat, hardware, workload, **kw)
        # kept as computed, whatever the caller does: pickled (a third of a deep copy's CPU, and
        # each hit unpickles its own copy in a quarter of one)
        store[key] = pickle.dumps(result, protocol=5)
        while len(store) > MEMO_RESULTS:
            store.popitem(last=False)
        return result
    store.move_to_end(key)
    return pickle.loads(hit)  # the caller's own copy, as a fresh estimate is


# Results of estimate_rl kept by the content of every input, where a caller sets a store (the
# test session, whose tests ask for the same RL steps again: the sweep rows against single runs,
# the README's, --help's and the comparisons' commands); a pure function of its inputs (catalog,
# hardware, workload, keywords). None (the default): nothing kept, every call computes.
MEMO: ContextVar[OrderedDict | None] = ContextVar("ipd_rl_results", default=None)
MEMO_RESULTS = 512  # a result is tens of kB
_DIGESTS: dict[int, tuple[Any, bytes]] = {}  # id -> (the frozen entry, kept alive; its digest)
DIGESTS = 4096


def content_key(cat: Catalog, hardware: str, workload: RlWorkload, kw: dict[str, Any]) -> bytes:
    """A digest of every input of :func:`estimate_rl`: every table of the catalog (its entries,
    origins, aliases, overrides and warnings; not ``resolved``, the reader's lookup cache), the
    hardware, the workload and the keywords. Catalog entries are frozen models that loads and
    overrides share (an override validates new ones): each is pickled once, by identity; the rest
    is pickled whole (equal bytes: equal content; equal content pickled otherwise only misses).
    Only the test session keys results, so its imports wait for the first key."""
    import dataclasses
    import hashlib
    import pickle

    parts = []
    for table in dataclasses.fields(cat):
        if table.name == "resolved":
            continue
        value = getattr(cat, table.name)
        if isinstance(value, dict):
            value = [(k, _entry_digest(v)) for k, v in value.items()]
        parts.append((table.name, _entry_digest(value)))
    data = pickle.dumps((parts, hardware, _entry_digest(workload), sorted(kw.items())), protocol=5)
    return hashlib.sha256(data).digest()


def _entry_digest(value: Any) -> Any:
    """A frozen model's digest (computed once per object), or ``value`` itself."""
    if not getattr(getattr(value, "model_config", None), "get", lambda _: False)("frozen"):
        return value
    kept = _DIGESTS.get(id(value))
    if kept is None:
        import hashlib
        import pickle

        if len(_DIGESTS) >= DIGESTS:
            _DIGESTS.clear()
        kept = _DIGESTS[id(value)] = (value, hashlib.sha256(pickle.dumps(value, protocol=5)).digest())
    return kept[1]


# the `sets` paths that give an RL workload's transport (its own, a scenario's RL stage's), and its mode
TRANSPORT_SET_PATHS = frozenset({"workload.sync_transport", "workload.post_training.sync_transport"})
MODE_SET_PATHS = frozenset({"workload.mode", "workload.post_training.mode"})


def _estimate_rl(
    cat: Catalog,
    hardware: str,
    workload: RlWorkload,
    *,
    workload_name: str,
    model: str | None,
    mode: str | None,
    gpus: int | None,
    gen_gpus: int | None,
    train_gpus: int | None,
    split: str | None,
    transport: str | None,
    pricing: str,
    origin: str,
    advise_larger: bool,
) -> RlResult:
    paths = {o.path.removesuffix(".value") for o in cat.overrides}
    set_paths = sorted(paths & TRANSPORT_SET_PATHS)
    if mode is None and transport is None and not paths & (MODE_SET_PATHS | TRANSPORT_SET_PATHS):
        check_own_transport(workload, origin)  # the file's own mode and transport
    w = resolve_request(
        workload, split, transport_set=set_paths[0] if set_paths else None, model=model, mode=mode,
        gpus=gpus, gen_gpus=gen_gpus, train_gpus=train_gpus, transport=transport,
    )  # fmt: skip
    ctx = sv.serving_context(cat, hardware, w.model, origin)
    s = setup(ctx, w, pricing, origin, split)
    gg, tg, requested, larger, pool = choose_split(s, split, origin, advise_larger)
    out = evaluate(s, gg, tg)
    periodic = periodic_terms(s, out, gg, tg, origin)
    price, basis = usd_per_gpu_hour(ctx.inp, ctx.name, pricing)
    rl = assemble(
        s, out, gg, tg, workload_name, price, basis, kw_per_gpu(ctx.inp, ctx.name), pue(ctx.inp), requested,
        larger, periodic, pool,
    )  # fmt: skip
    return RlResult(hardware=ctx.name, rl=rl, assumptions=_workload_paths(ctx.trace.items))


# the rollouts' serving inputs an RL workload's fields set, by the names the serving estimate and
# the sync give them without a path (an explain review: their rows printed no path while
# `--set workload.inference_precision=fp8` and the others work)
_RL_INPUTS = {
    "serving precision": "workload.inference_precision",
    "speculative decoding": "workload.speculative",
    "weight-sync stack": "workload.sync_stack",
}


def _workload_paths(items: list) -> list:
    """``items`` with the RL workload's path on the inputs of :data:`_RL_INPUTS` that have none."""
    return [
        a.model_copy(update={"path": _RL_INPUTS[a.name]}) if a.path is None and a.name in _RL_INPUTS else a
        for a in items
    ]
