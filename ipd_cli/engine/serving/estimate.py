"""``estimate_serving`` and ``estimate_serving_curve``: the deployment search, then its answer."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.schema import PRECISIONS
from ipd_cli.engine import formulas as f
from ipd_cli.engine.pretraining import MAX_GPUS
from ipd_cli.engine.results import ServeCurveResult, ServeResult, Serving
from ipd_cli.engine.search import best_of, member, near_max, pareto_front
from ipd_cli.engine.trace import CLI
from ipd_cli.errors import InfeasibleError, InputError, count_text, counted

from . import physics
from .context import ServingContext, context, precisions, request_shape, speculative_pin
from .grid import (
    FAMILIES,
    FAMILY_NAMES,
    LAYOUT_RULES,
    Grid,
    Pins,
    at_batch,
    evaluate,
    instance_sizes,
    parse_layout,
    pins_mask,
    refine,
    work_out_parts,
)
from .point import configuration, serving, traffic_fields, traffic_point
from .traffic import Sized, choose_for_traffic

INSTANCE_CHOICES = ("best", "smallest")
SEARCH = "deployment search"


@dataclass(frozen=True)
class Shape:
    """What the caller asked for besides the pins: precisions, request shape, speculation (None:
    searched; 'off', 'on' or a draft depth), pricing and the serving stack (None: the family's
    default)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    precision: str | None = None
    kv_precision: str | None = None
    speculative: str | int | None = None
    pricing: str = "rental"
    stack: str | None = None
    context_tokens: int | None = None  # cached context each request attends to (None: 0)
    stack_release: str | None = None  # the stack's release measured apart (None: its profile alone)


def pins_of(
    *,
    instance_gpus: int | None = None,
    layout: str | None = None,
    attention_tp: int | None = None,
    disaggregated: bool | None = None,
    eplb: bool | None = None,
    concurrency: int | None = None,
    prefill_layout: str | None = None,
    prefill_instances: int | None = None,
    decode_instances: int | None = None,
    max_instance_gpus: int | None = None,
) -> Pins:
    for name, v in (
        ("concurrency", concurrency),
        ("max_instance_gpus", max_instance_gpus),
        ("prefill_instances", prefill_instances),
        ("decode_instances", decode_instances),
    ):
        if v is not None and v < 1:
            raise InputError(f"`{name}` must be >= 1, got {v}")
    pools = (prefill_layout, prefill_instances, decode_instances)
    if disaggregated is False and any(v is not None for v in pools):
        raise InputError("prefill and decode pools are pinned: that is a disaggregated deployment")
    if any(v is not None for v in pools):
        disaggregated = True
    # checked here, applied when choosing the prefill instance. Prefill instances are not pipelined
    # (one stage): 'tp8pp2' ran as plain TP8, its stages silently dropped
    stages = parse_layout(prefill_layout, "prefill_layout").get("pipeline_stages") or 1
    if stages > 1:
        raise InputError(
            f"`prefill_layout` '{prefill_layout}' has {stages} pipeline stages: prefill instances run one "
            "stage; give a family and GPUs (tp8, tep8, dep8)"
        )
    parsed = parse_layout(layout)
    _check_layout_size(layout, parsed, instance_gpus)
    if parsed.get("family") == "dep" and attention_tp is None:
        attention_tp = 1  # 'dep8' is pure DEP; attention TP groups inside DEP are pinned with attention_tp
    return Pins(
        instance_gpus=instance_gpus,
        max_instance_gpus=max_instance_gpus,
        attention_tp=attention_tp,
        disaggregated=disaggregated,
        eplb=eplb,
        concurrency=concurrency,
        prefill_layout=prefill_layout,
        prefill_instances=prefill_instances,
        decode_instances=decode_instances,
        **parsed,
    )


def search(
    ctx: ServingContext, shape: Shape, pins: Pins, instance: str = "best", target: float | None = None
) -> Grid:
    """Read the physics, check the pins, evaluate the space's pinned rows (with the largest batch that
    meets ``target`` tokens/s per user, when given)."""
    if instance not in INSTANCE_CHOICES:
        raise InputError(f"unknown `instance` '{instance}'; choose one of {', '.join(INSTANCE_CHOICES)}")
    weights, kvs = precisions(ctx, shape.precision, shape.kv_precision)
    isl, osl, prefix = request_shape(ctx, shape.input_tokens, shape.output_tokens, shape.context_tokens)
    spec = speculative_pin(shape.speculative)
    release = shape.stack_release
    ph = physics.read(ctx, weights, kvs, isl, osl, spec, shape.pricing, shape.stack, prefix, release)
    _check_pins(ctx, pins)
    if instance == "smallest" and pins.instance_gpus is None:  # the smallest size a pinned row fits on
        g = evaluate(ph, pins, target, whole=True)
        return evaluate(ph, replace(pins, instance_gpus=_smallest(ctx, g, pins)), target)
    return evaluate(ph, pins, target)


