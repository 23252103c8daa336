"""Serving estimate: catalog models in, a :class:`ServeResult` or :class:`ServeCurveResult` out.

The model (closed form of rl-loop.md §7.2; the arithmetic is in :mod:`ipd_cli.engine.formulas`):

* Instance: g GPUs hold the weights at the serving precision plus the KV cache. Dense
  models are tensor parallel over the g GPUs; MoE models shard the routed experts over
  all g GPUs and run attention data parallel in groups (DEP; see :class:`_Layout`), each
  group keeping a copy of the dense weights. Sizes inside the scale-up domain first, then
  whole domains over the scale-out network. The smallest instance that holds the weights
  plus the KV of one full request is used, unless the caller fixes g (or asks for the
  size with the most tokens/s per GPU).
* Decode step at concurrency b and mean live context c = ISL + OSL/2: two rooflines that
  add because they run as separate kernels, weight GEMMs (read the dense weights and the
  experts some token picked; 2 x active FLOPs per token at the serving precision) and
  attention (read b x KV per token x c; attention FLOPs at the KV precision); plus the
  tensor/expert-parallel collectives over the scale-up link (the NIC beyond one domain)
  and a per-step overhead (fixed, plus a little per sequence).
* Prefill is compute-bound at a prefill MFU. TTFT is one request's prefill on its
  instance with no queueing. The prefills of the b requests take turns with the decode
  steps on the same instance (no prefill/decode disaggregation).
* KV capacity limits b: b_max = (usable HBM x g - weights) / (KV per token x (ISL + OSL)),
  capped by the engine's batch limit.
* Not modelled: hybrid models' recurrent (Mamba) state and sliding-window KV; expert
  load imbalance; prefix caching; pipeline parallelism; the extra verification work of
  speculative decoding at large batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.schema import PRECISIONS, Accelerator, Model, System
from ipd_cli.errors import InfeasibleError, InputError

from . import formulas as f
from .inputs import Inputs
from .pretraining import MAX_GPUS
from .pricing import kw_per_gpu, pue, usd_per_gpu_hour
from .results import ServeCurveResult, ServeResult, Serving
from .trace import Trace

CLI = "command line"
MS = 1e3
INSTANCE_CHOICES = ("smallest", "best")
FIXED = "fixed by the caller"


@dataclass(frozen=True)
class _Instance:
    """Plain numbers for one model on one instance: enough to evaluate any concurrency."""

    model: str
    precision: str
    kv_precision: str
    gpus: int
    input_tokens: int
    output_tokens: int
    dense_weight_bytes: float
    expert_weight_bytes: float
    expert_fraction: float
    dense_replicas: int  # copies of the dense weights: one per attention group
    attention_tp: int
    parallelism: str
    kv_per_token: float
    kv_copies: float  # KV repeated across tensor-parallel ranks when they outnumber KV heads
    context_mean: float
    hbm_rate: float  # achieved bytes/s of the whole instance
    gemm_rate: float  # achieved FLOP/s of the instance in weight GEMMs
    attn_rate: float  # achieved FLOP/s of the instance in attention
    gemm_flops_per_token: float
    attn_flops_per_token: float
    collective_bytes_per_token: float  # per GPU and step, per sequence
    link_rate: float  # achieved bytes/s per GPU and direction
    overhead_s: float
    overhead_per_sequence_s: float
    prefill_s: float
    speculative: float
    max_batch: int
    price: float
    pricing: str
    kw_per_gpu: float
    pue: float

    @property
    def weight_bytes(self) -> float:
        return f.stored_weight_bytes(self.dense_weight_bytes, self.expert_weight_bytes, self.dense_replicas)


@dataclass(frozen=True)
class _Ctx:
    """What every helper needs: the catalog, the resolved names, and where values come from."""

    cat: Catalog
    name: str
    system: System
    acc: Accelerator
    mname: str
    model: Model
    trace: Trace
    origin: str  # workload file or command line

    @property
    def sorigin(self) -> str:
        return self.cat.origin("systems", self.name)

    @property
    def morigin(self) -> str:
        return self.cat.origin("models", self.mname)

    @property
    def vorigin(self) -> str:
        return self.cat.origin("serving", "decode_hbm_efficiency")

    @property
    def inp(self) -> Inputs:
        return Inputs(self.cat, self.trace)

    def take(self, label: str, field: str):
        """``serving.<field>`` (dotted into dicts: ``prefill_mfu.fp8``), in SI units, traced."""
        return self.inp.read(f"serving.{field}", label)

    def spec(self, label: str, field: str):
        """``accelerators.<accelerator>.<field>``, in SI units, traced."""
        return self.inp.read(f"accelerators.{self.system.accelerator}.{field}", label)

    def arch(self, label: str, field: str):
        """``models.<model>.<field>``, traced."""
        return self.inp.read(f"models.{self.mname}.{field}", label)


def _context(cat: Catalog, hardware: str, model: str, origin: str) -> _Ctx:
    system = cat.system(hardware)
    name = cat.canonical("systems", hardware)
    return _Ctx(
        cat=cat,
        name=name,
        system=system,
        acc=cat.accelerator_of(system),
        mname=cat.canonical("models", model),
        model=cat.model(model),
        trace=Trace(cat.sources),
        origin=origin,
    )


# --- precisions and request shape ----------------------------------------------------------------


def _wider(a: str, b: str) -> str:
    """The wider of two precisions (fp4 < fp8 < bf16)."""
    return a if PRECISIONS.index(a) >= PRECISIONS.index(b) else b


def _check_precision(ctx: _Ctx, precision: str, flag: str) -> None:
    if precision not in PRECISIONS:
        raise InputError(f"unknown {flag} '{precision}'; choose one of {', '.join(PRECISIONS)}")
    if ctx.acc.dense_tflops(precision) is None:
        wider = next(p for p in PRECISIONS[PRECISIONS.index(precision) :] if ctx.acc.dense_tflops(p))
        raise InputError(
            f"{ctx.name} has no {precision} support (no dense {precision} figure); use {flag} {wider}"
        )


def _supported(ctx: _Ctx, precision: str) -> str:
    """``precision``, or the next wider one the accelerator has a dense figure for (A100: no fp8)."""
    return next((p for p in PRECISIONS[PRECISIONS.index(precision) :] if ctx.acc.dense_tflops(p)), precision)


def _precisions(ctx: _Ctx, precision: str | None, kv_precision: str | None) -> tuple[str, str]:
    sv = ctx.cat.serving
    # an asked-for precision the hardware lacks is an error; the catalog default adapts to it
    used = (
        precision or _supported(ctx, sv.default_precision),
        kv_precision or _supported(ctx, sv.default_kv_precision),
    )
    ctx.trace.given("serving precision", used[0], "", ctx.origin if precision else ctx.vorigin)
    ctx.trace.given("KV-cache precision", used[1], "", ctx.origin if kv_precision else ctx.vorigin)
    _check_precision(ctx, used[0], "--precision")
    _check_precision(ctx, used[1], "--kv-precision")
    return used


def _request_shape(ctx: _Ctx, input_tokens: int | None, output_tokens: int | None) -> tuple[int, int]:
    sv = ctx.cat.serving
    isl = int(input_tokens if input_tokens is not None else sv.default_input_tokens)
    osl = int(output_tokens if output_tokens is not None else sv.default_output_tokens)
    if isl <= 0 or osl <= 0:
        raise InputError(f"input and output tokens must be > 0, got {isl} and {osl}")
    if isl + osl > ctx.model.max_context:
        raise InputError(f"{ctx.mname} holds at most {ctx.model.max_context} tokens; got {isl} + {osl}")
    src = ctx.origin if input_tokens is not None else ctx.vorigin
    ctx.trace.given("input tokens per request", isl, "tokens", src)
    src = ctx.origin if output_tokens is not None else ctx.vorigin
    ctx.trace.given("output tokens per request", osl, "tokens", src)
    return isl, osl


def _speculative(ctx: _Ctx, speculative: float | None) -> float:
    if speculative is None:
        return ctx.take("speculative speedup", "speculative_speedup")
    if speculative < 1:
        raise InputError(f"speculative speedup must be >= 1, got {speculative}")
    return ctx.trace.given("speculative speedup", speculative, "tokens/step", ctx.origin)


# --- model memory and instance size --------------------------------------------------------------


def kv_bytes_per_token(arch: Model, kv_bytes: float) -> float:
    """KV-cache bytes per token of context: MLA latent + RoPE key, or GQA keys and values."""
    if arch.kv_lora_rank is not None:
        return f.kv_bytes_per_token_mla(
            arch.kv_layers, arch.kv_lora_rank, arch.qk_rope_head_dim or 0, kv_bytes
        )
    return f.kv_bytes_per_token_gqa(arch.kv_layers, arch.kv_heads, arch.head_dim, kv_bytes)


def weight_split(arch: Model, bytes_per_weight: float) -> tuple[float, float, float]:
    """(dense bytes, routed-expert bytes, k/E); shared experts count as dense."""
    if not arch.is_moe:
        return arch.total_params * bytes_per_weight, 0.0, 1.0
    k_over_e = arch.experts_per_token / arch.experts
    routed = f.minimum(
        f.routed_expert_params(arch.total_params, arch.active_params, k_over_e), arch.total_params
    )
    return (arch.total_params - routed) * bytes_per_weight, routed * bytes_per_weight, k_over_e


@dataclass(frozen=True)
class _Layout:
    """How an instance splits the model.

    Dense models: tensor parallel over all g GPUs. MoE models: experts sharded over all g
    GPUs (expert parallel), attention and the other dense weights tensor parallel in groups
    of ``attention_tp`` GPUs and data parallel across the groups: DEP when attention_tp = 1,
    as TensorRT-LLM's perf overview runs every MoE model and DeepSeek runs its decode units
    (DP attention + EP144). Each group keeps a copy of the dense weights.
    """

    gpus: int
    attention_tp: int
    moe: bool
    kv_heads: int  # 1 for MLA (one latent shared by all heads)

    @property
    def dense_replicas(self) -> int:
        return self.gpus // self.attention_tp

    @property
    def kv_copies(self) -> float:
        return f.kv_copies(self.attention_tp, self.kv_heads)

    @property
    def name(self) -> str:
        if not self.moe:
            return "tp"
        return "dep" if self.attention_tp == 1 else "tp-attention+ep"


def attention_groups(arch: Model, gpus: int) -> list[int]:
    """Attention tensor-parallel group sizes for an instance: all g GPUs for dense models;
    1, 2, 4, ... up to g for MoE models (1 = DEP)."""
    if not arch.is_moe:
        return [gpus]
    sizes = [t for t in (1 << i for i in range(gpus.bit_length())) if gpus % t == 0 and t < gpus]
    return [*sizes, gpus]


def _candidates(cat: Catalog, system: System) -> list[int]:
    """Instance sizes tried: the catalog's sizes inside one domain, then whole domains."""
    domain = system.scale_up_domain
    inside = [g for g in cat.serving.instance_gpus if g < domain] + [domain]
    return inside + [k * domain for k in range(2, int(cat.serving.max_instance_domains.value) + 1)]


