"""Load, merge and validate catalog YAML files.

Layers, later ones overriding earlier ones by entry name: the built-in catalog
(``ipd_cli.configs``), then each directory in ``IPD_CATALOG`` (``os.pathsep``
separated), then each ``--catalog DIR``. In a directory, every ``*.yaml`` file
may hold the sections ``sources``, ``accelerators``, ``cpus``, ``systems``,
``models``, ``economics``, ``efficiency`` and ``serving``; each file under ``workloads/``
holds one workload, named after the file. Two files of the same layer that
define the same name are an error; ``economics``, ``efficiency`` and ``serving``
merge field by field.
"""

from __future__ import annotations

import functools
import os
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ipd_cli.errors import InputError, did_you_mean, unknown

from .schema import (
    Accelerator,
    Economics,
    Efficiency,
    HostCpu,
    Model,
    PretrainWorkload,
    RlEfficiency,
    RlWorkload,
    Scenario,
    ServingEfficiency,
    Source,
    System,
)

ENTRY_SECTIONS: dict[str, type[BaseModel]] = {
    "sources": Source,
    "accelerators": Accelerator,
    "cpus": HostCpu,
    "systems": System,
    "models": Model,
}
MERGED_SECTIONS: dict[str, type[BaseModel]] = {
    "economics": Economics,
    "efficiency": Efficiency,
    "serving": ServingEfficiency,
    "rl": RlEfficiency,
}
WORKLOAD_KINDS: dict[str, type[BaseModel]] = {
    "pretrain": PretrainWorkload,
    "rl": RlWorkload,
    "scenario": Scenario,
}
MAX_FILE_BYTES = 2_000_000
MAX_DEPTH = 64  # the catalog is about 6 levels deep
MAX_NODES = MAX_FILE_BYTES  # aliases may not expand a document beyond what 2 MB could spell out
ENV_CATALOG = "IPD_CATALOG"


@functools.cache
def _strict_loader() -> type:
    """A safe loader (libyaml's when available) that refuses duplicate keys.

    Built on first use so that commands served from the catalog cache never import yaml.
    """
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class StrictLoader(base):  # type: ignore[misc, valid-type]
        pass

    def no_duplicates(loader: Any, node: Any, deep: bool = False) -> dict:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            mark = key_node.start_mark
            try:
                first = seen.get(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "a key must be a plain value, not a list or mapping", mark
                ) from None
            if first is not None:
                problem = f"duplicate key '{key}' (first at line {first.line + 1}); keep one"
                raise yaml.constructor.ConstructorError(None, None, problem, mark)
            seen[key] = mark
        return loader.construct_mapping(node, deep=deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, no_duplicates)
    return StrictLoader


def _too_large(name: str) -> InputError:
    return InputError(f"{name}: larger than {MAX_FILE_BYTES:,} bytes; refusing to read it")