def _check_layout_size(layout: str | None, parsed: dict[str, Any], gpus: int | None) -> None:
    """A layout that names its GPUs per stage and stages (``tp8``: 8 GPUs, one stage; ``tp8pp4``:
    32) runs on their product; an instance size that differs is a contradiction (a user review:
    ``tp8pp4`` with 16 GPUs was told only that no configuration had 4 pipeline stages)."""
    stage, stages = parsed.get("stage_gpus"), parsed.get("pipeline_stages")
    if gpus is None or not stage or not stages or stage * stages == gpus or gpus < 1 or stage < 1:
        return
    family = parsed.get("family") or "tp"
    if family == "dep":  # attention data parallel is never pipelined: one stage of the whole size
        fits = f"; dep{gpus} runs on {gpus:,}"
    else:
        fits = f"; {family}{stage}pp{gpus // stage} runs on {gpus:,}" if gpus % stage == 0 else ""
    what = f"{stages} stages of {stage}" if stages > 1 else "one stage"
    raise InputError(
        f"`layout` {str(layout).strip()} runs on {stage * stages:,} GPUs ({what}), not `instance_gpus` "
        f"{gpus:,}: drop one{fits}"
    )


def _check_pins(ctx: ServingContext, pins: Pins) -> None:
    # any size of at least one GPU: the grid takes every split of a pinned size, as `layout` pins a
    # stage size (192 GPUs on 72-GPU racks run as three 64-GPU stages, or as DEP192, which
    # `layout` dep192 already took; sizes beyond a domain that are not a multiple of it were refused)
    gpus = pins.instance_gpus
    if gpus is not None and gpus < 1:
        raise InputError(f"`instance_gpus` {gpus}: give at least 1 GPU")
    if gpus is not None and gpus > MAX_GPUS:  # its splits took minutes (an input review: 1e11)
        raise InputError(f"`instance_gpus` {gpus:,}: more than the {MAX_GPUS:,} GPUs any estimate takes")
    if pins.family in ("tep", "dep") and not ctx.model.is_moe:
        raise InputError(
            f"{ctx.mname} is dense: its layouts are tensor parallel (`layout` tp), not {pins.family}"
        )
    for name in ("stage_gpus", "pipeline_stages", "attention_tp"):
        value = getattr(pins, name)
        if value is not None and value < 1:
            raise InputError(f"`{'layout' if name != 'attention_tp' else name}` needs whole numbers >= 1")


def _smallest(ctx: ServingContext, g: Grid, pins: Pins) -> int:
    """The fewest GPUs of a feasible row the other pins allow (``g``: the whole grid). Read over
    every row, the size could be one no row of a pinned layout has (an audit: `--instance smallest
    --layout tp8` took Llama 3.1 70B's 1-GPU size on H100 and answered "infeasible; the nearest
    feasible configuration is ... TP8 ...")."""
    import numpy as np

    fits = g.feasible  # the space's feasible rows that meet the pins
    if not fits.any():
        raise _infeasible(ctx, g, pins)
    return int(np.min(g.lay["g"][g.rows["layout"][fits]]))


# --- choosing ----------------------------------------------------------------------------------


def choose(g: Grid, target: float | None, traffic: float | None = None) -> tuple[int, bool | None]:
    """The row with the most tokens/s per GPU (cheapest: one price per system), among those meeting
    ``target`` tokens/s per user, read as benchmarks publish interactivity: 1 / TPOT, the request's
    own prefill (its TTFT) left out; when none does, the fastest row and False (without a
    ``target``, None whatever the rows).

    With a ``traffic`` (output tokens/s; each disaggregated row's pools sized for it) the cost is
    the whole copies of the deployment it takes: among the same rows, the one with the fewest GPUs
    for it (:func:`formulas.gpus_for_traffic` of its copies, every row at once), ties to the speed,
    then the most tokens/s per GPU, then the fewer deployment GPUs: :func:`traffic.choose_for_traffic`, which
    sizes every traffic of a sweep at once. A small traffic gets the smallest deployment that is
    enough, not a copy of the highest-throughput one; a large one approaches the most tokens/s per
    GPU. When no row meets the target the fastest is still taken."""
    if traffic is not None:
        sized = choose_for_traffic(g, target, [traffic])
        return int(sized.rows[0]), sized.met
    r, ok = g.rows, g.feasible
    tps, usr, gpus = r["tokens_per_s_per_gpu"], r["tokens_per_s_per_user"], r["deployment_gpus"]
    speed = 1.0 / r["tpot_s"] if target is not None else usr
    meets = ok & (speed >= target) if target is not None else ok
    met = None if target is None else bool(meets.any())  # None: no target to meet
    if not meets.any():
        return best_of(near_max(speed, ok), ok, tps, -gpus), met
    return best_of(tps, meets, speed, -gpus), met


def speed_reading(g: Grid, i: int, target: float) -> float:
    """Row ``i``'s configuration read on its curve at exactly ``target`` tokens/s per user (1 /
    TPOT): its tokens/s per GPU, linear in interactivity between row ``i``'s batch, which meets
    the target, and the next whole batch of the same layout and mode, which does not (the
    deployment search re-sizes a disaggregated row's pools there). A deployment that spends a share
    of its time at each batch runs at a speed and a rate both linear in that share: the model's
    reading of a benchmark's point at a measured interactivity (1 / median TPOT), which no whole
    batch matches to the last per mille (read at the whole batch alone, a model 0.1 % slower than
    the run halves a four-user point; :mod:`ipd_cli.validate` compares such points this way). Row
    ``i``'s own figure where it misses the target, the next batch cannot run (the KV full) or
    meets the target too."""
    r = g.rows
    tps, speed = float(r["tokens_per_s_per_gpu"][i]), 1.0 / float(r["tpot_s"][i])
    nxt = at_batch(g, i, int(r["batch"][i]) + 1) if speed >= target else None
    if nxt is None:
        return tps
    h, j = nxt
    tps_next, speed_next = float(h.rows["tokens_per_s_per_gpu"][j]), 1.0 / float(h.rows["tpot_s"][j])
    if not speed_next < target:  # not the largest batch meeting the target: no curve to read between
        return tps
    return tps + (tps_next - tps) * (speed - target) / (speed - speed_next)