@dataclass(frozen=True)
class _Memory:
    """What must fit: the weights at one precision and the KV of one full request."""

    arch: Model
    precision: str
    dense_bytes: float
    expert_bytes: float
    kv_request: float
    usable_per_gpu: float

    def need(self, layout: _Layout) -> float:
        stored = f.stored_weight_bytes(self.dense_bytes, self.expert_bytes, layout.dense_replicas)
        return stored + self.kv_request * layout.kv_copies

    def layouts(self, gpus: int) -> list[_Layout]:
        kv_heads = self.arch.kv_heads or 1
        return [_Layout(gpus, t, self.arch.is_moe, kv_heads) for t in attention_groups(self.arch, gpus)]

    def layout(self, gpus: int, attention_tp: int | None = None) -> _Layout | None:
        """The given attention group, or the most data-parallel one, if weights + one request's KV fit."""
        fits = (
            lay
            for lay in self.layouts(gpus)
            if attention_tp in (None, lay.attention_tp) and gpus * self.usable_per_gpu >= self.need(lay)
        )
        return next(fits, None)

    def smallest(self, cat: Catalog, system: System) -> _Layout | None:
        found = (self.layout(g) for g in _candidates(cat, system))
        return next((lay for lay in found if lay), None)


def _narrower_hint(ctx: _Ctx, mem: _Memory) -> str:
    """The nearest feasible option: a narrower precision the GPU supports, and its instance size."""
    for p in PRECISIONS[: PRECISIONS.index(mem.precision)][::-1]:
        if ctx.acc.dense_tflops(p) is None:
            continue
        dense, expert, _ = weight_split(ctx.model, ctx.cat.serving.bytes_per_weight[p].value)
        narrower = _Memory(ctx.model, p, dense, expert, mem.kv_request, mem.usable_per_gpu)
        fit = narrower.smallest(ctx.cat, ctx.system)
        if fit:
            return f"--precision {p} fits on {fit.gpus} GPUs"
    return "use a system with more HBM per GPU or a smaller model"


