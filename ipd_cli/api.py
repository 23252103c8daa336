"""The Python API: the same estimates as the CLI, returned as result models.

Example::

    import ipd_cli
    cat = ipd_cli.load()
    r = ipd_cli.compare(cat, ["vera-rubin", "blackwell"], "pretrain-10t-moe")
    print(r.systems[1].pretraining.gpus / r.systems[0].pretraining.gpus)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .catalog.catalog import Catalog, require_catalog
from .catalog.loader import load_catalog
from .catalog.workloads import (
    check_mfu_scope,
    refuse_workload_sets,
    resolve_with_sources,
    with_nested_workloads,
)
from .defaults import CLI, DEFAULT_RL_WORKLOAD, DEFAULT_SCENARIO  # noqa: F401 - part of the API
from .engine.result_base import Listing
from .errors import InfeasibleError, InputError
from .listing import (  # noqa: F401 - part of the API
    list_hardware,
    list_models,
    list_workloads,
    show_hardware,
    show_model,
    show_workload,
)
from .render import EXPLAIN_INPUT_FIELDS

if TYPE_CHECKING:  # the estimate models are imported where an estimate runs (not to list the catalog)
    from .engine.results import (
        CompareResult,
        RlResult,
        ServeCurveResult,
        ServeResult,
        SystemPretraining,
        SystemResult,
        TrainResult,
    )


def check_arguments(fn: Any, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` checked against ``fn``'s annotations and returned with whole numbers as ints: a
    number (``int``, ``float``) is a real number, a count (``int``) a whole one (``64.0`` and
    ``1e3`` are taken as 64 and 1000), a switch (``bool``) True or False, text (``str``) text (a
    ``Path`` taken as its text), None only where the annotation allows it; a string, a bool for a
    number or a fraction of a count is refused naming the parameter (``gpus=64.7`` ran on 64 GPUs,
    ``'64'`` was a TypeError deep in the engine, ``disaggregated='false'`` a ValueError: a
    contract review). A float that is not finite is left to the estimate's own range checks,
    except for a count, which cannot be one."""
    import inspect
    import numbers

    out = dict(values)
    for p in inspect.signature(fn).parameters.values():
        if p.name in values:
            written = set(str(p.annotation).replace(" ", "").split("|"))
            v = values[p.name]
            if p.name in FOLDED and isinstance(v, str):
                v = v.lower()
            elif p.name in FOLDED and isinstance(v, numbers.Integral) and not isinstance(v, bool):
                v = int(v)  # a numpy depth, as a numpy count is taken
            out[p.name] = _checked(p.name, v, written - {"None"}, "None" in written)
    return out


# choices read in any case, as the CLI reads them and as system and model names are (a library
# review: `pricing="TCO"` and `precision="FP8"` were refused where `speculative="OFF"` was taken)
FOLDED = frozenset(
    {"precision", "kv_precision", "stack", "stack_release", "pricing", "mode", "split", "transport", "layout",
     "prefill_layout", "instance", "speculative"}
)  # fmt: skip


def _checked(name: str, v: Any, kinds: set[str], optional: bool) -> Any:
    """One argument of :func:`check_arguments`: ``kinds`` its annotation's types (None apart)."""
    import math
    import numbers

    if kinds == {"Catalog"}:
        require_catalog(v, name)
    if v is None:
        if kinds and not optional and kinds <= {"int", "float", "str", "bool"}:
            raise InputError(f"`{name}` is required, got None")  # `tokens=None`, `pricing=None`
        return v
    if kinds == {"str"}:  # text: a path is taken as its text (a workload file), nothing else
        if not isinstance(v, str | Path):
            raise InputError(f"`{name}` must be text, got {v!r}")
        return str(v)
    if kinds == {"bool"}:
        if not isinstance(v, bool):
            raise InputError(f"`{name}` must be true or false, got {v!r}")
        return v
    if not kinds or not kinds <= {"int", "float"}:
        return v
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise InputError(f"`{name}` must be a number, got {v!r}")
    try:
        x = float(v)
    except OverflowError:  # an int beyond any float (10**400)
        raise InputError(f"`{name}` is out of range, got {v!r}") from None
    if kinds != {"int"} or isinstance(v, numbers.Integral):
        return v
    if not (math.isfinite(x) and x.is_integer()):
        raise InputError(f"`{name}` must be a whole number, got {v!r}")
    return int(x)


def _names(param: str, value: Any, kind: type = str) -> list[Any]:
    """A list parameter: a lone string is refused (it would be read a letter at a time), and each
    item must be a ``kind``."""
    if isinstance(value, str | Path):
        raise InputError(f"`{param}` is a list; give [{str(value)!r}], not {str(value)!r}")
    if value is not None and not isinstance(value, list | tuple | set | frozenset):
        # a library review: compare(cat, 5) raised "'int' object is not iterable", naming nothing
        raise InputError(f"`{param}` is a list, got {value!r}")
    items = list(value or [])
    for item in items:
        if not isinstance(item, kind):
            names = " or ".join(k.__name__ for k in getattr(kind, "__args__", (kind,)))
            raise InputError(f"`{param}` holds {names} items, got {item!r}")
    return items


