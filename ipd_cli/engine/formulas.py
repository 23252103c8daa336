"""The model's formulas, as plain arithmetic.

Every function here takes numbers and returns numbers, and uses only ``+ - * /
** //`` and comparisons, so the same code runs on Python floats and, element-wise,
on numpy arrays (sweeps). No constants from the world live here: every spec,
price and efficiency arrives as an argument from the catalog.

Units are SI unless the name says otherwise: seconds, bytes, FLOP, W.
"""

from __future__ import annotations

import functools
import math

SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0
HOURS_PER_YEAR = 8760.0
TERA = 1e12
GIGA = 1e9
GIBI = 2**30  # bytes in a GiB: HBM capacities (catalog hbm_gib)

_NUMBERS = (float, int)  # plain numbers (``float | int`` builds its union at every call)


def maximum(a, b):
    """max(a, b) that also works element-wise on arrays: the larger argument itself, exactly (the
    arithmetic form ``a + (b - a) * (b > a)`` was 1 ulp off for about one pair in eight, as
    ``minimum(0.7, 0.1)`` = 0.09999999999999998, and NaN where an argument is infinite)."""
    if isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS):
        return b if b > a else a
    import numpy as np

    return np.maximum(a, b)


def minimum(a, b):
    """min(a, b) that also works element-wise on arrays, exactly (see :func:`maximum`)."""
    if isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS):
        return b if b < a else a
    import numpy as np

    return np.minimum(a, b)