def _usable_hbm(ctx: _Ctx) -> float:
    """Bytes per GPU the engine holds for weights and KV."""
    per_gpu = ctx.spec("HBM capacity", "hbm_gb")
    return per_gpu * ctx.take("usable HBM share (serving)", "hbm_usable_fraction")


def _instance_layout(
    ctx: _Ctx, forced: int | None, mem: _Memory, note: str, attention_tp: int | None = None
) -> _Layout:
    """The forced instance, or the smallest candidate that holds weights + one request's KV;
    with ``attention_tp``, that attention group size."""

    def what(gpus: int) -> str:
        least = min(mem.need(lay) for lay in mem.layouts(gpus))
        held = gpus * mem.usable_per_gpu
        return (
            f"{ctx.mname} at {mem.precision} needs {least / f.GIGA:,.0f} GB on {gpus} {ctx.name} GPUs "
            f"(weights + the KV of one request); they hold {held / f.GIGA:,.0f} GB usable"
        )

    if forced is not None:
        _check_instance(forced, ctx.system)
        if mem.layout(forced) is None:
            fit = mem.smallest(ctx.cat, ctx.system)
            hint = f"the smallest instance that fits is {fit.gpus} GPUs" if fit else _narrower_hint(ctx, mem)
            raise InfeasibleError(f"{what(forced)}; {hint}")
        gpus, src = forced, ctx.origin if note == FIXED else ctx.sorigin
    else:
        smallest = mem.smallest(ctx.cat, ctx.system)
        if smallest is None:
            largest = _candidates(ctx.cat, ctx.system)[-1]
            raise InfeasibleError(f"{what(largest)} (the largest instance tried); {_narrower_hint(ctx, mem)}")
        gpus, src = smallest.gpus, ctx.sorigin
        note = "smallest that holds the weights + the KV of one request"
    groups = attention_groups(ctx.model, gpus)
    if attention_tp is not None and attention_tp not in groups:
        raise InputError(
            f"attention group of {attention_tp} GPUs on a {gpus}-GPU instance of {ctx.mname}: "
            f"choose one of {', '.join(map(str, groups))}"
        )
    layout = mem.layout(gpus, attention_tp)
    if layout is None:
        raise InfeasibleError(f"attention groups of {attention_tp} GPUs do not fit on {gpus} {ctx.name} GPUs")
    ctx.trace.given("instance size", gpus, "GPUs", src, note=note)
    return layout