def load(extra_dirs: list[Path] | None = None, sets: list[str] | None = None) -> Catalog:
    """The built-in catalog plus ``IPD_CATALOG`` and ``extra_dirs`` (later ones win),
    with ``sets``, ``PATH=VALUE`` overrides, applied (see :mod:`ipd_cli.catalog.overrides`)."""
    dirs = [Path(d) for d in _names("extra_dirs", extra_dirs, str | Path)]  # type: ignore[arg-type]
    return load_catalog(dirs, _names("sets", sets))


def rl(
    cat: Catalog,
    hardware: str,
    workload: str = DEFAULT_RL_WORKLOAD,
    *,
    stack_release: str | None = None,
    **kw: Any,
) -> RlResult:
    """One RL post-training step (and its refresh cycle) of an RL workload (a catalog name or a
    YAML file) on ``hardware``. Keywords, each overriding the workload's: ``model``, ``mode``
    (colocated, disaggregated, one-step-off, async), ``gpus`` (a total the search splits) or
    ``gen_gpus`` and ``train_gpus``, ``split`` ('auto': search the split of the workload's or the
    given GPUs even where it names one), ``transport`` (the weight update's), ``stack_release``
    (its ``generation_stack_release``: the rollout engines' release, as ``serve(stack_release=)``),
    ``pricing``. See :func:`ipd_cli.engine.rl.estimate_rl`."""
    from .engine.rl import estimate_rl

    given = {"cat": cat, "hardware": hardware, "workload": workload, "stack_release": stack_release}
    a = check_arguments(rl, given)
    workload, stack_release = a["workload"], a["stack_release"]
    internal = ("workload_name", "origin", "advise_larger")
    accepted = tuple(k for k in _keyword_parameters(estimate_rl) if k not in internal)
    _check_keywords("rl", kw, (*accepted, "stack_release"))
    kw = check_arguments(estimate_rl, kw)
    if kw.get("model") is not None:  # named as the argument, not as the workload file's field
        cat.model(kw["model"])
    fields = _rl_given(kw) | ({} if stack_release is None else {"generation_stack_release": stack_release})
    cat, name, w, origin = resolve_with_sources(cat, workload, fields)
    if w.kind != "rl":
        raise InputError(
            f"workload '{name}' is a {w.kind} workload; give an RL workload (ipd workloads list)"
        )
    _check_generation_release(cat, hardware, w, given=stack_release is not None)
    _refuse_missing_precision(cat, hardware, w.training_precision, _training_precision_fix)
    r = estimate_rl(cat, hardware, w, workload_name=name, origin=origin, advise_larger=True, **kw)
    transport = frozenset({"workload.sync_transport"} if kw.get("transport") is not None else ())
    cited = _cited(r.assumptions, cat, w, origin, given=transport)  # the others left the file's
    result = r.model_copy(update={"overrides": _sets(cat), "assumptions": cited})
    from .engine.pricing import rl_busy_notes, rl_pool_notes

    # its run charged for the hours its steps run, as compare says it of a scenario's (a review:
    # `ipd rl` priced the same year's run with no note)
    result.notes.extend(rl_pool_notes([result]) + rl_busy_notes([result], cat))
    from .engine.pricing import one_sided_range_notes

    # a sampled sweep of the workload draws them as compare's note says (a capacity planner's
    # review: `ipd rl` and `ipd train` said nothing where `compare --workload` did)
    result.notes.extend(one_sided_range_notes([result]))
    release, precision = w.generation_stack_release, result.rl.generation_precision
    result.notes.extend(_release_notes(cat, hardware, release, precision, w.generation_stack))
    return result


def _check_generation_release(cat: Catalog, hardware: str, w: Any, given: bool) -> None:
    """An RL workload's ``generation_stack_release`` checked against the rollout engines' stack before
    any estimate (``given``: by the ``stack_release`` parameter, which the message names)."""
    from .engine.serving.stack import check_release

    if w.generation_stack_release is None:
        return
    release = "stack_release" if given else "generation_stack_release"
    fields = ("generation_stack", release)  # the workload's stack, named as its own check names it
    check_release(cat, hardware, w.generation_stack_release, w.generation_stack, fields)


def _training_precision_fix(wide: str) -> str:
    """How ``rl`` asks for a trainer's precision (it has no precision option: the workload's)."""
    return (
        f" for the RL workload's trainer; set its `training_precision` to {wide} "
        f"(`sets` workload.training_precision={wide})"
    )


def _refuse_missing_precision(cat: Catalog, hardware: str, precision: str, fix: Callable[[str], str]) -> None:
    """A precision a single-system command was given that the GPU has no dense figure for is refused,
    naming the next wider one (``fix``: how to ask for it, after the reason), as ``serve`` refuses its
    ``precision``: the command does not run something other than what it was given. A comparison or
    a scenario runs the next wider one instead, with a warning, so one scenario spans every
    generation (an audit: ``train --precision fp4`` on H100 ran fp8 where ``serve`` refused it)."""
    from .engine.pretraining import supported_precision

    wide = supported_precision(cat.accelerator_of(cat.system(hardware)), precision)
    if wide != precision:
        name = cat.canonical("systems", hardware)
        raise InputError(f"{name} has no {precision} support (no dense {precision} figure){fix(wide)}")


