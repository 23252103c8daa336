"""Pre-training estimate: catalog models in, a :class:`SystemPretraining` out.

Three steps, so the same arithmetic serves one estimate and a million-point sweep:
:func:`pretraining_inputs` reads every input through a :class:`Trace` (source,
``--set`` path; arrays in sweeps), :func:`pretraining_core` is plain arithmetic
on those numbers or arrays, :func:`estimate_pretraining` checks and packages one point.

How the model treats scale and MoE (see README "How the pre-training model works"):

* Compute: ``flops_per_token`` (6N + attention) at the precision's *dense* peak
  times the catalog MFU, measured at a known cluster size.
* Scale: per-GPU throughput falls as ``(N / N_measured)^-alpha`` above the size
  the MFU was measured at; alpha comes from the catalog's "share kept per 10x".
* MoE: expert parallelism inside the scale-up domain (EP = min(experts, domain));
  the all-to-all bytes of each token cross the scale-up link (NVLink, IF) at a
  link efficiency, and the share not overlapped with compute adds to the time.
* GPUs are rounded up to whole systems (nodes or racks): that is what is bought.
"""

from __future__ import annotations

import math
from typing import Any

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.schema import PRECISIONS, Accelerator
from ipd_cli.errors import InfeasibleError, InputError

from . import formulas as f
from .inputs import Inputs
from .pricing import kw_per_gpu, pue, usd_per_gpu_hour
from .results import Pretraining, SystemPretraining
from .trace import Trace

CLI = "command line"
MAX_GPUS = 100_000_000  # a sanity bound, far beyond any cluster: bigger answers mean a broken input


def supported_precision(acc: Accelerator, wanted: str) -> str:
    """The wanted precision, or the next wider one the accelerator has a dense figure for."""
    if wanted not in PRECISIONS:
        raise InputError(f"unknown precision '{wanted}'; choose one of: {', '.join(PRECISIONS)}")
    for p in PRECISIONS[PRECISIONS.index(wanted) :]:
        if acc.dense_tflops(p) is not None:
            return p
    raise InputError(f"no dense figure for {wanted} or wider precisions")