def _check_instance(gpus: int, system: System) -> None:
    domain = system.scale_up_domain
    if gpus < 1 or (gpus > domain and gpus % domain):
        raise InputError(
            f"instance of {gpus} GPUs: give 1-{domain} GPUs (one scale-up domain) "
            f"or a multiple of {domain} (whole domains over the scale-out network)"
        )


def _collective_per_sequence(arch: Model, layout: _Layout, bytes_per_value: float) -> float:
    """Bytes each GPU sends per decode step, per sequence of the instance's batch."""
    g, h, layers = layout.gpus, arch.hidden_size, arch.layers
    if not layout.moe:
        return f.tp_collective_bytes_per_gpu(1.0, h, layers, bytes_per_value, g)
    group_tokens = layout.attention_tp / g  # each attention group holds this share of the batch
    attention = f.allreduce_bytes_per_gpu(group_tokens, h, layers, bytes_per_value, layout.attention_tp)
    experts = f.ep_collective_bytes_per_gpu(1.0, h, layers, arch.experts_per_token, bytes_per_value, g)
    return attention + experts


# --- rates ---------------------------------------------------------------------------------------


def _link(ctx: _Ctx, gpus: int) -> tuple[float, float]:
    """(achieved bytes/s per GPU and direction, per-step overhead s) for the instance's collectives."""
    if gpus > ctx.system.scale_up_domain:
        link = ctx.spec("scale-out bandwidth", "scale_out_gbit_per_s")
        link *= ctx.take("scale-out link efficiency (serving)", "scale_out_link_efficiency")
        return link, ctx.take("per-step overhead (multi-domain)", "step_overhead_ms_scale_out")
    link = ctx.spec("scale-up bandwidth (bidirectional)", "scale_up_gb_per_s_bidir")
    link *= ctx.take("scale-up link efficiency (serving)", "scale_up_link_efficiency") / 2
    return link, ctx.take("per-step overhead (one domain)", "step_overhead_ms_scale_up")


def _compute_rates(ctx: _Ctx, precision: str, kv_precision: str, gpus: int) -> tuple[float, float, float]:
    """(GEMM FLOP/s, attention FLOP/s, prefill FLOP/s) achieved by the whole instance."""
    peak = ctx.spec(f"{precision} dense peak", f"{precision}_dense_tflops")
    attn_p = _supported(ctx, _wider(kv_precision, ctx.cat.serving.attention_min_precision))
    attn_peak = peak
    if attn_p != precision:
        attn_peak = ctx.spec(f"{attn_p} dense peak (attention)", f"{attn_p}_dense_tflops")
    table = "decode_compute_efficiency"
    gemm_eff = ctx.take(f"decode compute efficiency ({precision})", f"{table}.{precision}")
    attn_eff = gemm_eff
    if attn_p != precision:
        attn_eff = ctx.take(f"decode compute efficiency ({attn_p}, attention)", f"{table}.{attn_p}")
    mfu = ctx.take(f"prefill MFU ({precision})", f"prefill_mfu.{precision}")
    if ctx.model.is_moe:
        moe = ctx.take("MoE share of dense compute efficiency", "moe_compute_share")
        gemm_eff, mfu = gemm_eff * moe, mfu * moe
    return gpus * peak * gemm_eff, gpus * attn_peak * attn_eff, gpus * peak * mfu