# where a caller collects :func:`speed_reading`s (``read_at_speed``); None: nothing is read
_READINGS: ContextVar[list[float] | None] = ContextVar("ipd_serving_speed_readings", default=None)


@contextmanager
def read_at_speed() -> Iterator[list[float]]:
    """Inside the block, each :func:`estimate_serving` at a target speed per user (no traffic)
    also reads its configuration at exactly that speed (:func:`speed_reading`) into the list."""
    readings: list[float] = []
    token = _READINGS.set(readings)
    try:
        yield readings
    finally:
        _READINGS.reset(token)


def _refined_frontier(g: Grid) -> tuple[list[tuple[Grid, int]], int]:
    """The frontier of ``g``, its layouts evaluated again between the rungs of the batch ladder
    (:func:`grid.refine`): (grid, row) pairs, interactivity ascending, and the configurations
    searched in all. The coarse frontier's points stay where no finer batch beats them."""
    import numpy as np

    front = frontier(g)
    fine = refine(g, front)
    if fine is None:
        return [(g, i) for i in front], len(g)
    coarse, extra = np.asarray(front, dtype=int), np.flatnonzero(fine.feasible)
    both = lambda k: np.concatenate([g.rows[k][coarse], fine.rows[k][extra]])  # noqa: E731
    kept = pareto_front(1.0 / both("tpot_s"), both("tokens_per_s_per_gpu"))
    pairs = [(g, int(coarse[k])) if k < len(coarse) else (fine, int(extra[k - len(coarse)])) for k in kept]
    return pairs, len(fine)


def frontier(g: Grid) -> list[int]:
    """Indices of the Pareto frontier of tokens/s per GPU against interactivity (1 / TPOT, as
    benchmarks plot it and a target reads it), interactivity ascending. (It ranked the rate in a
    decode slot, which holds an aggregated request's own prefill and not a disaggregated one's,
    so the two kinds of deployment were not ranked alike; a user review.)"""
    r = g.rows
    return [int(i) for i in pareto_front(1.0 / r["tpot_s"], r["tokens_per_s_per_gpu"], g.feasible)]


# --- infeasible pins and requests --------------------------------------------------------------


def _pin_text(pins: Pins) -> str:
    given = pins.given()
    layout = "".join(
        [given.pop("family", ""), str(given.pop("stage_gpus", "")), f"pp{given.pop('pipeline_stages', 1)}"]
    ).removesuffix("pp1")
    parts = ([f"`layout` {layout}"] if layout else []) + [f"`{k}` {v}" for k, v in given.items()]
    return ", ".join(parts)


def _structural(ctx: ServingContext, g: Grid, pins: Pins) -> InputError | None:
    """No configuration of this model has the pinned values at all: name the values it has."""
    import numpy as np

    r, lay = g.rows, g.lay
    li = r["layout"]
    cols = {"instance_gpus": lay["g"][li], "stage_gpus": lay["s"][li], "pipeline_stages": lay["pp"][li]}
    cols |= {"attention_tp": lay["t"][li], "family": lay["fam"][li], "eplb": lay["eplb"][li]}
    cols["disaggregated"] = r["disagg"]
    given = {k: v for k, v in pins.given().items() if k in cols}  # batch and pool pins are not layout columns
    wants = {k: FAMILIES[v] if k == "family" else int(v) for k, v in given.items()}
    ok = np.ones(len(li), dtype=bool)
    for key, value in given.items():
        col = cols[key]
        want = wants[key]
        if not (ok & (col == want)).any():
            if key == "eplb":  # a yes/no pin: say why it cannot hold
                why = "spreads no experts over GPUs" if ctx.model.is_moe else "has no routed experts"
                return InputError(
                    f"no {ctx.mname} configuration on {ctx.name} has `eplb` {value} with the other pins: "
                    f"{ctx.mname} {why} there; leave `eplb` unpinned"
                )
            # offer the values that run with every other pin (a pinned 3-GPU stage with pp2 offered
            # a 6-GPU stage that only exists unpipelined, and whose tensor parallelism the heads
            # refuse); else those that exist with them; else with the pins checked so far
            others = np.ones(len(li), dtype=bool)
            for k, w in wants.items():
                others &= (cols[k] == w) if k != key else True
            have = []
            for rows in (others & g.space.feasible, others, ok):
                have = sorted({int(v) for v in col[rows]})
                if have:
                    break
            shown: list = [n for n, c in FAMILIES.items() if c in have] if key == "family" else have
            if key == "pipeline_stages":  # as layouts: 'tp8pp2', not '2'
                head = f"{pins.family or ''}{pins.stage_gpus or ''}"
                shown = [f"`layout` {head}pp{n}" if n > 1 else f"`layout` {head or 'tp'}" for n in have]
            stages = "pipeline stage" if int(value) == 1 else "pipeline stages"
            what = {
                "family": f"the `layout` family {value}",
                "stage_gpus": f"{counted(value)} per pipeline stage (`layout`)",
                "pipeline_stages": (
                    f"{value} {stages} (`layout`; DEP is never pipelined: its attention ranks and "
                    "experts span the whole instance)"
                    if pins.family == "dep"
                    else f"{value} {stages} (`layout`; a stage tiles the scale-up domains or is a "
                    "searched size that fits in one)"
                ),
            }.get(key, f"`{key}` {value}")
            return InputError(
                f"no {ctx.mname} configuration on {ctx.name} has {what} with the other pins; "
                f"choose one of {', '.join(map(str, shown))}"
            )
        ok &= col == want
    bound = pins.max_instance_gpus  # a bound, not a value: the other pins' smallest size above it
    if bound is not None and ok.any() and not (ok & (cols["instance_gpus"] <= bound)).any():
        fits = ok & g.space.feasible
        least = int(np.min(cols["instance_gpus"][fits if fits.any() else ok]))
        return InputError(
            f"no {ctx.mname} configuration on {ctx.name} with the other pins has an instance of at most "
            f"`max_instance_gpus` {bound:,}: the smallest{' that fits' if fits.any() else ''} is "
            f"{counted(least)}; raise `max_instance_gpus` or drop a pin"
        )
    return None


