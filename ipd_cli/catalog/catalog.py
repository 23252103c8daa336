"""The validated catalog: frozen pydantic entries, their files, aliases, and lookups.

:func:`build` validates a merged :class:`~ipd_cli.catalog.layers.RawCatalog`;
:meth:`Catalog.with_overrides` returns a copy with ``--set`` values applied, re-validating
only the entries they touch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ipd_cli.errors import InputError, did_you_mean, unknown

from .layers import ENTRY_SECTIONS, FOLDED, MERGED_SECTIONS, RawCatalog
from .schema import (
    Accelerator,
    Economics,
    Efficiency,
    HostCpu,
    Model,
    RlEfficiency,
    RlWorkload,
    ServingEfficiency,
    Source,
    System,
    Workload,
)
from .validation import validate_entry, validate_workload, validation_error


class Inherited(dict):
    """:attr:`Catalog.resolved`: what each ``--set`` path names, by path. A copy that overrides
    make (``parent``: the catalog they were applied to) shares what it reads at a path none of them
    touches (one outside the ``changed`` prefixes: the sections an override changes, and the fields
    of a merged section it sets) with its parent, both ways: those entries, origins and aliases are
    the parent's, so the path names the same value there. ``depth``: the copies between this
    table's catalog and one read from files, capped (:data:`INHERITED_DEPTH`) so that a long chain
    of copies (a loop of overrides, each on the last) keeps few catalogs alive."""

    __slots__ = ("parent", "changed", "depth")

    def __init__(self, parent: Catalog | None = None, changed: tuple[str, ...] = (), depth: int = 0) -> None:
        super().__init__()
        self.parent, self.changed, self.depth = parent, changed, depth


INHERITED_DEPTH = 64  # ``ipd calibrate`` fits 49 knobs, one on top of the other, and tries each


@dataclass
class Catalog:
    """The validated catalog. Look entries up with :meth:`system`, :meth:`model`, ..."""

    sources: dict[str, Source]
    accelerators: dict[str, Accelerator]
    cpus: dict[str, HostCpu]
    systems: dict[str, System]
    models: dict[str, Model]
    workloads: dict[str, Workload]
    economics: Economics
    efficiency: Efficiency
    serving: ServingEfficiency
    rl: RlEfficiency
    origins: dict[tuple[str, str], str]
    aliases: dict[str, dict[str, str]]
    overrides: list[Any] = field(default_factory=list)  # --set items, applied already except workload.*
    # unit-slip warnings about user-supplied values (see :mod:`.plausibility`) and an untrusted
    # cache directory (:mod:`.cache`): the CLI prints them, the library prints nothing
    warnings: list[str] = field(default_factory=list, compare=False)
    # what each --set path names, filled by the engine's reader as it reads (entries are frozen
    # and a catalog is never changed after it is built: overrides and dataclasses.replace make a new
    # one, whose table starts empty as the field is not an __init__ argument)
    resolved: Inherited = field(default_factory=Inherited, init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        # the default dataclass repr printed every entry (233 kB in a notebook, an API review)
        sizes = ", ".join(
            f"{len(getattr(self, n))} {n}" for n in ("systems", "accelerators", "models", "workloads")
        )
        return f"Catalog({sizes}, {len(self.overrides)} overrides)"

    def _get(self, kind: str, section: str, name: str) -> Any:
        table: dict[str, Any] = getattr(self, section)
        canonical = self.canonical(section, name)
        if canonical not in table:
            raise unknown(kind, name, list(table) + list(self.aliases.get(section, {})))
        return table[canonical]

    def names(self, section: str) -> dict[str, str]:
        """Every name and alias of an entry section, to its entry's name."""
        return {n: n for n in getattr(self, section)} | self.aliases.get(section, {})

    def canonical(self, section: str, name: str) -> str:
        """The entry ``name`` names: itself, an alias's entry, or the one entry whose name or alias
        it spells in another case (`H100`, `GB200`: systems, models and workloads); else ``name``."""
        found = self.aliases.get(section, {}).get(name, name)
        if section not in FOLDED or not isinstance(name, str) or found in getattr(self, section):
            return found
        folded = {e for n, e in self.names(section).items() if str(n).lower() == name.lower()}
        return folded.pop() if len(folded) == 1 else found

    def system(self, name: str) -> System:
        return self._get("hardware", "systems", name)

    def model(self, name: str) -> Model:
        return self._get("model", "models", name)

    def workload(self, name: str) -> Workload:
        return self._get("workload", "workloads", name)

    def rl_workload(self, name: str) -> RlWorkload:
        """A workload that must be an RL one (a scenario's ``post_training.workload``)."""
        w = self.workload(name)
        if not isinstance(w, RlWorkload):
            raise InputError(f"workload '{name}' is a {w.kind} workload; give an rl one")
        return w

    def accelerator_of(self, system: System) -> Accelerator:
        return self.accelerators[system.accelerator]

    def scale_out_path(self, hardware: str) -> str:
        """Where a system's scale-out bandwidth per GPU is read: the system's own fabric where it
        declares one (a cluster wired unlike its accelerator's reference node), else the accelerator's."""
        name = self.canonical("systems", hardware)
        system = self.system(hardware)
        if system.scale_out_gbit_per_s is not None:
            return f"systems.{name}.scale_out_gbit_per_s"
        return f"accelerators.{system.accelerator}.scale_out_gbit_per_s"

    def origin(self, section: str, name: str) -> str:
        return self.origins.get((section, self.canonical(section, name)), "<command line>")

    def origin_of(self, section: str, *keys: str) -> str:
        """The file a value of a merged section came from: the most specific key of a table merged
        key by key (``origin_of("serving", "stacks", "sglang")``), else its field's."""
        for n in range(len(keys), 1, -1):
            found = self.origins.get((section, ".".join(keys[:n])))
            if found is not None:
                return found
        return self.origin(section, keys[0])

    def with_overrides(self, sets: list[str] | list[Any]) -> Catalog:
        """A copy with ``PATH=VALUE`` overrides applied (see :mod:`ipd_cli.catalog.overrides`);
        only the entries they touch are validated again."""
        from .overrides import apply_to_catalog

        if isinstance(sets, str) or not isinstance(sets, list | tuple):
            # a library review: a lone string was read a letter at a time ("`sets` 'e': expected ...")
            raise InputError(f"`sets` is a list of PATH=VALUE strings, got {sets!r}")
        odd = next((o for o in sets if not isinstance(o, str) and not hasattr(o, "path")), None)
        if odd is not None:
            raise InputError(f"`sets` holds PATH=VALUE strings, got {odd!r}")

        return apply_to_catalog(self, sets)