def _rl_given(kw: dict[str, Any]) -> dict[str, Any]:
    """The workload fields the command line gives (they override the file, before it is checked);
    values out of range are left to the estimate, which names the parameter; an unknown mode is
    refused here, naming the parameter, not the workload file it would be merged into."""
    from .engine.rl.workload import check_mode

    if kw.get("mode") is not None:
        check_mode(kw["mode"])
    given: dict[str, Any] = {k: kw[k] for k in ("model", "mode") if kw.get(k) is not None}
    counts = {k: kw.get(k) for k in ("gpus", "gen_gpus", "train_gpus")}
    if any(isinstance(v, int) and v <= 0 for v in counts.values()):
        return given
    if counts["gpus"] is not None:
        given.update(gpus=counts["gpus"], gen_gpus=None, train_gpus=None)
    if counts["gen_gpus"] is not None and counts["train_gpus"] is not None:
        given.update(gen_gpus=counts["gen_gpus"], train_gpus=counts["train_gpus"])
    return given


def serve(
    cat: Catalog,
    hardware: str,
    model: str,
    *,
    curve: bool = False,
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
    pricing: str = "rental",
    origin: str = CLI,
) -> ServeResult | ServeCurveResult:
    """One serving operating point (``ServeResult``) or the whole curve (``ServeCurveResult``).

    The options are :func:`ipd_cli.engine.serving.estimate_serving`'s; ``curve`` refuses those that
    pick one point or pin a disaggregated deployment's pools."""
    from .engine.serving import estimate_serving, estimate_serving_curve

    a = check_arguments(serve, locals())
    refuse_workload_sets(
        cat, "serve", ["input_tokens", "output_tokens", "context_tokens", "concurrency", "tokens_per_user_s"]
    )
    space: dict[str, Any] = {  # what both a point and the curve search over or pin
        k: a[k]
        for k in (
            "input_tokens", "output_tokens", "context_tokens", "precision", "kv_precision", "instance_gpus",
            "attention_tp", "layout", "disaggregated", "eplb", "instance", "speculative", "stack",
            "stack_release", "pricing", "origin",
        )
    }  # fmt: skip
    one_point = {
        k: a[k] for k in ("concurrency", "tokens_per_user_s", "requests_per_s", "output_tokens_per_day")
    }
    pools = {k: a[k] for k in ("prefill_layout", "prefill_instances", "decode_instances")}
    if a["instance"] == "smallest" and a["instance_gpus"] is not None:  # was silently the pinned size
        raise InputError("`instance` smallest and `instance_gpus` both pin the instance's size; give one")
    if a["max_instance_gpus"] is not None and curve:  # the README listed it; serve() did not take it
        raise InputError("`max_instance_gpus` bounds one point's search; `curve` takes `instance_gpus`")
    if a["stack_release"] is not None:  # refused before any estimate, in the words rl and compare use
        from .engine.serving.stack import check_release

        check_release(cat, hardware, a["stack_release"], a["stack"])
    if not curve:
        point = estimate_serving(
            cat, hardware, model, **space, **one_point, **pools, max_instance_gpus=a["max_instance_gpus"]
        )
        result = point.model_copy(update={"overrides": _sets(cat)})
        sv = result.serving
        notes = _release_notes(cat, hardware, sv.stack_release, sv.precision, sv.stack, sv.disaggregated)
        result.notes.extend(notes)
        return result
    for name, value in one_point.items():
        if value is not None:
            raise InputError(f"`{name}` picks one point; `curve` gives them all")
    for name, value in pools.items():
        if value is not None:
            raise InputError(f"`{name}` pins one disaggregated deployment; `curve` searches them all")
    frontier = estimate_serving_curve(cat, hardware, model, **space)
    curve_result = frontier.model_copy(update={"overrides": _sets(cat)})
    stack = curve_result.serving[0].stack if curve_result.serving else a["stack"]
    split = bool(curve_result.serving) and all(p.disaggregated for p in curve_result.serving)
    notes = _release_notes(cat, hardware, a["stack_release"], curve_result.precision, stack, split)
    curve_result.notes.extend(notes)
    return curve_result


def _release_notes(
    cat: Catalog,
    hardware: str,
    release: str | None,
    precision: str | None,
    stack: str | None,
    disaggregated: bool = False,
) -> list[str]:
    """The note that a ``--stack-release`` priced nothing on this system at this precision (or, on a
    ``disaggregated`` point, only what it prices there)."""
    from .engine.serving.stack import release_unpriced_note

    note = release_unpriced_note(cat, hardware, release, precision, stack, disaggregated)
    return [] if note is None else [note]


def _keyword_parameters(fn: Any) -> tuple[str, ...]:
    """``fn``'s keyword-only parameters, in order (train()'s are estimate_pretraining's;
    ``deadline_days`` is the CLI's --days)."""
    import inspect

    params = inspect.signature(fn).parameters.values()
    return tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)


