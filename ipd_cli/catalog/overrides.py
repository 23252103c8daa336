"""``--set PATH=VALUE``: override any catalog or workload field by a dotted path.

Paths follow the YAML layout: ``economics.electricity_usd_per_kwh=0.1``,
``systems.vera-rubin.power_kw=200`` (aliases work), ``systems.h100-sxm.prices.reserved=2.1``
(a price point by its label), ``accelerators.rubin.fp4_dense_tflops=30000``,
``models.moe-10t.active_params=1e12``, ``efficiency.training_share=0.6``,
``workload.tokens=2e14`` (a pretrain workload), ``workload.pretraining.tokens=2e14`` (the
pretrain workload a scenario runs; ``workload.post_training.*`` reaches its RL workload).
Setting a sourced value replaces its number and points its source at ``cli-set``; the value is
then validated like any catalog value.

Overrides are applied to an in-memory copy of a validated catalog
(:func:`apply_to_catalog`, :meth:`Catalog.with_overrides`): only the entries or sections they
touch are dumped, changed and validated again, so a sweep or a calibration never re-reads YAML.
``workload.*`` paths are kept on the catalog and applied when a workload is resolved.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ipd_cli.errors import InputError, did_you_mean, suggestions

from .layers import ENTRY_SECTIONS, FOLDED, KEYED, MERGED_SECTIONS, keep_origins
from .plausibility import SHAPE_FIELDS, economics_warnings, override_warnings, power_warnings, shape_warnings
from .schema import STAGE_WORKLOADS, Source, Sourced
from .validation import WORKLOAD_KINDS, validate_entry, validation_error

if TYPE_CHECKING:
    from .catalog import Catalog

CLI_SOURCE = "cli-set"
WORKLOAD = "workload"


@dataclass(frozen=True)
class Override:
    path: str
    value: Any
    text: str


def parse(items: list[str]) -> list[Override]:
    """Parse ``PATH=VALUE`` strings; VALUE is read as a YAML scalar (number, bool, string, list)."""
    from .yamlio import read_yaml

    out = []
    for item in items:
        path, sep, text = item.partition("=")
        path = path.strip()
        if not sep or not path or not text.strip():
            raise InputError(f"`sets` {item!r}: expected PATH=VALUE, e.g. economics.pue=1.2")
        value = read_yaml(f"`sets` {path}", text=text.strip(), keep=False)
        if isinstance(value, dict):
            raise InputError(f"`sets` {path}: give a single value, not a mapping")
        out.append(Override(path, value, item))
    return out


def entry_name(names: dict[str, str], section: str, keys: list[str]) -> tuple[str, list[str]]:
    """The canonical entry a path names and the field keys after it.

    ``names`` maps every name and alias of the section to its canonical name. Names may hold
    dots (llama-3.1-8b): the longest name that leaves at least one field wins. Systems', models'
    and workloads' are read in any case, as on the command line (`systems.H100.power_kw`).
    """
    # two names differing only in case are refused (catalog._aliases), so the fold is one entry
    folded = {str(n).lower(): e for n, e in names.items()} if section in FOLDED else {}

    def entry(candidate: str) -> str | None:
        return names.get(candidate) or folded.get(candidate.lower())

    for end in range(len(keys) - 1, 1, -1):
        found = entry(".".join(keys[1:end]))
        if found is not None:
            return found, keys[end:]
    if (found := entry(keys[1])) is not None:
        return found, keys[2:]
    # no entry: the name the user meant may hold dots too (`lama-3.1-8b`, not `lama-3`): the longest
    # prefix with a close spelling, else the first key (`systems.qqq.capex_usd.value`: 'qqq')
    prefixes = [".".join(keys[1:end]) for end in range(len(keys) - 1, 1, -1)]
    meant = next((p for p in prefixes if suggestions(p, names)), keys[1])
    raise InputError(
        f"`sets` {section}.{meant}: unknown {section[:-1]} '{meant}'{did_you_mean(meant, names)}"
    )


def canonical_path(cat: Catalog, path: str) -> str:
    """``path`` with its entry named canonically (an alias, `vera-rubin`, as `vera-rubin-nvl72`);
    as given where it names no entry."""
    keys = path.split(".")
    if keys[0] not in ENTRY_SECTIONS or len(keys) < 3:
        return path
    try:
        name, rest = entry_name(cat.names(keys[0]), keys[0], keys)
    except InputError:
        return path
    return ".".join([keys[0], name, *rest])


def _fields(cls: Any) -> list[str]:
    return list(getattr(cls, "model_fields", {}))


def _reported_as(cls: Any, name: str) -> str | None:
    """The input field a result reports under another name (``reported_as`` in its schema)."""
    for field, info in getattr(cls, "model_fields", {}).items():
        extra = getattr(info, "json_schema_extra", None)  # a table's keys carry no field info
        if isinstance(extra, dict) and extra.get("reported_as") == name:
            return field
    return None


def joined_keys(table: dict, keys: list[str]) -> int:
    """How many of a path's ``keys`` name one key of ``table`` joined with their dots (a key holding
    dots: a stack's release, 1.1.0rc2): the longest run the table holds, else 1."""
    return next((j for j in range(len(keys), 1, -1) if ".".join(keys[:j]) in table), 1)