def require_catalog(value: Any, param: str = "cat") -> None:
    """A library argument that must be a catalog (a library review: None was an AttributeError
    deep in a command)."""
    if not isinstance(value, Catalog):
        raise InputError(f"`{param}` is a catalog, ipd_cli.load()'s, got {value!r}")


def check_sources(data: Any, sources: dict[str, Any], where: str) -> None:
    """Every ``source:`` in ``data`` names one of ``sources`` (``where``: the path so far)."""
    if isinstance(data, dict):
        ref = data.get("source")
        if isinstance(ref, str) and ref not in sources:
            raise InputError(f"{where}.source: unknown source id '{ref}'{did_you_mean(ref, sources)}")
        for k, v in data.items():
            check_sources(v, sources, f"{where}.{k}")
    elif isinstance(data, list):
        for i, v in enumerate(data):
            check_sources(v, sources, f"{where}.{i}")


def _entry(raw: RawCatalog, section: str, name: str, cls: Any, value: Any) -> Any:
    """One validated entry; one that replaces an earlier file's entry of the same name and misses
    fields says that it replaces it whole (a user file giving only a system's prices)."""
    try:
        return validate_entry(cls, value, f"{raw.origins[(section, name)]}: {section}.{name}")
    except InputError as e:
        earlier = raw.replaced.get((section, name))
        if earlier is None or "Field required" not in str(e):
            raise
        raise InputError(
            f"{e} (this entry replaces {section}.{name} of {earlier} whole: copy all its fields, or "
            f"change one with `sets` {section}.{name}.FIELD=VALUE)"
        ) from None