def _nearest(g: Grid, pins: Pins) -> int | None:
    """The feasible configuration that meets the grid's target speed per user (where one does), then
    keeps the most pins, then the nearest instance size, then the most tokens/s per GPU (a review:
    at 200 tokens/s per user it offered a DEP72 batch of 2,249 at 5.4)."""
    import numpy as np

    fits = g.space.feasible
    if 0 not in g.ph.spec_depths:  # speculation pinned on: a configuration that drafts, where one runs
        # (the grid holds undrafted rows for the prefill instances; a review: a pinned depth whose
        # draft the TP could not split was offered a configuration without it)
        drafting = fits & member(g.lay["k"][g.rows["layout"]], g.ph.spec_depths)
        fits = drafting if drafting.any() else fits
    if not fits.any():
        return None
    kept = np.zeros(len(fits))
    for key, value in pins.given().items():
        kept += pins_mask(g.lay, g.rows, replace(Pins(), **{key: value}))
    if g.target is not None:  # meeting the target outranks any number of pins kept
        meets = 1.0 / g.rows["tpot_s"] >= g.target  # as choose() reads a target
        kept = kept + meets * (len(pins.given()) + 1.0)
    gpus = g.lay["g"][g.rows["layout"]]
    want = pins.instance_gpus or (pins.stage_gpus or 0) * (pins.pipeline_stages or 1)
    near = -np.abs(np.log2(gpus / want)) if want else np.zeros(len(fits))
    return best_of(kept, fits, near, g.rows["tokens_per_s_per_gpu"])


def _reason(g: Grid, first: Any) -> str:
    """The most common first failure among the pinned rows (``first``: theirs, from
    ``g.space.first_failure()``)."""
    import numpy as np

    codes, counts = np.unique(first[first >= 0], return_counts=True)
    return g.space.checks[int(codes[np.argmax(counts)])][0] if len(codes) else "infeasible"


def _infeasible(ctx: ServingContext, g: Grid, pins: Pins) -> Exception:
    """Why nothing runs: a pin no configuration has (InputError), a batch that does not fit, a pin
    that only infeasible configurations have (with the nearest feasible one), or weights too big.
    Read on the whole grid, the rows the pins leave out too."""
    import numpy as np

    g = g.whole()
    structural = _structural(ctx, g, pins)
    if structural is not None:
        return structural
    ph, li = g.ph, g.rows["layout"]
    fits = (g.x["free_gpu"] > 0)[li]
    if not fits.any():
        return _does_not_fit(ctx, g)
    first = g.space.first_failure()[g.pinned]
    reason = _reason(g, first)
    if pins.concurrency is not None and reason.startswith("the batch"):
        most = int(np.max((g.x["rank_max"] * g.x["d"])[li[g.pinned & fits]], initial=0))
        return InfeasibleError(
            f"`concurrency` {pins.concurrency} does not fit: {ph.model} on {ctx.name} holds at most "
            f"{most} requests of {ph.context_peak} tokens per instance with these pins (KV capacity, "
            f"engine batch cap per rank); use `concurrency` {most} or less, and more instances"
        )
    near = _nearest(g, pins)
    nearest = ""
    if near is not None:
        gpus = int(g.lay["g"][li[near]])
        deploy = float(g.rows["deployment_gpus"][near])  # a disaggregated one: both pools
        where = f"on {counted(gpus)}"
        if g.rows["disagg"][near]:
            where = f"({counted(gpus)} a decode instance, {deploy:,.0f} in all)"
        nearest = f"; the nearest feasible configuration is {configuration(g, near)} {where}"
    largest = max(instance_sizes(ph))
    if pins.instance_gpus is not None and pins.instance_gpus > largest and _layout_failure(first):
        # the layout rules refused every split of the pinned size: the size is the problem
        return InfeasibleError(
            f"{ph.model} at {ph.precision} on {ctx.name} with {_pin_text(pins)}: an instance of "
            f"{pins.instance_gpus:,} GPUs is larger than the search's largest, {largest:,} GPUs "
            f"({ph.max_domains} scale-up domains of {ph.domain}, serving.max_instance_domains), and no "
            f"layout of {ph.model} spans it (its splits fail: {reason}){nearest}"
        )
    splits = _split_failures(g, first)
    if pins.instance_gpus is not None and (_layout_failure(first) or len({why for _, why in splits}) > 1):
        # every split of the pinned size breaks a layout rule, or the splits break different rules
        # (DeepSeek-V3 on 3 H100s: TP3 the heads, DEP3 and TP1 PP3 the HBM): name each split and its
        # rule. Splits that failed a memory rule made this the most common rule alone, the heads
        return InfeasibleError(
            f"{ph.model} at {ph.precision} on {ctx.name} with {_pin_text(pins)}: no layout of "
            f"{counted(pins.instance_gpus)} runs it{' with the other pins' if len(pins.given()) > 1 else ''} "
            f"({'; '.join(f'{name}: {why}' for name, why in splits)}){nearest}"
        )
    with_pins = f" with {_pin_text(pins)}" if _pin_text(pins) else ""  # none: "with :" (a review)
    return InfeasibleError(
        f"{ph.model} at {ph.precision} on {ctx.name}{with_pins}: {reason}{_smallest_text(g, pins)}{nearest}"
    )


