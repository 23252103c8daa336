"""Every number the deployment search needs, read once from the catalog (SI units, traced).

:func:`read` turns a system, a model, a weight precision, the KV precisions to search and a
request shape into a :class:`Physics`: plain floats (and, per KV precision, small tuples) that
the grid evaluation in :mod:`.evaluate` combines over whole columns of configurations.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.engine import formulas as f
from ipd_cli.engine import trainplan
from ipd_cli.engine.pricing import kw_per_gpu, pue, usd_per_gpu_hour
from ipd_cli.errors import InputError

from . import stack as stacks
from .context import (
    ServingContext,
    held_whole_params,
    kv_bytes_per_token,
    mla_down_params,
    routed_active_params,
    router_params,
    supported,
    weight_split,
    wider,
)
from .stack import Stack


@dataclass(frozen=True)
class Physics:
    """One model on one system at one precision and request shape (SI units)."""

    model: str
    system: str
    precision: str
    kv_precisions: tuple[str, ...]
    isl: int
    osl: int
    prefix: int  # cached context tokens a request attends to beyond its own (earlier turns)
    stack: str
    family: str | None
    stack_borrowed_from: str | None
    stack_release: str | None  # the stack's release measured apart (None: its profile alone)
    # speculative decoding: depths searched, mean tokens per verify step at each depth (index =
    # depth, 1.0 at depth 0), and the draft's cost per draft token
    spec_method: str | None
    spec_depths: tuple[int, ...]
    spec_tokens: tuple[float, ...]
    draft_layers: int
    # per draft pass, beyond its layer(s): its input's embedding, the head's gather, the sampling
    # and the next pass's metadata, as many layers' floors (0 without a draft)
    draft_pass_overhead_layers: float
    draft_dense_bytes: float  # per draft token: non-routed weights of the draft layer(s) and the head
    draft_expert_bytes: float  # per draft token: routed experts of an MTP layer (0 for EAGLE)
    draft_dense_flops_per_token: float
    draft_expert_flops_per_token: float
    draft_kv_share: float  # the draft's KV bytes per token over the target's (all layers)
    draft_kv_heads: int  # the draft attention's KV heads (its copies under tensor parallelism)
    draft_attn_per_position: float  # the draft's decode attention FLOPs per cached position
    draft_head_flops_per_token: float  # of draft_dense_flops_per_token, its output head's
    # an EAGLE draft's fusing projection (3h x h): once a step, on the pass the target's states feed
    draft_fc_bytes: float
    draft_fc_flops_per_token: float
    draft_heads: int  # the draft's query heads (attention TP divides them too); 0 without a draft
    draft_prefill_attn_flops_per_token: float  # the draft's causal attention over the prompt
    draft_prefill_context_flops_per_token: float  # an MTP layer's up-projection of the cached context
    # model
    moe: bool
    layers: int
    moe_layers: int  # layers with routed experts (their dispatch and combine); 0 for a dense model
    kv_layers: int
    hidden: int
    heads: int
    kv_heads: int  # 1 for MLA: one latent shared by every head
    experts: int
    top_k: int
    dense_bytes: float  # non-routed weights (attention, shared experts, embeddings)
    expert_bytes: float  # routed experts
    dense_flops_per_token: float  # 2 x non-routed active parameters
    head_flops_per_token: float  # of those, the LM head's (a prompt runs it on its last token only)
    # of dense_bytes and dense_flops_per_token, what every attention-TP rank holds and runs whole
    # (MLA's down-projections and the MoE routers: held_whole_params); of the draft's likewise (an
    # MTP layer's)
    replicated_bytes: float
    replicated_flops_per_token: float
    draft_replicated_bytes: float
    draft_replicated_flops_per_token: float
    expert_flops_per_token: float  # 2 x routed active parameters
    kv_per_token: tuple[float, ...]  # per KV precision, all KV layers
    attn_flops_per_token: float  # decode attention at the mean live context, all KV layers
    prefill_attn_flops_per_token: float  # causal attention over the prompt, all KV layers
    # per prompt token, MLA's up-projection of the cached context's latents (0 without a prefix)
    prefill_context_flops_per_token: float
    # hardware
    domain: int
    hbm_bytes: float  # per GPU, after the workspace and activation reserve
    kv_fraction: float  # share of what the weights leave that the KV cache gets
    hbm_rate: float  # achieved bytes/s per GPU streaming dense weights
    kv_rate: float  # achieved bytes/s per GPU reading the KV cache
    expert_rate: float  # achieved bytes/s per GPU streaming routed-expert weights (grouped GEMM)
    gemm_rate: float  # achieved FLOP/s per GPU in dense GEMMs at batch (decode, and prefill's)
    attn_rate: tuple[float, ...]  # per KV precision: attention math at the KV precision
    prefill_attn_rate: tuple[float, ...]  # per KV precision: the prompt's attention, at that precision
    prefill_rate: float  # achieved FLOP/s per GPU in the prompt's routed experts
    moe_share: float
    prefill_moe_share: float  # a prompt's experts (thousands of tokens each): the stack's, else moe_share
    pool_prefill_moe_share: float  # the same on a disaggregated prefill instance: the stack's, else the above
    link_up: float  # achieved bytes/s per GPU and direction
    link_out: float
    two_batch_overlap: bool  # a prompt's dispatch/combine can hide behind the other half-batch
    overlap_sm_share: float  # SMs the communication kernels hold while overlapping
    latency_up: float  # s per collective
    latency_out: float
    collective_bytes: float
    a2a_bytes: float  # mean bytes per value of an expert dispatch and its combine
    overhead_s: float
    overhead_per_layer_s: float
    disagg_overhead_per_layer_s: float  # a disaggregated deployment's decode pool's
    floor_exponent: float
    overhead_per_sequence_s: float
    host_per_sequence_s: float  # the host's loop per step and sequence of a scheduler rank (0: none)
    host_overlaps: bool  # the host's loop runs while the GPU runs another step: the larger counts
    adp_timeout_steps: float  # an attention-DP balance holds a new prompt at most this long (0: none)
    prompt_stall_s: float  # an aggregated iteration holding a prompt takes at least this (0: none)
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
    max_stage_domains: int  # scale-up domains a searched decode stage may span (the stack's)
    max_stage_domains_of: str  # whose published decode sets it: 'trtllm on blackwell', 'the reference'
    max_batch_per_rank: int
    max_decode_instances: int
    # cost
    price: float  # a GPU-hour kept for the service around the clock (tco: utilisation 1)
    pricing: str
    kw_per_gpu: float
    gpus_per_system: int  # GPUs of one node or rack (an owner buys whole ones)
    pue: float

    @property
    def context_mean(self) -> float:
        """Tokens a decode step of the mean sequence attends to (its KV cache): the cached
        context, the prompt and half the output."""
        return self.prefix + self.isl + self.osl / 2

    @property
    def context_peak(self) -> int:
        """Tokens a sequence's KV cache holds at its last step."""
        return self.prefix + self.isl + self.osl

    @property
    def moe_rate(self) -> float:
        """FLOP/s per GPU of a decode step's expert GEMMs (the dense GEMM rate at the MoE share)."""
        return self.gemm_rate * self.moe_share

    @property
    def request_tokens(self) -> int:
        """Tokens a request brings and takes (new prompt and output; its cached context not)."""
        return self.isl + self.osl


