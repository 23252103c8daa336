"""One training step of a parallelism plan, as plain arithmetic on plan columns.

Every function takes ``P`` (plan columns: numpy arrays of equal length, or plain numbers for one
plan) and ``x`` (the model, hardware and efficiency inputs of :func:`ipd_cli.engine.trainplan.
plan_inputs`, plain numbers in SI units) and returns arrays of the same length. The search
(:mod:`ipd_cli.engine.trainplan`) evaluates them over a whole grid of plans; the single-point
estimate evaluates the same functions on one row, so both agree by construction.

Plan columns: ``tp`` tensor, ``cp`` context, ``pp`` pipeline, ``vp`` interleaved chunks per
stage, ``ep`` expert, ``dp`` data parallel degrees; ``mbs`` sequences per micro-batch, ``mb``
micro-batches per data-parallel replica and step; ``rc`` activation memory policy (0 no
recompute, 1 selective, 2 full recompute, 3 activations offloaded to host memory); ``zero``
sharding stage (0 replicated, 1 optimizer state, 2 and gradients, 3 and weights: FSDP);
``order`` rank placement (0: tp-cp-dp-pp, pipeline outermost, as Megatron; 1: tp-cp-pp-dp,
pipeline stages inside the scale-up domain first); ``sched`` pipeline schedule (0: 1F1B,
interleaved when vp > 1, as Megatron; 1: DualPipe, DeepSeek-V3's bidirectional schedule);
``disp`` MoE dispatcher (0: plain all-to-all, one copy per remote rank; 1: node-deduplicated,
DeepEP / HybridEP); ``a2ao`` Megatron's 1F1B expert-parallel overlap (1: the all-to-all of one
micro-batch behind the compute of another, as DualPipe does, never hiding less than without it;
Megatron's combined 1F1B runs it without a pipeline or interleaved; a single micro-batch has no
pair, and the step gives the gain back); ``graph`` CUDA graphs over the MoE routing (0: each MoE
layer's forward waits for the host; a missing column reads 1). Other missing columns read 0.

DualPipe (DeepSeek-V3 technical report, arXiv 2412.19437, sec. 3.2.1 and Table 2; the
deepseek-ai/DualPipe repository): micro-batches enter from both ends of the pipeline, so each
rank holds two stages (stage i and stage pp - 1 - i: twice the parameters, and each stage's
gradients are reduced over twice the replicas), keeps pp + 1 micro-batches' activations in
flight, and runs the forward chunk of one micro-batch together with the backward chunk of
another, so the expert all-to-all and the pipeline sends of each hide behind the other's compute
(the hidden part still takes its tax of the SMs: DeepSeek gives 20 of the H800's 132 SMs to
communication). Its bubble is (pp/2 - 1)(F&B + B - 3W) against 1F1B's (pp - 1)(F + B), with F,
B and W a stage's forward, full backward and weight-gradient time and F&B an overlapped pair.
It needs an even pp and an even number of micro-batches, at least 2 pp.

The step, after Calculon (Isaev et al., SC'23) with what it lacks added (gated FFNs, GQA, MoE
expert GEMMs and all-to-all, context parallelism, FSDP, fused attention, the LM head):

* per micro-batch and pipeline stage: linear-layer GEMMs at the training precision (a size-
  dependent efficiency: a fixed cost per call), fused attention in BF16, memory-bound work
  (norms, activations, residuals, low-precision casts) at HBM bandwidth, and the exposed part
  of the tensor-, context- and expert-parallel collectives;
* per step: (micro-batches + bubble) x that, the pipeline bubble (pp - 1) / vp of it, the
  pipeline point-to-point transfers, the data-parallel reduce-scatter / all-gather beyond what
  the backward and forward hide, and the optimizer step at HBM bandwidth.

Memory per GPU: weights, gradients and optimizer state by sharding stage, the activations the
schedule keeps in flight by recompute policy, the LM-head logits and FSDP's gathered layers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import formulas as f
from . import search as sr

Cols = dict[str, Any]


def dualpipe(P: Cols):
    """Whether each plan runs DualPipe (a plan without a ``sched`` column runs 1F1B)."""
    return P.get("sched", 0.0) == 1


def ifelse(cond, a, b):
    """a where cond else b, for numbers and arrays."""
    if hasattr(cond, "__len__") or hasattr(a, "__len__") or hasattr(b, "__len__"):
        import numpy as np

        return np.where(cond, a, b)
    return a if cond else b


# --- where each parallel group runs: inside the scale-up domain or over the NICs -------------------


def domain_atom(P: Cols, x: dict) -> Any:
    """The least common multiple of a plan's group spans that fit in one scale-up domain (tensor,
    tensor x context, expert, and a pipeline placed inside the domain): whole copies of it fill a
    domain without one straddling two."""
    import numpy as np

    dom = int(x["domain"])
    tp = np.asarray(P["tp"]).astype(np.int64)
    tc = np.asarray(P["tp"] * P["cp"]).astype(np.int64)
    span = np.asarray(ep_span(P)).astype(np.int64)
    staged = np.asarray(P["tp"] * P["cp"] * P["pp"]).astype(np.int64)
    atom = np.where(tc <= dom, tc, tp)  # (tc, a multiple of tp, is their least common multiple)
    atom = np.where(span <= dom, np.lcm(atom, span), atom)
    return np.where((np.asarray(P["order"]) == 1) & (staged <= dom), np.lcm(atom, staged), atom).astype(float)


def placed_domain(P: Cols, x: dict) -> Any:
    """GPUs of a scale-up domain a plan's groups occupy: whole copies of :func:`domain_atom` (64
    of an NVL72 rack's 72 for 16- or 32-GPU groups), or the whole domain where not one copy fits.
    Groups are placed in whole copies per domain, on a fixed GPU count as in deadline mode
    (MLPerf's GB200 runs use 64 of each rack's 72), so the counts of a group's members per domain
    (data-parallel rings, the domains an expert group spans) are taken on this, not on the
    domain: 72 let EP192 with TP16 x CP2 groups span 2.67 racks where it spans 3 of 64. A plan grid
    holds it as its ``dom`` column (:func:`~ipd_cli.engine.trainplan.micro_grid`: it depends on
    the micro columns alone, and the least common multiples cost more than the rest of a step)."""
    import numpy as np

    held = P.get("dom")
    if held is not None:
        return held
    atom = domain_atom(P, x)
    tile = np.floor(x["domain"] / atom) * atom
    return np.where(tile > 0, tile, x["domain"])


def in_domain(P: Cols, x: dict) -> dict[str, Any]:
    """Per group, whether all its GPUs share one scale-up domain (rank order ``P['order']``):
    tensor, context and expert groups (the micro-batch's collectives), and when ``P`` has ``dp``
    the data-parallel and pipeline groups."""
    dom = placed_domain(P, x)
    tc = P["tp"] * P["cp"]
    outer_pp = P["order"] == 0
    inside = {"tp": P["tp"] <= dom, "cp": tc <= dom, "ep": ep_span(P) <= dom}
    if "dp" in P:
        used = tc * P["dp"] * P["pp"]
        inside["dp"] = ifelse(outer_pp, tc * P["dp"], used) <= dom
        inside["pp"] = ifelse(outer_pp, used, tc * P["pp"]) <= dom
    return inside


def link_bytes_per_s(inside, x: dict):
    """Per-GPU, per-direction bandwidth of a group: the scale-up link inside a domain, else the NIC."""
    return ifelse(inside, x["up_bw"], x["out_bw"])


def latency(inside, x: dict):
    """The fixed time of one collective or transfer (launch and synchronisation): inside a domain,
    else over the scale-out network."""
    return ifelse(inside, x["lat_up"], x["lat_out"])


def ring_seconds(full_bytes, group, per_domain, x: dict):
    """A reduce-scatter or all-gather of ``full_bytes`` over ``group`` GPUs, ``per_domain`` of them in
    each scale-up domain, done hierarchically (as NCCL does): the domain's share over the scale-up
    link, and across domains each GPU carries 1 / per_domain of the rest over its NIC, all NICs at
    once. The slower part binds; inside one domain this is the ring's (group - 1) / group."""
    g = f.minimum(per_domain, group)
    k = group / g
    inner = full_bytes * (g - 1.0) / g / x["up_bw"]
    outer = full_bytes * (k - 1.0) / k / g / x["out_bw"]
    return f.maximum(inner, outer)


def dp_per_domain(P: Cols, x: dict) -> tuple[Any, Any]:
    """Data-parallel ranks per scale-up domain, for the dense group (strided by tp, or by tp cp pp with
    pipeline-first placement; cp ranks join it) and the expert group (strided by ep)."""
    stride = ifelse(P["order"] == 0, P["tp"], P["tp"] * P["cp"] * P["pp"])
    dom = placed_domain(P, x)
    dense = f.maximum(1.0, dom / stride)
    expert = f.maximum(1.0, dom / ifelse(P["order"] == 0, P["ep"], P["ep"] * P["pp"]))
    return dense, expert


def ep_span(P: Cols):
    """GPUs an expert group spreads over: ep consecutive ranks, or ep strided by pp (pipeline-first
    placement with experts beyond the tensor x context group)."""
    return ifelse((P["order"] == 0) | (P["ep"] <= P["tp"] * P["cp"]), P["ep"], P["ep"] * P["pp"])


def deduplicated(P: Cols):
    """Whether each plan dispatches node-deduplicated (DeepEP / HybridEP; a plan without a ``disp``
    column sends one copy per remote rank, as plain all-to-all does)."""
    return P.get("disp", 0.0) == 1


def remote_domains(P: Cols, x: dict):
    """Other scale-up domains a token's k routed experts fall in, on average
    (:func:`formulas.remote_domains` over the ep_span GPUs its expert group spans)."""
    return f.remote_domains(ep_span(P), placed_domain(P, x), x["topk"])


def a2a_seconds(P: Cols, x: dict, inside, per_token_bytes):
    """Dispatch or combine of one micro-batch's tokens over ``ep`` GPUs (``per_token_bytes``: a
    token's hidden vector on the wire), plus its fixed latency. Beyond one domain, plain all-to-all
    sends the share of the k copies bound for other domains over the NIC while the rest crosses the
    scale-up link at the same time; node-deduplicated dispatch (DeepEP, HybridEP; ``disp`` 1) sends
    a token once per other domain holding one of its experts (:func:`remote_domains`) and fans it out
    over the scale-up link there, which then carries every copy (combine: the reverse, reduced in
    the domain before it crosses). The slower of NIC and scale-up link binds."""
    e = P["ep"]
    one = tokens(P, x) / P["tp"] * per_token_bytes
    copies = one * routed_copies(x) * (e - 1.0) / e  # padded token drop sends each expert its capacity
    far = _crossing_rows(P, x, inside, one, copies)
    if far is None:
        across = _across_seconds(P, x, one, copies)
    else:  # (priced at the rows whose groups cross domains alone: the others read none of it)
        import numpy as np

        across = np.zeros(len(inside))
        Q = {k: P[k][far] for k in A2A_KEYS if k in P}
        across[far] = _across_seconds(Q, x, one[far], copies[far])
    return ifelse(inside, copies / x["up_bw"], across) + (e > 1) * latency(inside, x)


# the plan columns the all-to-all beyond one domain reads (:func:`ep_span`, :func:`placed_domain`,
# :func:`deduplicated`)
A2A_KEYS = ("tp", "cp", "pp", "ep", "order", "disp", "dom")


def _across_seconds(P: Cols, x: dict, one, copies):
    """:func:`a2a_seconds` of an expert group that crosses domains (``one``: a copy of the tokens'
    bytes; ``copies``: every copy's)."""
    off = f.off_domain_share(ep_span(P), placed_domain(P, x))
    dedup = deduplicated(P)
    nic = ifelse(dedup, one * remote_domains(P, x), copies * off)
    link = ifelse(dedup, copies, copies * (1.0 - off))
    return f.maximum(nic / x["out_bw"], link / x["up_bw"])


def _crossing_rows(P: Cols, x: dict, inside, one, copies) -> Any:
    """The row numbers of the plans whose expert group crosses domains (not ``inside``), or None
    where every row is priced alike: a single plan, rows that all cross, or inputs held as arrays
    (one value per row). A row's seconds depend on that row alone, so those rows priced alone give
    the numbers all rows priced together do (issue 16: two thirds of a 10T MoE grid's rows stay
    inside a domain; the remote domains' powers were half of its all-to-all's time)."""
    import numpy as np

    n = rows_apart((inside, one, copies, *(P[k] for k in A2A_KEYS if k in P)), x)
    if not n or not isinstance(inside, np.ndarray):
        return None
    far = np.flatnonzero(~inside)
    return None if len(far) == n else far


# --- work of one micro-batch on one pipeline stage --------------------------------------------------


def stage_layers(P: Cols, x: dict):
    """Layers on the most loaded stage: vp chunks of ceil(L / (pp vp)) layers (a plan grid holds
    them as its ``Ls`` column, :func:`~ipd_cli.engine.trainplan.micro_grid`)."""
    held = P.get("Ls")
    return P["vp"] * f.ceil(x["layers"] / (P["pp"] * P["vp"])) if held is None else held


def tokens(P: Cols, x: dict):
    """Tokens of one micro-batch on one GPU of a context-parallel group (before tensor sharding)."""
    return P["mbs"] * x["seq"] / P["cp"]


def gemm_seconds(flops, calls, x: dict, low: bool = True):
    """GEMM time: the low-precision share at its peak, the rest at BF16, plus a fixed cost per call."""
    if not low:
        return flops / x["bf16_rate"] + calls * x["call_s"]
    phi = x["low_share"]
    return flops * (phi / x["low_rate"] + (1.0 - phi) / x["bf16_rate"]) + calls * x["call_s"]


def routed_copies(x: dict):
    """Expert copies of a token each MoE layer computes, moves and keeps: its k routed experts, times
    the capacity factor where a token-drop run pads every expert to its capacity (``capacity``: 1
    for dropless routing, whose benchmarks force-balance the experts; :func:`~ipd_cli.engine.
    trainplan.routing_inputs`)."""
    return x["topk"] * x["capacity"]


def gemm_parts(P: Cols, x: dict) -> dict[str, Any]:
    """Forward GEMM time of one micro-batch through each kind of linear layer: the mixer, a dense
    FFN, the shared experts and the routed experts of one MoE layer (not yet weighted by share)."""
    T, t = tokens(P, x), P["tp"]
    local_experts = x["experts"] / P["ep"]
    routed = 2.0 * T / t * routed_copies(x) * x["p_expert"]
    return {
        "mix": gemm_seconds(2.0 * T * x["p_mix"] / t, 2.0, x),
        "dense": gemm_seconds(2.0 * T * x["p_ffn"] / t, 2.0, x),
        "shared": gemm_seconds(2.0 * T * x["p_shared"] / t, 2.0 * (x["p_shared"] > 0), x),
        # at the share of the GEMM rate the routing path keeps (drop_share: 1 for dropless routing)
        "routed": gemm_seconds(routed / x["drop_share"], 2.0 * local_experts * x["is_moe"], x),
    }


def layer_gemm_seconds(P: Cols, x: dict, g: dict | None = None):
    """Forward GEMM time of one average layer for one micro-batch (backward: twice this; ``g``:
    :func:`gemm_parts` of ``P``, where the caller has them)."""
    g, moe = gemm_parts(P, x) if g is None else g, x["moe_share"]
    return g["mix"] + (1.0 - moe) * g["dense"] + moe * (g["shared"] + g["routed"])


def attention_call_seconds(P: Cols, x: dict):
    """The fixed cost of one pass's fused-attention calls in a layer, for one micro-batch: each call,
    as a GEMM call, pays ``call_s`` (efficiency.gemm_call_overhead_us, with the small kernels around
    it folded in). Context parallelism's ring runs attention as cp calls a pass, one per ring step
    (TransformerEngine's AttnFuncWithCPAndKVP2P: a fused_attn_fwd call a step forward, a
    fused_attn_bwd call a step backward, each with its softmax and output corrections); without
    it, one call."""
    return P["cp"] * x["call_s"]


def head_seconds(P: Cols, x: dict):
    """Forward LM-head GEMM (BF16) of one micro-batch, spread over the stages (balanced split)."""
    T = tokens(P, x)
    return gemm_seconds(2.0 * T * x["vocab"] * x["hidden"] / P["tp"], 1.0, x, low=False) / P["pp"]


def loss_seconds(P: Cols, x: dict):
    """The cross-entropy over the vocabulary (vocabulary-parallel: / tp), memory-bound: each FP32
    logit streams through HBM ``loss_passes`` times; spread over the stages like the head."""
    logits = tokens(P, x) * x["vocab"] / P["tp"]
    return logits * x["logits_bytes"] * x["loss_passes"] / x["hbm_rate"] / P["pp"]


def attention_seconds(P: Cols, x: dict):
    """Forward fused attention of one average layer and micro-batch, in BF16: the causal layers' and
    the sliding-window layers' (their band, at its own efficiency)."""
    T = tokens(P, x)
    flops = T * x["seq"] * (x["q_width"] + x["attn_dim"]) / P["tp"] * x["attn_share"]  # QK^T + AV, causal
    band = (
        T
        * f.band_attention_flops_per_token_fwd(
            x["band_share"], x["seq"], x["window"], x["q_width"], x["attn_dim"]
        )
        / P["tp"]
    )
    return flops / (x["bf16_peak"] * x["attn_eff"]) + band / (x["bf16_peak"] * x["band_eff"])


# memory-bound work of a layer in units of its forward pass: the step charges the backward twice
# the forward (micro_terms), so work counted over both passes is charged at a third of its total
MEMORY_PASSES = 3.0


def clamp_values(x: dict):
    """Forward-equivalent values per routed copy of clamping the experts' gated input before the
    activation (models with glu_clamp: efficiency.glu_clamp_values, over both passes)."""
    return x["glu_clamp"] * x["clamp_values"] * x["expert_ffn"] / MEMORY_PASSES


def expert_extra_values(x: dict):
    """Forward-equivalent values per routed copy of the experts' eager work beyond the fused
    activation (gpt-oss in Megatron-Core): the output bias added per expert after the second GEMM
    (efficiency.moe_expert_bias_values) and the clamp of the gated input (:func:`clamp_values`)."""
    bias = x["expert_bias"] * x["bias_values"] * x["hidden"] / MEMORY_PASSES
    return bias + clamp_values(x)


def layer_elementwise_values(x: dict):
    """Values read and written per token by the memory-bound forward work of one average layer:
    norms and residual adds (5h per block), RoPE on q and k, the FFN activation, and for MoE
    layers the router, the permute/unpermute of k copies, the combine, and the experts' eager
    bias and clamp where the model has them."""
    h = x["hidden"]
    mixer = 5.0 * h + 2.0 * (x["q_width"] + x["k_width"])
    dense = 5.0 * h + x["act_width"] * x["ffn"]
    k = routed_copies(x)
    moe = 6.0 * h + 5.0 * k * h + x["act_width"] * x["expert_ffn"] * (k + x["shared"])
    moe = moe + k * expert_extra_values(x)
    return mixer + (1.0 - x["moe_share"]) * dense + x["moe_share"] * moe


def layer_cast_values(x: dict):
    """Values quantised per token before the forward GEMMs of one layer (the GEMM inputs; MLA's
    normed latents before the up-projections)."""
    h = x["hidden"]
    mixer = h + x["attn_dim"] + x["q_lora"] + x["kv_lora"]
    dense = h + x["ffn"]
    moe = (routed_copies(x) + x["shared"]) * (h + x["expert_ffn"]) + (x["shared"] > 0) * h
    return mixer + (1.0 - x["moe_share"]) * dense + x["moe_share"] * moe


def layer_memory_seconds(P: Cols, x: dict):
    """Forward memory-bound time of one layer and micro-batch (sequence parallel: tokens / tp)."""
    T = tokens(P, x) / P["tp"]
    values = layer_elementwise_values(x) * x["act_bytes"] + layer_cast_values(x) * x["cast_bytes"]
    return T * values / x["hbm_rate"]


def tp_op_seconds(P: Cols, x: dict, width: Any = None, value_bytes: Any = None):
    """One sequence-parallel all-gather or reduce-scatter of a layer's hidden states (``width``
    values a token: default the hidden size; ``value_bytes`` a value: default the activations'),
    with its latency."""
    w = x["hidden"] if width is None else width
    b = x["act_bytes"] if value_bytes is None else value_bytes
    per_op = ring_seconds(tokens(P, x) * w * b, P["tp"], x["domain"], x)
    return per_op + (P["tp"] > 1) * x["lat_up"]


def gather_seconds(P: Cols, x: dict, width: Any = None):
    """The all-gather of a column-parallel layer's input (forward, and again for its weight
    gradient), quantized on its sequence shard first: ``sp_gather_bytes`` a value, by recipe
    (efficiency.training_sp_gather_bytes; TransformerEngine's gather_along_first_dim with the
    layer's input quantizer)."""
    return tp_op_seconds(P, x, width, x["sp_gather_bytes"])


def mla_up_gather_seconds(P: Cols, x: dict):
    """The all-gathers of an MLA layer's column-parallel up-projections' inputs, forward: the query
    latent (or the hidden state without one) and the key-value latent."""
    return gather_seconds(P, x, mla_queries(x)) + gather_seconds(P, x, x["kv_lora"])


def mla_queries(x: dict):
    """The width an MLA layer's query up-projection reads: its query latent, or the hidden state
    without one."""
    return ifelse(x["q_lora"] > 0, x["q_lora"], x["hidden"])


def mla_up_gemm_seconds(P: Cols, x: dict):
    """Forward GEMM time of an MLA layer's up-projections (the query's from its latent, or from the
    hidden state without one, and the key-value latent's to the keys' non-RoPE part and the values)."""
    q, kv_up = x["q_width"], x["k_width"] - x["heads"] * x["rope"] + x["v_width"]
    return gemm_seconds(2.0 * tokens(P, x) / P["tp"] * (mla_queries(x) * q + x["kv_lora"] * kv_up), 2.0, x)


def tp_layer_parts(P: Cols, x: dict) -> dict[str, Any]:
    """One average layer's tensor-parallel collectives (sequence parallel), before overlap, by how
    they can hide (Megatron-Core's TE linears; Megatron-Core's MLASelfAttention; a routed layer's
    shared experts are TP-split, SharedExpertMLP, its routed experts not).

    ``fwd``: the forward's: a column-parallel layer (QKV, FC1; an MLA layer's up-projections, whose
    down-projections run replicated on the sequence shard) gathers its input, quantized
    (:func:`gather_seconds`); a row-parallel one (the projection, FC2) reduce-scatters its output
    in BF16; MLA gathers its RoPE key alone, in BF16. ``bwd_fixed``: the backward's that nothing
    hides on TransformerEngine's NCCL path: the row-parallel layers' output-gradient gathers, with
    the row- and the column-wise copy its two GEMMs read (``sp_grad_gather_bytes`` a value:
    efficiency.training_sp_grad_gather_bytes), and the RoPE key's scatter; ``bwd_fixed_ub`` the
    same with userbuffers, which gather the row-wise copy alone (``sp_gather_bytes``), and
    ``rows``: (weight, gather, window) of each row-parallel layer's column-wise copy a recipe cannot
    derive from the row-wise one (MXFP8: TransformerEngine gathers it over NCCL behind the layer's
    input-gradient GEMM; none where the two widths agree). ``pairs``: (weight, scatter, gather,
    window) of each column-parallel layer's backward: its input gradient's BF16 reduce-scatter runs
    asynchronously behind its weight-gradient GEMM, and the re-gather of its input (the forward
    keeps only its shard) behind its input-gradient GEMM, each GEMM as long as the forward one
    (``window``); weighted by the layers that have it (attention every layer, a dense layer's MLP,
    a routed layer's shared experts). A dense GQA layer: 4 forward, 6 backward."""
    T, t, h, moe = tokens(P, x), P["tp"], x["hidden"], x["moe_share"]
    ag, rs = gather_seconds(P, x), tp_op_seconds(P, x)
    grad, grad_ub = (tp_op_seconds(P, x, None, x[k]) for k in ("sp_grad_gather_bytes", "sp_gather_bytes"))
    extra = x["sp_grad_gather_bytes"] - x["sp_gather_bytes"]
    column = (extra > 0) * tp_op_seconds(P, x, None, extra)  # the column-wise copy userbuffers leave
    rope = tp_op_seconds(P, x, x["rope"])
    mla = x["kv_lora"] > 0
    up_ag = mla_up_gather_seconds(P, x)
    up_rs = tp_op_seconds(P, x, mla_queries(x)) + tp_op_seconds(P, x, x["kv_lora"])
    qkv = gemm_seconds(2.0 * T * f.maximum(x["p_mix"] - x["attn_dim"] * h, 0.0) / t, 1.0, x)
    fc1 = (x["act_width"] - 1.0) / x["act_width"]  # FC1's share of a (gated) FFN's weights
    dense, shared = 1.0 - moe, moe * (x["shared"] > 0)
    fc2 = 1.0 / x["act_width"]  # FC2's share of an FFN's weights
    attention = (
        1.0,
        ifelse(mla, up_rs, rs),
        ifelse(mla, up_ag, ag),
        ifelse(mla, mla_up_gemm_seconds(P, x), qkv),
    )
    return {
        "fwd": ifelse(mla, up_ag + rope, ag) + rs + (dense + shared) * (ag + rs),
        "bwd_fixed": (1.0 + dense + shared) * grad + mla * rope,
        "bwd_fixed_ub": (1.0 + dense + shared) * grad_ub + mla * rope,
        "pairs": (
            attention,
            (dense, rs, ag, gemm_seconds(2.0 * T * fc1 * x["p_ffn"] / t, 1.0, x)),
            (shared, rs, ag, gemm_seconds(2.0 * T * fc1 * x["p_shared"] / t, 1.0, x)),
        ),
        "rows": (
            (1.0, column, gemm_seconds(2.0 * T * x["attn_dim"] * h / t, 1.0, x)),
            (dense, column, gemm_seconds(2.0 * T * fc2 * x["p_ffn"] / t, 1.0, x)),
            (shared, column, gemm_seconds(2.0 * T * fc2 * x["p_shared"] / t, 1.0, x)),
        ),
    }


def layer_tp_seconds(P: Cols, x: dict, backward: bool = False, parts: Any = None):
    """Tensor-parallel all-gathers + reduce-scatters of one layer (sequence parallel), forward or
    backward, before overlap (:func:`tp_layer_parts`, or ``parts`` where the caller has them; the
    backward's on the recipe's path)."""
    p = tp_layer_parts(P, x) if parts is None else parts
    if not backward:
        return p["fwd"]
    ub = p["bwd_fixed_ub"] + sum(w * c for w, c, _ in p["rows"])
    return ifelse(x["tp_ub"] > 0, ub, p["bwd_fixed"]) + _paired(p)


def _paired(p: dict[str, Any]):
    """The column-parallel layers' backward scatters and re-gathers of :func:`tp_layer_parts`."""
    return sum(w * (rs + ag) for w, rs, ag, _ in p["pairs"])


def tp_forward(comm, x: dict):
    """Forward tensor-parallel collectives, exposed: with userbuffers (``tp_ub`` 1: the recipe's
    quantizers support them, efficiency.training_tp_userbuffers) ``tp_overlap`` of them hides
    behind the GEMMs (efficiency.tp_comm_overlap); on TransformerEngine's NCCL path none does."""
    return overlapped(comm, x["tp_ub"] * x["tp_overlap"], x)


def layer_tp_exposed(P: Cols, x: dict, backward: bool = False, parts: Any = None):
    """One layer's exposed tensor-parallel time, forward or backward: with userbuffers
    ``tp_overlap`` of every collective hides (and the column-wise copies they cannot gather hide
    behind their layers' input-gradient GEMMs); on the NCCL path the forward's all show, and of the
    backward's the column-parallel layers' scatter and re-gather hide behind their two GEMMs
    (:func:`exposed`), the rest shows (:func:`tp_layer_parts`). DualPipe runs the weight-gradient
    GEMMs apart (its bubble's W), so a scatter has none to hide behind and shows. ``parts``:
    :func:`tp_layer_parts` where the caller has them."""
    p = tp_layer_parts(P, x) if parts is None else parts
    if not backward:
        return tp_forward(p["fwd"], x)
    ub = overlapped(p["bwd_fixed_ub"] + _paired(p), x["tp_overlap"], x)
    ub = ub + sum(w * exposed(c, win, x) for w, c, win in p["rows"])
    alone = 1.0 - dualpipe(P)  # a scatter's window: none when the weight gradients run apart
    hidden = sum(w * (exposed(rs, alone * win, x) + exposed(ag, win, x)) for w, rs, ag, win in p["pairs"])
    return ifelse(x["tp_ub"] > 0, ub, p["bwd_fixed"] + hidden)


def amax_seconds(P: Cols, x: dict, backward: bool = False):
    """The amax all-reduces of one layer over its tensor-parallel group under FP8 current scaling and
    NVFP4 (sequence parallel: a GEMM input quantized on its sequence shard before the gather needs
    one scale on every rank; TransformerEngine's Float8CurrentScalingQuantizer and NVFP4Quantizer,
    an fp32 scalar waited on before the cast, so not overlapped): forward on the inputs of the
    column-parallel layers (QKV, an MLA layer's two latent up-projections; FC1 of a dense MLP or of
    a routed layer's shared experts), backward on the output gradients of the row-parallel ones
    (the projection, FC2).
    ``amax_syncs``: all-reduces per such GEMM input, by recipe
    (efficiency.training_amax_reductions: 1 for tensorwise and NVFP4, 0 for the others)."""
    mlp = (1.0 - x["moe_share"]) + x["moe_share"] * (x["shared"] > 0)
    attention = 1.0 if backward else ifelse(x["kv_lora"] > 0, 2.0, 1.0)
    return (attention + mlp) * amax_one(P, x)


def amax_one(P: Cols, x: dict):
    """One amax all-reduce of :func:`amax_seconds` (none at tp 1 or for a recipe without them)."""
    return (P["tp"] > 1.0) * x["amax_syncs"] * x["lat_up"]


def dense_mlp_tp_seconds(P: Cols, x: dict):
    """A layer's share of a dense MLP's tensor-parallel gather and scatter (the layers without
    routed experts), forward, before overlap: FC1's input gathered, quantized; FC2's output
    reduce-scattered."""
    return (1.0 - x["moe_share"]) * (gather_seconds(P, x) + tp_op_seconds(P, x))


def shared_expert_tp_seconds(P: Cols, x: dict):
    """A layer's share of the shared experts' tensor-parallel gather and scatter (routed layers
    with shared experts: Megatron-Core's SharedExpertMLP is TP-split), forward, before overlap."""
    return x["moe_share"] * (x["shared"] > 0) * (gather_seconds(P, x) + tp_op_seconds(P, x))


def layer_cp_seconds(P: Cols, x: dict, inside):
    """Forward context-parallel ring: every GPU receives the other cp - 1 chunks' keys and values."""
    c = P["cp"]
    kv = (x["k_width"] + x["v_width"]) / P["tp"] * x["act_bytes"]
    step = tokens(P, x) * kv * x["attn_share"] / link_bytes_per_s(inside, x) + latency(inside, x)
    return (c - 1.0) * step


def layer_ep_seconds(P: Cols, x: dict, inside):
    """Forward expert all-to-all of one layer: dispatch and combine of k copies of each token."""
    return 2.0 * x["moe_share"] * a2a_seconds(P, x, inside, x["hidden"] * x["a2a_bytes"])


def overlapped(comm, share, x: dict):
    """A collective of which ``share`` hides behind compute: the rest shows, and the hidden part
    still takes its tax of the compute it shares the SMs and memory with."""
    return comm * (1.0 - share) + comm * share * x["overlap_tax"]


def exposed(comm, window, x: dict):
    """A collective overlapped with ``window`` seconds of compute: what does not fit shows, and the
    part that hides takes its tax."""
    return f.maximum(0.0, comm - window) + f.minimum(comm, window) * x["overlap_tax"]


def eager_seconds(P: Cols, x: dict):
    """Host-bound time of one average layer's forward when its MoE routing and preprocessing run
    without CUDA graphs (``graph`` 0; a plan without the column captures them): the dispatcher reads
    the tokens per expert back to the host to size its buffers and grouped GEMMs, so the GPU drains
    and waits while the host launches the rest of the layer (a fitted time per MoE layer)."""
    return (P.get("graph", 1.0) == 0) * x["moe_share"] * x["is_moe"] * x["moe_eager_s"]


TP_KEYS = ("tp", "cp", "mbs", "sched")  # the columns a layer's exposed TP seconds read (x aside)


def plain_inputs(x: dict) -> bool:
    """Whether ``x`` holds plain numbers, not arrays of one value per plan row (a plan priced at
    sampled inputs): then a subset of the rows can be priced alone."""
    import numpy as np

    return not any(isinstance(v, np.ndarray) and v.ndim for v in x.values())


APART_ROWS = 1024  # the fewest rows that :func:`rows_apart` prices apart (fewer: not worth it)


def rows_apart(cols: Any, x: dict) -> int:
    """The rows of the columns ``cols`` where they can be priced apart (some rows alone, or once
    per distinct combination and spread), else 0: every column one value per row of the same
    length, at least :data:`APART_ROWS` of them, and plain inputs (:func:`plain_inputs`)."""
    import numpy as np

    n = np.size(cols[0]) if len(cols) else 0
    if n < APART_ROWS or any(np.ndim(c) != 1 or np.size(c) != n for c in cols) or not plain_inputs(x):
        return 0
    return int(n)


def tp_exposed_both(P: Cols, x: dict) -> tuple[Any, Any]:
    """One layer's exposed tensor-parallel seconds, forward and backward, with the amax reductions
    (:func:`tp_layer_parts` once for both directions). They read only :data:`TP_KEYS` of a row, so
    over a grid (a few hundred distinct combinations in 10^5 rows) each distinct combination is
    priced once and spread to its rows: the same numbers, a row's value depending on that row alone."""

    def both(Q: Cols, x: dict) -> tuple[Any, Any]:
        parts = tp_layer_parts(Q, x)
        tp = layer_tp_exposed(Q, x, parts=parts) + amax_seconds(Q, x)
        return tp, layer_tp_exposed(Q, x, backward=True, parts=parts) + amax_seconds(Q, x, True)

    return _on_distinct_rows(P, x, TP_KEYS, both)


def _on_distinct_rows(P: Cols, x: dict, keys: tuple[str, ...], price: Callable[[Cols, dict], Any]) -> Any:
    """``price(P, x)`` (a tuple or dict of numbers and per-row arrays) where it reads only ``P``'s
    columns ``keys``: priced once per distinct combination of them (:func:`_distinct_rows`) and
    spread to its rows, the same numbers (a number is every row's)."""
    at = _distinct_rows(P, x, keys)
    if at is None:
        return price(P, x)
    import numpy as np

    out, inv = price(at[0], x), at[1]

    def spread(v: Any) -> Any:
        return v[inv] if np.ndim(v) else v

    return {k: spread(v) for k, v in out.items()} if isinstance(out, dict) else tuple(map(spread, out))


def _distinct_rows(P: Cols, x: dict, keys: tuple[str, ...]) -> tuple[Cols, Any] | None:
    """(the distinct combinations of ``P``'s columns ``keys``, as columns; each row's index into
    them), or None where that does not pay or does not hold: few rows, inputs held as arrays (one
    value per row), or a column that is not a small non-negative whole number (codes are built
    without sorting: a mixed-radix number per row, marked in a table of every possible code)."""
    cols = [P[k] for k in keys if k in P]
    n = rows_apart(cols, x)
    if not n:
        return None
    # a plan grid's columns are the process's read-only arrays (trainplan.micro_grid), shared by the
    # searches of one model on systems of one domain size: their combinations are found once
    return sr.kept_for(_DISTINCT, tuple(cols), keys, lambda: _distinct_of(P, keys, cols, n))


_DISTINCT: dict[tuple, tuple] = {}  # _distinct_rows of read-only grid columns, read-only


def _distinct_of(P: Cols, keys: tuple[str, ...], cols: list, n: int) -> tuple[Cols, Any] | None:
    """:func:`_distinct_rows`, computed."""
    import numpy as np

    ints, radix = [], []
    for c in cols:
        i = c.astype(np.int64)
        lo, hi = (int(i.min()), int(i.max())) if n else (0, 0)
        if lo < 0 or hi > 4096 or not np.array_equal(i, c):
            return None
        ints.append(i)
        radix.append(hi + 1)
    space = int(np.prod(radix, dtype=np.float64))
    if space > 4 * n:
        return None
    code = np.zeros(n, dtype=np.int64)
    for i, r in zip(ints, radix, strict=True):
        code = code * r + i
    seen = np.zeros(space, dtype=bool)
    seen[code] = True
    codes = np.flatnonzero(seen)
    inv = (np.cumsum(seen) - 1)[code]
    out, rest = {}, codes
    for k, r in zip(reversed([k for k in keys if k in P]), reversed(radix), strict=True):
        out[k] = (rest % r).astype(P[k].dtype)
        rest = rest // r
    return {k: out[k] for k in keys if k in P}, inv


def micro_terms(P: Cols, x: dict, bounds_only: bool = False, tp_both: Any = None) -> dict[str, Any]:
    """Forward and backward seconds of one micro-batch on the most loaded stage with the exposed
    tensor/context/expert collectives, what each recompute policy adds to the backward, and the
    activation bytes each keeps (every recompute policy at once: ``P`` needs no ``rc``).
    ``bounds_only``: the forward and backward seconds and the activation bytes alone
    (:data:`BOUND_TERMS`, what a search's bounds read over a whole grid), the same numbers.
    ``tp_both``: :func:`tp_exposed_both` of ``P``, where the caller has it (a grid priced a
    block at a time prices it once for the whole grid: :func:`~ipd_cli.engine.trainplan.grid_terms`)."""
    inside = in_domain(P, x)
    Ls = stage_layers(P, x)
    parts = gemm_parts(P, x)  # (the recompute's module terms read them too)
    g, a, mem = layer_gemm_seconds(P, x, parts), attention_seconds(P, x), layer_memory_seconds(P, x)
    tp, tp_bwd = tp_exposed_both(P, x) if tp_both is None else tp_both
    ep_raw = layer_ep_seconds(P, x, inside["ep"])
    r = x["attn_bwd_ratio"]
    # context parallelism's ring hides its KV transfers behind the attention of its own blocks
    cp = layer_cp_seconds(P, x, inside["cp"])
    cp_hidden = f.minimum(cp, a) + f.minimum(2.0 * cp, r * a)
    # DualPipe, and Megatron's 1F1B expert-parallel overlap (``a2ao`` 1): a layer's forward and
    # backward all-to-alls (2 ep_raw) hide behind the compute of the paired micro-batch's layer (its
    # forward and backward: 3 GEMM passes, attention, memory work), less the attention the ring's
    # transfers already hide behind (counted in both windows, faster attention exposed both at
    # once: more BF16 FLOP/s lengthened a 10T MoE step on 927,744 H100, a dominance review)
    window = 3.0 * g + (1.0 + r) * a - cp_hidden + 3.0 * mem
    pair = exposed(2.0 * ep_raw, window, x) / 2.0
    alone = overlapped(ep_raw, x["a2a_overlap"], x)
    # Megatron's overlap pairs micro-batches on top of what a run without it hides: the better of the two
    one_f = P.get("a2ao", 0.0) == 1
    dual = dualpipe(P)
    ep = ifelse(dual, pair, ifelse(one_f, f.minimum(pair, alone), alone))
    head = head_seconds(P, x)
    loss = loss_seconds(P, x)
    cp_fwd, cp_bwd = Ls * exposed(cp, a, x), Ls * exposed(2.0 * cp, r * a, x)
    eager = Ls * eager_seconds(P, x)
    calls_a = attention_call_seconds(P, x)  # the attention calls' fixed cost, a pass
    fwd = Ls * (g + a + calls_a + mem + tp + ep) + eager + cp_fwd + head + loss / 2.0
    # the sequence-parallel backward's collectives: layer_tp_exposed
    bwd = Ls * (2.0 * g + r * a + calls_a + 2.0 * mem + tp_bwd + ep) + cp_bwd + 2.0 * head + loss / 2.0
    acts = activation_bytes(P, x, Ls)
    if bounds_only:
        return {"fwd_s": fwd, "bwd_s": bwd, **acts}
    return {
        "fwd_s": fwd,
        "bwd_s": bwd,
        "redo_s": (0.0 * fwd, Ls * mem, fwd - head - loss / 2.0, 0.0 * fwd),
        "stage_layers": Ls,
        "tp_comm_s": Ls * (tp + tp_bwd),
        "ep_comm_s": 2.0 * Ls * ep,
        # what the 1F1B overlap's pairing hides beyond a run without it: lost on the chunks that run
        # alone (:func:`unpaired_share`)
        "a2a_gain_s": 2.0 * Ls * (alone - ep) * (one_f | dual),
        "cp_comm_s": cp_fwd + cp_bwd,
        "layer_comm_s": Ls * (tp + ep) + cp_fwd,
        "gemm_s": Ls * 3.0 * g + 3.0 * head,
        "wgrad_s": Ls * g + head,
        "attention_s": Ls * ((1.0 + r) * a + 2.0 * calls_a),
        "memory_s": Ls * 3.0 * mem + loss,
        "layer_gemm_s": Ls * g,
        "layer_attention_s": Ls * (a + calls_a),
        "layer_memory_s": Ls * mem,
        "eager_s": eager,
        **acts,
        **(
            module_terms(P, x, Ls, module_redo_seconds(P, x, a, ep, parts))
            if x.get("module_sets", True)
            else {}
        ),
    }


# the terms :func:`micro_terms` gives with ``bounds_only`` (``act_bytes``: one per policy)
BOUND_TERMS = ("fwd_s", "bwd_s", "act_bytes", "work_bytes", "logits_bytes")
# the terms of :func:`module_terms`: only a module-set policy reads them (:func:`with_recompute`,
# :func:`activation_floor`)
SET_TERMS = ("set_gemm_s", "set_memory_s", "set_comm_s", "act_unit", "group_bytes")


def module_terms(P: Cols, x: dict, Ls, redo: dict) -> dict[str, Any]:
    """What a module-set policy needs of a micro-batch on its stage: per module of :data:`MODULES`
    the GEMM, memory-bound and communication seconds its recompute repeats (0 where the model lacks
    it), and the bytes per saved tensor group of :func:`layer_activation_groups` per token and layer
    (``act_unit``: tokens x layers on the stage, sequence parallel)."""
    has = module_applies(x)
    parts = [tuple(Ls * redo[m][i] if has[m] else 0.0 for m in MODULES) for i in range(3)]
    groups = layer_activation_groups(x)
    per_group = tuple(groups[g][0] * x["act_bytes"] + groups[g][1] * x["gemm_in_bytes"] for g in GROUP_NAMES)
    return {
        "set_gemm_s": parts[0],
        "set_memory_s": parts[1],
        "set_comm_s": parts[2],
        "act_unit": Ls * tokens(P, x) / P["tp"],
        "group_bytes": per_group,
    }


def module_set_terms(t: dict, rc) -> dict[str, Any]:
    """Recompute seconds and kept activation bytes of module-set policies ``rc`` (0 and the
    no-recompute bytes for the other policies): each module's repeated work once (one that another
    in the set already repeats, as moe does moe_act, is not counted again), and the saved tensors
    no module of the set frees."""
    bits = module_bits(rc)
    on = dict(zip(MODULES, bits, strict=True))
    for big, small in SUBSUMES.items():
        for m in small:
            on[m] = on[m] & ~on[big] if hasattr(on[big], "__len__") else on[m] and not on[big]
    redo = {
        k: sum(on[m] * v for m, v in zip(MODULES, t[f"set_{k}_s"], strict=True))
        for k in ("gemm", "memory", "comm")
    }
    kept = 0.0
    for group, value in zip(GROUP_NAMES, t["group_bytes"], strict=True):
        freed = sum(on[m] for m in FREED_BY[group]) > 0
        kept = kept + value - freed * value
    return {**redo, "act": t["act_unit"] * kept}


def offload_terms(P: Cols, m: dict, host, x: dict, exposed_a2a: Any = 0.0) -> dict[str, Any]:
    """Activation offload (policy 3), for a plan that sends any activations to host memory
    (``host`` > 0 bytes per GPU, :func:`offloaded_bytes`): each micro-batch in flight sends its
    share of them out after its forward and takes it back before its backward over the host link
    (the layers that must go, as Megatron's cpu_offloading_num_layers offloads); what the compute
    cannot hide shows. Over a PCIe host link (``host_shared``: the GPU's link also carries its
    NIC's traffic, not modelled) every layer but the two kept is charged, a conservative stand-in
    for that traffic; over NVLink-C2C only what must go (until 2026-12-05, thirty-seventh session,
    every layer there too: Megatron-Bridge 26.04.01's Llama 3.1 70B FSDP run on 64 GB300, whose
    recipe offloads 20 of its 80 layers, read -11.5 % with the 80, -0.6 % with what must go). A
    plan whose activations all fit sends nothing and runs as keeping them does."""
    needed = f.minimum(m["offload_bytes"], host / in_flight(P))
    sent = ifelse(x.get("host_shared", 1.0) > 0.0, m["offload_bytes"], needed)
    transfer = (host > 0.0) * sent / x["host_bw"]
    # the window: the pass's time, and the expert all-to-all its unpaired chunks expose in that
    # pass (``exposed_a2a``, :func:`step`): the host link copies while the GPU waits on the network
    fwd = f.maximum(0.0, transfer - m["fwd_s"] - exposed_a2a)
    bwd = f.maximum(0.0, transfer - m["bwd_s"] - exposed_a2a)
    return {
        "fwd_s": m["fwd_s"] + fwd,
        "bwd_s": m["bwd_s"] + bwd,
        "comm_s": m["comm_s"] + fwd + bwd,
        "offload_s": fwd + bwd,  # of comm_s: the host link, not a collective
    }


def any_true(v) -> bool:
    """Whether a condition holds for a number, or for any entry of an array."""
    return bool(v.any()) if hasattr(v, "any") else bool(v)


def pick(values: tuple, rc):
    """The entry of a per-policy tuple for policy ``rc`` (a number or an array)."""
    out = values[-1]
    for i in range(len(values) - 2, -1, -1):
        out = ifelse(rc == i, values[i], out)
    return out


def with_recompute(t: dict, rc) -> dict[str, Any]:
    """The micro-batch terms under recompute policy ``rc`` (a number or an array)."""
    redo = pick(t["redo_s"], rc)
    act = pick(t["act_bytes"], rc)
    full = rc == 2
    off = rc == 3
    sets = rc >= SET_BASE
    attn = full * t["layer_attention_s"]
    eager = t["eager_s"] * (1.0 + full)  # full recompute re-runs the forward, its host waits too
    extra = {"gemm": 0.0, "memory": 0.0, "comm": 0.0}
    if any_true(sets):
        bits = module_bits(rc)
        core, moe = bits[MODULES.index("core_attn")], bits[MODULES.index("moe")]
        extra = module_set_terms(t, rc)
        attn = attn + core * t["layer_attention_s"]
        eager = eager + moe * t["eager_s"]  # so does recomputing the moe module
        redo = redo + extra["gemm"] + extra["memory"] + extra["comm"] + core * t["layer_attention_s"]
        redo = redo + moe * t["eager_s"]
        act = ifelse(sets, extra["act"], act)
    return {
        "fwd_s": t["fwd_s"],
        "bwd_s": t["bwd_s"] + redo,
        "stage_layers": t["stage_layers"],
        "wgrad_s": t["wgrad_s"],
        "gemm_s": t["gemm_s"] + full * t["layer_gemm_s"] + extra["gemm"],
        "attention_s": t["attention_s"] + attn,
        "memory_s": t["memory_s"] + ((rc == 1) | (rc == 2)) * t["layer_memory_s"] + extra["memory"],
        # the host-bound launches of an eager MoE layer, again where recompute re-runs them
        "eager_s": eager,
        "comm_s": t["tp_comm_s"] + t["ep_comm_s"] + t["cp_comm_s"] + full * t["layer_comm_s"] + extra["comm"],
        "ep_comm_s": t["ep_comm_s"] * (1.0 + full / 2.0),
        "a2a_gain_s": t["a2a_gain_s"] * (1.0 + full / 2.0),
        "act_bytes": act,
        # what an offloading plan can send to host memory: all but the two layers it keeps
        "offload_bytes": off * (t["act_bytes"][0] - t["act_bytes"][3]),
        "work_bytes": full * t["work_bytes"],
        "logits_bytes": t["logits_bytes"],
    }


def activation_floor(t: dict, rc: int):
    """Activation bytes one micro-batch keeps on its stage under policy ``rc`` (a number), with the
    working set of the layer full recompute rebuilds."""
    kept = module_set_terms(t, rc)["act"] if rc >= SET_BASE else t["act_bytes"][rc]
    return kept + (rc == 2) * t["work_bytes"]


def micro_batch(P: Cols, x: dict) -> dict[str, Any]:
    """:func:`micro_terms` under the plan's own recompute policy ``P['rc']``."""
    return with_recompute(micro_terms(P, x), P["rc"])


def layer_activation_groups(x: dict) -> dict[str, tuple[Any, Any]]:
    """Values one average layer keeps per token for the backward with no recompute, by tensor, as
    (kept in BF16, kept as low-precision GEMM inputs: FP8/FP4 recipes save the quantised copy).
    Every GEMM input and output the backward needs (fused attention keeps no score matrix).

    An MoE layer keeps its norm's input and output (the router's GEMM input, in BF16), each
    expert copy's FC1 input and output and FC2 input, and the shared experts' FC1 input; not the
    expert outputs: Megatron applies the routing probabilities inside the experts' activation
    (megatron/core/transformer/moe/experts.py, ``activation_func_with_probs``), so the combine's
    unpermute is a plain sum that saves nothing (token_dispatcher.py, ``combine_postprocess``).
    The attention output is kept twice by low-precision recipes: in BF16 by fused attention, whose
    backward reads it (FlashAttention-2, Algorithm 2: D = rowsum(dO o O)), and quantised by the
    output projection for its weight gradient; in BF16 both are one tensor.

    MLA (megatron/core/transformer/multi_latent_attention.py, TE spec: the latent norms fused into
    the up-projections) keeps the down-projections' outputs, the query latent and the key-value
    latent with the RoPE key (the norms' inputs; the key-value norm's input is a view of the
    latent-and-RoPE-key tensor), the normed latents (the up-projections' GEMM inputs) and q, k, v
    at their own widths (q/k heads with the RoPE part: 192, v 128); its output projection saves
    the attention output it shares with the fused attention, not a quantised copy (low-precision
    recipes call ``set_save_original_input`` on it), so MLA keeps that output once, in BF16."""
    h, k, s, aw, A = x["hidden"], routed_copies(x), x["shared"], x["act_width"], x["attn_dim"]
    fe, ff, moe = x["expert_ffn"], x["ffn"], x["moe_share"]
    mla = float(x["kv_lora"] > 0)
    return {
        "layer_in": (h, 0.0),  # the attention norm's input (the residual stream)
        "attn_norm_out": (0.0, h),  # the QKV (MLA: down-projection) GEMMs' input
        "q_latent": (x["q_lora"], 0.0),  # MLA: the query norm's input
        "kv_latent": (x["kv_lora"] + x["rope"], 0.0),  # MLA: the key-value norm's input, the RoPE key
        "latent_norm_out": (0.0, x["q_lora"] + x["kv_lora"]),  # MLA: the up-projections' inputs
        "qkv": (x["q_width"] + x["k_width"] + x["v_width"], 0.0),  # q, k, v for the attention backward
        "attn_out_bf16": ((1.0 - mla) * x["low_saved"] * A, 0.0),  # o, for the fused attention's backward
        "attn_out": (mla * A, (1.0 - mla) * A),  # the output projection's input
        "mlp_norm_in": (h, 0.0),
        "dense_norm_out": (0.0, (1.0 - moe) * h),
        "dense_pre_act": ((1.0 - moe) * (aw - 1.0) * ff, 0.0),  # a gated FFN's two halves
        "dense_act_out": (0.0, (1.0 - moe) * ff),
        "router_in": (moe * h, 0.0),  # the norm's output, the router GEMM's BF16 input
        "routed_fc1_in": (0.0, moe * k * h),
        "routed_pre_act": (moe * k * (aw - 1.0) * fe, 0.0),
        # where the gated input is clamped first (glu_clamp): the clamped copy the fused activation
        # saves, beside the FC1 output the clamp saves (routed_pre_act)
        "routed_clamped": (moe * k * x["glu_clamp"] * (aw - 1.0) * fe, 0.0),
        "routed_act_out": (0.0, moe * k * fe),
        "shared_fc1_in": (0.0, moe * (s > 0) * h),
        "shared_pre_act": (moe * s * (aw - 1.0) * fe, 0.0),
        "shared_act_out": (0.0, moe * s * fe),
    }


# ipd's own selective policy (1): norms and activation functions are rebuilt (their outputs are GEMM
# inputs); full (2) keeps only the layer input
SELECTIVE_FREES = (
    "attn_norm_out",
    "latent_norm_out",
    "dense_norm_out",
    "dense_act_out",
    "router_in",
    "shared_fc1_in",
    "routed_act_out",
    "routed_clamped",
    "shared_act_out",
)

# Megatron-Core's selective recompute of a module list (TransformerConfig.recompute_modules,
# megatron/core/transformer/transformer_config.py; default ["core_attn"]). Policy values from
# SET_BASE on are module sets: SET_BASE + the sum of 2**i over the recomputed MODULES[i]
MODULES = ("core_attn", "layernorm", "moe_act", "mla_up_proj", "mlp", "moe", "shared_experts")
SET_BASE = 4
SHARED_GROUPS = ("shared_fc1_in", "shared_pre_act", "shared_act_out")  # the shared experts' saved tensors
# the saved tensors each module's recompute frees. core_attn checkpoints the fused attention on its
# inputs q, k, v: it frees only the BF16 output low-precision recipes keep for its backward; layernorm
# and moe_act discard the norms' and routed experts' activation outputs (output-discarding
# checkpoints; moe_act also the clamped copy a glu_clamp model's activation saves); mla_up_proj
# the up-projected q, k, v and the normed latents (CheckpointWithoutOutput on the
# up-projections: the latents and the RoPE key stay, as its inputs); mlp is the
# dense MLP only (transformer_layer.py: not an MoE layer's), moe the whole MoE layer and
# shared_experts its shared experts, each checkpointed on its input, which stays (the norm output)
FREES = {
    "core_attn": ("attn_out_bf16",),
    "layernorm": ("attn_norm_out", "dense_norm_out", "router_in", "shared_fc1_in"),
    "moe_act": ("routed_act_out", "routed_clamped"),
    "mla_up_proj": ("latent_norm_out", "qkv"),
    "mlp": ("dense_pre_act", "dense_act_out"),
    "moe": ("routed_fc1_in", "routed_pre_act", "routed_clamped", "routed_act_out", *SHARED_GROUPS),
    "shared_experts": SHARED_GROUPS,
}
SUBSUMES = {"moe": ("moe_act", "shared_experts")}  # recomputing the layer repeats these already
GROUP_NAMES = (
    "layer_in",
    "attn_norm_out",
    "q_latent",
    "kv_latent",
    "latent_norm_out",
    "qkv",
    "attn_out_bf16",
    "attn_out",
    "mlp_norm_in",
    "dense_norm_out",
    "dense_pre_act",
    "dense_act_out",
    "router_in",
    "routed_fc1_in",
    "routed_pre_act",
    "routed_clamped",
    "routed_act_out",
    "shared_fc1_in",
    "shared_pre_act",
    "shared_act_out",
)
FREED_BY = {g: tuple(m for m in MODULES if g in FREES[m]) for g in GROUP_NAMES}


def module_applies(x: dict) -> dict[str, bool]:
    """Which modules the model has (a module it lacks frees nothing and costs nothing)."""
    return {
        "core_attn": True,
        "layernorm": True,
        "moe_act": x["is_moe"] > 0,
        "mla_up_proj": x["kv_lora"] > 0,
        "mlp": x["moe_share"] < 1.0,
        "moe": x["is_moe"] > 0,
        "shared_experts": x["is_moe"] * x["shared"] > 0,
    }


def kept_values(groups: dict[str, tuple[Any, Any]], freed) -> tuple[Any, Any]:
    """(BF16, low-precision) values per token and layer the groups keep, less those ``freed``."""
    b16 = sum(v[0] for g, v in groups.items() if g not in freed)
    low = sum(v[1] for g, v in groups.items() if g not in freed)
    return b16, low


def layer_activation_values(x: dict) -> tuple[tuple[Any, Any], ...]:
    """Values one layer keeps per token for the backward, per recompute policy (none, selective,
    full), as (kept in BF16, kept as low-precision GEMM inputs): :func:`layer_activation_groups`,
    less what the policy rebuilds. Selective recomputes norms and activation functions; full keeps
    only the layer input."""
    groups = layer_activation_groups(x)
    h = x["hidden"]
    return kept_values(groups, ()), kept_values(groups, SELECTIVE_FREES), (h, 0.0 * h)


def module_bits(rc) -> list[Any]:
    """Per module of :data:`MODULES`, whether policy ``rc`` (a number or an array) recomputes it."""
    bits = f.maximum(rc - SET_BASE, 0.0)
    return [(bits // 2**i) % 2 >= 1 for i in range(len(MODULES))]


# the columns of a row :func:`module_redo_seconds` reads beside the GEMM parts, ``a`` and ``ep``
REDO_KEYS = ("tp", "cp", "mbs")


def module_redo_seconds(P: Cols, x: dict, a, ep, g: dict | None = None) -> dict[str, tuple[Any, Any, Any]]:
    """Forward work one average layer repeats in the backward per recomputed module, for one
    micro-batch, as (GEMM, memory-bound, communication) seconds (core_attn: the attention forward,
    ``a``). GEMMs at the plan's efficiency (``g``: :func:`gemm_parts` of ``P``, where the caller has
    them); memory-bound work as values read and written at HBM bandwidth, with the casts of
    low-precision GEMM inputs rebuilt; mlp repeats its tensor-parallel gather and scatter,
    mla_up_proj its up-projections' gathers, moe its all-to-all (``ep``: the layer's exposed forward
    dispatch and combine) and host wait. A module the model lacks is 0. The rest reads only
    :data:`REDO_KEYS` of a row, so over a grid each distinct combination is priced once and spread
    to its rows (as :func:`tp_exposed_both`): the same numbers."""

    g = gemm_parts(P, x) if g is None else g
    own = _on_distinct_rows(P, x, REDO_KEYS, _redo_own)
    moe, has = x["moe_share"], module_applies(x)
    redo: dict[str, tuple[Any, Any, Any]] = {m: (0.0, 0.0, 0.0) for m in MODULES}
    redo["core_attn"] = (0.0, a, 0.0)
    redo["layernorm"] = (0.0, own["layernorm"], 0.0)
    if has["moe_act"]:
        redo["moe_act"] = (0.0, own["moe_act"], 0.0)
    if has["mla_up_proj"]:
        redo["mla_up_proj"] = (own["mla_up_gemm"], own["mla_up_proj"], own["mla_up_gathers"])
    if has["mlp"]:
        redo["mlp"] = ((1.0 - moe) * g["dense"], own["mlp"], own["mlp_tp"])
    if has["moe"]:  # (its host-bound waits without CUDA graphs: with_recompute, under eager_s)
        redo["moe"] = (moe * (g["shared"] + g["routed"]), own["moe"], ep + own["shared_tp"])
    if has["shared_experts"]:  # with their tensor-parallel gather and scatter
        redo["shared_experts"] = (moe * g["shared"], own["shared_experts"], own["shared_tp"])
    return redo


def _redo_own(P: Cols, x: dict) -> dict[str, Any]:
    """What :func:`module_redo_seconds` prices from :data:`REDO_KEYS` of a row alone: each
    module's memory-bound seconds (by name), the MLA up-projections' GEMM and gathers, the dense
    MLP's and the shared experts' tensor-parallel gather and scatter (0 where the model lacks one)."""
    T = tokens(P, x) / P["tp"]
    h, k, s, aw = x["hidden"], routed_copies(x), x["shared"], x["act_width"]
    fe, ff, moe = x["expert_ffn"], x["ffn"], x["moe_share"]
    has = module_applies(x)

    def mem(values, casts):
        return T * (values * x["act_bytes"] + casts * x["cast_bytes"]) / x["hbm_rate"]

    # the shared experts' gather and scatter, and FC1's amax all-reduce under current scaling
    shared_amax = moe * (s > 0) * amax_one(P, x)
    own: dict[str, Any] = {"shared_tp": tp_forward(shared_expert_tp_seconds(P, x), x) + shared_amax}
    # two norms, each reading and writing the hidden state; the outputs re-cast for their GEMMs
    own["layernorm"] = mem(4.0 * h, h + (1.0 - moe) * h + moe * (s > 0) * h)
    if has["moe_act"]:
        # the activation, and the clamp before it where the model has one (inside the checkpoint)
        own["moe_act"] = mem(moe * k * (aw * fe + clamp_values(x)), moe * k * fe)
    if has["mla_up_proj"]:  # the latent norms, the query and key-value up-projections and RoPE
        # without a query latent the query projection reads the hidden state, inside the same
        # checkpoint (Megatron-Core's qkv_up_proj_and_rope_apply): it runs again too (a review)
        q = x["q_width"]
        latents = x["q_lora"] + x["kv_lora"]
        own["mla_up_gemm"] = mla_up_gemm_seconds(P, x)
        # the up-projections run forward again: their sequence-parallel gathers too
        # (and current scaling's amax all-reduces of the two latents: amax_seconds)
        own["mla_up_gathers"] = tp_forward(mla_up_gather_seconds(P, x), x) + 2.0 * amax_one(P, x)
        own["mla_up_proj"] = mem(2.0 * (latents + q + x["k_width"]), latents)
    if has["mlp"]:
        own["mlp_tp"] = tp_forward(dense_mlp_tp_seconds(P, x), x) + (1.0 - moe) * amax_one(P, x)
        own["mlp"] = mem((1.0 - moe) * aw * ff, (1.0 - moe) * (h + ff))
    if has["moe"]:  # router, permutes, activations and combine; the experts' inputs re-cast
        values = moe * (h + 5.0 * k * h + aw * fe * (k + s) + k * expert_extra_values(x))
        casts = moe * ((k + s) * (h + fe) + (s > 0) * h)
        # (and the shared experts' tensor-parallel gather and scatter, which it subsumes: a review)
        own["moe"] = mem(values, casts)
    if has["shared_experts"]:
        own["shared_experts"] = mem(moe * s * aw * fe, moe * (s * fe + h))
    return own


def activation_bytes(P: Cols, x: dict, Ls) -> dict[str, Any]:
    """Activation bytes one micro-batch keeps on a stage per recompute policy (sequence parallel:
    / tp); the working set of the one layer full recompute rebuilds at a time; the micro-batch's
    FP32 logits (last stage)."""
    T = tokens(P, x) / P["tp"]
    per_value = [
        T * (b16 * x["act_bytes"] + low * x["gemm_in_bytes"]) for b16, low in layer_activation_values(x)
    ]
    return {  # offload keeps two layers on the GPU: the one computing and the one in transfer
        "act_bytes": (*(Ls * v for v in per_value), f.minimum(2.0, Ls) * per_value[0]),
        "work_bytes": per_value[0],
        "logits_bytes": tokens(P, x) * x["vocab"] / P["tp"] * x["logits_bytes"],
    }


# --- the step: pipeline, data parallelism, optimizer; memory per GPU ------------------------------


def stage_copies(P: Cols):
    """Pipeline stages each GPU holds: 2 under DualPipe (stage i and its mirror pp - 1 - i), else 1."""
    return 1.0 + dualpipe(P)


def params_per_gpu(P: Cols, x: dict) -> tuple[Any, Any]:
    """(dense, expert) parameters one GPU of the busiest stage holds before data-parallel sharding:
    its layers (:func:`stage_layers`, rounded up) and, on the first stage the input embedding and
    on the last the LM head (a copy of the embedding when tied): one of them under 1F1B, both on
    DualPipe's first rank (stage 0 and its mirror, the last), all on a single stage (a pre-training
    engineer's review: spread evenly, DualPipe's first rank of Llama 70B on PP16 held 1.8e9
    parameters more than charged)."""
    share = stage_share(P, x)
    body = x["dense_params"] - x["embedding_params"]
    whole = held_whole_params(P, x, share)
    dense = (body * share + _edge_params(P, x)) / P["tp"] + whole * (1.0 - 1.0 / P["tp"])
    return dense, x["routed_params"] / P["ep"] * share


def _edge_params(P: Cols, x: dict):
    """The busiest stage's embedding matrices (before tensor parallelism): the first stage's input
    embedding or the last's LM head, both on DualPipe's first rank, all on a single stage."""
    return ifelse(P["pp"] > 1.0, stage_copies(P) * x["vocab"] * x["hidden"], x["embedding_params"])


def plain_params(P: Cols, x: dict):
    """Parameters one GPU of the busiest stage holds (of :func:`params_per_gpu`'s) that no recipe
    quantizes: the input embedding and the LM head (Megatron-Core's LanguageModelEmbedding and the
    GPT model's output layer are Megatron's own vocabulary-parallel modules, not
    TransformerEngine's: / tp) and the routers (TopKRouter's weight, a plain parameter every
    tensor-parallel rank holds whole). They keep ``weight_bytes`` a parameter whatever the FP8 or
    FP4 recipe: no quantized copy beside them (``weight_cache_bytes``) and never FP8 primary
    weights (until a review, 2026-12-05, they took ``weight_mem_bytes``: NVFP4's 3.125 B, 1 B at
    per-tensor FP8 on a GPU whose FP8 GEMMs take any layout)."""
    routers = x["routed_layers"] * x["experts"] * x["is_moe"] * x["hidden"] * stage_share(P, x)
    return _edge_params(P, x) / P["tp"] + routers


def plain_weight_bytes(P: Cols, x: dict):
    """What :func:`plain_params` change in the weights a GPU keeps whole: ``weight_bytes`` a
    parameter, not ``weight_mem_bytes`` (negative where the recipe's width is the larger)."""
    return plain_params(P, x) * (x["weight_bytes"] - x["weight_mem_bytes"])


def stage_share(P: Cols, x: dict):
    """The busiest stage's share of the model's layers (its layers, rounded up, on each of the
    pipeline stages a GPU holds)."""
    return stage_copies(P) * stage_layers(P, x) / x["layers"]


def held_whole_params(P: Cols, x: dict, share: Any = None):
    """Parameters of the busiest stage that every tensor-parallel rank holds whole. MLA's
    down-projections are duplicated on every tensor-parallel rank (Megatron-Core's
    linear_q_down_proj / linear_kv_down_proj, parallel_mode "duplicated"; they run on the rank's
    sequence-parallel shard, so their FLOPs still split); so is each routed layer's router
    (Megatron-Core's TopKRouter weight, experts x hidden, a plain parameter on every rank, its
    gradient all-reduced as sequence-parallel's: :func:`tp_grad_seconds`). ``share``: the stage's
    share of the layers (:func:`params_per_gpu`'s). The routed layers spread over the stages as the
    layers do: the catalog has no layer pattern (DeepSeek-V3's 3 dense layers lead, so a stage of
    4 of its 58 routed layers holds 5 % more experts than charged; Nemotron's MoE layers interleave
    with Mamba and attention, so a share of the routed layers alone would charge 2.3x too many: a
    code review)."""
    share = stage_share(P, x) if share is None else share
    latents = x["q_lora"] + x["kv_lora"] + x["rope"]
    return (x["layers"] * latents + x["routed_layers"] * x["experts"] * x["is_moe"]) * x["hidden"] * share


def tp_grad_seconds(P: Cols, x: dict, inside: Any = None):
    """The all-reduce, once a step, of the gradients of the parameters every tensor-parallel rank
    holds whole (:func:`held_whole_params`) over the tensor-parallel group: Megatron-Core's
    finalize_model_grads, after the last backward and before the optimizer step, flattens them into
    one buffer and all-reduces it (_allreduce_non_tensor_model_parallel_grads: TE's duplicated
    linears and the router carry the sequence-parallel flag): a reduce-scatter and an all-gather of
    the stage's copies (hierarchical where the group leaves the domain: :func:`ring_seconds`) and
    the call's latency, exposed. The gradients go at the width the data-parallel ring sends them
    (``weight_bytes``: BF16 gradients, as ``--grad-reduce-in-bf16``; Megatron's default FP32 main
    gradients would double the bytes of both). None at tp 1. ``inside``: whether each tensor-
    parallel group shares one domain (:func:`in_domain`'s ``tp``), where the caller has it."""
    n = held_whole_params(P, x) * x["weight_bytes"]
    per = f.minimum(P["tp"], placed_domain(P, x))
    inside = in_domain(P, x)["tp"] if inside is None else inside
    return (P["tp"] > 1.0) * (2.0 * ring_seconds(n, P["tp"], per, x) + latency(inside, x))


def dp_groups(P: Cols) -> tuple[Any, Any]:
    """Data-parallel group sizes of the dense weights (dp x cp) and of the experts (tp cp dp / ep);
    DualPipe's mirror stage doubles each (both copies of a stage reduce its gradients together)."""
    c = stage_copies(P)
    return c * P["dp"] * P["cp"], c * P["dp"] * P["cp"] * P["tp"] / P["ep"]


def sharded(n, group, on):
    """n, divided over the group where sharding is on."""
    return n / ifelse(on, group, 1.0)


def state_bytes(P: Cols, x: dict, held: Any = None, groups: Any = None, plain: Any = None):
    """Weights, gradients and optimizer state per GPU by sharding stage, plus FSDP's two gathered
    layers (the one computing and the one prefetched): the sum of :func:`state_parts`. ``held``,
    ``groups``, ``plain``: :func:`params_per_gpu`, :func:`dp_groups` and
    :func:`plain_weight_bytes` of ``P`` where the caller has them already (so too below)."""
    weights, grads, optim = state_parts(P, x, held, groups, plain)
    return weights + grads + optim


def state_by_stage(
    P: Cols, x: dict, zs: tuple[int, ...], held: Any = None, groups: Any = None
) -> dict[int, Any]:
    """:func:`state_bytes` of ``P`` under each sharding stage ``zs`` (its ``zero`` aside): what no
    stage changes (the parameters held, the groups, the weights no recipe quantizes) priced once,
    the rest for every stage at once (a stage a row of a table: the numbers a stage at a time gives).
    ``held``, ``groups``: :func:`params_per_gpu` and :func:`dp_groups` of ``P``, where the caller
    has them."""
    import numpy as np

    held = params_per_gpu(P, x) if held is None else held
    groups = dp_groups(P) if groups is None else groups
    plain = plain_weight_bytes(P, x)
    state = state_bytes({**P, "zero": np.array(zs)[:, None]}, x, held, groups, plain)
    return {z: state[j] for j, z in enumerate(zs)}


def state_parts(
    P: Cols, x: dict, held: Any = None, groups: Any = None, plain: Any = None
) -> tuple[Any, Any, Any]:
    """(weights, gradients, optimizer state) bytes per GPU by sharding stage. Weights kept whole
    carry the recipe's cached quantized copy beside them (``weight_mem_bytes``: TransformerEngine
    keeps it across micro-batches), but those no recipe quantizes (:func:`plain_params`)
    ``weight_bytes``; FSDP's shards do not, its two gathered layers (the one computing and the one
    prefetched) do, counted with the weights."""
    z = P["zero"]
    held = params_per_gpu(P, x) if held is None else held
    groups = dp_groups(P) if groups is None else groups
    # the parameters no recipe quantizes keep weight_bytes where weights are kept whole
    weights = ifelse(z >= 3, 0.0, plain_weight_bytes(P, x) if plain is None else plain)
    grads = optim = 0.0
    for n, group in zip(held, groups, strict=True):
        weights = weights + n * ifelse(z >= 3, x["weight_bytes"] / group, x["weight_mem_bytes"])
        grads = grads + sharded(n, group, z >= 2) * x["grad_bytes"]
        optim = optim + sharded(n, group, z >= 1) * x["optim_bytes"]
    gathered = (z == 3) * 2.0 * (held[0] + held[1]) / stage_layers(P, x) * x["weight_mem_bytes"]
    return weights + gathered, grads, optim


def in_flight(P: Cols):
    """Micro-batches whose activations the first stage holds under 1F1B (interleaved: more;
    DualPipe: pp + 1, Table 2 of the DeepSeek-V3 report)."""
    first = f.minimum(P["mb"], P["pp"])
    return first * ifelse(P["vp"] > 1, 1.0 + (P["pp"] - 1.0) / (P["vp"] * P["pp"]), 1.0) + dualpipe(P)


def offloaded_bytes(P: Cols, m: dict, free, flight: Any = None):
    """Activation bytes an offloading plan (policy 3) sends to host memory: those of the in-flight
    micro-batches that do not fit in the ``free`` HBM the plan leaves (offload only the layers that
    must go, as Megatron's cpu_offloading_num_layers does); 0 for the other policies. ``flight``:
    :func:`in_flight` of ``P`` where the caller has it already (so too below)."""
    total = m["offload_bytes"] * (in_flight(P) if flight is None else flight)
    kept = ifelse(free >= total, total, ifelse(free > 0.0, free, 0.0))  # where: HBM may be unbounded
    return (P["rc"] == 3) * (total - kept)


def activation_peak_bytes(P: Cols, m: dict, flight: Any = None):
    """Activation bytes per GPU at the peak: the larger of the first stage's in-flight micro-batches
    and the last stage's one micro-batch with its logits, plus full recompute's working set."""
    flight = in_flight(P) if flight is None else flight
    acts = f.maximum(m["act_bytes"] * flight, m["act_bytes"] + m["logits_bytes"])
    return acts + m["work_bytes"]


def kept_activation_bytes(P: Cols, m: dict, flight: Any = None):
    """:func:`activation_peak_bytes` of an offloading plan that kept every activation (the layers
    it could send added to the two it keeps); the other policies' own."""
    return activation_peak_bytes(P, {**m, "act_bytes": m["act_bytes"] + m["offload_bytes"]}, flight)


def unsendable_bytes(P: Cols, m: dict, kept: Any = None, flight: Any = None):
    """An offloading plan's activation bytes per GPU that stay in HBM whatever it sends: those it
    would keep were it to keep them all (``kept``: :func:`kept_activation_bytes`, where computed
    already), less every layer it can send (the other policies': all)."""
    flight = in_flight(P) if flight is None else flight
    kept = kept_activation_bytes(P, m, flight) if kept is None else kept
    return kept - m["offload_bytes"] * flight


def memory_and_host_bytes(
    P: Cols, m: dict, x: dict, held: Any = None, groups: Any = None, known: Any = None
) -> tuple[Any, Any]:
    """Peak bytes per GPU and host bytes per GPU. An offloading plan sends to the host what it would
    hold were it to keep every activation (:func:`kept_activation_bytes`) beyond the HBM, at most
    every layer but the two it keeps (:func:`offloaded_bytes`), so its peak is the HBM exactly (or
    its base, already above): set, not summed, as base + (cap - base) can round one ulp above the
    cap and fail the fit. A plan whose activations all fit keeps them: its memory is no
    recompute's. ``known``: (state, host, activation peak, kept activation) bytes of the rows where
    the caller priced them already (:func:`~ipd_cli.engine.trainplan.evaluate`, fitting each plan)."""
    cap = x["hbm_cap"]
    if known is not None:
        state, host, acts, kept_acts = known
    else:
        flight = in_flight(P)
        state = state_bytes(P, x) if held is None else state_bytes(P, x, held, groups)
        kept_acts, acts = kept_activation_bytes(P, m, flight), activation_peak_bytes(P, m, flight)
        host = offloaded_bytes(P, m, cap - state - unsendable_bytes(P, m, kept_acts, flight), flight)
    base, kept = state + acts, state + kept_acts
    return ifelse(host > 0.0, ifelse(base > cap, base, cap), kept), host


def dp_seconds(P: Cols, x: dict, held: Any = None, groups: Any = None) -> tuple[Any, Any]:
    """(reduce-scatter, all-gather) seconds of one step's gradients and weights over the data-
    parallel groups (hierarchical across domains: :func:`ring_seconds`): the gradients at
    ``weight_bytes`` a parameter, the weights at ``gather_bytes`` (1 B where an FP8 recipe gathers
    its FP8 copy: efficiency.training_fp8_param_gather_bytes)."""
    held = params_per_gpu(P, x) if held is None else held
    groups = dp_groups(P) if groups is None else groups
    per_byte = 0.0  # a ring's time is linear in its bytes: one ring a byte a parameter, scaled
    for n, group, per in zip(held, groups, dp_per_domain(P, x), strict=True):
        per_byte = per_byte + ring_seconds(n, group, per, x)
    return per_byte * x["weight_bytes"], per_byte * x["gather_bytes"]


def dp_exposed_seconds(P: Cols, m: dict, x: dict, held: Any = None, groups: Any = None, rings: Any = None):
    """Data-parallel time the step cannot hide. ZeRO 0-1: one reduce-scatter behind the last
    micro-batch's backward and one all-gather behind the next forward; ZeRO-2 reduce-scatters every
    micro-batch; FSDP gathers weights for every forward and backward. The last layer's bucket is
    always exposed. ``rings``: :func:`dp_seconds` of ``P``, where the caller has it."""
    rs, ag = dp_seconds(P, x, held, groups) if rings is None else rings
    fwd, bwd, Ls, z, mb = m["fwd_s"], m["bwd_s"], m["stage_layers"], P["zero"], P["mb"]
    hide_rs, hide_ag = exposed(rs, bwd, x) + rs / Ls, exposed(ag, fwd, x) + ag / Ls
    fsdp = mb * (exposed(ag, fwd, x) + exposed(ag + rs, bwd, x) + (2.0 * ag + rs) / Ls)
    low = ifelse(z == 2, mb * hide_rs, hide_rs) + hide_ag
    return ifelse(z == 3, fsdp, low)


def optimizer_seconds(P: Cols, x: dict, held: Any = None, groups: Any = None):
    """One Adam step over the parameters this GPU updates (sharded from ZeRO-1 on), at HBM bandwidth."""
    held = params_per_gpu(P, x) if held is None else held
    groups = dp_groups(P) if groups is None else groups
    n = 0.0
    for k, group in zip(held, groups, strict=True):
        n = n + sharded(k, group, P["zero"] >= 1)
    return n * x["optim_step_bytes"] / x["hbm_rate"]


def p2p_seconds(P: Cols, x: dict, inside):
    """Pipeline sends of one micro-batch: activations forward and gradients back at each of the vp
    chunk boundaries of a stage (sequence parallel: / tp)."""
    sent = tokens(P, x) * x["hidden"] * x["act_bytes"] / P["tp"]
    return (P["pp"] > 1) * 2.0 * P["vp"] * (sent / link_bytes_per_s(inside, x) + latency(inside, x))


def bubble_seconds(P: Cols, m: dict, mb_s):
    """The pipeline bubble of one step (``mb_s``: one micro-batch's forward, backward and exposed
    sends). 1F1B: (pp - 1) / vp micro-batch times (interleaving splits each stage in vp chunks).
    DualPipe: (pp/2 - 1)(F&B + B - 3W), F&B the overlapped pair (``mb_s``), B the backward and W
    its weight-gradient GEMMs, which the schedule defers into the bubble."""
    dual = (P["pp"] / 2.0 - 1.0) * (mb_s + m["bwd_s"] - 3.0 * m["wgrad_s"])
    return ifelse(dualpipe(P), dual, (P["pp"] - 1.0) / P["vp"] * mb_s)


def bubble_bound(P: Cols):
    """A lower bound on the bubble in micro-batch times, for the search's bounds: (pp - 1) / vp
    under 1F1B; under DualPipe (pp/2 - 1) x 2/3, since F >= W, B >= 2W (the backward repeats the
    forward's GEMMs twice) give F + 2B - 3W >= 2/3 (F + B)."""
    return ifelse(dualpipe(P), (P["pp"] / 2.0 - 1.0) * 2.0 / 3.0, (P["pp"] - 1.0) / P["vp"])


def unpaired_share(P: Cols):
    """The share of a step's micro-batch chunks that Megatron's combined 1F1B (the expert
    all-to-all overlap, ``a2ao`` 1) runs without a chunk of another micro-batch to pair with, on
    the first pipeline rank (the most warmup: the critical path). Without a pipeline the first
    forward and the last backward run alone (``combined_1f1b_schedule_for_no_pipelining``): 1 / mb.
    Interleaved, the warmup forwards and as many cooldown backwards run alone: 2 (pp - 1) +
    (vp - 1) pp + 1 chunks of the mb x vp (Megatron's ``get_pp_rank_microbatches``: the interleaved
    warmup, plus one more with ``overlap_moe_expert_parallel_comm``), all of them where the warmup
    reaches them (mb = pp: nothing is paired). DualPipe's first rank overlaps a forward chunk with
    a backward one in its steps 4 (2 (mb/2 - pp + 1) pairs) and 5 (pp/2 - 1): 1.5 pp - 1 of its mb
    chunks run alone each way (deepseek-ai/DualPipe ``DualPipe.step``). Without interleaving (no
    combined 1F1B) 1."""
    mb, pp, vp = P["mb"], P["pp"], P["vp"]
    chunks = mb * vp
    warmup = f.minimum(2.0 * (pp - 1.0) + (vp - 1.0) * pp + 1.0, chunks)
    dual = f.minimum(1.5 * pp - 1.0, mb) / mb
    return ifelse(dualpipe(P), dual, ifelse(pp == 1, 1.0 / mb, ifelse(vp > 1, warmup / chunks, 1.0)))


def plan_terms(P: Cols, x: dict, held: Any = None, groups: Any = None) -> dict[str, Any]:
    """What :func:`step` and :func:`forward_seconds` read of a plan that neither its recompute
    policy nor its sharding stage changes (``P`` needs no ``rc`` or ``zero``): the share of
    chunks the 1F1B expert overlap leaves unpaired, a micro-batch's pipeline sends, the data-
    parallel rings' (reduce-scatter, all-gather) seconds and the tensor-parallel gradient all-
    reduce. A search pricing a plan under several policies or stages prices these once (issue 16:
    they were nearly half of a step's operations)."""
    inside = in_domain(P, x)
    return {
        "unpaired": unpaired_share(P),
        "p2p_s": p2p_seconds(P, x, inside["pp"]),
        "rings_s": dp_seconds(P, x, held, groups),
        "tp_grad_s": tp_grad_seconds(P, x, inside["tp"]),
    }


def step(
    P: Cols, m: dict, x: dict, known: Any = None, shared: Any = None, plan: Any = None
) -> dict[str, Any]:
    """Seconds per step, tokens per step and bytes per GPU of each plan (``m``: its micro-batch
    terms from :func:`micro_batch`; ``known``: :func:`memory_and_host_bytes`'s; ``shared``:
    (:func:`params_per_gpu`, :func:`dp_groups`) of ``P``, ``plan``: its :func:`plan_terms`, where
    the caller has them). DualPipe's sends hide behind the paired chunk's compute."""
    # (the same for memory, gradients and optimizer)
    held, groups = (params_per_gpu(P, x), dp_groups(P)) if shared is None else shared
    plan = plan_terms(P, x, held, groups) if plan is None else plan
    memory_bytes, host_bytes = memory_and_host_bytes(P, m, x, held, groups, known)
    # the 1F1B expert overlap's pairing hides nothing on the chunks that run alone
    alone = plan["unpaired"] * m.get("a2a_gain_s", 0.0)
    per_pass = f.maximum(alone, 0.0) / 2.0  # of it, a forward's or a backward's, on the mean chunk
    m = {**m, **offload_terms(P, m, host_bytes, x, per_pass)}  # an offloading plan's host transfer
    p2p = ifelse(dualpipe(P), exposed(plan["p2p_s"], m["fwd_s"] + m["bwd_s"], x), plan["p2p_s"])
    mb_s = m["fwd_s"] + m["bwd_s"] + p2p + alone
    bubble = bubble_seconds(P, m, mb_s)
    # the data-parallel collectives hide behind passes whose expert all-to-all the 1F1B pairing
    # leaves exposed as well: ZeRO 0-1's behind the last backward and the first forward, chunks
    # that run alone (warmup and cooldown), the others' behind any, the mean share of them
    gain = f.maximum(m.get("a2a_gain_s", 0.0), 0.0) / 2.0
    extra = ifelse(P["zero"] <= 1, gain, per_pass)
    dp = dp_exposed_seconds(
        P, {**m, "fwd_s": m["fwd_s"] + extra, "bwd_s": m["bwd_s"] + extra}, x, held, groups, plan["rings_s"]
    )
    opt = optimizer_seconds(P, x, held, groups)
    tp_grad = plan["tp_grad_s"]
    # the fixed time of a step beyond its modelled terms (efficiency.training_step_overhead_ms)
    fixed = x["step_fixed_s"]
    return {
        "step_s": P["mb"] * mb_s + bubble + dp + tp_grad + opt + fixed,
        "p2p_s": P["mb"] * p2p,
        "a2a_alone_s": P["mb"] * alone,  # expert all-to-alls of the chunks no other chunk pairs with
        "tokens_per_step": P["dp"] * P["mb"] * P["mbs"] * x["seq"],
        "memory_bytes": memory_bytes,
        "host_bytes": host_bytes,
        "bubble_s": bubble,
        "dp_exposed_s": dp,
        "tp_grad_s": tp_grad,
        "optimizer_s": opt,
        "fixed_s": fixed + 0.0 * opt,  # a column of the grid's shape, as the other terms
        "micro_batch_s": mb_s,
        **{k: m[k] for k in ("fwd_s", "bwd_s", "comm_s", "offload_s")},
    }


def forward_seconds(P: Cols, t: dict, x: dict, plan: Any = None):
    """A forward-only pass over the step's micro-batches (log-probabilities of the rollouts): each
    micro-batch's forward (``t``: :func:`micro_terms`; nothing is kept for a backward, so no
    recompute or offload) with its forward pipeline sends, the pipeline fill and drain, and FSDP's
    weight gathers; no gradient traffic and no optimizer step. ``plan``: :func:`plan_terms` of
    ``P``, where the caller has it."""
    if plan is None:
        inside = in_domain(P, x)
        p2p, (_, ag) = p2p_seconds(P, x, inside["pp"]), dp_seconds(P, x)
    else:
        p2p, (_, ag) = plan["p2p_s"], plan["rings_s"]
    # no backward to pair with: the 1F1B expert overlap's forward half hides nothing
    mb_s = t["fwd_s"] + p2p / 2.0 + t.get("a2a_gain_s", 0.0) / 2.0
    fsdp = (P["zero"] == 3) * P["mb"] * (exposed(ag, t["fwd_s"], x) + ag / t["stage_layers"])
    return (P["mb"] + (P["pp"] - 1.0) / P["vp"]) * mb_s + fsdp
