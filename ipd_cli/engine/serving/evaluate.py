"""The deployment model over whole columns of configurations (numpy arrays, no Python loops).

Two tables: *layouts* (one row per instance size, pipeline stages, attention TP/DP, expert
parallelism, EPLB and KV precision) and *rows* (a layout at one batch, aggregated or
disaggregated). The same plain formulas of :mod:`ipd_cli.engine.formulas` run on both.

Per decode step of an instance holding ``B`` sequences (each pipeline stage works on a
micro-batch ``m = B / pp`` and holds ``1/pp`` of the layers), on the busiest GPU:

* dense weights (attention, shared experts, embeddings): read ``W_dense / (pp t)``; GEMM FLOPs
  for the tokens of the busiest attention rank (``m / d`` times the attention-DP imbalance);
* attention: that rank's KV cache at the mean live context, split over its ``t`` GPUs (repeated
  where TP outnumbers the KV heads); math at the KV precision;
* routed experts: the touched experts' weights ``W_experts / (pp s)`` and the busiest GPU's
  expert FLOPs (times the expert load imbalance), as a grouped GEMM whose streaming and math
  times add;
* collectives: per layer, all-reduces over the attention TP group and EP dispatch + combine,
  each its bytes over the link plus a fixed latency; pipeline hand-offs between stages;
* a fixed per-step overhead plus a part per sequence of the scheduler rank.

Prefill is compute-bound at the prefill MFU (routed experts at the MoE share, times their
imbalance), plus its collectives. Aggregated serving lets each request's prefill take its turn
on the instance, which slows every user; disaggregated serving pays for a prefill pool sized so
neither pool starves.
"""

from __future__ import annotations

from typing import Any

from ipd_cli.engine import formulas as f

from .physics import Physics

Columns = dict[str, Any]
TP, TEP, DEP = 0, 1, 2  # layout families


def layout_terms(ph: Physics, lay: Columns) -> Columns:
    """Memory, rates and prefill time of each layout (independent of the batch)."""
    import numpy as np

    g, pp, s, t, e = lay["g"], lay["pp"], lay["s"], lay["t"], lay["e"]
    d, kv, eplb = s // t, lay["kv"], lay["eplb"]
    kv_tok = np.asarray(ph.kv_per_token)[kv]
    copies = f.kv_copies(t, ph.kv_heads)
    slots = 1.0 + eplb * ph.eplb_slots * e / ph.experts
    weights = ph.dense_bytes / (pp * t) + ph.expert_bytes / (pp * s) * slots
    free = ph.hbm_bytes - weights
    kv_seq = kv_tok * copies / t / pp * ph.context_peak
    rank_max = np.floor(np.clip(free * ph.kv_fraction / kv_seq, 0.0, float(ph.max_batch_per_rank)))
    out = dict(
        d=d,
        kv_tok=kv_tok,
        copies=copies,
        attn_rate=np.asarray(ph.attn_rate)[kv],
        weights_gpu=weights,
        free_gpu=free,
        rank_max=rank_max,
        paid=f.paid_gpus(g, ph.domain),
        link=np.where(s > ph.domain, ph.link_out, ph.link_up),
        latency=np.where(s > ph.domain, ph.latency_out, ph.latency_up),
        pp_link=np.where(g > ph.domain, ph.link_out, ph.link_up),
        pp_latency=np.where(g > ph.domain, ph.latency_out, ph.latency_up),
        imb_ep=_expert_imbalance(ph, e, eplb),
        imb_dp=_dp_imbalance(ph, d),
        n_ar=np.where(t > 1, np.where(lay["fam"] == DEP, 1, 2), 0),
        n_a2a=np.where(lay["fam"] == DEP, 2, 0),
    )
    out["prefill_s"] = _prefill_seconds(ph, lay, out)
    return out


def _expert_imbalance(ph: Physics, e, eplb):
    import numpy as np

    if not ph.moe:
        return np.ones(len(e))
    ref = np.where(eplb == 1, ph.expert_imbalance_eplb, ph.expert_imbalance)
    per_gpu = ph.experts / np.maximum(e, 1)
    imb = f.max_over_mean(ref, e, per_gpu, ph.expert_reference_ep, ph.expert_reference_per_gpu)
    return np.where(e > 1, imb, 1.0)


