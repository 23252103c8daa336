"""Pre-training estimate: catalog models in, a :class:`SystemPretraining` out.

Three steps, so the same arithmetic serves one estimate and a million-point sweep:
:func:`pretraining_inputs` reads every input through a :class:`Trace` (source, ``--set`` path;
arrays in sweeps), :func:`pretraining_core` runs the parallelism-plan search
(:mod:`ipd_cli.engine.trainplan`) once per distinct physics point and prices the runs over
whole arrays, :func:`estimate_pretraining` checks and packages one point.

How the model works (README "How the models work"):

* The plan search picks tensor, pipeline (with interleaving), data (with ZeRO/FSDP), expert and
  context parallelism, micro-batch, global batch and recompute for the cluster, and prices its
  step from the work itself (:mod:`ipd_cli.engine.trainstep`): MFU is an output.
* A fixed cluster (``gpus``) runs the fastest plan; a deadline (``deadline_days``) gets the
  fewest GPUs, in whole systems (nodes or racks), whose best plan finishes in time.
* A whole run loses the catalog's goodput share of its wall time (failures, restarts).
"""

from __future__ import annotations

import math
from typing import Any

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.schema import PRECISIONS, Accelerator
from ipd_cli.errors import ExitCode, InfeasibleError, InputError, IpdError, count_text, counted

from . import formulas as f
from . import trainplan as tpn
from .inputs import Inputs
from .pricing import kw_per_gpu, pue, usd_per_gpu_hour
from .results import PlanSummary, Pretraining, SystemPretraining, TrainingPlan
from .trace import CLI, Trace

MAX_GPUS = 100_000_000  # a sanity bound, far beyond any cluster: bigger answers mean a broken input
COST_KEYS = ("price", "kw_per_gpu", "pue")
CACHE_SIZE = 1024  # physics points whose run solve() keeps (the least recently used go first)
MAX_SEARCHES = 64  # distinct physics points of a sweep searched one by one


def supported_precision(acc: Accelerator, wanted: str) -> str:
    """The wanted precision, or the next wider one the accelerator has a dense figure for."""
    if wanted not in PRECISIONS:
        raise InputError(f"unknown precision '{wanted}'; choose one of: {', '.join(PRECISIONS)}")
    for p in PRECISIONS[PRECISIONS.index(wanted) :]:
        if acc.dense_tflops(p) is not None:
            return p
    raise InputError(f"no dense figure for {wanted} or wider precisions")