def _split_failures(g: Grid, first: Any) -> list[tuple[str, str]]:
    """Each pinned split into a layout family, stage GPUs and pipeline stages, and the rule its
    rows break (the most common): ``("TP5", "tensor parallelism must divide the 64 attention
    heads")``. The families are apart: TP3 breaks DeepSeek-V3's heads where DEP3 runs out of HBM.
    ``first``: the pinned rows' first failures."""
    import numpy as np

    li = g.rows["layout"][g.pinned]
    fam, s, pp = g.lay["fam"][li], g.lay["s"][li], g.lay["pp"][li]
    out = []
    splits = {(int(c), int(a), int(b)) for c, a, b in zip(fam, s, pp, strict=True)}
    for family, stage, stages in sorted(splits, key=lambda k: (k[2], k[0], k[1])):
        at = (fam == family) & (s == stage) & (pp == stages) & (first >= 0)
        codes, counts = np.unique(first[at], return_counts=True)
        if len(codes):
            name = f"{FAMILY_NAMES[family].upper()}{stage}" + (f" PP{stages}" if stages > 1 else "")
            out.append((name, g.space.checks[int(codes[np.argmax(counts)])][0]))
    return out


def _layout_failure(first: Any) -> bool:
    """Every pinned row (``first``: their first failures) fails one of the layout rules (the
    first ``LAYOUT_RULES`` checks of the grid: the layers, the heads, the experts, the reach) before any
    memory or batch check."""
    import numpy as np

    return bool(first.size) and bool(np.all((first >= 0) & (first < LAYOUT_RULES)))


def _smallest_text(g: Grid, pins: Pins) -> str:
    import numpy as np

    fits = g.space.feasible
    if pins.instance_gpus is None or not fits.any():
        return ""
    n = int(np.min(g.lay["g"][g.rows["layout"][fits]]))
    return f"; the smallest of the searched instance sizes that fits is {counted(n)}"


def _does_not_fit(ctx: ServingContext, g: Grid) -> InfeasibleError:
    import numpy as np

    ph = g.ph
    largest = max(instance_sizes(ph))
    # the weights its lightest layout of that size holds, the copies each rank keeps whole included
    # (attention replicated over data-parallel ranks, MLA's down-projections over tensor-parallel
    # ones): one copy of the weights could read less than the instance holds
    at = (g.lay["g"] == largest) & (g.lay["k"] == 0)
    lightest = float(np.min(g.x["weights_instance"][at])) if at.any() else ph.dense_bytes + ph.expert_bytes
    need = max(lightest, ph.dense_bytes + ph.expert_bytes) / f.GIGA
    held = max(0.0, largest * ph.hbm_bytes / f.GIGA)  # the workspace can take all of a small HBM
    return InfeasibleError(
        f"{ph.model} at {ph.precision} needs {count_text(need)} GB of weights plus KV on {ctx.name} (on "
        f"{largest} GPUs, with the copies its ranks hold whole); the largest instance tried holds "
        f"{count_text(held)} GB usable after the runtime workspace and activations; {_narrower_hint(ctx, g)}"
    )


def _narrower_hint(ctx: ServingContext, g: Grid) -> str:
    """The nearest feasible option: a narrower precision the GPU supports, and its instance size."""
    import numpy as np

    ph = g.ph
    for p in PRECISIONS[: PRECISIONS.index(ph.precision)][::-1]:
        if ctx.acc.dense_tflops(p) is None:
            continue
        quiet = replace(ctx, trace=ctx.trace.quiet())
        args = (list(ph.kv_precisions), ph.isl, ph.osl, "off", "rental", ph.family and ph.stack, ph.prefix)
        narrow = evaluate(physics.read(quiet, p, *args), Pins())
        fits = narrow.space.feasible
        if fits.any():
            least = int(np.min(narrow.lay["g"][narrow.rows["layout"][fits]]))
            return f"`precision` {p} fits on {counted(least)}"
    return "use a system with more HBM per GPU or a smaller model"


# --- results -----------------------------------------------------------------------------------


def _record(
    ctx: ServingContext, g: Grid, i: int, why: str, name: str | None = None, searched: int | None = None
) -> None:
    if not ctx.trace.record:  # a quiet trace keeps nothing: the note, and the name it spells, unbuilt
        return  # (~2 % of ``ipd calibrate``'s trials: the name is the result's own, spelt again)
    feasible = int(g.feasible.sum())
    among = f"{searched if searched is not None else len(g):,} configurations ({feasible:,} feasible)"
    note = f"chosen by the deployment search among {among}: {why}"
    ctx.trace.given("serving configuration", name or configuration(g, i), "", SEARCH, note=note)