def _assign(node: Any, keys: list[str], value: Any, where: str, cls: Any = None) -> None:
    name, rest = keys[0], keys[1:]
    if isinstance(node, list):  # price points: address them by label
        labels = {p.get("label"): p for p in node if isinstance(p, dict)}
        if not labels:
            raise InputError(f"`sets` {where}: a list; set it whole, e.g. {where}=[a, b]")
        if name not in labels:
            raise InputError(f"`sets` {where}.{name}: no price labelled '{name}'{did_you_mean(name, labels)}")
        target = labels[name]
        if rest:
            _assign(target, rest, value, f"{where}.{name}")
        else:
            _set_leaf(target, "usd_per_gpu_hour", value)
        return
    if not isinstance(node, dict):
        raise InputError(f"`sets` {where}: cannot go below a plain value")
    # tables keyed by a number (draft depth) take the number
    key: str | int = int(name) if name not in node and name.isdigit() and int(name) in node else name
    if key not in node and (joined := joined_keys(node, keys)) > 1:
        key, rest = ".".join(keys[:joined]), keys[joined:]
    choices = set(node) | set(_fields(cls))
    if key not in choices:
        field = _reported_as(cls, str(key))
        hint = (
            f"; '{key}' is what the result reports, the input is '{field}'"
            if field
            else did_you_mean(str(key), map(str, choices))
        )
        raise InputError(f"`sets` {where}.{key}: unknown field{hint}")
    if rest == ["value"] and isinstance(node.get(key), dict) and "value" in node[key]:
        _set_leaf(node, key, value)  # X.value=V is X=V: source cli-set, the catalog's range dropped
        return
    table = _field_class(cls, key)
    if rest:
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        _assign(child, rest, value, f"{where}.{key}", table)
    elif isinstance(table, _Table) and table.keys:
        example = f"{where}.{key}.{table.keys[0]}=VALUE"
        raise InputError(f"`sets` {where}.{key}: one value per key; name one, e.g. {example}")
    elif node.get(key) is None and _sourced_field(cls, key):
        # an optional sourced value left out (borrowed) becomes this one
        node[key] = {"value": value, "source": CLI_SOURCE, "note": "set on the command line"}
    else:
        _set_leaf(node, key, value)


class _Table:
    """A mapping to catalog models: of any names (``serving.stacks``), or of the precisions its
    keys are typed as (a stack profile's ``moe_compute_share`` or ``grouped_gemm_hbm_efficiency``,
    which may lack some: ``keys``)."""

    def __init__(self, item: Any, keys: tuple[str, ...] = ()) -> None:
        self.item = item
        self.keys = keys
        self.model_fields = dict.fromkeys(keys)


def _field_class(cls: Any, key: Any) -> Any:
    import typing

    if isinstance(cls, _Table):
        return cls.item
    field = getattr(cls, "model_fields", {}).get(key)
    if field is None:
        return None
    ann = field.annotation
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        # an optional table (``dict[...] | None``) is the table; an optional section
        # (``post_training: ScenarioPostTraining | None``) is its model: its fields are known though
        # the entry leaves some of them out (a scenario's yearly RL budget)
        args = typing.get_args(ann)
        models = [a for a in args if hasattr(a, "model_fields")]
        ann = next((a for a in args if typing.get_origin(a) is dict), models[0] if len(models) == 1 else ann)
    if typing.get_origin(ann) is dict:
        names, item = typing.get_args(ann)
        keys = typing.get_args(names) if typing.get_origin(names) is typing.Literal else ()
        return _Table(item, keys) if hasattr(item, "model_fields") else None
    return ann if hasattr(ann, "model_fields") else None