# What build() validated and checked before, by (section, name): the raw value and its frozen entry,
# and the last value whose sources were found. The built-in layer's values are the same objects in
# every load of a process (layers._builtin_layer), never changed: the same object is the same entry,
# and its sources are the built-in ones, which every catalog has (a layer cannot redefine one).
_VALIDATED: dict[tuple[str, str], tuple[Any, Any]] = {}
_SOURCED: dict[tuple[str, str], Any] = {}


def _validated(raw: RawCatalog, section: str, name: str, cls: Any, value: Any) -> Any:
    seen = _VALIDATED.get((section, name))
    if seen is not None and seen[0] is value:
        return seen[1]
    entry = _entry(raw, section, name, cls, value)
    _VALIDATED[(section, name)] = (value, entry)
    return entry


def build(raw: RawCatalog) -> Catalog:
    """Validate the merged raw catalog into frozen pydantic models."""
    sections: dict[str, Any] = {}
    for section, cls in ENTRY_SECTIONS.items():
        sections[section] = {
            name: _validated(raw, section, name, cls, value) for name, value in raw.section(section).items()
        }
    merged: dict[str, Any] = {}
    for section, cls in MERGED_SECTIONS.items():
        body = raw.section(section)
        try:
            merged[section] = cls.model_validate(body)
        except ValidationError as e:
            loc = e.errors()[0]["loc"]
            files = sorted({raw.origins[(section, k)] for k in body}) or ["catalog"]
            origin = raw.origins.get((section, str(loc[0])), files[0]) if loc else ", ".join(files)
            raise validation_error(f"{origin}: {section}", e, cls, body) from None
    workloads = {
        name: validate_workload(body, f"{raw.origins[('workloads', name)]}: workloads.{name}")
        for name, body in raw.section("workloads").items()
    }
    for (section, name), origin in raw.origins.items():
        if section != "sources":
            value = raw.section(section).get(name)
            if value is None or _SOURCED.get((section, name)) is not value:
                check_sources(value, raw.section("sources"), f"{origin}: {section}.{name}")
                _SOURCED[(section, name)] = value
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
    finish(catalog)
    return catalog


def finish(catalog: Catalog, kept: dict[str, dict[str, str]] | None = None) -> None:
    """Aliases and cross-references, after the entries are validated (also after overrides;
    ``kept``: the aliases of the sections they leave as they were, which are taken as they are)."""
    kept = kept or {}
    catalog.aliases = {
        name: dict(kept[name]) if name in kept else _aliases(catalog, name) for name in ("systems", "models")
    }
    _check_references(catalog)


def _aliases(catalog: Catalog, section: str) -> dict[str, str]:
    from ipd_cli.catalog.overrides import library_label  # the library names `sets`

    entries: dict[str, Any] = getattr(catalog, section)
    out: dict[str, str] = {}
    # names and aliases are read in any case (FOLDED): one spelt like another in another case is
    # refused, as two entries are (layers); an entry `RUBIN` beside the alias `rubin` was taken
    spelt = {name.lower(): name for name in entries}

    def clash(alias: str, name: str, owner: str, what: str, tail: str = "") -> InputError:
        """Alias ``alias`` of entry ``name`` against entry ``owner``'s ``what``, each with its file."""
        here, there = (library_label(catalog.origins[(section, n)]) for n in (name, owner))
        return InputError(f"alias '{alias}' of {section}.{name} ({here}) {what} ({there}){tail}; rename one")

    for name, entry in entries.items():
        for alias in entry.aliases:
            if alias in entries or alias in out:
                other = alias if alias in entries else out[alias]
                owner = "the name of" if alias in entries else "an alias of"
                raise clash(alias, name, other, f"is already {owner} {section}.{other}")
            twin = spelt.get(alias.lower())
            if twin is not None and twin != alias:
                owner = out.get(twin, twin)  # the entry whose name or alias ``twin`` is
                other = f"{section}.{twin}" if twin in entries else f"'{twin}', an alias of {section}.{owner}"
                raise clash(
                    alias,
                    name,
                    owner,
                    f"differs from {other}",
                    " only in case, and names are read in any case",
                )
            out[alias] = name
            spelt[alias.lower()] = alias
    return out


