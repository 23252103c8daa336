"""Weight sync as a transfer schedule: bytes per sender and per receiver over each path, and the
framework software that drives them.

Transports (where the bytes go, rl-notes §i):

* ``nccl-reshard`` (NeMo RL nccl_reshard) and ``rdma-p2p`` (static RDMA-WRITE schedules): each
  receiving GPU gets its shard of its instance (the instance's stored bytes / its GPUs, replicated
  dense weights included); every trainer GPU sends its share of the R replicas.
* ``nccl-broadcast`` (the disaggregated default of NeMo RL, verl, slime, OpenRLHF): S senders
  gather full tensors from the trainer shards, then broadcast them; every receiving GPU takes the
  whole model (one copy per node over its NICs, the rest over the scale-up link).
* ``checkpoint-engine`` (MoonshotAI, verl's checkpoint engines): a bucketed broadcast of the full
  model to every GPU, from pinned host memory when colocated (host link).
* ``colocated``: in-place reload on the same GPUs: each GPU gathers full tensors over the
  scale-up link and hands them to its engine (CUDA IPC).

Stacks (the software around the wire, ``rl.sync_stacks``): a cost per weight tensor on the
critical path (engine loader, per-tensor collective or trainer-side parameter generation), the
CPU engine replica of Miles' P2P path, the rate of a colocated IPC hand-off, what a colocated
update timer holds beyond the transfer, and the schedule: ``pipelined`` (double buffers: the
longest of the wire and the software), ``serial`` (each bucket waits for the engines: they add)
or ``stage-lock`` (serial, and the trainer's pipeline stages take turns on one broadcast lock:
one sender at a time while the other stages gather).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ipd_cli.catalog.schema import SYNC_STACKS, SyncStack
from ipd_cli.engine import formulas as f
from ipd_cli.engine.inputs import Inputs, KeptInputs
from ipd_cli.errors import InputError

SHARD = ("nccl-reshard", "rdma-p2p")
ENGINE_LOADS = ("nccl-broadcast", "checkpoint-engine")
GATHERS = ("nccl-broadcast", "checkpoint-engine")  # senders gather full tensors (disaggregated)


@dataclass(frozen=True)
class SyncPlan:
    """What one weight update moves, and between whom."""

    transport: str
    model_bytes: float  # one full copy of the weights at the wire precision
    instance_bytes: float  # what one rollout instance stores at the wire precision
    tensors: float  # weight tensors the update iterates over
    trainer_gpus: int
    inference_gpus: int
    instance_gpus: int
    colocated: bool = False
    senders: int | None = None  # None: all trainer GPUs (shard transports) or the catalog's broadcast senders
    engine_load: bool | None = None  # None: the transport's default (ENGINE_LOADS)
    quantize_bytes_per_gpu: float = 0.0  # HBM bytes read and written per GPU to change precision
    shard_group_gpus: int | None = None  # trainer GPUs one copy of the model is sharded over (default: all)
    stack: str = "nemo-rl"  # the framework software (rl.sync_stacks)
    train_bytes: float | None = (
        None  # the full model at the training precision (gathers); default model_bytes
    )
    trainer_stages: int = 1  # pipeline stages of the trainer (each gathers and sends its own layers)
    gather_gpus: int | None = None  # GPUs a sender gathers its tensors from (default: the shard group)
    overhead: bool = True  # count what a colocated update timer holds beyond the transfer
    bulk_bytes: float | None = None  # nccl-reshard: one instance's bytes on the bulk path (default: all)
    bulk_fullest_share: float | None = None  # of the bulk, the fullest receiver's (default: 1 / GPUs)
    bulk_mean_share: float | None = None  # of the bulk, the mean receiver's (EPLB's replicas: above 1 / GPUs)
    misc_bytes: float = 0.0  # nccl-reshard: one copy of the weights on the misc path (not the bulk reshard)
    misc_tensors: float = 0.0  # nccl-reshard: tensors the misc path loads (FP8 scale siblings included)
    holding_gpus: int | None = None  # GPUs of an instance that hold weights (default: instance_gpus)

    @property
    def replicas(self) -> int:
        return max(1, self.inference_gpus // self.instance_gpus)

    @property
    def holders(self) -> int:
        """GPUs of an instance that hold its weights: ``instance_gpus`` counts the ones a layout
        strands in its scale-up domain too (a DEP64 replica paid as a 72-GPU rack), which take none."""
        return self.holding_gpus or self.instance_gpus

    @property
    def receivers(self) -> int:
        """GPUs the update delivers to: the holders of every replica (no more than are given)."""
        return min(self.inference_gpus, self.replicas * self.holders)


@dataclass(frozen=True)
class Links:
    """Per-GPU bandwidths (bytes/s, one direction) and the topology the schedule runs on."""

    nic: float
    scale_up: float
    host: float
    hbm: float
    domain: int  # GPUs in one scale-up domain
    node: int  # GPUs sharing one host and its NICs


@dataclass(frozen=True)
class WeightSync:
    """One weight update: its terms (seconds), the bytes it moves and what bounds it."""

    transport: str
    bytes_moved: float  # delivered to all receiving GPUs together
    bytes_per_sender: float
    bytes_per_receiver: float
    terms: dict[str, float]  # every bound and cost, in seconds (wire bounds at the link efficiency)
    bound: str  # the term that sets the time (pipelined: the gather and software chain, when longer)
    transfer_s: float  # senders busy: gather, wire, quantisation (and whatever they wait on in turn)
    load_s: float  # receivers only: the engine loader not hidden behind the wire
    fixed_s: float  # fixed latency, plus a colocated timer's overhead
    stack: str = "nemo-rl"
    composition: str = ""  # how transfer_s and load_s are built from the terms (:func:`_compose`)

    @property
    def seconds(self) -> float:
        return self.fixed_s + self.transfer_s + self.load_s


NO_SYNC = WeightSync("none", 0.0, 0.0, 0.0, {}, "none", 0.0, 0.0, 0.0)  # a floor: no update at all


def sync_links(inp: Inputs, system: str, accelerator: str, gpus_per_system: int) -> Links:
    """The links of ``system`` as the schedule needs them, read through the catalog."""
    spath, apath = f"systems.{system}", f"accelerators.{accelerator}"
    if inp.has(f"{spath}.host_link_gb_per_s"):
        host = inp.read(f"{spath}.host_link_gb_per_s", "host link")
    else:
        host = inp.read("rl.default_host_link_gb_per_s", "host link (PCIe default)")
    node = gpus_per_system
    if inp.has(f"{spath}.gpus_per_node"):
        node = inp.read(f"{spath}.gpus_per_node", "GPUs per node (one host, its NICs)")
    return Links(
        nic=inp.read(inp.cat.scale_out_path(system), "scale-out NIC"),
        scale_up=inp.read(f"{apath}.scale_up_gb_per_s_bidir", "scale-up bandwidth (bidirectional)") / 2,
        host=host,
        hbm=inp.read(f"{apath}.hbm_tb_per_s", "HBM bandwidth"),
        domain=inp.read(f"{spath}.scale_up_domain", "scale-up domain"),
        node=node,
    )


def _bulk_on_gpu(plan: SyncPlan, share: float | None) -> float:
    """:func:`bulk_on_gpu` of ``plan``'s instances."""
    return bulk_on_gpu(plan.bulk_bytes, plan.instance_bytes, plan.holders, share)