def train(cat: Catalog, hardware: str, model: str, tokens: float, **kw: Any) -> TrainResult:
    """Pre-train ``model`` on ``tokens`` on ``hardware``: give ``gpus`` (a fixed cluster) or
    ``deadline_days`` (size the cluster to finish in time); optional ``precision``, ``mfu``,
    ``sequence_length``, ``pricing``, ``plan`` (pins such as ``'tp=4,pp=8'``) and ``plans`` (list
    the N best). See :func:`ipd_cli.engine.pretraining.estimate_pretraining`."""
    from .engine.pretraining import estimate_pretraining
    from .engine.results import TrainResult

    _check_keywords("train", kw, _keyword_parameters(estimate_pretraining))
    kw = check_arguments(estimate_pretraining, kw)
    check_arguments(train, {"cat": cat, "hardware": hardware, "model": model, "tokens": tokens})
    given = ["tokens", "gpus", "deadline_days", "precision", "sequence_length", "plan"]
    refuse_workload_sets(cat, "train", given)
    if kw.get("precision") is not None:
        _refuse_missing_precision(cat, hardware, kw["precision"], lambda wide: f"; use `precision` {wide}")

    r = estimate_pretraining(cat, hardware, model, tokens, **kw)
    result = TrainResult(
        hardware=r.hardware, pretraining=r.pretraining, assumptions=r.assumptions, overrides=_sets(cat)
    )
    result.notes.extend(r.notes)  # the runners-up that miss a deadline
    from .engine.pricing import contract_term_notes

    # the contract a reserved rate's run is part of, as compare says it (an output review: the same
    # run's cost came with the note from compare and without it from train)
    result.notes.extend(contract_term_notes(cat, [result]))
    from .engine.pricing import one_sided_range_notes

    result.notes.extend(one_sided_range_notes([result]))  # as compare's and rl's
    return result


def _check_keywords(fn: str, kw: dict[str, Any], accepted: tuple[str, ...]) -> None:
    """A keyword ``fn`` does not take, named with the ones it does (``rl(gpu=64)`` named the
    engine function it was passed on to: a library review)."""
    unknown = [k for k in kw if k not in accepted]
    if unknown:
        hint = "; the deadline is `deadline_days`" if "days" in unknown else ""
        raise TypeError(
            f"{fn}() got an unexpected keyword argument '{unknown[0]}'{hint} "
            f"(accepted: {', '.join(accepted)})"
        )


def _sets(cat: Catalog) -> list[str]:
    return [o.text for o in cat.overrides]


def _cited(
    items: list[Any], cat: Catalog, w: Any = None, origin: str = "", given: frozenset[str] = frozenset()
) -> list[Any]:
    """The inputs with each one a ``sets`` workload path gave citing the ``cli-set`` source, as a
    catalog value a ``sets`` item replaces does (README "Overrides"; a review found the source
    empty), and each one the workload ``w`` (from ``origin``) cites in its ``field_sources``
    citing that source (the workload-level source was on no row: an explain audit), unless a
    parameter gave it (``given``: its paths) or it is not the value the entry cites."""
    from .catalog.overrides import CLI_SOURCE, WORKLOAD
    from .catalog.workloads import field_citations

    paths = {o.path.removesuffix(".value") for o in cat.overrides if o.path.startswith(WORKLOAD + ".")}
    fields = field_citations(cat, w, origin) if w is not None else {}
    if not paths and not fields:
        return items

    def cite(sid: str) -> dict[str, Any]:
        src = cat.sources.get(sid)
        return {
            "source": sid,
            "source_title": getattr(src, "title", None),
            "source_date": getattr(src, "date", None),
            "source_url": getattr(src, "url", None),
        }

    out = []
    for a in items:
        if a.path in paths:
            a = a if a.source == CLI_SOURCE else a.model_copy(update=cite(CLI_SOURCE))
        elif a.path in fields and a.path not in given and a.source is None:
            where, fs = fields[a.path]
            if a.origin.startswith(where) and _same(fs.value, a.value):
                update = {**cite(fs.source), "note": a.note or fs.note, "estimate": a.estimate or fs.estimate}
                a = a.model_copy(update=update)
        out.append(a)
    return out


def _same(cited: Any, value: Any) -> bool:
    """Whether a ``field_sources`` entry's value (None: any) is a row's value."""
    if cited is None:
        return True
    if isinstance(cited, str) or isinstance(value, str):
        return str(cited) == str(value)
    return float(cited) == float(value)


def compare(
    cat: Catalog,
    systems: list[str],
    workload: str = DEFAULT_SCENARIO,
    *,
    mfu: float | None = None,
    pricing: str = "rental",
    stack_release: str | None = None,
) -> CompareResult:
    """Estimate a scenario (or a pretrain / RL workload) on each system; the first is the ratio
    baseline. ``stack_release``: the scenario's serving under that release of each system's serving
    stack (its ``serving.stack_release``, as ``serve(stack_release=)``)."""
    a = check_arguments(
        compare,
        {"cat": cat, "workload": workload, "mfu": mfu, "pricing": pricing, "stack_release": stack_release},
    )
    return _compare(cat, systems, a["workload"], mfu=mfu, pricing=a["pricing"], release=a["stack_release"])[0]


