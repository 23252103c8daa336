"""Catalog layers: the built-in catalog, then ``IPD_CATALOG`` directories, then ``--catalog DIR``.

In a directory, every ``*.yaml`` file may hold the sections ``sources``, ``accelerators``,
``cpus``, ``systems``, ``models``, ``economics``, ``efficiency``, ``serving`` and ``rl``;
each file under ``workloads/`` holds one workload, named after the file. Later layers
override earlier ones by entry name; ``economics``, ``efficiency``, ``serving`` and ``rl``
merge field by field, and their tables keyed by name (:data:`KEYED`) key by key. Two files of
the same layer that define the same name are an error.
The result is a :class:`RawCatalog`: merged, not yet validated data with the file each
entry came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ipd_cli.errors import InputError, did_you_mean

from .dirs import ENV_CATALOG, builtin_dir, catalog_dirs, layer_files  # noqa: F401 - re-exported
from .schema import (
    Accelerator,
    Economics,
    Efficiency,
    HostCpu,
    Model,
    RlEfficiency,
    ServingEfficiency,
    Source,
    System,
)
from .validation import (
    USER_SOURCE,
    cites_source,
    fill_annotated,
    fill_user_workload_sources,
    user_source_entry,
    validate_entry,
)
from .yamlio import read_text, read_yaml

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


# fields of the merged sections that are tables keyed by name (an accelerator, a family, a stack):
# a later layer's table adds or replaces its keys and keeps the others (a user file that adds its
# accelerator to training_share_by_accelerator dropped every built-in accelerator's share, and
# one that placed it in a serving family dropped the other families: a user review); an empty
# table (`speculative_methods: {}`) clears the earlier one
# (the depth: accelerator -> precision tables merge two levels deep)
# sections whose names the command line gives, taken in any case (Catalog.canonical finds an entry
# by a name in another case, so two entries differing only in case are refused)
FOLDED = ("systems", "models", "workloads")

KEYED: dict[str, dict[str, int]] = {
    "efficiency": {"training_gemm_max_share_by_accelerator": 2, "training_share_by_accelerator": 1},
    "serving": {"families": 1, "stacks": 1, "speculative_methods": 1},
}


def keep_origins(origins: dict, section: str, path: str, table: Any, was: str, depth: int) -> None:
    """Each key of ``table`` (a :data:`KEYED` table at ``path``; ``depth`` 2: each key of its keys
    too) keeps the file it came from, ``was`` where none is recorded yet, before some are replaced."""
    for k, v in (table or {}).items():
        was_k = origins.setdefault((section, f"{path}.{k}"), was)
        for k2 in v if depth > 1 and isinstance(v, dict) else ():
            origins.setdefault((section, f"{path}.{k}.{k2}"), was_k)


@dataclass
class RawCatalog:
    """Merged, not yet validated catalog data with the file each entry came from."""

    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    origins: dict[tuple[str, str], str] = field(default_factory=dict)
    replaced: dict[tuple[str, str], str] = field(default_factory=dict)  # entry -> the file it replaced

    def section(self, name: str) -> dict[str, Any]:
        return self.sections.setdefault(name, {})


def _label(path: Path, directory: Path, builtin: bool) -> str:
    """How a file is named in messages and outputs: builtin files relative, user files as given."""
    return f"builtin:{path.relative_to(directory).as_posix()}" if builtin else str(path)


def _as_written(value: Any) -> Any:
    """A source as its fields read, a date as its ISO text: `date: 2026-01-05` (a YAML date) and
    `date: '2026-01-05'` (as `ipd workloads show -f yaml` writes it) are one source (a CLI review:
    a copy of a catalog workload in a --catalog directory was refused as redefining N1)."""
    import datetime

    if isinstance(value, dict):
        return {k: _as_written(v) for k, v in value.items()}
    return value.isoformat() if isinstance(value, datetime.date) else value


@dataclass
class _Layer:
    """One catalog directory being added: what it defined (a name twice in one layer is an
    error) and which of its user files name no source."""

    raw: RawCatalog
    builtin: bool
    seen: dict[tuple[str, str], str] = field(default_factory=dict)
    unsourced: list[str] = field(default_factory=list)  # user files with entries that name no source

    def put(self, section: str, name: str, value: Any, origin: str) -> None:
        key = (section, name)
        if key in self.seen and section == "sources":
            self._same_source(name, value, origin)
            return
        if key in self.seen:
            raise InputError(f"{origin}: {section}.{name} is also defined in {self.seen[key]}; keep one")
        if (
            section == "sources"
            and key in self.raw.origins
            and _as_written(self.raw.sections["sources"][name]) != _as_written(value)
        ):
            # a source id already cited: redefined, every value citing it would read the new title
            raise InputError(
                f"{origin}: sources.{name} is already defined in {self.raw.origins[key]} (cited by its "
                "values); give your source another id"
            )
        self.seen[key] = origin
        if section in FOLDED and name not in self.raw.section(section):
            # names are taken in any case: `B200:` beside the built-in b200 was a second system (an
            # input review), which no lookup could tell apart
            twin = next((n for n in self.raw.section(section) if n.lower() == name.lower()), None)
            if twin is not None:
                raise InputError(
                    f"{origin}: {section}.{name} differs from {section}.{twin} of "
                    f"{self.raw.origins[(section, twin)]} only in case; name it {twin} to replace that "
                    "entry, or give it another name"
                )
        earlier = self.raw.section(section).get(name)
        depth = KEYED.get(section, {}).get(name, 0)
        if depth and isinstance(earlier, dict) and isinstance(value, dict) and value:  # {} clears
            value = self._merged(section, name, earlier, value, origin, depth, self.raw.origins[key])
        elif key in self.raw.origins:  # an earlier directory's entry: replaced whole, not merged
            self.raw.replaced[key] = self.raw.origins[key]
        self.raw.section(section)[name] = value
        self.raw.origins[key] = origin

    def _merged(
        self, section: str, path: str, earlier: dict, value: dict, origin: str, depth: int, was: str
    ) -> dict:
        """``earlier`` with ``value``'s keys, ``depth`` levels deep; each key keeps the file it came
        from (``origins[(section, "path.key")]``)."""
        out = dict(earlier)
        keep_origins(self.raw.origins, section, path, earlier, was, depth)
        for k, v in value.items():
            if depth > 1 and isinstance(v, dict) and v and isinstance(earlier.get(k), dict):  # {} clears
                out[k] = self._merged(section, f"{path}.{k}", earlier[k], v, origin, depth - 1, was)
            else:
                out[k] = v
                for k2 in v if depth > 1 and isinstance(v, dict) else ():
                    self.raw.origins[(section, f"{path}.{k}.{k2}")] = origin
            self.raw.origins[(section, f"{path}.{k}")] = origin
        return out

    def _same_source(self, name: str, value: Any, origin: str) -> None:
        """A source id two files of a layer define (each workload file citing it carries it): the
        same entry is one source; different ones are an error naming the fields that differ."""
        first = self.raw.sections["sources"][name]
        if _as_written(value) == _as_written(first):
            return
        if isinstance(value, dict) and isinstance(first, dict):
            fields = sorted(str(k) for k in {*value, *first} if value.get(k) != first.get(k))
            what = f"with a different {', '.join(fields)}"
        else:
            what = "differently"
        raise InputError(
            f"{origin}: sources.{name} is also defined in {self.seen[('sources', name)]} {what}; "
            "keep one, or make them the same"
        )

    def filled(self, was_filled: bool, label: str) -> None:
        if was_filled and label not in self.unsourced:
            self.unsourced.append(label)

    def fill(self, value: Any, ann: Any, label: str) -> None:
        if not self.builtin:
            self.filled(fill_annotated(value, ann) or cites_source(value, USER_SOURCE), label)


def _add_layer(
    raw: RawCatalog, directory: Path, builtin: bool = False, texts: dict[Path, str] | None = None
) -> None:
    """``texts``: the files' texts, already read."""
    section_files, workload_files = layer_files(directory)
    texts = texts or {}
    layer = _Layer(raw, builtin)
    for path in section_files:
        _add_section_file(layer, path, _label(path, directory, builtin), texts.get(path))
    for path in workload_files:
        label = _label(path, directory, builtin)
        body = read_workload_doc(path, texts.get(path), label=label)
        for sid, src in body.pop("sources", {}).items():
            layer.put("sources", str(sid), src, label)
        if not builtin:
            # one that cites 'user' itself, as a what-if file may (`ipd workloads show -f yaml`
            # writes `source: user` for a user file's entries: a procurement review's copy of one)
            layer.filled(fill_user_workload_sources(body) or cites_source(body, USER_SOURCE), label)
        layer.put("workloads", path.stem, body, label)
    if layer.unsourced:
        layer.put("sources", USER_SOURCE, user_source_entry(), ", ".join(layer.unsourced))


