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
}
WORKLOAD_KINDS: dict[str, type[BaseModel]] = {"pretrain": PretrainWorkload}
MAX_FILE_BYTES = 2_000_000
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
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                mark = key_node.start_mark
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key '{key}' (line {mark.line + 1}, column {mark.column + 1})",
                    mark,
                )
            seen.add(key)
        return loader.construct_mapping(node, deep=deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, no_duplicates)
    return StrictLoader


def read_yaml(path: Path | str, text: str | None = None, label: str | None = None) -> Any:
    """Parse one YAML document safely; every failure is a one-line InputError naming the file."""
    name = label or str(path)
    if text is None:
        p = Path(path)
        if p.is_dir():
            raise InputError(f"{name}: is a directory; give a YAML file")
        try:
            if p.stat().st_size > MAX_FILE_BYTES:
                raise InputError(f"{name}: file is larger than {MAX_FILE_BYTES} bytes; refusing to read it")
            data = p.read_bytes()
        except FileNotFoundError:
            raise InputError(f"{name}: no such file") from None
        except OSError as e:
            raise InputError(f"{name}: cannot read ({e.strerror})") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{name}: not UTF-8 text; save the file as UTF-8 YAML") from None
    if "\x00" in text:
        raise InputError(f"{name}: binary content; expected UTF-8 YAML")
    import yaml

    try:
        return yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a safe loader subclass
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise InputError(f"{name}: invalid YAML{where}: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise InputError(f"{name}: invalid YAML: {e}") from None


def format_validation_error(where: str, err: ValidationError) -> str:
    """One line: file, dotted field path, what is wrong, the offending value."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    path = f"{where}.{loc}" if loc else where
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
    value = first.get("input")
    shown = "" if isinstance(value, dict | list) or value is None else f" (got {value!r})"
    more = len(err.errors()) - 1
    tail = f" [+{more} more error{'s' if more > 1 else ''}]" if more else ""
    return f"{path}: {msg}{shown}{tail}"


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
        raise InputError(f"{directory}: catalog directory not found; give an existing directory")
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
            continue
        if not isinstance(doc, dict):
            raise InputError(f"{label}: expected a mapping of sections at the top level")
        for section, body in doc.items():
            if section in MERGED_SECTIONS:
                if not isinstance(body, dict):
                    raise InputError(f"{label}: {section}: expected a mapping of fields")
                raw.section(section).update(body)
                for name in body:
                    raw.origins[(section, name)] = label
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
    doc = read_yaml(path, text, label)
    if not isinstance(doc, dict):
        raise InputError(f"{label or path}: expected a workload mapping (kind, model, ...)")
    if "sources" in doc and not isinstance(doc["sources"], dict):
        raise InputError(f"{label or path}: sources: expected a mapping of id -> source")
    return dict(doc)


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
    workloads: dict[str, PretrainWorkload]
    economics: Economics
    efficiency: Efficiency
    serving: ServingEfficiency
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

    def workload(self, name: str) -> PretrainWorkload:
        return self._get("workload", "workloads", name)

    def accelerator_of(self, system: System) -> Accelerator:
        return self.accelerators[system.accelerator]

    def origin(self, section: str, name: str) -> str:
        return self.origins.get((section, self.canonical(section, name)), "<command line>")


def validate_entry(model_cls: type[BaseModel], value: Any, where: str) -> Any:
    try:
        return model_cls.model_validate(value)
    except ValidationError as e:
        raise InputError(format_validation_error(where, e)) from None


def validate_workload(body: dict[str, Any], where: str) -> PretrainWorkload:
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
            raise InputError(format_validation_error(f"{origin}: {section}", e)) from None
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
        if cat.canonical("models", w.model) not in cat.models:
            where = f"{cat.origins[('workloads', name)]}: workloads.{name}.model"
            raise unknown(f"model in {where}:", w.model, list(cat.models))


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
    key = cache.fingerprint(dirs)
    cat = cache.read(key)
    if cat is None:
        cat = build(load_raw(extra_dirs))
        cache.write(key, cat)
    return cat