def _sourced_field(cls: Any, key: Any) -> bool:
    import typing

    from .schema import Sourced, SourcedFlag

    if isinstance(cls, _Table):  # a key the table's type allows, left out
        return key in cls.keys and cls.item in (Sourced, SourcedFlag)
    field = getattr(cls, "model_fields", {}).get(key)
    kinds = typing.get_args(field.annotation) if field is not None else ()
    return Sourced in kinds or SourcedFlag in kinds


def _set_leaf(node: dict, key: str | int, value: Any) -> None:
    current = node.get(key)
    if isinstance(current, dict) and "value" in current:
        node[key] = {
            **current,
            "value": value,
            "source": CLI_SOURCE,
            "note": f"set on the command line (was {current.get('value')})",
        }
        if "estimate" in current:  # (a sourced choice of text has no estimate flag: a code review)
            node[key]["estimate"] = False
        node[key].pop("range", None)
    else:
        node[key] = value


STAGES = ("pretraining", "post_training", "serving")  # a scenario's stages (schema.Scenario)


def apply_workload(body: dict, overrides: list[Override], prefix: str = WORKLOAD) -> None:
    """Apply ``workload.FIELD=VALUE`` overrides to a raw workload mapping (``prefix``: the path
    that names it, ``workload.pretraining`` for a scenario's pretrain workload)."""
    skip = len(prefix.split("."))
    for o in overrides:
        keys = o.path.split(".")[skip:]
        if not keys:
            raise InputError(f"`sets` {o.path}: name a workload field, e.g. workload.tokens=2e14")
        kind = body.get("kind", "pretrain")
        if keys == ["kind"]:  # horizon_years: unknown field, said a scenario
            if isinstance(o.value, str) and o.value.lower() == kind:
                continue  # its own kind, in any case (choices are read in any case)
            raise InputError(_kind_changed(prefix, kind, o.value))
        if kind != "scenario" and keys[0] in STAGES and keys[0] not in body:
            raise InputError(_stage_on_a_workload(prefix, keys, kind))
        cls = WORKLOAD_KINDS.get(kind)
        if cls is not None and keys[0] not in body and keys[0] not in cls.model_fields:
            other = [k for k, c in WORKLOAD_KINDS.items() if k != kind and keys[0] in c.model_fields]
            # another kind's field (a review: horizon_years on an RL workload: 'observation_tokens'?)
            if other:
                kinds = " and ".join(f"{k} workloads" for k in other)
                article = "an" if kind == "rl" else "a"
                raise InputError(
                    f"`sets` {prefix}.{keys[0]}: a field of {kinds}; this is {article} {kind} workload"
                )
        _assign(body, keys, o.value, prefix, cls)


def _kind_changed(prefix: str, kind: str, value: Any) -> str:
    """A set of a workload's ``kind`` to another: each kind has fields of its own, so a set cannot
    turn one into another; the workload of that kind is chosen instead."""
    what = "a scenario" if kind == "scenario" else f"{'an' if kind == 'rl' else 'a'} {kind} workload"
    head = f"`sets` {prefix}.kind={value}: a workload's kind cannot be set (this is {what}"
    if not isinstance(value, str) or value.lower() not in WORKLOAD_KINDS:  # [1] was a TypeError
        return f"{head}); the kinds are {', '.join(WORKLOAD_KINDS)}"
    value = value.lower()
    if prefix != WORKLOAD:  # a scenario stage runs a workload of its stage's kind (a review: it was
        stage = prefix.split(".")[1]  # told "give a scenario instead")
        return f"{head}, the kind its stage runs); name another with `sets` {WORKLOAD}.{stage}.workload=NAME"
    other = "an rl workload" if value == "rl" else f"a {value}" + ("" if value == "scenario" else " workload")
    return (
        f"{head}, and each kind has fields of its own); give {other} instead: one of the catalog's, "
        f"or a file with `kind: {value}`"
    )