def _add_section_file(layer: _Layer, path: Path, label: str, text: str | None = None) -> None:
    doc = read_yaml(path, text, label=label)
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
                field_info = MERGED_SECTIONS[section].model_fields.get(str(name))
                if field_info is not None:
                    layer.fill(value, field_info.annotation, label)
                layer.put(section, str(name), value, label)
        elif section in ENTRY_SECTIONS:
            if not isinstance(body, dict):
                raise InputError(f"{label}: {section}: expected a mapping of name -> entry")
            for name, value in body.items():
                if section != "sources":
                    layer.fill(value, ENTRY_SECTIONS[section], label)
                layer.put(section, str(name), value, label)
        else:
            choices = list(ENTRY_SECTIONS) + list(MERGED_SECTIONS)
            raise InputError(f"{label}: unknown section '{section}'{did_you_mean(str(section), choices)}")


def read_workload_doc(path: Path | str, text: str | None = None, label: str | None = None) -> dict[str, Any]:
    where = label or str(path)
    doc = read_yaml(path, text, label)
    if doc is None:
        raise InputError(f"{where}: empty file; expected a workload mapping (kind, model, ...)")
    if not isinstance(doc, dict):
        raise InputError(f"{where}: expected a workload mapping (kind, model, ...)")
    if doc.get("kind") == "workload" and isinstance(doc.get("entry"), dict) and "schema_version" in doc:
        # `ipd workloads show NAME -f yaml` output, the natural start of a what-if file (a user
        # review): its entry is the workload, its sources the ones the entry cites
        doc = {**doc["entry"], **({"sources": doc["sources"]} if doc.get("sources") else {})}
    if "sources" in doc and not isinstance(doc["sources"], dict):
        raise InputError(f"{where}: sources: expected a mapping of id -> source")
    for sid, src in (doc.get("sources") or {}).items():
        validate_entry(Source, src, f"{where}: sources.{sid}")
    return {str(k): v for k, v in doc.items()}