def prefill_attention_length(isl: int, prefix: int) -> int:
    """The sequence length whose causal attention costs what a prompt of ``isl`` new tokens after
    ``prefix`` cached ones does: each new token attends to the prefix and, on average, half the
    prompt (prefix + isl / 2 positions: a causal ``2 prefix + isl``)."""
    return isl + 2 * prefix


def _model_terms(ctx: ServingContext, precision: str, isl: int, osl: int, prefix: int) -> dict:
    arch = ctx.model
    bpw = ctx.take(f"bytes per weight ({precision})", f"bytes_per_weight.{precision}")
    total = ctx.arch("total parameters", "total_params")
    active = ctx.arch("active parameters", "active_params")
    ctx.trace.given("layers with a growing KV cache", arch.kv_layers, "layers", ctx.morigin)
    dense_b, expert_b, _ = weight_split(arch, bpw)
    routed_active = routed_active_params(arch)
    dense_active = active - routed_active if arch.is_moe else total
    per_position = _attn_per_position(arch)
    # a prompt's attention runs on up-projected heads (MLA too: only decode reads the latent)
    qk_dim, v_dim = arch.attention_heads * arch.qk_head_dim, arch.attention_heads * arch.head_dim
    return {
        "moe": arch.is_moe,
        "layers": arch.layers,
        "moe_layers": arch.routed_layers,
        "kv_layers": arch.kv_layers,
        "hidden": arch.hidden_size,
        "heads": arch.attention_heads,
        "kv_heads": arch.kv_heads or 1,
        "experts": arch.experts,
        "top_k": arch.experts_per_token,
        "dense_bytes": dense_b,
        "expert_bytes": expert_b,
        "dense_flops_per_token": 2.0 * dense_active,
        "head_flops_per_token": 2.0 * arch.vocab_size * arch.hidden_size,
        "expert_flops_per_token": 2.0 * routed_active,
        "attn_flops_per_token": arch.kv_layers * per_position * (prefix + isl + osl / 2),
        "prefill_attn_flops_per_token": f.attention_flops_per_token_fwd(
            arch.kv_layers, prefill_attention_length(isl, prefix), qk_dim, v_dim
        ),
        "prefill_context_flops_per_token": f.mla_context_flops_per_token(
            arch.kv_layers,
            arch.kv_lora_rank or 0,
            arch.attention_heads,
            arch.qk_nope_head_dim or arch.head_dim,
            arch.head_dim,
            prefix,
            isl,
        ),
    }


def _trace_context(ctx: ServingContext, flops: float, prefix: int) -> None:
    """The explain row of MLA's up-projection of a prompt's cached context, where there is one."""
    if flops:
        ctx.trace.given(
            "prompt: cached context up-projected (MLA)",
            flops,
            "FLOP/token",
            ctx.morigin,
            note=f"each prompt expands its {prefix:,} cached latents to full keys and values in every "
            "layer before its attention (2 x kv_lora_rank x heads x (nope + value dims) a position "
            "and layer, over the prompt's tokens), among its GEMMs; run at the wide precision's "
            "rate where the checkpoint keeps attention wide",
            source="vllm-mla-prefill",
        )


def _attn_per_position(arch) -> float:
    """Decode attention FLOPs per cached position of one of the model's layers."""
    return f.attention_flops_per_position(
        arch.attention_heads, arch.head_dim, arch.kv_lora_rank or 0, arch.qk_rope_head_dim or 0
    )


@dataclass(frozen=True)
class _Wide:
    """What the model's checkpoint at the weight precision keeps wider: attention parameters per
    layer, router parameters per layer (the routed layers' over all layers, as a layer's share of
    the experts is counted), those in the head, and what each such parameter adds, in bytes and in
    FLOPs at the weights' GEMM rate (``flop_factor`` - 1: a wide FLOP takes ``gemm_rate / wide
    rate`` of the precision's); ``draft``: the MTP layer is kept wide whole."""

    per_layer: float = 0.0
    head: float = 0.0
    extra_bytes: float = 0.0
    flop_factor: float = 1.0
    router: float = 0.0
    draft: bool = False

    def bytes(self, layers: float) -> float:
        return (layers * (self.per_layer + self.router) + self.head) * self.extra_bytes

    def flops(self, layers: float) -> float:
        return 2.0 * (layers * (self.per_layer + self.router) + self.head) * (self.flop_factor - 1.0)


def _wide_entry(ctx: ServingContext, precision: str) -> tuple[Any, str, str] | None:
    """The model's ``checkpoint_wide`` entry at ``precision`` for the accelerator's vendor (the
    catalog's ``serving.checkpoint_wide_default`` where the model has none), its catalog path and
    origin, where it keeps something wider than ``precision``."""
    if precision not in ("fp8", "fp4"):
        return None
    entry: Any = ctx.model.checkpoint_wide.get(precision)  # type: ignore[call-overload]
    path, origin = f"models.{ctx.mname}.checkpoint_wide.{precision}", ctx.morigin
    if entry is None:
        entry = ctx.cat.serving.checkpoint_wide_default.get(precision)  # type: ignore[call-overload]
        path = f"serving.checkpoint_wide_default.{precision}"
        origin = ctx.cat.origin_of("serving", "checkpoint_wide_default")
        if entry is None:
            return None
    vendor = ctx.acc.vendor
    if vendor in getattr(entry, "by_vendor", {}):
        entry, path = entry.by_vendor[vendor], f"{path}.by_vendor.{vendor}"
    if not entry.value or wider(entry.precision, precision) == precision:
        return None
    return entry, path, origin