def _stage_on_a_workload(prefix: str, keys: list[str], kind: str) -> str:
    """A scenario stage's path on a pretrain or RL workload (`workload.pretraining.tokens` suggested
    'precision'): the direct path where the stage is this kind's and the field is one of its own,
    else what the workload is (a code review: serving's fields are no pretrain workload's)."""
    stage = STAGE_WORKLOADS.get(keys[0])
    own = stage.model_fields["kind"].default if stage is not None else None
    head = f"`sets` {prefix}.{keys[0]}: '{keys[0]}' is a scenario's stage"
    if own == kind and len(keys) > 1 and keys[1] in WORKLOAD_KINDS[kind].model_fields:
        return f"{head}; this {kind} workload's fields are set directly: {prefix}.{'.'.join(keys[1:])}"
    return f"{head}, and this is a {kind} workload (a scenario file says `kind: scenario`)"


def _dump(entry: Any) -> dict:
    return entry.model_dump(mode="python")


def _with_field_as_data(section: Any, keys: list[str]) -> dict:
    """A merged section's fields as they are, the one a set changes (``keys``: its path in the
    section) as data, which the set is assigned into and which is validated again: the section's
    validators run as on the whole dump, and its other fields, instances of their own types, are
    taken as they are (pydantic does not validate a model instance again), where a dump validated
    every value of the section anew (``ipd calibrate``'s ~900 trials spent ~1.7 s there). In a
    table keyed by name (a serving stack), the named entry alone is data."""
    field = keys[0]
    body = {name: getattr(section, name) for name in type(section).model_fields}
    if field not in body:
        return body
    table = body[field]
    entry = keys[1] if len(keys) > 2 else None  # the entry's own field is set, not the entry whole
    if isinstance(table, dict) and entry in table and isinstance(table[entry], BaseModel):
        body[field] = {**table, entry: table[entry].model_dump(mode="python")}
    else:
        body[field] = section.model_dump(mode="python", include={field})[field]
    return body


def apply_to_catalog(cat: Catalog, items: list[str] | list[Override]) -> Catalog:
    """A copy of ``cat`` with the overrides applied and the touched entries validated again."""
    from .catalog import INHERITED_DEPTH, Inherited, finish

    parsed = [o if isinstance(o, Override) else parse([o])[0] for o in items]
    if not parsed:
        return cat
    entries: list[tuple[str, str, list[str]]] = []  # (section, name, fields) of each entry --set
    given: list[str] = []  # and its text
    sections: dict[str, Any] = {name: dict(getattr(cat, name)) for name in ENTRY_SECTIONS}
    merged: dict[str, Any] = {name: getattr(cat, name) for name in MERGED_SECTIONS}
    origins = dict(cat.origins)
    sections["sources"][CLI_SOURCE] = Source(
        title="value given with --set on the command line", date=dt.date.today().isoformat()
    )
    origins[("sources", CLI_SOURCE)] = "command line"
    touched = {"sources"}  # the sections the overrides change (a --set source is added to sources)
    set_fields: set[tuple[str, str]] = set()  # and the fields of merged sections they change
    slips: list[str] = []  # unit-slip warnings of economics values
    bodies: dict[tuple[str, str], dict] = {}  # each entry --set, as data, with its sets applied
    for o in parsed:
        keys = o.path.split(".")
        section = keys[0]
        if section in MERGED_SECTIONS and len(keys) >= 2:
            set_fields.add((section, keys[1]))
        else:
            touched.add(section)
        if section == WORKLOAD:
            if len(keys) < 2:
                raise InputError(f"`sets` {o.path}: name a workload field, e.g. workload.tokens=2e14")
            continue
        classes = {**ENTRY_SECTIONS, **MERGED_SECTIONS}
        if section not in classes:
            choices = [*classes, WORKLOAD]
            raise InputError(f"`sets` {o.path}: unknown section '{section}'{did_you_mean(section, choices)}")
        cls = classes[section]
        if section in MERGED_SECTIONS:
            if len(keys) < 2:
                raise InputError(f"`sets` {o.path}: name a field, e.g. {section}.{_fields(cls)[0]}=VALUE")
            merged[section] = _set_merged(cat, merged[section], cls, o, origins, slips)
            _check_source(o, sections["sources"])
            continue
        if len(keys) < 3:  # `systems=1` was offered systems.description, a field of no section
            named = keys[1] if len(keys) == 2 else ""
            spelt = {n.lower() for n in (*sections[section], *cat.aliases.get(section, {}))}
            known = named.lower() in spelt  # names are read in any case
            name = named if known else next(iter(sections[section]), "NAME")  # not `systems.nope.`
            example = f"{section}.{name}.{_fields(cls)[0]}=VALUE"
            raise InputError(f"`sets` {o.path}: expected {section}.NAME.FIELD=VALUE, e.g. {example}")
        names = {n: n for n in sections[section]}
        names.update(cat.aliases.get(section, {}))
        name, fields = entry_name(names, section, keys)
        body = bodies.get((section, name))
        if body is None:
            body = bodies[(section, name)] = _dump(sections[section][name])
        _assign(body, fields, o.value, f"{section}.{name}", cls)
        _check_source(o, sections["sources"])
        before = origins.get((section, name), "")
        origins[(section, name)] = f"{before} + --set {o.text}".lstrip(" +")  # the data's label
        entries.append((section, name, fields))
        given.append(o.text)
    _validate_entries(sections, bodies, entries, origins)
    new = dataclasses.replace(cat, **sections, **merged, origins=origins, overrides=[*cat.overrides, *parsed])
    # a section no override touches has the same entries, so the same aliases (~0.1 s a calibration)
    finish(new, {name: v for name, v in cat.aliases.items() if name not in touched})
    # what the engine reads from the sections no override touches is the same in the copy (the
    # same entries, origins and aliases), and so is a merged section's field no override sets (its
    # validators only check; its origins are kept by field): the copy reads those paths from ``cat``
    # (``ipd calibrate`` and sweeps make a copy per value; a calibrate trial of one knob read the
    # rest of its section afresh, and copying what ``cat`` had read cost ~0.3 s a calibration)
    changed = (*(f"{s}." for s in touched), *(f"{s}.{k}." for s, k in set_fields))
    if cat.resolved.depth < INHERITED_DEPTH:
        new.resolved = Inherited(cat, changed, cat.resolved.depth + 1)
    else:  # the end of a long chain of copies: what ``cat`` read, copied, and no parent kept
        new.resolved.update((p, r) for p, r in cat.resolved.items() if not f"{p}.".startswith(changed))
    lines = _warnings(cat, new, entries, slips, given) + _repeated(cat, parsed)
    if lines:
        new.warnings = list(dict.fromkeys([*cat.warnings, *lines]))
    return new