def load_raw(extra_dirs: list[Path] | None = None) -> RawCatalog:
    raw = RawCatalog()
    for i, directory in enumerate(catalog_dirs(extra_dirs)):
        if i == 0:
            raw = _builtin_layer(directory)
        else:
            _add_layer(raw, directory)
    return raw


# The built-in layer as merged, by its files' texts (at most one): a process that loads the catalog
# more than once with user directories or without the cache (the library, the tests) merged the
# same files entry by entry each time (~5 ms a load). Each load gets section tables, origins and
# replaced entries of its own, which the user layers change; the entries themselves are shared and
# never changed (a user layer's merge copies what it changes, fill() changes user values only,
# build() validates them as they are), so catalog.build can take an entry it validated before.
_BUILTIN: list[tuple[tuple[tuple[Path, str], ...], RawCatalog]] = []


def _builtin_layer(directory: Path) -> RawCatalog:
    section_files, workload_files = layer_files(directory)
    texts = tuple(
        (path, read_text(path, _label(path, directory, True))) for path in [*section_files, *workload_files]
    )
    if not _BUILTIN or _BUILTIN[0][0] != texts:
        raw = RawCatalog()
        _add_layer(raw, directory, builtin=True, texts=dict(texts))
        _BUILTIN[:] = [(texts, raw)]
    kept = _BUILTIN[0][1]
    return RawCatalog(
        sections={name: dict(body) for name, body in kept.sections.items()},
        origins=dict(kept.origins),
        replaced=dict(kept.replaced),
    )