def _requests_per_s(requests_per_s: float | None, per_day: float | None, output_tokens: int) -> float | None:
    """The traffic in requests/s (None: none given), from either form, checked."""
    if requests_per_s is not None and per_day is not None:
        raise InputError("give at most one of `requests_per_s` or `output_tokens_per_day`")
    if per_day is not None:
        if not (math.isfinite(per_day) and per_day > 0):
            raise InputError(f"`output_tokens_per_day` must be a finite number > 0, got {per_day}")
        requests_per_s = per_day / f.SECONDS_PER_DAY / output_tokens
        if not requests_per_s > 0:  # 5e-324 tokens a day: a rate that rounds to nothing
            raise InputError(
                f"`output_tokens_per_day` {per_day!r} rounds to 0 requests/s; give a larger traffic"
            )
    elif requests_per_s is None:
        return None
    if not (math.isfinite(requests_per_s) and requests_per_s > 0):
        raise InputError(f"`requests_per_s` must be a finite number > 0, got {requests_per_s}")
    return requests_per_s


class TrafficBeyondClusters(InputError):
    """A traffic whose GPUs are beyond any cluster: ``value`` as given, ``count`` the GPUs said."""

    def __init__(self, given: str, value: float, count: str) -> None:
        self.value, self.count = value, count
        super().__init__(f"`{given}` {value:g} needs {count}; give a traffic a cluster can serve")


def check_traffic_gpus(fields: dict[str, Any], given: str, values: Any, name: str) -> None:
    """Refuse a traffic whose GPUs (``fields``: :func:`point.traffic_fields`) are beyond any
    cluster (``values``: the traffics as given, ``given`` their name)."""
    import numpy as np

    need = fields["gpus_for_traffic"]
    over = np.flatnonzero(~(need <= MAX_GPUS))  # NaN or inf as well: the traffic is beyond any cluster
    if not len(over):
        return
    k = int(over[0])
    count = f"{need[k]:,.3g} {name} GPUs, more than {MAX_GPUS:,}"
    if not math.isfinite(need[k]):
        count = f"more than {MAX_GPUS:,} {name} GPUs (the count overflows)"
    raise TrafficBeyondClusters(given, float(np.asarray(values, dtype=float).reshape(-1)[k]), count)


# a time to first token within the target but for floating-point rounding meets it
TTFT_SLACK = 1e-9


@dataclass
class TrafficSizer:
    """A searched grid's deployment at any traffic: the rows :func:`choose` takes for an array
    of traffics at once (:func:`traffic.choose_for_traffic`) and the fields each traffic sets
    (:func:`point.traffic_fields`); the rest of a block is :meth:`point`'s, one per chosen row."""

    g: Grid
    target: float | None
    concurrency: int | None = None
    name: str = ""  # the system's, for messages
    ttft_target_s: float | None = None  # the mean time to first token the pools or copies are sized for
    ttft_met: bool | None = None  # whether some row's lone prompt is within it (set by :meth:`size`)

    def size(self, requests_per_s: Any) -> tuple[Sized, dict[str, Any]]:
        import numpy as np

        rps = np.asarray(requests_per_s, dtype=float).reshape(-1)
        sized = choose_for_traffic(self.g, self.target, rps * self.g.ph.osl, self.ttft_target_s)
        fields = traffic_fields(self.g, sized.rows, sized.cols, rps)
        self.ttft_met = sized.ttft_met
        if self.ttft_met and self.ttft_target_s is not None:  # met where every traffic's TTFT is within it
            within = fields["ttft_at_traffic_s"] <= self.ttft_target_s * (1 + TTFT_SLACK)
            self.ttft_met = bool(np.all(within))
        return sized, fields

    def point(self, i: int, met: bool | None) -> Serving:
        """Row ``i``'s block at the operating point (before a traffic sets its fields)."""
        op, extra = _operating_mode(self.concurrency, self.target, met)
        return serving(self.g, i, op, **extra, **self.ttft_fields())

    def ttft_fields(self) -> dict[str, Any]:
        """The block's ``ttft_target_s`` and ``ttft_target_met`` (the latter once sized)."""
        return dict(ttft_target_s=self.ttft_target_s, ttft_target_met=self.ttft_met)