def _instance(
    ctx: _Ctx,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    precision: str | None = None,
    kv_precision: str | None = None,
    instance_gpus: int | None = None,
    speculative: float | None = None,
    pricing: str = "rental",
    instance_note: str = FIXED,
    attention_tp: int | None = None,
) -> _Instance:
    arch = ctx.model
    precision, kv_precision = _precisions(ctx, precision, kv_precision)
    isl, osl = _request_shape(ctx, input_tokens, output_tokens)
    spec = _speculative(ctx, speculative)
    bpw = ctx.take(f"bytes per weight ({precision})", f"bytes_per_weight.{precision}")
    kvb = ctx.take(f"KV bytes per value ({kv_precision})", f"kv_bytes_per_value.{kv_precision}")
    ctx.arch("total parameters", "total_params")
    ctx.arch("active parameters", "active_params")
    ctx.trace.given("layers with a growing KV cache", arch.kv_layers, "layers", ctx.morigin)
    dense_b, expert_b, k_over_e = weight_split(arch, bpw)
    kv_tok = kv_bytes_per_token(arch, kvb)
    usable_per_gpu = _usable_hbm(ctx)
    mem = _Memory(arch, precision, dense_b, expert_b, kv_tok * (isl + osl), usable_per_gpu)
    layout = _instance_layout(ctx, instance_gpus, mem, instance_note, attention_tp)
    gpus = layout.gpus
    if layout.moe:
        ctx.trace.given("attention tensor-parallel group", layout.attention_tp, "GPUs", ctx.sorigin)
    link, overhead = _link(ctx, gpus)
    act_bytes = ctx.take("collective bytes per value", "collective_bytes_per_value")
    gemm_rate, attn_rate, prefill_rate = _compute_rates(ctx, precision, kv_precision, gpus)
    hbm = ctx.spec("HBM bandwidth", "hbm_tb_per_s")
    hbm *= ctx.take("decode HBM efficiency", "decode_hbm_efficiency")
    stored = f.stored_weight_bytes(dense_b, expert_b, layout.dense_replicas)
    kv_max = int(f.max_concurrency(usable_per_gpu, gpus, stored, kv_tok * layout.kv_copies, isl + osl))
    cap = int(ctx.take("engine batch cap", "max_batch_per_instance"))
    context_mean = isl + osl / 2
    per_position = f.attention_flops_per_position(
        arch.attention_heads, arch.head_dim, arch.kv_lora_rank or 0, arch.qk_rope_head_dim or 0
    )
    pf_flops = f.prefill_flops_per_token(
        arch.active_params, arch.kv_layers, arch.attention_heads * arch.head_dim, isl
    )
    price, basis = usd_per_gpu_hour(ctx.inp, ctx.name, pricing)
    return _Instance(
        model=ctx.mname,
        precision=precision,
        kv_precision=kv_precision,
        gpus=gpus,
        input_tokens=isl,
        output_tokens=osl,
        dense_weight_bytes=dense_b,
        expert_weight_bytes=expert_b,
        expert_fraction=k_over_e,
        dense_replicas=layout.dense_replicas,
        attention_tp=layout.attention_tp,
        parallelism=layout.name,
        kv_per_token=kv_tok,
        kv_copies=layout.kv_copies,
        context_mean=context_mean,
        hbm_rate=gpus * hbm,
        gemm_rate=gemm_rate,
        attn_rate=attn_rate,
        gemm_flops_per_token=2.0 * arch.active_params,
        attn_flops_per_token=arch.kv_layers * per_position * context_mean,
        collective_bytes_per_token=_collective_per_sequence(arch, layout, act_bytes),
        link_rate=link,
        overhead_s=overhead,
        overhead_per_sequence_s=ctx.take("per-step overhead per sequence", "step_overhead_us_per_sequence"),
        prefill_s=f.prefill_seconds(isl, pf_flops, prefill_rate),
        speculative=spec,
        max_batch=min(kv_max, cap),
        price=price,
        pricing=basis,
        kw_per_gpu=kw_per_gpu(ctx.inp, ctx.name),
        pue=pue(ctx.inp),
    )


# --- operating points ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Step:
    seconds: float
    weight_s: float
    attention_s: float
    memory_s: float
    compute_s: float
    collective_s: float
    overhead_s: float


def _step(inst: _Instance, batch) -> _Step:
    """One decode step at ``batch`` sequences (the formulas also take numpy arrays of batches)."""
    touched = f.experts_touched_share(batch, inst.expert_fraction)
    weight_bytes = f.decode_weight_bytes(
        inst.dense_weight_bytes, inst.expert_weight_bytes, touched, inst.dense_replicas
    )
    kv_bytes = f.decode_kv_bytes(batch, inst.kv_per_token * inst.kv_copies, inst.context_mean)
    gemm_flops = batch * inst.gemm_flops_per_token
    attn_flops = batch * inst.attn_flops_per_token
    weight_s = f.roofline_seconds(weight_bytes, gemm_flops, inst.hbm_rate, inst.gemm_rate)
    attention_s = f.roofline_seconds(kv_bytes, attn_flops, inst.hbm_rate, inst.attn_rate)
    collective_s = batch * inst.collective_bytes_per_token / inst.link_rate
    # each attention group schedules its own share of the batch, in parallel with the others
    group_batch = batch * inst.attention_tp / inst.gpus
    overhead_s = f.step_overhead_seconds(inst.overhead_s, inst.overhead_per_sequence_s, group_batch)
    return _Step(
        seconds=f.decode_step_seconds(weight_s, attention_s, collective_s, overhead_s),
        weight_s=weight_s,
        attention_s=attention_s,
        memory_s=(weight_bytes + kv_bytes) / inst.hbm_rate,
        compute_s=gemm_flops / inst.gemm_rate + attn_flops / inst.attn_rate,
        collective_s=collective_s,
        overhead_s=overhead_s,
    )