def ceil(x):
    """Ceiling for floats and arrays (floor division keeps the array type). A float array takes
    ``np.ceil`` where its elements are finite, the same numbers (-floor(-x) is ceil(x), signed
    zeros included) at a fiftieth of floor division's cost, and floor division at an infinity or
    NaN (infinity // 1 is NaN)."""
    if not isinstance(x, _NUMBERS):
        import numpy as np

        if type(x) is np.ndarray and x.dtype.kind == "f" and x.ndim:
            out = np.ceil(x)
            odd = ~np.isfinite(x)
            if odd.any():
                out[odd] = -((-x[odd]) // 1)
            return out
    return -((-x) // 1)


# --- FLOPs ---------------------------------------------------------------------------------------


def attention_flops_per_token_fwd(layers, seq_len, qk_dim, v_dim):
    """Forward attention FLOPs per token that 2N does not count (QK^T and AV).

    Per layer and token, QK^T costs 2 * seq * qk_dim FLOPs and AV 2 * seq * v_dim for full
    attention (qk_dim, v_dim: the query/key and value widths over all heads, equal for GQA/MHA;
    MLA's q/k heads carry the RoPE part, 192 against 128); a causal mask halves that on average.
    """
    return layers * seq_len * (qk_dim + v_dim)


def mla_context_flops_per_token(layers, kv_lora_rank, heads, nope_dim, v_dim, prefix, prompt):
    """FLOPs per prompt token of up-projecting an MLA prompt's cached context: each of the
    ``prefix`` cached latents (``kv_lora_rank`` wide) goes through the key and value
    up-projections (``heads x (nope_dim + v_dim)`` outputs, 2 FLOPs a weight) in every layer, once
    a prompt, shared by its ``prompt`` tokens. The prompt's attention runs on full heads (the
    compute-friendly form), so the cache's latents are expanded first (vLLM's chunked prefill:
    ``cache_kv_c_chunk @ W_UK``, ``@ W_UV``); a decode step reads the latents directly."""
    return 2.0 * layers * kv_lora_rank * heads * (nope_dim + v_dim) * prefix / prompt


def attention_head_share(head_dim, reference_dim, half_share):
    """Fused attention's efficiency at ``head_dim`` over its efficiency at ``reference_dim``.

    A score costs matmul work that grows with the head dim (4 x head_dim FLOPs forward) and a
    softmax exponential that does not, so its time is c x d + s and the FLOP rate d / (d + d0)
    with d0 = s / c. ``half_share``, the measured ratio at half the reference (in (0.5, 1]), fixes
    d0 = reference (1 - r) / (2 (r - 0.5)); a wider head than the reference is not credited (the
    share stops at 1).
    """
    d0 = reference_dim * (1.0 - half_share) / (2.0 * (half_share - 0.5))
    share = head_dim / (head_dim + d0) * (reference_dim + d0) / reference_dim
    return minimum(share, 1.0)


def band_attention_flops_per_token_fwd(layers, seq_len, window, qk_dim, v_dim):
    """Forward attention FLOPs per token of ``layers`` sliding-window layers: each query attends to
    the last ``window`` keys (itself among them), so on average over a sequence of ``seq_len`` to
    w - w (w - 1) / (2 seq) keys, w = min(window, seq) (a window covering the sequence is causal:
    (seq + 1) / 2), at 2 FLOPs a key and value width each (QK^T and AV)."""
    w = minimum(window, seq_len)
    keys = w - w * (w - 1.0) / (2.0 * seq_len)
    return layers * 2.0 * keys * (qk_dim + v_dim)


def training_flops_per_token(active_params, layers, seq_len, qk_dim, v_dim):
    """6N + 3x the forward attention term (forward + backward = 3 forward passes)."""
    return 6.0 * active_params + 3.0 * attention_flops_per_token_fwd(layers, seq_len, qk_dim, v_dim)


# --- Scale ---------------------------------------------------------------------------------------


def scale_exponent(retained_per_10x):
    """alpha in per-GPU throughput ~ (N / N_ref)^-alpha, from the share kept per 10x GPUs."""
    if hasattr(retained_per_10x, "__array__"):
        import numpy as np

        return -np.log10(retained_per_10x)
    return -math.log10(retained_per_10x)


def scale_efficiency(gpus, reference_gpus, alpha):
    """Share of per-GPU throughput kept at ``gpus``; 1 at or below the reference scale."""
    return minimum(1.0, (gpus / reference_gpus) ** (-alpha))


def gpus_for_rate(gpu_equivalents, reference_gpus, alpha):
    """Smallest N with N * scale_efficiency(N) >= gpu_equivalents (inverse of the above)."""
    above = (gpu_equivalents / reference_gpus**alpha) ** (1.0 / (1.0 - alpha))
    return gpu_equivalents + (above - gpu_equivalents) * (gpu_equivalents > reference_gpus)


# --- MoE all-to-all ------------------------------------------------------------------------------


def moe_a2a_bytes_per_token(experts_per_token, hidden_size, moe_layers, bytes_per_value, ep_degree):
    """Bytes one GPU sends per trained token for expert parallelism.

    Forward dispatch + combine and backward dispatch + combine: 4 transfers of
    k * hidden values per MoE layer; the share (ep-1)/ep leaves the GPU.
    """
    off_gpu = (ep_degree - 1.0) / ep_degree
    return 4.0 * experts_per_token * hidden_size * moe_layers * bytes_per_value * off_gpu


# --- Pre-training time ---------------------------------------------------------------------------


def seconds_per_token_per_gpu(flops_per_token, peak_flops, mfu, a2a_bytes, link_bytes_per_s, overlap):
    """Compute time at the achieved MFU plus the exposed (not overlapped) all-to-all time."""
    compute = flops_per_token / (peak_flops * mfu)
    exposed_comm = a2a_bytes / link_bytes_per_s * (1.0 - overlap)
    return compute + exposed_comm


def training_memory_bytes(total_params, bytes_per_param, seq_len, hidden_size, layers, act_bytes):
    """Weights + gradients + optimizer state, plus the full-recompute activation checkpoints
    of one sequence (one hidden vector per layer and token)."""
    return total_params * bytes_per_param + seq_len * hidden_size * layers * act_bytes


# --- Costs ---------------------------------------------------------------------------------------


def capital_recovery_factor(rate, years):
    """Annual payment per dollar of capex over ``years`` at ``rate`` (1/years when rate = 0)."""
    zero = rate == 0
    r = rate + zero * 1.0  # any non-zero stand-in; the zero case is replaced below
    # 1 - (1 + r)^-years as -expm1(-years log1p(r)): exact for a tiny rate, where the plain form
    # is 0 (an input review: a cost of capital of 1e-17 divided by zero)
    if hasattr(r, "__array__") or hasattr(years, "__array__"):
        import numpy as np

        paid = -np.expm1(-years * np.log1p(r))
    else:
        paid = -math.expm1(-years * math.log1p(r))
    crf = r / paid
    return crf + (1.0 / years - crf) * zero


def tco_usd_per_gpu_hour(
    capex_usd_per_gpu, crf, opex_fraction_per_year, utilisation, kw_per_gpu, pue, usd_per_kwh
):
    """Owning cost of one busy GPU-hour: capital and opex spread over the used hours, plus energy."""
    fixed_per_year = capex_usd_per_gpu * (crf + opex_fraction_per_year)
    return fixed_per_year / (HOURS_PER_YEAR * utilisation) + kw_per_gpu * pue * usd_per_kwh


def energy_mwh(gpu_hours, kw_per_gpu, pue):
    return gpu_hours * kw_per_gpu * pue / 1000.0


# --- Serving: KV cache, decode step, prefill, throughput and cost ---------------------------------


def kv_bytes_per_token_gqa(attention_layers, kv_heads, head_dim, kv_bytes):
    """GQA/MHA: a key and a value vector per KV head in each attention layer."""
    return 2.0 * attention_layers * kv_heads * head_dim * kv_bytes


def kv_bytes_per_token_mla(attention_layers, kv_lora_rank, rope_dim, kv_bytes):
    """MLA: one compressed latent plus the decoupled RoPE key per attention layer."""
    return attention_layers * (kv_lora_rank + rope_dim) * kv_bytes


def tensor_parallel_splits(tp, heads, kv_heads, ffn=0):
    """Whether tensor parallelism over ``tp`` GPUs splits a layer evenly, as Megatron-Core and the
    serving engines require: the attention heads, the KV heads or a multiple of them (more ranks
    than KV heads each hold a copy of one, as megatron-core 0.16+, vLLM and TensorRT-LLM do; MLA:
    pass the query heads, or 1 for its one latent) and the FFN width (0: none to split). Numbers
    or arrays."""
    return (heads % tp == 0) & ((kv_heads % tp == 0) | (tp % kv_heads == 0)) & (ffn % tp == 0)


def kv_copies(attention_tp, kv_heads):
    """Copies of each token's KV cache: tensor parallelism over more GPUs than KV heads repeats
    heads (MLA has one shared latent: pass kv_heads = 1)."""
    return attention_tp / minimum(attention_tp, kv_heads)


def routed_expert_params(total_params, active_params, expert_fraction):
    """Parameters in routed experts, from total = dense + R and active = dense + R * k/E."""
    return (total_params - active_params) / (1.0 - expert_fraction)


def experts_held_per_gpu(experts, ep, redundant_per_gpu=0.0):
    """Routed experts (weight slots) the fullest GPU of an expert-parallel group of ``ep`` holds:
    whole experts, so ceil(experts / ep) where ep does not divide them (DEP72 on 256 experts: 4
    on the fullest GPU, not 3.56); with redundant slots (EPLB) every GPU holds the same whole
    number of slots, at least ``experts / ep + redundant_per_gpu`` (the replicas fill the rest)."""
    return ceil(experts / ep + redundant_per_gpu - 1e-9)


def experts_touched_share(batch, expert_fraction):
    """Expected share of routed experts that at least one of ``batch`` tokens picks (top-k of E each)."""
    return 1.0 - (1.0 - expert_fraction) ** batch


def stored_weight_bytes(dense_weight_bytes, expert_weight_bytes, dense_replicas):
    """Weight bytes an instance holds: the dense part once per replica (attention data
    parallelism keeps a copy on every GPU), the routed experts once (sharded)."""
    return dense_weight_bytes * dense_replicas + expert_weight_bytes


def decode_weight_bytes(dense_weight_bytes, expert_weight_bytes, touched_share, dense_replicas):
    """Weight bytes one decode step reads: every copy of the dense part, plus the routed experts
    that some token of the batch picked."""
    return dense_weight_bytes * dense_replicas + expert_weight_bytes * touched_share


def decode_kv_bytes(batch, kv_per_token, context):
    """KV-cache bytes one decode step reads: every live sequence's cache at mean context ``context``."""
    return batch * kv_per_token * context


def attention_flops_per_position(attention_heads, head_dim, kv_lora_rank=0, rope_dim=0):
    """Decode attention FLOPs per cached position and layer (QK^T and AV at 2 FLOPs per multiply-add).

    GQA/MHA: 2 * head_dim for the score and 2 * head_dim for the value, per query head.
    MLA with absorbed projections: the score reads latent + RoPE key, the value reads the latent.
    """
    gqa = 4.0 * attention_heads * head_dim
    mla = 2.0 * attention_heads * (2.0 * kv_lora_rank + rope_dim)
    return gqa + (mla - gqa) * (kv_lora_rank > 0)


def roofline_seconds(bytes_moved, flops, bytes_per_s, flops_per_s):
    """Time of a phase that must move ``bytes_moved`` and do ``flops``: the larger of the two."""
    return roofline_of(bytes_moved / bytes_per_s, flops / flops_per_s)


def roofline_of(memory_s, compute_s):
    """:func:`roofline_seconds` of a phase's memory and compute times."""
    return maximum(memory_s, compute_s)


def allreduce_bytes_per_gpu(tokens, hidden_size, layers, bytes_per_value, group):
    """Bytes each GPU sends for one ring all-reduce per layer of ``tokens * hidden`` values in a
    group of ``group`` GPUs: 2 (n - 1) / n of the data."""
    return layers * tokens * hidden_size * bytes_per_value * 2.0 * (group - 1.0) / group


def tp_collective_bytes_per_gpu(batch, hidden_size, layers, bytes_per_value, gpus):
    """Tensor parallelism: two all-reduces per layer (after attention and after the FFN)."""
    return 2.0 * allreduce_bytes_per_gpu(batch, hidden_size, layers, bytes_per_value, gpus)


def ep_collective_bytes_per_gpu(batch, hidden_size, layers, experts_per_token, bytes_per_value, gpus):
    """Bytes each GPU sends per decode step under expert parallelism with data-parallel attention.

    Each GPU holds ``batch / g`` sequences; per MoE layer it dispatches each token's hidden
    vector to its k experts and receives the results back (combine); (g - 1) / g of the
    experts sit on other GPUs.
    """
    return (
        2.0 * layers * batch / gpus * experts_per_token * hidden_size * bytes_per_value * (gpus - 1.0) / gpus
    )


def step_overhead_seconds(fixed_s, per_sequence_s, batch):
    """Per-step overhead: a fixed part (launches, collective latency) and a part per sequence."""
    return fixed_s + per_sequence_s * batch


def host_bound_step_seconds(gpu_s, host_s, overlapped):
    """A decode step with the engine's host loop: where the stack overlaps it with the GPU (the next
    step is prepared while this one runs) the larger of the two, else their sum."""
    return maximum(gpu_s, host_s) if overlapped else gpu_s + host_s


def decode_step_seconds(weight_s, attention_s, collective_s, overhead_s):
    """One decode step: weight GEMMs and attention run as separate kernels, so their rooflines add;
    then the tensor/expert-parallel collectives and the fixed per-step overhead."""
    return weight_s + attention_s + collective_s + overhead_s


def max_concurrency(usable_bytes_per_gpu, gpus, weight_bytes, kv_per_token, context_peak):
    """Sequences whose full KV (input + output tokens) fits next to the weights."""
    return (usable_bytes_per_gpu * gpus - weight_bytes) // (kv_per_token * context_peak)


def prefill_flops_per_token(active_params, attention_layers, qk_dim, v_dim, input_tokens):
    """2N plus causal attention over the prompt (see :func:`attention_flops_per_token_fwd`)."""
    return 2.0 * active_params + attention_flops_per_token_fwd(attention_layers, input_tokens, qk_dim, v_dim)


def prefill_seconds(input_tokens, flops_per_token, achieved_flops_per_s):
    """Compute-bound prefill of one request on its instance (FLOP/s already times the MFU)."""
    return input_tokens * flops_per_token / achieved_flops_per_s


def instance_output_tokens_per_s(batch, output_tokens, prefill_s, step_s, speculative, own_s=0.0):
    """Output tokens/s of an instance that keeps ``batch`` requests in flight (Little's law: the
    batch over each request's time in the instance, times its output tokens).

    Each request needs its prefill and ``output_tokens / speculative`` decode steps; the
    prefills of the ``batch`` requests take turns on the same instance, each ``prefill_s`` of its
    time, and a request's own prompt takes ``own_s`` longer than that share to its first token
    (alone on its attention rank, through the pipeline stages one after another).
    """
    return batch * output_tokens / (batch * prefill_s + own_s + output_tokens * step_s / speculative)


def aggregated_tpot_seconds(batch, output_tokens, prefill_s, step_s, speculative):
    """Time per output token after the first, as benchmarks report it ((latency - TTFT) / output
    tokens): the decode steps plus the prefills of the ``batch - 1`` other requests that take turns
    on the instance while this one decodes; its own prefill is its time to first token."""
    return ((batch - 1) * prefill_s + output_tokens * step_s / speculative) / output_tokens


def usd_per_million_tokens(usd_per_gpu_hour, tokens_per_s_per_gpu):
    """SemiAnalysis InferenceMAX identity: $/GPU-h / (tok/s/GPU * 3600) * 1e6."""
    return usd_per_gpu_hour / (tokens_per_s_per_gpu * SECONDS_PER_HOUR) * 1e6


def usd_per_million_tokens_at_traffic(usd_per_gpu_hour, tokens_per_s, gpus):
    """$ per million tokens of a traffic of ``tokens_per_s`` on ``gpus`` GPUs kept for it around
    the clock (``usd_per_gpu_hour``: their price for every hour)."""
    return usd_per_million_tokens(usd_per_gpu_hour, tokens_per_s / gpus)


def tokens_per_s_per_mw(tokens_per_s_per_gpu, kw_per_gpu, pue):
    """Tokens/s per MW of all-in power (system kW per GPU times PUE)."""
    return tokens_per_s_per_gpu / (kw_per_gpu * pue) * 1000.0


# --- Serving deployments: imbalance, collectives, grouped GEMMs, pools ---------------------------


def log(x):
    """Natural logarithm for floats and arrays."""
    if hasattr(x, "__array__"):
        import numpy as np

        return np.log(x)
    return math.log(x)


def max_over_mean(reference, units, per_unit, reference_units, reference_per_unit):
    """Load of the busiest of ``units`` (GPUs or ranks) over the mean, from one measured reference.

    Each unit sums the load of ``per_unit`` random items (experts, sequences); the busiest of n
    units sits about sqrt(2 ln n) standard deviations above the mean, and the spread of a sum of
    m items falls as 1/sqrt(m). So the excess over 1 scales as sqrt((ln n / m) / (ln n0 / m0));
    one unit is always balanced.
    """
    scale = (log(maximum(units, 1.0)) / per_unit) / (log(reference_units) / reference_per_unit)
    return 1.0 + (reference - 1.0) * scale**0.5


def harmonic_number(n):
    """H(n) = 1 + 1/2 + ... + 1/n for n >= 0 (0 at n = 0), for floats and arrays: the asymptotic
    series ln n + gamma + 1/(2n) - 1/(12 n^2) + 1/(120 n^4), within 0.003 of the sum at n = 1 and
    1e-4 from n = 2 on."""
    euler_gamma = 0.5772156649015329  # a mathematical constant, not a measurement
    m = maximum(n, 1.0)
    series = log(m) + euler_gamma + 1.0 / (2.0 * m) - 1.0 / (12.0 * m**2) + 1.0 / (120.0 * m**4)
    return series * (n >= 1)


def attention_dp_context_wait_steps(ranks, sequences_per_rank, arrivals_per_step, timeout_steps):
    """Mean decode steps a new request's prompt waits under an attention-DP balance that holds a
    rank's prompt until every other rank has one to run in the same iteration, or ``timeout_steps``
    have passed (TensorRT-LLM's ``attention_dp_config``: enable_balance, timeout_iters).

    The balance holds prompts only while every rank has a sequence decoding (TensorRT-LLM's
    ``_balance_adp_requests`` releases them at once otherwise): a prompt lands on the rank whose
    request just finished, which keeps ``sequences_per_rank - 1`` decoding, so below 2 sequences a
    rank nothing waits.

    A window opens when a prompt arrives while the other ranks decode. It closes when each of the
    other ``ranks - 1`` ranks has a prompt too: with arrivals landing on ranks evenly at random
    (a request freed a slot there), that takes ranks x H(ranks - 1) arrivals on average (the
    coupon collector), so ranks x H(ranks - 1) / arrivals_per_step steps; or at the timeout. The
    prompt that opened the window waits all of it; the arrivals_per_step x window others that
    arrive in it, half of it on average. One rank never waits.
    """
    cover_steps = ranks * harmonic_number(ranks - 1.0) / maximum(arrivals_per_step, 1e-300)
    window = minimum(timeout_steps, cover_steps)
    others = arrivals_per_step * window
    return (window + others * window / 2.0) / (1.0 + others) * (ranks > 1) * (sequences_per_rank >= 2)


def paid_gpus(gpus, domain):
    """GPUs an instance pays for: instances that do not tile the scale-up domain strand the rest
    of it (16-GPU instances on a 72-GPU rack: 4 fit, 72 / 4 = 18 GPUs paid each)."""
    per_domain = maximum(domain // maximum(gpus, 1), 1)
    inside = domain / per_domain
    return gpus + (inside - gpus) * (gpus < domain)


def pipeline_paid_gpus(gpus, stage_gpus, stages, domain):
    """GPUs a pipeline of ``stages`` stages of ``stage_gpus`` pays for: as one instance of ``gpus``
    (:func:`paid_gpus`) where its stages tile the scale-up domains or the whole pipeline fits in
    one (its hand-offs on the scale-up link, the rest of the domain a hole the other pool may
    fill: :func:`hole_fill`); a pipeline over several domains whose stages, smaller than a domain,
    do not divide it sits domain // stage_gpus stages to a domain and each pays its share of the
    stranded rest (three 64-GPU stages on 72-GPU racks: 216)."""
    whole = paid_gpus(gpus, domain)
    return whole + (stages * paid_gpus(stage_gpus, domain) - whole) * stages_spread(
        gpus, stage_gpus, stages, domain
    )


def stages_spread(gpus, stage_gpus, stages, domain):
    """Whether a pipeline's stages sit domain // stage_gpus to a domain, each domain stranding the
    rest: a pipeline over several domains whose stages, smaller than a domain, do not divide it."""
    return (stages > 1) * (gpus > domain) * (stage_gpus < domain) * (domain % maximum(stage_gpus, 1) != 0)


def pipeline_hole_fill(gpus, stage_gpus, stages, other_gpus, domain):
    """:func:`hole_fill` for a pipeline: where :func:`pipeline_paid_gpus` pays per stage (a pipeline
    over several domains whose stages do not divide them), each of the stages / (domain //
    stage_gpus) domains it takes leaves domain mod stage_gpus GPUs, where instances of
    ``other_gpus`` fit (three 64-GPU stages on 72-GPU racks: three 8-GPU holes, one 8-GPU instance
    each); elsewhere :func:`hole_fill` of the whole instance."""
    per_domain = maximum(domain // maximum(stage_gpus, 1), 1)
    spread = (stages / per_domain) * ((domain - per_domain * stage_gpus) // maximum(other_gpus, 1))
    whole = hole_fill(gpus, other_gpus, domain)
    return whole + (spread - whole) * stages_spread(gpus, stage_gpus, stages, domain)


def hole_fill(gpus, other_gpus, domain):
    """Instances of ``other_gpus`` GPUs that fit, per instance of ``gpus`` GPUs, in the GPUs those
    instances leave unused in their scale-up domains (two 32-GPU instances on a 72-GPU rack leave
    8: one 8-GPU or two 4-GPU instances, so 0.5 or 1 per 32-GPU instance). Instances of a domain or
    more leave no hole (:func:`paid_gpus` charges them none)."""
    small = gpus < domain
    per_domain = maximum(domain // maximum(gpus, 1), 1)
    hole = domain - per_domain * gpus
    return ((hole * small) // maximum(other_gpus, 1)) / per_domain


def deployment_gpus(n_prefill, prefill_gpus, n_decode, decode_gpus, domain):
    """GPUs a disaggregated deployment pays for with its two pools packed into scale-up domains
    together: what one pool's instances strand (:func:`paid_gpus`) the other pool's instances may
    fill (five 8-GPU prefill instances and one 32-GPU decode instance fill a 72-GPU rack: 72, not
    5 x 8 + 36). Per deployment of a fleet of identical ones, as :func:`paid_gpus` prices one
    instance; the cheaper of filling the decode pool's holes with prefill instances and the other
    way round."""
    return packed_gpus(
        n_prefill,
        paid_gpus(prefill_gpus, domain),
        hole_fill(decode_gpus, prefill_gpus, domain),
        n_decode,
        paid_gpus(decode_gpus, domain),
        hole_fill(prefill_gpus, decode_gpus, domain),
    )


def packed_gpus(n_prefill, paid_prefill, prefill_per_decode, n_decode, paid_decode, decode_per_prefill):
    """:func:`deployment_gpus` from each pool's paid GPUs per instance and how many of the other
    pool's instances fit in the GPUs one of its instances strands (``prefill_per_decode``: prefill
    instances per decode instance), so that a search computes those once per pair of instances."""
    into_decode = (
        n_decode * paid_decode + maximum(0.0, n_prefill - n_decode * prefill_per_decode) * paid_prefill
    )
    into_prefill = (
        n_prefill * paid_prefill + maximum(0.0, n_decode - n_prefill * decode_per_prefill) * paid_decode
    )
    return minimum(into_decode, into_prefill)


def collective_seconds(count, bytes_per_gpu, link_bytes_per_s, latency_s):
    """``count`` collectives, each moving ``bytes_per_gpu`` over the link after a fixed latency."""
    return count * (bytes_per_gpu / link_bytes_per_s + latency_s)


def all_to_all_bytes_per_gpu(tokens_per_gpu, experts_per_token, hidden_size, bytes_per_value, ep):
    """One dispatch (or combine): each token's hidden vector to its k experts, (ep-1)/ep elsewhere."""
    return tokens_per_gpu * experts_per_token * hidden_size * bytes_per_value * (ep - 1.0) / ep


def remote_ranks_per_token(experts, experts_per_token, ep):
    """Mean number of other EP ranks holding at least one of a token's ``experts_per_token``
    experts, drawn without replacement from ``experts`` spread evenly over ``ep`` ranks: a rank
    misses all k with probability C(E - E/ep, k) / C(E, k)."""
    import numpy as np

    ep = np.asarray(ep, dtype=float)
    per_rank = experts / np.maximum(ep, 1.0)
    miss = np.ones_like(ep)
    for i in range(int(experts_per_token)):
        miss = miss * np.clip((experts - per_rank - i) / (experts - i), 0.0, 1.0)
    return (ep - 1.0) * (1.0 - miss)


def remote_domains(span_gpus, domain_gpus, experts_per_token):
    """Other scale-up domains a token's k routed experts fall in, on average, when its expert group
    spreads evenly over ``span_gpus`` consecutive GPUs in domains of ``domain_gpus``: q whole
    domains and a remainder of r GPUs. A pick misses a domain holding g of the span with
    probability 1 - g / span, all k picks (with replacement: E >> k) with (1 - g / span)^k; a token
    on a whole domain's GPU reaches the q - 1 other whole ones and the remainder, one on the
    remainder's GPU the q whole ones; averaged over the span's GPUs. With no remainder this is
    (n - 1)(1 - (1 - 1/n)^k), n = span / domain (DeepSeek-V3: k 8 over 4 nodes, 2.70); 128 GPUs
    over 72-GPU racks (72 + 56) reach 0.994 other racks, where 128 / 72 = 1.78 even domains gave
    0.777."""
    q = span_gpus // domain_gpus
    r = span_gpus - q * domain_gpus

    def reached(g):  # a domain holding g of the span's GPUs: the chance some pick lands in it
        # (floored at 0: a whole domain larger than the span has q = 0 copies, so no weight, but
        # its negative base would give NaN for a fractional k or an overflow)
        return 1.0 - maximum(0.0, 1.0 - g / span_gpus) ** experts_per_token

    whole = reached(domain_gpus)  # (once: a power over every row)
    on_whole = (q - 1.0) * whole + reached(r)
    on_rest = q * whole
    return maximum(0.0, (q * domain_gpus * on_whole + r * on_rest) / span_gpus)


def off_domain_share(span_gpus, domain_gpus):
    """The share of a token's expert picks (uniform over ``span_gpus`` consecutive GPUs in domains
    of ``domain_gpus``: q whole domains and a remainder of r) that land outside the token's own
    domain, averaged over the span's GPUs: 1 - (q D^2 + r^2) / span^2 (1 - 1/q with no remainder;
    0 inside one domain). Plain all-to-all sends that share of its copies over the NICs."""
    q = span_gpus // domain_gpus
    r = span_gpus - q * domain_gpus
    return 1.0 - (q * domain_gpus * domain_gpus + r * r) / (span_gpus * span_gpus)


def all_to_all_bytes_per_gpu_per_rank(tokens_per_gpu, remote_ranks, hidden_size, bytes_per_value):
    """One dispatch (or combine) that sends a token's hidden vector once to each other rank
    holding any of its experts (DeepEP's normal kernels, used for prefill: is_token_in_rank),
    not once per expert as the low-latency decode kernels do."""
    return tokens_per_gpu * remote_ranks * hidden_size * bytes_per_value


def rl_run(
    steps_per_refresh,
    refreshes_per_year,
    step_s,
    gpu_hours,
    usd,
    energy_kwh,
    goodput,
    staleness_factor,
    periodic_s_per_step=0.0,
):
    """An RL run (the fields of ``rl.run``) from one step's seconds, GPU-hours, cost and energy: a
    refresh cycle of ``steps_per_refresh`` steps of a synchronous run (the schedule's unit) and
    ``refreshes_per_year`` of them a year. An off-policy run takes ``staleness_factor`` (phi) steps
    for each, each step carries ``periodic_s_per_step`` more seconds of the run's GPUs (its share of
    the periodic evaluations and checkpoints), and a whole run loses the share 1 - ``goodput`` of
    its time to failures and restarts, as a pre-training run does: each scheduled step costs
    :func:`run_step_cost_factor` steps."""
    per_year = steps_per_refresh * refreshes_per_year
    k = run_step_cost_factor(goodput, staleness_factor, step_s, periodic_s_per_step)
    return {
        "steps_per_refresh": steps_per_refresh,
        "refreshes_per_year": refreshes_per_year,
        "goodput": goodput,
        "staleness_steps_factor": staleness_factor,
        "periodic_s_per_step": periodic_s_per_step,
        "wall_days_per_refresh": steps_per_refresh * k * step_s / SECONDS_PER_DAY,
        "gpu_hours_per_refresh": steps_per_refresh * k * gpu_hours,
        "usd_per_refresh": steps_per_refresh * k * usd,
        "gpu_hours_per_year": per_year * k * gpu_hours,
        "usd_per_year": per_year * k * usd,
        "energy_mwh_per_year": per_year * k * energy_kwh / 1000,
    }


def rl_steps_bought(budget_usd, usd_per_step, goodput, staleness_factor, step_s, periodic_s_per_step):
    """Scheduled RL steps a budget buys, each paid :func:`run_step_cost_factor` steps (a yearly
    average; fewer than one is warned)."""
    return budget_usd / (
        usd_per_step * run_step_cost_factor(goodput, staleness_factor, step_s, periodic_s_per_step)
    )


def post_training_cost(
    usd_per_step,
    kwh_per_step,
    steps_per_year,
    horizon_years,
    goodput,
    staleness_factor,
    step_s,
    periodic_s_per_step,
):
    """(USD, MWh) of an RL schedule over a horizon: every scheduled step paid
    :func:`run_step_cost_factor` times, its energy too (a lost step draws power, and so do the GPUs
    during an evaluation or a checkpoint; every generated rollout, kept or not, counts)."""
    k = run_step_cost_factor(goodput, staleness_factor, step_s, periodic_s_per_step)
    steps = steps_per_year * horizon_years * k
    return usd_per_step * steps, kwh_per_step * steps / KWH_PER_MWH


def run_steps_per_step(goodput, staleness_factor):
    """Steps a run pays for each step of its schedule: phi (an off-policy run's extra optimiser
    steps) over the goodput (the share of a run's time in useful steps)."""
    return staleness_factor / goodput


def run_step_cost_factor(goodput, staleness_factor, step_s, periodic_s_per_step):
    """Steps' worth of the run's GPU time a scheduled step costs: :func:`run_steps_per_step`, each
    step lengthened by its share of the periodic evaluations and checkpoints
    (``periodic_s_per_step`` over the step's ``step_s``; 0 adds nothing, exactly)."""
    return run_steps_per_step(goodput, staleness_factor) * (1 + periodic_s_per_step / step_s)


def per_interval(seconds, interval_steps):
    """A periodic cost's seconds per optimiser step: ``seconds`` every ``interval_steps`` steps
    (None: never, 0)."""
    return 0.0 if interval_steps is None else seconds / interval_steps


def periodic_s_per_step(eval_s, eval_interval_steps, checkpoint_exposed_s, checkpoint_interval_steps):
    """Seconds of the run's GPUs each optimiser step carries for the periodic work: its share of
    an evaluation and of what a checkpoint exposes (:func:`per_interval` of each)."""
    return per_interval(eval_s, eval_interval_steps) + per_interval(
        checkpoint_exposed_s, checkpoint_interval_steps
    )


def checkpoint_write_bytes_per_s(run_gpus, writer_gpus, share_bytes_per_s_per_gpu, node_bytes_per_s_per_gpu):
    """The rate a checkpoint reaches shared storage: the storage's aggregate write bandwidth for the
    run's GPUs (each GPU's share of a storage sized with the cluster), unless the GPUs that hold the
    state cannot write that fast over their own nodes' links."""
    return minimum(run_gpus * share_bytes_per_s_per_gpu, writer_gpus * node_bytes_per_s_per_gpu)


def checkpoint_write_seconds(state_bytes, write_bytes_per_s):
    """A checkpoint written to shared storage: the training state's bytes at its write rate."""
    return state_bytes / write_bytes_per_s


def checkpoint_staging_seconds(state_bytes, writer_gpus, host_bytes_per_s):
    """An asynchronous checkpoint's copy of the state to host memory, each GPU its share over its
    own host link (Megatron-LM's async save stages the tensors before the background write)."""
    return state_bytes / writer_gpus / host_bytes_per_s


def checkpoint_exposed_seconds(write_s, staging_s, interval_steps, step_s, asynchronous):
    """The seconds a checkpoint stops the run: blocking, the whole write; asynchronous (Megatron-LM's
    async save), the copy of the state to host memory (``staging_s``) and the part of the
    background write still running when the next checkpoint is due, ``interval_steps`` steps of
    ``step_s`` later."""
    if not asynchronous:
        return write_s
    return staging_s + maximum(0.0, write_s - interval_steps * step_s)


def two_batch_seconds(compute_s, all_to_all_s, comm_sm_share, overlap):
    """A prompt's compute and its expert all-to-alls, one after the other, or (``overlap``: the
    stack runs two-batch overlap) split in two half-batches whose dispatch and combine run while
    the other half computes, the compute then short of the SMs the communication kernels hold:
    max(compute / (1 - share), all-to-all). An operator turns it on where it pays (no all-to-all
    to hide: it does not), so the lesser of the two."""
    serial = compute_s + all_to_all_s
    if not overlap:
        return serial
    return minimum(serial, maximum(compute_s / (1.0 - comm_sm_share), all_to_all_s))


def grouped_gemm_seconds(weight_bytes, flops, bytes_per_s, flops_per_s):
    """Routed-expert GEMMs: streaming the touched experts' weights and their math do not overlap at
    few tokens per expert (DeepGEMM: 61 % of bandwidth and 47 % of peak at 256 tokens per expert),
    so the two times add instead of taking the larger."""
    return grouped_gemm_of(weight_bytes / bytes_per_s, flops / flops_per_s)


def grouped_gemm_of(memory_s, compute_s):
    """:func:`grouped_gemm_seconds` of the experts' streaming and math times."""
    return memory_s + compute_s


def floor_combined_seconds(floor_s, work_s, exponent):
    """A layer's time from the floor its kernels take (launch, ramp, small kernels) and the work
    its rooflines give: (floor^p + work^p)^(1/p). p = 1 adds them (a fixed cost at every batch);
    a large p takes the larger (the floor hides under work once the kernels are busy)."""
    if isinstance(exponent, _NUMBERS) and exponent == 1:  # the sum, the same numbers: x^1 is x
        # exactly (the catalog's p; each power costs a serving step's grid two multiplications)
        return floor_s + work_s
    return (floor_s**exponent + work_s**exponent) ** (1.0 / exponent)


def speculative_tokens_per_s_per_user(tokens_per_step, step_s):
    """Accepted tokens per second of one sequence: each verify step accepts ``tokens_per_step``
    tokens on average (1 + accepted drafts; 1 without speculation)."""
    return tokens_per_step / step_s


def prefill_instances_per_decode(decode_requests_per_s, prefill_s_per_request):
    """Prefill instances needed to feed one decode instance without either pool starving."""
    return decode_requests_per_s * prefill_s_per_request


def gpus_for_traffic(copies, deployment_gpus):
    """Whole GPUs of ``copies`` whole copies of a deployment of ``deployment_gpus`` GPUs (a fraction
    where instances share a domain): ceil(copies x GPUs). The copies a traffic takes are at least
    :func:`deployment_copies` (those that carry it), more where its queues need them. Floats and
    arrays: the serving search sizes every configuration at once."""
    return ceil(copies * deployment_gpus)


def whole_systems(gpus, gpus_per_system):
    """The whole nodes or racks that hold ``gpus`` GPUs, packed: ceil(gpus / gpus_per_system) (the
    last one's rest idle, or left to other work). Floats and arrays."""
    return ceil(gpus / gpus_per_system)


# a count that is whole but for floating-point rounding is not rounded up to the next one (a pool
# sized for a traffic serves exactly that traffic; its rate x GPUs can round a hair below it)
COUNT_SLACK = 1e-12


def whole_count(x):
    """ceil(x) for counts of instances or copies, with :data:`COUNT_SLACK` (floats and arrays)."""
    return ceil(x * (1.0 - COUNT_SLACK))


def deployment_copies(tokens_per_s, tokens_per_s_per_gpu, deployment_gpus):
    """Whole copies of a deployment that serve ``tokens_per_s`` output tokens/s."""
    return whole_count(tokens_per_s / (tokens_per_s_per_gpu * deployment_gpus))


# --- Weight transfer -----------------------------------------------------------------------------

# Weight tensors of a transformer checkpoint, one per projection and norm (the architecture's
# definitions, as Hugging Face checkpoints name them): attention q, k, v, o (GQA/MHA), or MLA's
# q (q_a, its norm, q_b with a query latent), kv_a, its norm, kv_b and o, with a query and a key
# norm where the model has them (Qwen3's QK-Norm), the projections' biases and sinks where it has
# them (Qwen2.5, gpt-oss); two norms per layer; an FFN of 3 matrices (gate, up, down; 2 without the
# gate) per dense layer, per shared and per routed expert of a layer with routed experts (or the
# few tensors a checkpoint fuses them in, gpt-oss), and a router there with its bias where it has
# one; the embedding, the output head (untied) and the final norm. DeepSeek-V3: the 45,395 its
# checkpoint index lists; it was 47,460 with experts and a dense MLP on every layer, Nemotron 3
# Ultra (2-matrix experts on 48 of 108 layers) 166,970 against about 50,000.
NORMS_PER_LAYER = 2


def attention_tensors(mla, query_latent, qk_norm, biases=0, sinks=0):
    """Weight tensors of one layer's attention (:data:`NORMS_PER_LAYER` apart): the projections,
    ``biases`` bias vectors on them (Qwen2.5: q, k, v; gpt-oss: all four), a per-head sink tensor
    where ``sinks`` (gpt-oss)."""
    # MLA: q or (q_a, norm, q_b), kv_a, norm, kv_b, o
    return 4 + mla * (1 + 2 * query_latent) + 2 * qk_norm + biases + sinks


def weight_tensors(
    layers, routed_layers, expert_tensors, shared_experts, ffn_matrices, attention, router, tied
):
    """Tensors a weight update iterates over (a rollout engine loads each one): ``attention`` per
    layer (:func:`attention_tensors`), ``ffn_matrices`` per FFN, and on each of the ``routed_layers``
    layers with a router (``router`` tensors: its weight, and a bias where it has one) the routed
    experts' ``expert_tensors`` (:func:`routed_expert_tensors`, per layer) and ``shared_experts``
    shared FFNs (dense models: 0 routed layers)."""
    dense_ffn = (layers - routed_layers) * ffn_matrices
    routed = routed_layers * (router + expert_tensors + shared_experts * ffn_matrices)
    return layers * (attention + NORMS_PER_LAYER) + dense_ffn + routed + 3 - tied


def routed_expert_tensors(experts, ffn_matrices, fused=0):
    """One layer's routed-expert tensors: a tensor per expert and matrix, or ``fused`` where the
    checkpoint holds all of a layer's experts in a few tensors (gpt-oss: gate_up_proj, down_proj
    and their biases, 4). NeMo RL's nccl_reshard sends them on its bulk path."""
    return fused if fused else experts * ffn_matrices


def misc_tensors(weight_tensor_count, expert_tensor_count, scaled):
    """Tensors NeMo RL's nccl_reshard sends on its misc path (packed broadcast, then load_weights):
    every tensor but the routed experts' (attention, norms, routers, dense and shared FFNs, the
    embedding and head), plus a scale sibling per weight tensor when the wire format carries block
    scales (FP8)."""
    return weight_tensor_count - expert_tensor_count + weight_tensor_count * scaled


def cross_domain_share(trainer_gpus, inference_gpus, domain_gpus, node_gpus, colocated):
    """Share of the update's bytes that leave a scale-up domain (over NICs) rather than stay on it.

    Colocated: none. Both roles inside one domain: none. A domain of several nodes (an NVL72 rack
    of 4-GPU trays) holds trainer and rollout trays in proportion, so a receiver finds its sender
    in its own domain with probability domain / all GPUs. Node-sized domains hold one role each.
    """
    gpus = trainer_gpus + inference_gpus
    if colocated or gpus <= domain_gpus:
        return 0.0
    if domain_gpus > node_gpus:
        return 1.0 - domain_gpus / gpus
    return 1.0


def split_seconds(byte_count, cross_share, nic_bytes_per_s, scale_up_bytes_per_s):
    """(seconds over the NIC, seconds over the scale-up link) for bytes split by ``cross_share``;
    the two paths run at once."""
    return byte_count * cross_share / nic_bytes_per_s, byte_count * (1 - cross_share) / scale_up_bytes_per_s


def gather_cross_share(group_gpus, domain_gpus):
    """Share of the bytes a GPU gathers from a group of ``group_gpus`` that come from other
    scale-up domains (over NICs): none when the group fits one domain, else 1 - domain / group."""
    return maximum(0.0, 1.0 - domain_gpus / group_gpus)


def stage_turns_seconds(turn_s, stage_gather_s, stages):
    """Pipeline stages that take turns on one broadcast lock (slime, Miles): every stage's turn
    (``turn_s`` over all stages: wire and the engines' loads) in a row, or one stage's own chain
    (its gather, then its turn) when the gathers are longer than the other stages' turns."""
    return maximum(turn_s, stage_gather_s + turn_s / stages)


def distinct_targets(instance_gpus, trainer_gpus, stages):
    """Distinct engine ranks one sender of a stage fills (Miles P2P: the senders of a stage are
    mapped round-robin onto one instance's ranks; identical ranks of other replicas reuse the copy)."""
    return ceil(instance_gpus / (trainer_gpus / stages))


def replica_seconds(distinct, tensors_per_stage, seconds_per_tensor, shard_bytes_per_stage, host_bytes_per_s):
    """Loading a CPU engine replica on a sender: every tensor of its stage once per distinct engine
    rank it fills, and that rank's shard of the stage copied to host memory."""
    return distinct * (tensors_per_stage * seconds_per_tensor + shard_bytes_per_stage / host_bytes_per_s)


def ipc_seconds(model_bytes, bytes_per_s):
    """Colocated: the full model handed to the engine on every GPU (CUDA IPC, rebuild, load_weights)."""
    return model_bytes / bytes_per_s


def offload_seconds(state_bytes, gpus, host_bytes_per_s):
    """Training state out to host memory and back in, each GPU over its own host link."""
    return 2 * state_bytes / gpus / host_bytes_per_s


def min_gpus_for_bytes(total_bytes, bytes_per_gpu):
    """Whole GPUs needed to hold ``total_bytes`` at ``bytes_per_gpu`` each."""
    return int(math.ceil(total_bytes / bytes_per_gpu - 1e-9))


# --- Lifecycle: tasks solved per dollar ----------------------------------------------------------

DAYS_PER_YEAR = 365.0
USD_PER_KUSD = 1000.0
TOKENS_PER_MILLION = 1e6
KWH_PER_MWH = 1000.0
KW_PER_MW = 1000.0
PERCENT = 100.0


def success_after_retries(p, attempts):
    """Share of tasks solved when each attempt succeeds with ``p`` and ``attempts`` are allowed:
    1 - (1 - p)^m, computed as -expm1(m log1p(-p)), which keeps its digits where p is tiny (a
    review: 1 - (1 - p)^m cancelled, so 3,700 steps at 0.99 each gave 4.70 expected attempts of
    at most 3, and 5,000 steps gave none). Numbers or arrays."""
    if hasattr(p, "shape") or hasattr(attempts, "shape"):
        import numpy as np

        with np.errstate(divide="ignore"):  # p = 1: log1p(-1) = -inf, expm1(-inf) = -1
            return -np.expm1(attempts * np.log1p(-p))
    return 1.0 if p >= 1 else -math.expm1(attempts * math.log1p(-p))


def expected_attempts(p, attempts):
    """Mean attempts per task when each succeeds with p and at most ``attempts`` are made."""
    return success_after_retries(p, attempts) / p


def workflow_success(step_reliability, steps):
    """An attempt of ``steps`` independent steps, each right with ``step_reliability``."""
    return step_reliability**steps


def learning_curve(x, r0, asymptote, midpoint, exponent):
    """ScaleRL's sigmoid: r0 at x = 0, rising to ``asymptote``; half way at ``midpoint``."""
    positive = x > 0
    x = x + (1.0 - x) * (1 - positive)  # x <= 0 gives r0 (x is then 1, and the gain is dropped)
    return r0 + (asymptote - r0) / (1.0 + (midpoint / x) ** exponent) * positive


def learning_curve_mean(x, r0, asymptote, midpoint, exponent):
    """The learning curve's score averaged over a horizon whose RL samples accrue evenly to ``x``:
    the mean of :func:`learning_curve` at x u, u from 0 to 1 (what the tasks served over the
    horizon see: r0 on its first day, the curve at x on its last; a procurement review: the
    score at x was credited to every task from the first day). Gauss-Legendre over u = v^4, which
    puts the nodes where the curve rises at few samples (within 1e-9 of the closed form at exponent
    1, r0 + (A - r0) (1 - c ln(1 + 1 / c)), c = midpoint / x, from x / midpoint 1e-3 to 1e3; about
    1e-4 at an exponent of 40), or that closed form where every exponent is 1. Arrays broadcast (a
    sweep's points)."""
    import numpy as np

    if np.all(np.asarray(exponent) == 1):  # the closed form (a code review: the nodes' axis cost a
        # large sampled sweep 1-4 s and 1.6 GB where the built-in curves all have exponent 1)
        xs = np.asarray(x, dtype=float)
        positive = xs > 0
        c = np.asarray(midpoint, dtype=float) / np.where(positive, xs, 1.0)
        with np.errstate(invalid="ignore"):
            gain = np.where(positive, 1.0 - c * np.log1p(1.0 / c), np.where(np.isnan(xs), np.nan, 0.0))
        mean = r0 + (np.asarray(asymptote) - r0) * gain
        return mean if np.ndim(mean) else float(mean)
    v, w = _legendre_unit()
    # a sweep's arrays (of x or of the curve's parameters) gain the nodes' axis
    r0, asymptote, midpoint, exponent = (
        np.asarray(a, dtype=float)[..., None] if np.ndim(a) else a
        for a in (r0, asymptote, midpoint, exponent)
    )
    score = learning_curve(np.asarray(x, dtype=float)[..., None] * v**4, r0, asymptote, midpoint, exponent)
    mean = ((score - r0) * 4 * v**3 * w).sum(axis=-1) + (r0[..., 0] if np.ndim(r0) else r0)
    return mean if np.ndim(mean) else float(mean)


@functools.lru_cache(maxsize=1)
def _legendre_unit():
    """Gauss-Legendre nodes and weights on [0, 1] (64 of them)."""
    from ipd_cli.engine.legendre import leggauss

    t, w = leggauss()
    return (t + 1) / 2, w / 2


def amortised_share(horizon_years, amortisation_years, deployments):
    """Share of a one-off cost charged to a horizon: H / amortisation years / deployments sharing it."""
    return horizon_years / amortisation_years / deployments


def output_tokens_per_day(tasks_per_day, expected_attempts, requests_per_task, output_tokens_per_request):
    """A scenario's serving traffic: every attempt's requests' output tokens, per day."""
    return tasks_per_day * expected_attempts * requests_per_task * output_tokens_per_request


def deployment_gpu_hours(gpus, horizon_years):
    """GPU-hours of a deployment rented around the clock over the horizon."""
    return gpus * HOURS_PER_YEAR * horizon_years


def per_kusd(count, usd):
    """How many of ``count`` one thousand dollars buys when all of them cost ``usd``."""
    return USD_PER_KUSD * count / usd


def points_per_kusd(score_gain, usd):
    """Percentage points of score gained per thousand dollars."""
    return score_gain * PERCENT / (usd / USD_PER_KUSD)


def gpus_in_power_budget(site_mw, kw_per_gpu, pue, gpus_per_system):
    """GPUs of the whole systems (nodes, racks) a site power budget holds at the system's all-in
    power: a rack that does not fit powers none of its GPUs. The system's power is rebuilt from
    its power per GPU, so a site of exactly n systems divides to n less a rounding error: the
    floor forgives one part in 1e9 (10 H100 nodes at 0.1326 MW gave 9, a code review)."""
    systems = site_mw * KW_PER_MW / (kw_per_gpu * gpus_per_system * pue)
    return (systems * (1.0 + 1e-9)) // 1.0 * gpus_per_system


def tasks_per_day(gpus, tokens_per_s_per_gpu, tokens_per_task, success_per_task):
    """Tasks solved per day by ``gpus`` serving at ``tokens_per_s_per_gpu``."""
    return gpus * tokens_per_s_per_gpu * SECONDS_PER_DAY / tokens_per_task * success_per_task


def beyond_a_year(days: float) -> bool:
    """Whether ``days`` (a schedule's days a year) run past the year, a rounding's hair allowed."""
    return days > DAYS_PER_YEAR * (1 + 1e-9)