def bulk_on_gpu(
    bulk_bytes: float | None, instance_bytes: float, instance_gpus: int, share: float | None
) -> float:
    """Bytes of nccl-reshard's bulk (the routed experts, one copy per instance; all of an
    instance's bytes where no bulk is named) on a receiving GPU that holds ``share`` of it (None:
    an even split over the instance's GPUs that hold weights, ``instance_gpus``)."""
    if bulk_bytes is None or share is None:
        per_instance = instance_bytes if bulk_bytes is None else bulk_bytes
        return per_instance / instance_gpus
    return bulk_bytes * share


def _shard_bounds(plan: SyncPlan, links: Links, cross: float, senders: int) -> tuple[dict, float, float]:
    # nccl-reshard moves only its bulk (the routed experts, one copy per instance) shard to shard
    per_instance = plan.instance_bytes if plan.bulk_bytes is None else plan.bulk_bytes
    # the fullest receiver binds: expert parallelism that does not divide the routed experts leaves
    # one GPU ceil(experts / EP) of them, EPLB's replicas update too (a review: the mean, 9.6 s of
    # GB200's 10T SWE update, where its DEP72 replica's fullest GPU takes 1.125x that)
    recv = _bulk_on_gpu(plan, plan.bulk_fullest_share)
    # every copy an instance holds is sent: EPLB's replica slots too (the mean receiver's share
    # times the instance's GPUs that hold weights: 1 without replicas, 72 x 7 / 384 = 1.31 at DEP72
    # EPLB on 384; a stranded GPU holds none)
    mean = plan.bulk_mean_share if plan.bulk_bytes is not None else None
    stored = per_instance * mean * plan.holders if mean is not None else per_instance
    send = plan.replicas * stored / senders
    r_nic, r_up = f.split_seconds(recv, cross, links.nic, links.scale_up)
    s_nic, s_up = f.split_seconds(send, cross, links.nic, links.scale_up)
    bounds = {"receiver NIC": r_nic, "receiver scale-up": r_up, "sender NIC": s_nic, "sender scale-up": s_up}
    return bounds, send, recv


