"""The model's formulas, as plain arithmetic.

Every function here takes numbers and returns numbers, and uses only ``+ - * /
** //`` and comparisons, so the same code runs on Python floats and, element-wise,
on numpy arrays (sweeps). No constants from the world live here: every spec,
price and efficiency arrives as an argument from the catalog.

Units are SI unless the name says otherwise: seconds, bytes, FLOP, W.
"""

from __future__ import annotations

import math

SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0
HOURS_PER_YEAR = 8760.0
TERA = 1e12
GIGA = 1e9


def maximum(a, b):
    """max(a, b) that also works element-wise on arrays."""
    return a + (b - a) * (b > a)


def minimum(a, b):
    """min(a, b) that also works element-wise on arrays."""
    return a + (b - a) * (b < a)


def ceil(x):
    """Ceiling for floats and arrays (floor division keeps the array type)."""
    return -((-x) // 1)


# --- FLOPs ---------------------------------------------------------------------------------------


def attention_flops_per_token_fwd(layers, seq_len, attn_dim):
    """Forward attention FLOPs per token that 2N does not count (QK^T and AV).

    Per layer and token, QK^T and AV each cost 2 * seq * attn_dim multiply-adds
    for full attention; a causal mask halves that on average: 2 * seq * attn_dim.
    """
    return 2.0 * layers * seq_len * attn_dim


def training_flops_per_token(active_params, layers, seq_len, attn_dim):
    """6N + 3x the forward attention term (forward + backward = 3 forward passes)."""
    return 6.0 * active_params + 3.0 * attention_flops_per_token_fwd(layers, seq_len, attn_dim)


# --- Scale ---------------------------------------------------------------------------------------


def scale_exponent(retained_per_10x):
    """alpha in per-GPU throughput ~ (N / N_ref)^-alpha, from the share kept per 10x GPUs."""
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
    if rate == 0:
        return 1.0 / years
    return rate / (1.0 - (1.0 + rate) ** (-years))


def tco_usd_per_gpu_hour(
    capex_usd_per_gpu, crf, opex_fraction_per_year, utilisation, kw_per_gpu, pue, usd_per_kwh
):
    """Owning cost of one busy GPU-hour: capital and opex spread over the used hours, plus energy."""
    fixed_per_year = capex_usd_per_gpu * (crf + opex_fraction_per_year)
    return fixed_per_year / (HOURS_PER_YEAR * utilisation) + kw_per_gpu * pue * usd_per_kwh


def energy_mwh(gpu_hours, kw_per_gpu, pue):
    return gpu_hours * kw_per_gpu * pue / 1000.0