def _dp_imbalance(ph: Physics, d):
    import numpy as np

    imb = f.max_over_mean(ph.dp_imbalance, d, 1.0, ph.dp_reference_ranks, 1.0)
    return np.where(d > 1, imb, 1.0)


def _prefill_seconds(ph: Physics, lay: Columns, x: Columns):
    """Seconds of instance time per request's prefill (compute at the prefill MFU, collectives)."""
    g, pp, s, t, e = lay["g"], lay["pp"], lay["s"], lay["t"], lay["e"]
    dense = ph.prefill_dense_flops_per_token / (g * ph.prefill_rate)
    experts = ph.expert_flops_per_token / (g * ph.prefill_rate * ph.moe_share) * x["imb_ep"]
    compute = ph.isl * (dense + experts)
    cb, h = ph.collective_bytes, ph.hidden
    ar = ph.isl * h * cb * 2.0 * (t - 1.0) / t / x["d"]
    a2a = f.all_to_all_bytes_per_gpu(ph.isl / s, ph.top_k, h, cb, e) * x["imb_ep"]
    comm = ph.layers / pp * (x["n_ar"] * ar + x["n_a2a"] * a2a) / x["link"]
    hand_off = (pp > 1) * ph.isl * h * cb / x["pp_link"]
    return compute + comm + hand_off


def step_terms(ph: Physics, lay: Columns, x: Columns, batch) -> Columns:
    """One decode step (seconds) of each row's instance at ``batch`` sequences, with its parts.

    ``lay`` and ``x`` are the layout columns and :func:`layout_terms` already taken at each row.
    """
    import numpy as np

    pp, s, t, e, d = lay["pp"], lay["s"], lay["t"], lay["e"], x["d"]
    m = batch / pp  # micro-batch per pipeline stage
    tokens = m / d * x["imb_dp"]  # the busiest attention rank
    dense_bytes = ph.dense_bytes / (pp * t)
    dense_flops = tokens * ph.dense_flops_per_token / (pp * t)
    kv_bytes = tokens * x["kv_tok"] * x["copies"] / t / pp * ph.context_mean
    attn_flops = tokens * ph.attn_flops_per_token / (pp * t)
    touched = f.experts_touched_share(m, ph.top_k / ph.experts)
    expert_bytes = ph.expert_bytes / (pp * s) * touched
    expert_flops = m * ph.expert_flops_per_token / (pp * s) * x["imb_ep"]
    dense_s = f.roofline_seconds(dense_bytes, dense_flops, ph.hbm_rate, ph.gemm_rate)
    attn_s = f.roofline_seconds(kv_bytes, attn_flops, ph.hbm_rate, x["attn_rate"])
    expert_s = f.grouped_gemm_seconds(expert_bytes, expert_flops, ph.hbm_rate, ph.gemm_rate * ph.moe_share)
    cb, h = ph.collective_bytes, ph.hidden
    ar = m / d * h * cb * 2.0 * (t - 1.0) / t
    a2a = f.all_to_all_bytes_per_gpu(m / s, ph.top_k, h, cb, e) * x["imb_ep"]
    coll = (
        ph.layers
        / pp
        * (
            f.collective_seconds(x["n_ar"], ar, x["link"], x["latency"])
            + f.collective_seconds(x["n_a2a"], a2a, x["link"], x["latency"])
        )
    )
    hand_off = (pp > 1) * (m * h * cb / x["pp_link"] + x["pp_latency"])
    fixed = ph.overhead_s + ph.layers * ph.overhead_per_layer_s
    overhead = f.step_overhead_seconds(fixed, ph.overhead_per_sequence_s, np.ceil(batch / d))
    step = pp * (dense_s + attn_s + expert_s + coll + hand_off) + overhead
    memory = pp * (dense_bytes + kv_bytes + expert_bytes) / ph.hbm_rate
    compute = pp * (
        dense_flops / ph.gemm_rate
        + attn_flops / x["attn_rate"]
        + expert_flops / (ph.gemm_rate * ph.moe_share)
    )
    return dict(
        step_s=step,
        memory_s=memory,
        compute_s=compute,
        collective_s=pp * (coll + hand_off),
        overhead_s=overhead,
        touched=touched,
    )