def _broadcast_bounds(plan: SyncPlan, links: Links, cross: float, senders: int) -> tuple[dict, float, float]:
    return _broadcast_of(plan.model_bytes, plan.inference_gpus, links, cross, senders)


def _broadcast_of(
    full: float, inference_gpus: int, links: Links, cross: float, senders: int
) -> tuple[dict, float, float]:
    """:func:`_broadcast_bounds` of ``full`` bytes to ``inference_gpus`` receivers (the misc path
    times its own bytes with it, without a plan of its own)."""
    out = links.nic if cross > 0 else links.scale_up
    receivers_per_node = min(links.node, inference_gpus)
    bounds = {
        "sender NIC" if cross > 0 else "sender scale-up": full / senders / out,
        "node NICs (one copy per node)": cross * full / (receivers_per_node * links.nic),
        "receiver scale-up (fan-out)": full / links.scale_up,
    }
    return bounds, full / senders, full


def _checkpoint_engine_bounds(
    plan: SyncPlan, links: Links, cross: float, senders: int
) -> tuple[dict, float, float]:
    if not plan.colocated:
        return _broadcast_bounds(plan, links, cross, senders)
    full, gpus = plan.model_bytes, plan.receivers  # the GPUs that hold weights load from host
    bounds = {
        "host link (pinned host memory)": full / gpus / links.host,
        "node NICs (one copy per node)": (full / (links.node * links.nic)) if gpus > links.domain else 0.0,
        "receiver scale-up (fan-out)": full / links.scale_up,
    }
    return bounds, full / gpus, full


def _colocated_bounds(plan: SyncPlan, links: Links, cross: float, senders: int) -> tuple[dict, float, float]:
    # every GPU gathers the full tensors of the model from its peers and hands them to its engine
    return (
        {"receiver scale-up (gather)": plan.model_bytes / links.scale_up},
        plan.model_bytes,
        plan.model_bytes,
    )


BOUNDS = {
    "nccl-reshard": _shard_bounds,
    "rdma-p2p": _shard_bounds,
    "nccl-broadcast": _broadcast_bounds,
    "checkpoint-engine": _checkpoint_engine_bounds,
    "colocated": _colocated_bounds,
}


def _stack(inp: Inputs, stack: str) -> SyncStack:
    """The catalog entry of a weight-sync stack named by a workload (a plain string)."""
    for name, entry in inp.cat.rl.sync_stacks.items():
        if name == stack:
            return entry
    raise InputError(f"unknown weight-sync stack '{stack}'; choose one of: {', '.join(SYNC_STACKS)}")


def _once(inp: KeptInputs, key: tuple, read: Any, stack: str) -> str:
    """``read`` of the stack's choice, once for ``inp`` (kept inputs record nothing and their
    substitutions are fixed: the answer cannot change)."""
    if key not in inp.memo:
        inp.memo[key] = read(Inputs(inp.cat, inp.trace), stack)
    return inp.memo[key]


def _schedule(inp: Inputs, stack: str) -> str:
    """The stack's schedule: a design choice read with its source (like the default transport)."""
    if isinstance(inp, KeptInputs):
        return _once(inp, ("weight-sync schedule", stack), _schedule, stack)
    choice = _stack(inp, stack).schedule
    return inp.trace.given(
        f"weight-sync schedule ({stack})", choice.value, "", inp.cat.origin("rl", "sync_stacks"),
        note=choice.note, source=choice.source,
    )  # fmt: skip


