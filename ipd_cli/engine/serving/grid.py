"""The deployment space as numpy columns, its feasibility masks, pins, and the evaluated grid.

Space, per system, model, weight precision and request shape:

* instance GPUs ``g``: the catalog's sizes inside one scale-up domain and the domain's divisors
  (on a 72-GPU rack 3, 6, 9, 12, 18, 24 and 36 too, which tile it), then whole domains
  (2, 3, 4, 6, 8, 9, 12, ... up to ``serving.max_instance_domains``), and beyond one domain the
  sizes of pipelines whose stages, of the catalog's sizes, divide it that are not whole domains,
  each with those stage counts only (96 GPUs as 12 stages of 8 on a 72-GPU rack:
  :func:`_tiled_pipelines`); an instance that does not tile its domain pays for the GPUs it
  strands; a decode instance's stage (its TP or EP group) spans at most the stack's
  ``max_decode_stage_domains`` domains (the widest it has published on the family; a pinned size
  reaches beyond), the prefill instances only the instance bound;
* pipeline stages ``pp`` (inside a domain or across domains; each stage a size that tiles the
  domains, or a searched size smaller than a domain, which strands and pays the rest of each
  domain it sits in; a pinned stage count alone adds every such stage size times it, as a pinned
  size adds its splits);
* layout family per stage of ``s = g / pp`` GPUs: ``tp`` (attention and experts tensor
  parallel), ``tep`` (attention TP, experts EP over the same GPUs), ``dep`` (attention data
  parallel in groups of ``t`` GPUs, experts EP over all ``s``); MoE only for tep/dep;
* EPLB on or off where experts are spread (EP > 1); KV precision; speculative decoding's draft
  depth (0: none; the draft's weights and KV are held with the layout's);
* batch: sequences per scheduler rank on a ladder up to the engine cap, plus each layout's
  KV-capacity limit;
* aggregated, or disaggregated with a prefill pool sized to the decode pool.

Pins (``instance_gpus``, ``layout``, ``attention_tp``, ``disaggregated``, ``concurrency`` ...)
are masks on these columns; the evaluation is the same with or without them, and only the rows
they allow are priced (every layout's terms are still computed: a disaggregated row's prefill
instance is chosen among all of them). ``len`` of a grid is the whole space's; an infeasibility
message reads the whole grid (:meth:`Grid.whole`).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from ipd_cli.engine import formulas as f
from ipd_cli.engine.search import BLOCK, Space, distinct, member, product, take
from ipd_cli.errors import InputError

from .evaluate import (
    AGGREGATED_TERMS,
    DEP,
    STEP_LAYOUT,
    STEP_TERMS,
    TEP,
    TP,
    BatchTerms,
    aggregated,
    batch_terms,
    columns,
    disaggregated,
    kv_handoff_seconds,
    layout_terms,
    pooled_step_terms,
    prompt_with_stall,
    step_terms,
    touched_share,
)
from .physics import Physics

FAMILIES = {"tp": TP, "tep": TEP, "dep": DEP}
# the :func:`layout_terms` columns :func:`_evaluate` gathers at the layouts it prices: those the
# batches (:func:`_batches`, :func:`_batch_for_target`), the step and aggregated serving read,
# and the checks of whether a row runs
KEPT_TERMS = (*STEP_TERMS, *AGGREGATED_TERMS, "rank_max", "free_gpu")
FAMILY_NAMES = {v: k for k, v in FAMILIES.items()}
LAYOUT_RE = re.compile(r"^(tp|tep|dep)?(\d+)?(?:pp(\d+))?$")
# per-rank batch ladder: about sqrt(2) apart, 1 .. 4096 (the engine cap bounds it)
BATCH_LADDER = (
    1,
    2,
    3,
    4,
    6,
    8,
    12,
    16,
    24,
    32,
    48,
    64,
    96,
    128,
    192,
    256,
    384,
    512,
    768,
    1024,
    1536,
    2048,
    3072,
    4096,
)
# the finer ladder a curve refines its frontier's layouts on: about 2^(1/8) apart (9 %), every
# whole batch up to 13 (`estimate_serving_curve`; a curve of the coarse ladder alone read up to
# 20 % below `--tokens-per-user-s` at a target between two rungs)
FINE_LADDER = tuple(sorted({max(1, round(2 ** (k / 8))) for k in range(97)}))


@dataclass(frozen=True)
class Pins:
    """Parts of the space fixed by the caller (None: searched)."""

    instance_gpus: int | None = None
    max_instance_gpus: int | None = None  # the (decode) instance holds at most this many GPUs
    family: str | None = None
    stage_gpus: int | None = None
    pipeline_stages: int | None = None
    attention_tp: int | None = None
    eplb: bool | None = None
    disaggregated: bool | None = None
    concurrency: int | None = None
    prefill_layout: str | None = None  # 'tep4', 'dep2' ...: the prefill instances (disaggregated)
    prefill_instances: int | None = None  # xPyD pools as deployed (rates may then not match)
    decode_instances: int | None = None

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def parse_layout(text: str | None, name: str = "layout") -> dict[str, Any]:
    """``tp``, ``dep8``, ``tep16``, ``tp8pp4``, ``pp4`` -> family, GPUs per stage, stages (``name``:
    the parameter an error names)."""
    if text is None:
        return {}
    m = LAYOUT_RE.match(text.strip().lower())
    if not m or not any(m.groups()):
        raise InputError(
            f"unknown `{name}` '{text}'; write a family (tp, tep, dep), optionally GPUs per stage and "
            "pipeline stages: tp4, dep8, tep16, tp8pp4, pp4"
        )
    fam, gpus, stages = m.groups()
    if stages is None and (fam or gpus):
        stages = "1"  # 'tp4' is four GPUs, one stage; 'pp4' alone pins only the stages
    return {
        "family": fam,
        "stage_gpus": int(gpus) if gpus else None,
        "pipeline_stages": int(stages) if stages else None,
    }


def _smooth(limit: int) -> list[int]:
    """2^a 3^b for 1 <= n <= limit: a geometric ladder that keeps 3, 6, 9, 12, 18, 24 ..."""
    out, a = [], 1
    while a <= limit:
        b = a
        while b <= limit:
            out.append(b)
            b *= 3
        a *= 2
    return sorted(out)


def instance_sizes(ph: Physics, extra: int | None = None) -> list[int]:
    """The catalog's sizes inside one domain, the domain's divisors (they tile it: nothing stranded),
    the domain, whole domains on a geometric ladder, and a size the caller pinned. Without the
    divisors a 72-GPU rack was searched at 1-64 GPUs in powers of two and 72: the frontier
    scenario's serving on Vera Rubin took 9,360 GPUs where `--layout dep` (which adds them) found
    8,568 with 24-GPU prefill instances (a cross-command review). For a MoE model, also the sizes
    inside the domain that divide its routed experts (expert parallelism there places them
    evenly): 48 for 384 experts, where DEP72 leaves the fullest GPU 6 and DEP48 holds 8 on every
    GPU (a review: `--layout dep48` served the 10T MoE at 1,307 tokens/s per GPU on Vera Rubin
    against the search's 1,304)."""
    divisors = {d for d in range(1, ph.domain) if ph.domain % d == 0}
    divisors |= {d for d in range(2, ph.domain) if ph.moe and ph.experts % d == 0}
    inside = sorted({g for g in ph.instance_sizes if g < ph.domain} | divisors) + [ph.domain]
    sizes = inside + [k * ph.domain for k in _smooth(ph.max_domains) if k > 1]
    return sorted({*sizes, *([extra] if extra else [])})


def _tiled_pipelines(ph: Physics) -> tuple[Any, Any]:
    """Instance sizes beyond one domain that are not whole domains, of pipelines whose stages divide
    the domain, and those stage sizes: stage GPUs of the catalog's sizes below the domain that
    divide it (1, 2, 4 and 8 on a 72-GPU rack), times stages on the 2^a 3^b ladder up to the layers,
    up to ``max_domains`` domains. An 8-GPU node's system reaches 96 GPUs as 12 whole domains; a
    72-GPU rack, whose whole domains are 72, 144 ..., reached 12 stages of 8 only where pinned (a
    review: GB300 served the 10T MoE at BF16 10 % below B300, TP16 PP9 on 162 GPUs, where
    `--instance-gpus 96` found B300's TP8 PP12 and 4 % more than B300). Every divisor of the domain
    as a stage (3, 6, 9 ... 36 too) grew DeepSeek-R1's GB200 grid 17 % (305,600 to 357,200 rows)
    against these 4 % (318,800), its search's instructions 26 % against 8.5 % (callgrind), and
    changed no answer these do not (896 serving answers, 16 systems, 28 models, 2026-12-07)."""
    import numpy as np

    stage = np.array([d for d in ph.instance_sizes if d < ph.domain and ph.domain % d == 0], dtype=int)
    g = (stage[:, None] * np.array(_smooth(ph.layers), dtype=int)[None, :]).reshape(-1)
    return distinct(g[(g > ph.domain) & (g % ph.domain != 0) & (g <= ph.max_domains * ph.domain)]), stage


def layouts(ph: Physics, pins: Pins | None = None) -> dict[str, Any]:
    """Every layout the model can run in on this system (definitions applied, not feasibility)."""
    pins = pins or Pins()
    key = (
        ph.domain,
        ph.instance_sizes,
        ph.max_domains,
        ph.layers,
        ph.heads,
        ph.moe,
        ph.experts,
        len(ph.kv_precisions),
        ph.spec_depths,
        # the pins the enumeration reads (the others mask rows later): a grid of another
        # concurrency, such as :func:`at_batch`'s, shares its layouts
        (pins.instance_gpus, pins.stage_gpus, pins.pipeline_stages),
    )
    try:
        hit = _LAYOUTS.get(key)
    except TypeError:  # array-valued structure (a sweep over it): not kept
        return _layouts(ph, pins)
    if hit is None:
        hit = _LAYOUTS[key] = _layouts(ph, pins)
        for v in hit.values():
            v.flags.writeable = False  # shared by every grid of this structure
        if len(_LAYOUTS) > MEMO_LAYOUTS:
            _LAYOUTS.pop(next(iter(_LAYOUTS)))  # the oldest
    return dict(hit)


# The layout columns depend on the system's and model's structure and the pins only, not on the
# rates a calibration or a sweep varies: enumerated once per structure (at most MEMO_LAYOUTS kept)
_LAYOUTS: dict[tuple, dict[str, Any]] = {}
MEMO_LAYOUTS = 64


def _layouts(ph: Physics, pins: Pins) -> dict[str, Any]:
    import numpy as np

    sizes = np.array(instance_sizes(ph, pins.instance_gpus))
    if pins.stage_gpus:
        pinned = pins.stage_gpus * (pins.pipeline_stages or 1)
        sizes = distinct(np.concatenate((sizes, [pinned])))  # np.union1d
    # stages pinned alone (`--layout pp5`): every stage size a `tpNpp5` pin takes, the searched sizes
    # and the domain's divisors, times the stages, as `--instance-gpus` takes every split of its size
    # (5 is not 2^a 3^b, so no searched size held 5 stages; pp3 lacked the 6-GPU TP2 PP3)
    npp = pins.pipeline_stages if pins.pipeline_stages and not pins.stage_gpus else 0
    divisors = [d for d in range(1, ph.domain + 1) if ph.domain % d == 0]
    staged = distinct(np.concatenate((sizes, divisors))) if npp else sizes  # np.union1d
    extra = distinct(staged * npp) if npp else np.array([], dtype=int)
    extra = extra[~member(extra, sizes)]  # np.setdiff1d
    # pipelines beyond one domain of stages that divide it, at sizes that are not whole domains
    # (96 GPUs as 12 stages of 8 on 72-GPU racks), each only with its own stage counts
    piped, piped_stage = _tiled_pipelines(ph)
    piped = piped[~member(piped, sizes) & ~member(piped, extra)]  # np.setdiff1d
    # pipeline stages beyond the layers and attention TP beyond the heads never run: not enumerated
    stages = set(_smooth(ph.layers)) | ({pins.pipeline_stages} if pins.pipeline_stages else set())
    n = pins.instance_gpus
    if n:  # a pinned size: every split of it, as `--layout` pins it (TP1 PP5 for 5 GPUs; 5 is not 2^a 3^b);
        # those beyond the layers too, so that a refusal names the rule
        stages |= {p for p in range(1, n + 1) if n % p == 0}
    cols = product(
        g=distinct(np.concatenate((sizes, extra, piped), axis=None)).astype(int),  # np.union1d
        pp=np.array(sorted(stages)),
        tcode=np.arange(-1, ph.heads.bit_length()),
        fam=np.array([TP, TEP, DEP] if ph.moe else [TP]),
        eplb=np.array([0, 1] if ph.moe else [0]),
        kv=np.arange(len(ph.kv_precisions)),
        k=np.array(sorted({0, *ph.spec_depths})),  # depth 0 for the prefill instances
    )
    cols = take(cols, (cols["g"] % cols["pp"] == 0))
    g, pp = cols["g"], cols["pp"]
    s = g // pp
    t = np.where(cols["tcode"] < 0, s, 2 ** np.maximum(cols["tcode"], 0))
    pow2 = (s & (s - 1)) == 0
    # each pipeline stage's TP/EP group stays whole: stages tile the scale-up domains (a 32-GPU stage
    # would straddle two 72-GPU racks), inside one domain or across several. Pipelines inside a
    # domain were not offered while stages of a pipeline across domains could be smaller than a
    # domain: B200 ran 1-GPU stages across two 8-GPU nodes (a pipeline inside each node) that a
    # 72-GPU rack could not, and served Llama 405B faster than GB200, B200 with more of everything
    # A stage of a searched size smaller than a domain that does not divide it runs there too, each
    # domain holding domain // s stages and stranding the rest, paid (64-GPU stages on 72-GPU
    # racks, as NVIDIA's MLPerf runs use 64 of each NVL72): refused, an H100 whose domain a what-if
    # made 72 served a 10T MoE on 14x the GPUs it needed at 64 (a dominance review)
    searched = instance_sizes(ph)  # the catalog's, not a pin's: a pin does not make its size tile
    tiles = (ph.domain % s == 0) | (s % ph.domain == 0) | ((s < ph.domain) & member(s, searched))
    # a stage size the catalog does not list runs where a pin names it: `--layout` its stage GPUs,
    # `--instance-gpus` a split of its instance (stage GPUs x stages)
    named = (s == (pins.stage_gpus or 0)) | (g == (n or 0)) | ((pp == npp) & member(s, staged))
    stage_ok = (member(s, sizes) | named) & ((pp == 1) | ((g % pp == 0) & tiles))
    t_ok = (s % t == 0) & ~((cols["tcode"] < 0) & pow2)  # t = s once
    e = np.where(cols["fam"] == TP, 1, s)
    fam_ok = np.where(
        cols["fam"] == TP, t == s, np.where(cols["fam"] == TEP, (t == s) & (s > 1), (t < s) & (pp == 1))
    )
    keep = stage_ok & t_ok & fam_ok & ((cols["eplb"] == 0) | (e > 1)) & (g % pp == 0)
    keep &= ~member(g, extra) | (pp == npp)  # the stages' own sizes hold only their pipelines
    keep &= ~member(g, piped) | member(s, piped_stage)  # (and those of ``piped``)
    out = take({**cols, "s": s, "t": t, "e": e}, keep)
    out.pop("tcode")
    return out


def _batches(
    ph: Physics, lay: dict, x: dict, pins: Pins, target: float | None, rungs: tuple[int, ...] = BATCH_LADDER
):
    """Per layout, the batch ladder (sequences per scheduler rank, times the ranks), the
    KV-capacity limit and, at a target speed per user, the largest batch that meets it
    (aggregated and disaggregated); a pinned concurrency replaces them all. And how many of the
    first columns are the ladder's (each its rung times the layout's ranks; 0: pinned)."""
    import numpy as np

    d, cap = x["d"], np.maximum(x["rank_max"], 1.0)
    if pins.concurrency is not None:
        return np.full((len(d), 1), float(pins.concurrency)), 0
    ladder = np.array([b for b in rungs if b <= ph.max_batch_per_rank], dtype=float)
    cols = [np.broadcast_to(ladder, (len(d), len(ladder))) * d[:, None], (cap * d)[:, None]]
    if target is not None:
        agg, dis = _batch_for_target(ph, lay, x, target)
        cols += [agg[:, None], dis[:, None]]
    return np.concatenate(cols, axis=1), len(ladder)


def _batch_for_target(ph: Physics, lay: dict, x: dict, target: float):
    """Per layout, the largest batch whose interactivity (1 / TPOT) meets ``target`` (1 where none
    does), aggregated (each request also waits for the other requests' prefills that take turns)
    and disaggregated: a bisection over whole batches, vectorised over layouts and both modes at
    once. Interactivity falls with batch.

    The bisection's steps run several at a time (:func:`_bisection_levels`): every midpoint the next
    steps could test, on each open row, in one pass of the step formulas (a row's answer is the
    bisection's own, step for step: the same midpoints, in the same order, to the same end). Its
    rows are few (a pinned search: a handful of layouts) and a pass costs mostly its own overhead."""
    import numpy as np

    n = len(x["d"])
    # the columns the step and this search read, each layout twice (both modes)
    two = {k: np.concatenate([v, v]) for k, v in _as_floats(columns(lay, STEP_LAYOUT)).items()}
    x_read = columns(x, (*STEP_TERMS, "prefill_s", "accepted", "rank_max"))
    x2 = {k: np.concatenate([v, v]) for k, v in _as_floats(x_read).items()}
    waits = np.concatenate([np.ones(n), np.zeros(n)])  # 1: aggregated
    x2["prefill_s"] = prompt_with_stall(ph, x2["prefill_s"])  # the other prompts, as aggregated() prices them
    lo, hi = np.ones(2 * n), np.maximum(x2["rank_max"] * x2["d"], 1.0)
    found = lo.copy()  # every row's answer; ``rows``: those still searched, ``lo`` and ``hi`` theirs
    rows = np.arange(2 * n)
    left = int(np.log2(max(float(hi.max()), 2.0))) + 2  # the bisection's steps
    while left > 0:
        # a row whose range has closed (lo >= hi) keeps its lo (every later midpoint is lo): once
        # most have, search the others only (DeepSeek-R1 on GB200: a quarter of the rows open
        # after half of the steps)
        still = np.flatnonzero(lo < hi)
        found[rows] = lo
        if not still.size:
            break
        if 2 * len(still) < len(rows):  # (the closed rows' midpoints change nothing: a pass skips
            # them once they are most of it)
            rows, lo, hi, waits = rows[still], lo[still], hi[still], waits[still]
            two, x2 = take(two, still), take(x2, still)
        k = _bisection_levels(len(rows), left)
        # the tree of the next k steps' ranges, breadth first: node j's two children are 2j + 1
        # (its midpoint met the target: [mid, hi]) and 2j + 2 (it did not: [lo, mid - 1])
        nodes = 2**k - 1
        mids, level_lo, level_hi = np.empty((nodes, len(rows))), lo[None, :], hi[None, :]
        for level in range(k):  # the 2^level nodes of each level at once
            mid = np.floor((level_lo + level_hi + 1) / 2)
            mids[2**level - 1 : 2 ** (level + 1) - 1] = mid
            if level + 1 < k:
                level_lo = np.stack([mid, level_lo], axis=1).reshape(-1, len(rows))
                level_hi = np.stack([level_hi, mid - 1], axis=1).reshape(-1, len(rows))
        mid, w, lr, xr = mids.reshape(-1), waits, two, x2
        if nodes > 1:  # each row once per node, node-major (node j's: j * len(rows) onwards)
            at = np.tile(np.arange(len(rows)), nodes)
            w, lr, xr = waits[at], take(two, at), take(x2, at)
        step = step_terms(ph, lr, xr, mid, parts=False, pool=1.0 - w)["step_s"]
        speed = 1.0 / f.aggregated_tpot_seconds(mid, ph.osl, w * xr["prefill_s"], step, xr["accepted"])
        ok = (speed >= target).reshape(nodes, len(rows))
        j, cols = 0, np.arange(len(rows))
        for level in range(k):  # down the tree, each row by its own midpoints' answers
            met, mid = (ok[0], mids[0]) if level == 0 else (ok[j, cols], mids[j, cols])
            lo, hi = np.where(met, mid, lo), np.where(met, hi, mid - 1)
            j = 2 * j + 2 - met
        left -= k
    found[rows] = lo
    return found[:n], found[n:]


def _bisection_levels(rows: int, left: int) -> int:
    """Bisection steps to take in one pass over ``rows`` open rows (``left`` steps to go): as many
    as keep the pass within BISECTION_ROWS rows (2^k - 1 midpoints a row), at least one."""
    k = 1
    while k < left and rows * (2 ** (k + 1) - 1) <= BISECTION_ROWS:
        k += 1
    return k


# rows of one pass of the step formulas in the batch search at a target: two layouts (4 rows, both
# modes) take four steps a pass (4 x 31 = 124 rows), eight take three (16 x 7 = 112), a whole
# grid's hundreds one at a time
BISECTION_ROWS = 128


@dataclass
class Grid:
    """The evaluated space: layout and row columns, masks, metrics."""

    ph: Physics
    lay: dict[str, Any]
    x: dict[str, Any]
    rows: dict[str, Any]  # layout index, batch, disagg flag, and every metric
    space: Space
    pinned: Any
    prefill: dict[str, Any] = field(default_factory=dict)  # chosen prefill layout per KV precision
    # the configurations of the whole space (pinned or not): ``len``; the rows are the pinned ones
    # only (``pruned``) or all of them
    searched: int = 0
    pruned: bool = False
    pins: Pins = field(default_factory=Pins, compare=False, repr=False)
    target: float | None = field(default=None, compare=False, repr=False)
    # what sizes the disaggregated rows' pools for a traffic (:mod:`.traffic`); empty when pinned
    pools: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # what other engines derive from the grid alone, kept with it (a memoized grid shares them)
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def feasible(self):
        return self.space.feasible & self.pinned

    def __len__(self) -> int:
        return self.searched

    def whole(self) -> Grid:
        """The grid with every row of the space, the pinned-out ones too (itself when it has them):
        what an infeasibility message reads (the rule each split breaks, the nearest feasible
        configuration)."""
        return evaluate(self.ph, self.pins, self.target, whole=True) if self.pruned else self


def _drafts(lay: dict) -> Any:
    """Per layout, 1 where it drafts (a draft depth above 0), else 0: the index of its prefill
    choice (:func:`_prefill_choice`)."""
    return (lay["k"] > 0).astype(int)


def _within_reach(ph: Physics, lay: dict, pins: Pins) -> Any:
    """Layout rule for the decode (and aggregated) instances: each pipeline stage, its tensor- or
    expert-parallel group, spans at most the stack's ``max_decode_stage_domains`` scale-up domains
    (the widest decode it has published on the family: DEP16 over two H100 nodes for TensorRT-LLM,
    a rack for Blackwell). A size the caller pins (stage or instance GPUs) reaches beyond it.
    Prefill instances are not bounded by it (they are chosen among every layout)."""
    pinned = (lay["s"] == (pins.stage_gpus or 0)) | (lay["g"] == (pins.instance_gpus or 0))
    return (lay["s"] <= ph.max_stage_domains * ph.domain) | pinned


def _tp_divides_heads(ph: Physics, lay: dict) -> Any:
    """Layout rule: each layout's tensor parallelism divides the attention heads and the KV heads
    or is a multiple of them (:func:`formulas.tensor_parallel_splits`: vLLM's and TensorRT-LLM's
    rule; TP5 served Llama 4 Maverick's 8 KV heads, a capacity planner's review), and a draft's
    heads where the layout drafts (DeepSeek-V3's published EAGLE-3 draft has 56 heads to its 128)."""
    t = lay["t"]
    return f.tensor_parallel_splits(t, ph.heads, ph.kv_heads) & ((lay["k"] == 0) | (ph.draft_heads % t == 0))


def _ep_within_experts(ph: Physics, lay: dict) -> Any:
    """Layout rule: no more expert ranks than experts."""
    return lay["e"] <= ph.experts


def _prefill_choice(ph: Physics, lay: dict, x: dict, pins: Pins) -> dict:
    """Per KV precision, EPLB and drafting, the prefill instance with the most requests/s per paid
    GPU (of the pinned prefill layout, if any). A deployment balances its experts in both pools or
    in neither (a prefill instance that spreads no experts goes with either), so an EPLB pin holds
    for both pools; a decode pool that drafts takes prefill instances that run the draft over the
    prompt and hold its weights and KV cache (any depth: the prompt passes the draft once)."""
    import numpy as np

    depths = lay["k"][lay["k"] > 0]
    first = depths.min() if depths.size else 0  # the drafting prefill instances' rows: one depth
    ok = (
        (x["free_gpu"] > 0)
        & (x["rank_max"] >= 1)
        & (lay["pp"] == 1)
        & ((lay["k"] == 0) | (lay["k"] == first))
    )
    # the layout rules hold for prefill instances too: Kimi K2's 64 heads were served by TP3 prefill
    # instances once the rack's divisors joined the sizes (a TP the heads do not divide)
    ok &= _tp_divides_heads(ph, lay) & _ep_within_experts(ph, lay)
    want = parse_layout(pins.prefill_layout)
    if want.get("family"):
        ok &= lay["fam"] == FAMILIES[want["family"]]
    if want.get("stage_gpus"):
        ok &= lay["s"] == want["stage_gpus"]
    score = np.where(ok, 1.0 / (x["pool_prefill_s"] * x["paid"]), -1.0)
    hole = _holes(ph, lay)
    holes = distinct(hole[hole > 0])
    best = np.full((len(ph.kv_precisions), 2, 2), -1)
    fill = np.full((len(holes), len(ph.kv_precisions), 2, 2), -1)
    tiles = [h % lay["g"] == 0 for h in holes]  # the layouts that tile each hole
    drafting = _drafts(lay)
    # each group's masks once (kv x eplb x drafting: twelve groups at most)
    balanced = [(lay["eplb"] == e) | (lay["e"] == 1) for e in (0, 1)]
    drafts_is = [drafting == drafts for drafts in (0, 1)]
    for k in range(len(ph.kv_precisions)):  # one to three KV precisions
        of_kv = lay["kv"] == k
        for e in (0, 1):
            of_kv_e = of_kv & balanced[e]
            for drafts in (0, 1):
                cand = np.where(of_kv_e & drafts_is[drafts], score, -2.0)
                i = int(np.argmax(cand))
                top = cand[i]  # the group's largest score (NaN where one is: argmax's first NaN)
                best[k, e, drafts] = i if top > 0 else -1
                for j, tiling_hole in enumerate(tiles):  # the best that tile a decode instance's hole
                    if top > 0 and tiling_hole[i]:  # the best tiles it (no NaN, none before it as large)
                        fill[j, k, e, drafts] = i
                    elif top <= 0:  # no score above 0 and no NaN: none among those that tile it either
                        fill[j, k, e, drafts] = -1
                    else:
                        fill[j, k, e, drafts] = _best_above_zero(np.where(tiling_hole, cand, -2.0))
    return {"index": best, "hole": hole, "holes": holes, "fill": fill}


def _best_above_zero(values: Any) -> int:
    """The first row of the largest of ``values`` where it is above 0, else -1 (also where one is
    NaN): ``argmax if values.max() > 0``, whose argmax is that maximum's first row (NaN, the first
    NaN's, as ``max`` gives NaN), so the row's value is the test, without a second reduction."""
    import numpy as np

    i = int(np.argmax(values))
    return i if values[i] > 0 else -1


def _holes(ph: Physics, lay: dict):
    """GPUs a decode instance smaller than the domain leaves of each domain it sits in (a DEP64
    instance on a 72-GPU rack: 8), where prefill instances can run."""
    import numpy as np

    return np.where(lay["g"] < ph.domain, ph.domain % np.maximum(lay["g"], 1), 0)


def _hole_partners(lay: dict, pf: dict):
    """Per layout, the prefill instance that tiles its hole best (-1 where it has none, or where
    that is the prefill instance it already pairs with)."""
    import numpy as np

    hole, holes, fill = pf["hole"], pf["holes"], pf["fill"]
    if not len(holes):
        return np.full(len(hole), -1)
    j = np.clip(np.searchsorted(holes, hole), 0, len(holes) - 1)
    drafts = _drafts(lay)
    other = np.where((hole > 0) & (holes[j] == hole), fill[j, lay["kv"], lay["eplb"], drafts], -1)
    return np.where(other == pf["index"][lay["kv"], lay["eplb"], drafts], -1, other)


# the first LAYOUT_RULES checks of _checks are the layout rules (the layers, the heads, the
# experts, the stage's reach), before any memory or batch check: a row whose first failure is below
# it has no layout
LAYOUT_RULES = 4


def _checks(
    ph: Physics, lay: dict, x: dict, r: dict, fits: Any, reach: Any, per_layout: bool | None = None
) -> Space:
    """The requirements, in the order a message names the first a row fails (``fits``: per row,
    whether its batch fits its layout's KV capacity and batch cap; ``reach``: per layout,
    :func:`_within_reach`). The layout rules are worked out once per layout and gathered to the rows
    (``per_layout``) where there are as many rows as layouts, else at the rows' own layouts (a
    pinned grid's handful of rows among thousands of layouts), the same masks."""
    import numpy as np

    space = Space({"row": r["layout"]})
    li = r["layout"]
    if per_layout is None:
        per_layout = len(li) >= len(lay["g"])
    if not per_layout:  # each rule at the rows' own layouts
        at = {k: lay[k][li] for k in ("pp", "t", "k", "e")}
        layers, heads, experts = at["pp"] <= ph.layers, _tp_divides_heads(ph, at), _ep_within_experts(ph, at)
        reached, weights, kv = reach[li], x["free_gpu"][li] > 0, x["rank_max"][li] >= 1
    else:  # each rule once per layout, gathered to the rows at once
        layers, heads, experts, reached, weights, kv = masks_at(
            li,
            lay["pp"] <= ph.layers,
            _tp_divides_heads(ph, lay),
            _ep_within_experts(ph, lay),
            reach,
            x["free_gpu"] > 0,
            x["rank_max"] >= 1,
        )
    # the layers first: a stage count beyond them fails with every stage size (`--layout pp100` on 80
    # layers was refused by the heads, which its 24-GPU stages break)
    space.require(f"more pipeline stages than the {ph.layers} layers", layers)
    draft = f" (and the draft's {ph.draft_heads})" if ph.draft_heads not in (0, ph.heads) else ""
    kv_heads = f" and the {ph.kv_heads} KV heads (or be a multiple of them)" if ph.kv_heads > 1 else ""
    space.require(f"tensor parallelism must divide the {ph.heads} attention heads{kv_heads}{draft}", heads)
    space.require(f"expert parallelism above the {ph.experts} experts", experts)
    # the profile that sets the bound: a borrowed one named as such (SGLang on Blackwell takes
    # TensorRT-LLM's, which SGLang has not published)
    own = f"{ph.stack} on {ph.family}" if ph.family else None
    of = ph.max_stage_domains_of
    widest = f"the widest {of} has published" if of != "the reference" else "the reference bound"
    if own is not None and of != own:
        widest += f", which {own} borrows"
    space.require(
        f"a decode stage spans more than {ph.max_stage_domains} scale-up "
        f"domain{'' if ph.max_stage_domains == 1 else 's'} of {ph.domain} GPUs, "
        f"{widest} (max_decode_stage_domains)",
        reached,
    )
    space.require("the weights do not fit in HBM", weights)
    space.require("the KV cache cannot hold one full request", kv)
    space.require("the batch exceeds the KV capacity or the engine's batch cap per rank", fits)
    space.require(
        "no prefill instance fits (disaggregated; one that drafts where decode does)", r["prefill_ok"]
    )
    finite = np.isfinite(r["tokens_per_s_per_gpu"]) & np.isfinite(r["tokens_per_s_per_user"])
    finite &= (r["tokens_per_s_per_gpu"] > 0) & (r["tokens_per_s_per_user"] > 0) & np.isfinite(r["step_s"])
    space.require("a rate is not finite (an input is out of range)", finite)
    return space


def layout_mask(lay: dict, pins: Pins):
    """The layouts the pins allow (the layout columns' pins; the disaggregation pin is per row)."""
    import numpy as np

    ok = np.ones(len(lay["g"]), dtype=bool)
    for key, col in (
        ("instance_gpus", "g"),
        ("stage_gpus", "s"),
        ("pipeline_stages", "pp"),
        ("attention_tp", "t"),
    ):
        value = getattr(pins, key)
        if value is not None:
            ok &= lay[col] == value
    if pins.max_instance_gpus is not None:
        ok &= lay["g"] <= pins.max_instance_gpus
    if pins.family is not None:
        ok &= lay["fam"] == FAMILIES[pins.family]
    if pins.eplb is not None:
        ok &= lay["eplb"] == int(pins.eplb)
    return ok


def masks_at(rows: Any, *masks: Any) -> list[Any]:
    """Boolean layout columns (at most 8) at layouts ``rows``, gathered at once: each a bit of one
    byte per layout."""
    import numpy as np

    bits = np.zeros(len(masks[0]), dtype=np.uint8)
    for i, mask in enumerate(masks):
        bits |= np.asarray(mask, dtype=np.uint8) << i
    at = np.take(bits, rows)
    return [(at & (1 << i)) != 0 for i in range(len(masks))]


def pins_mask(lay: dict, r: dict, pins: Pins, allowed: Any = True):
    """The rows the pins allow, of the layouts ``allowed`` too."""
    return _rows_of(r, pins, layout_mask(lay, pins) & allowed)


def _rows_of(r: dict, pins: Pins, layouts: Any):
    """The rows of the layouts ``layouts`` (a mask over them) in the mode the pins allow."""
    (ok,) = masks_at(r["layout"], layouts)
    if pins.disaggregated is not None:
        ok &= r["disagg"] == int(pins.disaggregated)
    return ok


def evaluate(ph: Physics, pins: Pins, target: float | None = None, whole: bool = False) -> Grid:
    """Enumerate the space, evaluate the rows the pins allow and mask them; with ``target`` tokens/s
    per user, each layout also gets the largest batch that meets it. Extreme inputs that overflow a
    rate leave rows whose metrics are not finite: they are masked, never returned. ``whole``: every
    row of the space, the pinned-out ones too, masked by the pins (what an infeasibility message
    reads: :meth:`Grid.whole`); the pinned rows and their numbers are the same either way."""
    import numpy as np

    memo, key = _MEMO.get(), (ph, pins, target, whole)
    stores = [] if memo is None else [memo, *_OUTER.get()]
    try:
        hit = next((g for store in stores if (g := store.get(key)) is not None), None)
    except TypeError:  # array-valued physics (a sweep): not kept
        stores, hit = [], None
    if hit is None:
        with np.errstate(all="ignore"):
            hit = _evaluate(ph, pins, target, whole)
    for store in stores:  # the block's own store, and the enclosing blocks' (a sweep inside one)
        _keep(store, key, hit)
    return hit


def _keep(store: OrderedDict, key: tuple, g: Grid) -> None:
    """``g`` in ``store``, the most recently used, the least recently used out beyond its limit."""
    if key in store:
        store.move_to_end(key)
        return
    store[key] = g
    if len(store) > getattr(store, "limit", MEMO_GRIDS):
        store.popitem(last=False)


class GridStore(OrderedDict):
    """Grids kept across :func:`memoized` blocks (a sweep's physics points), at most ``limit``;
    ``sizers``: the traffic sizers made of them (each holds its grid, the same object), kept apart
    and at most ``limit`` too, so a physics point takes one slot of each, not two of one."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.sizers: OrderedDict = OrderedDict()


# Grids already evaluated, by (physics, pins, target), inside a `memoized()` block only; and the
# stores of the blocks around it that have stores of their own
_MEMO: ContextVar[OrderedDict | None] = ContextVar("ipd_serving_grids", default=None)
_OUTER: ContextVar[tuple[OrderedDict, ...]] = ContextVar("ipd_serving_outer_grids", default=())
MEMO_GRIDS = 16  # a few MB each


@contextmanager
def memoized(store: OrderedDict | None = None) -> Iterator[None]:
    """Inside the block, :func:`evaluate` returns the grid it already evaluated for equal physics,
    pins and target (it is a pure function of them; grids are never changed after evaluation): for
    loops that repeat estimates whose serving inputs do not change, such as ``ipd calibrate``
    fitting a weight-sync knob. Outside, nothing is kept. ``store``: the grids to use and keep
    (a caller that enters the block again later, such as a sweep sizing rows); inside a block with
    another store, a grid is looked up in both and kept in both."""
    around = _MEMO.get()
    if store is None:
        store = around if around is not None else OrderedDict()
    outer = (around, *_OUTER.get()) if around is not None else _OUTER.get()
    outer = tuple(s for s in outer if s is not store)  # a block's store is not around itself
    token, outer_token = _MEMO.set(store), _OUTER.set(outer)
    try:
        yield
    finally:
        _OUTER.reset(outer_token)
        _MEMO.reset(token)


def refine(g: Grid, rows: list[int]) -> Grid | None:
    """The layouts of ``rows`` (a frontier of ``g``) again, at every batch of FINE_LADDER, in the
    modes the pins allow: the configurations between two rungs of the coarse ladder where the
    frontier runs (a few thousand rows). None where a concurrency is pinned (no ladder)."""
    import numpy as np

    if g.pins.concurrency is not None or not rows:
        return None
    subset = distinct(g.rows["layout"][np.asarray(rows)])
    with np.errstate(all="ignore"):
        # the layouts' terms and prefill choices are the coarse grid's (the same physics and pins)
        fine = _evaluate(g.ph, g.pins, None, subset=subset, rungs=FINE_LADDER, x=g.x, pf=g.prefill)
    fine.searched = len(g) + len(fine.rows["layout"])  # the coarse space and these rows
    return fine


def at_batch(g: Grid, i: int, batch: int) -> tuple[Grid, int] | None:
    """Row ``i``'s configuration (its layout, in its mode, the same pins) at another ``batch``
    (sequences per instance): a grid of that one row and its index, None where the row cannot
    run there (the batch beyond the KV capacity)."""
    import numpy as np

    li, mode = int(g.rows["layout"][i]), bool(g.rows["disagg"][i])
    pins = replace(g.pins, concurrency=int(batch), disaggregated=mode)
    with np.errstate(all="ignore"):
        one = _evaluate(g.ph, pins, None, subset=np.array([li]), x=g.x, pf=g.prefill)
    rows = np.flatnonzero(one.feasible)  # the one layout, in the one mode, at the one batch
    return (one, int(rows[0])) if rows.size else None


def _evaluate(
    ph: Physics,
    pins: Pins,
    target: float | None,
    whole: bool = False,
    subset: Any = None,
    rungs: tuple[int, ...] = BATCH_LADDER,
    x: dict[str, Any] | None = None,
    pf: dict[str, Any] | None = None,
) -> Grid:
    """The grid (``x`` and ``pf``: the layouts' terms and prefill choices, where a grid of the same
    physics and pins has them)."""
    import numpy as np

    lay = layouts(ph, pins)
    if x is None:  # every layout: a disaggregated row's prefill instance is any of them
        x = layout_terms(ph, lay)
    n_all = len(lay["g"])
    # only the rows the pins allow are priced (a pinned search keeps a tenth of the space); a pin no
    # layout has prices them all, for the message that names what the space has
    reach = _within_reach(ph, lay, pins)
    allowed = layout_mask(lay, pins) & member(lay["k"], ph.spec_depths)  # (the pinned rows' layouts)
    keep = np.arange(n_all) if whole else np.flatnonzero(allowed & reach)
    whole = whole or not keep.size
    keep = np.arange(n_all) if whole else keep
    if subset is not None:  # :func:`refine`: these layouts only
        keep = keep[member(keep, subset)]  # np.intersect1d (keep: ascending, each once)
    modes = (0, 1) if whole or pins.disaggregated is None else (int(pins.disaggregated),)
    # the kept layouts' columns that the batches, the step and aggregated serving read (the others,
    # a dozen more, cost a gather each and no number); every layout kept: the columns themselves
    lay_k, x_k = columns(lay, STEP_LAYOUT), columns(x, KEPT_TERMS)
    if keep.size < n_all:  # (``keep``: ascending, each once)
        lay_k, x_k = take(lay_k, keep), take(x_k, keep)
    batches, ladder = _batches(ph, lay_k, x_k, pins, target, rungs)
    n_lay, n_b = batches.shape
    li = np.repeat(keep, n_b)  # row r is layout keep[r // n_b] at batches[r // n_b, r % n_b]
    batch = batches.reshape(-1)
    pf = _prefill_choice(ph, lay, x, pins) if pf is None else pf
    # the prefill instance each layout pairs with (one that drafts where the layout does)
    pf_lay = pf["index"][lay["kv"], lay["eplb"], _drafts(lay)]
    pidx = pf_lay[li]
    pf_ok = pidx >= 0
    # rows that can run (weights and the batch fit): the rest fail those checks first, so their
    # rates are NaN
    limit = (x_k["rank_max"] * x_k["d"])[:, None]
    fits = batches <= limit + 1e-9
    runs = ((x_k["free_gpu"] > 0) & (x_k["rank_max"] >= 1))[:, None] & fits
    live = np.flatnonzero(runs)
    n = len(batch)
    rows = _decode_rows(ph, lay_k, x_k, batches, modes, ladder)
    # disaggregated serving on the rows that can run (a search over pool sizes per row)
    lr = li[live]
    x_r = {k: x[k][lr] for k in ("accepted", "paid")}  # the decode columns disaggregated() reads
    # the disaggregated rows' step (a decode pool's floor where the stack measured one)
    pool_at = modes.index(1) * n if 1 in modes else 0
    b_r, step_r = batch[live], rows["step_s"][pool_at : pool_at + n][live]
    g = lay["g"]
    pf_rows = _partner_rows(ph, lay, x, pf_lay, lr)  # the prefill instance's columns for the rows
    dis: dict[str, Any] = {}
    if 1 in modes:
        # straight into the disaggregated rows' columns (``live`` of them: the rest cannot run)
        at = live + modes.index(1) * n
        dis = _pooled(ph, pins, x_r, b_r, step_r, pf_rows, into=rows, at=at)
        # a decode instance smaller than its domain leaves a hole: the prefill instances that tile
        # it may serve the pair better than the one with the most requests/s per paid GPU (a
        # review: more HBM let a DEP6 prefill instance win the score and lowered GB200's best
        # DeepSeek-V3 answer, DEP8 having filled DEP64's 8-GPU holes)
        other = _hole_partners(lay, pf) if not pins.prefill_layout else np.full(len(g), -1)
        sub = np.flatnonzero(other[lr] >= 0)
        if sub.size:
            alt_rows = _partner_rows(ph, lay, x, other, lr[sub])
            alt = _pooled(ph, pins, take(x_r, sub), b_r[sub], step_r[sub], alt_rows)
            better = alt["tokens_per_s_per_gpu"] > dis["tokens_per_s_per_gpu"][at[sub]]
            won, by = sub[better], np.flatnonzero(better)
            for key, col in alt.items():
                dis[key][at[won]] = col[by]
            for key, col in alt_rows.items():
                pf_rows[key][won] = col[by]
            pidx[live[won]] = other[lr[won]]
            pf_ok = pidx >= 0

    dead = np.flatnonzero(~runs.reshape(-1))
    for col in rows.values():  # NaN on the rows that cannot run
        for j in range(len(modes)):
            col[j * n : (j + 1) * n][dead] = np.nan
    rows |= _own_columns(li, batch, pidx, pf_ok, modes)
    space = _checks(ph, lay, x, rows, np.tile(fits.reshape(-1), len(modes)), reach)
    pinned = _rows_of(rows, pins, allowed)  # pins_mask(lay, rows, pins, member(k, depths))
    pools: dict[str, Any] = {}
    # pinned pools stay as deployed
    if pins.prefill_instances is None and pins.decode_instances is None and 1 in modes:
        rate = b_r * x_r["accepted"] / step_r
        pools = {
            "rows": live + modes.index(1) * n,
            "rate": rate,
            "prefill": pf_rows,
            "x": {"paid": x_r["paid"], "slots": b_r},
        }
    searched = 2 * n_all * n_b  # the whole space's rows, however many were priced
    pruned = n_lay < n_all or len(modes) < 2
    return Grid(
        ph,
        lay,
        x,
        rows,
        space,
        pinned,
        pf,
        pools=pools,
        searched=searched,
        pruned=pruned,
        pins=pins,
        target=target,
    )


def _partner_rows(
    ph: Physics, lay: dict, x: dict, p_lay: Any, rows: Any, per_layout: bool | None = None
) -> dict:
    """The columns of the prefill instance ``p_lay`` (per layout) pairs with the decode rows of
    layouts ``rows``: its prompt's seconds and latency, the KV cache's hand-off, its paid GPUs,
    and how the pair packs into the domains. Each is elementwise in the (decode, prefill) pair:
    worked out once per layout and gathered to the rows (``per_layout``; rows repeat a layout per
    batch) where there are as many rows as layouts, else at the rows' own pairs (a pinned grid's
    handful of rows among thousands of layouts), the same numbers; one block of memory either way."""
    import numpy as np

    g = lay["g"]
    p_all = np.maximum(p_lay, 0)
    if per_layout is None:
        per_layout = len(rows) >= len(g)
    dec, pre = (slice(None), p_all) if per_layout else (rows, p_all[rows])  # (every layout: views)
    cols = {
        "prefill_s": x["pool_prefill_s"][pre],
        "latency_s": x["pool_prefill_latency_s"][pre],
        "handoff_s": kv_handoff_seconds(ph, lay, x, pre, dec),
        "paid": x["paid"][pre],
        "per_decode": f.pipeline_hole_fill(g[dec], lay["s"][dec], lay["pp"][dec], g[pre], ph.domain),
        "decode_per": f.hole_fill(g[pre], g[dec], ph.domain),
    }
    block = np.stack(list(cols.values()))
    if per_layout:  # gathered to the rows at once (``take``: twice as fast as indexing ``[:, rows]``)
        block = np.take(block, rows, axis=1)
    return dict(zip(cols, block, strict=True))


def _pooled(
    ph: Physics,
    pins: Pins,
    x: dict,
    batch: Any,
    step_s: Any,
    prefill: dict,
    into: dict | None = None,
    at: Any = None,
) -> dict[str, Any]:
    """:func:`disaggregated` of rows (``x`` and ``prefill``: their columns), in blocks of ``BLOCK``
    rows (small temporaries), written into the columns ``into`` at rows ``at`` (the grid's rows:
    no copy of their own to scatter again), else into columns of their own in one block of memory."""
    import numpy as np

    out: dict[str, Any] = {} if into is None else into
    for a in range(0, max(len(batch), 1), BLOCK):
        part = slice(a, a + BLOCK)
        cols = disaggregated(
            ph, take(x, part), batch[part], step_s[part], take(prefill, part),
            pins.prefill_instances, pins.decode_instances,
        )  # fmt: skip
        if not out:
            out = dict(zip(cols, np.empty((len(cols), len(batch))), strict=True))
        for key, col in cols.items():
            if at is None:
                out[key][part] = col
            else:
                out[key][at[part]] = col
    return out


def _own_columns(li: Any, batch: Any, pidx: Any, pf_ok: Any, modes: tuple[int, ...]) -> dict[str, Any]:
    """The rows' layout, batch, mode and prefill instance, aggregated then disaggregated (the modes
    kept; ``li``, ``batch``, ``pidx`` and ``pf_ok``: per row of one mode); the integer ones in one
    block of memory."""
    import numpy as np

    n = len(li)
    names = ("layout", "disagg", "prefill_layout")
    ints = dict(zip(names, np.empty((len(names), len(modes) * n), dtype=li.dtype), strict=True))
    for j, m in enumerate(modes):
        part = slice(j * n, (j + 1) * n)
        ints["layout"][part] = li
        ints["disagg"][part] = m
        ints["prefill_layout"][part] = pidx if m == 1 else -1
    return {
        "layout": ints["layout"],
        "batch": np.concatenate([batch] * len(modes)),
        "disagg": ints["disagg"],
        "prefill_layout": ints["prefill_layout"],
        "prefill_ok": np.concatenate([pf_ok if m == 1 else np.ones_like(pf_ok) for m in modes]),
    }


def _as_floats(cols: dict[str, Any]) -> dict[str, Any]:
    """``cols`` with the integer columns (GPUs, stages, ranks ...) as floats, the same numbers: the
    step's formulas mix them with float columns, and numpy casting an integer operand inside each
    such operation (repeated over the batches of a layout) cost more than the arithmetic."""
    return {k: v.astype(float) if v.dtype.kind in "iu" else v for k, v in cols.items()}


def _decode_rows(
    ph: Physics, lay: dict, x: dict, batches: Any, modes: tuple[int, ...], ladder: int
) -> dict[str, Any]:
    """The decode step (:func:`step_terms`, without its parts: :func:`step_parts` works them out
    for the rows a result reports) and aggregated serving of every row of the (layout x batch)
    table, as row columns of every mode kept (``modes``, each ``batches.size`` rows): the step in
    each mode's rows, aggregated serving in the aggregated rows (the disaggregated rows' part left
    to fill). ``lay`` and ``x``: the layouts' columns, one row per row of ``batches``, whose first
    ``ladder`` columns are the batch ladder's (:func:`_batches`).

    Each layout's columns stand as a row (1 x layouts) against its batches (batches x layouts), so
    the terms that do not depend on the batch are computed once per layout, not once per row, and
    numpy's inner loop runs along the layouts (hundreds, contiguous), not along a layout's couple of
    dozen batches (the transposed table took 25 % fewer instructions: DeepSeek-R1 on GB200's 217,296
    rows, 125 M against 167 M, the same numbers: every operation is elementwise); and the table is
    taken in blocks of about ``BLOCK`` rows, so that the temporaries stay small (in cache, and in
    memory the allocator reuses: fresh large arrays cost page faults)."""
    import numpy as np

    n_lay, n_b = batches.shape
    n = n_lay * n_b
    per_block = max(1, BLOCK // n_b)
    # the columns the step and aggregated serving read
    lay, x = _as_floats(columns(lay, STEP_LAYOUT)), _as_floats(columns(x, STEP_TERMS + AGGREGATED_TERMS))
    out: dict[str, Any] = {}
    # a disaggregated decode pool's step: at its own floor where the stack measured one (every
    # layout), else apart only where its attention is data-parallel (no prompts beside decode)
    floors = ph.disagg_overhead_per_layer_s != ph.overhead_per_layer_s
    for a in range(0, max(n_lay, 1), per_block):  # one block where there are no layouts
        b = min(a + per_block, n_lay)
        lay_b, x_b = ({k: v[None, a:b] for k, v in cols.items()} for cols in (lay, x))
        batch_b = np.ascontiguousarray(batches[a:b].T)  # batches x layouts
        share = _share_by_group(ph, lay_b, x_b, ladder) if b - a >= GROUPED_LAYOUTS else None
        bt = batch_terms(ph, lay_b, x_b, batch_b, share)  # (both modes': worked out once)
        step = pooled_step_terms(ph, lay_b, x_b, batch_b, bt, parts=False)
        agg = aggregated(ph, x_b, batch_b, step["step_s"])
        pool = step
        if 1 in modes:
            pool = _pool_step(ph, lay_b, x_b, batch_b, bt, step, floors)
        if not out:  # one block of memory for every column (numpy maps it in huge pages where it can)
            out = dict(zip(step | agg, np.empty((len(step | agg), len(modes) * n)), strict=True))
        for key, values in (step | agg).items():
            for j, m in enumerate(modes):
                if key in step or m == 0:
                    at = out[key][j * n + a * n_b : j * n + b * n_b].reshape(b - a, n_b)
                    at[:] = (pool[key] if key in step and m == 1 else values).T  # layout-major rows
    return out


def _share_by_group(ph: Physics, lay: dict, x: dict, ladder: int) -> Any:
    """:func:`batch_terms`'s ``share`` of a block of layouts (``lay`` and ``x``: rows, 1 x layouts)
    whose first ``ladder`` batches are the ladder's: those rows worked out once per group of layouts
    of the same attention DP ranks, pipeline stages and draft depth, and gathered to the group. A
    ladder batch is its rung times the ranks, and a stage's tokens (their halves, a later draft
    pass's one a sequence) are worked out of the batch, the stages and the depth alone: the same
    numbers across a group, so the same shares. Their power costs as much as thirty of a step's
    other operations, and a block of DeepSeek-R1 on GB200's 600 layouts has 30 to 90 groups."""
    import numpy as np

    plain = touched_share(ph)
    keys = [distinct(col[0], inverse=True)[1] for col in (x["d"], lay["pp"], lay["k"])]
    n = len(keys[0])
    _, group = distinct((keys[0] * n + keys[1]) * n + keys[2], inverse=True)  # (each key < n)
    one = np.empty(int(group.max()) + 1, dtype=np.intp)
    one[group] = np.arange(n)  # a layout of each group (any: the group's shares are the same)

    def share(tokens: Any) -> Any:  # (tokens: batches x layouts)
        out = np.empty_like(tokens)
        out[:ladder] = plain(tokens[:ladder, one])[:, group]
        out[ladder:] = plain(tokens[ladder:])
        return out

    return share