def _speed(inst: _Instance, batch: int) -> float:
    return inst.speculative / _step(inst, batch).seconds


def _batch_for_target(inst: _Instance, target: float) -> int | None:
    """Largest concurrency whose per-user speed meets ``target`` (speed falls with batch); None if
    even one sequence is too slow."""
    if _speed(inst, 1) < target:
        return None
    lo, hi = 1, inst.max_batch
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _speed(inst, mid) >= target:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _point(inst: _Instance, batch: int, operating_point: str, **extra) -> Serving:
    step = _step(inst, batch)
    per_instance = f.instance_output_tokens_per_s(
        batch, inst.output_tokens, inst.prefill_s, step.seconds, inst.speculative
    )
    per_gpu = per_instance / inst.gpus
    total_per_gpu = per_gpu * (inst.input_tokens + inst.output_tokens) / inst.output_tokens
    prefill_time = batch * inst.prefill_s
    decode_time = inst.output_tokens * step.seconds / inst.speculative
    return Serving(
        tokens_per_s_per_gpu=per_gpu,
        tokens_per_s_per_user=inst.speculative / step.seconds,
        ttft_s=inst.prefill_s,
        tpot_ms=MS * step.seconds / inst.speculative,
        usd_per_million_output_tokens=f.usd_per_million_tokens(inst.price, per_gpu),
        usd_per_million_total_tokens=f.usd_per_million_tokens(inst.price, total_per_gpu),
        tokens_per_s_per_mw=f.tokens_per_s_per_mw(per_gpu, inst.kw_per_gpu, inst.pue),
        instance_gpus=inst.gpus,
        concurrency=batch,
        model=inst.model,
        parallelism=inst.parallelism,
        attention_tp=inst.attention_tp,
        precision=inst.precision,
        kv_precision=inst.kv_precision,
        input_tokens=inst.input_tokens,
        output_tokens=inst.output_tokens,
        operating_point=operating_point,
        max_concurrency=inst.max_batch,
        kv_bytes_per_token=inst.kv_per_token,
        weight_gb_per_instance=inst.weight_bytes / f.GIGA,
        decode_bound="memory" if step.memory_s >= step.compute_s else "compute",
        step_time_ms=MS * step.seconds,
        memory_time_ms=MS * step.memory_s,
        compute_time_ms=MS * step.compute_s,
        collective_time_ms=MS * step.collective_s,
        overhead_ms=MS * step.overhead_s,
        experts_touched_share=f.experts_touched_share(batch, inst.expert_fraction),
        prefill_share=prefill_time / (prefill_time + decode_time),
        total_tokens_per_s_per_gpu=total_per_gpu,
        speculative_speedup=inst.speculative,
        price_usd_per_gpu_hour=inst.price,
        pricing=inst.pricing,
        kw_per_gpu=inst.kw_per_gpu,
        **extra,
    )


def _require_capacity(inst: _Instance, name: str) -> None:
    if inst.max_batch < 1:
        raise InfeasibleError(
            f"{inst.model} on {inst.gpus} {name} GPUs leaves no room for the KV of one "
            f"{inst.input_tokens + inst.output_tokens}-token request; use a larger instance"
        )


def _operating_point(
    ctx: _Ctx, inst: _Instance, concurrency: int | None, tokens_per_user_s: float | None
) -> Serving:
    if concurrency is not None:
        if concurrency < 1:
            raise InputError(f"--concurrency must be >= 1, got {concurrency}")
        if concurrency > inst.max_batch:
            raise InfeasibleError(
                f"concurrency {concurrency} does not fit: a {inst.gpus}-GPU {ctx.name} instance holds at "
                f"most {inst.max_batch} requests of {inst.input_tokens + inst.output_tokens} tokens (KV "
                f"capacity, engine batch cap); use --concurrency {inst.max_batch} or a larger instance"
            )
        ctx.trace.given("concurrency", concurrency, "sequences per instance", ctx.origin)
        return _point(inst, concurrency, "concurrency")
    if tokens_per_user_s is not None:
        if not (math.isfinite(tokens_per_user_s) and tokens_per_user_s > 0):
            raise InputError(f"`tokens_per_user_s` must be a finite number > 0, got {tokens_per_user_s}")
        ctx.trace.given("target speed per user", tokens_per_user_s, "tokens/s", ctx.origin)
        found = _batch_for_target(inst, tokens_per_user_s)
        extra = {"target_tokens_per_s_per_user": tokens_per_user_s, "target_met": found is not None}
        return _point(inst, found or 1, "target", **extra)
    return _point(inst, inst.max_batch, "max-throughput")


