"""Weight sync as a transfer schedule: bytes per sender and per receiver over each path.

Transports (the designs frameworks ship, rl-notes §i):

* ``nccl-reshard`` (NeMo RL nccl_reshard) and ``rdma-p2p`` (Perplexity's static RDMA-WRITE
  schedule): each receiving GPU gets its shard of its instance (the instance's stored bytes /
  its GPUs, replicated dense weights included); every trainer GPU sends its share of the R
  replicas. Pipelined: the engine loads overlap the wire.
* ``nccl-broadcast`` (the disaggregated default of NeMo RL, verl, slime, OpenRLHF): S senders
  gather full tensors from the trainer shards, then broadcast them; every receiving GPU takes
  the whole model (one copy per node over its NICs, the rest over the scale-up link) and its
  engine loads every tensor. Serial, tensor by tensor.
* ``checkpoint-engine`` (MoonshotAI): a pipelined broadcast of the full model to every GPU,
  from pinned host memory when colocated (host link), then a reload into the engine.
* ``colocated``: in-place reload on the same GPUs: each GPU gathers full tensors over the
  scale-up link and hands them to the engine (CUDA IPC).

Time = fixed latency + the wire (the largest sender- or receiver-side bound, plus the gather of
a broadcast, at the transport's link efficiency) + quantisation + the engine loader (per tensor),
the last two overlapped with the wire in pipelined transports.
"""

from __future__ import annotations

from dataclasses import dataclass

from ipd_cli.engine import formulas as f
from ipd_cli.engine.inputs import Inputs

SHARD = ("nccl-reshard", "rdma-p2p")
PIPELINED = ("nccl-reshard", "rdma-p2p", "checkpoint-engine", "nccl-broadcast")
ENGINE_LOADS = ("nccl-broadcast", "checkpoint-engine", "colocated")


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

    @property
    def replicas(self) -> int:
        return max(1, self.inference_gpus // self.instance_gpus)


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
    bound: str  # the term that sets the time
    transfer_s: float  # senders busy: the wire (and quantisation)
    load_s: float  # receivers only: the engine loader not hidden behind the wire
    fixed_s: float

    @property
    def seconds(self) -> float:
        return self.fixed_s + self.transfer_s + self.load_s


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
        nic=inp.read(f"{apath}.scale_out_gbit_per_s", "scale-out NIC"),
        scale_up=inp.read(f"{apath}.scale_up_gb_per_s_bidir", "scale-up bandwidth (bidirectional)") / 2,
        host=host,
        hbm=inp.read(f"{apath}.hbm_tb_per_s", "HBM bandwidth"),
        domain=inp.read(f"{spath}.scale_up_domain", "scale-up domain"),
        node=node,
    )


def _shard_bounds(plan: SyncPlan, links: Links, cross: float, senders: int) -> tuple[dict, float, float]:
    recv = plan.instance_bytes / plan.instance_gpus
    send = plan.replicas * plan.instance_bytes / senders
    r_nic, r_up = f.split_seconds(recv, cross, links.nic, links.scale_up)
    s_nic, s_up = f.split_seconds(send, cross, links.nic, links.scale_up)
    bounds = {"receiver NIC": r_nic, "receiver scale-up": r_up, "sender NIC": s_nic, "sender scale-up": s_up}
    return bounds, send, recv


def _broadcast_bounds(plan: SyncPlan, links: Links, cross: float, senders: int) -> tuple[dict, float, float]:
    full = plan.model_bytes
    out = links.nic if cross > 0 else links.scale_up
    receivers_per_node = min(links.node, plan.inference_gpus)
    bounds = {
        "sender NIC" if cross > 0 else "sender scale-up": full / senders / out,
        "node NICs (one copy per node)": cross * full / (receivers_per_node * links.nic),
        "receiver scale-up (fan-out)": full / links.scale_up,
    }
    if plan.transport == "nccl-broadcast":  # senders first gather the full tensors from the trainer shards
        group = plan.shard_group_gpus or plan.trainer_gpus  # over NICs when the shards span domains
        bounds["gather on the senders"] = (
            full / senders / (links.nic if group > links.domain else links.scale_up)
        )
    return bounds, full / senders, full


def _checkpoint_engine_bounds(
    plan: SyncPlan, links: Links, cross: float, senders: int
) -> tuple[dict, float, float]:
    if not plan.colocated:
        return _broadcast_bounds(plan, links, cross, senders)
    full, gpus = plan.model_bytes, plan.inference_gpus
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


def _senders(inp: Inputs, plan: SyncPlan) -> int:
    if plan.senders is not None:
        return plan.senders
    if plan.transport in SHARD or plan.transport == "colocated":
        return plan.trainer_gpus
    if plan.transport == "nccl-broadcast":
        return int(inp.read("rl.broadcast_senders", "broadcasting trainer GPUs"))
    return 1


def weight_sync(inp: Inputs, links: Links, plan: SyncPlan) -> WeightSync:
    """The time of one weight update under ``plan`` on ``links`` (see the module docstring)."""
    t = plan.transport
    eff = inp.read(f"rl.sync_link_efficiency.{t}", f"weight-sync link efficiency ({t})")
    fixed = inp.read("rl.sync_fixed_s", "weight-sync fixed latency")
    cross = f.cross_domain_share(
        plan.trainer_gpus, plan.inference_gpus, links.domain, links.node, plan.colocated or t == "colocated"
    )
    senders = _senders(inp, plan)
    bounds, per_sender, per_receiver = BOUNDS[t](plan, links, cross, senders)
    terms = {name: s / eff for name, s in bounds.items()}
    gather = terms.pop("gather on the senders", 0.0)
    wire = gather + max(terms.values())
    if gather:
        terms["gather on the senders"] = gather
    loads = plan.engine_load if plan.engine_load is not None else t in ENGINE_LOADS
    load = plan.tensors * inp.read("rl.sync_load_us_per_tensor", "engine weight loader") if loads else 0.0
    quantize = plan.quantize_bytes_per_gpu / links.hbm
    terms.update({"engine loader": load, "quantisation": quantize, "fixed latency": fixed})
    if t in PIPELINED:
        transfer = max(wire, quantize)
        rest = max(0.0, load - transfer)
    else:
        transfer, rest = wire + quantize, load
    return WeightSync(
        transport=t,
        bytes_moved=per_receiver * plan.inference_gpus,
        bytes_per_sender=per_sender,
        bytes_per_receiver=per_receiver,
        terms=terms,
        bound=max(terms, key=terms.__getitem__),
        transfer_s=transfer,
        load_s=rest,
        fixed_s=fixed,
    )