# layouts a block of decode rows holds from which its experts' shares are worked out per group
# (:func:`_share_by_group`): below them the grouping's own dozen numpy calls cost about what the
# powers it saves do (a pinned grid's handful of layouts)
GROUPED_LAYOUTS = 32


def _pool_step(
    ph: Physics, lay: dict, x: dict, batches: Any, bt: BatchTerms, step: dict, floors: bool
) -> dict:
    """:func:`step_terms` of the layouts ``lay`` (rows: 1 x layouts, against ``batches``: batches x
    layouts) as disaggregated decode pools, given their aggregated ``step`` and the terms of their
    batches that do not depend on the mode (``bt``): worked out again only where the two differ
    (the pool's floor where ``floors``, else the layouts whose attention is data-parallel)."""
    import numpy as np

    if floors:
        return pooled_step_terms(ph, lay, x, batches, bt, parts=False, pool=1)
    rows = np.flatnonzero(x["d"][0] > 1)
    if not rows.size:
        return step
    lay_r, x_r = ({k: v[:, rows] for k, v in cols.items()} for cols in (lay, x))
    apart = pooled_step_terms(ph, lay_r, x_r, batches[:, rows], bt.at(rows), parts=False, pool=1)
    pool = {k: v.copy() for k, v in step.items()}
    for k, v in apart.items():
        pool[k][:, rows] = v
    return pool