def _traffic(
    ctx: _Ctx,
    inst: _Instance,
    point: Serving,
    requests_per_s: float | None,
    output_tokens_per_day: float | None,
) -> Serving:
    if requests_per_s is not None and output_tokens_per_day is not None:
        raise InputError("give at most one of requests/s or output tokens/day")
    given = "output_tokens_per_day" if output_tokens_per_day is not None else "requests_per_s"
    if output_tokens_per_day is not None:
        if not (math.isfinite(output_tokens_per_day) and output_tokens_per_day > 0):
            raise InputError(
                f"`output_tokens_per_day` must be a finite number > 0, got {output_tokens_per_day}"
            )
        ctx.trace.given("traffic", output_tokens_per_day, "output tokens/day", ctx.origin)
        requests_per_s = output_tokens_per_day / f.SECONDS_PER_DAY / inst.output_tokens
    elif requests_per_s is not None:
        if not (math.isfinite(requests_per_s) and requests_per_s > 0):
            raise InputError(f"`requests_per_s` must be a finite number > 0, got {requests_per_s}")
        ctx.trace.given("traffic", requests_per_s, "requests/s", ctx.origin)
    else:
        return point
    per_instance = point.tokens_per_s_per_gpu * inst.gpus
    need = f.ceil(requests_per_s * inst.output_tokens / per_instance) * inst.gpus
    if not need <= MAX_GPUS:  # NaN or inf as well: the traffic is beyond any cluster
        value = output_tokens_per_day if given == "output_tokens_per_day" else requests_per_s
        count = f"{need:,.3g} {ctx.name} GPUs, more than {MAX_GPUS:,}"
        if not math.isfinite(need):
            count = f"more than {MAX_GPUS:,} {ctx.name} GPUs (the count overflows)"
        raise InputError(f"`{given}` {value:g} needs {count}; give a traffic a cluster can serve")
    instances = int(need) // inst.gpus
    return point.model_copy(
        update={
            "gpus_for_traffic": instances * inst.gpus,
            "instances_for_traffic": instances,
            "traffic_requests_per_s": requests_per_s,
        }
    )


def _choose(
    ctx: _Ctx,
    build,
    gpus: int | None,
    attention_tp: int | None,
    instance: str,
    concurrency: int | None,
    target: float | None,
) -> tuple[int, int, str]:
    """(instance GPUs, attention group, note): the fixed size, the smallest that fits or every
    candidate ("best"); among those and their attention groups (or the fixed one), the one with
    the most output tokens/s per GPU at the operating point (one that meets the target first)."""
    quiet = replace(ctx, trace=ctx.trace.quiet())
    first = build(quiet, gpus, attention_tp=attention_tp)  # the user-facing error when nothing fits
    sizes = _candidates(ctx.cat, ctx.system) if gpus is None and instance == "best" else [first.gpus]
    best: tuple[tuple[bool, float], int, int] | None = None
    for g in sizes:
        groups = attention_groups(ctx.model, g)
        if attention_tp is not None:
            groups = [attention_tp] if attention_tp in groups else []
        for t in groups:
            try:
                inst = build(quiet, g, attention_tp=t)
                _require_capacity(inst, ctx.name)
                point = _operating_point(quiet, inst, concurrency, target)
            except InfeasibleError:
                continue
            score = (point.target_met is not False, point.tokens_per_s_per_gpu)
            if best is None or score > best[0]:
                best = (score, g, t)
    if gpus is not None:
        note = FIXED
    elif instance == "best":
        note = "the size with the most output tokens/s per GPU at this operating point"
    else:
        note = "smallest that holds the weights + the KV of one request"
    if best is None:  # nothing runs at this operating point: the caller's build raises why
        return first.gpus, first.attention_tp, note
    return best[1], best[2], note


def _builder(**shape):
    """``build(ctx, gpus, note, attention_tp)``: an instance of the given shape and precision."""

    def build(c: _Ctx, gpus: int | None, note: str = FIXED, attention_tp=None) -> _Instance:
        return _instance(c, instance_gpus=gpus, instance_note=note, attention_tp=attention_tp, **shape)

    return build


def _check_choice(instance: str) -> None:
    if instance not in INSTANCE_CHOICES:
        raise InputError(f"unknown instance choice '{instance}'; choose one of {', '.join(INSTANCE_CHOICES)}")