def _tensor_work(inp: Inputs, stack: str) -> str:
    if isinstance(inp, KeptInputs):
        return _once(inp, ("per-tensor work", stack), _tensor_work, stack)
    choice = _stack(inp, stack).tensor_work
    return inp.trace.given(
        f"per-tensor work runs on ({stack})", choice.value, "", inp.cat.origin("rl", "sync_stacks"),
        note=choice.note, source=choice.source,
    )  # fmt: skip


def _stack_value(inp: Inputs, stack: str, field: str, label: str, needed_for: str) -> float:
    path = f"rl.sync_stacks.{stack}.{field}"
    if not inp.has(path):
        raise InputError(
            f"weight-sync stack {stack} has no {field} in the catalog ({needed_for}); set {path} with "
            f"`sets` or choose another `sync_stack`"
        )
    return inp.read(path, f"{label} ({stack})")


def _senders(inp: Inputs, plan: SyncPlan, schedule: str) -> int:
    if plan.transport == "nccl-broadcast" and schedule == "stage-lock":
        return 1  # the pipeline stages take turns on one lock: one broadcaster at a time
    if plan.senders is not None:
        return plan.senders
    if plan.transport in SHARD or plan.transport == "colocated":
        return plan.trainer_gpus
    if plan.transport == "nccl-broadcast":
        return int(inp.read("rl.broadcast_senders", "broadcasting trainer GPUs"))
    return 1


def _gather_bytes(plan: SyncPlan, senders: int, schedule: str, replica: bool) -> float:
    """Bytes (training precision) one sender gathers from the trainer's shards before it sends."""
    train = plan.train_bytes if plan.train_bytes is not None else plan.model_bytes
    if plan.transport == "rdma-p2p" and replica:
        return train / plan.trainer_stages  # every sender all-gathers its stage (Miles P2P)
    if plan.transport not in GATHERS or plan.colocated:
        return 0.0
    if schedule == "stage-lock":
        return train / plan.trainer_stages  # each stage's head gathers its own layers
    return train / senders


def _gather_seconds(plan: SyncPlan, links: Links, byte_count: float, eff: float) -> float:
    """The gather over the scale-up link, and over the NICs for the part of the group in other domains."""
    if byte_count == 0:
        return 0.0
    group = plan.gather_gpus or plan.shard_group_gpus or plan.trainer_gpus
    cross = f.gather_cross_share(group, links.domain)
    over_nic, over_up = f.split_seconds(byte_count, cross, links.nic, links.scale_up)
    return max(over_nic, over_up) / eff


def _per_tensor(inp: Inputs, stack: str, count: float) -> float:
    return count * inp.read(f"rl.sync_stacks.{stack}.tensor_us", f"per-tensor software ({stack})")


def _software(inp: Inputs, links: Links, plan: SyncPlan, replica: bool) -> tuple[str, float]:
    """The stack's work beside or after the wire: (its term name, seconds)."""
    t, stack = plan.transport, plan.stack
    if t == "colocated":
        rate = _stack_value(inp, stack, "ipc_gb_per_s", "colocated IPC hand-off", "its colocated path")
        return "IPC hand-off and engine load", f.ipc_seconds(plan.model_bytes, rate)
    if replica:
        per_tensor = inp.read(f"rl.sync_stacks.{stack}.replica_tensor_us", f"CPU replica load ({stack})")
        distinct = f.distinct_targets(plan.holders, plan.trainer_gpus, plan.trainer_stages)
        shard = plan.instance_bytes / plan.holders / plan.trainer_stages
        seconds = f.replica_seconds(
            distinct, plan.tensors / plan.trainer_stages, per_tensor, shard, links.host
        )
        return "CPU replica load", seconds
    if t == "nccl-reshard":  # only the misc path goes through the engine's loader
        return "misc path engine loader", _per_tensor(
            inp, stack, plan.misc_tensors
        ) if plan.misc_tensors else 0.0
    loads = plan.engine_load if plan.engine_load is not None else t in ENGINE_LOADS
    if _tensor_work(inp, stack) == "trainer":
        loads = True  # generated or sent tensor by tensor on every update, whether receivers load
    return "per-tensor software", _per_tensor(inp, stack, plan.tensors) if loads else 0.0