def _kept_wide(
    ctx: ServingContext, precision: str, gemm_rate: float, rate_at: Callable[[str], float]
) -> _Wide:
    """The parameters a published checkpoint at ``precision`` keeps wider
    (``models.<model>.checkpoint_wide.<precision>``: NVFP4 DeepSeek-R1 its query and key-value
    projections and LM head in BF16, gpt-oss all attention and the LM head), weighed at that
    precision's bytes and computed at its GEMM rate (``rate_at``: :func:`_kv_terms`'). Under DEP
    every rank streams its whole attention each step, so these bytes weigh where the experts are
    spread thin."""
    arch = ctx.model
    found = _wide_entry(ctx, precision)
    if found is None:
        return _Wide()
    entry, path, origin = found
    shape = trainplan.attention_shape(arch) | {"hidden": arch.hidden_size}
    per_layer = 0.0
    left_out = {  # the projections each attention module leaves at the precision
        "attention": set(),
        "attention_input": {"out"},
        "attention_but_kv_up": {"kv_up"},
    }
    named = [left_out[m] for m in entry.value if m in left_out]
    if named:  # their union: all but what every one of them leaves out
        out = set.intersection(*named)
        per_layer = trainplan.mixer_params(shape)
        per_layer -= shape["attn_dim"] * arch.hidden_size if "out" in out else 0.0
        per_layer -= trainplan.mla_kv_up_params(shape) if "kv_up" in out else 0.0
    head = float(arch.vocab_size * arch.hidden_size) if "lm_head" in entry.value else 0.0
    router = router_params(arch) / arch.layers if "router" in entry.value else 0.0
    wide = entry.precision
    params = arch.layers * (per_layer + router) + head
    ctx.trace.given(  # the modules as --set takes them; the name says what they weigh
        f"weights the {precision} checkpoint keeps in {wide} ({params / 1e9:.3g}B parameters"
        + (", and its MTP layer whole)" if "mtp" in entry.value else ")"),
        f"[{', '.join(entry.value)}]",
        "",
        origin,
        note=entry.note,
        path=f"{path}.value",
        source=entry.source,
        estimate=entry.estimate,
    )
    bpw = ctx.inp.quiet().read(f"serving.bytes_per_weight.{precision}")  # read already (model terms)
    wide_bpw = ctx.take(f"bytes per weight ({wide})", f"bytes_per_weight.{wide}")
    return _Wide(per_layer, head, wide_bpw - bpw, gemm_rate / rate_at(wide), router, "mtp" in entry.value)


def _rates(
    ctx: ServingContext, st: Stack, precision: str, kv_precisions: list[str]
) -> tuple[dict, _Wide, Callable[[str], float]]:
    """:func:`_kv_terms`' rates, :func:`_kept_wide`'s weights kept wider, and the GEMM rate of
    weights held at another precision."""
    rates, rate_at = _kv_terms(ctx, st, precision, kv_precisions)
    return rates, _kept_wide(ctx, precision, rates["gemm_rate"], rate_at), rate_at


def _held_whole(
    ctx: ServingContext, precision: str, wide: _Wide, layers: float, whole: bool = False
) -> tuple[float, float]:
    """Bytes and FLOPs per token of :func:`held_whole_params` in ``layers`` layers of the model's
    shape (per layer as :class:`_Wide` counts them): the down-projections at the checkpoint's
    precision where it keeps attention wide (they are among its projections), the routers where
    it keeps them wide; both wide where the layers are kept wide ``whole`` (an MTP layer)."""
    arch = ctx.model
    bpw = ctx.inp.quiet().read(f"serving.bytes_per_weight.{precision}")  # read already (model terms)
    held, flops = 0.0, 0.0
    for params, kept in (
        (mla_down_params(arch), wide.per_layer or whole),
        (router_params(arch), wide.router or whole),
    ):
        params *= layers / arch.layers
        extra, factor = (wide.extra_bytes, wide.flop_factor) if kept else (0.0, 1.0)
        held, flops = held + params * (bpw + extra), flops + 2.0 * params * factor
    return held, flops


def _replicated(ctx: ServingContext, precision: str, wide: _Wide) -> dict:
    """The target's ``replicated_*``: :func:`_held_whole` over all its layers (0 without MLA or
    routed experts)."""
    params = held_whole_params(ctx.model)
    if not params:
        return {"replicated_bytes": 0.0, "replicated_flops_per_token": 0.0}
    ctx.trace.given(
        "parameters each attention TP rank holds whole",
        params,
        "parameters",
        ctx.morigin,
        note="MLA's down-projections q_a and kv_a with the RoPE key (vLLM's and SGLang's "
        "ReplicatedLinear, TensorRT-LLM's fused_a; the up- and output projections split over the "
        "group) and the MoE routers (a ReplicatedLinear gate: every expert's logit of every token)",
    )
    held, flops = _held_whole(ctx, precision, wide, ctx.model.layers)
    return {"replicated_bytes": held, "replicated_flops_per_token": flops}


def _fp4_factor(ctx: ServingContext, st: Stack) -> float:
    """The stack's extra GEMM efficiency factor for FP4 math (1 where it has none): the rates of
    :func:`_kv_terms` (read there only where some math runs in FP4) and of the MoE share's cap."""
    v = stacks.read(ctx, st, "FP4 GEMM efficiency factor (stack)", "fp4_compute_efficiency_factor", None)
    return 1.0 if v is None else v


def member_gemm_ratio(ctx: ServingContext, st: Stack) -> Any:
    """A family member's GEMM rate against the one its fitted factors stand for: its measured
    best-shape BF16 GEMM share (efficiency.training_gemm_max_share_by_accelerator, MAMF) over the
    share the family's factors were fitted at (``serving.families.<family>.gemm_share_of_fit``);
    1 for a family that gives none or a member without a share of its own. A family's fitted
    GEMM factor is one value for members whose silicon sustains different shares of the same
    peak: MI300X at 750 W reaches 668 of its 1,307 TFLOP/s, MI325X at 1,000 W 785 of the same
    1,307, while the CDNA 3 fit priced both alike and MLPerf's Llama 2 70B runs measure MI325X
    1.24-1.30x MI300X (predicted 1.01-1.03x: a fresh-eyes review). A fixed share of the fit, not
    another member's: a --set of one member's share moves that member alone (a code review). The
    BF16 share scales every precision's math and attention: it is the one measured (the FP8
    shares are derived from it), and the sustained clock it reflects is the whole chip's."""
    if st.family is None:
        return 1.0
    fit = ctx.cat.serving.families[st.family].gemm_share_of_fit
    acc = ctx.system.accelerator
    if fit is None or "bf16" not in ctx.cat.efficiency.training_gemm_max_share_by_accelerator.get(acc, {}):
        return 1.0
    own = ctx.inp.read(
        f"efficiency.training_gemm_max_share_by_accelerator.{acc}.bf16",
        "best-shape GEMM share of peak (bf16, MAMF)",
    )
    at = ctx.inp.read(
        f"serving.families.{st.family}.gemm_share_of_fit",
        f"GEMM share the {st.family} factors were fitted at (bf16)",
    )
    return own / at