def estimate_serving(
    cat: Catalog,
    hardware: str,
    model: str,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    context_tokens: int | None = None,
    precision: str | None = None,
    kv_precision: str | None = None,
    concurrency: int | None = None,
    tokens_per_user_s: float | None = None,
    instance_gpus: int | None = None,
    attention_tp: int | None = None,
    layout: str | None = None,
    disaggregated: bool | None = None,
    eplb: bool | None = None,
    prefill_layout: str | None = None,
    prefill_instances: int | None = None,
    decode_instances: int | None = None,
    max_instance_gpus: int | None = None,
    instance: str = "best",
    speculative: str | int | None = None,
    stack: str | None = None,
    stack_release: str | None = None,
    requests_per_s: float | None = None,
    output_tokens_per_day: float | None = None,
    ttft_target_s: float | None = None,
    pricing: str = "rental",
    origin: str = CLI,
) -> ServeResult:
    """Serve ``model`` on ``hardware`` the way a competent operator would: the deployment search.

    The search spans instance sizes (1 GPU to ``serving.max_instance_domains`` scale-up domains),
    layouts (``tp``, ``tep``, ``dep``, pipeline stages across domains), EPLB, KV precision, batch
    per scheduler rank, and aggregated vs disaggregated prefill/decode. With
    ``tokens_per_user_s`` it returns the configuration with the most tokens/s per GPU (the
    cheapest) among those that meet it (``target_met`` false and the fastest one when none does);
    with ``concurrency`` (sequences per instance) the best configuration at that batch; with
    neither, maximum throughput. ``instance_gpus``, ``layout`` (``tp4``, ``dep8``, ``tp8pp4``),
    ``attention_tp``, ``disaggregated`` and ``eplb`` pin parts of the space (``prefill_layout``,
    ``prefill_instances`` and ``decode_instances`` pin a disaggregated deployment's pools as
    deployed; mismatched pools run at the slower pool's rate); ``max_instance_gpus`` bounds the
    (decode) instance's size, e.g. one node as a benchmark ran it; ``instance`` is kept
    for compatibility: "best" is the search, "smallest" pins the smallest size that fits. A
    traffic level (``requests_per_s`` or ``output_tokens_per_day``) takes, among the same
    configurations, the one that serves it on the fewest GPUs: whole copies of an aggregated
    instance, disaggregated pools sized for the traffic (``gpus_for_traffic``,
    ``instances_for_traffic``; ties: the fastest per user), among the configurations whose
    lone prompt is within ``ttft_target_s`` (None: the catalog's ``serving.ttft_target_s``), with
    prefill and decode pools (or copies of an aggregated instance or of pinned pools) of the fewest
    GPUs that hold the mean time to first token at the traffic (the waits for a prefill instance
    and for a free sequence slot included) within it (``ttft_target_met`` false where no lone
    prompt is).
    ``speculative`` pins speculative decoding ("off", "on" or a draft depth; None or "auto": the
    search tries none and every depth with a measured acceptance); ``stack`` names the serving
    stack (None: the best published stack of the accelerator's family), ``stack_release`` one of
    its releases measured apart (``serving.stacks.<stack>.releases``; None: the stack's profile).
    """
    _check_operating_point(concurrency, tokens_per_user_s)
    ctx = context(cat, hardware, model, origin)
    pins = pins_of(
        instance_gpus=instance_gpus,
        layout=layout,
        attention_tp=attention_tp,
        disaggregated=disaggregated,
        eplb=eplb,
        concurrency=concurrency,
        prefill_layout=prefill_layout,
        prefill_instances=prefill_instances,
        decode_instances=decode_instances,
        max_instance_gpus=max_instance_gpus,
    )
    shape = Shape(
        input_tokens, output_tokens, precision, kv_precision, speculative, pricing, stack, context_tokens,
        stack_release,
    )  # fmt: skip
    g = _searched(ctx, shape, pins, instance, tokens_per_user_s)
    traffic = _requests_per_s(requests_per_s, output_tokens_per_day, g.ph.osl)
    choice = None
    if traffic is not None:
        sizer = TrafficSizer(g, tokens_per_user_s, concurrency, ctx.name, ttft_target(ctx, ttft_target_s))
        choice = sizer.size([traffic])
        daily = output_tokens_per_day is not None
        value = output_tokens_per_day if daily else requests_per_s
        check_traffic_gpus(choice[1], "output_tokens_per_day" if daily else "requests_per_s", value, ctx.name)
    i, op, extra = _operating_point(ctx, g, concurrency, tokens_per_user_s, traffic, choice)
    readings = _READINGS.get()
    if readings is not None and tokens_per_user_s is not None and choice is None:
        readings.append(speed_reading(g, i, tokens_per_user_s))
    point = serving(g, i, op, **extra)
    if choice is not None:
        point = traffic_point(point, choice[1]).model_copy(update=sizer.ttft_fields())
    return ServeResult(
        hardware=ctx.name, description=ctx.system.description, serving=point, assumptions=ctx.trace.items
    )


def traffic_sizer(
    cat: Catalog,
    hardware: str,
    model: str,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    context_tokens: int | None = None,
    precision: str | None = None,
    tokens_per_user_s: float | None = None,
    speculative: str | int | None = None,
    instance: str = "best",
    ttft_target_s: float | None = None,
    stack_release: str | None = None,
    pricing: str = "rental",
    origin: str = CLI,
) -> TrafficSizer:
    """:func:`estimate_serving`'s deployment search (no pins but ``speculative``, quietly), ready to
    size any number of traffics at once: a sweep whose rows move a scenario's traffic."""
    _check_operating_point(None, tokens_per_user_s)
    ctx = context(cat, hardware, model, origin)
    ctx = replace(ctx, trace=ctx.trace.quiet())
    shape = Shape(
        input_tokens, output_tokens, precision, speculative=speculative, pricing=pricing,
        context_tokens=context_tokens, stack_release=stack_release,
    )  # fmt: skip
    g = _searched(ctx, shape, pins_of(), instance, tokens_per_user_s)
    return TrafficSizer(g, tokens_per_user_s, None, ctx.name, ttft_target(ctx, ttft_target_s))