def explain(
    cat: Catalog,
    systems: list[str],
    workload: str = DEFAULT_SCENARIO,
    *,
    pricing: str = "rental",
    stack_release: str | None = None,
) -> Listing:
    """Each headline number with its formula and inputs, then every input with its source."""
    given = {"cat": cat, "workload": workload, "pricing": pricing, "stack_release": stack_release}
    a = check_arguments(explain, given)
    return explain_compared(
        cat, systems, a["workload"], pricing=a["pricing"], stack_release=a["stack_release"]
    )[0]


def explain_compared(
    cat: Catalog,
    systems: list[str],
    workload: str = DEFAULT_SCENARIO,
    *,
    pricing: str = "rental",
    stack_release: str | None = None,
) -> tuple[Listing, CompareResult]:
    """:func:`explain` and the comparison it explains (whose warnings a reader of the explanation
    should see as a reader of the comparison does)."""
    result, steps = _compare(cat, systems, workload, pricing=pricing, release=stack_release)
    items: list[dict] = []
    for system, lines in zip(result.systems, steps, strict=True):
        dump = system.model_dump(mode="json")
        for st in lines:
            inputs = "; ".join(f"{k} = {v!r}" for k, v in st.inputs.items())  # full precision
            items.append(
                {
                    "hardware": system.hardware,
                    "metric": st.metric,
                    "value": st.value,
                    "formula": st.formula,
                    "inputs": inputs,
                    **NO_INPUT,
                    "unit": _step_unit(st.metric),
                    "field": _output_field(dump, st.metric),
                    **NO_NOTE,
                }
            )
        for block, why in system.infeasible.items():
            items.append(
                {
                    "hardware": system.hardware,
                    "metric": f"{block}: cannot be computed ({why.stage})",
                    "value": None,
                    "formula": why.reason,
                    "inputs": why.hint or "",
                    **NO_INPUT,
                    "field": f"infeasible.{block}",
                    **NO_NOTE,
                }
            )
        for a in system.assumptions:
            items.append(
                {
                    "hardware": system.hardware,
                    "metric": f"input: {a.name}",
                    "value": a.value,
                    # "unit; source ID", without the unit's "; " for a plain number (a scripting
                    # review: "; source swe-bench-2026")
                    "formula": "; ".join(
                        p
                        for p in (
                            a.unit,
                            f"source {_dated(a.source, a.source_date)}{' (estimate)' if a.estimate else ''}",
                            # the range --samples draws from (an explain review: the README said
                            # explain gives the prices' ranges; only their notes' words did)
                            f"range {a.range[0]:g} to {a.range[1]:g}" if a.range else "",
                        )
                        if p
                    )
                    + _lent(a.note),
                    "inputs": f"{a.origin}{'; --set ' + a.path if a.path else ''}",
                    # the same, one field each, for scripts (the table shows the two text columns)
                    "unit": a.unit,
                    "source": a.source,
                    # the source's title, date and address, which the table gives as its date only (an
                    # explain review: an ID alone sent a reader to the YAML to learn how old a figure is)
                    "source_title": a.source_title,
                    "source_date": a.source_date,
                    "source_url": a.source_url,
                    "range": a.range,
                    "estimate": a.estimate,
                    "origin": a.origin,
                    "path": a.path,
                    "field": None,
                    # the catalog's caveat (a lower bound, a derivation, a borrowed figure)
                    "note": a.note,
                }
            )
    out = Listing(kind="explain", items=items)
    out.notes.extend(result.notes)  # a scenario's stage notes, as compare prints them
    return out, result


# an explain line that is not an input: its structured input fields are empty
NO_INPUT: dict[str, Any] = dict.fromkeys(EXPLAIN_INPUT_FIELDS)


def _dated(source: str | None, date: str | None) -> str:
    """An input's source ID with its date, as the explain table names it ('N1, 2026-01-05')."""
    if source is None:
        return "-"
    return f"{source}, {date}" if date else source


NO_NOTE: dict[str, Any] = {"note": None}
# the unit of an explained number, read from its name (units are in the names: `_usd`, `_s`, ...)
STEP_UNITS = {
    "price_usd_per_gpu_hour": "USD/GPU-h", "mfu": "fraction", "wall_days": "days", "gpus": "GPUs",
    "gpus_for_traffic": "GPUs", "systems_for_traffic": "systems", "gpu_hours": "GPU-h",
    "gpu_hours_per_step": "GPU-h",
    "step_seconds": "s", "expected_attempts": "attempts", "success_per_attempt": "fraction",
    "success_per_task": "fraction", "traffic_output_tokens_per_s": "tokens/s", "tasks_solved": "tasks",
    "usd_per_solved_task": "USD/task", "solved_tasks_per_kusd": "tasks/$1k",
    "solved_tasks_per_mwh": "tasks/MWh", "site_tasks_solved_per_day": "tasks/day",
    "step_time_ms": "ms", "tpot_ms": "ms", "tokens_per_s_per_gpu": "tokens/s/GPU",
    "recipe_batch_tokens": "tokens", "batch_token_multiplier": "x",
    "usd_per_million_output_tokens": "USD/M tokens", "effective_mfu": "fraction",
    "flops_per_token": "FLOP/token", "tokens_per_s_per_mw": "tokens/s/MW", "rollouts_per_kwh": "rollouts/kWh",
    "global_batch_tokens": "tokens", "systems": "systems", "memory_gb_per_gpu": "GB",
    "moe_comm_exposed_fraction": "fraction", "tokens_per_s_per_user": "tokens/s",
    "samples_per_s": "samples/s", "usd_per_1k_samples": "USD", "request_tokens_per_s": "tokens/s",
    "interactivity_tokens_per_s": "tokens/s", "total_tokens_per_s_per_gpu": "tokens/s/GPU",
    "usd_per_million_total_tokens": "USD/M tokens",
    "usd_per_million_output_tokens_at_traffic": "USD/M tokens",
    "periodic_s_per_step": "s/step", "checkpoint_write_gb_per_s": "GB/s",
    "prefill_utilisation": "fraction",
    "slot_utilisation": "fraction",
}  # fmt: skip