def _kv_terms(
    ctx: ServingContext, st: Stack, precision: str, kv_precisions: list[str]
) -> tuple[dict, Callable[[str], float]]:
    common = stacks.read(ctx, st, "GEMM efficiency factor (stack)", "compute_efficiency_factor", None)
    common = (1.0 if common is None else common) * member_gemm_ratio(ctx, st)

    fp4_factor = functools.cache(lambda: _fp4_factor(ctx, st))  # read (and traced) once, where FP4 runs

    def at(p: str) -> float:
        """The stack's GEMM efficiency factor for math at precision ``p``."""
        return common * fp4_factor() if p == "fp4" else common

    factor = at(precision)
    peak = ctx.spec(f"{precision} dense peak", f"{precision}_dense_tflops")
    eff = ctx.take(f"decode compute efficiency ({precision})", f"decode_compute_efficiency.{precision}")
    mfu = ctx.take(f"prefill MFU ({precision})", f"prefill_mfu.{precision}")
    kv_tok, attn, prefill_attn = [], [], []
    narrowest = stacks.attention_min_precision(ctx, st)
    for kv in kv_precisions:  # one to three KV precisions, not configurations
        kvb = ctx.take(f"KV bytes per value ({kv})", f"kv_bytes_per_value.{kv}")
        kv_tok.append(kv_bytes_per_token(ctx.model, kvb))
        # attention math runs at the KV cache's precision (or the stack's narrowest attention), not
        # at the weights': an FP4 model's prompt attention is FP8 or BF16 work
        p = supported(ctx.acc, wider(kv, narrowest))
        if p == precision:
            attn.append(peak * eff * factor)
            prefill_attn.append(peak * mfu * factor)
        else:
            attn_peak = ctx.spec(f"{p} dense peak (attention)", f"{p}_dense_tflops")
            attn.append(
                attn_peak
                * ctx.take(f"decode compute efficiency ({p})", f"decode_compute_efficiency.{p}")
                * at(p)
            )
            prefill_attn.append(
                attn_peak * ctx.take(f"prefill MFU ({p}, attention)", f"prefill_mfu.{p}") * at(p)
            )

    # decode attention math at the stack's own share of that rate, where it measures one apart
    attn_factor = stacks.read(
        ctx, st, "decode attention compute factor (stack)", "decode_attention_compute_factor", None
    )
    if attn_factor is not None:
        attn = [a * attn_factor for a in attn]

    def rate_at(p: str) -> float:
        """GEMM FLOP/s of weights held at ``p`` (what a checkpoint keeps wider, a draft's own)."""
        return (
            ctx.spec(f"{p} dense peak (weights at {p})", f"{p}_dense_tflops")
            * ctx.take(f"decode compute efficiency ({p})", f"decode_compute_efficiency.{p}")
            * at(p)
        )

    return {
        "kv_per_token": tuple(kv_tok),
        "attn_rate": tuple(attn),
        "prefill_attn_rate": tuple(prefill_attn),
        "gemm_rate": peak * eff * factor,
        "prefill_rate": peak * mfu * factor,
    }, rate_at


def _memory(ctx: ServingContext) -> dict:
    """Bytes per GPU for weights and KV: HBM less the workspace and the activations of one forward
    pass of ``max_num_tokens`` tokens; the KV cache gets a share of what the weights leave."""
    hbm = ctx.spec("HBM capacity", "hbm_gib")
    workspace = ctx.take("runtime workspace per GPU", "workspace_gb_per_gpu")
    _check_room(ctx, hbm, workspace)
    tokens = ctx.take("tokens per forward pass", "max_num_tokens")
    act = ctx.take("activation bytes per token and hidden unit", "activation_bytes_per_token_hidden")
    return {
        "hbm_bytes": hbm - workspace - tokens * ctx.model.hidden_size * act,
        "kv_fraction": ctx.take("KV-cache share of free memory", "kv_cache_free_fraction"),
    }


def _check_room(ctx: ServingContext, hbm: Any, workspace: Any) -> None:
    """An HBM capacity that the runtime workspace alone fills holds no model at any instance size:
    a value to fix (0.432 typed in TB for 432 GiB), named as an input error, not 'does not fit'."""
    import numpy as np

    if np.all(np.asarray(hbm) <= workspace):
        path = f"accelerators.{ctx.system.accelerator}.hbm_gib"
        raise InputError(
            f"{path} = {float(np.max(hbm)) / f.GIBI:g} GiB per GPU is no more than the serving runtime's "
            f"workspace ({float(np.min(workspace)) / f.GIGA:g} GB per GPU, serving.workspace_gb_per_gpu): "
            "no model fits on it; give the HBM capacity per GPU in GiB"
        )


def _bandwidth(ctx: ServingContext, st: Stack, precision: str) -> dict:
    """Achieved HBM rates: dense weights, the KV cache and the routed experts' grouped GEMM at the
    weights' precision (the last two default to the dense value of the same profile)."""
    hbm = ctx.spec("HBM bandwidth", "hbm_tb_per_s")
    dense = stacks.read(ctx, st, "decode HBM efficiency", "decode_hbm_efficiency", "decode_hbm_efficiency")
    rates = {"hbm_rate": hbm * dense}
    # the grouped GEMM's value holds at the precision it was measured or fitted at; another
    # precision runs other kernels and streams as the dense weights do (README "Serving stacks")
    experts = f"grouped_gemm_hbm_efficiency.{precision}"
    for key, field, label in (
        ("kv_rate", "attention_hbm_efficiency", "attention HBM efficiency (KV cache)"),
        ("expert_rate", experts, f"grouped-GEMM HBM efficiency (routed experts, {precision})"),
    ):
        eff = stacks.read(ctx, st, label, field, None)
        if eff is None:  # no separate measurement: the dense streaming efficiency
            dense_label = f"{label}: the dense value"
            eff = stacks.read(ctx, st, dense_label, "decode_hbm_efficiency", "decode_hbm_efficiency", field)
        rates[key] = hbm * eff
    return rates