def aggregated(ph: Physics, x: Columns, batch, step_s) -> Columns:
    """Prefills take turns with decode on the instance: every user waits for them."""
    decode = ph.osl * step_s / ph.speculative
    prefill = batch * x["prefill_s"]
    per_instance = f.instance_output_tokens_per_s(batch, ph.osl, x["prefill_s"], step_s, ph.speculative)
    return dict(
        tokens_per_s_per_gpu=per_instance / x["paid"],
        tokens_per_s_per_user=per_instance / batch,
        deployment_gpus=x["paid"],
        decode_instances=batch * 0 + 1,
        prefill_instances=batch * 0,
        ttft_s=x["prefill_s"],
        prefill_share=prefill / (prefill + decode),
    )


def disaggregated(
    ph: Physics, x: Columns, batch, step_s, prefill: Columns, n_prefill=None, n_decode=None
) -> Columns:
    """A pool of ``P`` prefill instances feeds ``D`` decode instances.

    ``prefill`` holds, per row, the chosen prefill instance's seconds per request (``prefill_s``)
    and paid GPUs (``paid``). ``D`` runs over 1 .. max_decode_instances, ``P`` is the fewest
    prefill instances that keep up with them or one fewer, and the pair with the most tokens/s
    per GPU is kept; the slower pool sets the rate (a starved decode pool holds fewer sequences,
    so its users are no slower than one step per token). Pinned pools (``n_prefill``,
    ``n_decode``, as deployed) may not match.
    """
    import numpy as np

    rate = batch * ph.speculative / step_s  # output tokens/s of one decode instance
    ratio = f.prefill_instances_per_decode(rate / ph.osl, prefill["prefill_s"])
    top = n_decode or ph.max_decode_instances
    decode = np.arange(1 if n_decode is None else n_decode, top + 1, dtype=float)
    k = len(decode)
    if n_prefill is None:  # the fewest prefill instances that keep up, or one fewer (prefill-bound)
        decode = np.concatenate([decode, decode])
    pp_paid, pf_s, dec_paid = prefill["paid"], prefill["prefill_s"], x["paid"]
    pick = np.empty(len(rate), dtype=np.intp)
    # rows x pool pairs, in blocks of rows whose temporaries stay in the CPU cache (3-4x faster than
    # whole columns); the same operations in the same order as on whole columns, so the same values
    block = max(1, min(len(rate), 2048))
    pools, gpus, served, tmp = (np.empty((block, len(decode))) for _ in range(4))
    for lo in range(0, len(rate), block):
        hi = min(lo + block, len(rate))
        p, g, s, t = pools[: hi - lo], gpus[: hi - lo], served[: hi - lo], tmp[: hi - lo]
        if n_prefill is None:
            exact = ratio[lo:hi, None] * decode[:k]
            np.ceil(exact * (1 - 1e-12), out=p[:, :k])
            np.floor(exact, out=p[:, k:])
        else:
            p.fill(float(n_prefill))
        np.maximum(p, 1.0, out=p)
        np.multiply(p, pp_paid[lo:hi, None], out=g)
        np.add(g, np.multiply(decode, dec_paid[lo:hi, None], out=t), out=g)
        # the slower pool sets the rate; decode users never get faster than one step per token
        np.divide(np.multiply(p, ph.osl, out=s), pf_s[lo:hi, None], out=s)
        np.minimum(np.multiply(decode, rate[lo:hi, None], out=t), s, out=s)
        pick[lo:hi] = np.argmax(np.divide(s, g, out=s), axis=1)
    n_dec = decode[pick]
    if n_prefill is None:
        exact = ratio * n_dec
        n_pre = np.maximum(np.where(pick < k, np.ceil(exact * (1 - 1e-12)), np.floor(exact)), 1.0)
    else:
        n_pre = np.full(len(rate), max(float(n_prefill), 1.0))
    total = n_pre * pp_paid + n_dec * dec_paid
    served = np.minimum(n_dec * rate, n_pre * ph.osl / pf_s)
    return dict(
        tokens_per_s_per_gpu=served / total,
        tokens_per_s_per_user=ph.speculative / step_s,
        deployment_gpus=total,
        decode_instances=n_dec,
        prefill_instances=n_pre,
        ttft_s=pf_s,
        prefill_share=n_pre * pp_paid / total,
    )
