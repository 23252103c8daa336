"""Validating catalog and workload data with pydantic; errors become one line naming the
file, the dotted field, what is wrong and the value given."""

from __future__ import annotations

import re
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from ipd_cli.errors import InputError, did_you_mean

from .schema import STAGE_WORKLOADS, PretrainWorkload, RlWorkload, Scenario, System, Workload

# the source of a value or entry a user file gives without one (its origin names the file)
USER_SOURCE = "user"


def user_source_entry() -> dict[str, str]:
    import datetime as dt

    return {
        "title": "a user file that names no source (the input's origin is the file)",
        "date": dt.date.today().isoformat(),
    }


# the tagged union's members by their ``kind`` tag (schema.Workload)
WORKLOAD_KINDS: dict[str, type[PretrainWorkload | RlWorkload | Scenario]] = {
    cls.model_fields["kind"].default: cls for cls in typing.get_args(typing.get_args(Workload)[0])
}


def _first(errors: list) -> Any:
    """The error a message names: an unknown key first (a misspelt key also makes its right
    spelling 'missing'), else the first."""
    return next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])


def validation_error(
    where: str, err: ValidationError, cls: type[BaseModel] | None = None, data: Any = None
) -> InputError:
    """The one-line :class:`InputError` of :func:`format_validation_error`, with ``reason``: the
    validator's own sentence where the first error is one (a sweep names the path itself)."""
    error = InputError(format_validation_error(where, err, cls, data))
    first = _first(err.errors())
    error.reason = _message(first) if first["type"] == "value_error" else None
    return error


def _message(error: Any) -> str:
    """An error's message: a validator's own sentence, as written (pydantic prefixes 'Value error, ')."""
    return error["msg"].removeprefix("Value error, ")


def _dotted(error: Any, data: Any = None) -> str:
    """An error's field path, dotted, without pydantic's union tags; an item of a list in ``data``
    (what was validated) by its label or name where it has one (`prices.reserved`, the path --set
    takes; the input review found `prices.0`)."""
    parts: list[Any] = []
    node = data
    loc = _raw_loc(error)
    for i, p in enumerate(loc):
        if isinstance(p, int) and isinstance(node, list) and 0 <= p < len(node):
            items, node = node, node[p]
            parts.append(_item_name(items, p, loc[i + 1] if i + 1 < len(loc) else None))
        else:
            parts.append(p)
            node = node.get(p) if isinstance(node, dict) else None
    return ".".join(str(p) for p in parts)


def _raw_loc(error: Any) -> tuple:
    """An error's location without pydantic's union tags."""
    return tuple(p for p in error["loc"] if not _union_tag(p))


def _item_name(items: list, i: int, field: Any) -> Any:
    """A list item's name in a path: its label or name where that has no dot, is the item's alone in
    the list, and not the field in error (a review: two items labelled alike, or a bad label, named
    the item by what was wrong); else its index."""
    node = items[i]
    for key in ("label", "name"):
        value = node.get(key) if isinstance(node, dict) else None
        if not isinstance(value, str) or not value or "." in value or key == field:
            continue
        if sum(isinstance(o, dict) and o.get(key) == value for o in items) == 1:
            return value
    return i


def _union_tag(part: Any) -> bool:
    """A location part pydantic adds for a union's member (``literal['fp4','fp8','bf16']``,
    ``function-after[...]``, ``int``), not a field: an input review found them in messages."""
    return isinstance(part, str) and ("[" in part or part in ("int", "float", "str", "bool", "none"))