def _links(ctx: ServingContext, st: Stack, precision: str) -> dict:
    up = ctx.spec("scale-up bandwidth (bidirectional)", "scale_up_gb_per_s_bidir") / 2
    out = ctx.inp.read(ctx.cat.scale_out_path(ctx.name), "scale-out bandwidth")
    eff = stacks.read(
        ctx, st, "scale-up link efficiency (serving)", "scale_up_link_efficiency", "scale_up_link_efficiency"
    )
    links = {
        "link_up": up * eff,
        "link_out": out * ctx.take("scale-out link efficiency (serving)", "scale_out_link_efficiency"),
        "latency_up": ctx.take("collective latency (scale-up)", "collective_latency_us_scale_up"),
        "latency_out": ctx.take("collective latency (scale-out)", "collective_latency_us_scale_out"),
    }
    combine = ctx.take("collective bytes per value", "collective_bytes_per_value")
    # a stack that quantizes a model's activations before the all-to-all (TensorRT-LLM, NVFP4)
    # dispatches at that width, unless the stack itself sets a dispatch width of its own
    quantized = f"quantized_dispatch_bytes_per_value.{precision}"
    # (TensorRT-LLM quantizes before the dispatch only an NVFP4 checkpoint's: `qm.has_nvfp4()`)
    mx = precision == "fp4" and ctx.model.fp4_scale_format != "nvfp4"
    if not mx and stacks.nearer(st, quantized, "dispatch_bytes_per_value"):
        label = f"expert dispatch bytes per value ({precision} weights, quantized before the all-to-all)"
        dispatch = stacks.read(ctx, st, label, quantized, None)
    else:
        label = "expert dispatch bytes per value"
        dispatch = stacks.read(ctx, st, label, "dispatch_bytes_per_value", "collective_bytes_per_value")
    return links | {
        "collective_bytes": combine,
        "a2a_bytes": (dispatch + combine) / 2.0,  # a dispatch and its combine, each at its own width
        "two_batch_overlap": stacks.two_batch_overlap(ctx, st),
        "overlap_sm_share": ctx.take("communication SMs while overlapped", "overlap_comm_sm_share"),
    }


def _capped_by_a_narrower_fit(ctx: ServingContext, st: Stack, precision: str, share):
    """A precision's routed experts run no faster, in FLOP/s, than the stack's fitted expert
    kernels at any narrower precision the accelerator runs: narrower weights can always run the
    wider kernels, upcast as they load (mixed-input grouped GEMMs: vLLM's AITER W4A8 experts take
    MXFP4 weights and FP8 activations on MI355X, `AiterW4A8ExpertsMonolithic`), so a wider fit
    above a narrower one says the two fits disagree, not that the wider weights serve faster. An
    unmeasured precision takes the reference, capped alike: without the cap SGLang on MI355X served
    MoE models faster at BF16 (the reference share 0.5) than at its fitted FP8 and FP4. A measured
    one is capped too since 2026-12-03: its FP8 fit (TP8 8k/1k sweeps) ran the experts at 472
    TFLOP/s where its MXFP4 fit (a wide-EP point) ran them at 403, so MI355X served DeepSeek-V3,
    Qwen3-235B and gpt-oss-120b slower at FP4 than at FP8 at maximum throughput (2,466 vs 2,550,
    3,467 vs 3,701, 14,189 vs 15,677 tokens/s per GPU, 1k/1k), against InferenceX's same-layout
    pair (TP8, FP4 ahead). The checking set chose the lower fit (README "How accurate is ipd").
    share(p) = min(share(p), share(q) x rate(q) / rate(p)) over the narrower fitted q, rate = dense
    peak x decode compute efficiency (x the stack's FP4 GEMM factor at FP4)."""
    from ipd_cli.catalog.schema import PRECISIONS

    narrower = PRECISIONS[: PRECISIONS.index(precision)]
    fitted = [
        q
        for q in narrower
        if stacks.first_setting(st, f"moe_compute_share.{q}") is not None
        and ctx.acc.dense_tflops(q) is not None
    ]
    if not fitted:
        return share
    fp4 = _fp4_factor(ctx, st)

    def rate(p: str) -> float:  # the stack's common GEMM factor cancels in the ratio
        peak = ctx.spec(f"{p} dense peak", f"{p}_dense_tflops")
        eff = ctx.take(f"decode compute efficiency ({p})", f"decode_compute_efficiency.{p}")
        return peak * eff * (fp4 if p == "fp4" else 1.0)

    for q in fitted:
        label = f"routed-expert share of dense compute efficiency ({q}; caps {precision}'s expert FLOP/s)"
        share_q = stacks.read(ctx, st, label, f"moe_compute_share.{q}", None)
        share = f.minimum(share, share_q * rate(q) / rate(precision))
    return share


def _moe(ctx: ServingContext, st: Stack, precision: str) -> dict:
    if not ctx.model.is_moe:
        one = 1.0
        return dict.fromkeys(
            (
                "moe_share",
                "prefill_moe_share",
                "pool_prefill_moe_share",
                "expert_imbalance",
                "expert_imbalance_eplb",
                "expert_reference_ep",
            ),
            one,
        ) | {"expert_reference_per_gpu": one, "eplb_slots": 0.0}
    # a profile's share holds at the precision it was fitted at; other precisions run other kernels
    # and take the reference for theirs (README "How accurate is ipd", AMD)
    at = f"moe_compute_share.{precision}"
    share = stacks.read(ctx, st, f"routed-expert share of dense compute efficiency ({precision})", at, at)
    share = _capped_by_a_narrower_fit(ctx, st, precision, share)
    prefill = stacks.read(
        ctx, st, "a prompt's routed-expert share of the prefill MFU", "prefill_moe_compute_share", None
    )
    prefill = share if prefill is None else prefill
    # a prefill instance's own share where the chain sets it no farther than a prompt's share (SGLang
    # on GB200 borrows TensorRT-LLM's profile but holds its own prompt share, fitted on prefill pools)
    pool = None
    if stacks.nearer(st, "prefill_pool_moe_compute_share", "prefill_moe_compute_share"):
        label = "a prefill instance's routed-expert share of the prefill MFU"
        pool = stacks.read(ctx, st, label, "prefill_pool_moe_compute_share", None)
    return {
        "moe_share": share,
        "prefill_moe_share": prefill,
        "pool_prefill_moe_share": prefill if pool is None else pool,
        "expert_imbalance": ctx.take("expert load imbalance (no EPLB)", "expert_imbalance"),
        "expert_imbalance_eplb": ctx.take("expert load imbalance (EPLB)", "expert_imbalance_eplb"),
        "expert_reference_ep": ctx.take("expert imbalance: reference EP", "expert_imbalance_reference_ep"),
        "expert_reference_per_gpu": ctx.take(
            "expert imbalance: reference experts per GPU", "expert_imbalance_reference_experts_per_gpu"
        ),
        "eplb_slots": ctx.take("EPLB redundant expert slots per GPU", "eplb_slots_per_gpu"),
    }


