"""Every number the deployment search needs, read once from the catalog (SI units, traced).

:func:`read` turns a system, a model, a weight precision, the KV precisions to search and a
request shape into a :class:`Physics`: plain floats (and, per KV precision, small tuples) that
the grid evaluation in :mod:`.evaluate` combines over whole columns of configurations.
"""

from __future__ import annotations

from dataclasses import dataclass

from ipd_cli.engine import formulas as f
from ipd_cli.engine.pricing import kw_per_gpu, pue, usd_per_gpu_hour

from .context import Ctx, kv_bytes_per_token, supported, weight_split, wider


@dataclass(frozen=True)
class Physics:
    """One model on one system at one precision and request shape (SI units)."""

    model: str
    system: str
    precision: str
    kv_precisions: tuple[str, ...]
    isl: int
    osl: int
    speculative: float
    # model
    moe: bool
    layers: int
    hidden: int
    heads: int
    kv_heads: int  # 1 for MLA: one latent shared by every head
    experts: int
    top_k: int
    dense_bytes: float  # non-routed weights (attention, shared experts, embeddings)
    expert_bytes: float  # routed experts
    dense_flops_per_token: float  # 2 x non-routed active parameters
    expert_flops_per_token: float  # 2 x routed active parameters
    kv_per_token: tuple[float, ...]  # per KV precision, all KV layers
    attn_flops_per_token: float  # decode attention at the mean live context, all KV layers
    prefill_dense_flops_per_token: float  # 2 x non-routed active + causal attention over the prompt
    # hardware
    domain: int
    hbm_bytes: float  # per GPU, after the workspace and activation reserve
    kv_fraction: float  # share of what the weights leave that the KV cache gets
    hbm_rate: float  # achieved bytes/s per GPU
    gemm_rate: float  # achieved FLOP/s per GPU in dense decode GEMMs
    attn_rate: tuple[float, ...]  # per KV precision: attention math at the KV precision
    prefill_rate: float  # achieved FLOP/s per GPU in prefill
    moe_share: float
    link_up: float  # achieved bytes/s per GPU and direction
    link_out: float
    latency_up: float  # s per collective
    latency_out: float
    collective_bytes: float
    overhead_s: float
    overhead_per_layer_s: float
    overhead_per_sequence_s: float
    expert_imbalance: float
    expert_imbalance_eplb: float
    expert_reference_ep: float
    expert_reference_per_gpu: float
    eplb_slots: float
    dp_imbalance: float
    dp_reference_ranks: float
    # search bounds
    instance_sizes: tuple[int, ...]
    max_domains: int
    max_batch_per_rank: int
    max_decode_instances: int
    # cost
    price: float
    pricing: str
    kw_per_gpu: float
    pue: float

    @property
    def context_mean(self) -> float:
        return self.isl + self.osl / 2

    @property
    def context_peak(self) -> int:
        return self.isl + self.osl


def _model_terms(ctx: Ctx, precision: str, isl: int, osl: int) -> dict:
    arch = ctx.model
    bpw = ctx.take(f"bytes per weight ({precision})", f"bytes_per_weight.{precision}")
    total = ctx.arch("total parameters", "total_params")
    active = ctx.arch("active parameters", "active_params")
    ctx.trace.given("layers with a growing KV cache", arch.kv_layers, "layers", ctx.morigin)
    dense_b, expert_b, k_over_e = weight_split(arch, bpw)
    routed_active = expert_b / bpw * k_over_e if arch.is_moe else 0.0
    dense_active = active - routed_active if arch.is_moe else total
    per_position = f.attention_flops_per_position(
        arch.attention_heads, arch.head_dim, arch.kv_lora_rank or 0, arch.qk_rope_head_dim or 0
    )
    attn_dim = arch.attention_heads * arch.head_dim
    return {
        "moe": arch.is_moe,
        "layers": arch.layers,
        "hidden": arch.hidden_size,
        "heads": arch.attention_heads,
        "kv_heads": arch.kv_heads or 1,
        "experts": arch.experts,
        "top_k": arch.experts_per_token,
        "dense_bytes": dense_b,
        "expert_bytes": expert_b,
        "dense_flops_per_token": 2.0 * dense_active,
        "expert_flops_per_token": 2.0 * routed_active,
        "attn_flops_per_token": arch.kv_layers * per_position * (isl + osl / 2),
        "prefill_dense_flops_per_token": 2.0 * dense_active
        + f.attention_flops_per_token_fwd(arch.kv_layers, isl, attn_dim),
    }


def _kv_terms(ctx: Ctx, precision: str, kv_precisions: list[str]) -> dict:
    peak = ctx.spec(f"{precision} dense peak", f"{precision}_dense_tflops")
    eff = ctx.take(f"decode compute efficiency ({precision})", f"decode_compute_efficiency.{precision}")
    kv_tok, attn = [], []
    for kv in kv_precisions:  # one to three KV precisions, not configurations
        kvb = ctx.take(f"KV bytes per value ({kv})", f"kv_bytes_per_value.{kv}")
        kv_tok.append(kv_bytes_per_token(ctx.model, kvb))
        p = supported(ctx.acc, wider(kv, ctx.cat.serving.attention_min_precision))
        if p == precision:
            attn.append(peak * eff)
        else:
            attn_peak = ctx.spec(f"{p} dense peak (attention)", f"{p}_dense_tflops")
            attn.append(
                attn_peak * ctx.take(f"decode compute efficiency ({p})", f"decode_compute_efficiency.{p}")
            )
    mfu = ctx.take(f"prefill MFU ({precision})", f"prefill_mfu.{precision}")
    return {
        "kv_per_token": tuple(kv_tok),
        "attn_rate": tuple(attn),
        "gemm_rate": peak * eff,
        "prefill_rate": peak * mfu,
    }