def pretraining_inputs(
    cat: Catalog,
    hardware: str,
    model: str,
    tokens: float,
    *,
    gpus: int | None,
    deadline_days: float | None,
    precision: str,
    mfu: float | None,
    sequence_length: int | None,
    pricing: str,
    origin: str,
    trace: Trace,
    plan: str | None = None,
    top: int = 0,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every number the core needs (``x``) and the labels that describe the point (``meta``)."""
    inp = Inputs(cat, trace)
    system = cat.system(hardware)
    name = cat.canonical("systems", hardware)
    pins = tpn.parse_plan(plan)
    used = _precision_used(cat, trace, name, precision, recipe_pinned="f8r" in pins)
    tpn.check_recipe_pin(pins, used, precision, (system.accelerator, cat.accelerator_of(system)))
    x: dict[str, Any] = {
        **tpn.model_inputs(inp, cat, model),
        **tpn.hardware_inputs(inp, cat, hardware, used, pins),
        **tpn.step_inputs(inp, used),
        "seq": sequence_length_of(inp, cat, model, sequence_length, origin),
        "tokens": inp.given("tokens", tokens, "tokens", origin, path="workload.tokens"),
        "pins": pins,
        "top": top,
    }
    tpn.check_moe_pins(x["pins"], bool(x["is_moe"]), cat.canonical("models", model))
    tpn.check_recompute_pins(x["pins"], x, cat.canonical("models", model))
    x |= _request_pins(inp, origin, plan=plan, mfu=mfu, deadline_days=deadline_days, gpus=gpus)
    x["price"], basis = usd_per_gpu_hour(inp, name, pricing)
    x["kw_per_gpu"] = kw_per_gpu(inp, name)
    x["pue"] = pue(inp)
    meta = {
        "hardware": name,
        "model": cat.canonical("models", model),
        "precision": used,
        "precision_requested": precision if used != precision else None,
        "pricing": basis,
        "system": system,
    }
    return x, meta


def _precision_used(
    cat: Catalog, trace: Trace, name: str, precision: str, recipe_pinned: bool = False
) -> str:
    """The precision the system can run (the asked one or the next wider with a dense figure),
    recorded with a note when it is not the one asked for (and, where the plan pins an FP8 recipe
    the run then cannot use, that the pin does not apply: a review)."""
    used = supported_precision(cat.accelerator_of(cat.system(name)), precision)
    if used != precision:
        dropped = "; the plan's fp8_recipe pin does not apply" if recipe_pinned and used != "fp8" else ""
        trace.given(
            "precision",
            used,
            "",
            cat.origin("systems", name),
            note=f"{name} has no dense {precision} figure; used {used}{dropped}",
        )
    return used


def _request_pins(
    inp: Inputs,
    origin: str,
    *,
    plan: str | None,
    mfu: float | None,
    deadline_days: float | None,
    gpus: int | None,
) -> dict[str, Any]:
    """What the request fixes: a pinned MFU, and a deadline or a cluster size (the plan pins are
    parsed with the model inputs; they are recorded here)."""
    x: dict[str, Any] = {}
    if plan:
        inp.given("plan pins", plan, "", origin, path=None)
    if mfu is not None:
        x["mfu_pin"] = inp.given("training MFU (pinned)", mfu, "fraction of dense peak", CLI)
    if deadline_days is not None:
        x["deadline_days"] = inp.given(
            "deadline", deadline_days, "days", origin, path="workload.deadline_days"
        )
    else:
        x["gpus"] = inp.given("GPUs", gpus, "GPUs", origin, path="workload.gpus")
    return x


def _is_array(v: Any) -> bool:
    return hasattr(v, "shape") and getattr(v, "ndim", 0) > 0


def _physics(x: dict) -> dict[str, Any]:
    return {k: v for k, v in x.items() if k not in COST_KEYS}


_CACHE: dict[tuple, tuple[dict[str, float], Any, str]] = {}


def solve(x: dict) -> tuple[dict[str, float], tpn.Found | None, str]:
    """The plan search and the run it gives for one physics point (plain numbers): the numbers,
    the plans found, and why nothing runs (empty when something does). Memoised in the process by
    every input (a sweep or a comparison asks again for the same point); nothing is kept on disk."""
    key = tuple(sorted((k, repr(v)) for k, v in _physics(x).items()))
    if key in _CACHE:
        _CACHE[key] = _CACHE.pop(key)  # the most recently used last
        return _CACHE[key]
    import numpy as np

    with np.errstate(all="ignore"):  # extreme inputs end as inf or NaN, refused with a message
        return _solve(x, key)


def _solve(x: dict, key: tuple) -> tuple[dict[str, float], tpn.Found | None, str]:
    y = tpn.derive(x)
    found, why = None, ""
    try:
        if "gpus" in x:
            found = tpn.find_fixed(y, int(x["gpus"]), x["pins"], x["top"])
        else:
            broken = tpn.pin_rule(y, x["pins"])
            if broken is not None:  # no cluster runs it: not a missed deadline
                why, moved = broken
                raise InfeasibleError(
                    f"no plan with `plan` {tpn.pins_text(x['pins'])} runs on any cluster: {why}; "
                    f"try `plan` {tpn.pins_text(moved)}"
                )
            seconds = x["deadline_days"] * f.SECONDS_PER_DAY
            if "mfu_pin" in y:
                found = _deadline_at_pinned_mfu(y, seconds, x["pins"], x["top"])
            else:
                found = tpn.find_deadline(y, seconds, x["pins"], MAX_GPUS, x["top"])
            why = "" if found else "deadline"  # why, where it is said: :func:`_no_run`
    except InfeasibleError as e:
        why = str(e)
    numbers = run_numbers(y, found) if found else {}
    if len(_CACHE) >= CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = (numbers, found, why)
    return numbers, found, why


def _fastest(x: dict) -> dict[str, float] | str:
    """Where deadline mode found no cluster: the numbers of the fastest plan on MAX_GPUS (more GPUs
    never lengthen a run, so no cluster is faster), or why no cluster holds the state, as a fixed
    cluster of MAX_GPUS says it (a review: 0.9 GB usable per H100, or 405B pinned to unsharded
    replicas, were told to give a later `deadline_days`, which no deadline meets). Asked only for
    the message: a sweep's missed points do not pay this search."""
    import numpy as np

    with np.errstate(all="ignore"):  # extreme inputs end as inf or NaN, as in :func:`solve`
        y = tpn.derive(x)
        need = tpn.min_gpus_for_memory(y)
        if not need <= MAX_GPUS:  # no plan search needed to say so (at 1e-300 of HBM usable, the
            # search over MAX_GPUS that finds nothing took 4 s)
            return (
                f"its training state needs the memory of {count_text(need)} GPUs at least, more than "
                f"{MAX_GPUS:,}; no cluster holds it: give a smaller model or more memory per GPU"
            )
        try:
            return run_numbers(y, tpn.find_fixed(y, MAX_GPUS, x["pins"]))
        except InfeasibleError as e:
            return str(e)


def check_cluster(name: str, gpus: float) -> None:
    """A GPU count no larger than MAX_GPUS (a bigger one is a typo, not a cluster)."""
    if gpus > MAX_GPUS:
        raise InputError(
            f"`{name}` {count_text(gpus)} is more than {MAX_GPUS:,} GPUs; give a cluster that can exist"
        )


def _deadline_at_pinned_mfu(y: dict, seconds: float, pins: dict, top: int) -> tpn.Found | None:
    """Deadline mode with the MFU pinned: a plan then runs at the pinned share of the peak on the
    GPUs it uses, so the deadline sets the GPUs. The fewest whole systems whose fastest plan (which
    says how many GPUs it uses, and the batch penalty it pays) finishes in time at that MFU: from
    the bound FLOPs / (deadline x goodput x peak x MFU), cluster sizes grow (by the shortfall, at
    least one system) until one meets the deadline, then a bisection between the last that did not
    and it finds the fewest (None: none up to MAX_GPUS)."""
    per = y["per_system"]
    need = y["fpt"] * y["tokens"] / (seconds * y["goodput"] * y["low_peak"] * y["mfu_pin"])

    def run(systems: int) -> tuple[tpn.Found | None, float]:
        """The fastest plan on so many systems and its wall time (inf where nothing fits)."""
        try:
            found = tpn.find_fixed(y, systems * per, pins, top)
        except InfeasibleError:  # the state does not fit so few GPUs
            return None, math.inf
        c = found.best
        return found, plan_run(y, c.plan, c.out, systems * per)["wall_days"] * f.SECONDS_PER_DAY

    def meets(wall: float) -> bool:
        return wall <= seconds * (1 + 1e-9)

    systems = max(1, math.ceil(need / per))
    below = systems - 1  # a count known to miss (the bound says so)
    memory = math.ceil(tpn.min_gpus_for_memory(y) / per)
    while True:
        if systems * per > MAX_GPUS:
            return None
        found, wall = run(systems)
        if found is not None and meets(wall):
            break
        below = systems
        grow = math.ceil(systems * wall / seconds) if math.isfinite(wall) else max(2 * systems, memory)
        systems = max(systems + 1, grow)
    while systems - below > 1:  # the fewest between the last miss and the first hit
        mid = (below + systems) // 2
        hit, wall = run(mid)
        if hit is not None and meets(wall):
            systems, found = mid, hit
        else:
            below = mid
    return found


def run_numbers(y: dict, found: tpn.Found) -> dict[str, float]:
    """The run of the chosen plan: step, wall time, GPU-hours, MFU (achieved or pinned)."""
    c = found.best
    numbers = plan_run(y, c.plan, c.out, c.gpus)
    numbers["min_gpus_for_memory"] = float(tpn.min_gpus_for_memory(y))
    numbers["plans_evaluated"] = float(found.evaluated)
    return numbers


def _like(value: Any, ref: Any) -> Any:
    """``value`` broadcast to the shape of ``ref`` (a sweep's arrays), or as is."""
    if _is_array(ref):
        import numpy as np

        return np.broadcast_to(value, np.shape(ref)).astype(float)
    return value


def spanned_systems(y: dict, plan: dict[str, int], used: Any) -> Any:
    """Systems the ``used`` GPUs of ``plan`` span, placed in whole copies of its in-domain groups
    (:func:`trainplan.spanned_gpus`): 832 GPUs of 64-GPU expert groups take 64 of each of 13 NVL72
    racks, while 864 GPUs round up to 12 (a fixed GPU count counted 12; a user review)."""
    import numpy as np

    cols = {k: np.asarray(plan[k], dtype=float) for k in ("tp", "cp", "pp", "ep", "order")}
    return tpn.spanned_gpus(cols, y, used) / y["per_system"]


def plan_run(y: dict, plan: dict[str, int], o: dict[str, Any], gpus: Any) -> dict[str, Any]:
    """Step, wall time, GPU-hours and MFU of one plan (``o``: its step outputs; numbers or arrays)."""
    used = plan["tp"] * plan["cp"] * plan["pp"] * o.get("dp", plan["dp"])
    per_step = o["tokens_per_step"]
    step = o["step_s"]
    if "mfu_pin" in y:
        step = y["fpt"] * per_step / (used * y["low_peak"] * y["mfu_pin"])
    wall = y["tokens"] * step * o["penalty"] / per_step / y["goodput"]
    return {
        "gpus": _like(gpus, wall),
        "systems": _like(f.maximum(f.ceil(gpus / y["per_system"]), spanned_systems(y, plan, used)), wall),
        "gpus_per_system": _like(y["per_system"], wall),
        "wall_days": wall / f.SECONDS_PER_DAY,
        "gpu_hours": gpus * wall / f.SECONDS_PER_HOUR,
        "mfu": y["fpt"] * per_step / (step * used * y["low_peak"]),
        "effective_mfu": y["fpt"] * y["tokens"] / (gpus * wall * y["low_peak"]),
        "scale_efficiency": _like(y["goodput"], wall),
        # the chunks the 1F1B overlap does not pair expose theirs too (step_breakdown's exposed_comm_s
        # counts them; this share left them out: GB200's 10T plan, which pairs none, said 1.9 % of
        # its step where 12.5 % is)
        "moe_comm_exposed_fraction": (plan["mb"] * o["ep_comm_s"] + o.get("a2a_alone_s", 0.0)) / o["step_s"],
        "training_flops": y["fpt"] * y["tokens"],
        "flops_per_token": _like(y["fpt"], wall),
        "counted_active_params": _like(y["fpt_params"], wall),
        "attention_flops_per_token": _like(y["fpt"] - 6.0 * y["fpt_params"], wall),
        "peak_tflops_per_gpu": _like(y["low_peak"] / f.TERA, wall),
        "step_time_s": step,
        "global_batch_tokens": _like(per_step, wall),
        "memory_gb_per_gpu": o["memory_bytes"] / f.GIGA,
        "host_offload_gb_per_gpu": _like(o.get("host_bytes", 0.0), wall) / f.GIGA,
        "tokens_per_s_per_gpu": per_step / (step * gpus),
        "gpus_used": _like(used, wall),
        "batch_token_multiplier": o["penalty"],
        "recipe_batch_tokens": _like(y["recipe_batch"], wall),
    }


def pretraining_core(x: dict[str, Any]) -> dict[str, Any]:
    """The plan search once per distinct physics point of ``x`` (numbers or sweep arrays), then
    cost and energy over whole arrays. A point where nothing runs gives NaN."""
    phys = _physics(x)
    arrays = {k: v for k, v in phys.items() if _is_array(v)}
    if not arrays:
        y = dict(solve(x)[0])
    else:
        y = _per_physics_point(x, arrays)
    nan = float("nan")
    hours = y.get("gpu_hours", nan)
    y["cost_usd"] = hours * x["price"]
    y["energy_mwh"] = f.energy_mwh(hours, x["kw_per_gpu"], x["pue"])
    y["price_usd_per_gpu_hour"] = x["price"]
    y["kw_per_gpu"] = x["kw_per_gpu"]
    return y


def _per_physics_point(x: dict, arrays: dict[str, Any]) -> dict[str, Any]:
    """One search per distinct physics point; beyond MAX_SEARCHES of them (sampling, fine grids),
    one search at the median point and that plan evaluated at every point."""
    import numpy as np

    names = sorted(arrays)
    n = max(np.size(arrays[k]) for k in names)
    keys = np.stack([np.broadcast_to(arrays[k], (n,)).astype(float) for k in names], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    if len(uniq) > MAX_SEARCHES:
        return _fixed_plan(x, arrays, names, keys)
    rows = []
    for point in uniq:
        xp = {**x, **{k: float(v) for k, v in zip(names, point, strict=True)}}
        rows.append(solve(xp)[0])
    fields = sorted({k for r in rows for k in r})
    table = np.array([[r.get(k, np.nan) for k in fields] for r in rows], dtype=float)
    inverse = np.asarray(inverse).reshape(-1)
    return {k: table[inverse, j] for j, k in enumerate(fields)}


def _fixed_plan(x: dict, arrays: dict[str, Any], names: list[str], keys: Any) -> dict[str, Any]:
    """The plan searched at the median of the swept physics, evaluated at every point."""
    import numpy as np

    mid = {k: float(np.median(keys[:, j])) for j, k in enumerate(names)}
    nominal, found, _why = solve({**x, **mid})
    n = keys.shape[0]
    if found is None:
        return {"gpus": np.full(n, np.nan)}
    return plan_at({**x, **{k: keys[:, j] for j, k in enumerate(names)}}, found, nominal, n)


def plan_at(x: dict, found: tpn.Found, nominal: dict[str, float], n: int) -> dict[str, Any]:
    """The best plan of ``found`` (searched at other inputs, whose run is ``nominal``) evaluated
    where ``x`` holds arrays of ``n`` values (sampled inputs, sweep points): the plan is kept, its
    step and run are priced at each value; a deadline re-solves its data-parallel degree, hence
    its GPUs, at each value. ``plan_fits_memory`` (1 or 0) and ``memory_over_gb_per_gpu`` say where
    the plan no longer fits the GPU's (or the host's) memory: it is priced there all the same."""
    import numpy as np

    from . import trainstep as ts

    plan = found.best.plan
    with np.errstate(all="ignore"):
        y = tpn.derive(x)
        P = {k: np.full(n, float(v)) for k, v in plan.items()}
        if "gpus" in x:
            out = tpn.finish(P, ts.micro_batch(P, y), y)
            gpus: Any = np.full(n, float(x["gpus"]))
        else:
            P["fill"] = np.ones(n)
            pins = {"rc": plan["rc"], "zero": plan["zero"], "mb": plan["mb"]}
            rate = y["tokens"] / (x["deadline_days"] * f.SECONDS_PER_DAY * y["goodput"])
            out = tpn.solve_replicas(P, ts.micro_terms(P, y), y, rate, pins)
            gpus = tpn.systems_gpus(P, y, P["tp"] * P["cp"] * P["pp"] * P["dp"])
            out["dp"] = P["dp"]
        numbers = plan_run(y, plan, out, gpus)
        # the plan was chosen where it fits: at other values its memory may not (a sampling review)
        numbers["plan_fits_memory"] = tpn.fits_memory(out, y).astype(float)
        numbers["memory_over_gb_per_gpu"] = np.maximum(out["memory_bytes"] - y["hbm_cap"], 0.0) / f.GIGA
    for key in ("min_gpus_for_memory", "plans_evaluated"):
        numbers[key] = np.full(n, nominal[key])
    return numbers


def sequence_length_of(inp: Inputs, cat: Catalog, model: str, given: int | None, origin: str) -> Any:
    """The training sequence length: as given, else the model's recipe
    (``models.<m>.training_sequence_length``), else the catalog's default where the model's
    context holds it, else the whole context (``models.<m>.max_context``: a model of 4,096 tokens
    is not trained on 8,192-token sequences), each recorded with its source (the default of 8,192
    was a constant in code, recorded as typed on the command line)."""
    if given is not None:
        return inp.given("sequence length", given, "tokens", origin, path="workload.sequence_length")
    name, m = cat.canonical("models", model), cat.model(model)
    if m.training_sequence_length is not None:
        return inp.read(f"models.{name}.training_sequence_length", "sequence length")
    if m.max_context < cat.efficiency.default_training_sequence_length.value:
        return inp.read(f"models.{name}.max_context", "sequence length")
    return inp.read("efficiency.default_training_sequence_length", "sequence length")


def _check_lengths(cat: Catalog, model: str, seq: Any, tokens: Any, given: bool) -> None:
    """A sequence length the caller gave (``given``) that the model's context holds, and tokens
    for at least one sequence (an input review: a 1M-token sequence on a 131,072-token model and
    0.5 tokens, less than a step, were priced). The model's recipe length is not held to the
    context; the catalog's default is capped at it (:func:`sequence_length_of`)."""
    if not isinstance(seq, int | float) or not isinstance(tokens, int | float):
        return  # sampled draws: the nominal point was checked
    context = cat.model(model).max_context
    if given and context is not None and seq > context:
        raise InputError(
            f"a sequence length of {seq:,.0f} tokens is beyond {cat.canonical('models', model)}'s "
            f"context of {context:,} tokens (models.*.max_context)"
        )
    if tokens < seq:
        raise InputError(f"`tokens` {tokens:g} is less than one sequence of {seq:,.0f} tokens")


def _check_args(
    tokens: float, gpus: int | None, deadline_days: float | None, seq: int | None, mfu: float | None
) -> None:
    if (gpus is None) == (deadline_days is None):
        raise InputError("give exactly one of `gpus` or `deadline_days`")
    for flag, v in (
        ("`tokens`", tokens),
        ("`gpus`", gpus),
        ("`deadline_days`", deadline_days),
        ("`sequence_length`", seq),
    ):
        if v is not None and not math.isfinite(v):
            raise InputError(f"{flag} must be a finite number, got {v}")
        if v is not None and v <= 0:
            raise InputError(f"{flag} must be > 0, got {v}")
    if gpus is not None:
        check_cluster("gpus", gpus)
    if mfu is not None and not 0 < mfu <= 1:
        raise InputError(f"`mfu` must be in (0, 1], got {mfu}")


def estimate_pretraining(
    cat: Catalog,
    hardware: str,
    model: str,
    tokens: float,
    *,
    gpus: int | None = None,
    deadline_days: float | None = None,
    precision: str = "bf16",
    mfu: float | None = None,
    sequence_length: int | None = None,
    pricing: str = "rental",
    origin: str = CLI,
    plan: str | None = None,
    plans: int = 0,
) -> SystemPretraining:
    """Wall time, GPUs, GPU-hours, cost and energy to pre-train ``model`` on ``tokens``, with the
    parallelism plan the search picks (``plan``: pins such as ``'tp=4,pp=8'``; ``plans``: list the
    N best).

    Give exactly one of ``gpus`` (a fixed cluster) or ``deadline_days`` (size the
    cluster to finish in time).
    """
    _check_args(tokens, gpus, deadline_days, sequence_length, mfu)
    if plans < 0:
        raise InputError(f"`plans` must be >= 0, got {plans}")
    trace = Trace(cat.sources)
    x, meta = pretraining_inputs(
        cat,
        hardware,
        model,
        tokens,
        gpus=gpus,
        deadline_days=deadline_days,
        precision=precision,
        mfu=mfu,
        sequence_length=sequence_length,
        pricing=pricing,
        origin=origin,
        trace=trace,
        plan=plan,
        top=plans,
    )
    _check_lengths(cat, model, x["seq"], x["tokens"], given=sequence_length is not None)
    _, found, why = solve(x)
    if found is None:
        raise InfeasibleError(_no_run(meta, x, why))
    y = pretraining_core(x)
    result = _result(meta, tokens, y, found, x)
    system = meta["system"]
    out = SystemPretraining(
        hardware=meta["hardware"],
        description=system.description,
        status=system.status,
        pretraining=result,
        assumptions=trace.items,
    )
    out.notes.extend(_missed_plans_notes(found, result, x))
    return out


def _missed_plans_notes(found: tpn.Found, result: Any, x: dict) -> list[str]:
    """Runners-up asked for that the list leaves out because they miss the deadline, said on stderr
    (a newcomer audit: `--plans 5 --days 1` listed one plan and nothing said why)."""
    missed = found.missed_wall_s
    if not missed or x.get("deadline_days") is None:
        return []
    days = sorted(w / f.SECONDS_PER_DAY for w in missed)
    # to the thousandth of a day (86 s): a miss by 0.3 % read "1 day" against a 1-day deadline
    span = f"{days[0]:,.3f} days" if len(days) == 1 else f"{days[0]:,.3f} to {days[-1]:,.3f} days"
    listed = len(result.plans or [])
    return [
        f"plans: {counted(listed, 'plans')} of the {listed + len(missed)} fastest on the chosen "
        f"{result.gpus:,} GPUs {'meets' if listed == 1 else 'meet'} the {x['deadline_days']:g}-day "
        f"deadline; the other {len(missed)} ({span}) miss it and are not listed"
    ]


def pretraining_numbers(
    cat: Catalog,
    hardware: str,
    model: str,
    tokens: float,
    *,
    gpus: int | None = None,
    deadline_days: float | None = None,
    precision: str = "bf16",
    sequence_length: int | None = None,
    plan: str | None = None,
) -> dict[str, float]:
    """The numbers of :func:`estimate_pretraining` without the records (validation, calibration)."""
    _check_args(tokens, gpus, deadline_days, sequence_length, None)
    x, meta = pretraining_inputs(
        cat,
        hardware,
        model,
        tokens,
        gpus=gpus,
        deadline_days=deadline_days,
        precision=precision,
        mfu=None,
        sequence_length=sequence_length,
        pricing="rental",
        origin=CLI,
        trace=Trace(cat.sources, record=False),
        plan=plan,
    )
    _, found, why = solve(x)
    if found is None:
        raise InfeasibleError(_no_run(meta, x, why))
    return pretraining_core(x)


def _no_run(meta: dict, x: dict, why: str) -> str:
    fastest = _fastest(x) if why == "deadline" else why
    if isinstance(fastest, str):
        return f"{meta['model']} on {meta['hardware']}: {fastest}"
    pins = f" with `plan` {tpn.pins_text(x['pins'])}" if x["pins"] else ""
    days, hw = x["deadline_days"], meta["hardware"]
    head = f"{meta['model']} cannot train {x['tokens']:.3g} tokens in {days:g} days on {hw}"
    if "mfu_pin" in x:
        # a pinned MFU sets the speed: the hint names it first (an input review: --mfu 0.001 was
        # told to move the deadline, the tokens or the model only)
        return (
            f"{head}{pins} at `mfu` {x['mfu_pin']:g} with up to {MAX_GPUS:,} GPUs; give a higher `mfu`, "
            "a later `deadline_days`, fewer `tokens`, or a smaller `model`"
        )
    # the fastest plan's days, which no cluster beats (a CLI review: "with up to 100,000,000 GPUs"
    # named a bound that was not the one: A100's 10T month ran on 1.08M GPUs at 60 days, and
    # beyond that more GPUs only grew the batch past the recipe's)
    wall, used, work = fastest["wall_days"], fastest["gpus_used"], fastest["batch_token_multiplier"]
    batch = (
        f", at a global batch so far beyond the recipe's that it does {work:,.3g}x the tokens' work"
        if work > 1.01
        else ""
    )
    least = wall  # rounded up at three digits: a deadline that runs
    if math.isfinite(wall) and wall > 0:
        step = 10.0 ** (math.floor(math.log10(wall)) - 2)
        least = math.ceil(wall / step) * step
    return (
        f"{head}{pins}: its fastest plan takes {wall:,.4g} days (on {used:,.0f} GPUs{batch}); give a "
        f"later `deadline_days` (at least {least:,.3g}), fewer `tokens`, or a smaller `model`"
    )


def training_plan(p: dict[str, int]) -> TrainingPlan:
    """The structured fields of a plan."""
    return TrainingPlan(
        tp=p["tp"],
        cp=p["cp"],
        pp=p["pp"],
        interleave=p["vp"],
        pipeline_schedule=tpn.SCHEDULES[p["sched"]],
        ep=p["ep"],
        moe_dispatcher=tpn.DISPATCHERS[p["disp"]],
        a2a_overlap=p["a2ao"] == 1,
        cuda_graphs=p["graph"] == 1,
        dp=p["dp"],
        micro_batch=p["mbs"],
        micro_batches=p["mb"],
        global_batch=p["dp"] * p["mb"] * p["mbs"],
        recompute=tpn.recompute_name(p["rc"]),
        zero_stage=p["zero"],
        pipeline_inside_domain=p["order"] == 1,
        gpus_used=p["tp"] * p["cp"] * p["pp"] * p["dp"],
    )


def step_breakdown(c: tpn.Choice, step_s: float | None = None) -> dict[str, float]:
    """Seconds per step by term; they add up to the step time. ``step_s``: a step the plan's own
    does not give (a pinned MFU), over which the plan's terms are shared in proportion."""
    o, mb = c.out, c.plan["mb"]
    scale = 1.0 if step_s is None else step_s / float(o["step_s"])
    terms = {
        "gemm_s": mb * o["gemm_s"],
        "attention_s": mb * o["attention_s"],
        "memory_bound_s": mb * o["memory_s"],
        # the expert all-to-alls of the chunks the 1F1B overlap cannot pair included
        "exposed_comm_s": mb * (o["comm_s"] - o.get("offload_s", 0.0)) + o.get("a2a_alone_s", 0.0),
        "activation_offload_s": mb * o.get("offload_s", 0.0),  # the host link, not a collective
        # an eager MoE layer's host-bound launches (no CUDA graphs); the step charged them, the
        # breakdown left them out (its terms summed to 30.0 of a 34.8 s step)
        "host_bound_s": mb * o.get("eager_s", 0.0),
        "pipeline_p2p_s": o["p2p_s"],
        "pipeline_bubble_s": o["bubble_s"],
        "data_parallel_exposed_s": o["dp_exposed_s"],
        "tensor_parallel_grad_sync_s": o["tp_grad_s"],  # the gradients of what every TP rank holds whole
        "optimizer_s": o["optimizer_s"],
        "step_overhead_s": o["fixed_s"],
    }
    return {k: float(v) * scale for k, v in terms.items()}


def memory_breakdown(c: tpn.Choice, x: dict) -> dict[str, float]:
    """GB per GPU of the plan's peak memory by part: weights (FSDP: its shard and two gathered
    layers), gradients and optimizer state, each by the plan's sharding stage
    (:func:`~ipd_cli.engine.trainstep.state_parts`), and the activations the rest of the peak holds
    (in-flight micro-batches' checkpoints under the recompute policy, the last stage's logits, the
    recompute working set; an offloading plan's: what is left of the HBM). They add up to
    memory_gb_per_gpu."""
    from . import trainstep as ts

    y = tpn.derive(x)
    P = {k: float(v) for k, v in c.plan.items()}
    weights, grads, optim = (float(v) for v in ts.state_parts(P, y))
    acts = c.out["memory_bytes"] - weights - grads - optim
    parts = {"weights": weights, "gradients": grads, "optimizer_state": optim, "activations": acts}
    return {k: v / f.GIGA for k, v in parts.items()}


def _summary(c: tpn.Choice, x: dict) -> PlanSummary:
    y = tpn.derive(x)
    run = plan_run(y, c.plan, c.out, c.gpus)
    return PlanSummary(
        plan=c.name + tpn.routing_text(x["pins"]),
        parallelism=(par := training_plan(c.plan)),
        global_batch=par.global_batch,
        step_time_s=run["step_time_s"],
        mfu=run["mfu"],
        memory_gb_per_gpu=run["memory_gb_per_gpu"],
        host_offload_gb_per_gpu=run["host_offload_gb_per_gpu"],
        tokens_per_s_per_gpu=run["tokens_per_s_per_gpu"],
        batch_token_multiplier=run["batch_token_multiplier"],
        useful_tokens_per_s_per_gpu=run["tokens_per_s_per_gpu"] / run["batch_token_multiplier"],
        wall_days=run["wall_days"],
    )


INT_FIELDS = ("gpus", "systems", "gpus_per_system", "min_gpus_for_memory", "gpus_used", "plans_evaluated")


def _result(meta: dict, tokens: float, y: dict, found: tpn.Found, x: dict) -> Pretraining:
    for k, v in y.items():
        if not math.isfinite(v):
            raise IpdError(
                f"the result is not a finite number: pretraining.{k} is {v}; an input is out of range "
                "(check tokens, specs and prices)",
                ExitCode.RUNTIME,
            )
    numbers: dict[str, Any] = {k: (int(v) if k in INT_FIELDS else float(v)) for k, v in y.items()}
    return Pretraining(
        model=meta["model"],
        precision=meta["precision"],
        precision_requested=meta.get("precision_requested"),
        fp8_recipe=tpn.fp8_recipe(x["pins"], meta["precision"]),
        tokens=tokens,
        pricing=meta["pricing"],
        mfu_pinned="mfu_pin" in x,
        plan=found.best.name + tpn.routing_text(x["pins"]),
        parallelism=training_plan(found.best.plan),
        step_breakdown_s=step_breakdown(found.best, numbers["step_time_s"] if "mfu_pin" in x else None),
        memory_breakdown_gb_per_gpu=memory_breakdown(found.best, x),
        plans=[_summary(c, x) for c in found.top] if x["top"] else None,
        **numbers,
    )


def workload_args(w: Any) -> dict[str, Any]:
    """A pretrain workload's fields as the keyword arguments of the estimate functions."""
    return {
        "model": w.model,
        "tokens": w.tokens,
        "gpus": w.gpus,
        "deadline_days": w.deadline_days,
        "precision": w.precision,
        "sequence_length": w.sequence_length,
        "plan": w.plan,
    }


def estimate_workload(
    cat: Catalog,
    hardware: str,
    w: Any,
    *,
    mfu: float | None = None,
    pricing: str = "rental",
    origin: str = CLI,
) -> SystemPretraining:
    """:func:`estimate_pretraining` with a pretrain workload's fields (model, tokens, target, plan pins)."""
    return estimate_pretraining(cat, hardware, mfu=mfu, pricing=pricing, origin=origin, **workload_args(w))


def best_training_plan(
    cat: Catalog,
    hardware: str,
    model: str,
    gpus: int,
    tokens_per_step: float,
    sequence_length: int,
    precision: str = "bf16",
    *,
    plan: str | None = None,
    trace: Trace | None = None,
) -> dict[str, Any]:
    """The fastest training plan for one optimizer step of ``tokens_per_step`` tokens on ``gpus``
    GPUs (for RL trainers): the global batch is pinned to the step's sequences. Returns the plan
    (name and fields), the training step seconds, the forward-only pass seconds over the same tokens
    (log-probabilities), and bytes per GPU. Raises InfeasibleError naming the smallest trainer when
    the training state does not fit."""
    trace = trace or Trace(cat.sources, record=False)
    sequences = max(1, round(tokens_per_step / sequence_length))
    pins = {**tpn.parse_plan(plan), "gbs": sequences}
    x, _meta = pretraining_inputs(
        cat,
        hardware,
        model,
        tokens_per_step,
        gpus=gpus,
        deadline_days=None,
        precision=precision,
        mfu=None,
        sequence_length=sequence_length,
        pricing="rental",
        origin=CLI,
        trace=trace,
        plan=plan,  # its pins as the search's (the FP8 recipe among them)
    )
    y = tpn.derive({**x, "pins": pins})
    found = tpn.search_sizes(y, gpus, pins)
    i = found.best(gpus)
    if i is None:
        need = tpn.smallest_by_size(y, pins, gpus, MAX_GPUS)
        least = f"needs at least {need:,}" if need else f"fits on no cluster of up to {MAX_GPUS:,}"
        raise InfeasibleError(
            f"{cat.canonical('models', model)} {least} {cat.canonical('systems', hardware)} GPUs to hold "
            f"its training state with {sequences:,} sequences of {sequence_length:,} tokens per step; "
            f"the trainer has `train_gpus` {gpus}"
        )
    c = tpn.choice(found.s, i, gpus)
    o = c.out
    return {
        "plan": c.name,
        "parallelism": training_plan(c.plan),
        "step_s": o["step_s"],
        "forward_s": tpn.plan_forward_seconds(c.plan, y),
        "memory_bytes_per_gpu": o["memory_bytes"],
        "mfu": y["fpt"] * o["tokens_per_step"] / (o["step_s"] * c.gpus_used * y["low_peak"]),
    }


def min_training_gpus(
    cat: Catalog, hardware: str, model: str, sequence_length: int, precision: str = "bf16"
) -> int:
    """A lower bound on the GPUs that hold ``model``'s training state: weights, gradients and optimizer
    state sharded over every GPU plus one sequence's full-recompute checkpoints. The smallest trainer
    the plan search can run (what RL reports) is at least this."""
    x, _meta = pretraining_inputs(
        cat,
        hardware,
        model,
        1.0,
        gpus=1,
        deadline_days=None,
        precision=precision,
        mfu=None,
        sequence_length=sequence_length,
        pricing="rental",
        origin=CLI,
        trace=Trace(cat.sources, record=False),
    )
    return tpn.min_gpus_for_memory(tpn.derive(x))