SPEC_OFF = "off"
SPEC_ON = "on"


def spec_method(ctx: ServingContext) -> str | None:
    """The draft for this model: a method that lists it, else the catalog's default."""
    return draft_method(ctx.cat, ctx.mname)


def draft_method(cat: Catalog, model: str) -> str | None:
    """The speculative method of ``model`` (its canonical name): one that lists it, else the
    catalog's default (None: neither)."""
    sv = cat.serving
    named = next((n for n, m in sv.speculative_methods.items() if model in m.models), None)
    if named is not None or sv.default_speculative_method is None:
        return named
    return sv.default_speculative_method.value


def _speculation(ctx: ServingContext, precision: str, pin, rates: Callable[[], tuple], attended: int) -> dict:
    """Draft depths to search (``pin``: None searches off and every depth with a measured
    acceptance, 'off' none, 'on' every depth, a number that depth), their tokens per step, and
    the draft's bytes and FLOPs per draft token (``rates``: :func:`_rates`, read where a draft needs them)."""
    off = {
        "spec_method": None,
        "spec_depths": (0,),
        "spec_tokens": (1.0,),
        "draft_layers": 0,
        "draft_pass_overhead_layers": 0.0,
        "draft_kv_share": 0.0,
        "draft_kv_heads": 1,
        "draft_attn_per_position": 0.0,
        "draft_head_flops_per_token": 0.0,
        "draft_prefill_attn_flops_per_token": 0.0,
        "draft_fc_bytes": 0.0,
        "draft_fc_flops_per_token": 0.0,
        "draft_heads": 0,
        "draft_dense_bytes": 0.0,
        "draft_expert_bytes": 0.0,
        "draft_dense_flops_per_token": 0.0,
        "draft_expert_flops_per_token": 0.0,
        "draft_replicated_bytes": 0.0,
        "draft_replicated_flops_per_token": 0.0,
    }
    name = spec_method(ctx)
    if pin == SPEC_OFF or pin == 0:
        ctx.trace.given("speculative decoding", "off", "", ctx.origin)
        return off
    if name is None:
        if pin is not None:
            raise InputError(f"no speculative decoding method in the catalog for {ctx.mname}")
        return off
    m = ctx.cat.serving.speculative_methods[name]
    deepest = max(m.tokens_per_step)
    if pin is None or pin == SPEC_ON:
        depths = tuple(range(0 if pin is None else 1, deepest + 1))
    else:
        if not isinstance(pin, int) or isinstance(pin, bool) or pin < 0:
            raise InputError(f"`speculative` is off, on or a draft depth (a whole number), got {pin!r}")
        if pin > deepest:
            raise InputError(
                f"`speculative` {pin}: {name} acceptance is measured up to {deepest} draft tokens per step; "
                f"give a depth of 1 to {deepest}, on or off"
            )
        depths = (pin,)
    src = ctx.cat.origin_of("serving", "speculative_methods", name)
    listed = ctx.mname in m.models
    note = (
        None
        if listed
        else f"no acceptance measured for {ctx.mname}'s published draft: the default method's (an estimate)"
        if ctx.mname in m.draft_shapes
        else f"no draft published for {ctx.mname}: the default method (an estimate)"
    )
    ctx.trace.given("speculative decoding method", name, "", src, note=note, estimate=note is not None)
    tokens = [1.0]
    for k in range(1, deepest + 1):
        label = f"{name}: tokens per step at draft depth {k}"
        path = f"serving.speculative_methods.{name}.tokens_per_step.{k}"
        tokens.append(ctx.inp.read(path, label, borrowed=note))
    draft = _draft(ctx, m, precision, name, rates, attended)
    label = "each draft pass: the kernels around its layers"
    draft["draft_pass_overhead_layers"] = ctx.take(label, "draft_pass_overhead_layers")
    return off | {"spec_method": name, "spec_depths": depths, "spec_tokens": tuple(tokens)} | draft