def _read_bytes(p: Path, name: str) -> bytes:
    """At most MAX_FILE_BYTES: a device or pipe (/dev/zero) reports no size, so read with a bound."""
    if p.is_dir():
        raise InputError(f"{name}: is a directory; give a YAML file")
    try:
        with open(p, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except OSError as e:
        raise InputError(f"{name}: cannot read ({e.strerror or e})") from None
    if len(data) > MAX_FILE_BYTES:
        raise _too_large(name)
    return data


def _check_shape(doc: Any, name: str) -> None:
    """Refuse documents nested deeper than MAX_DEPTH, recursive aliases, and alias bombs.

    The safe loader shares aliased nodes, so a 'billion laughs' file parses fast; but any walk
    over it (validation, the source check, JSON) pays for the expanded tree. The expanded size
    is counted here once per distinct node.
    """
    sizes: dict[int, tuple[int, int]] = {}  # id -> (expanded nodes, height)
    active: set[int] = set()

    def walk(node: Any, level: int) -> tuple[int, int]:
        if not isinstance(node, dict | list):
            return 1, 0
        key = id(node)
        if key in active:
            raise InputError(f"{name}: an alias refers to itself (a recursive document); remove it")
        if key not in sizes:
            if level > MAX_DEPTH:
                raise InputError(f"{name}: nested deeper than {MAX_DEPTH} levels; refusing it")
            active.add(key)
            children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
            size, height = 1, 0
            for child in children:
                s, h = walk(child, level + 1)
                size, height = size + s, max(height, h + 1)
                if size > MAX_NODES:
                    raise InputError(f"{name}: aliases expand to over {MAX_NODES:,} values; refusing it")
            active.discard(key)
            sizes[key] = (size, height)
        size, height = sizes[key]
        if level + height > MAX_DEPTH:
            raise InputError(f"{name}: nested deeper than {MAX_DEPTH} levels; refusing it")
        return size, height

    walk(doc, 0)


def read_yaml(path: Path | str, text: str | None = None, label: str | None = None) -> Any:
    """Parse one YAML document safely; every failure is a one-line InputError naming the file.

    Refused: files over MAX_FILE_BYTES, non-UTF-8 or binary content, Python tags (safe loader),
    duplicate keys, nesting deeper than MAX_DEPTH and alias expansion beyond MAX_NODES.
    """
    name = label or str(path)
    if text is None:
        data = _read_bytes(Path(path), name)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(
                f"{name}: not UTF-8 text (byte {e.start}); save the file as UTF-8 YAML"
            ) from None
    elif len(text) > MAX_FILE_BYTES:
        raise _too_large(name)
    else:
        try:  # stdin decoded with surrogateescape carries undecodable bytes as lone surrogates
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InputError(f"{name}: not UTF-8 text (character {e.start}); give UTF-8 YAML") from None
    if "\x00" in text:
        raise InputError(f"{name}: binary content; expected UTF-8 YAML")
    import yaml

    try:
        doc = yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a safe loader subclass
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise InputError(f"{name}: invalid YAML{where}: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise InputError(f"{name}: invalid YAML: {e}") from None
    except RecursionError:  # the pure-Python parser recurses per level; libyaml stops at 1000
        raise InputError(f"{name}: nested deeper than {MAX_DEPTH} levels; refusing it") from None
    _check_shape(doc, name)
    return doc


def format_validation_error(where: str, err: ValidationError, cls: type[BaseModel] | None = None) -> str:
    """One line: file, dotted field path, what is wrong, the offending value.

    An unknown key is reported first (a misspelt key also makes its right spelling
    'missing'), with a did-you-mean from the fields of the model it sits in.
    """
    errors = err.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = ".".join(str(p) for p in first["loc"])
    path = f"{where}.{loc}" if loc else where
    msg = first["msg"]
    hint = ""
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
        fields = _fields_at(cls, first["loc"][:-1]) if cls else []
        hint = did_you_mean(first["loc"][-1], fields) if fields else ""
    value = first.get("input")
    shown = "" if isinstance(value, dict | list) or value is None else f" (got {_short(value)})"
    more = len(errors) - 1
    tail = f" [+{more} more error{'s' if more > 1 else ''}]" if more else ""
    return f"{path}: {msg}{shown}{hint}{tail}"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fields_at(cls: Any, loc: tuple) -> list[str]:
    """Field names of the model found by following ``loc`` from ``cls`` (empty when unknown)."""
    import typing

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


@dataclass
class RawCatalog:
    """Merged, not yet validated catalog data with the file each entry came from."""

    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    origins: dict[tuple[str, str], str] = field(default_factory=dict)

    def section(self, name: str) -> dict[str, Any]:
        return self.sections.setdefault(name, {})


def builtin_dir() -> Path:
    """The installed catalog; from an uninstalled source checkout, the repo's configs/."""
    installed = Path(__file__).resolve().parents[1] / "configs"
    return installed if installed.is_dir() else Path(__file__).resolve().parents[2] / "configs"


def catalog_dirs(extra: list[Path] | None = None) -> list[Path]:
    dirs = [builtin_dir()]
    env = os.environ.get(ENV_CATALOG, "")
    dirs += [Path(p) for p in env.split(os.pathsep) if p]
    dirs += list(extra or [])
    return dirs


def _layer_files(directory: Path) -> tuple[list[Path], list[Path]]:
    if not directory.is_dir():
        what = "is a file, not a directory" if directory.exists() else "catalog directory not found"
        raise InputError(f"{directory}: {what}; give an existing directory")
    sections = sorted(directory.glob("*.yaml"))
    workloads = sorted((directory / "workloads").glob("*.yaml"))
    return sections, workloads


def _label(path: Path, directory: Path, builtin: bool) -> str:
    """How a file is named in messages and outputs: builtin files relative, user files as given."""
    return f"builtin:{path.relative_to(directory).as_posix()}" if builtin else str(path)


def _add_layer(raw: RawCatalog, directory: Path, builtin: bool = False) -> None:
    section_files, workload_files = _layer_files(directory)
    layer_seen: dict[tuple[str, str], str] = {}

    def put(section: str, name: str, value: Any, origin: str) -> None:
        key = (section, name)
        if key in layer_seen:
            raise InputError(f"{origin}: {section}.{name} is also defined in {layer_seen[key]}; keep one")
        layer_seen[key] = origin
        raw.section(section)[name] = value
        raw.origins[key] = origin

    for path in section_files:
        label = _label(path, directory, builtin)
        doc = read_yaml(path, label=label)
        if doc is None:
            raise InputError(
                f"{label}: empty file (no YAML content); add sections such as economics: or remove it"
            )
        if not isinstance(doc, dict):
            raise InputError(f"{label}: expected a mapping of sections at the top level")
        for section, body in doc.items():
            if section in MERGED_SECTIONS:
                if not isinstance(body, dict):
                    raise InputError(f"{label}: {section}: expected a mapping of fields")
                for name, value in body.items():
                    put(section, str(name), value, label)
            elif section in ENTRY_SECTIONS:
                if not isinstance(body, dict):
                    raise InputError(f"{label}: {section}: expected a mapping of name -> entry")
                for name, value in body.items():
                    put(section, str(name), value, label)
            else:
                choices = list(ENTRY_SECTIONS) + list(MERGED_SECTIONS)
                raise InputError(f"{label}: unknown section '{section}'{did_you_mean(str(section), choices)}")
    for path in workload_files:
        label = _label(path, directory, builtin)
        body = read_workload_doc(path, label=label)
        for sid, src in body.pop("sources", {}).items():
            put("sources", str(sid), src, label)
        put("workloads", path.stem, body, label)


def read_workload_doc(path: Path | str, text: str | None = None, label: str | None = None) -> dict[str, Any]:
    where = label or str(path)
    doc = read_yaml(path, text, label)
    if doc is None:
        raise InputError(f"{where}: empty file; expected a workload mapping (kind, model, ...)")
    if not isinstance(doc, dict):
        raise InputError(f"{where}: expected a workload mapping (kind, model, ...)")
    if "sources" in doc and not isinstance(doc["sources"], dict):
        raise InputError(f"{where}: sources: expected a mapping of id -> source")
    for sid, src in (doc.get("sources") or {}).items():
        validate_entry(Source, src, f"{where}: sources.{sid}")
    return {str(k): v for k, v in doc.items()}


def load_raw(extra_dirs: list[Path] | None = None) -> RawCatalog:
    raw = RawCatalog()
    for i, directory in enumerate(catalog_dirs(extra_dirs)):
        _add_layer(raw, directory, builtin=i == 0)
    return raw


@dataclass
class Catalog:
    """The validated catalog. Look entries up with :meth:`system`, :meth:`model`, ..."""

    sources: dict[str, Source]
    accelerators: dict[str, Accelerator]
    cpus: dict[str, HostCpu]
    systems: dict[str, System]
    models: dict[str, Model]
    workloads: dict[str, PretrainWorkload | RlWorkload | Scenario]
    economics: Economics
    efficiency: Efficiency
    serving: ServingEfficiency
    rl: RlEfficiency
    origins: dict[tuple[str, str], str]
    aliases: dict[str, dict[str, str]]
    overrides: list[Any] = field(default_factory=list)  # --set items, applied already except workload.*

    def _get(self, kind: str, section: str, name: str) -> Any:
        table: dict[str, Any] = getattr(self, section)
        canonical = self.aliases.get(section, {}).get(name, name)
        if canonical not in table:
            raise unknown(kind, name, list(table) + list(self.aliases.get(section, {})))
        return table[canonical]

    def canonical(self, section: str, name: str) -> str:
        return self.aliases.get(section, {}).get(name, name)

    def system(self, name: str) -> System:
        return self._get("hardware", "systems", name)

    def model(self, name: str) -> Model:
        return self._get("model", "models", name)

    def workload(self, name: str) -> PretrainWorkload | RlWorkload | Scenario:
        return self._get("workload", "workloads", name)

    def accelerator_of(self, system: System) -> Accelerator:
        return self.accelerators[system.accelerator]

    def origin(self, section: str, name: str) -> str:
        return self.origins.get((section, self.canonical(section, name)), "<command line>")


def validate_entry(model_cls: type[BaseModel], value: Any, where: str) -> Any:
    try:
        return model_cls.model_validate(value)
    except ValidationError as e:
        raise InputError(format_validation_error(where, e, model_cls)) from None


def validate_workload(body: dict[str, Any], where: str) -> PretrainWorkload | RlWorkload | Scenario:
    kind = body.get("kind", "pretrain")
    cls = WORKLOAD_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise InputError(
            f"{where}.kind: unknown workload kind '{kind}'{did_you_mean(str(kind), WORKLOAD_KINDS)}"
        )
    return validate_entry(cls, body, where)


def _check_sources(data: Any, sources: dict[str, Any], where: str) -> None:
    if isinstance(data, dict):
        ref = data.get("source")
        if isinstance(ref, str) and ref not in sources:
            raise InputError(f"{where}.source: unknown source id '{ref}'{did_you_mean(ref, sources)}")
        for k, v in data.items():
            _check_sources(v, sources, f"{where}.{k}")
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _check_sources(v, sources, f"{where}.{i}")


def build(raw: RawCatalog) -> Catalog:
    """Validate the merged raw catalog into frozen pydantic models."""
    sections: dict[str, dict[str, Any]] = {}
    for section, cls in ENTRY_SECTIONS.items():
        sections[section] = {
            name: validate_entry(cls, value, f"{raw.origins[(section, name)]}: {section}.{name}")
            for name, value in raw.section(section).items()
        }
    merged = {}
    for section, cls in MERGED_SECTIONS.items():
        body = raw.section(section)
        try:
            merged[section] = cls.model_validate(body)
        except ValidationError as e:
            loc = e.errors()[0]["loc"]
            files = sorted({raw.origins[(section, k)] for k in body}) or ["catalog"]
            origin = raw.origins.get((section, str(loc[0])), files[0]) if loc else ", ".join(files)
            raise InputError(format_validation_error(f"{origin}: {section}", e, cls)) from None
    workloads = {
        name: validate_workload(body, f"{raw.origins[('workloads', name)]}: workloads.{name}")
        for name, body in raw.section("workloads").items()
    }
    for (section, name), origin in raw.origins.items():
        if section != "sources":
            value = raw.section(section).get(name)
            _check_sources(value, raw.section("sources"), f"{origin}: {section}.{name}")
    catalog = Catalog(
        economics=merged["economics"],
        efficiency=merged["efficiency"],
        serving=merged["serving"],
        rl=merged["rl"],
        workloads=workloads,
        origins=dict(raw.origins),
        aliases={},
        **sections,
    )
    catalog.aliases = {"systems": _aliases(catalog.systems, raw), "models": _aliases(catalog.models, raw)}
    _check_references(catalog)
    return catalog


def _aliases(entries: dict[str, Any], raw: RawCatalog) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, entry in entries.items():
        for alias in entry.aliases:
            if alias in entries or alias in out:
                raise InputError(f"alias '{alias}' of '{name}' is already a name or alias; rename one")
            out[alias] = name
    return out


def _check_references(cat: Catalog) -> None:
    for name, s in cat.systems.items():
        where = f"{cat.origins[('systems', name)]}: systems.{name}"
        if s.accelerator not in cat.accelerators:
            raise unknown(f"accelerator in {where}.accelerator:", s.accelerator, list(cat.accelerators))
        if s.host_cpu not in cat.cpus:
            raise unknown(f"cpu in {where}.host_cpu:", s.host_cpu, list(cat.cpus))
    for name, w in cat.workloads.items():
        where = f"{cat.origins[('workloads', name)]}: workloads.{name}"
        if cat.canonical("models", w.model) not in cat.models:
            raise unknown(f"model in {where}.model:", w.model, list(cat.models))
        if w.kind == "scenario":
            check_scenario_refs(cat, w, where)


def check_scenario_refs(cat: Catalog, s: Any, where: str) -> None:
    """A scenario's pre-training workload must be a pretrain workload, its RL workload an rl one."""
    refs = [("pretraining.workload", s.pretraining.workload, "pretrain")]
    if s.post_training is not None:
        refs.append(("post_training.workload", s.post_training.workload, "rl"))
    for field_name, ref, kind in refs:
        if ref is None:
            continue
        if ref not in cat.workloads:
            raise unknown(f"workload in {where}.{field_name}:", ref, list(cat.workloads))
        if cat.workloads[ref].kind != kind:
            raise InputError(
                f"{where}.{field_name}: '{ref}' is a {cat.workloads[ref].kind} workload; give a {kind} one"
            )


def load_catalog(extra_dirs: list[Path] | None = None, sets: list[str] | None = None) -> Catalog:
    """Load the built-in catalog plus user directories (``IPD_CATALOG``, ``extra_dirs``).

    The validated catalog is cached (see :mod:`ipd_cli.catalog.cache`) under a key made
    of every catalog file's path, size and modification time, so an edit is seen at once.
    """
    from . import cache

    if sets:
        from . import overrides

        parsed = overrides.parse(sets)
        raw = load_raw(extra_dirs)
        overrides.apply(raw, [o for o in parsed if not o.path.startswith(overrides.WORKLOAD + ".")])
        cat = build(raw)
        cat.overrides = parsed
        return cat
    dirs = catalog_dirs(extra_dirs)
    for d in dirs:
        _layer_files(d)  # a missing directory is an error even when a cache exists
    try:
        key = cache.fingerprint(dirs)
    except OSError:  # a dangling link or unreadable entry: the YAML reader names it below
        key = None
    cat = cache.read(key) if key else None
    if cat is None:
        cat = build(load_raw(extra_dirs))
        if key:
            cache.write(key, cat)
    return cat
