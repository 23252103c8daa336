"""One row of the evaluated grid as a :class:`Serving` result, with its configuration named."""

from __future__ import annotations

from typing import Any

from ipd_cli.engine import formulas as f
from ipd_cli.engine.results import Serving

from .evaluate import DEP, TEP, rank_sequences, stage_sequences
from .grid import Grid, step_parts
from .queueing import mdc_wait_s

MS = 1e3


def layout_name(g: Grid, li: int) -> str:
    """'TP4', 'TEP8', 'DEP8', 'DEP16 (attention TP4)', 'TP8 PP4', with ' EPLB' where used."""
    lay = g.lay
    fam, s, t, pp = int(lay["fam"][li]), int(lay["s"][li]), int(lay["t"][li]), int(lay["pp"][li])
    name = {DEP: "DEP", TEP: "TEP"}.get(fam, "TP") + str(s)
    if fam == DEP and t > 1:
        name += f" (attention TP{t})"
    if pp > 1:
        name += f" PP{pp}"
    if lay["eplb"][li]:
        name += " EPLB"
    return name


TBO = "two-batch overlap"  # how a configuration names the stack's overlap where it is taken


def prefill_name(g: Grid, li: int) -> str:
    """The layout's name, with ', two-batch overlap' where its prompts run overlapped."""
    tbo = bool(g.x["prefill_tbo"][li])
    return layout_name(g, li) + (f", {TBO}" if tbo else "")


def draft_name(g: Grid, li: int) -> str:
    """' + MTP (3 drafts)' where the layout speculates (draft depth 3), else ''."""
    k = int(g.lay["k"][li])
    if not k or g.ph.spec_method is None:
        return ""
    label = {"mtp": "MTP", "eagle3": "EAGLE-3"}.get(g.ph.spec_method, g.ph.spec_method)
    return f" + {label} ({k} draft{'s' if k > 1 else ''})"


def configuration(g: Grid, i: int) -> str:
    r = g.rows
    if not r["disagg"][i]:
        return _configuration_parts(g, i)[0]
    head, tail = _configuration_parts(g, i)
    return f"{int(r['prefill_instances'][i])}{head}{int(r['decode_instances'][i])}{tail}"


def _configuration_parts(g: Grid, i: int) -> tuple[str, str]:
    """Row ``i``'s name (aggregated: the whole of it, and ''); disaggregated: what goes after
    its prefill instances and after its decode instances (" prefill x DEP2 + ", " decode x ...")."""
    r = g.rows
    li = int(r["layout"][i])
    batch = f"batch {_per_rank(g, i)}{draft_name(g, li)}"
    decode = f", {TBO}" if step_parts(g, i)["tbo"] == 1 else ""
    if not r["disagg"][i]:
        prompts = f" (prompts: {TBO})" if bool(g.x["prefill_tbo"][li]) else ""
        return f"{layout_name(g, li)} {batch}{decode}{prompts}", ""
    pre = prefill_name(g, int(r["prefill_layout"][i]))
    return f" prefill x {pre} + ", f" decode x {layout_name(g, li)} {batch}{decode}"


def _count(x: float) -> int | float:
    """A GPU count: whole where it is whole (instances sharing a domain may strand a fraction)."""
    return int(round(x)) if abs(x - round(x)) < 1e-9 else x


def _counts(x: Any) -> Any:
    """:func:`_count` over an array (whole values as floats)."""
    import numpy as np

    whole = np.rint(x)
    return np.where(np.abs(x - whole) < 1e-9, whole, x)