def _draft(
    ctx: ServingContext, m, precision: str, name: str, rates: Callable[[], tuple], attended: int
) -> dict:
    """Bytes, FLOPs and KV cache one draft token costs: ``draft_layers`` layers and the output
    head. An MTP layer has the target's shape (its routed experts are streamed like the target's,
    its KV cache is a target layer's) and is part of the target's checkpoint (what that keeps
    wider, it keeps there too); an EAGLE layer is a dense decoder layer of its own shape
    (:func:`_eagle_layer`: its parameters, its own KV heads), from a checkpoint of its own
    (``draft_weights``: its precision, BF16 as EAGLE-3 heads are published and their acceptance
    measured, and its head's reduced vocabulary), computed at that precision's GEMM rate. FLOPs
    are counted in the weights' precision's: a wider one's scaled by the ratio of the two GEMM
    rates."""
    arch, quiet = ctx.model, ctx.inp.quiet()  # read already (model terms): not recorded twice
    bpw = quiet.read(f"serving.bytes_per_weight.{precision}")
    src = ctx.cat.origin_of("serving", "speculative_methods", name)
    ctx.trace.given("draft layers per draft token", m.draft_layers, "layers", src)
    head = arch.vocab_size * arch.hidden_size
    if m.draft == "mtp":
        active = quiet.read(f"models.{ctx.mname}.active_params")
        n = m.draft_layers / arch.layers
        routed_active = routed_active_params(arch)
        wide = rates()[1]
        held, held_flops = _held_whole(
            ctx, precision, wide, m.draft_layers, wide.draft
        )  # MLA's, as the target's
        # a checkpoint that keeps the MTP layer wide (NVFP4 DeepSeek-R1's, BF16) holds it whole at
        # that precision: every parameter of it at the wide bytes and GEMM rate, the head as before
        factor = wide.flop_factor if wide.draft else 1.0
        dense_b, expert_b, _ = weight_split(arch, bpw + wide.extra_bytes * wide.draft)
        if wide.draft:
            wide = _Wide(head=wide.head, extra_bytes=wide.extra_bytes, flop_factor=wide.flop_factor)
        return {
            "draft_layers": m.draft_layers,
            "draft_kv_share": m.draft_layers / arch.kv_layers,  # its layers' share of the target's
            "draft_kv_heads": arch.kv_heads or 1,
            "draft_attn_per_position": m.draft_layers * _attn_per_position(arch),
            "draft_head_flops_per_token": 2.0 * head + wide.flops(0),
            "draft_fc_bytes": 0.0,
            "draft_fc_flops_per_token": 0.0,
            "draft_heads": arch.attention_heads,
            "draft_prefill_attn_flops_per_token": f.attention_flops_per_token_fwd(
                m.draft_layers,
                attended,
                arch.attention_heads * arch.qk_head_dim,
                arch.attention_heads * arch.head_dim,
            ),
            "draft_dense_bytes": dense_b * n + head * bpw + wide.bytes(m.draft_layers),
            "draft_expert_bytes": expert_b * n,
            "draft_dense_flops_per_token": 2.0 * ((active - routed_active) * n * factor + head)
            + wide.flops(m.draft_layers),
            "draft_expert_flops_per_token": 2.0 * routed_active * n * factor,
            "draft_replicated_bytes": held,
            "draft_replicated_flops_per_token": held_flops,
        }
    fc, body, kv_values, heads, kv_heads, head_dim = _eagle_layer(ctx, m, name)
    target_kv_values = kv_bytes_per_token(arch, 1.0)
    drafted = {
        "draft_layers": m.draft_layers,
        # the draft's own KV cache against the target's (all layers), and the draft's attention
        "draft_kv_share": m.draft_layers * kv_values / target_kv_values,
        "draft_kv_heads": kv_heads,
        "draft_heads": heads,
        "draft_attn_per_position": m.draft_layers * f.attention_flops_per_position(heads, head_dim),
        "draft_prefill_attn_flops_per_token": f.attention_flops_per_token_fwd(
            m.draft_layers, attended, heads * head_dim, heads * head_dim
        ),
    }
    flop_factor = 1.0
    dw = m.draft_weights
    if dw is not None:
        at = f"serving.speculative_methods.{name}.draft_weights"
        if dw.head_vocab is not None:
            ctx.trace.given(
                "draft head vocabulary", dw.head_vocab, "tokens", src, dw.note, f"{at}.head_vocab", dw.source
            )
            head = dw.head_vocab * arch.hidden_size
        ctx.trace.given(
            "draft weights' precision", dw.precision, "", src, dw.note, f"{at}.precision", dw.source
        )
        if dw.precision != precision:
            bpw = ctx.take(f"bytes per weight ({dw.precision})", f"bytes_per_weight.{dw.precision}")
            gemm, _, rate_at = rates()
            flop_factor = gemm["gemm_rate"] / rate_at(dw.precision)
    params = body + head  # per draft token; the fusing projection once a step
    return drafted | {
        "draft_head_flops_per_token": 2.0 * head * flop_factor,
        "draft_fc_bytes": fc * bpw,
        "draft_fc_flops_per_token": 2.0 * fc * flop_factor,
        "draft_dense_bytes": params * bpw,
        "draft_expert_bytes": 0.0,
        "draft_dense_flops_per_token": 2.0 * params * flop_factor,
        "draft_expert_flops_per_token": 0.0,
        "draft_replicated_bytes": 0.0,
        "draft_replicated_flops_per_token": 0.0,
    }


def _eagle_layer(ctx: ServingContext, m, name: str) -> tuple[float, float, float, int, int, int]:
    """An EAGLE-3 draft (SpecForge's ``LlamaForCausalLMEagle3``): its fusing projection's
    parameters (3 h x h over three target layers' states: SGLang runs it only on the pass those
    states feed, once a step), its layers' parameters (the first one's q, k and v read 2 h, the
    token's embedding beside the fused state; later layers read h), a layer's K/V values per
    token, its query heads, KV heads and head size; the embedding is the target's, shared. The
    published shape where ``draft_shapes`` holds one, else ``draft_shape_rule`` (an estimate):
    the target's query heads and head size, its KV heads (``kv_heads_over_latent`` on an MLA
    target), its dense FFN width (``ffn_hidden_per_hidden`` x hidden without one)."""
    arch, at = ctx.model, f"serving.speculative_methods.{name}"
    src = ctx.cat.origin_of("serving", "speculative_methods", name)
    shape = m.draft_shapes.get(ctx.mname)
    if shape is not None:
        path = f"{at}.draft_shapes.{ctx.mname}"

        def given(label: str, field: str, unit: str) -> int:
            value = getattr(shape, field)
            return ctx.trace.given(label, value, unit, src, shape.note, f"{path}.{field}", shape.source)

        ffn = given("draft FFN width", "ffn_hidden_size", "values")
        heads = given("draft query heads", "attention_heads", "heads")
        kv_heads = given("draft KV heads", "kv_heads", "heads")
        head_dim = given("draft head size", "head_dim", "values")
    else:
        rule = f"{at}.draft_shape_rule"
        note = (
            f"no EAGLE-3 draft published for {ctx.mname}: the target's attention and FFN width (an estimate)"
        )
        heads, head_dim = arch.attention_heads, arch.head_dim
        ctx.trace.given("draft query heads", heads, "heads", ctx.morigin, note=note, estimate=True)
        ctx.trace.given("draft head size", head_dim, "values", ctx.morigin, note=note, estimate=True)
        if arch.kv_lora_rank is not None:  # a whole number (a sampled draw of its range rounds)
            read = ctx.inp.read(f"{rule}.kv_heads_over_latent", "draft KV heads (MLA target)")
            kv_heads = max(1, round(read))
        else:
            kv_heads = ctx.trace.given(
                "draft KV heads", arch.kv_heads, "heads", ctx.morigin, note=note, estimate=True
            )
        if arch.ffn_hidden_size is not None:
            ffn = ctx.trace.given(
                "draft FFN width", arch.ffn_hidden_size, "values", ctx.morigin, note=note, estimate=True
            )
        else:
            ffn = (
                ctx.inp.read(f"{rule}.ffn_hidden_per_hidden", "draft FFN width over hidden")
                * arch.hidden_size
            )
    h = arch.hidden_size
    q, kv = heads * head_dim, kv_heads * head_dim
    layer = q * h + 3.0 * h * ffn  # the output projection and the SwiGLU MLP
    first = layer + 2.0 * h * (q + 2 * kv)  # q, k and v over 2 h
    later = layer + h * (q + 2 * kv)
    return 3.0 * h * h, first + (m.draft_layers - 1) * later, 2.0 * kv, heads, kv_heads, head_dim