def _memory(ctx: Ctx) -> dict:
    """Bytes per GPU for weights and KV: HBM less the workspace and the activations of one forward
    pass of ``max_num_tokens`` tokens; the KV cache gets a share of what the weights leave."""
    hbm = ctx.spec("HBM capacity", "hbm_gb")
    workspace = ctx.take("runtime workspace per GPU", "workspace_gb_per_gpu")
    tokens = ctx.take("tokens per forward pass", "max_num_tokens")
    act = ctx.take("activation bytes per token and hidden unit", "activation_bytes_per_token_hidden")
    return {
        "hbm_bytes": hbm - workspace - tokens * ctx.model.hidden_size * act,
        "kv_fraction": ctx.take("KV-cache share of free memory", "kv_cache_free_fraction"),
    }


def _links(ctx: Ctx) -> dict:
    up = ctx.spec("scale-up bandwidth (bidirectional)", "scale_up_gb_per_s_bidir") / 2
    out = ctx.spec("scale-out bandwidth", "scale_out_gbit_per_s")
    return {
        "link_up": up * ctx.take("scale-up link efficiency (serving)", "scale_up_link_efficiency"),
        "link_out": out * ctx.take("scale-out link efficiency (serving)", "scale_out_link_efficiency"),
        "latency_up": ctx.take("collective latency (scale-up)", "collective_latency_us_scale_up"),
        "latency_out": ctx.take("collective latency (scale-out)", "collective_latency_us_scale_out"),
        "collective_bytes": ctx.take("collective bytes per value", "collective_bytes_per_value"),
    }


def _moe(ctx: Ctx, precision: str) -> dict:
    if not ctx.model.is_moe:
        one = 1.0
        return dict.fromkeys(
            ("moe_share", "expert_imbalance", "expert_imbalance_eplb", "expert_reference_ep"), one
        ) | {"expert_reference_per_gpu": one, "eplb_slots": 0.0}
    return {
        "moe_share": ctx.take(
            f"routed-expert share of dense compute efficiency ({precision})", f"moe_compute_share.{precision}"
        ),
        "expert_imbalance": ctx.take("expert load imbalance (no EPLB)", "expert_imbalance"),
        "expert_imbalance_eplb": ctx.take("expert load imbalance (EPLB)", "expert_imbalance_eplb"),
        "expert_reference_ep": ctx.take("expert imbalance: reference EP", "expert_imbalance_reference_ep"),
        "expert_reference_per_gpu": ctx.take(
            "expert imbalance: reference experts per GPU", "expert_imbalance_reference_experts_per_gpu"
        ),
        "eplb_slots": ctx.take("EPLB redundant expert slots per GPU", "eplb_slots_per_gpu"),
    }


def read(
    ctx: Ctx, precision: str, kv_precisions: list[str], isl: int, osl: int, speculative: float, pricing: str
) -> Physics:
    """Read every input once; ``ctx.trace`` records each with its source."""
    price, basis = usd_per_gpu_hour(ctx.inp, ctx.name, pricing)
    sv = ctx.cat.serving
    return Physics(
        model=ctx.mname,
        system=ctx.name,
        precision=precision,
        kv_precisions=tuple(kv_precisions),
        isl=isl,
        osl=osl,
        speculative=speculative,
        **_model_terms(ctx, precision, isl, osl),
        **_kv_terms(ctx, precision, kv_precisions),
        domain=ctx.system.scale_up_domain,
        **_memory(ctx),
        hbm_rate=ctx.spec("HBM bandwidth", "hbm_tb_per_s")
        * ctx.take("decode HBM efficiency", "decode_hbm_efficiency"),
        **_links(ctx),
        overhead_s=ctx.take("per-step overhead", "step_overhead_ms_scale_up"),
        overhead_per_layer_s=ctx.take("per-step overhead per layer", "step_overhead_us_per_layer"),
        overhead_per_sequence_s=ctx.take("per-step overhead per sequence", "step_overhead_us_per_sequence"),
        **_moe(ctx, precision),
        dp_imbalance=ctx.take("attention data-parallel imbalance", "attention_dp_imbalance"),
        dp_reference_ranks=ctx.take(
            "attention imbalance: reference ranks", "attention_dp_imbalance_reference_ranks"
        ),
        instance_sizes=tuple(sv.instance_gpus),
        max_domains=int(ctx.take("largest instance (scale-up domains)", "max_instance_domains")),
        max_batch_per_rank=int(ctx.take("engine batch cap per rank", "max_batch_per_rank")),
        max_decode_instances=int(ctx.take("decode instances per pool tried", "max_decode_instances")),
        price=price,
        pricing=basis,
        kw_per_gpu=kw_per_gpu(ctx.inp, ctx.name),
        pue=pue(ctx.inp),
    )