def _validate_entries(
    sections: dict[str, Any], bodies: dict[tuple[str, str], dict], entries: list, origins: dict
) -> None:
    """Each entry ``--set`` validated once, with all its sets, into ``sections``: fields that must
    agree (a dense model's active and total parameters) can be changed together; a dense model's
    total changed alone carries its active count with it (every parameter runs for every token),
    so its size can be a sweep axis."""
    for (section, name), body in bodies.items():
        given = {f[0] for sec, n, f in entries if (sec, n) == (section, name) and f}
        if section == "models" and body.get("experts", 1) == 1 and "total_params" in given:
            if "active_params" not in given:
                body["active_params"] = body["total_params"]
        where = library_label(origins[(section, name)])  # the library's message names the parameter
        sections[section][name] = validate_entry(ENTRY_SECTIONS[section], body, f"{where}: {section}.{name}")


def _repeated(cat: Catalog, parsed: list[Override]) -> list[str]:
    """A value given more than once: the last applies, as it does in a shell's environment, but
    say so (a new user's review: `--set economics.pue=1.2 --set economics.pue=1.4` ran at 1.4
    without a word, where a YAML file's repeated key is refused); also where the paths are two
    spellings of one value (a fresh-eyes review: an alias and the entry's name, `X` and `X.value`,
    a price's label and its `usd_per_gpu_hour`), naming both."""
    given: dict[str, list[Override]] = {}
    for o in parsed:
        given.setdefault(value_key(cat, o.path), []).append(o)
    out = []
    for sets in given.values():
        if len(sets) < 2:
            continue
        last = sets[-1].text.partition("=")[2]
        if len({o.path for o in sets}) == 1:
            values = ", ".join(o.text.partition("=")[2] for o in sets)
            out.append(
                f"`sets` {sets[0].path} is given {len(sets)} times ({values}): the last, {last}, applies"
            )
        else:
            texts = ", ".join(o.text for o in sets)
            out.append(
                f"`sets`: one value given {len(sets)} times, spelt differently ({texts}): "
                f"the last, {last}, applies"
            )
    return out


def value_key(cat: Catalog, path: str) -> str:
    """The value ``path`` sets, however spelt: its entry named canonically, without a trailing
    ``.value`` (a sourced number's) or a price's ``.usd_per_gpu_hour`` (``prices.LABEL=V`` sets it)."""
    keys = canonical_path(cat, path).split(".")
    if keys[-1] == "value" and len(keys) > 2:
        keys = keys[:-1]
    if keys[-1] == "usd_per_gpu_hour" and len(keys) > 3 and keys[0] == "systems" and keys[-3] == "prices":
        keys = keys[:-1]
    return ".".join(keys)


