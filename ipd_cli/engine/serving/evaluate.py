"""The deployment model over whole columns of configurations (numpy arrays, no Python loops).

Two tables: *layouts* (one row per instance size, pipeline stages, attention TP/DP, expert
parallelism, EPLB and KV precision) and *rows* (a layout at one batch, aggregated or
disaggregated). The same plain formulas of :mod:`ipd_cli.engine.formulas` run on both.

Per decode step of an instance holding ``B`` sequences (each pipeline stage works on a
micro-batch ``m = B / pp``, at least one sequence, and holds ``1/pp`` of the layers), on the
busiest GPU:

* dense weights (attention, shared experts, embeddings): read ``W_dense / (pp t)``, but MLA's
  down-projections and the MoE routers whole on every rank (``W_rep / pp``: engines replicate
  them); GEMM FLOPs for
  the tokens of the busiest attention rank (``m / d`` times the attention-DP imbalance);
* attention: that rank's KV cache at the mean live context, split over its ``t`` GPUs (repeated
  where TP outnumbers the KV heads); math at the KV precision;
* routed experts: the touched experts' weights ``W_experts / (pp s)`` and the busiest GPU's
  expert FLOPs (times the expert load imbalance), as a grouped GEMM whose streaming and math
  times add;
* collectives: per layer, all-reduces over the attention TP group and EP dispatch + combine,
  each its bytes over the link plus a fixed latency; pipeline hand-offs between stages;
* each layer takes at least the floor its kernels need: layer time = (floor^p + work^p)^(1/p)
  over the layer's rooflines (p = 1 adds the floor at every batch); a fixed per-step overhead
  and a part per sequence of the scheduler rank and token it verifies; the host's own loop per
  sequence of a scheduler rank (the stack's ``host_us_per_sequence``, where priced) runs while the
  GPU runs another step where the stack overlaps them (the step is the larger), else it adds;
* speculative decoding at draft depth k: the step verifies 1 + k tokens per sequence (dense,
  attention and expert math, expert selection and collectives scale with them; weights and the
  KV cache are read once), and drafts k tokens one after another, each through the draft's
  layer(s) and the output head at the sequences' batch: the first of them over the verify's
  1 + k tokens a sequence (the engines' captured draft-extend pass, padded to that width, which
  also feeds an EAGLE draft's fusing projection), the others over one; each pass also pays the
  kernels around its layer(s) (embedding, the head's gather, sampling, the next pass's inputs)
  as ``draft_pass_overhead_layers`` layers' floors; a step accepts
  ``spec_tokens[k]`` tokens per sequence on average, so tokens/s per user = accepted tokens /
  step.

Prefill is compute-bound: its dense GEMMs (every token of the prompt at once, a large-M GEMM) at
the GEMM efficiency decode reaches at batch, its causal attention at the prefill MFU of the
precision the attention runs at (the KV cache's: an FP4 model's prompt attention is FP8 or BF16
work), the routed experts at the weights' prefill MFU times the MoE share (times their
imbalance), plus its collectives;
its dispatch and combine send each token once to each other rank holding any of its experts
(DeepEP's normal kernels), where decode's low-latency kernels send one copy per expert.
Aggregated serving lets each request's prefill take its turn on the instance, which slows every
user; disaggregated serving pays for a prefill pool sized so neither pool starves.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ipd_cli.engine import formulas as f

from .physics import Physics
from .queueing import RESOLVED_LOAD, WaitsWithin

Columns = dict[str, Any]
TP, TEP, DEP = 0, 1, 2  # layout families


def layout_terms(ph: Physics, lay: Columns) -> Columns:
    """Memory, rates and prefill time of each layout (independent of the batch)."""
    import numpy as np

    g, pp, s, t, e = lay["g"], lay["pp"], lay["s"], lay["t"], lay["e"]
    d, kv, eplb, k = s // t, lay["kv"], lay["eplb"], lay["k"]
    kv_tok = np.asarray(ph.kv_per_token)[kv]
    copies = f.kv_copies(t, ph.kv_heads)
    held, mean = _expert_shares(ph, s, e, eplb)
    drafting = k > 0
    # a GPU's dense weights (a stage's) and its share of a token's dense FLOPs, and the draft's:
    # the parts of a step that depend on the layout alone (:func:`_target_work`, :func:`_draft_work`)
    dense_stage = _per_rank(ph.dense_bytes, ph.replicated_bytes, t) / pp
    dense_flops = _per_rank(ph.dense_flops_per_token, ph.replicated_flops_per_token, t)
    draft_bytes = _per_rank(ph.draft_dense_bytes, ph.draft_replicated_bytes, t)
    draft_flops = _per_rank(ph.draft_dense_flops_per_token, ph.draft_replicated_flops_per_token, t)

    def weights_at(share):  # a GPU's weights holding ``share`` of the routed experts
        # where, not a product: a layout without a draft holds none, even of an infinite one
        draft = _per_rank(ph.draft_dense_bytes + ph.draft_fc_bytes, ph.draft_replicated_bytes, t)
        draft = np.where(drafting, draft + ph.draft_expert_bytes * share, 0.0)
        return dense_stage + ph.expert_bytes / pp * share + draft

    weights = weights_at(held)
    free = ph.hbm_bytes - weights
    # the last stage also holds the draft's layer(s) and their KV cache (its own KV heads: an
    # EAGLE draft's copies under tensor parallelism are its own)
    draft_copies = f.kv_copies(t, ph.draft_kv_heads)
    layer_share = 1.0 / pp + drafting * ph.draft_kv_share * (draft_copies / copies)
    per_token = kv_tok * copies / t * layer_share  # a sequence's KV bytes a context token, a GPU
    # a rank of attention data parallelism holds its own sequences' KV cache, and the busiest holds
    # the attention-DP imbalance times the mean rank's live context: the instance admits the batch
    # whose busiest rank fits, where that binds before every sequence's peak does (an agent's calls
    # carry their task's context, so their mean is near their peak; a review: Rubin's headline
    # instance at its largest batch needed 119 GB on its busiest rank against 100.6 GB free)
    imb_dp = _dp_imbalance(ph, d)
    kv_need = per_token * np.maximum(ph.context_peak, imb_dp * ph.context_mean)
    rank_max = np.floor(np.clip(free * ph.kv_fraction / kv_need, 0.0, float(ph.max_batch_per_rank)))
    out = dict(
        d=d,
        kv_tok=kv_tok,
        copies=copies,
        draft_copies=draft_copies,
        draft_kv_tok=kv_tok * (drafting * ph.draft_kv_share),  # the draft's bytes a token, all its layers
        attn_rate=np.asarray(ph.attn_rate)[kv],
        prefill_attn_rate=np.asarray(ph.prefill_attn_rate)[kv],
        # a step cannot accept more tokens than the request outputs (1-token outputs took 1.68)
        accepted=np.minimum(np.asarray(ph.spec_tokens)[k], float(ph.osl)),
        experts_held=held,
        experts_mean=mean,
        weights_gpu=weights,
        weights_instance=g * weights_at(mean),  # every GPU's, not g times the fullest's
        free_gpu=free,
        rank_max=rank_max,
        paid=f.pipeline_paid_gpus(g, s, pp, ph.domain),
        link=np.where(s > ph.domain, ph.link_out, ph.link_up),
        latency=np.where(s > ph.domain, ph.latency_out, ph.latency_up),
        pp_link=np.where(g > ph.domain, ph.link_out, ph.link_up),
        pp_latency=np.where(g > ph.domain, ph.latency_out, ph.latency_up),
        imb_ep=_expert_imbalance(ph, e, eplb),
        imb_dp=imb_dp,
        n_ar=np.where(t > 1, np.where(lay["fam"] == DEP, 1, 2), 0),
        n_a2a=np.where(lay["fam"] == DEP, 2, 0),
        dense_bytes_stage=dense_stage,
        dense_flops_rank=dense_flops,
        draft_bytes_rank=draft_bytes,
        draft_flops_rank=draft_flops,
    )
    w = _prefill_work(ph, lay, out, ph.prefill_moe_share)
    out["prefill_s"], out["prefill_tbo"], out["prefill_latency_s"] = _prompt(ph, lay, out, w)
    # a disaggregated deployment's prefill instance runs prompts only: its experts at the stack's
    # share for prefill instances (the same columns where it has none)
    out["pool_prefill_s"], out["pool_prefill_latency_s"] = out["prefill_s"], out["prefill_latency_s"]
    if ph.pool_prefill_moe_share != ph.prefill_moe_share:
        pool = _prefill_work(ph, lay, out, ph.pool_prefill_moe_share, like=w)
        out["pool_prefill_s"], _, out["pool_prefill_latency_s"] = _prompt(ph, lay, out, pool)
    return out


def _prompt(ph: Physics, lay: Columns, x: Columns, w: _PrefillWork) -> tuple[Any, Any, Any]:
    """A prompt's seconds on each layout, whether its two halves overlap their all-to-alls, and its
    latency to the first token (never under its seconds), of its work ``w`` (:func:`_prefill_work`)."""
    seconds, tbo = _prefill_seconds(ph, lay, x, w)
    return seconds, tbo, f.maximum(_prefill_latency(ph, lay, x, w), seconds)


def _per_rank(total: float, whole: float, t):
    """A rank's part of the dense bytes or FLOPs ``total`` (plain numbers) over attention tensor-
    parallel groups of ``t`` (a column): a t-th of what splits, and ``whole`` of it in full (MLA's
    down-projections and the routers, which engines replicate); ``total`` itself where t is 1. An
    infinite ``total`` (a what-if weight size) stays infinite, not inf - inf; a what-if active
    count smaller than the parameters held whole holds them all."""
    import numpy as np

    whole = min(whole, total)
    split = total - whole if math.isfinite(total) else total
    if np.ndim(t) == 0:  # one layout's (RL's rollout steps): a plain number, as the columns' rows
        return split / t + whole if t > 1 else total
    return np.where(t > 1, split / t + whole, total)


def _expert_shares(ph: Physics, s, e, eplb):
    """Shares of the routed experts' weights a GPU of each layout holds: on the fullest GPU (its
    memory, and what a step streams: each slot that gets a token is read, an EPLB replica too),
    and on the mean GPU (the instance's weights). Tensor-parallel experts (e = 1) are sharded over
    the stage's s GPUs; expert parallelism (e = s) places whole experts, so where e does not
    divide them the fullest GPU holds ceil(experts / e) (a review: DEP72 on DeepSeek's 256 held
    3.56 a GPU, the fullest holds 4), and with EPLB every GPU ceil(experts / e + redundant slots
    a GPU) slots (a review: the step streamed the 4 own experts of a GPU holding 5 slots)."""
    import numpy as np

    if not ph.moe:
        return 1.0 / s, 1.0 / s
    ep = np.maximum(e, 1)
    held = f.experts_held_per_gpu(ph.experts, ep, eplb * ph.eplb_slots) / ph.experts
    mean = np.where(eplb == 1, held, 1.0 / ep)  # without EPLB the experts, spread; with, the slots
    return np.where(e > 1, held, 1.0 / s), np.where(e > 1, mean, 1.0 / s)


def _expert_imbalance(ph: Physics, e, eplb):
    """Busiest GPU's expert load over the mean: the routing's statistical imbalance, scaled from
    the reference to n GPUs of m experts each (:func:`formulas.max_over_mean`). Without EPLB,
    where e does not divide the experts, some GPUs hold one more expert than the others and draw
    that much more of the mean load (DEP48 on 256: 16 GPUs of 6 at 6 / 5.33, 32 of 5 at 5 / 5.33);
    EPLB's balancer places its replicas to even the placement out."""
    import numpy as np

    if not ph.moe:
        return np.ones(len(e))
    ep = np.maximum(e, 1)
    mean = ph.experts / ep
    refs = (ph.expert_reference_ep, ph.expert_reference_per_gpu)
    balanced = f.max_over_mean(ph.expert_imbalance_eplb, e, mean, *refs)
    # without EPLB, experts - e x floor(experts / e) GPUs hold one expert more than the others:
    # the busiest is the busiest of either group, each at its share of the mean load
    fewer = np.floor(ph.experts / ep)
    more = ph.experts - ep * fewer  # GPUs holding fewer + 1 (none where e divides the experts)
    fuller = (fewer + 1) / mean * f.max_over_mean(ph.expert_imbalance, more, fewer + 1, *refs)
    rest = fewer / mean * f.max_over_mean(ph.expert_imbalance, ep - more, np.maximum(fewer, 1), *refs)
    uneven = np.where(more > 0, np.maximum(fuller, rest), rest)
    return np.where(e > 1, np.where(eplb == 1, balanced, uneven), 1.0)


def _dp_imbalance(ph: Physics, d):
    import numpy as np

    imb = f.max_over_mean(ph.dp_imbalance, d, 1.0, ph.dp_reference_ranks, 1.0)
    return np.where(d > 1, imb, 1.0)


class _PrefillWork(NamedTuple):
    """One prompt's prefill over a layout, as the instance's GPUs share it when prompts come in
    batches (every attention rank and pipeline stage busy with its own prompts): seconds of
    compute, bytes per GPU of one layer's all-reduce and seconds of one MoE layer's dispatch
    and combine, and the layers and MoE layers the prompt passes (a draft's included)."""

    dense_attention_s: Any
    experts_s: Any
    all_reduce_bytes: Any
    a2a_s: Any
    layers: Any
    moe_layers: Any


def _prefill_seconds(ph: Physics, lay: Columns, x: Columns, w: _PrefillWork):
    """Seconds of instance time per request's prefill (compute, collectives), and whether the
    stack's two-batch overlap is what gives them (it is taken only where it is shorter)."""
    pp = lay["pp"]
    compute = w.dense_attention_s + w.experts_s
    cb, h = ph.collective_bytes, ph.hidden
    rest = w.layers / pp * x["n_ar"] * w.all_reduce_bytes / x["link"]
    rest = rest + (pp > 1) * ph.isl * h * cb / x["pp_link"]
    a2a_all = w.moe_layers / pp * x["n_a2a"] * w.a2a_s
    both = f.two_batch_seconds(compute, a2a_all, ph.overlap_sm_share, ph.two_batch_overlap)
    return rest + both, both < compute + a2a_all


def _prefill_latency(ph: Physics, lay: Columns, x: Columns, w: _PrefillWork):
    """Seconds one prompt alone takes to its first token (TTFT, no queueing): it cannot use the
    instance as a batch of prompts does. Its attention and dense layers run on its own attention
    rank (``t`` of a stage's ``s`` GPUs: d times the shared time, its all-reduces and dispatches
    carry d times the tokens), its experts on its stage's expert group, the stages one after
    another (pp times a stage's share) with a hand-off between each; every layer takes at least
    the floor its kernels need, every collective its fixed latency, and nothing overlaps (two
    batches need two prompts)."""
    pp, s, t = lay["pp"], lay["s"], lay["t"]
    d = s / t
    compute = pp * (d * w.dense_attention_s + w.experts_s)
    layers_s = w.layers * f.floor_combined_seconds(
        ph.overhead_per_layer_s, compute / w.layers, ph.floor_exponent
    )
    ar = f.collective_seconds(w.layers * x["n_ar"], d * w.all_reduce_bytes, x["link"], x["latency"])
    # its tokens all sit on its attention rank, whose sends bind: d times a rank's share, without
    # the expert imbalance (every copy leaves that rank; the busiest receiver takes the imbalance
    # times a rank's share, which binds where d is smaller). A hand-check review: the imbalance was
    # charged to the sender, a lone DEP16 DeepSeek-R1 prompt on GB200 58.2 ms, not 39.1 ms
    lone = w.a2a_s * f.maximum(d / x["imb_ep"], 1.0)
    a2a = w.moe_layers * x["n_a2a"] * (lone + x["latency"])
    hand_off = (pp - 1.0) * (ph.isl * ph.hidden * ph.collective_bytes / x["pp_link"] + x["pp_latency"])
    return layers_s + ar + a2a + hand_off


def _prefill_work(
    ph: Physics, lay: Columns, x: Columns, prefill_share: float, like: _PrefillWork | None = None
) -> _PrefillWork:
    """:class:`_PrefillWork` of each layout, its experts spread over EP ranks at ``prefill_share``
    of the prefill MFU (``like``: the same layouts' work at another share, whose parts but the
    experts' are this one's)."""
    import numpy as np

    g, s, t, e = lay["g"], lay["s"], lay["t"], lay["e"]
    # spread over EP ranks a prompt's experts run as grouped GEMMs of thousands of tokens each (the
    # stack's prefill share where it has one); tensor-parallel experts keep the MoE share
    share = np.where(e > 1, prefill_share, ph.moe_share)
    experts = ph.expert_flops_per_token / (g * ph.prefill_rate * share) * x["imb_ep"]
    # a layout that drafts runs its draft over the prompt too (the draft's KV cache of the prompt;
    # its head on the last token only): SGLang's draft extend, TensorRT-LLM's MTP context pass
    drafting = lay["k"] > 0
    d_experts = ph.draft_expert_flops_per_token / (g * ph.prefill_rate * share) * x["imb_ep"]
    experts = experts + np.where(drafting, d_experts, 0.0)
    if like is not None:
        return like._replace(experts_s=ph.isl * experts)
    # the dense GEMMs of a prompt run at the large-M GEMM efficiency decode reaches at batch; the
    # causal attention over the prompt at the prefill MFU of the attention's precision (the KV
    # cache's, or the stack's narrowest), the routed experts' grouped GEMMs at the weights'
    # (the LM head on the prompt's last token only: the engines compute no other prompt logits)
    head_skipped = ph.head_flops_per_token * (1.0 - 1.0 / ph.isl)
    # (MLA's down-projections and the routers run whole on each of a TP group's t ranks: t times
    # their FLOPs)
    # (an MLA prompt with cached context first up-projects its latents: split over the heads)
    work = ph.dense_flops_per_token - head_skipped + ph.prefill_context_flops_per_token
    dense = t * _per_rank(work, ph.replicated_flops_per_token, t)
    dense = dense / (g * ph.gemm_rate)
    attention = ph.prefill_attn_flops_per_token / (g * x["prefill_attn_rate"])
    d_flops = ph.draft_dense_flops_per_token + ph.draft_fc_flops_per_token - _head_skipped(ph, ph.isl)
    d_flops = d_flops + ph.draft_prefill_context_flops_per_token
    d_dense = t * _per_rank(d_flops, ph.draft_replicated_flops_per_token, t)
    d_dense = d_dense / (g * ph.gemm_rate) + ph.draft_prefill_attn_flops_per_token / (
        g * x["prefill_attn_rate"]
    )
    dense_attention = dense + attention + np.where(drafting, d_dense, 0.0)
    layers = ph.layers + drafting * ph.draft_layers
    moe_layers = ph.moe_layers + drafting * ph.draft_layers * (ph.draft_expert_bytes > 0)
    cb, h = ph.collective_bytes, ph.hidden
    ar = ph.isl * h * cb * 2.0 * (t - 1.0) / t / x["d"]
    remote, domains = _expert_spread(ph, e)
    ab = ph.a2a_bytes  # a dispatch and its combine, each at its own precision (the mean of the two)
    a2a = f.all_to_all_bytes_per_gpu_per_rank(ph.isl / s, remote, h, ab) * x["imb_ep"]
    # an expert group over several scale-up domains: DeepEP's normal kernels send a token once to
    # each other domain holding one of its experts (over the NIC) and fan it out to the ranks there
    # over the scale-up link, which carries every rank's copy; the slower of the two binds
    across = f.all_to_all_bytes_per_gpu_per_rank(ph.isl / s, domains, h, ab)
    a2a_s = np.where(
        e > ph.domain,
        np.maximum(across * x["imb_ep"] / ph.link_out, a2a / ph.link_up),
        a2a / x["link"],
    )
    return _PrefillWork(ph.isl * dense_attention, ph.isl * experts, ar, a2a_s, layers, moe_layers)


# :func:`_expert_spread` of the layouts' expert group sizes last asked (a model's layout set is
# priced again for every trial physics of a calibration, every shape of a comparison)
_SPREADS: dict[tuple, tuple[Any, Any]] = {}
SPREADS_KEPT = 16


def _expert_spread(ph: Physics, e: Any) -> tuple[Any, Any]:
    """Per layout of expert group size ``e``: the other EP ranks and the other scale-up domains a
    token's routed experts reach on average (:func:`formulas.remote_ranks_per_token`,
    :func:`formulas.remote_domains`). They depend on the group's size alone: worked out once per
    size (a few dozen among thousands of layouts), the same numbers, and kept for the same sizes
    and the same model and domain (read-only arrays)."""
    key = (ph.moe, ph.experts, ph.top_k, ph.domain, e.dtype.str, e.shape, e.tobytes())
    try:
        have = _SPREADS.get(key)
    except TypeError:  # an array-valued field (a sweep over it): not kept
        return _spread(ph, e)
    if have is None:
        have = _spread(ph, e)
        for v in have:
            v.setflags(write=False)
        if len(_SPREADS) >= SPREADS_KEPT:
            _SPREADS.pop(next(iter(_SPREADS)))  # the oldest
        _SPREADS[key] = have
    return have


def _spread(ph: Physics, e: Any) -> tuple[Any, Any]:
    """:func:`_expert_spread`, worked out."""
    import numpy as np

    sizes, of_size = np.unique(e, return_inverse=True)
    remote = f.remote_ranks_per_token(ph.experts, ph.top_k, sizes)[of_size] if ph.moe else 0.0 * e
    return remote, f.remote_domains(sizes, ph.domain, ph.top_k)[of_size]


def _head_skipped(ph: Physics, tokens: Any) -> Any:
    """The draft head's FLOPs a token of a pass over ``tokens`` tokens a sequence does not run:
    the head runs on one of them (the prompt's last, the last accepted), the share of the rest."""
    return ph.draft_head_flops_per_token * (1.0 - 1.0 / tokens)


class _Work(NamedTuple):
    """One pass's bytes and FLOPs per GPU (arrays over rows): dense weights, attention over the KV
    cache, and the experts."""

    dense_bytes: Any
    dense_flops: Any
    kv_bytes: Any
    attn_flops: Any
    expert_bytes: Any
    expert_flops: Any

    def times(self, ph: Physics, attn_rate: Any, moe_rate: Any, experts: _Experts | None = None) -> _Times:
        """Each part's bytes at its bandwidth and FLOPs at its rate (``experts``: the experts'
        parts already worked out, :func:`_expert_times`; the work then has none)."""
        if experts is None:
            experts = _expert_times(ph, moe_rate, self.expert_bytes, self.expert_flops)
        return _Times(
            self.dense_bytes / ph.hbm_rate,
            self.dense_flops / ph.gemm_rate,
            self.kv_bytes / ph.kv_rate,
            self.attn_flops / attn_rate,
            *experts,
        )

    def seconds(self, ph: Physics, attn_rate: Any, moe_rate: Any) -> Any:
        return self.times(ph, attn_rate, moe_rate).seconds()


class _Times(NamedTuple):
    """One pass's parts in seconds (arrays over rows): each part's bytes at its bandwidth
    (``*_memory``) and its FLOPs at its rate (``*_compute``), worked out once for the pass's time
    and its memory and compute times."""

    dense_memory: Any
    dense_compute: Any
    kv_memory: Any
    attn_compute: Any
    expert_memory: Any
    expert_compute: Any
    expert_s: Any  # the experts' grouped GEMMs (:func:`_expert_times`)

    def seconds(self) -> Any:
        """Each part on its roofline (:func:`formulas.roofline_seconds`: the larger of the two;
        the experts as grouped GEMMs, :func:`formulas.grouped_gemm_seconds`: the two added), added."""
        return (
            f.roofline_of(self.dense_memory, self.dense_compute)
            + f.roofline_of(self.kv_memory, self.attn_compute)
            + self.expert_s
        )

    def memory_s(self) -> Any:
        return self.dense_memory + self.kv_memory + self.expert_memory

    def compute_s(self) -> Any:
        return self.dense_compute + self.attn_compute + self.expert_compute


class _Experts(NamedTuple):
    """A pass's experts in seconds: streaming, math, and the two as grouped GEMMs (where known)."""

    memory: Any
    compute: Any
    seconds: Any


def _expert_times(ph: Physics, moe_rate: Any, expert_bytes: Any, expert_flops: Any) -> _Experts:
    """:class:`_Experts` of a pass's expert bytes and FLOPs (as :meth:`_Work.times` takes them)."""
    memory, compute = expert_bytes / ph.expert_rate, expert_flops / moe_rate
    return _Experts(memory, compute, f.grouped_gemm_of(memory, compute))


def _target_work(
    ph: Physics,
    lay: Columns,
    x: Columns,
    m: Any,
    seqs: Any,
    width: Any,
    kv_seq: Any,
    touched: Any,
    experts: bool = True,
) -> _Work:
    """One pipeline stage's pass of the target model over its micro-batch of ``m`` sequences, each
    running ``width`` tokens (1 + draft depth)."""
    pp, t = lay["pp"], lay["t"]
    tokens = seqs * width
    # (without ``experts``: the caller has their times, :func:`_expert_times`)
    part = _target_experts(ph, lay, x, m, width, touched) if experts else (None, None)
    return _Work(
        dense_bytes=x["dense_bytes_stage"],
        dense_flops=tokens * x["dense_flops_rank"] / pp,
        kv_bytes=seqs * kv_seq / pp,
        attn_flops=tokens * ph.attn_flops_per_token / (pp * t),
        expert_bytes=part[0],
        expert_flops=part[1],
    )


def _target_experts(ph: Physics, lay: Columns, x: Columns, m: Any, width: Any, touched: Any) -> tuple:
    """:func:`_target_work`'s expert bytes and FLOPs (they do not depend on the busiest rank's
    sequences, so not on the row's mode)."""
    pp, s = lay["pp"], lay["s"]
    return (
        ph.expert_bytes / pp * x["experts_held"] * touched,
        m * width * ph.expert_flops_per_token / (pp * s) * x["imb_ep"],
    )


def _draft_work(
    ph: Physics,
    lay: Columns,
    x: Columns,
    m: Any,
    seqs: Any,
    kv_seq: Any,
    width: Any,
    touched: Any = None,
    experts: bool = True,
) -> _Work:
    """One draft pass through the draft layer(s) and the head over ``width`` tokens of each of
    the micro-batch's sequences (on the last stage): the draft's weights and its KV cache are
    read once, its math and expert selection scale with the tokens; its output head runs on the
    last accepted token only (TensorRT-LLM's MTP worker and SGLang's draft extend gather that
    position's hidden state before the logits)."""
    t = lay["t"]
    dense = x["draft_flops_rank"] - _head_skipped(ph, width) / t
    # (without ``experts``: the caller has their times, :func:`_expert_times`)
    part = _draft_experts(ph, lay, x, m, width, touched) if experts else (None, None)
    return _Work(
        dense_bytes=x["draft_bytes_rank"],
        dense_flops=seqs * width * dense,
        kv_bytes=seqs * kv_seq * ph.draft_kv_share * (x["draft_copies"] / x["copies"]),
        attn_flops=seqs * width * ph.draft_attn_per_position * ph.context_mean / t,
        expert_bytes=part[0],
        expert_flops=part[1],
    )


def _draft_experts(ph: Physics, lay: Columns, x: Columns, m: Any, width: Any, touched: Any = None) -> tuple:
    """:func:`_draft_work`'s expert bytes and FLOPs (they do not depend on the busiest rank's
    sequences, so not on the row's mode)."""
    if not ph.draft_expert_bytes:  # an EAGLE layer has no experts to touch
        touched = 0.0
    elif touched is None:  # (the target's at the same tokens where the caller has it)
        touched = touched_share(ph)(m * width)
    return (
        ph.draft_expert_bytes * x["experts_held"] * touched,
        m * width * ph.draft_expert_flops_per_token / lay["s"] * x["imb_ep"],
    )


def stage_sequences(batch: Any, pp: Any) -> Any:
    """Micro-batch per pipeline stage: B / pp, but never under one sequence: with fewer sequences
    than stages each one passes every stage for each token (a user review: 0.5 of a sequence a
    stage at batch 1 over TP8 PP2 halved the experts it touches and made PP look faster)."""
    import numpy as np

    return np.maximum(batch / pp, np.minimum(batch, 1.0))


# the layout columns and :func:`layout_terms` columns :func:`step_terms` reads, and those
# :func:`aggregated` reads beside them: a caller that gathers or converts the columns for many
# rows takes these only (the others, a dozen more, cost their copies and no number)
STEP_LAYOUT = ("pp", "s", "t", "e", "k")
STEP_TERMS = (
    "d", "kv_tok", "copies", "draft_copies", "attn_rate", "experts_held", "imb_ep", "imb_dp",
    "n_ar", "n_a2a", "link", "latency", "pp_link", "pp_latency",
    "dense_bytes_stage", "dense_flops_rank", "draft_bytes_rank", "draft_flops_rank",
)  # fmt: skip
AGGREGATED_TERMS = ("accepted", "prefill_s", "prefill_latency_s", "paid")


def columns(cols: Columns, names: tuple[str, ...]) -> Columns:
    """The columns ``names`` of ``cols`` (the same arrays)."""
    return {k: cols[k] for k in names}


def step_terms(
    ph: Physics, lay: Columns, x: Columns, batch: Any, parts: bool = True, pool: Any = 0
) -> Columns:
    """One decode step (seconds) of each row's instance at ``batch`` sequences, with its parts
    (``parts``; without them only ``step_s``: a search ranks on the step, and only the rows a
    result reports need where it goes). ``pool``: 1 where the row is a disaggregated decode pool
    (0: an aggregated instance), whose kernels take the pool's floor per layer (:func:`row_floor`)
    and whose attention ranks run no prompts (:func:`_busiest_rank_sequences`).

    ``lay`` and ``x`` are the layout columns and :func:`layout_terms` already taken at each row.
    """
    return pooled_step_terms(ph, lay, x, batch, batch_terms(ph, lay, x, batch), parts, pool)


class BatchTerms(NamedTuple):
    """The terms of :func:`step_terms` that do not depend on the row's mode (``pool``): a caller
    that prices the same rows as aggregated instances and as decode pools works them out once
    (:func:`pooled_step_terms` of each mode; the same numbers as two :func:`step_terms`)."""

    width: Any  # tokens each sequence runs through the target per step (1 + draft depth)
    m: Any  # a stage's micro-batch
    kv_seq: Any  # one sequence's KV bytes, all layers
    tokens: Any  # a stage's tokens per step
    touched: Any  # the share of the experts the stage's tokens touch
    layer_ar: Any  # one layer's attention all-reduces at the stage's tokens
    layer_a2a: Any  # one MoE layer's dispatch and combine at them
    coll: Any  # the target's all-reduces, every layer
    a2a: Any  # the target's dispatch and combine, every MoE layer (run serially)
    hand_off: Any  # the pipeline stages' activations, stage to stage
    firsts: Any  # first draft passes a step
    laters: Any  # later draft passes a step
    first_coll: Any  # a first draft pass's collectives
    later_coll: Any  # a later draft pass's collectives (None: no row drafts)
    target_experts: _Experts  # the target's experts in seconds (:func:`_target_work`'s)
    first_experts: _Experts  # a first draft pass's (:func:`_draft_work`'s)
    later_experts: _Experts | None  # a later draft pass's (None: no row drafts)
    rank_seqs: Any  # a scheduler rank's sequences
    fixed: Any  # the step's fixed overhead and its part per sequence
    half_experts: _Experts | None  # a two-batch half's experts (:func:`_two_batch_step`; None: no overlap)
    half_a2a: Any  # both halves' dispatch and combine, every MoE layer (None: no overlap)

    def at(self, rows: Any) -> BatchTerms:
        """The terms of ``rows`` (the last axis of each array; a number stays as it is)."""
        return BatchTerms(*_terms_at(self, rows))


def _terms_at(terms: tuple, rows: Any) -> list:
    """``terms`` at ``rows``: each array's last axis taken (the rows of a column, the layouts of a
    batches x layouts table), a tuple's arrays the same way."""
    return [
        type(v)(*_terms_at(v, rows)) if isinstance(v, tuple) else v[..., rows] if getattr(v, "ndim", 0) else v
        for v in terms
    ]


def batch_terms(ph: Physics, lay: Columns, x: Columns, batch: Any, share: Any = None) -> BatchTerms:
    """:class:`BatchTerms` of rows (``lay`` and ``x``: as :func:`step_terms` takes them). ``share``:
    the share of the routed experts a stage's tokens touch, of the tokens (an array of the rows,
    worked out of their batch, stages and draft depth alone); by default
    :func:`formulas.experts_touched_share` of the model's top-k of its experts."""
    import numpy as np

    if share is None:
        share = touched_share(ph)
    pp, s, t, e, d, k = lay["pp"], lay["s"], lay["t"], lay["e"], x["d"], lay["k"]
    width = 1.0 + k  # tokens each sequence runs through the target per step (verify)
    m = stage_sequences(batch, pp)
    kv_seq = x["kv_tok"] * x["copies"] / t * ph.context_mean  # one sequence's KV bytes, all layers
    tokens = m * width  # a stage's tokens per step
    touched = share(tokens)
    cb, h = ph.collective_bytes, ph.hidden
    # one layer's attention all-reduces and one MoE layer's dispatch and combine at the stage's
    # tokens: the target's, and again the draft's first pass (the same tokens), worked out once
    layer_ar = _layer_collectives(ph, x, tokens, d, s, t, e, experts=False)
    layer_a2a = _expert_collectives(ph, x, tokens, s, e)
    coll = ph.layers * layer_ar
    a2a = ph.moe_layers * layer_a2a
    hand_off = pp * (pp > 1) * (tokens * h * cb / x["pp_link"] + x["pp_latency"])
    # the draft: k tokens one after another, each micro-batch's passes one after another. The
    # first pass of a step runs over the verify's 1 + k tokens a sequence: the engines' draft
    # extend after a verify is captured at that width and padded (SGLang's EAGLE draft-extend
    # CUDA graph at speculative_num_steps + 1 tokens a request; TensorRT-LLM's MTP-Eagle and
    # one-model EAGLE-3 workers take max_draft_len + 1); the later k - 1 run over one token
    n = ph.draft_layers
    firsts, laters = pp * (k > 0), pp * np.maximum(k - 1, 0)
    experts = ph.draft_expert_bytes > 0
    first_coll = n * (layer_ar + layer_a2a if experts else layer_ar)  # (:func:`_layer_collectives`)
    moe_rate = ph.moe_rate
    target_experts = _expert_times(ph, moe_rate, *_target_experts(ph, lay, x, m, width, touched))
    first_experts = _expert_times(ph, moe_rate, *_draft_experts(ph, lay, x, m, width, touched))
    later_coll = later_experts = None
    if _any(k > 0):
        later_coll = n * _layer_collectives(ph, x, m, d, s, t, e, experts=experts)
        # (a later pass runs one token a sequence; the experts it touches where the draft has any)
        later_touched = share(m * 1.0) if ph.draft_expert_bytes else None
        later_experts = _expert_times(ph, moe_rate, *_draft_experts(ph, lay, x, m, 1.0, later_touched))
    # host work per sequence (sampling, stop checks, bookkeeping) for each token it verifies
    rank_seqs = np.ceil(batch / d)  # a scheduler rank's sequences
    fixed = f.step_overhead_seconds(ph.overhead_s, ph.overhead_per_sequence_s * width, rank_seqs)
    # two-batch overlap: each half's experts and the halves' all-to-alls (at half the tokens)
    half_experts = half_a2a = None
    if ph.two_batch_overlap:
        half_touched = share(m * width / 2)
        half_experts = _expert_times(ph, moe_rate, *_target_experts(ph, lay, x, m / 2, width, half_touched))
        half_a2a = 2.0 * ph.moe_layers * _expert_collectives(ph, x, m * width / 2, s, e)
    return BatchTerms(
        width, m, kv_seq, tokens, touched, layer_ar, layer_a2a, coll, a2a, hand_off,
        firsts, laters, first_coll, later_coll, target_experts, first_experts, later_experts,
        rank_seqs, fixed, half_experts, half_a2a,
    )  # fmt: skip


def touched_share(ph: Physics) -> Any:
    """:func:`formulas.experts_touched_share` of a stage's tokens, for the model's top-k of its
    experts (:func:`batch_terms`'s ``share``)."""

    def share(tokens: Any) -> Any:
        return f.experts_touched_share(tokens, ph.top_k / ph.experts)

    return share


def pooled_step_terms(
    ph: Physics, lay: Columns, x: Columns, batch: Any, bt: BatchTerms, parts: bool = True, pool: Any = 0
) -> Columns:
    """:func:`step_terms` of rows whose :class:`BatchTerms` are ``bt``, in mode ``pool``."""
    import numpy as np

    pp, t, d = lay["pp"], lay["t"], x["d"]
    width, m, kv_seq, touched, firsts, laters = bt.width, bt.m, bt.kv_seq, bt.touched, bt.firsts, bt.laters
    seqs = rank_sequences(x, m, d, pool)  # of the busiest attention rank
    moe_rate = ph.moe_rate
    rates = (ph, x["attn_rate"], moe_rate)
    target = _target_work(ph, lay, x, m, seqs, width, kv_seq, touched, False).times(*rates, bt.target_experts)
    work = pp * target.seconds()
    floor = row_floor(ph, pool)
    p = ph.floor_exponent
    layers_s = _layers_seconds(ph, work, floor)
    a2a = bt.a2a
    tbo = np.zeros(np.shape(a2a), dtype=bool)
    if ph.two_batch_overlap:
        layers_s, a2a, tbo = _two_batch_step(ph, lay, x, bt, layers_s, a2a, floor, pool)
    coll = bt.coll + a2a
    n = ph.draft_layers
    first = _draft_work(ph, lay, x, m, seqs, kv_seq, width, touched, False).times(*rates, bt.first_experts)
    first_coll = bt.first_coll
    first_work = first.seconds()
    if bt.later_coll is not None and _any(lay["k"] > 0):  # (bt.at(rows): these rows may not draft)
        later = _draft_work(ph, lay, x, m, seqs, kv_seq, 1.0, None, False).times(*rates, bt.later_experts)
        later_work = later.seconds()
        later_coll = bt.later_coll
    else:  # no row drafts: every width is 1, so the later pass is the first, number for number
        # (its terms still count, times 0: a draft pass that is not finite makes the step NaN)
        later, later_work, later_coll = first, first_work, first_coll
    # an EAGLE draft's fusing projection runs on the first pass only (the one the target's
    # states feed; later passes feed back the draft's own state) over its tokens: once per
    # micro-batch, a dense GEMM on its roofline (none for an MTP layer or without a draft)
    fc_mem = fc_comp = fc_s = 0.0
    if ph.draft_fc_bytes:
        fc_mem = _per_rank(ph.draft_fc_bytes, 0.0, t) / ph.hbm_rate
        fc_comp = seqs * width * _per_rank(ph.draft_fc_flops_per_token, 0.0, t) / ph.gemm_rate
        fc_s = firsts * f.roofline_of(fc_mem, fc_comp)

    # each pass also runs the kernels around its layers (its input's embedding and norms, the
    # head's gather and the sampling, the next pass's inputs and attention metadata): as many
    # layers' floors as the catalog's draft_pass_overhead_layers, with no work of their own
    around = ph.draft_pass_overhead_layers * floor

    def passes(work, coll):  # a draft pass's layers, each at least its kernels' floor, and collectives
        return n * f.floor_combined_seconds(floor, work / max(n, 1), p) + around + coll

    first_pass = passes(first_work, first_coll)
    later_pass = first_pass if later is first else passes(later_work, later_coll)
    draft_s = firsts * first_pass + laters * later_pass + fc_s
    rank_seqs = bt.rank_seqs
    step = layers_s + coll + bt.hand_off + draft_s + bt.fixed
    # the engine's own loop on the CPU for each sequence of a scheduler rank: hidden under the GPU's
    # step where the stack overlaps them, else added
    if ph.host_per_sequence_s:
        step = f.host_bound_step_seconds(step, ph.host_per_sequence_s * rank_seqs, ph.host_overlaps)
    if not parts:
        return {"step_s": step}
    host = ph.host_per_sequence_s * rank_seqs
    memory = pp * target.memory_s() + firsts * (first.memory_s() + fc_mem) + laters * later.memory_s()
    compute = pp * target.compute_s() + firsts * (first.compute_s() + fc_comp) + laters * later.compute_s()
    collectives = coll + bt.hand_off + firsts * first_coll + laters * later_coll
    return dict(
        step_s=step,
        memory_s=memory,
        compute_s=compute,
        collective_s=collectives,
        overhead_s=step - work - firsts * first_work - laters * later_work - fc_s - collectives,
        touched=touched,
        tbo=tbo * 1.0,  # the step runs two-batch overlap (1) or not (0)
        host_s=host * np.ones(np.shape(step)),
    )


def _any(a: Any) -> bool:
    """``np.any(a)`` of a number or an array without its dispatch (a step's rows are often a
    handful, and a step asks it three times): an array's (or a numpy scalar's) own ``any``, a
    Python number's truth (NaN is true in both)."""
    return bool(a.any()) if hasattr(a, "any") else bool(a)


def busiest_rank_sequences(x: Columns, m, d, pool):
    """Sequences of the busiest of ``d`` attention data-parallel ranks sharing ``m``. An aggregated
    instance's ranks run prompts beside others' decode, the imbalance TensorRT-LLM's tech blog 10
    measures (``x["imb_dp"]``: m / d times it). A disaggregated decode pool (``pool`` 1) runs no
    prompts (the blog: disaggregated serving is used "to prevent ADP imbalances"), and the engine
    hands each new request to the least-loaded rank, at most ceil(total / ranks) a rank
    (TensorRT-LLM's ``_balance_requests_across_ranks``): its busiest holds ceil(m / d)."""
    import numpy as np

    mixed = m / d * x["imb_dp"]
    if not _any(pool):
        return mixed
    # (1e-9: a whole m / d that a float leaves a last bit above must not ceil one sequence up)
    return np.where((pool > 0) & (d > 1), np.ceil(m / d - 1e-9), mixed)


def rank_sequences(x: Columns, m, d, pool):
    """Sequences a step prices on its busiest attention rank: :func:`busiest_rank_sequences`, and a
    whole one at least (DEP8 at batch 3 costed its busiest rank 3 / 8 x 1.14 of a sequence's KV
    reads, a serving review)."""
    import numpy as np

    return np.maximum(busiest_rank_sequences(x, m, d, pool), np.minimum(m, 1.0))


def prompt_with_stall(ph: Physics, seconds):
    """A prompt's ``seconds`` on an aggregated instance under a stack release whose iterations
    holding a prompt run slower than its physics (uncaptured: TensorRT-LLM 1.1.0rc2): at least the
    release's measured stall (``ph.prompt_stall_s``; 0: none, the seconds as they are)."""
    return f.maximum(seconds, ph.prompt_stall_s) if ph.prompt_stall_s else seconds


def _layers_seconds(ph: Physics, work, floor):
    """A pass's layers: each the floor its kernels take combined with its share of ``work``."""
    return ph.layers * f.floor_combined_seconds(floor, work / ph.layers, ph.floor_exponent)


def row_floor(ph: Physics, disagg: Any) -> Any:
    """The floor per layer of rows whose mode is ``disagg`` (1: a disaggregated decode pool, 0: an
    aggregated instance), as :func:`step_terms` takes it."""
    import numpy as np

    if ph.disagg_overhead_per_layer_s == ph.overhead_per_layer_s or not _any(disagg):
        return ph.overhead_per_layer_s
    return np.where(disagg > 0, ph.disagg_overhead_per_layer_s, ph.overhead_per_layer_s)


def _two_batch_step(ph: Physics, lay: Columns, x: Columns, bt: BatchTerms, layers_s, a2a, floor, pool):
    """The layers' time and the exposed all-to-alls of a decode step run as two half-batches (the
    stack's two-batch overlap), where that is shorter than ``layers_s + a2a`` run serially: each
    half streams the touched experts again and pays its kernels' floor and collective latencies,
    and its dispatch and combine run while the other half computes, short of the communication
    SMs. Returns (layers, exposed all-to-alls, overlapped or not) per row. (``bt``: the rows'
    :class:`BatchTerms`, which hold each half's experts and the halves' all-to-alls.)"""
    import numpy as np

    m, moe_rate = bt.m, ph.moe_rate
    seqs = busiest_rank_sequences(x, m / 2, x["d"], pool)
    half = _target_work(ph, lay, x, m / 2, seqs, bt.width, bt.kv_seq, None, False)
    rates = (ph, x["attn_rate"], moe_rate, bt.half_experts)
    halves = 2.0 * _layers_seconds(ph, lay["pp"] * half.times(*rates).seconds(), floor)
    a2a_halves = bt.half_a2a
    overlapped = f.two_batch_seconds(halves, a2a_halves, ph.overlap_sm_share, True)
    computing = np.minimum(halves / (1.0 - ph.overlap_sm_share), overlapped)
    tbo = (x["n_a2a"] > 0) & (overlapped < layers_s + a2a)
    return np.where(tbo, computing, layers_s), np.where(tbo, overlapped - computing, a2a), tbo


def _layer_collectives(ph: Physics, x: Columns, tokens, d, s, t, e, experts: bool = True):
    """Seconds of one layer's collectives for ``tokens`` tokens of a stage: the attention TP
    all-reduces and, where experts are spread (``experts``), EP dispatch and combine."""
    cb, h = ph.collective_bytes, ph.hidden
    ar = tokens / d * h * cb * 2.0 * (t - 1.0) / t
    out = f.collective_seconds(x["n_ar"], ar, x["link"], x["latency"])
    return out + _expert_collectives(ph, x, tokens, s, e) if experts else out


def _expert_collectives(ph: Physics, x: Columns, tokens, s, e):
    """Seconds of one MoE layer's EP dispatch and combine for ``tokens`` tokens of a stage."""
    a2a = f.all_to_all_bytes_per_gpu(tokens / s, ph.top_k, ph.hidden, ph.a2a_bytes, e) * x["imb_ep"]
    return f.collective_seconds(x["n_a2a"], a2a, x["link"], x["latency"])


def aggregated(ph: Physics, x: Columns, batch, step_s) -> Columns:
    """Prefills take turns with decode on the instance: every user waits for them. Time per output
    token (TPOT) counts the other requests' prefills, not the request's own (its TTFT)."""
    decode = ph.osl * step_s / x["accepted"]
    # a release's prompt stall holds decode for at least its measured time
    prefill_s, latency_s = (
        prompt_with_stall(ph, x["prefill_s"]),
        prompt_with_stall(ph, x["prefill_latency_s"]),
    )
    prefill = batch * prefill_s
    # the stack's attention-DP balance holds a new prompt until the other ranks have one too (or
    # its timeout): steps of the instance's own, as requests complete (batch x accepted / osl a step)
    arrivals = batch * x["accepted"] / ph.osl
    wait = step_s * f.attention_dp_context_wait_steps(x["d"], batch / x["d"], arrivals, ph.adp_timeout_steps)
    # the request's own prompt waits longer than its share
    own = latency_s - prefill_s + wait
    per_instance = f.instance_output_tokens_per_s(batch, ph.osl, prefill_s, step_s, x["accepted"], own)
    return dict(
        tokens_per_s_per_gpu=per_instance / x["paid"],
        tokens_per_s_per_user=per_instance / batch,
        tpot_s=f.aggregated_tpot_seconds(batch, ph.osl, prefill_s, step_s, x["accepted"]),
        deployment_gpus=x["paid"],
        decode_instances=batch * 0 + 1,
        prefill_instances=batch * 0,
        ttft_s=latency_s + wait + batch * 0,
        prefill_instance_s=prefill_s + batch * 0,
        prefill_share=prefill / (prefill + decode),
    )


def disaggregated(
    ph: Physics, x: Columns, batch, step_s, prefill: Columns, n_prefill=None, n_decode=None
) -> Columns:
    """A pool of ``P`` prefill instances feeds ``D`` decode instances.

    ``prefill`` holds, per row, the chosen prefill instance's seconds per request (``prefill_s``)
    and paid GPUs (``paid``), how many such instances fit in the GPUs a decode instance strands
    (``per_decode``) and how many decode instances in those a prefill instance strands
    (``decode_per``): the deployment pays for both pools packed into the scale-up domains together
    (:func:`formulas.deployment_gpus`). ``D`` runs over 1 .. max_decode_instances, ``P`` is the
    fewest prefill instances that keep up with them or one fewer, and the pair with the most tokens/s
    per GPU is kept; the slower pool sets the rate (a starved decode pool holds fewer sequences,
    so its users are no slower than one step per token). Pinned pools (``n_prefill``,
    ``n_decode``, as deployed) may not match.
    """
    rate = batch * x["accepted"] / step_s  # output tokens/s of one decode instance
    ratio = f.prefill_instances_per_decode(rate / ph.osl, prefill["prefill_s"])
    cost = _deployment_cost(ph, prefill, x)
    paid = None  # the pools' paid GPUs, where the choice already priced them
    if n_prefill is None and n_decode is None:
        n_dec, n_pre, paid = _pools(ph, ratio, cost)
    else:
        n_dec, n_pre = _pinned_pools(ph, ratio, prefill, rate, cost, n_prefill, n_decode)
    return dict(
        tokens_per_s_per_user=f.speculative_tokens_per_s_per_user(x["accepted"], step_s),
        tpot_s=step_s / x["accepted"],
        ttft_s=prefill["latency_s"] + prefill["handoff_s"],  # and the KV cache's hand-off to decode
        prefill_instance_s=prefill["prefill_s"],
        **pool_columns(ph, x, rate, prefill, n_dec, n_pre, paid),
    )


def kv_handoff_seconds(ph: Physics, lay: Columns, x: Columns, prefill: Any, decode: Any) -> Any:
    """A disaggregated request's KV cache moved from its prefill instance (layouts ``prefill``)
    to its decode instance (``decode``) before the first decode step: the prompt's KV bytes, each
    GPU of the prefill instance sending its shard (its tensor ranks and stages in parallel; a DEP
    prompt's on its one attention rank) and each GPU of the decode instance receiving what it
    holds (its shard, or the whole of a KV cache every tensor rank keeps, as MLA's), the larger
    binding, over the scale-up link where both instances fit in one domain, else over the NICs,
    plus one transfer's latency (a hand-check review: TTFT was the prefill alone, 3 % short for
    Llama 3.1 70B 1k prompts across H100 nodes; a code review: a TP1 decode fed by a TP4 prefill
    receives all of it)."""
    import numpy as np

    # the draft's KV cache too (on the last stage; its own heads: its own copies)
    d_pre = x["draft_kv_tok"][prefill] / lay["t"][prefill]
    d_dec = x["draft_kv_tok"][decode] * x["draft_copies"][decode] / lay["t"][decode]
    sent = x["kv_tok"][prefill] / (lay["t"][prefill] * lay["pp"][prefill]) + d_pre
    received = x["kv_tok"][decode] * x["copies"][decode] / (lay["t"][decode] * lay["pp"][decode]) + d_dec
    # the whole context's: a cached prefix the prefill instance attended to goes with the prompt
    # (the decode instance holds no earlier turn of its own; a design choice, README)
    held = (ph.prefix + ph.isl) * np.maximum(sent, received)
    inside = lay["g"][prefill] + lay["g"][decode] <= ph.domain
    link = np.where(inside, ph.link_up, ph.link_out)
    return held / link + np.where(inside, ph.latency_up, ph.latency_out)


def pool_columns(ph: Physics, x: Columns, rate, prefill: Columns, n_dec, n_pre, paid=None) -> Columns:
    """What ``n_dec`` decode instances of ``rate`` output tokens/s each and ``n_pre`` prefill
    instances (``prefill``: as in :func:`disaggregated`) serve, on how many paid GPUs (``paid``,
    where the caller has them): the slower pool sets the rate."""
    total = _deployment_cost(ph, prefill, x)(n_pre, n_dec) if paid is None else paid
    served = f.minimum(n_dec * rate, n_pre * ph.osl / prefill["prefill_s"])
    return dict(
        tokens_per_s_per_gpu=served / total,
        deployment_gpus=total,
        decode_instances=n_dec,
        prefill_instances=n_pre,
        # the paid GPUs beyond what the decode pool pays alone (all of the prefill pool's when
        # it fills no hole)
        prefill_share=f.maximum(0.0, total - n_dec * x["paid"]) / total,
    )


def traffic_pools(
    ph: Physics,
    x: Columns,
    rate,
    prefill: Columns,
    tokens_per_s: float,
    ttft_target_s: float | None = None,
    cap: Any = None,
) -> Columns:
    """:func:`pool_columns` of the pools a traffic of ``tokens_per_s`` output tokens/s needs, as one
    deployment behind one router, with ``ttft_target_s``: the fewest GPUs whose mean time to first
    token at the traffic, the lone prompt's (hand-off included) + the prefill pool's M/D/c wait +
    the wait for a free decode sequence slot (every decode instance's ``x["slots"]`` as one M/D/c
    queue, each request holding a slot for osl x slots / rate seconds, Little's law), is within it
    (:func:`decode_and_prefill_for_ttft`). Paid GPUs grow with either pool and are additive over
    copies, so this is never more GPUs than whole copies of any xPyD unit that serves the traffic
    at the target. Without a target, the fewest instances that keep up, ceil(traffic / rate) decode
    and ceil(traffic / prefill rate) prefill (pools at rho up to 1, whose waits have no bound).
    ``cap``: (prefill GPUs, decode GPUs an instance, GPUs), broadcast: where the least stable pools
    already use more GPUs than the cap (which some other deployment takes), the pools are left at
    their least stable counts, not searched (a caller that takes the fewest GPUs never takes them)."""
    import numpy as np

    requests = tokens_per_s / ph.osl
    if ttft_target_s is None:
        n_dec = np.maximum(f.whole_count(tokens_per_s / rate), 1.0)
        n_pre = np.maximum(f.whole_count(requests * prefill["prefill_s"]), 1.0)
    else:
        lone = prefill["latency_s"] + prefill["handoff_s"]
        n_dec, n_pre = decode_and_prefill_for_ttft(
            requests, ph.osl * x["slots"] / rate, x["slots"], prefill["prefill_s"],
            ttft_target_s - lone, _cost_columns(prefill, x), cap,
        )  # fmt: skip
    return pool_columns(ph, x, rate, prefill, n_dec, n_pre)


# a floor on a row's GPUs is taken a hair lower before it is compared with the GPUs some row takes
# (floating-point rounding, not a measured number): a row whose floor is that count but for
# rounding is kept, not left out (traffic._Bound, traffic._fixed_within, the cap below)
GPU_FLOOR_SLACK = 1e-9

# decode pools tried above the least stable one, an instance more each (each with the fewest
# prefill instances for the budget left): the pair with the fewest GPUs is found exactly wherever
# the decode pools worth trying are no more (a search bound, not a measured number)
DECODE_POOLS_TRIED = 16


def decode_and_prefill_for_ttft(requests_per_s, slot_s, slots, prefill_s, budget_s, cost_columns, cap=None):
    """Decode and prefill instances (arrays, broadcast) whose two queues' mean waits together stay
    within ``budget_s`` (the TTFT target less the lone prompt's time) at ``requests_per_s``
    (Poisson), on the fewest paid GPUs (``cost_columns``: :func:`_cost_columns`, broadcast): the
    decode pool's ``slots`` x D sequence slots an M/D/c queue of ``slot_s`` a request, the prefill
    pool's P instances one of ``prefill_s`` (:func:`queueing.mdc_wait_s`). Each D from the least
    stable pool (rho < 1) up takes the fewest P for the budget its wait leaves (the decision of
    :func:`queueing.mdc_servers_for_wait`), until P is at its own least stable count (a larger D
    only costs more) or :data:`DECODE_POOLS_TRIED` pools were tried; beside them, the least stable
    prefill pool with the fewest D for the budget it leaves, and the budget split in half (the
    first of equal costs kept, in that order). Where no pair fits (the lone prompt misses the
    target), both pools at their least stable counts, which the choice flags
    (:func:`traffic.choose_for_traffic`).

    Searched at a sweep's speed: each decision from closed-form bounds on the waits where they
    settle it, Erlang's sum only near a search's answer (:class:`queueing.WaitsWithin`); and once
    a D's P is the fewest for the whole budget (its slot wait leaves the prefill pool nothing to
    make up), every larger D takes that P too (the waits only fall), so the pools left are
    priced without a search (:func:`_larger_decode_pools`). ``cap`` (see :func:`traffic_pools`):
    cells whose least stable pools use more GPUs than it keep those pools, unsearched."""
    import numpy as np

    shape = np.broadcast_shapes(
        *(np.shape(v) for v in (requests_per_s, slot_s, slots, prefill_s, budget_s)),
        *(np.shape(c) for c in cost_columns),
    )
    given = (requests_per_s, slot_s, slots, prefill_s, budget_s, *cost_columns)
    lam, slot_s, slots, prefill_s, budget_s, *cols = (np.asarray(v, dtype=float) for v in given)
    grid = shape if len(shape) else (1,)
    least_dec, least_pre = _least_stable(lam, slot_s, slots, prefill_s)
    dec = np.array(np.broadcast_to(least_dec, grid)).reshape(-1)
    pre = np.array(np.broadcast_to(least_pre, grid)).reshape(-1)
    search_at = budget_s > 0  # elsewhere no pair fits
    if cap is not None:  # least stable pools within the cap
        g_p, g_d, most = cap
        with np.errstate(invalid="ignore"):
            search_at = search_at & ~((least_pre * g_p + least_dec * g_d) * (1 - GPU_FLOOR_SLACK) > most)
    i = np.flatnonzero(np.broadcast_to(search_at, grid))
    if len(i):  # only the searched cells are gathered (most cells of a capped block are not)
        at = np.unravel_index(i, grid)
        pick = lambda v: np.broadcast_to(v, grid)[at]  # noqa: E731
        cells = [pick(v) for v in (lam, slot_s, slots, prefill_s, budget_s)]
        pairs = _Pairs(cells, [pick(c) for c in cols], (pick(least_dec), pick(least_pre)))
        _search_pairs(pairs, np.arange(len(i)))
        dec[i], pre[i] = pairs.pools()
    return dec.reshape(shape), pre.reshape(shape)


def _least_stable(lam, slot_s, slots, prefill_s) -> Any:
    """The least stable decode pool (instances of ``slots`` slots, a request holding one
    ``slot_s`` seconds) and prefill pool (a prompt ``prefill_s`` seconds) at ``lam`` arrivals/s
    (arrays, broadcast): rho < 1."""
    import numpy as np

    with np.errstate(invalid="ignore"):
        return np.ceil((np.floor(lam * slot_s) + 1) / slots), np.floor(lam * prefill_s) + 1


class _Pairs:
    """The searched cells of :func:`decode_and_prefill_for_ttft` (flat arrays: arrivals/s, a slot's and a
    prompt's seconds, slots a decode instance, the budget in seconds, :func:`_cost_columns`), and
    per cell the pair (D, P) with the fewest paid GPUs offered so far (the first of equal costs
    kept), at first both pools at their least stable counts (``least``: :func:`_least_stable`
    of the cells)."""

    def __init__(self, cells, cols, least) -> None:
        import numpy as np

        lam, slot_s, slots, prefill_s, budget_s = cells
        self.lam, self.slot_s, self.slots = lam, slot_s, slots
        self.prefill_s, self.budget_s, self.cols = prefill_s, budget_s, cols
        self.ones = np.ones(len(lam))
        self.least_dec, self.least_pre = least
        self.dec, self.pre = self.least_dec.copy(), self.least_pre.copy()
        self.gpus = np.full(len(lam), np.inf)

    def cost(self, i, p, d) -> Any:
        """Paid GPUs (:func:`formulas.packed_gpus`) of ``p`` prefill and ``d`` decode instances at
        cells ``i``."""
        c = self.cols
        return f.packed_gpus(p, c[0][i], c[1][i], d, c[2][i], c[3][i])

    def offer(self, i, d, p) -> None:
        """Keep the pairs (``d``, ``p``) at cells ``i`` that cost fewer GPUs than the best so far
        (NaN: no pair)."""
        import numpy as np

        with np.errstate(invalid="ignore"):
            gpus = np.where(np.isnan(d) | np.isnan(p), np.inf, self.cost(i, p, d))
        better = gpus < self.gpus[i]
        at = i[better]
        self.dec[at], self.pre[at], self.gpus[at] = d[better], p[better], gpus[better]

    def fewest(self, service, unit, low, wait_s, i, other=None) -> Any:
        """The fewest counts from ``low`` (of ``unit`` servers each, a request taking ``service``
        seconds) whose wait is within ``wait_s`` less the ``other`` queue's wait ((service, servers)
        at cells ``i``; None: nothing) at cells ``i``; NaN where that is not above 0."""
        import numpy as np

        waits = WaitsWithin(self.lam[i], [(service[i], unit[i])], wait_s, other)
        at = np.arange(len(i))
        with np.errstate(invalid="ignore"):
            left = waits.left(at) if other is not None else wait_s > 0
            left &= np.isfinite(self.lam[i] * service[i])
            out = np.where(left, low, np.nan)
            out = waits.fewest(out, at[left & (self.lam[i] * service[i] < RESOLVED_LOAD)])
        return np.where(left, out, np.nan)

    def decode_for(self, i, wait_s, pre=None) -> Any:
        """The fewest decode instances from the least stable pool within ``wait_s`` at cells ``i``,
        less the wait of ``pre`` prefill instances (None: none)."""
        other = None if pre is None else (self.prefill_s[i], pre)
        return self.fewest(self.slot_s, self.slots, self.least_dec[i], wait_s, i, other)

    def prefill_for(self, i, low, wait_s, dec=None) -> Any:
        """The fewest prefill instances from ``low`` within ``wait_s`` at cells ``i``, less the
        slot wait of ``dec`` decode instances (None: none)."""
        other = None if dec is None else (self.slot_s[i], dec * self.slots[i])
        return self.fewest(self.prefill_s, self.ones, low, wait_s, i, other)

    def pools(self) -> Any:
        """The best pair per cell (both pools at their least stable counts where none fits)."""
        import numpy as np

        fits = np.isfinite(self.gpus)
        return np.where(fits, self.dec, self.least_dec), np.where(fits, self.pre, self.least_pre)


def _search_pairs(pairs: _Pairs, i: Any) -> None:
    """:func:`decode_and_prefill_for_ttft`'s candidates at cells ``i``, offered in its order."""
    import numpy as np

    b, least_dec, least_pre = pairs.budget_s[i], pairs.least_dec[i], pairs.least_pre[i]
    # the least stable prefill pool, the fewest decode instances for the budget it leaves
    pairs.offer(i, pairs.decode_for(i, b, least_pre), least_pre)
    # the budget split in half (its prefill pool, where its decode pool is the least stable one,
    # is that pool's below)
    half = pairs.decode_for(i, 0.5 * b)
    # the fewest prefill instances for the whole budget: no decode pool's takes fewer
    floor_pre = pairs.prefill_for(i, least_pre, b)
    floor_pre = np.where(np.isnan(floor_pre), least_pre, floor_pre)
    # each decode pool from the least stable one up, until the prefill pool is at its least: the
    # least stable pool first, then every pool left at once (_larger_decode_pools)
    p = pairs.prefill_for(i, floor_pre, b, least_dec)
    pairs.offer(i, half, _half_prefill(pairs, i, half, p))
    pairs.offer(i, least_dec, p)
    _larger_decode_pools(pairs, i, floor_pre, p)


def _half_prefill(pairs: _Pairs, i: Any, half: Any, p_least: Any) -> Any:
    """The fewest prefill instances for the budget left by ``half`` decode instances at cells
    ``i``: ``p_least`` (the least stable decode pool's) where ``half`` is that pool."""
    import numpy as np

    half_pre = np.where(half == pairs.least_dec[i], p_least, np.nan)
    other = np.flatnonzero(~np.isnan(half) & (half != pairs.least_dec[i]))
    if len(other):
        at = i[other]
        half_pre[other] = pairs.prefill_for(at, pairs.least_pre[at], pairs.budget_s[at], half[other])
    return half_pre


def _larger_decode_pools(pairs: _Pairs, i: Any, floor_pre: Any, p_first: Any) -> None:
    """The decode pools above the least stable one at cells ``i`` (``p_first``: its prefill
    pool), up to :data:`DECODE_POOLS_TRIED` pools in all: none where the loop stops at the least
    stable prefill pool; priced without a search where ``p_first`` is already the fewest for the
    whole budget (``floor_pre``: every larger pool takes it too); searched at once elsewhere."""
    import numpy as np

    least_pre = pairs.least_pre[i]
    live = np.flatnonzero(~(p_first <= least_pre) & ~(p_first == floor_pre))
    done = np.flatnonzero(~(p_first <= least_pre) & (p_first == floor_pre))
    rest = DECODE_POOLS_TRIED - 1
    _keep_first(pairs, i[done], pairs.least_dec[i[done]], floor_pre[done], rest)
    if len(live):
        _decode_pools_searched(pairs, i[live], floor_pre[live], p_first[live], rest)


def _decode_pools_searched(pairs: _Pairs, i: Any, floor_pre: Any, p_first: Any, rest: int) -> None:
    """The ``rest`` decode pools above the least stable one at cells ``i``, every one at once (the
    searches' cells pairs of a cell and a pool), in the order the loop takes them: a pool whose
    prefill floor ``floor_pre`` fits takes it (and the loop stops at the first such pool where the
    floor is the least stable prefill pool); the others are searched from the floor, except where
    no pair left can cost fewer GPUs than the best (:func:`_least_cost_left`; ``p_first``, the
    least stable decode pool's prefill pool, bounds them above)."""
    import numpy as np

    cell = np.repeat(np.arange(len(i)), rest)
    j, k = i[cell], np.tile(np.arange(1, rest + 1), len(i))
    d = pairs.least_dec[j] + k
    b = pairs.budget_s[j]
    waits = WaitsWithin(
        pairs.lam[j], [(pairs.prefill_s[j], pairs.ones[j])], b, (pairs.slot_s[j], d * pairs.slots[j])
    )
    at = np.arange(len(cell))
    with np.errstate(invalid="ignore"):
        left = waits.left(at) & np.isfinite(pairs.lam[j] * pairs.prefill_s[j])
    floor_fits = np.zeros(len(cell), dtype=bool)
    floor_fits[left] = waits.fits(floor_pre[cell][left], at[left])
    # the first pool at the floor: the loop stops there where the floor is the least stable
    # pool, and every pool from it takes the floor
    grid = floor_fits.reshape(-1, rest)
    first = np.where(grid.any(axis=1), np.argmax(grid, axis=1), rest)
    after = (np.arange(rest)[None, :] > first[:, None]).reshape(-1)
    stop = np.repeat(floor_pre <= pairs.least_pre[i], rest)
    p = np.where(floor_fits, floor_pre[cell], np.nan)
    top = np.where(np.isnan(p_first), np.inf, p_first)
    low_gpus = _least_cost_left(pairs.cols, j, d, floor_pre[cell], np.repeat(top, rest))
    hunt = np.flatnonzero(left & ~floor_fits & (low_gpus < pairs.gpus[j]))
    if len(hunt):
        p[hunt] = pairs.prefill_for(j[hunt], floor_pre[cell[hunt]], b[hunt], d[hunt])
    with np.errstate(invalid="ignore"):
        gpus = np.where(np.isnan(p) | (after & stop), np.inf, pairs.cost(j, p, d)).reshape(-1, rest)
    pick = np.argmin(gpus, axis=1)  # the first of the least, as the loop keeps them
    flat_pick = np.arange(len(i)) * rest + pick
    pairs.offer(i, d[flat_pick], np.where(np.isfinite(gpus.min(axis=1)), p[flat_pick], np.nan))


def _keep_first(pairs: _Pairs, i: Any, first_dec: Any, pre: Any, count: int) -> None:
    """Offer the least-cost pair of ``count`` decode pools from ``first_dec`` + 1 up, an instance
    more each, each with ``pre`` prefill instances, at cells ``i`` (the first of equal costs, in
    the loop's order)."""
    import numpy as np

    if not len(i) or not count:
        return
    d = first_dec[:, None] + (1 + np.arange(count))[None, :]
    gpus = pairs.cost(np.repeat(i, count), np.repeat(pre, count), d.reshape(-1)).reshape(-1, count)
    pick = np.argmin(gpus, axis=1)
    pairs.offer(i, d[np.arange(len(i)), pick], pre)


def _least_cost_left(cols, i, dec, low_pre, high_pre):
    """A floor on the paid GPUs (:func:`formulas.packed_gpus`, ``cols`` :func:`_cost_columns` per
    cell) of any pair left to a decode pool search at cells ``i``: D = ``dec``, P between
    ``low_pre`` and ``high_pre`` (inf: no top). Exact without
    assuming the GPUs grow with D or P (a hole can take an instance of the other pool): of
    packed_gpus's two packings, filling the decode instances' holes never costs less with more
    P, and filling the prefill instances' holes is convex in P (its least at the P that fills
    them, floor or ceil, within the range)."""
    import numpy as np

    paid_p, fill_p, paid_d, fill_d = (c[i] for c in cols)
    d, lo, hi = dec, low_pre, high_pre
    into_decode = d * paid_d + np.maximum(0.0, lo - d * fill_p) * paid_p
    with np.errstate(divide="ignore", invalid="ignore"):
        kink = np.where(fill_d > 0, d / fill_d, hi)
    best = np.full(d.shape, np.inf)
    for p in (lo, np.floor(kink), np.ceil(kink), hi):
        p = np.clip(p, lo, hi)
        with np.errstate(invalid="ignore"):
            into_prefill = p * paid_p + np.maximum(0.0, d - p * fill_d) * paid_d
        best = np.fmin(best, into_prefill)
    return np.minimum(into_decode, best)


def _cost_columns(prefill: Columns, x: Columns):
    """Each pool's paid GPUs per instance and the other pool's instances in its holes, per row:
    :func:`formulas.packed_gpus`'s columns (as :func:`_deployment_cost` prices them)."""
    return (prefill["paid"], prefill["per_decode"], x["paid"], prefill["decode_per"])


def _deployment_cost(ph: Physics, prefill: Columns, x: Columns):
    """Paid GPUs of ``P`` prefill and ``D`` decode instances, per row (arrays broadcast)."""
    cols = _cost_columns(prefill, x)

    def cost(n_pre, n_dec, columns: bool = False):  # columns: counts over a second axis
        paid_p, fill_p, paid_d, fill_d = (c[:, None] for c in cols) if columns else cols
        return f.packed_gpus(n_pre, paid_p, fill_p, n_dec, paid_d, fill_d)

    return cost


def _pools(ph: Physics, ratio, cost):
    """The best (D, P) per row without evaluating every pair: with P = ceil(ratio D) the decode
    pool sets the rate and tokens/s per GPU = r D / cost(P, D), best at the least P/D; with
    P = floor(ratio D) >= 1 the prefill pool does, tokens/s per GPU = q P / cost(P, D), best at the
    largest P/D (r, q: the instances' token rates; the cost per decode instance grows with P/D and
    the cost per prefill instance falls with it, with or without holes filled, since a prefill
    instance in a hole costs less than the decode instance around it). When no D makes
    floor(ratio D) >= 1, one prefill instance is both choices. The least P/D >= ratio and the
    largest P/D <= ratio are neighbours of ratio among the fractions P/D with D <= the most decode
    instances: a sorted table answers both for every row at once."""
    import numpy as np

    top = int(ph.max_decode_instances)
    up_p, up_d = _fraction_neighbours(ratio * (1 - 1e-12), top, above=True)
    down_p, down_d = _fraction_neighbours(ratio, top, above=False)
    # per-GPU rates in units of r (decode-bound) and of q = r / ratio (prefill-bound)
    up_cost = cost(up_p, up_d)
    by_decode = up_d / up_cost
    safe = np.maximum(down_p, 1.0)
    down_cost = cost(safe, np.where(down_p > 0, down_d, 1.0))
    by_prefill = np.where(down_p > 0, down_p / np.maximum(ratio, 1e-300) / down_cost, 0.0)
    pick_down = by_prefill > by_decode
    # the chosen pair's paid GPUs, as priced here: where down is picked, down_p >= 1 (else its rate
    # is 0, never above by_decode), so ``safe`` and the decode count are the pair's own
    paid = np.where(pick_down, down_cost, up_cost)
    if (pick_down & ~(down_p >= 1.0)).any():  # never; were it so, priced again, not assumed
        paid = None
    return np.where(pick_down, down_d, up_d), np.where(pick_down, down_p, up_p), paid


_FRACTIONS: dict[tuple[int, int], tuple] = {}


def _fraction_table(top: int, most: int):
    """Fractions P/D (D <= top, 1 <= P <= most) sorted by value, each with its smallest D, and an
    index of them over [0, TABLE_RATIO] (:func:`_count_below`)."""
    import numpy as np

    key = (top, most)
    if key not in _FRACTIONS:
        d = np.repeat(np.arange(1, top + 1), most)
        p = np.tile(np.arange(1, most + 1), top)
        order = np.lexsort((d, p / d))
        v, p, d = (p / d)[order], p[order], d[order]
        first = np.concatenate([[True], v[1:] != v[:-1]])  # the smallest D of equal values
        v = v[first]
        # per bucket [k, k + 1) / INDEX_PER_UNIT of the index: the values below it, and the most
        # values any bucket holds (its upper edge too)
        edges = np.arange(TABLE_RATIO * INDEX_PER_UNIT + 1) / INDEX_PER_UNIT
        below = np.searchsorted(v, edges[:-1], side="left")
        most_in = int(np.max(np.searchsorted(v, edges[1:], side="right") - below))
        _FRACTIONS[key] = (v, p[first].astype(float), d[first].astype(float), below, most_in)
    return _FRACTIONS[key]


def _count_below(v: Any, below: Any, most_in: int, x: Any, side: str) -> Any:
    """``np.searchsorted(v, x, side)`` for ``x`` up to TABLE_RATIO (above it or NaN, some index of
    ``v``), by the table's index: the values below the bucket of x, then those of its bucket
    compared one by one (at most ``most_in``: one where D <= 16). Exact: a bucket is x times a power
    of two, floored, and the comparisons are searchsorted's."""
    import numpy as np

    bucket = np.fmax(np.fmin(np.floor(x * INDEX_PER_UNIT), len(below) - 1), 0).astype(np.intp)
    i, last = below[bucket], len(v) - 1
    for _ in range(most_in):
        at = v[np.minimum(i, last)]
        i = i + (((at < x) if side == "left" else (at <= x)) & (i <= last))
    return i


def _fraction_neighbours(x, top: int, above: bool):
    """Per row, the least fraction P/D >= x (``above``; P >= 1) or the largest <= x (P >= 1; else
    P = 0, D = 1), over D = 1 .. top: as P = ceil(x D) or floor(x D) minimising or maximising P/D,
    the smallest D on ties."""
    import numpy as np

    x = np.asarray(x, dtype=float)
    v, p, d, below, most_in = _fraction_table(top, top * (TABLE_RATIO + 2))
    if above:
        i = np.minimum(_count_below(v, below, most_in, x, "left"), len(v) - 1)  # first value >= x
        p_out, d_out = p[i], d[i]
    else:
        i = _count_below(v, below, most_in, x, "right") - 1  # last value <= x
        ok = i >= 0
        p_out, d_out = np.where(ok, p[np.maximum(i, 0)], 0.0), np.where(ok, d[np.maximum(i, 0)], 1.0)
    big = np.flatnonzero(~(x <= TABLE_RATIO))  # beyond the table (or not a number): every D
    if big.size:
        dv = np.arange(1, top + 1, dtype=float)
        whole = np.ceil(x[big, None] * dv) if above else np.floor(x[big, None] * dv)
        k = np.argmin(whole / dv, axis=1) if above else np.argmax(whole / dv, axis=1)
        d_out, p_out = d_out.copy(), p_out.copy()
        d_out[big] = dv[k]
        p_out[big] = np.maximum(whole[np.arange(big.size), k], 1.0 if above else 0.0)
    return p_out, d_out


TABLE_RATIO = 64  # prefill instances per decode instance the fraction table covers
INDEX_PER_UNIT = 1024  # buckets per unit of the fraction table's index: a power of two (exact)


def _pinned_pools(ph: Physics, ratio, prefill: Columns, rate, cost, n_prefill, n_decode):
    """Pools pinned as deployed (either or both): the other searched as in :func:`_pools`."""
    import numpy as np

    top = n_decode or ph.max_decode_instances
    decode = np.arange(1 if n_decode is None else n_decode, top + 1, dtype=float)
    exact = ratio[:, None] * decode[None, :]
    if n_prefill is None:  # the fewest prefill instances that keep up, or one fewer (prefill-bound)
        pools = np.concatenate([np.ceil(exact * (1 - 1e-12)), np.floor(exact)], axis=1)
        decode = np.concatenate([decode, decode])
    else:
        pools = np.full_like(exact, float(n_prefill))
    pools = np.maximum(pools, 1.0)
    gpus = cost(pools, decode[None, :], columns=True)
    served = np.minimum(decode[None, :] * rate[:, None], pools * ph.osl / prefill["prefill_s"][:, None])
    pick = np.argmax(served / gpus, axis=1)
    rows = np.arange(len(pick))
    return decode[pick], pools[rows, pick]