# --- public API ----------------------------------------------------------------------------------


def estimate_serving(
    cat: Catalog,
    hardware: str,
    model: str,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    precision: str | None = None,
    kv_precision: str | None = None,
    concurrency: int | None = None,
    tokens_per_user_s: float | None = None,
    instance_gpus: int | None = None,
    attention_tp: int | None = None,
    instance: str = "smallest",
    speculative: float | None = None,
    requests_per_s: float | None = None,
    output_tokens_per_day: float | None = None,
    pricing: str = "rental",
    origin: str = CLI,
) -> ServeResult:
    """Serve ``model`` on ``hardware`` at one operating point.

    Give at most one of ``concurrency`` (sequences per instance) or ``tokens_per_user_s``
    (the largest concurrency whose decode speed meets it; a target out of reach is
    reported with ``target_met`` false at concurrency 1). With neither, the point is
    maximum throughput: the KV-capacity limit. A traffic level (``requests_per_s`` or
    ``output_tokens_per_day``) adds the GPUs needed to serve it at that point.

    The instance is ``instance_gpus`` when given; else ``instance="smallest"`` takes the
    smallest size that holds the weights and one request's KV, and ``instance="best"``
    the size with the most output tokens/s per GPU at this operating point. MoE models
    also pick the attention tensor-parallel group with the most tokens/s per GPU unless
    ``attention_tp`` fixes it (1 = DEP: data-parallel attention, expert parallel).
    """
    if concurrency is not None and tokens_per_user_s is not None:
        raise InputError("give at most one of --concurrency or --tokens-per-user-s")
    _check_choice(instance)
    ctx = _context(cat, hardware, model, origin)

    build = _builder(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        precision=precision,
        kv_precision=kv_precision,
        speculative=speculative,
        pricing=pricing,
    )
    gpus, attention_tp, note = _choose(
        ctx, build, instance_gpus, attention_tp, instance, concurrency, tokens_per_user_s
    )
    inst = build(ctx, gpus, note, attention_tp)
    _require_capacity(inst, ctx.name)
    point = _operating_point(ctx, inst, concurrency, tokens_per_user_s)
    point = _traffic(ctx, inst, point, requests_per_s, output_tokens_per_day)
    return ServeResult(
        hardware=ctx.name, description=ctx.system.description, serving=point, assumptions=ctx.trace.items
    )


def estimate_serving_curve(
    cat: Catalog,
    hardware: str,
    model: str,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    precision: str | None = None,
    kv_precision: str | None = None,
    instance_gpus: int | None = None,
    attention_tp: int | None = None,
    instance: str = "smallest",
    speculative: float | None = None,
    pricing: str = "rental",
    origin: str = CLI,
) -> ServeCurveResult:
    """The throughput-interactivity curve: a point per concurrency 1, 2, 4, ... and the KV limit.

    The instance (and, for MoE, the attention group) is chosen as :func:`estimate_serving`
    chooses it for maximum throughput.
    """
    _check_choice(instance)
    ctx = _context(cat, hardware, model, origin)
    build = _builder(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        precision=precision,
        kv_precision=kv_precision,
        speculative=speculative,
        pricing=pricing,
    )
    gpus, attention_tp, note = _choose(ctx, build, instance_gpus, attention_tp, instance, None, None)
    inst = build(ctx, gpus, note, attention_tp)
    _require_capacity(inst, ctx.name)
    batches = [1 << i for i in range(inst.max_batch.bit_length()) if 1 << i < inst.max_batch]
    points = [_point(inst, b, "concurrency") for b in [*batches, inst.max_batch]]
    return ServeCurveResult(
        hardware=ctx.name,
        description=ctx.system.description,
        model=inst.model,
        precision=inst.precision,
        instance_gpus=inst.gpus,
        max_concurrency=inst.max_batch,
        serving=points,
        assumptions=ctx.trace.items,
    )


# --- handles for other engines (RL rollout generation uses the same decode model) -----------------

ServingContext = _Ctx
ServingInstance = _Instance


def serving_context(cat: Catalog, hardware: str, model: str, origin: str = CLI) -> ServingContext:
    """Resolved system and model plus a fresh :class:`Trace` (``ctx.trace``) for one estimate."""
    return _context(cat, hardware, model, origin)


def serving_instance(ctx: ServingContext, **kw) -> ServingInstance:
    """One sized instance (keywords as :func:`estimate_serving`'s model, precision and shape
    arguments, plus ``instance_note``); its ``gpus``, ``max_batch`` and ``prefill_s`` are public."""
    return _instance(ctx, **kw)


def decode_speed(inst: ServingInstance, batch):
    """Output tokens/s of one sequence at ``batch`` sequences per instance (arrays work too)."""
    return inst.speculative / _step(inst, batch).seconds