def format_validation_error(
    where: str, err: ValidationError, cls: type[BaseModel] | None = None, data: Any = None
) -> str:
    """One line: file, dotted field path, what is wrong, the offending value.

    An unknown key is reported first (a misspelt key also makes its right spelling
    'missing'), with a did-you-mean from the fields of the model it sits in.
    """
    errors = err.errors()
    first = _first(errors)
    loc = _dotted(first, data)
    path = f"{where}.{loc}" if loc else where
    msg = _message(first)
    if first["type"] == "literal_error":  # a union of literals: one error per member, one list here
        same = [e for e in errors if e["type"] == "literal_error" and _raw_loc(e) == _raw_loc(first)]
        split = (re.split(r", | or ", e.get("ctx", {}).get("expected", "")) for e in same)
        choices = list(dict.fromkeys(c for part in split for c in part))
        if len(same) > 1 and all(choices):
            msg = f"Input should be {', '.join(choices[:-1])} or {choices[-1]}"
            errors = [e for e in errors if e not in same[1:]]
    if first["type"] == "model_type":  # pydantic names the model class: say what is expected
        msg = "expected a mapping of its fields"
    hint = ""
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
        fields = fields_at(cls, first["loc"][:-1]) if cls else []
        hint = did_you_mean(first["loc"][-1], fields) if fields else ""
        if cls is Scenario and len(first["loc"]) == 2:
            hint = _stage_field_hint(first["loc"], first.get("input")) or hint
    elif first["type"] == "missing" and cls is Scenario and tuple(first["loc"]) in SCENARIO_STAGES:
        msg = f"missing: {SCENARIO_STAGES[tuple(first['loc'])]}"
    elif (
        cls is Scenario
        and first["type"] == "greater_than"
        and tuple(first["loc"])[:1] == ("post_training",)
        and first.get("input") == 0
    ):
        # a procurement review: no --set turned RL off, and the error did not say how
        hint = (
            "; a scenario without RL post-training leaves out its `post_training` block (`ipd workloads "
            "show NAME -f yaml > mine.yaml`, delete the block, then `--scenario mine.yaml`)"
        )
    elif first["type"] == "missing" and cls is System and tuple(first["loc"]) == ("capex_usd",):
        # a fresh-eyes review: an analyst with a rental quote alone was told "Field required"
        msg += (
            " (the system's purchase price, which owning costs read, `pricing` tco; rental prices do "
            "not: with no quote, give your best figure marked `estimate: true`)"
        )
    value = first.get("input")
    expected = first.get("ctx", {}).get("class_name", "") if first["type"] == "model_type" else ""
    if expected.startswith("Sourced") and not isinstance(value, dict | list):  # success_rate: 0.7
        msg = _sourced_form(value, expected)
    shown = "" if isinstance(value, dict | list) or value is None else f" (got {_short(value)})"
    return f"{path}: {msg}{shown}{hint}{_tail(errors, first, data)}"


# the other missing fields a message names before it counts the rest
MISSING_NAMED = 6


def _tail(errors: list, first: Any, data: Any) -> str:
    """What the message leaves out: the other fields missing where every error is a missing field
    (a fresh-eyes review: a new RL workload file was told "prompts_per_step: Field required [+4
    more errors]", one field a run), else how many errors more."""
    rest = [e for e in errors if e is not first]
    if rest and all(e["type"] == "missing" for e in errors):
        names = [_dotted(e, data) for e in rest]
        over = len(names) - MISSING_NAMED
        more = f" and {over} more" if over > 0 else ""
        return f" (also missing: {', '.join(names[:MISSING_NAMED])}{more})"
    return f" [+{len(rest)} more error{'s' if len(rest) > 1 else ''}]" if rest else ""


# what a scenario file missing one of its stages is told to write
SCENARIO_STAGES = {
    ("pretraining",): "every scenario says how its model is pre-trained: `pretraining: {open_weights: "
    "true}` (not paid here), `{workload: NAME}` (a pretrain workload computed on each system) or "
    "`{cost_usd: N}`",
    ("serving",): "every scenario serves tasks: `serving: {tasks_per_day: N, input_tokens_per_request: N, "
    "output_tokens_per_request: N}`",
    ("task_success",): "every scenario counts tasks solved: `task_success: {success_rate: {value: P}}`, a "
    "`learning_curve` or `step_reliability` with `steps_per_workflow`",
}


def _stage_field_hint(loc: Any, value: Any) -> str:
    """For a scenario stage's unknown field that belongs to the workload the stage runs (an RL
    workload's ``gpus`` under ``post_training``): where it goes instead."""
    stage, name = str(loc[0]), str(loc[1])
    kind = STAGE_WORKLOADS.get(stage)
    if kind is None or name not in kind.model_fields or name in ("kind", "model", "description", "source"):
        return ""
    what = "RL" if kind is RlWorkload else "pretrain"
    shown = _short(value) if value is not None and not isinstance(value, dict | list) else "..."
    return (
        f"; `{name}` is a field of the {what} workload the stage runs: set it in that workload (a catalog "
        f"directory given with `extra_dirs`), or with `sets` workload.{stage}.{name}={shown}"
    )