STEP_PARTS = "step parts"  # Grid.derived: row -> its step's parts (:func:`step_parts`)


def step_parts(g: Grid, i: int) -> dict[str, float]:
    """Row ``i``'s decode step and its parts (:func:`step_terms`: memory, compute, collectives,
    overhead, the experts touched, two-batch overlap), worked out when a result reports the row
    (:func:`work_out_parts`), kept with the grid."""
    known = g.derived.setdefault(STEP_PARTS, {})
    if int(i) not in known:
        work_out_parts(g, [i])
    return known[int(i)]


def work_out_parts(g: Grid, rows: Any) -> None:
    """:func:`step_parts` of ``rows`` at once (a curve's points), as the search would have worked
    them out for every row (the same formulas on the rows' columns: the same numbers), NaN where a
    row cannot run (the weights or its batch do not fit), as its step."""
    import numpy as np

    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    li = g.rows["layout"][rows]
    lay, x = (
        take(columns(g.lay, STEP_LAYOUT), li),
        take(columns(g.x, (*STEP_TERMS, "free_gpu", "rank_max")), li),
    )
    batch = g.rows["batch"][rows]
    with np.errstate(all="ignore"):
        out = step_terms(g.ph, lay, x, batch, pool=g.rows["disagg"][rows])
    runs = (x["free_gpu"] > 0) & (x["rank_max"] >= 1) & (batch <= x["rank_max"] * x["d"] + 1e-9)
    known = g.derived.setdefault(STEP_PARTS, {})
    for j, i in enumerate(rows.tolist()):
        known[i] = {k: float(v[j]) if runs[j] else float("nan") for k, v in out.items()}


def layout_step(ph: Physics, g: Grid, li: int, batch, parts: bool = True) -> dict[str, Any]:
    """The decode step of layout ``li`` at any batch (a number or an array), with its parts
    (``parts``; else only ``step_s``, the same number: :func:`step_terms`)."""
    lay = {k: g.lay[k][li] for k in STEP_LAYOUT}
    x = {k: g.x[k][li] for k in STEP_TERMS}
    return step_terms(ph, lay, x, batch, parts)