def pretraining_inputs(
    cat: Catalog,
    hardware: str,
    model: str,
    tokens: float,
    *,
    gpus: int | None,
    deadline_days: float | None,
    precision: str,
    mfu: float | None,
    sequence_length: int,
    pricing: str,
    origin: str,
    trace: Trace,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every number the core needs (``x``) and the labels that describe the point (``meta``)."""
    inp = Inputs(cat, trace)
    system = cat.system(hardware)
    name = cat.canonical("systems", hardware)
    acc = cat.accelerator_of(system)
    arch = cat.model(model)
    mname = cat.canonical("models", model)
    sorigin = cat.origin("systems", name)
    apath, mpath = f"accelerators.{system.accelerator}", f"models.{mname}"

    used = supported_precision(acc, precision)
    if used != precision:
        trace.given(
            "precision", used, "", sorigin, note=f"{name} has no dense {precision} figure; used {used}"
        )
    mfu_path = f"efficiency.training_mfu.{used}.mfu"
    x: dict[str, Any] = {
        "peak_flops": inp.read(f"{apath}.{used}_dense_tflops", f"{used} dense peak"),
        "mfu": inp.read(mfu_path, f"training MFU ({used})")
        if mfu is None
        else trace.given(f"training MFU ({used})", mfu, "fraction of dense peak", CLI, path=mfu_path),
        "ref_gpus": inp.read(f"efficiency.training_mfu.{used}.measured_at_gpus", "MFU measured at"),
        "alpha": f.scale_exponent(
            inp.read("efficiency.scale_retained_per_10x", "throughput kept per 10x GPUs")
        ),
        "active_params": inp.read(f"{mpath}.active_params", "active parameters"),
        "total_params": inp.read(f"{mpath}.total_params", "total parameters"),
        "layers": arch.layers,
        "hidden_size": arch.hidden_size,
        "attn_dim": arch.attention_heads * arch.head_dim,
        "seq_len": trace.given(
            "sequence length", sequence_length, "tokens", origin, path="workload.sequence_length"
        ),
        "tokens": trace.given("tokens", tokens, "tokens", origin, path="workload.tokens"),
        "per_system": system.accelerators,
        "a2a_bytes": 0.0,
        "link_bytes_per_s": 1.0,
        "overlap": 0.0,
    }
    if arch.is_moe:
        ep = min(arch.experts, system.scale_up_domain)
        trace.given("expert-parallel degree", ep, "GPUs", sorigin, note="min(experts, scale-up domain)")
        bidir = inp.read(f"{apath}.scale_up_gb_per_s_bidir", "scale-up bandwidth (bidirectional)")
        link_eff = inp.read("efficiency.scale_up_link_efficiency", "scale-up link efficiency")
        x["a2a_bytes"] = f.moe_a2a_bytes_per_token(
            arch.experts_per_token,
            arch.hidden_size,
            arch.layers,
            inp.read("efficiency.moe_a2a_bytes_per_value", "all-to-all bytes per value"),
            ep,
        )
        x["link_bytes_per_s"] = bidir / 2 * link_eff
        x["overlap"] = inp.read("efficiency.moe_a2a_overlap", "all-to-all hidden behind compute")
    x["hbm_bytes"] = inp.read(f"{apath}.hbm_gb", "HBM capacity")
    x["usable"] = inp.read("efficiency.hbm_usable_fraction", "usable HBM share")
    x["bytes_per_param"] = inp.read("efficiency.training_bytes_per_param", "training state per parameter")
    x["act_bytes"] = inp.read(
        "efficiency.activation_bytes_per_value", "activation checkpoint bytes per value"
    )
    if deadline_days is not None:
        x["deadline_days"] = trace.given(
            "deadline", deadline_days, "days", origin, path="workload.deadline_days"
        )
    else:
        x["gpus"] = trace.given("GPUs", gpus, "GPUs", origin, path="workload.gpus")
    x["price"], basis = usd_per_gpu_hour(inp, name, pricing)
    x["kw_per_gpu"] = kw_per_gpu(inp, name)
    x["pue"] = pue(inp)
    meta = {"hardware": name, "model": mname, "precision": used, "pricing": basis, "system": system}
    return x, meta


def pretraining_core(x: dict[str, Any]) -> dict[str, Any]:
    """The pre-training model on plain numbers or numpy arrays (element-wise)."""
    fpt = f.training_flops_per_token(x["active_params"], x["layers"], x["seq_len"], x["attn_dim"])
    s_per_token = f.seconds_per_token_per_gpu(
        fpt, x["peak_flops"], x["mfu"], x["a2a_bytes"], x["link_bytes_per_s"], x["overlap"]
    )
    compute_s = fpt / (x["peak_flops"] * x["mfu"])
    need = f.training_memory_bytes(
        x["total_params"], x["bytes_per_param"], x["seq_len"], x["hidden_size"], x["layers"], x["act_bytes"]
    )
    min_gpus = f.ceil(need / (x["hbm_bytes"] * x["usable"]))
    per_system = x["per_system"]
    if "deadline_days" in x:
        gpu_equivalents = x["tokens"] * s_per_token / (x["deadline_days"] * f.SECONDS_PER_DAY)
        raw = f.maximum(f.gpus_for_rate(gpu_equivalents, x["ref_gpus"], x["alpha"]), min_gpus)
        gpus = f.ceil(raw / per_system) * per_system
    else:
        gpus = x["gpus"] + 0 * s_per_token  # broadcast to the sweep's shape
    scale = f.scale_efficiency(gpus, x["ref_gpus"], x["alpha"])
    wall_s = x["tokens"] * s_per_token / (gpus * scale)
    gpu_hours = gpus * wall_s / f.SECONDS_PER_HOUR
    return {
        "gpus": gpus,
        "systems": f.ceil(gpus / per_system),
        "wall_days": wall_s / f.SECONDS_PER_DAY,
        "gpu_hours": gpu_hours,
        "cost_usd": gpu_hours * x["price"],
        "energy_mwh": f.energy_mwh(gpu_hours, x["kw_per_gpu"], x["pue"]),
        "mfu": x["mfu"],
        "effective_mfu": fpt / (s_per_token * x["peak_flops"]) * scale,
        "scale_efficiency": scale,
        "moe_comm_exposed_fraction": 1.0 - compute_s / s_per_token,
        "training_flops": fpt * x["tokens"],
        "flops_per_token": fpt,
        "peak_tflops_per_gpu": x["peak_flops"] / f.TERA,
        "min_gpus_for_memory": min_gpus,
        "memory_bytes": need,
        "price_usd_per_gpu_hour": x["price"],
        "kw_per_gpu": x["kw_per_gpu"],
    }


def estimate_pretraining(
    cat: Catalog,
    hardware: str,
    model: str,
    tokens: float,
    *,
    gpus: int | None = None,
    deadline_days: float | None = None,
    precision: str = "bf16",
    mfu: float | None = None,
    sequence_length: int = 8192,
    pricing: str = "rental",
    origin: str = CLI,
) -> SystemPretraining:
    """Wall time, GPUs, GPU-hours, cost and energy to pre-train ``model`` on ``tokens``.

    Give exactly one of ``gpus`` (a fixed cluster) or ``deadline_days`` (size the
    cluster to finish in time).
    """
    if (gpus is None) == (deadline_days is None):
        raise InputError("give exactly one of `gpus` or `deadline_days`")
    for flag, v in (
        ("`tokens`", tokens),
        ("`gpus`", gpus),
        ("`deadline_days`", deadline_days),
        ("`sequence_length`", sequence_length),
    ):
        if v is not None and not math.isfinite(v):
            raise InputError(f"{flag} must be a finite number, got {v}")
        if v is not None and v <= 0:
            raise InputError(f"{flag} must be > 0, got {v}")
    if gpus is not None and gpus > MAX_GPUS:
        raise InputError(f"`gpus` {gpus:.3g} is more than {MAX_GPUS:,} GPUs; give a cluster that can exist")
    if mfu is not None and not 0 < mfu <= 1:
        raise InputError(f"`mfu` must be in (0, 1], got {mfu}")
    trace = Trace(cat.sources)
    x, meta = pretraining_inputs(
        cat,
        hardware,
        model,
        tokens,
        gpus=gpus,
        deadline_days=deadline_days,
        precision=precision,
        mfu=mfu,
        sequence_length=sequence_length,
        pricing=pricing,
        origin=origin,
        trace=trace,
    )
    y = pretraining_core(x)
    need = y["gpus"] if gpus is None else y["min_gpus_for_memory"]
    if not math.isfinite(need) or need > MAX_GPUS:
        what = "meet the deadline" if gpus is None else "hold the model"
        raise InfeasibleError(
            f"{meta['model']} would need {need:,.3g} {meta['hardware']} GPUs to {what}, "
            f"more than {MAX_GPUS:,}; give more days, fewer tokens or a smaller model"
        )
    if gpus is not None and gpus < y["min_gpus_for_memory"]:
        raise InfeasibleError(
            f"{meta['model']} needs at least {int(y['min_gpus_for_memory'])} {meta['hardware']} GPUs "
            f"to hold its training state ({y['memory_bytes'] / 1e12:.1f} TB); got `gpus` {gpus}"
        )
    result = Pretraining(
        model=meta["model"],
        precision=meta["precision"],
        tokens=tokens,
        pricing=meta["pricing"],
        **{k: v for k, v in y.items() if k != "memory_bytes"},
    )
    system = meta["system"]
    return SystemPretraining(
        hardware=meta["hardware"],
        description=system.description,
        status=system.status,
        pretraining=result,
        assumptions=trace.items,
    )


def workload_args(w: Any) -> dict[str, Any]:
    """A pretrain workload's fields as the keyword arguments of the estimate functions."""
    return {
        "model": w.model,
        "tokens": w.tokens,
        "gpus": w.gpus,
        "deadline_days": w.deadline_days,
        "precision": w.precision,
        "sequence_length": w.sequence_length,
    }


def estimate_workload(
    cat: Catalog,
    hardware: str,
    w: Any,
    *,
    mfu: float | None = None,
    pricing: str = "rental",
    origin: str = CLI,
) -> SystemPretraining:
    """:func:`estimate_pretraining` with a pretrain workload's model, tokens, target and precision."""
    return estimate_pretraining(cat, hardware, mfu=mfu, pricing=pricing, origin=origin, **workload_args(w))
