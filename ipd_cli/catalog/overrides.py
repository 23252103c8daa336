"""``--set PATH=VALUE``: override any catalog or workload field by a dotted path.

Paths follow the YAML layout: ``economics.electricity_usd_per_kwh=0.1``,
``systems.vera-rubin.power_kw=200`` (aliases work), ``systems.h100-sxm.prices.reserved=2.1``
(a price point by its label), ``accelerators.rubin.fp4_dense_tflops=30000``,
``models.moe-10t.active_params=1e12``, ``efficiency.training_mfu.fp4.mfu=0.3``,
``workload.tokens=2e14``. Setting a sourced value replaces its number and points its
source at ``cli-set``; the value is then validated like any catalog value.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from ipd_cli.errors import InputError, did_you_mean

from .loader import ENTRY_SECTIONS, MERGED_SECTIONS, RawCatalog

CLI_SOURCE = "cli-set"
WORKLOAD = "workload"


@dataclass(frozen=True)
class Override:
    path: str
    value: Any
    text: str


def parse(items: list[str]) -> list[Override]:
    """Parse ``PATH=VALUE`` strings; VALUE is read as a YAML scalar (number, bool, string, list)."""
    from .loader import read_yaml

    out = []
    for item in items:
        path, sep, text = item.partition("=")
        path = path.strip()
        if not sep or not path or not text.strip():
            raise InputError(f"--set {item!r}: expected PATH=VALUE, e.g. economics.pue=1.2")
        value = read_yaml(f"--set {path}", text=text.strip())
        if isinstance(value, dict):
            raise InputError(f"--set {path}: give a single value, not a mapping")
        out.append(Override(path, value, item))
    return out


def _aliases(raw: RawCatalog, section: str) -> dict[str, str]:
    out = {}
    for canonical, body in raw.section(section).items():
        aliases = body.get("aliases") if isinstance(body, dict) else None
        for alias in aliases if isinstance(aliases, list) else []:
            out[str(alias)] = canonical
    return out


def _alias(raw: RawCatalog, section: str, name: str) -> str:
    entries = raw.section(section)
    if name in entries:
        return name
    aliases = _aliases(raw, section)
    if name in aliases:
        return aliases[name]
    choices = [*entries, *aliases]
    raise InputError(f"--set {section}.{name}: unknown {section[:-1]} '{name}'{did_you_mean(name, choices)}")


def _entry_keys(raw: RawCatalog, section: str, keys: list[str]) -> tuple[str, list[str]]:
    """The entry a path names and the field keys after it; names may hold dots (llama-3.1-8b)."""
    names = set(raw.section(section)) | set(_aliases(raw, section))
    for end in range(len(keys) - 1, 1, -1):  # the longest name that leaves a field
        if ".".join(keys[1:end]) in names:
            return _alias(raw, section, ".".join(keys[1:end])), keys[end:]
    return _alias(raw, section, keys[1]), keys[2:]


def _fields(cls: Any) -> list[str]:
    return list(getattr(cls, "model_fields", {}))


def _assign(node: Any, keys: list[str], value: Any, where: str, cls: Any = None) -> None:
    key, rest = keys[0], keys[1:]
    if isinstance(node, list):  # price points: address them by label
        labels = {p.get("label"): p for p in node if isinstance(p, dict)}
        if not labels:
            raise InputError(f"--set {where}: a list; set it whole, e.g. {where}=[a, b]")
        if key not in labels:
            raise InputError(f"--set {where}.{key}: no price labelled '{key}'{did_you_mean(key, labels)}")
        target = labels[key]
        if rest:
            _assign(target, rest, value, f"{where}.{key}")
        else:
            _set_leaf(target, "usd_per_gpu_hour", value)
        return
    if not isinstance(node, dict):
        raise InputError(f"--set {where}: cannot go below a plain value")
    choices = set(node) | set(_fields(cls))
    if key not in choices:
        raise InputError(f"--set {where}.{key}: unknown field{did_you_mean(key, choices)}")
    if rest:
        child = node.setdefault(key, {})
        sub = _field_class(cls, key)
        _assign(child, rest, value, f"{where}.{key}", sub)
    else:
        _set_leaf(node, key, value)


def _field_class(cls: Any, key: str) -> Any:
    field = getattr(cls, "model_fields", {}).get(key)
    if field is None:
        return None
    ann = field.annotation
    return ann if hasattr(ann, "model_fields") else None


def _set_leaf(node: dict, key: str, value: Any) -> None:
    current = node.get(key)
    if isinstance(current, dict) and "value" in current:
        node[key] = {
            **current,
            "value": value,
            "source": CLI_SOURCE,
            "estimate": False,
            "note": f"set on the command line (was {current.get('value')})",
        }
        node[key].pop("range", None)
    else:
        node[key] = value


def apply_workload(body: dict, overrides: list[Override]) -> None:
    """Apply ``workload.FIELD=VALUE`` overrides to a raw workload mapping."""
    for o in overrides:
        keys = o.path.split(".")[1:]
        if not keys:
            raise InputError(f"--set {o.path}: name a workload field, e.g. workload.tokens=2e14")
        _assign(body, keys, o.value, WORKLOAD, _workload_class(body))


def _workload_class(body: dict) -> Any:
    from .loader import WORKLOAD_KINDS

    return WORKLOAD_KINDS.get(body.get("kind", "pretrain"))


def apply(raw: RawCatalog, overrides: list[Override], workload: dict | None = None) -> None:
    """Apply overrides in place to the raw catalog (and to a raw workload dict)."""
    if overrides:
        today = dt.date.today().isoformat()
        raw.section("sources")[CLI_SOURCE] = {
            "title": "value given with --set on the command line",
            "date": today,
        }
        raw.origins[("sources", CLI_SOURCE)] = "command line"
    sections = {**ENTRY_SECTIONS, **MERGED_SECTIONS}
    for o in overrides:
        keys = o.path.split(".")
        section = keys[0]
        if section == WORKLOAD:
            if len(keys) < 2:
                raise InputError(f"--set {o.path}: name a workload field, e.g. workload.tokens=2e14")
            if workload is not None:
                apply_workload(workload, [o])
            continue
        if section not in sections:
            choices = [*sections, WORKLOAD]
            raise InputError(f"--set {o.path}: unknown section '{section}'{did_you_mean(section, choices)}")
        cls = sections[section]
        if len(keys) < 2:
            raise InputError(f"--set {o.path}: name a field, e.g. {section}.{_fields(cls)[0]}=VALUE")
        if section in MERGED_SECTIONS:
            _assign(raw.section(section), keys[1:], o.value, section, cls)
            raw.origins[(section, keys[1])] = f"--set {o.text}"
            continue
        if len(keys) < 3:
            raise InputError(f"--set {o.path}: expected {section}.NAME.FIELD=VALUE")
        name, fields = _entry_keys(raw, section, keys)
        _assign(raw.section(section)[name], fields, o.value, f"{section}.{name}", cls)
        raw.origins[(section, name)] = f"{raw.origins.get((section, name), '')} + --set {o.text}".lstrip(" +")
