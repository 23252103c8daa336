"""Pre-training estimate: catalog models in, a :class:`SystemPretraining` out.

How the model treats scale and MoE (see README "How the pre-training model works"):

* Compute: ``flops_per_token`` (6N + attention) at the precision's *dense* peak
  times the catalog MFU, measured at a known cluster size.
* Scale: per-GPU throughput falls as ``(N / N_measured)^-alpha`` above the size
  the MFU was measured at; alpha comes from the catalog's "share kept per 10x".
* MoE: expert parallelism inside the scale-up domain (EP = min(experts, domain));
  the all-to-all bytes of each token cross the scale-up link (NVLink, IF) at a
  link efficiency, and the share not overlapped with compute adds to the time.
  A larger domain cuts the bytes that leave a GPU only marginally; a faster link
  cuts the exposed time: that is where 72-GPU NVLink domains help.
* GPUs are rounded up to whole systems (nodes or racks): that is what is bought.
"""

from __future__ import annotations

from ipd_cli.catalog.loader import Catalog
from ipd_cli.catalog.schema import PRECISIONS, Accelerator
from ipd_cli.errors import InfeasibleError, InputError

from . import formulas as f
from .pricing import kw_per_gpu, usd_per_gpu_hour
from .results import Pretraining, SystemPretraining
from .trace import Trace

CLI = "command line"


def supported_precision(acc: Accelerator, wanted: str) -> str:
    """The wanted precision, or the next wider one the accelerator has a dense figure for."""
    for p in PRECISIONS[PRECISIONS.index(wanted) :]:
        if acc.dense_tflops(p) is not None:
            return p
    raise InputError(f"no dense figure for {wanted} or wider precisions")


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
        raise InputError("give exactly one of --gpus or --days")
    if tokens <= 0:
        raise InputError(f"tokens must be > 0, got {tokens}")
    if mfu is not None and not 0 < mfu <= 1:
        raise InputError(f"--mfu must be in (0, 1], got {mfu}")
    system = cat.system(hardware)
    name = cat.canonical("systems", hardware)
    acc = cat.accelerator_of(system)
    arch = cat.model(model)
    mname = cat.canonical("models", model)
    eff = cat.efficiency
    trace = Trace(cat.sources)
    sorigin = cat.origin("systems", name)
    morigin = cat.origin("models", mname)
    eorigin = cat.origin("efficiency", "training_mfu")

    used = supported_precision(acc, precision)
    if used != precision:
        trace.given(
            "precision", used, "", sorigin, note=f"{name} has no dense {precision} figure; used {used}"
        )
    peak_flops = trace.take(f"{used} dense peak", acc.dense_tflops(used), "TFLOP/s per GPU", sorigin, f.TERA)
    point = eff.training_mfu[used]
    if mfu is None:
        mfu = trace.take(f"training MFU ({used})", point.mfu, "fraction of dense peak", eorigin)
    else:
        trace.given(f"training MFU ({used})", mfu, "fraction of dense peak", CLI)
    ref_gpus = trace.given("MFU measured at", point.measured_at_gpus, "GPUs", eorigin)
    alpha = f.scale_exponent(
        trace.take("throughput kept per 10x GPUs", eff.scale_retained_per_10x, "fraction", eorigin)
    )

    attn_dim = arch.attention_heads * arch.head_dim
    trace.given("active parameters", arch.active_params, "", morigin)
    trace.given("total parameters", arch.total_params, "", morigin)
    flops_per_token = f.training_flops_per_token(arch.active_params, arch.layers, sequence_length, attn_dim)

    a2a_bytes = 0.0
    link = 1.0
    overlap = 0.0
    if arch.is_moe:
        ep = min(arch.experts, system.scale_up_domain)
        trace.given("expert-parallel degree", ep, "GPUs", sorigin, note="min(experts, scale-up domain)")
        a2a_bytes = f.moe_a2a_bytes_per_token(
            arch.experts_per_token,
            arch.hidden_size,
            arch.layers,
            trace.take("all-to-all bytes per value", eff.moe_a2a_bytes_per_value, "bytes", eorigin),
            ep,
        )
        uni = trace.take(
            "scale-up bandwidth (bidirectional)", acc.scale_up_gb_per_s_bidir, "GB/s per GPU", sorigin
        )
        link = (
            uni
            * f.GIGA
            / 2
            * trace.take("scale-up link efficiency", eff.scale_up_link_efficiency, "fraction", eorigin)
        )
        overlap = trace.take("all-to-all hidden behind compute", eff.moe_a2a_overlap, "fraction", eorigin)
    s_per_token = f.seconds_per_token_per_gpu(flops_per_token, peak_flops, mfu, a2a_bytes, link, overlap)
    compute_s = flops_per_token / (peak_flops * mfu)

    hbm = trace.take("HBM capacity", acc.hbm_gb, "GB per GPU", sorigin, f.GIGA)
    usable = trace.take("usable HBM share", eff.hbm_usable_fraction, "fraction", eorigin)
    need = f.training_memory_bytes(
        arch.total_params,
        trace.take("training state per parameter", eff.training_bytes_per_param, "bytes", eorigin),
        sequence_length,
        arch.hidden_size,
        arch.layers,
        trace.take("activation checkpoint bytes per value", eff.activation_bytes_per_value, "bytes", eorigin),
    )
    min_gpus = int(f.ceil(need / (hbm * usable)))

    per_system = system.accelerators
    if deadline_days is not None:
        trace.given("deadline", deadline_days, "days", origin)
        gpu_equivalents = tokens * s_per_token / (deadline_days * f.SECONDS_PER_DAY)
        raw = max(f.gpus_for_rate(gpu_equivalents, ref_gpus, alpha), min_gpus)
        n = int(f.ceil(raw / per_system)) * per_system
    else:
        n = int(gpus)
        if n < min_gpus:
            raise InfeasibleError(
                f"{mname} needs at least {min_gpus} {name} GPUs to hold its training state "
                f"({need / 1e12:.1f} TB); got --gpus {n}"
            )
        trace.given("GPUs", n, "GPUs", origin)
    scale = f.scale_efficiency(n, ref_gpus, alpha)
    wall_s = tokens * s_per_token / (n * scale)
    gpu_hours = n * wall_s / f.SECONDS_PER_HOUR
    price, basis = usd_per_gpu_hour(cat, name, system, pricing, trace)
    kw = kw_per_gpu(cat, name, system, trace)
    pue = trace.take("PUE", cat.economics.pue, "ratio", cat.origin("economics", "pue"))
    result = Pretraining(
        model=mname,
        precision=used,
        tokens=tokens,
        gpus=n,
        systems=int(f.ceil(n / per_system)),
        wall_days=wall_s / f.SECONDS_PER_DAY,
        gpu_hours=gpu_hours,
        cost_usd=gpu_hours * price,
        energy_mwh=f.energy_mwh(gpu_hours, kw, pue),
        mfu=mfu,
        effective_mfu=flops_per_token / (s_per_token * peak_flops) * scale,
        scale_efficiency=scale,
        moe_comm_exposed_fraction=1.0 - compute_s / s_per_token,
        training_flops=flops_per_token * tokens,
        flops_per_token=flops_per_token,
        peak_tflops_per_gpu=peak_flops / f.TERA,
        min_gpus_for_memory=min_gpus,
        price_usd_per_gpu_hour=price,
        pricing=basis,
        kw_per_gpu=kw,
    )
    return SystemPretraining(
        hardware=name,
        description=system.description,
        status=system.status,
        pretraining=result,
        assumptions=trace.items,
    )