def _misc_broadcast(inp: Inputs, links: Links, plan: SyncPlan, cross: float) -> float:
    """nccl-reshard's misc path: after the bulk, a packed broadcast of the rest from one sender."""
    eff = inp.read("rl.sync_link_efficiency.nccl-broadcast", "misc path broadcast efficiency")
    return max(_broadcast_of(plan.misc_bytes, plan.inference_gpus, links, cross, 1)[0].values()) / eff


def _compose(
    t: str,
    schedule: str,
    stages: int,
    gather: float,
    wire: float,
    misc: float,
    software: float,
    quantize: float,
) -> tuple[float, float, bool, str]:
    """(senders busy, receivers' work not hidden, whether the gather and software chain outlasts
    the wire, how those two are built from the terms) under the transport and the stack's
    schedule (wire: the longest link bound; software: the engine's per-tensor work). The last is
    for `ipd explain` (an explain review: the row named its terms, not how they add up)."""
    if t == "colocated":  # the same GPUs: gather, then the hand-off to the engine
        how = "transfer_s = wire + quantisation; load_s = software (the engine's load after the hand-off)"
        return wire + quantize, software, False, how
    if t == "nccl-reshard":  # the bulk reshard, then the misc broadcast and its loads (design doc)
        how = "transfer_s = max(wire, quantisation) + misc path broadcast; load_s = software"
        return max(wire, quantize) + misc, software, False, how
    if schedule == "serial" or (schedule == "stage-lock" and t != "nccl-broadcast"):
        how = "transfer_s = gather + wire + quantisation + software (each bucket waits for its loads)"
        how += "; load_s = 0"
        return gather + wire + quantize + software, 0.0, False, how  # senders wait for each bucket's loads
    if schedule == "stage-lock":  # stages take turns broadcasting (the engines load inside a turn)
        how = (
            "transfer_s = the pipeline stages' turns at (wire + software) each, behind their gathers, "
            "+ quantisation; load_s = 0"
        )
        return f.stage_turns_seconds(wire + software, gather, stages) + quantize, 0.0, False, how
    transfer = max(gather, wire, quantize)  # pipelined: the per-tensor work runs beside the wire
    rest = max(gather + software, transfer) - transfer
    how = "transfer_s = max(gather, wire, quantisation); load_s = max(gather + software, transfer_s)"
    how += " - transfer_s"
    return transfer, rest, rest > 0, how


@dataclass(frozen=True)
class ReshardFloor:
    """A floor under :func:`weight_sync` of disaggregated nccl-reshard plans (no senders given)
    from one trainer into ``inference_gpus`` receivers (:func:`reshard_floor`): the terms that do
    not depend on the instance worked out once, for the many instances a search tries."""

    links: Links
    eff: float  # the reshard's link efficiency
    fixed_s: float
    cross: float  # the share of bytes over NICs
    misc_s: float  # the misc path's broadcast

    def __call__(self, fullest_bulk_bytes: float, quantize_bytes_per_gpu: float) -> WeightSync:
        """The floor for instances whose fullest GPU takes ``fullest_bulk_bytes`` of the bulk
        (:func:`_bulk_on_gpu` at its fullest share): the fixed latency and, as senders busy, the
        receivers' wire bounds (two of the wire's four) or the quantisation, whichever is longer,
        then the misc path's broadcast. Each is the same floating-point expression as in
        :func:`weight_sync`, so each is at most its counterpart and so are the sums (rounding is
        monotone): a search may skip an update where even this cannot shorten its step."""
        links, eff = self.links, self.eff
        r_nic, r_up = f.split_seconds(fullest_bulk_bytes, self.cross, links.nic, links.scale_up)
        wire = max(r_nic / eff, r_up / eff)
        quantize = quantize_bytes_per_gpu / links.hbm
        transfer = max(wire, quantize) + self.misc_s
        return WeightSync("nccl-reshard", 0.0, 0.0, 0.0, {}, "floor", transfer, 0.0, self.fixed_s)