def _sourced_form(value: Any, class_name: str) -> str:
    """How to write a sourced value given bare: a mapping with its value and its source."""
    flag = class_name == "SourcedFlag"
    ok = isinstance(value, bool) if flag else isinstance(value, int | float) and not isinstance(value, bool)
    shown = str(value).lower() if flag and ok else repr(value) if ok else "true" if flag else "NUMBER"
    return (
        f"a sourced value: write {{value: {shown}, source: ID}} with ID from a sources: block (a user "
        f"file may leave the source out, {{value: {shown}}}, and is then cited as '{USER_SOURCE}')"
    )


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fields_at(cls: Any, loc: tuple) -> list[str]:
    """Field names of the model found by following ``loc`` from ``cls`` (empty when unknown)."""

    tp: Any = cls
    for part in (*loc, None):
        while typing.get_origin(tp) in (typing.Union, types.UnionType):
            tp = next((a for a in typing.get_args(tp) if a is not type(None)), None)
        if part is None:
            break
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field_info = tp.model_fields.get(str(part))
            tp = field_info.annotation if field_info else None
        elif typing.get_origin(tp) in (dict, list, tuple):
            args = typing.get_args(tp)
            tp = args[-1] if typing.get_origin(tp) is dict else (args[0] if args else None)
        else:
            return []
    return list(tp.model_fields) if isinstance(tp, type) and issubclass(tp, BaseModel) else []


def validate_entry(model_cls: type[BaseModel], value: Any, where: str) -> Any:
    try:
        return model_cls.model_validate(value)
    except ValidationError as e:
        raise validation_error(where, e, model_cls, value) from None


def validate_workload(body: dict[str, Any], where: str) -> Workload:
    kind = body.get("kind", DEFAULT_KIND)
    if "kind" not in body:
        _check_default_kind(body, where)
    cls = WORKLOAD_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise InputError(
            f"{where}.kind: unknown workload kind '{kind}'{did_you_mean(str(kind), WORKLOAD_KINDS)}"
        )
    return validate_entry(cls, body, where)


DEFAULT_KIND = "pretrain"  # a workload file without `kind` (the first kind there was)


def _check_default_kind(body: dict[str, Any], where: str) -> None:
    """A file without ``kind`` is a pretrain workload; one whose fields are another kind's (an RL
    workload with its ``kind`` line dropped) is told to add it, rather than given a list of the
    fields a pretrain workload lacks."""
    fields = set(body)
    own = set(WORKLOAD_KINDS[DEFAULT_KIND].model_fields)
    others = set().union(*(cls.model_fields for k, cls in WORKLOAD_KINDS.items() if k != DEFAULT_KIND))
    if fields <= own or fields & (own - others):  # a field only a pretrain workload has: it is one
        return
    cover = {k: len(fields & set(cls.model_fields)) for k, cls in WORKLOAD_KINDS.items()}
    best = max(cover, key=lambda k: (cover[k], k == DEFAULT_KIND))
    if best != DEFAULT_KIND:
        raise InputError(
            f"{where}.kind: missing (a file without it is read as kind: {DEFAULT_KIND}); its fields are "
            f"those of kind: {best}: add `kind: {best}`"
        )


def cites_source(node: Any, sid: str) -> bool:
    """Whether a parsed file (or a part of one) names source ``sid`` anywhere."""
    if isinstance(node, dict):
        return node.get("source") == sid or any(cites_source(v, sid) for v in node.values())
    return isinstance(node, list) and any(cites_source(v, sid) for v in node)


def fill_user_sources(data: Any, cls: Any) -> bool:
    """Give every entry of a user file that has no ``source`` (a workload, a model, a
    ``{value: ...}``) the source ``user``: a what-if file written in a hurry is accepted, and its
    inputs say where they came from. The built-in catalog is never filled: it must cite sources.
    Returns whether anything was filled."""
    fields = getattr(cls, "model_fields", None)
    if not isinstance(data, dict) or fields is None:
        return False
    filled = False
    if "source" in fields and fields["source"].is_required() and "source" not in data:
        data["source"] = USER_SOURCE
        filled = True
    for name, info in fields.items():
        filled |= fill_annotated(data.get(name), info.annotation)
    return filled


def fill_annotated(value: Any, ann: Any) -> bool:
    """:func:`fill_user_sources` for a value of a field's type (a model, a dict or list of them)."""

    union = typing.get_origin(ann) in (typing.Union, types.UnionType)
    filled = False
    for arg in typing.get_args(ann) if union else (ann,):
        origin = typing.get_origin(arg)
        if origin is dict and isinstance(value, dict):
            filled |= any([fill_annotated(v, typing.get_args(arg)[-1]) for v in value.values()])
        elif origin is list and isinstance(value, list):
            filled |= any([fill_annotated(v, typing.get_args(arg)[0]) for v in value])
        elif hasattr(arg, "model_fields"):
            filled |= fill_user_sources(value, arg)
    return filled


def fill_user_workload_sources(body: dict[str, Any]) -> bool:
    """:func:`fill_user_sources` for a workload file, by its kind."""
    kind = body.get("kind", DEFAULT_KIND)
    cls = WORKLOAD_KINDS.get(kind) if isinstance(kind, str) else None
    return fill_user_sources(body, cls) if cls else False