def _step_unit(metric: str) -> str | None:
    """The unit of an explain line's number: a name in STEP_UNITS, else its suffix (USD, s)."""
    last = metric.rsplit(".", 1)[-1]
    if last in STEP_UNITS:
        return STEP_UNITS[last]
    if last.endswith("_usd") or last.startswith(("usd_per_step", "usd_per_year")):
        return "USD"
    if last.endswith("_mwh") or last.startswith("energy_kwh"):  # the stages' energy
        return "MWh" if last.endswith("_mwh") else "kWh"
    return "s" if last.endswith("_s") else None


# explain lines of the lifecycle named for their term, and where compare's JSON holds them
LIFECYCLE_FIELDS = {
    "pretraining_usd": "intelligence_per_dollar.cost_breakdown_usd.pretraining",
    "post_training_usd": "intelligence_per_dollar.cost_breakdown_usd.post_training",
    "serving_usd": "intelligence_per_dollar.cost_breakdown_usd.serving",
    "serving_mwh": "intelligence_per_dollar.energy_breakdown_mwh.serving",
    "post_training_mwh": "intelligence_per_dollar.energy_breakdown_mwh.post_training",
}


def _output_field(dump: dict[str, Any], metric: str) -> str | None:
    """The dotted path of compare's JSON (one system) that holds an explain line's number (what
    `--metrics` and `--budget-metric` take); None for an intermediate the output does not keep."""
    blocks = (f"{block}.{metric}" for block in ("intelligence_per_dollar", "pretraining", "rl", "serving"))
    for path in (LIFECYCLE_FIELDS.get(metric), metric, *blocks):  # a price: the first block's
        node: Any = dump
        for key in (path or "").split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if path and node is not None and not isinstance(node, dict | list):
            return path
    return None


def _lent(note: str | None) -> str:
    """'; borrowed: ...' for a serving efficiency measured elsewhere (another stack or family)."""
    first = (note or "").split(";")[0]
    lent = "borrowed from" in first or "the reference value" in first
    return f"; borrowed: {first}" if lent else ""


def _one_block(
    cat: Catalog, hardware: str, name: str, w: Any, *, mfu: float | None, pricing: str, origin: str
) -> SystemResult:
    """A pretrain or RL workload on one system: a SystemResult with just that block (null, with the
    reason under ``infeasible``, when the workload cannot run on this system)."""
    from .engine.lifecycle import infeasible
    from .engine.results import SystemResult

    system = cat.system(hardware)
    key, stage = ("rl", "post_training") if w.kind == "rl" else ("pretraining", "pretraining")
    r: RlResult | SystemPretraining
    try:
        if w.kind == "rl":
            from .engine.lifecycle import rl_at_supported_precision

            kw = dict(workload_name=name, pricing=pricing, origin=origin)
            r = rl_at_supported_precision(cat, hardware, w, **kw)
        else:
            from .engine.pretraining import estimate_workload

            r = estimate_workload(cat, hardware, w, mfu=mfu, pricing=pricing, origin=origin)
    except InfeasibleError as e:
        return SystemResult(
            hardware=cat.canonical("systems", hardware),
            description=system.description,
            status=system.status,
            infeasible={key: infeasible(stage, str(e), name)},
            assumptions=[],
        )
    return SystemResult(
        hardware=r.hardware,
        description=system.description,
        status=system.status,
        assumptions=r.assumptions,
        **{key: getattr(r, key)},
    )


def headline_block(kind: str) -> str:
    """The block a comparison of this workload kind is about."""
    return {"scenario": "intelligence_per_dollar", "rl": "rl"}.get(kind, "pretraining")


def _refuse_all_infeasible(name: str, kind: str, results: list[SystemResult]) -> None:
    """A comparison with no system that can run the workload is an error (exit 1) naming each stage."""
    block = headline_block(kind)
    if any(getattr(r, block) is not None for r in results):
        return
    from .engine.lifecycle import STAGES

    parts = []
    for r in results:
        why = r.infeasible[block]
        why = r.infeasible.get(STAGES[why.stage][0], why)  # the stage's own reason, not the headline's
        hint = f"; {why.hint}" if why.hint else ""
        parts.append(f"{r.hardware}: {why.stage} ({why.workload or name}): {why.reason}{hint}")
    raise InfeasibleError(f"'{name}' cannot run on any system given: {' | '.join(parts)}")