def reshard_floor(
    inp: Inputs, links: Links, *, trainer_gpus: int, inference_gpus: int, misc_bytes: float
) -> ReshardFloor:
    """:class:`ReshardFloor` from ``trainer_gpus`` into ``inference_gpus`` receivers, the plans'
    misc path carrying ``misc_bytes``."""
    eff = inp.read("rl.sync_link_efficiency.nccl-reshard", "weight-sync link efficiency (nccl-reshard)")
    fixed = inp.read("rl.sync_fixed_s", "weight-sync fixed latency")
    cross = f.cross_domain_share(trainer_gpus, inference_gpus, links.domain, links.node, False)
    misc = 0.0
    if misc_bytes:
        b_eff = inp.read("rl.sync_link_efficiency.nccl-broadcast", "misc path broadcast efficiency")
        misc = max(_broadcast_of(misc_bytes, inference_gpus, links, cross, 1)[0].values()) / b_eff
    return ReshardFloor(links, eff, fixed, cross, misc)


def weight_sync(inp: Inputs, links: Links, plan: SyncPlan) -> WeightSync:
    """The time of one weight update under ``plan`` on ``links`` (see the module docstring)."""
    t, stack = plan.transport, plan.stack
    schedule = _schedule(inp, stack)
    eff = inp.read(f"rl.sync_link_efficiency.{t}", f"weight-sync link efficiency ({t})")
    fixed = inp.read("rl.sync_fixed_s", "weight-sync fixed latency")
    colocated = plan.colocated or t == "colocated"
    cross = f.cross_domain_share(plan.trainer_gpus, plan.inference_gpus, links.domain, links.node, colocated)
    senders = _senders(inp, plan, schedule)
    bounds, per_sender, per_receiver = BOUNDS[t](plan, links, cross, senders)
    terms = {name: s / eff for name, s in bounds.items()}
    wire = max(terms.values())

    replica = t == "rdma-p2p" and inp.has(f"rl.sync_stacks.{stack}.replica_tensor_us")
    gather = 0.0
    if gather_bytes := _gather_bytes(plan, senders, schedule, replica):
        g_eff = eff if t == "nccl-broadcast" else inp.read(
            "rl.sync_link_efficiency.nccl-broadcast", "trainer gather efficiency (NCCL collectives)"
        )  # fmt: skip
        gather = terms["gather on the senders"] = _gather_seconds(plan, links, gather_bytes, g_eff)
    misc = 0.0
    if t == "nccl-reshard" and plan.misc_bytes:
        misc = terms["misc path broadcast"] = _misc_broadcast(inp, links, plan, cross)
    name, software = _software(inp, links, plan, replica)
    if software:
        terms[name] = software
    overhead = 0.0
    if colocated and plan.overhead and inp.has(f"rl.sync_stacks.{stack}.colocated_overhead_s"):
        overhead = inp.read(
            f"rl.sync_stacks.{stack}.colocated_overhead_s", f"colocated update overhead ({stack})"
        )
        terms["update overhead (pause, flush, process groups)"] = overhead
    quantize = plan.quantize_bytes_per_gpu / links.hbm
    terms.update({"quantisation": quantize, "fixed latency": fixed})
    transfer, rest, chained, how = _compose(
        t, schedule, plan.trainer_stages, gather, wire, misc, software, quantize
    )
    bound = max(terms, key=terms.__getitem__)
    if chained:  # each tensor's software follows its gather: that chain sets the time, not the wire
        bound = " + ".join(n for n, v in (("gather on the senders", gather), (name, software)) if v)
    # the bytes moved: every receiver's, the mean's times the receivers (the fullest binds the time;
    # a GPU an instance strands or no replica uses receives nothing)
    mean = _bulk_on_gpu(plan, plan.bulk_mean_share) if BOUNDS[t] is _shard_bounds else per_receiver
    if misc:  # the misc path's broadcast reaches every receiving GPU too (it was timed, not counted)
        per_receiver += plan.misc_bytes
        mean += plan.misc_bytes
    return WeightSync(
        transport=t,
        bytes_moved=mean * plan.receivers,
        bytes_per_sender=per_sender,
        bytes_per_receiver=per_receiver,
        terms=terms,
        bound=bound,
        transfer_s=transfer,
        load_s=rest,
        fixed_s=fixed + overhead,
        stack=stack,
        composition=how,
    )