def _check_source(o: Override, sources: dict) -> None:
    """A ``PATH.source=ID`` cites one of the catalog's sources, as a catalog file must (a fuzzing
    review); checked once the path is known to be a field."""
    ref = str(o.value)
    if o.path.split(".")[-1] == "source" and ref not in sources:
        raise InputError(f"`sets` {o.path}: unknown source id '{ref}'{did_you_mean(ref, sources)}")


def _set_merged(cat: Catalog, current: Any, cls: Any, o: Override, origins: dict, slips: list[str]) -> Any:
    """A merged section with override ``o`` applied and validated; its origins (a key of a table
    merged key by key has its own) and an economics value's unit-slip warning (into ``slips``)."""
    keys = o.path.split(".")
    section = keys[0]
    body = _with_field_as_data(current, keys[1:])
    _assign(body, keys[1:], o.value, section, cls)
    depth = KEYED.get(section, {}).get(keys[1], 0)
    if depth and len(keys) > 2:  # one key of a table merged key by key: the others keep their files
        was = origins.get((section, keys[1]), "")
        keep_origins(origins, section, keys[1], getattr(current, keys[1], None), was, depth)
        for n in range(3, min(len(keys), 2 + depth) + 1):
            origins[(section, ".".join(keys[1:n]))] = f"--set {o.text}"
    else:
        origins[(section, keys[1])] = f"--set {o.text}"
    out = _validate_section(cls, body, section, o)
    if section == "economics" and keys[2:] in ([], ["value"]):
        value = getattr(out, keys[1], None)
        if isinstance(value, Sourced):
            slips.extend(economics_warnings(cat, keys[1], [float(value.value)]))
    return out


def _warnings(
    cat: Catalog, new: Catalog, entries: list[tuple[str, str, list[str]]], slips: list[str], given: list[str]
) -> list[str]:
    """The unit-slip warnings of the overrides (``slips``: the economics ones), and a system left
    powered below its GPUs' TDP by a system's or an accelerator's ``--set``."""
    lines = [
        f"`sets` {line}"
        for line in [*slips, *(ln for e in entries for ln in override_warnings(cat, new, *e))]
    ]
    # a system's power, GPU count or accelerator, or its accelerator's TDP, given: its power is
    # checked again, naming the --set(s) that touch it (once: a user file's line is said already)
    tdp = {n for sec, n, f in entries if sec == "accelerators" and f[:1] == ["tdp_w"]}
    power = {"power_kw", "accelerators", "accelerator"}
    for name, system in new.systems.items():
        why = [
            text
            for text, (sec, n, f) in zip(given, entries, strict=True)
            if (sec == "systems" and n == name and f[:1] and f[0] in power)
            or (sec == "accelerators" and n == system.accelerator and n in tdp)
        ]
        for line in power_warnings(new, {name}) if why else []:
            if not any(w == line or w.endswith(f": {line}") for w in cat.warnings):  # a file's: "FILE: line"
                lines.append(f"with `sets` {', '.join(why)}: {line}")
    # a model's expert width against its counts, where a --set touches either
    for name in new.models:
        why = [
            text
            for text, (sec, n, f) in zip(given, entries, strict=True)
            if sec == "models" and n == name and f[:1] and f[0] in SHAPE_FIELDS
        ]
        for line in shape_warnings(new, {name}) if why else []:
            if not any(w == line or w.endswith(f": {line}") for w in cat.warnings):
                lines.append(f"with `sets` {', '.join(why)}: {line}")
    return lines


def library_label(label: str) -> str:
    """An entry's origin label as the library's messages say it: each ``--set X`` as ```sets` X``
    (the CLI's translation turns ```sets``` back into --set)."""
    parts = label.split(" + ")
    return " + ".join(
        "`sets`" if p == "--set" else f"`sets` {p.removeprefix('--set ')}" if p.startswith("--set ") else p
        for p in parts
    )


def _validate_section(cls: Any, body: dict, section: str, o: Override) -> Any:
    from pydantic import ValidationError

    try:
        return cls.model_validate(body)
    except ValidationError as e:
        raise validation_error(f"`sets` {o.text}: {section}", e, cls, body) from None