def _compare(
    cat: Catalog,
    systems: list[str],
    workload: str,
    *,
    mfu: float | None = None,
    pricing: str = "rental",
    release: str | None = None,
) -> tuple[CompareResult, list[list]]:
    from .engine.lifecycle import estimate_lifecycle
    from .engine.results import CompareResult, WorkloadInfo

    systems = _names("systems", systems)
    if len(systems) < 1:
        raise InputError("give at least one system to compare")
    for s in systems:  # every name, before any estimate
        cat.system(s)
    cat, name, w, origin = resolve_with_sources(cat, workload)
    cat = with_nested_workloads(cat, w)
    check_mfu_scope(mfu, w.kind, name)
    w = _with_release(cat, systems, name, w, origin, release)
    steps: list[list] = []
    results: list[SystemResult] = []
    for s in systems:
        if w.kind == "scenario":
            life = estimate_lifecycle(cat, s, w, pricing=pricing, origin=origin)
            results.append(life.system)
            steps.append(life.steps)
        else:
            one = _one_block(cat, s, name, w, mfu=mfu, pricing=pricing, origin=origin)
            results.append(one)
            steps.append(_block_steps(cat, one, getattr(w, "deadline_days", None), pricing))
    _refuse_all_infeasible(name, w.kind, results)
    results = [r.model_copy(update={"assumptions": _cited(r.assumptions, cat, w, origin)}) for r in results]
    info = WorkloadInfo(
        name=name,
        kind=w.kind,
        description=w.description,
        model=cat.canonical("models", w.model),
        tokens=getattr(w, "tokens", None),
        precision=getattr(w, "precision", None),
        deadline_days=getattr(w, "deadline_days", None),
        gpus=getattr(w, "gpus", None),
        origin=origin,
    )
    result = CompareResult(workload=info, baseline=results[0].hardware, systems=results, overrides=_sets(cat))
    if w.kind == "scenario":
        from .engine.lifecycle import stage_model_notes

        result.notes.extend(stage_model_notes(cat, w))
    if w.kind in ("scenario", "pretrain"):
        from .engine.pricing import contract_term_notes

        result.notes.extend(contract_term_notes(cat, result.systems))
    if w.kind in ("scenario", "rl"):  # an RL workload compared alone runs the same year of steps
        from .engine.pricing import rl_busy_notes, rl_pool_notes

        result.notes.extend(rl_pool_notes(result.systems) + rl_busy_notes(result.systems, cat))
    from .engine.pricing import one_sided_range_notes

    result.notes.extend(one_sided_range_notes(result.systems))
    result.notes.extend(_compared_release_notes(cat, w, result.systems))
    return result, steps


def _compared_release_notes(cat: Catalog, w: Any, systems: list[SystemResult]) -> list[str]:
    """:func:`_release_notes` of each compared system's serving stage (a scenario) or rollouts (an RL
    workload); each names its system."""
    out = []
    for r in systems:
        if w.kind == "scenario" and r.serving is not None:
            sv = r.serving
            notes = _release_notes(
                cat, r.hardware, sv.stack_release, sv.precision, sv.stack, sv.disaggregated
            )
        elif w.kind == "rl" and r.rl is not None:
            release, precision = w.generation_stack_release, r.rl.generation_precision
            notes = _release_notes(cat, r.hardware, release, precision, w.generation_stack)
        else:
            notes = []
        out += notes
    return out


def _with_release(
    cat: Catalog, systems: list[str], name: str, w: Any, origin: str, release: str | None
) -> Any:
    """The workload with ``release`` (None: as it is) as a scenario's serving release or an RL
    workload's generation release, the release it runs under checked against every system's
    serving stack before any estimate."""
    if release is not None and w.kind not in ("scenario", "rl"):
        raise InputError(
            f"`stack_release` picks the release a scenario's serving or an RL workload's rollouts run; "
            f"'{name}' (kind {w.kind}) serves nothing: give a scenario or an RL workload (ipd workloads list)"
        )
    if w.kind == "rl":
        if release is not None:
            w = w.model_copy(update={"generation_stack_release": release})
        for s in systems:
            _check_generation_release(cat, s, w, given=release is not None)
        return w
    if release is not None:
        w = w.model_copy(update={"serving": w.serving.model_copy(update={"stack_release": release})})
    held = w.serving.stack_release if w.kind == "scenario" else None
    if held is None:
        return w
    from .engine.serving.stack import check_release

    for s in systems:
        try:
            check_release(cat, s, held)
        except InputError as e:
            if release is not None:
                raise
            from .engine.lifecycle import stage_input_error

            raise stage_input_error(str(e), "serving", origin) from None
    return w


