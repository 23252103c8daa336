"""Workloads by name or from a file: catalog entries, YAML files and stdin, with ``--set workload.*``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ipd_cli.errors import InputError
from ipd_cli.files import shown_name

from . import overrides
from .catalog import Catalog, check_scenario_refs, check_sources
from .layers import read_workload_doc
from .schema import (
    STAGE_WORKLOADS,
    Scenario,
    ScenarioPostTraining,
    ScenarioPretraining,
    Source,
    Workload,
)
from .validation import (
    USER_SOURCE,
    cites_source,
    fill_user_workload_sources,
    user_source_entry,
    validate_workload,
)


def read_stdin() -> str:
    """Standard input as text, bounded like a file and decoded strictly (one-line errors)."""
    from ipd_cli.files import read_stdin_bounded

    from .yamlio import MAX_FILE_BYTES

    data = read_stdin_bounded(MAX_FILE_BYTES)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("<stdin>: not UTF-8 text; give UTF-8 YAML") from None


def refuse_workload_sets(cat: Catalog, command: str, params: list[str]) -> None:
    """Commands without a workload must not silently drop ``sets`` workload.* overrides; ``params``
    name the parameters that give those values instead (the CLI shows them as its flags; none:
    the command reads no workload value at all)."""
    for o in cat.overrides:
        if o.path.startswith(overrides.WORKLOAD + ".") or o.path == overrides.WORKLOAD:
            if not params:  # validate, calibrate, the listings: nothing to give it instead
                raise InputError(
                    f"`sets` {o.text}: {command} reads no workload, so it would change nothing; drop "
                    "it (workload.* sets apply to compare, rl, sweep, explain and workloads show)"
                )
            use = ", ".join(f"`{p}`" for p in params)
            raise InputError(f"`sets` {o.text}: {command} has no workload; use {use}")


def resolve_workload(
    cat: Catalog, ref: str, given: dict[str, Any] | None = None
) -> tuple[str, Workload, str]:
    """A workload by catalog name, or from a YAML file path (``-``: stdin): (name, workload, origin)
    (:func:`resolve_with_sources` also gives the catalog with the file's own ``sources:``)."""
    return resolve_with_sources(cat, ref, given)[1:]


def resolve_with_sources(
    cat: Catalog, ref: str, given: dict[str, Any] | None = None
) -> tuple[Catalog, str, Workload, str]:
    """(catalog, name, workload, origin): a workload by catalog name, or from a YAML file path
    (``-``: stdin), and the catalog with the sources a file defines (so its values' rows carry
    their titles: a file's own source had its id and nothing else on explain's rows).

    ``given``: fields the command line sets (``--gpus``, ``--model``); they override the file and
    are applied, with ``--set workload.FIELD=VALUE``, before the workload is validated, so a file
    need not repeat what the command gives.
    """
    named = cat.canonical("workloads", ref)  # an alias, or the name in another case
    if ref not in cat.workloads and named in cat.workloads and not Path(ref).exists():
        ref = named
    if ref in cat.workloads:
        name, body, origin = (
            ref,
            # the fields its file set (a default left out stays a default: scenario_assumptions)
            cat.workloads[ref].model_dump(exclude_none=True, exclude_unset=True),
            cat.origin("workloads", ref),
        )
        extra_sources: dict = {}
    elif ref == "-" or ref.endswith((".yaml", ".yml")) or Path(ref).exists():
        origin = shown_name(ref)
        body, extra_sources = _user_file(cat, ref, origin)
        name = "stdin" if ref == "-" else Path(ref).stem
    else:
        return cat, ref, cat.workload(ref), ""
    if given:  # a value the command line gives is not the file's source's
        body = _uncite({**body, **given}, set(given))
    workload_sets = [o for o in cat.overrides if o.path.startswith(overrides.WORKLOAD + ".")]
    own = [o for o in workload_sets if _nested_stage(body, o) is None]
    if own:
        kind = body.get("kind", "pretrain")
        if not isinstance(kind, str) or kind not in overrides.WORKLOAD_KINDS:  # the file's own kind,
            validate_workload(body, f"{origin}: workload")  # refused naming the file (a review: [1])
        site = f"{overrides.WORKLOAD}.site_mw"
        if body.get("kind") != "scenario" and any(o.path == site for o in own):  # compare's --site-mw
            raise InputError(
                f"`site_mw` applies to scenarios (serving traffic on a site's power); '{name}' is a "
                f"{body.get('kind') or 'pretrain'} workload"
            )
        body = _uncite(apply_own_sets(body, own), _set_fields(own, overrides.WORKLOAD))
        origin += " + --set"
    workload = validate_workload(body, f"{origin}: workload")
    check_plan(workload, f"{origin}: workload")
    if workload.kind == "scenario":
        check_scenario_refs(cat, workload, f"{origin}:")
    if workload.source not in cat.sources and workload.source not in extra_sources:
        raise InputError(f"{origin}: source: unknown source id '{workload.source}'; add it under sources:")
    try:
        cat.model(workload.model)
    except InputError as e:
        raise InputError(f"{origin}: workload.model: {e}") from None
    # validated when the file was read (layers.read_workload_doc)
    defined = {
        str(sid): Source.model_validate(src)
        for sid, src in extra_sources.items()
        if str(sid) not in cat.sources
    }
    if defined:
        cat = dataclasses.replace(cat, sources={**cat.sources, **defined})
    return cat, name, workload, origin


def _uncite(body: Any, fields: set[str]) -> Any:
    """``body`` without the ``field_sources`` entries of ``fields``: their values are the command
    line's now (``ipd workloads show`` wrote NVIDIA's source beside a set 100 tokens/s)."""
    cited = body.get("field_sources") if isinstance(body, dict) else None
    if not isinstance(cited, dict):
        return body
    return {**body, "field_sources": {k: v for k, v in cited.items() if k not in fields}}


def _set_fields(sets: list, prefix: str) -> set[str]:
    """The field paths (under ``prefix``) that ``sets`` items give."""
    return {o.path.removesuffix(".value").removeprefix(prefix + ".") for o in sets}


def _user_file(cat: Catalog, ref: str, origin: str) -> tuple[Any, dict]:
    """A workload file (``-``: stdin) read: its body, with a description and the `user` source
    filled where it gives none, and the sources it defines."""
    body = read_workload_doc(Path(ref), text=read_stdin() if ref == "-" else None, label=origin)
    extra_sources = body.pop("sources", {}) or {}
    for sid, src in extra_sources.items():  # a catalog source retitled would re-cite its values
        known = cat.sources.get(str(sid))
        if known is not None and isinstance(src, dict) and src.get("title") != known.title:
            raise InputError(
                f"{origin}: sources.{sid} is already a catalog source ('{known.title}'); "
                "give yours another id"
            )
    if isinstance(body, dict):  # nor a description: the file says what it is
        body.setdefault("description", f"what-if workload from {origin}")
    # a what-if file without sources: its path is its origin; one may also cite 'user' itself
    # (README), whether or not it leaves a value unsourced (a scenario author's review)
    if fill_user_workload_sources(body) or cites_source(body, USER_SOURCE):
        extra_sources.setdefault(USER_SOURCE, user_source_entry())
    _check_file_sources(body, {**cat.sources, **extra_sources}, origin)
    return body, extra_sources


# a scenario's RL schedule is a yearly budget or a number of refreshes a year, not both: a --set of
# one replaces the other the file gives (frontier-agentic runs 12 refreshes; --set
# workload.post_training.budget_usd_per_year=2e8 runs what the budget buys instead)
RL_SCHEDULES = ("budget_usd_per_year", "refreshes_per_year")


def apply_own_sets(body: dict, own: list) -> dict:
    """``body`` with the workload's own ``--set`` fields applied (a scenario stage's fields refused
    where they belong to the workload it runs; a set RL schedule replacing the file's other one)."""
    _refuse_nested_fields(body, own)
    body = _switch_rl_schedule(body, {o.path for o in own})
    overrides.apply_workload(body, own)
    return body


def _switch_rl_schedule(body: dict, paths: set[str]) -> dict:
    """``body`` without the RL schedule field that a --set of the other one replaces."""
    stage = body.get("post_training")
    if not isinstance(stage, dict):
        return body
    given = {k for k in RL_SCHEDULES if f"{overrides.WORKLOAD}.post_training.{k}" in paths}
    if len(given) != 1:
        return body
    (other,) = set(RL_SCHEDULES) - given
    return {**body, "post_training": {k: v for k, v in stage.items() if k != other}}


def _check_file_sources(body: dict, sources: dict, origin: str) -> None:
    """Each sourced value of a workload or scenario file cites a source of the catalog or of the
    file's own ``sources:`` (as catalog files must); the workload's own ``source`` is checked
    once it is validated. ``{value: x}`` without a source is cited as 'user'."""
    if not isinstance(body, dict):
        return
    try:
        check_sources({k: v for k, v in body.items() if k != "source"}, sources, f"{origin}: workload")
    except InputError as e:
        fix = "define it under the file's sources:, or drop the source (the value is then cited as"
        sep = " " if str(e).endswith("?") else "; "
        raise InputError(f"{e}{sep}{fix} '{USER_SOURCE}')") from None


# the scenario's own model of each such stage (``Scenario.pretraining``, ``Scenario.post_training``)
STAGES: dict[str, type[ScenarioPretraining | ScenarioPostTraining]] = {
    "pretraining": ScenarioPretraining,
    "post_training": ScenarioPostTraining,
}


def _nested_stage(body: dict, o: overrides.Override) -> str | None:
    """The stage whose workload ``workload.<stage>.<field>`` reaches (a field the scenario's own
    stage does not have), or None for a field of the scenario itself."""
    keys = o.path.split(".")
    if body.get("kind") != "scenario" or len(keys) < 3 or keys[1] not in STAGE_WORKLOADS:
        return None
    return None if keys[2] in STAGES[keys[1]].model_fields else keys[1]


def _refuse_nested_fields(body: dict, sets: list[overrides.Override]) -> None:
    """``workload.tokens`` on a scenario: say which path reaches the field."""
    if body.get("kind") != "scenario":
        return
    for o in sets:
        key = o.path.split(".")[1]
        if key in Scenario.model_fields:
            continue
        stages = [stage for stage, cls in STAGE_WORKLOADS.items() if key in cls.model_fields]
        if stages:
            paths = " or ".join(f"workload.{stage}.{key}" for stage in stages)
            raise InputError(f"`sets` {o.text}: a scenario has no {key} of its own; use {paths}")


def with_nested_workloads(cat: Catalog, scenario: Workload) -> Catalog:
    """The catalog with a scenario's own workloads changed by ``--set workload.pretraining.<field>`` and
    ``--set workload.post_training.<field>`` (``workload.pretraining.tokens=2e14`` reaches the pretrain
    workload the scenario runs); the catalog itself when there are none."""
    if scenario.kind != "scenario":
        return cat
    body = {"kind": "scenario"}
    by_stage: dict[str, list[overrides.Override]] = {}
    for o in cat.overrides:
        if o.path.startswith(overrides.WORKLOAD + "."):
            stage = _nested_stage(body, o)
            if stage is not None and o.path.split(".")[2] == "model":
                raise InputError(
                    f"`sets` {o.text}: every stage of a scenario runs the scenario's model; "
                    f"set workload.model instead"
                )
            if stage is not None:
                by_stage.setdefault(stage, []).append(o)
    if not by_stage:
        return cat
    workloads, origins = dict(cat.workloads), dict(cat.origins)
    for stage, sets in by_stage.items():
        ref = getattr(scenario, stage).workload if getattr(scenario, stage) is not None else None
        if ref is None:
            raise InputError(f"`sets` {sets[0].text}: this scenario runs no {stage} workload")
        entry = cat.workloads[ref].model_dump(exclude_none=True, exclude_unset=True)
        overrides.apply_workload(entry, sets, f"{overrides.WORKLOAD}.{stage}")
        entry = _uncite(entry, _set_fields(sets, f"{overrides.WORKLOAD}.{stage}"))
        origin = f"{cat.origin('workloads', ref)} + --set"
        workloads[ref] = validate_workload(entry, f"{origin}: workload.{stage}")
        check_plan(workloads[ref], f"{origin}: workload.{stage}")
        cat.model(workloads[ref].model)
        origins[("workloads", ref)] = origin
    return dataclasses.replace(cat, workloads=workloads, origins=origins)


def field_citations(cat: Catalog, w: Workload, origin: str) -> dict[str, tuple[str, Any]]:
    """The ``workload.*`` paths a workload's ``field_sources`` cite -> (the origin its rows carry,
    the :class:`FieldSource`); a scenario's also reach the fields of the workloads its stages run
    (``workload.pretraining.tokens`` from pretrain-10t-moe's ``tokens``), for rows of that file."""
    out = {f"{overrides.WORKLOAD}.{k}": (origin, v) for k, v in w.field_sources.items()}
    if w.kind == "scenario":
        for stage in STAGE_WORKLOADS:
            block = getattr(w, stage)
            ref = getattr(block, "workload", None)
            if ref is None or ref not in cat.workloads:
                continue
            where = cat.origin("workloads", ref)
            for k, v in cat.workloads[ref].field_sources.items():
                out.setdefault(f"{overrides.WORKLOAD}.{stage}.{k}", (where, v))
    return out


def check_plan(w: Workload, where: str) -> None:
    """A pretrain workload's ``plan`` pins parse, or the error names the file and field (an input
    review: `plan: tp=0` said only "plan item 'tp=0': out of range")."""
    plan = getattr(w, "plan", None)
    if plan is None:
        return
    from ipd_cli.engine.trainplan import parse_plan

    try:
        parse_plan(plan)
    except InputError as e:
        raise InputError(f"{where}.plan: {e}") from None


def check_mfu_scope(mfu: float | None, kind: str, name: str) -> None:
    """A pinned ``mfu`` is a pre-training plan's: refused for any other workload (an RL or serving
    workload would otherwise run with it silently unread)."""
    if mfu is None or kind == "pretrain":
        return
    why = {
        "scenario": "a scenario's pre-training MFU comes from its plan",
        "rl": "an RL trainer's speed comes from its plan (`rl.trainer_efficiency`)",
    }.get(kind, "this workload trains nothing")
    raise InputError(f"`mfu` applies to pretrain workloads, not '{name}' ({kind}): {why}")