def read(
    ctx: ServingContext,
    precision: str,
    kv_precisions: list[str],
    isl: int,
    osl: int,
    speculative,
    pricing: str,
    stack: str | None = None,
    prefix: int = 0,
    release: str | None = None,
) -> Physics:
    """Read every input once; ``ctx.trace`` records each with its source. ``speculative`` pins
    the draft depth (None: searched); ``stack`` names the serving stack (None: the family's
    default); ``prefix``: cached context tokens each request attends to (earlier turns);
    ``release``: the stack's release measured apart (None: the stack's profile alone)."""
    # a serving GPU at full load, or kept for the traffic around the clock: under tco its capital
    # spreads over every hour (utilisation 1), as a scenario's serving (a review: `serve --pricing
    # tco` priced Rubin's full-load tokens 16 % above compare's and above its own traffic figure)
    price, basis = usd_per_gpu_hour(ctx.inp, ctx.name, pricing, always_on=True)
    sv = ctx.cat.serving
    st = stacks.resolve(ctx, stack)
    # the release's own floor where it holds one fitted at this precision, else the stack's
    floor = stacks.release_floor(ctx, st, release, precision)
    if floor is None:
        label = "per-step overhead per layer"
        floor = stacks.read(ctx, st, label, "step_overhead_us_per_layer", "step_overhead_us_per_layer")
    # a disaggregated decode pool's floor where the profile (or one no farther along its chain than
    # the aggregated floor's) measured one: decode-only iterations, always captured; else the same
    dfloor = floor
    if stacks.nearer(st, "disaggregated_step_overhead_us_per_layer", "step_overhead_us_per_layer"):
        label = "per-step overhead per layer (disaggregated decode pool)"
        dfloor = stacks.read(ctx, st, label, "disaggregated_step_overhead_us_per_layer", None)
    # read in the order the trace lists them: the draft, the model, the rates (the draft of an MTP
    # layer reads the rates first, for what the checkpoint keeps wider)
    host, host_overlaps = stacks.host_per_sequence(ctx, st)
    rates = functools.cache(lambda: _rates(ctx, st, precision, kv_precisions))
    spec = _speculation(ctx, precision, speculative, rates, prefill_attention_length(isl, prefix))
    model = _model_terms(ctx, precision, isl, osl, prefix)
    gemm, wide, _ = rates()
    model["dense_bytes"] += wide.bytes(ctx.model.layers)
    model["dense_flops_per_token"] += wide.flops(ctx.model.layers)
    model["head_flops_per_token"] += wide.flops(0)  # the head's share of the wide FLOPs
    _trace_context(ctx, model["prefill_context_flops_per_token"], prefix)
    if wide.per_layer:  # the key-value up-projection is an attention projection kept wide (a
        # prompt's, attention_but_kv_up's too: the engine re-quantizes only decode's absorbed copy)
        model["prefill_context_flops_per_token"] *= wide.flop_factor
    # an MTP draft layer is an MLA layer of the target's shape: its prompt pass expands the cache too
    mtp = (
        spec["spec_method"] is not None
        and ctx.cat.serving.speculative_methods[spec["spec_method"]].draft == "mtp"
    )
    per_layer = model["prefill_context_flops_per_token"] / ctx.model.kv_layers
    model["draft_prefill_context_flops_per_token"] = per_layer * spec["draft_layers"] if mtp else 0.0
    model |= _replicated(ctx, precision, wide)
    return Physics(
        model=ctx.mname,
        system=ctx.name,
        precision=precision,
        kv_precisions=tuple(kv_precisions),
        isl=isl,
        osl=osl,
        prefix=prefix,
        stack=st.name,
        family=st.family,
        stack_borrowed_from=st.borrowed_from,
        stack_release=release,
        **spec,
        **model,
        **gemm,
        domain=ctx.system.scale_up_domain,
        **_memory(ctx),
        **_bandwidth(ctx, st, precision),
        **_links(ctx, st, precision),
        overhead_s=ctx.take("per-step overhead", "step_overhead_ms_scale_up"),
        overhead_per_layer_s=floor,
        disagg_overhead_per_layer_s=dfloor,
        floor_exponent=ctx.take("step floor exponent", "step_floor_exponent"),
        overhead_per_sequence_s=ctx.take("per-step overhead per sequence", "step_overhead_us_per_sequence"),
        host_per_sequence_s=host,
        host_overlaps=host_overlaps,
        adp_timeout_steps=stacks.attention_dp_context_timeout_steps(ctx, st),
        prompt_stall_s=stacks.prompt_stall_s(ctx, st, release, precision),
        **_moe(ctx, st, precision),
        dp_imbalance=ctx.take("attention data-parallel imbalance", "attention_dp_imbalance"),
        dp_reference_ranks=ctx.take(
            "attention imbalance: reference ranks", "attention_dp_imbalance_reference_ranks"
        ),
        instance_sizes=tuple(sv.instance_gpus),
        max_domains=int(ctx.take("largest instance (scale-up domains)", "max_instance_domains")),
        max_stage_domains=int(
            stacks.read(
                ctx,
                st,
                "widest decode stage (scale-up domains)",
                "max_decode_stage_domains",
                "max_decode_stage_domains",
            )
        ),
        max_stage_domains_of=_setting_of(st, "max_decode_stage_domains"),
        max_batch_per_rank=int(ctx.take("engine batch cap per rank", "max_batch_per_rank")),
        max_decode_instances=int(ctx.take("decode instances per pool tried", "max_decode_instances")),
        price=price,
        pricing=basis,
        kw_per_gpu=kw_per_gpu(ctx.inp, ctx.name),
        gpus_per_system=ctx.system.accelerators,
        pue=pue(ctx.inp),
    )


def _setting_of(st: Stack, field: str) -> str:
    """Whose profile sets ``field`` for the stack: '<stack> on <family>' of the first profile of
    its borrowing chain that sets it (SGLang on Blackwell: TensorRT-LLM's), else 'the reference'."""
    found = stacks.first_setting(st, field)
    return "the reference" if found is None else f"{found[0]} on {found[1]}"