def ttft_target(ctx: ServingContext, given: float | None) -> float:
    """The mean time to first token a traffic's prefill pool is sized for: ``given`` (a
    workload's), else the catalog's ``serving.ttft_target_s``; traced either way."""
    if given is None:
        return float(ctx.take("TTFT target at a traffic", "ttft_target_s"))
    if not (math.isfinite(given) and given > 0):
        raise InputError(f"`ttft_target_s` must be a finite number > 0 (seconds), got {given}")
    ctx.trace.given("TTFT target at a traffic", given, "s", ctx.origin)
    return float(given)


def _searched(ctx: ServingContext, shape: Shape, pins: Pins, instance: str, target: float | None) -> Grid:
    """The searched grid, or the error naming why nothing in it runs."""
    g = search(ctx, shape, pins, instance, target)
    if not g.feasible.any():
        raise _infeasible(ctx, g, pins)
    return g


def _check_operating_point(concurrency: int | None, target: float | None) -> None:
    """At most one of a batch and a speed per user, and the speed a finite positive number."""
    if concurrency is not None and target is not None:
        raise InputError("give at most one of `concurrency` or `tokens_per_user_s`")
    if target is not None and not (math.isfinite(target) and target > 0):
        raise InputError(f"`tokens_per_user_s` must be a finite number > 0, got {target}")


def _operating_mode(
    concurrency: int | None, target: float | None, met: bool | None
) -> tuple[str, dict[str, Any]]:
    """The operating point's name and the fields it adds (``target_tokens_per_s_per_user``,
    ``target_met``: whether some configuration meets the target, which no traffic moves)."""
    if concurrency is not None:
        return "concurrency", {}
    if target is not None:
        return "target", {"target_tokens_per_s_per_user": target, "target_met": met}
    return "max-throughput", {}


def _operating_point(
    ctx: ServingContext,
    g: Grid,
    concurrency: int | None,
    target: float | None,
    traffic: float | None = None,
    choice: tuple[Sized, dict[str, Any]] | None = None,
) -> tuple[int, str, dict[str, Any]]:
    """The chosen row of the searched grid, its operating point and the fields that point adds
    (``target_tokens_per_s_per_user``, ``target_met``), recorded with why it was chosen. A
    ``traffic`` (requests/s) is served on the fewest GPUs (``choice``: :meth:`TrafficSizer.size`'s): the
    batch stays pinned with ``concurrency``, the layout and the deployment around it are chosen
    for the traffic."""
    name = None
    if choice is not None:
        sized, fields = choice
        i, met, name = int(sized.rows[0]), sized.met, str(fields["configuration"][0])
    else:
        i, met = choose(g, target)
    best = "the most tokens/s per GPU"
    if traffic is not None:
        best = f"the fewest GPUs for {traffic:,.4g} requests/s (then the fastest per user)"
    op, extra = _operating_mode(concurrency, target, met)
    if concurrency is not None:
        ctx.trace.given("concurrency", concurrency, "sequences per instance", ctx.origin)
        why = f"{best} at {concurrency} sequences per instance"
    elif target is not None:
        ctx.trace.given("target speed per user", target, "tokens/s", ctx.origin)
        why = f"{best} that meets the target" if met else "no configuration meets the target: the fastest"
    else:
        why = best
    _record(ctx, g, i, why, name)
    return i, op, extra


def estimate_serving_curve(
    cat: Catalog,
    hardware: str,
    model: str,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    context_tokens: int | None = None,
    precision: str | None = None,
    kv_precision: str | None = None,
    instance_gpus: int | None = None,
    attention_tp: int | None = None,
    layout: str | None = None,
    disaggregated: bool | None = None,
    eplb: bool | None = None,
    instance: str = "best",
    speculative: str | int | None = None,
    stack: str | None = None,
    stack_release: str | None = None,
    pricing: str = "rental",
    origin: str = CLI,
) -> ServeCurveResult:
    """The Pareto frontier of output tokens/s per GPU against interactivity (tokens/s per user after
    the first token, 1 / TPOT) over every configuration of the deployment search (pins narrow it
    as in :func:`estimate_serving`)."""
    ctx = context(cat, hardware, model, origin)
    pins = pins_of(
        instance_gpus=instance_gpus,
        layout=layout,
        attention_tp=attention_tp,
        disaggregated=disaggregated,
        eplb=eplb,
    )
    shape = Shape(
        input_tokens, output_tokens, precision, kv_precision, speculative, pricing, stack, context_tokens,
        stack_release,
    )  # fmt: skip
    g = search(ctx, shape, pins, instance)
    if not g.feasible.any():
        raise _infeasible(ctx, g, pins)
    front, searched = _refined_frontier(g)
    k = max(range(len(front)), key=lambda j: front[j][0].rows["tokens_per_s_per_gpu"][front[j][1]])
    name = configuration(*front[k])
    _record(ctx, g, front[k][1], "the maximum-throughput end of the frontier", name, searched)
    # every point counts the whole search, the refined rows included
    for gi in {id(gi): gi for gi, _ in front}.values():  # each grid's points' step parts at once
        work_out_parts(gi, [i for gj, i in front if gj is gi])
    points = [serving(gi, i, "frontier", searched) for gi, i in front]
    peak = points[k]
    return ServeCurveResult(
        hardware=ctx.name,
        description=ctx.system.description,
        model=ctx.mname,
        precision=g.ph.precision,
        instance_gpus=peak.instance_gpus,
        max_concurrency=peak.max_concurrency,
        max_throughput_configuration=peak.configuration,
        configurations_searched=searched,
        serving=points,
        assumptions=ctx.trace.items,
    )