def _block_steps(cat: Catalog, system: SystemResult, deadline_days: float | None, pricing: str) -> list:
    """`ipd explain` lines of a pretrain or RL workload: the GPU-hour price its costs start from
    (the rental point, or the owning cost's formula: a scripting review found no line deriving a
    workload's tco price, which its cost lines cite), its numbers from the chosen plan or split (the
    same identities the results obey; a test recomputes each from its inputs), then its energy."""
    from .engine.inputs import Inputs
    from .engine.lifecycle import (
        pretraining_energy_steps,
        pretraining_steps,
        price_steps,
        rl_energy_steps,
        rl_steps,
    )
    from .engine.pricing import kw_per_gpu, pue

    inp = Inputs(cat).quiet()  # the values the estimate read (its assumptions list them)
    price = price_steps(cat, system.hardware, pricing)[0]  # a scenario's first line (its second: serving's)
    if system.pretraining is not None:
        p = system.pretraining
        return [price, *pretraining_steps(p, deadline_days), *pretraining_energy_steps(p, pue(inp))]
    return [
        price,
        *rl_steps(system.rl),
        *rl_energy_steps(system.rl, kw_per_gpu(inp, system.hardware), pue(inp)),
    ]


def output_schema() -> dict[str, Any]:
    """JSON Schema of every data command's output (the JSON contract)."""
    from .engine.result_base import EntryView
    from .engine.results import (
        CompareResult,
        RlResult,
        ServeCurveResult,
        ServeResult,
        TrainResult,
        ValidationResult,
    )
    from .engine.rows import ROWS

    return {
        "compare": CompareResult.model_json_schema(),
        "train": TrainResult.model_json_schema(),
        "serve": ServeResult.model_json_schema(),
        "serve_curve": ServeCurveResult.model_json_schema(),
        "rl": RlResult.model_json_schema(),
        "validate": ValidationResult.model_json_schema(),
        # hardware|models|workloads list, explain, calibrate and diff: a listing of their `kind`,
        # whose rows each `listing_rows` entry describes (by the listing's `kind`)
        "listing": Listing.model_json_schema(),
        "listing_rows": {  # one object schema (as every other entry): each kind's row by its name
            "title": "ListingRows",
            "type": "object",
            "properties": {kind: row.model_json_schema() for kind, row in ROWS.items()},
        },
        "show": EntryView.model_json_schema(),  # hardware|models|workloads show
    }


def sweep(
    cat: Catalog,
    vary: list[str],
    workload: str = DEFAULT_SCENARIO,
    *,
    samples: int | None = None,
    seed: int = 0,
    metrics: str = "headline",
    mfu: float | None = None,
    pricing: str = "rental",
    progress: Any = None,
    max_rows: int | None = None,
    ratios: bool = False,
) -> tuple[Any, int]:
    """A sweep over a grid of inputs (``vary``: ``PATH=START:STOP:STEP`` or ``PATH=V1,V2``, with
    ``hardware=...``) and the number of rows it will yield. The first value is an iterator of
    column chunks (dicts of column -> numpy array); its ``results`` are the estimates searched,
    its ``notes`` warnings on the draws of ``samples``.

    ``metrics``: ``headline``, ``all`` or a comma list (``intelligence_per_dollar.solved_tasks_per_kusd,
    rl.usd_per_step``). ``ratios``: each numeric metric's ratio to the first system's at the same
    point too (``<metric>.ratio``; with ``samples``, the percentiles of the ratio draw by draw).
    Every check and every search runs here, before the first row: ``progress(done, total)`` is
    called after each search; ``max_rows`` refuses a larger grid.
    """
    from .engine import sweep as sw
    from .engine.pricing import check_pricing

    vary = _names("vary", vary)
    if isinstance(metrics, list | tuple):  # a list of metric names is the comma list
        metrics = ",".join(_names("metrics", metrics))
    a = check_arguments(sweep, {k: v for k, v in locals().items() if k not in ("vary", "progress")})
    workload, samples, seed, max_rows = a["workload"], a["samples"], a["seed"], a["max_rows"]
    if max_rows is not None and max_rows < 1:  # was taken, then "at most -1" rows (a library review)
        raise InputError(f"`max_rows` must be a whole number >= 1, got {max_rows!r}")
    if progress is not None and not callable(progress):
        raise InputError(f"`progress` is a function progress(done, total), got {progress!r}")
    cat, name, w, origin = resolve_with_sources(cat, workload)
    cat = with_nested_workloads(cat, w)
    pricing = a["pricing"]
    check_pricing(pricing)
    axes = sw.parse_axes(cat, vary)
    plan = sw.make_plan(
        cat, axes, w, name, origin, pricing=pricing, mfu=mfu, samples=samples, seed=seed, ratios=ratios
    )
    plan.metrics = sw.select_metrics(w.kind, metrics)
    total = len(plan.hardware) * plan.rows
    if max_rows is not None and total > max_rows:
        raise InputError(f"the sweep has {total:,} rows; this output holds at most {max_rows:,}")
    run = sw.prepare(cat, plan, progress)
    # the inputs sheet's rows cite the workload's field_sources, as compare's do (a diff review),
    # but for the fields an axis varies (a row's value there is the axis's)
    varied = frozenset(ax.path for ax in axes)
    run.inputs = [
        r.model_copy(update={"assumptions": _cited(r.assumptions, cat, w, origin, varied)})
        for r in run.inputs
    ]
    return run, total