def _check_references(cat: Catalog) -> None:
    for name, s in cat.systems.items():
        where = f"{cat.origins[('systems', name)]}: systems.{name}"
        if s.accelerator not in cat.accelerators:
            raise unknown(f"accelerator in {where}.accelerator:", s.accelerator, list(cat.accelerators))
        if s.host_cpu not in cat.cpus:
            raise unknown(f"cpu in {where}.host_cpu:", s.host_cpu, list(cat.cpus))
    _check_accelerator_keys(cat)
    for name, method in cat.serving.speculative_methods.items():
        for model in method.draft_shapes:  # a model's own name, as the estimate looks it up
            if model not in cat.models:
                where = (
                    f"{cat.origin_of('serving', 'speculative_methods', name)}: serving.speculative_methods"
                )
                raise unknown(f"model in {where}.{name}.draft_shapes:", model, list(cat.models))
    for name, w in cat.workloads.items():
        where = f"{cat.origins[('workloads', name)]}: workloads.{name}"
        if cat.canonical("models", w.model) not in cat.models:
            raise unknown(f"model in {where}.model:", w.model, list(cat.models))
        if w.kind == "scenario":
            check_scenario_refs(cat, w, where)


def _check_accelerator_keys(cat: Catalog) -> None:
    """Tables keyed by accelerator, and the serving families' lists: a key that names no
    accelerator is a typo whose value nothing reads (a fresh-eyes review: `x2OO` for `x200` left the
    user's training share unread, 30 % on the answer, without a word)."""
    from ipd_cli.catalog.overrides import library_label  # the library names `sets`

    for table in ("training_share_by_accelerator", "training_gemm_max_share_by_accelerator"):
        for acc in getattr(cat.efficiency, table):
            if acc not in cat.accelerators:
                where = f"{library_label(cat.origin_of('efficiency', table, acc))}: efficiency.{table}"
                raise unknown(f"accelerator in {where}:", acc, list(cat.accelerators))
    for fam, f in cat.serving.families.items():
        for acc in f.accelerators:
            if acc not in cat.accelerators:
                origin = library_label(cat.origin_of("serving", "families", fam))
                raise unknown(
                    f"accelerator in {origin}: serving.families.{fam}.accelerators:",
                    acc,
                    list(cat.accelerators),
                )


def check_scenario_refs(cat: Catalog, s: Any, where: str) -> None:
    """A scenario's pre-training workload must be a pretrain workload, its RL workload an rl one."""
    refs = [("pretraining.workload", s.pretraining.workload, "pretrain")]
    if s.post_training is not None:
        refs.append(("post_training.workload", s.post_training.workload, "rl"))
    for field_name, ref, kind in refs:
        if ref is None:
            continue
        # a catalog entry's path goes on (workloads.NAME.pretraining.workload); a file's is its field
        at = f"{where} {field_name}" if where.endswith(":") else f"{where}.{field_name}"
        if ref not in cat.workloads:
            if str(ref).endswith((".yaml", ".yml")):  # a file: a stage names catalog workloads only
                raise InputError(
                    f"{at}: '{ref}' is a file; a stage names a catalog workload: put the file in a "
                    f"catalog directory's workloads/ (given with `extra_dirs`) and give its name, "
                    f"'{Path(ref).stem}'"
                )
            fits = [n for n, w in cat.workloads.items() if w.kind == kind]  # the choices of this field
            raise unknown(f"{kind} workload in {at}:", ref, fits)
        if cat.workloads[ref].kind != kind:
            got, want = (f"{'an' if k == 'rl' else 'a'} {k}" for k in (cat.workloads[ref].kind, kind))
            raise InputError(f"{at}: '{ref}' is {got} workload; give {want} one")