def _per_rank(g: Grid, i: int) -> int:
    li = int(g.rows["layout"][i])
    return int(-(-float(g.rows["batch"][i]) // float(g.x["d"][li])))


def _parallelism(fam: int, t: int, s: int) -> str:
    if fam == DEP:
        return "dep" if t == 1 else "tp-attention+ep"
    return "tep" if fam == TEP else "tp"


def bottleneck(
    prefill_share: float, memory: float, compute: float, collectives: float, overhead: float
) -> str:
    """What takes most of the deployment's GPU time: "prefill" where more than half of it goes to
    prompts (aggregated: the instance's time in prefill; disaggregated: the prefill pool's share
    of the GPUs, which the label had ignored: Rubin's headline deployment, 70 % prefill GPUs, read
    "compute"), otherwise the largest part of the decode step."""
    parts = {"memory": memory, "compute": compute, "collectives": collectives, "overhead": overhead}
    return "prefill" if prefill_share > 0.5 else max(parts, key=parts.__getitem__)


def _speculation(ph, depth: int, accepted: float) -> str:
    if not depth:
        return "off"
    return f"{ph.spec_method}: {depth} draft{'s' if depth > 1 else ''}, {accepted:.3g} tokens/step"


def serving(g: Grid, i: int, operating_point: str, searched: int | None = None, **extra: Any) -> Serving:
    """The result for row ``i`` of grid ``g``: its speeds and costs, its configuration, where its
    step time goes, and the deployment it needs (``searched``: the configurations of a search that
    took more than this grid, such as a refined curve)."""
    point = Serving(
        **_rates(g, i),
        **_configuration_fields(g, i),
        **_step_time(g, i),
        **_deployment(g, i),
        operating_point=operating_point,
        configurations_searched=len(g) if searched is None else searched,
        **extra,
    )
    if g.ph.prompt_stall_s and not g.rows["disagg"][i]:  # explain's max(prompt, stall)
        point._prompt_stall = (float(g.x["prefill_s"][int(g.rows["layout"][i])]), g.ph.prompt_stall_s)
    return point


def _rates(g: Grid, i: int) -> dict[str, Any]:
    """Speeds per GPU and per user, their prices and power."""
    ph, r = g.ph, g.rows
    per_gpu = float(r["tokens_per_s_per_gpu"][i])
    per_user = float(r["tokens_per_s_per_user"][i])
    total = per_gpu * ph.request_tokens / ph.osl
    return dict(
        tokens_per_s_per_gpu=per_gpu,
        tokens_per_s_per_user=per_user,
        ttft_s=float(r["ttft_s"][i]),
        prefill_instance_s=float(r["prefill_instance_s"][i]),
        tpot_ms=MS * float(r["tpot_s"][i]),
        interactivity_tokens_per_s=1.0 / float(r["tpot_s"][i]),
        request_tokens_per_s=ph.osl / (float(r["ttft_s"][i]) + ph.osl * float(r["tpot_s"][i])),
        usd_per_million_output_tokens=f.usd_per_million_tokens(ph.price, per_gpu),
        usd_per_million_total_tokens=f.usd_per_million_tokens(ph.price, total),
        tokens_per_s_per_mw=f.tokens_per_s_per_mw(per_gpu, ph.kw_per_gpu, ph.pue),
        total_tokens_per_s_per_gpu=total,
        price_usd_per_gpu_hour=ph.price,
        pricing=ph.pricing,
        kw_per_gpu=ph.kw_per_gpu,
        gpus_per_system=ph.gpus_per_system,
    )


def _configuration_fields(g: Grid, i: int) -> dict[str, Any]:
    """The instance: model, precisions, parallelism, batch, speculation and serving stack."""
    ph, r, lay, x = g.ph, g.rows, g.lay, g.x
    li = int(r["layout"][i])
    fam, s, t = int(lay["fam"][li]), int(lay["s"][li]), int(lay["t"][li])
    depth, accepted = int(lay["k"][li]), float(x["accepted"][li])
    return dict(
        instance_gpus=int(lay["g"][li]),
        concurrency=int(round(float(r["batch"][i]))),
        model=ph.model,
        parallelism=_parallelism(fam, t, s),
        attention_tp=t,
        precision=ph.precision,
        kv_precision=ph.kv_precisions[int(lay["kv"][li])],
        input_tokens=ph.isl,
        output_tokens=ph.osl,
        context_tokens=ph.prefix,
        max_concurrency=int(x["rank_max"][li] * x["d"][li]),
        kv_bytes_per_token=float(x["kv_tok"][li]),
        weight_gb_per_instance=float(x["weights_instance"][li]) / f.GIGA,
        speculative_speedup=accepted,
        stack=ph.stack,
        stack_family=ph.family,
        stack_borrowed_from=ph.stack_borrowed_from,
        stack_release=ph.stack_release,
        speculative_method=ph.spec_method if depth else None,
        draft_depth=depth,
        speculation=_speculation(ph, depth, accepted),
        configuration=configuration(g, i),
        layout={DEP: "dep", TEP: "tep"}.get(fam, "tp"),
        tp=t,
        ep=int(lay["e"][li]),
        pp=int(lay["pp"][li]),
        attention_dp=int(x["d"][li]),
        eplb=bool(lay["eplb"][li]),
        batch_per_rank=_per_rank(g, i),
        expert_imbalance=float(x["imb_ep"][li]),
        attention_dp_imbalance=_dp_imbalance(g, i),
    )


def _dp_imbalance(g: Grid, i: int) -> float:
    """Sequences of row ``i``'s busiest attention rank over the mean rank's, as its step prices
    them (step_terms): a disaggregated decode pool's ceil(m / d), an aggregated instance's measured
    imbalance times m / d, and in both a whole sequence at least, over m / d. A review (hz): with
    fewer sequences than ranks an aggregated DEP8 at one sequence reported the measured 1.14 where
    its step prices the busiest rank's whole sequence, 8x the mean (a decode pool reported 8.0)."""
    li = int(g.rows["layout"][i])
    d, batch = float(g.x["d"][li]), float(g.rows["batch"][i])
    m = float(stage_sequences(batch, float(g.lay["pp"][li])))  # a stage's micro-batch, as the step's
    x = {"imb_dp": float(g.x["imb_dp"][li])}
    return float(rank_sequences(x, m, d, float(g.rows["disagg"][i]))) / (m / d)


def _step_time(g: Grid, i: int) -> dict[str, Any]:
    """Where a decode step's time goes, and what bounds it."""
    ph, r = g.ph, g.rows
    step = step_parts(g, i)
    return dict(
        decode_bound="memory" if step["memory_s"] >= step["compute_s"] else "compute",
        step_time_ms=MS * float(r["step_s"][i]),
        kernel_time_ms=MS * float(r["step_s"][i] - step["collective_s"] - step["overhead_s"]),
        memory_time_ms=MS * step["memory_s"],
        compute_time_ms=MS * step["compute_s"],
        collective_time_ms=MS * step["collective_s"],
        overhead_ms=MS * step["overhead_s"],
        host_time_ms=MS * step["host_s"],
        experts_touched_share=step["touched"] if ph.moe else 1.0,
        prefill_share=float(r["prefill_share"][i]),
        bottleneck=bottleneck(
            float(r["prefill_share"][i]),
            step["memory_s"],
            step["compute_s"],
            step["collective_s"],
            step["overhead_s"],
        ),
    )


def _deployment(g: Grid, i: int) -> dict[str, Any]:
    """The instances deployed (prefill and decode pools when disaggregated) and the GPUs they take."""
    r, lay = g.rows, g.lay
    gpus = int(lay["g"][int(r["layout"][i])])
    dis = bool(r["disagg"][i])
    n_dec, n_pre = int(r["decode_instances"][i]), int(r["prefill_instances"][i])
    pre = int(r["prefill_layout"][i])
    deploy = float(r["deployment_gpus"][i])
    used = n_dec * gpus + (n_pre * int(lay["g"][pre]) if dis else 0)
    per_gpu, per_user = float(r["tokens_per_s_per_gpu"][i]), float(r["tokens_per_s_per_user"][i])
    return dict(
        disaggregated=dis,
        decode_instances=n_dec,
        prefill_instances=n_pre,
        prefill_instance_gpus=int(lay["g"][pre]) if dis else None,
        prefill_configuration=prefill_name(g, pre) if dis else None,
        decode_two_batch_overlap=step_parts(g, i)["tbo"] == 1,
        prefill_two_batch_overlap=bool(g.x["prefill_tbo"][pre if dis else int(r["layout"][i])]),
        deployment_gpus=_count(deploy),
        stranded_gpus=_count(deploy - used),
        # Little's law: sequences in flight on average; D x concurrency unless a prefill-bound pool
        # leaves the decode instances part-empty
        deployment_concurrency=_count(per_gpu * deploy / per_user),
    )


# --- a traffic ---------------------------------------------------------------------------------

# the fields of :func:`serving` a traffic sets: those of the pools it sizes, and its own
TRAFFIC_FIELDS = (
    "tokens_per_s_per_gpu",
    "total_tokens_per_s_per_gpu",
    "usd_per_million_output_tokens",
    "usd_per_million_total_tokens",
    "tokens_per_s_per_mw",
    "prefill_share",
    "decode_instances",
    "prefill_instances",
    "deployment_gpus",
    "stranded_gpus",
    "deployment_concurrency",
    "configuration",
    "gpus_for_traffic",
    "systems_for_traffic",
    "instances_for_traffic",
    "traffic_requests_per_s",
    "usd_per_million_output_tokens_at_traffic",
    "prefill_queue_s",
    "slot_queue_s",
    "ttft_at_traffic_s",
    "prefill_utilisation",
    "slot_utilisation",
)
# of them, those an aggregated row (or a pool at its capacity) has not (NaN in :func:`traffic_fields`'
# arrays, None in its block)
UNMODELLED = (
    "prefill_queue_s",
    "slot_queue_s",
    "ttft_at_traffic_s",
    "prefill_utilisation",
    "slot_utilisation",
)
WHOLE = (
    "decode_instances",
    "prefill_instances",
    "gpus_for_traffic",
    "systems_for_traffic",
    "instances_for_traffic",
)


def traffic_fields(g: Grid, rows: Any, cols: dict[str, Any], requests_per_s: Any) -> dict[str, Any]:
    """The :data:`TRAFFIC_FIELDS` of :func:`serving` for chosen ``rows`` (an array, one per
    traffic) with their columns at each traffic (``cols``: :func:`traffic.choose_for_traffic`'s)
    and ``requests_per_s``: arrays, counts as floats (:func:`traffic_point` makes them one
    :class:`Serving`'s). The rest of a row's block is :func:`serving`'s, whatever the traffic."""
    import numpy as np

    ph, r, lay = g.ph, g.rows, g.lay
    rps = np.asarray(requests_per_s, dtype=float)
    per_gpu, deploy = cols["tokens_per_s_per_gpu"], cols["deployment_gpus"]
    n_dec, n_pre = cols["decode_instances"], cols["prefill_instances"]
    li, dis, pre = r["layout"][rows], r["disagg"][rows].astype(bool), r["prefill_layout"][rows]
    used = n_dec * lay["g"][li] + np.where(dis, n_pre * lay["g"][np.maximum(pre, 0)], 0)
    total = per_gpu * ph.request_tokens / ph.osl
    counted = _counts(deploy)
    tokens = rps * ph.osl
    distinct, inv = np.unique(rows, return_inverse=True)  # each chosen row named once, around its pools
    parts = [_configuration_parts(g, int(i)) for i in distinct]
    names = np.array([head for head, _ in parts] + [None], dtype=object)[:-1][inv]
    if dis.any():
        tails = np.array([tail for _, tail in parts] + [None], dtype=object)[:-1][inv[dis]]
        whole = lambda v: v[dis].astype(np.int64).astype(str).astype(object)  # noqa: E731
        with np.errstate(invalid="ignore"):  # pools past any count (1e20 requests/s): refused later
            names[dis] = whole(n_pre) + names[dis] + whole(n_dec) + tails
    with np.errstate(all="ignore"):
        return dict(
            tokens_per_s_per_gpu=per_gpu,
            total_tokens_per_s_per_gpu=total,
            usd_per_million_output_tokens=f.usd_per_million_tokens(ph.price, per_gpu),
            usd_per_million_total_tokens=f.usd_per_million_tokens(ph.price, total),
            tokens_per_s_per_mw=f.tokens_per_s_per_mw(per_gpu, ph.kw_per_gpu, ph.pue),
            prefill_share=cols["prefill_share"],
            decode_instances=n_dec,
            prefill_instances=n_pre,
            deployment_gpus=counted,
            stranded_gpus=_counts(deploy - used),
            deployment_concurrency=_counts(per_gpu * deploy / r["tokens_per_s_per_user"][rows]),
            configuration=names,
            gpus_for_traffic=(need := f.gpus_for_traffic(cols["copies"], counted)),
            systems_for_traffic=f.whole_systems(need, ph.gpus_per_system),
            instances_for_traffic=(copies := cols["copies"]),
            traffic_requests_per_s=rps,
            # the traffic's tokens on its GPUs, kept around the clock (the full-load $ is above)
            usd_per_million_output_tokens_at_traffic=f.usd_per_million_tokens_at_traffic(
                ph.price, tokens, need
            ),
            prefill_queue_s=(wait := prefill_queue_s(g, rows, cols, rps, copies)),
            slot_queue_s=(slot := slot_queue_s(g, rows, cols, rps, copies)),
            # an aggregated row has no prefill pool (no wait there), a disaggregated one's past its
            # rate has no bound (NaN)
            ttft_at_traffic_s=r["ttft_s"][rows] + np.where(dis, wait, 0.0) + slot,
            prefill_utilisation=np.where(
                np.isnan(wait), np.nan, rps / copies * r["prefill_instance_s"][rows] / n_pre
            ),
            slot_utilisation=np.where(
                np.isnan(slot), np.nan, rps / copies * slot_hold_s(g, rows) / sequence_slots(g, rows, n_dec)
            ),
        )


def slot_hold_s(g: Grid, rows: Any) -> Any:
    """Seconds a request holds a sequence slot: osl / tokens_per_s_per_user (Little's law over the
    deployment: its concurrency over its requests/s)."""
    return g.ph.osl / g.rows["tokens_per_s_per_user"][rows]


def sequence_slots(g: Grid, rows: Any, decode_instances: Any) -> Any:
    """Sequence slots of a deployment of grid ``rows`` with ``decode_instances`` decode (or
    aggregated) instances: instances x batch (each instance's concurrency)."""
    return decode_instances * g.rows["batch"][rows]


def queue_groups(g: Grid, rows: Any, decode_instances: Any, prefill_instances: Any) -> list[tuple[Any, Any]]:
    """A copy's queues behind the router as (seconds a request holds a server, servers a copy)
    pairs (:func:`queueing.mdc_copies_for_wait`'s groups): its :func:`sequence_slots`, each held
    :func:`slot_hold_s`, and, disaggregated, its ``prefill_instances``, each prompt
    ``prefill_instance_s`` (0 servers for an aggregated row: no prefill queue)."""
    import numpy as np

    r = g.rows
    return [
        (slot_hold_s(g, rows), sequence_slots(g, rows, decode_instances)),
        (r["prefill_instance_s"][rows], np.where(r["disagg"][rows] == 1, prefill_instances, 0)),
    ]


def slot_queue_s(g: Grid, rows: Any, cols: dict[str, Any], rps: Any, copies: Any) -> Any:
    """The mean wait of a request for a free sequence slot at ``rps`` requests/s (arrays, one per
    traffic): the slots (decode, or aggregated, instances x batch) of every one of ``copies``
    deployments behind one router, one M/D/c queue (:func:`queueing.mdc_wait_s`: Poisson arrivals,
    each request holding a slot for :func:`slot_hold_s`), as a prefill pool's instances are
    (:func:`prefill_queue_s`). NaN at rho >= 1 (no steady state: a pool sized at exactly its rate,
    possible only without a TTFT target)."""
    import numpy as np

    with np.errstate(all="ignore"):
        wait = mdc_wait_s(
            rps, slot_hold_s(g, rows), copies * sequence_slots(g, rows, cols["decode_instances"])
        )
    return np.where(np.isfinite(wait), wait, np.nan)


def prefill_queue_s(g: Grid, rows: Any, cols: dict[str, Any], rps: Any, copies: Any) -> Any:
    """The mean wait of a request for a prefill instance at ``rps`` requests/s (arrays, one per
    traffic): the prefill instances of every one of ``copies`` deployments behind one router (the
    next prompt to a free instance), an M/D/c queue (:func:`queueing.mdc_wait_s`: Poisson
    arrivals, each prompt ``prefill_instance_s`` of an instance, c the copies' prefill instances).
    NaN at rho >= 1 (no steady state) and for an aggregated row: its prompts have no pool of their
    own but take turns with decode inside each instance (their
    cost is in its TPOT), and what a request waits for there is a free sequence slot
    (:func:`slot_queue_s`)."""
    import numpy as np

    dis = g.rows["disagg"][rows].astype(bool)
    with np.errstate(all="ignore"):
        wait = mdc_wait_s(rps, g.rows["prefill_instance_s"][rows], copies * cols["prefill_instances"])
    # NaN too at or past the pool's capacity (rho >= 1, a pool sized at exactly its rate): no steady
    # state, a wait without bound, which a number (and JSON) cannot carry
    return np.where(dis & np.isfinite(wait), wait, np.nan)


def traffic_point(point: Serving, fields: dict[str, Any], k: int = 0) -> Serving:
    """``point`` (:func:`serving` of the chosen row) with the :func:`traffic_fields` of traffic
    ``k``: what a single estimate at a traffic reports."""
    update: dict[str, Any] = {}
    for name, values in fields.items():
        v = values[k]
        if name == "configuration":
            update[name] = str(v)
        elif name in UNMODELLED and v != v:  # NaN: an aggregated row's
            update[name] = None
        elif name in WHOLE:
            update[name] = int(v)
        elif name in ("deployment_gpus", "stranded_gpus", "deployment_concurrency"):
            update[name] = _count(float(v))
        else:
            update[name] = float(v)
    if "prefill_share" in update:  # the traffic's pools: their share of the GPUs may differ
        parts = (point.memory_time_ms, point.compute_time_ms, point.collective_time_ms, point.overhead_ms)
        update["bottleneck"] = bottleneck(update["prefill_share"], *parts)
    return point.model_copy(update=update)
