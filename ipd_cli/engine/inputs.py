"""The one way the engine reads an input: by its ``--set`` path, in SI units, with provenance.

``Inputs.read("accelerators.rubin.hbm_tb_per_s")`` finds the catalog value the path names
(entry names and aliases as ``--set`` takes them; price points by label), multiplies it by
the SI factor declared on its schema field (:func:`ipd_cli.catalog.schema.unit`: TB/s ->
bytes/s, kW -> W, ms -> s) and records an :class:`~ipd_cli.engine.results.Assumption` with
the unit, source, catalog file and path. Because the path is the ``--set`` path, everything
the engine reads can be overridden, swept (``Trace.subs``), sampled (``Trace.sampler``) and
explained, and no call site retypes a unit or a scale.

Values that come from a workload file or the command line go through :meth:`Inputs.given`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.layers import ENTRY_SECTIONS, MERGED_SECTIONS
from ipd_cli.catalog.overrides import entry_name, joined_keys
from ipd_cli.catalog.schema import Price, Sourced, field_unit
from ipd_cli.errors import IpdError

from .trace import Trace


@dataclass(frozen=True)
class Resolved:
    """What a path names: the catalog value, its unit and SI factor, and where it came from."""

    value: Any  # a Sourced, or a plain number (model architecture, counts)
    unit: str
    si: float
    origin: str
    source: str | None = None  # for plain numbers: the source of the entry they belong to
    estimate: bool = False
    note: str | None = None  # for plain numbers of an estimated entry: where it says what is sourced


def resolve(cat: Catalog, path: str) -> Resolved:
    """The catalog value at a ``--set`` path (raises KeyError for a path the catalog lacks),
    remembered on the catalog (a path it lacks too): an estimate reads the same paths many times.
    A copy made by overrides shares what it reads at a path they leave alone with the catalog it
    was made from (the same entries, origins and aliases there; see
    :class:`~ipd_cli.catalog.catalog.Inherited`), so such a path is resolved once for all copies
    (``ipd calibrate`` prices ~1,000 trial copies); a path not yet read is read on the copy."""
    r: Resolved | Absent | None = cat.resolved.get(path)
    if r is None:
        owner, tables, below = cat, [cat.resolved], f"{path}."
        while (table := owner.resolved).parent is not None and not below.startswith(table.changed):
            owner = table.parent
            r = owner.resolved.get(path)
            if r is not None:
                break
            tables.append(owner.resolved)
        if r is None:  # read from the copy's own tables (the same entries as those above it)
            try:
                r = _resolve(cat, path)
            except KeyError as e:  # kept too: optional fields are asked for on every estimate
                r = Absent(type(e), e.args)
        for table in tables:  # (each catalog on the way: the next copy of its catalog finds it there)
            table[path] = r
    if isinstance(r, Absent):
        raise r.kind(*r.args)
    return r


@dataclass(frozen=True)
class Absent:
    """A path the catalog lacks, as :func:`resolve` keeps it: what resolving it raised."""

    kind: type[KeyError]
    args: tuple[Any, ...]


def _resolve(cat: Catalog, path: str) -> Resolved:
    keys = path.split(".")
    section = keys[0]
    node: Any
    name = ""
    if section in ENTRY_SECTIONS and len(keys) >= 3:
        name, rest = entry_name(cat.names(section), section, keys)
        node = getattr(cat, section)[name]
        origin = field_origin(cat.origin(section, name), rest, cat.names(section))
    elif section in MERGED_SECTIONS and len(keys) >= 2:
        node, rest = getattr(cat, section), keys[1:]
        origin = cat.origin_of(section, *keys[1:4])  # a key of a table merged key by key: its own
    else:
        raise KeyError(f"not a catalog input path: {path}")
    entry = node
    unit, si = "", 1.0
    at = 0
    while at < len(rest):
        key, taken = rest[at], 1
        if isinstance(node, dict) and key not in node:  # a key holding dots (a stack's release)
            taken = joined_keys(node, rest[at:])
            key = ".".join(rest[at : at + taken])
        at += taken
        if isinstance(node, BaseModel):
            declared = field_unit(type(node), key)
            if declared is not None:
                unit, si = declared
            if key not in type(node).model_fields:
                raise KeyError(f"{path}: no field '{key}'")
            node = getattr(node, key)
        elif isinstance(node, dict):
            node = node[int(key)] if key not in node and key.isdigit() and int(key) in node else node[key]
        elif isinstance(node, list):  # price points, by label
            node = next(p for p in node if getattr(p, "label", None) == key)
        else:
            raise KeyError(f"{path}: cannot go below a plain value at '{key}'")
    if isinstance(node, Price):
        unit, si = field_unit(Price, "usd_per_gpu_hour") or ("", 1.0)
        node = node.usd_per_gpu_hour
    if node is None:
        raise KeyError(f"{path}: not set in the catalog")
    estimate = bool(getattr(entry, "estimate", False))
    # an estimated entry's plain numbers cite its source for what it publishes (the 10T MoE: its
    # total), the rest are choices its note names (a hand-check review: the note was dropped)
    note = (
        f"{section}.{name} is an estimate: its note says which values its source gives"
        if estimate and name and getattr(entry, "note", None)
        else None
    )
    source = getattr(entry, "source", None)
    # a system's plain count may cite its own source (System.field_sources), while it keeps the
    # value that source gives
    cited = getattr(entry, "field_sources", {}).get(".".join(rest)) if section == "systems" else None
    if cited is not None and (cited.value is None or cited.value == node):
        return Resolved(node, unit, si, origin, cited.source, estimate or cited.estimate, cited.note or note)
    return Resolved(node, unit, si, origin, source, estimate, note)


SET = " + --set "


def field_origin(origin: str, fields: list[str], names: dict[str, str]) -> str:
    """An entry's origin as one of its fields reads it: the file, and of the ``--set`` overrides
    the entry's origin lists, those on this field (or on a part of it, or a whole it is part of).
    A cross-command review: after ``--set systems.gb200-nvl72.prices.reserved=3.3`` every field
    of the system read "builtin:hardware.yaml + --set ...prices.reserved=3.3", its power too."""
    lone = "--set "  # an entry whose origin is only overrides: no file before the first
    base, *sets = (SET + origin[len(lone) :] if origin.startswith(lone) else origin).split(SET)
    if not sets:
        return origin
    kept = []
    for text in sets:
        keys = text.split("=", 1)[0].split(".")
        try:
            path = entry_name(names, keys[0], keys)[1]  # the fields after section.NAME (names hold dots)
        except IpdError:
            path = keys[2:]
        n = min(len(path), len(fields))
        if path[:n] == list(fields[:n]):
            kept.append(text)
    return SET.join([base, *kept]).lstrip(" +") or origin


@dataclass
class Inputs:
    """Reads inputs for one estimate through a :class:`Trace` (sweep arrays, samples, records)."""

    cat: Catalog
    trace: Trace = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.trace is None:
            self.trace = Trace(self.cat.sources)

    def read(self, path: str, label: str | None = None, borrowed: str | None = None) -> Any:
        """The value at ``path`` in SI units (an array in sweeps); recorded with its provenance
        (``borrowed``: a value measured elsewhere stands in for this one; recorded as an estimate)."""
        r = resolve(self.cat, path)
        name = label or path.rsplit(".", 1)[-1].replace("_", " ")
        if isinstance(r.value, Sourced):
            return self.trace.take(name, r.value, r.unit, r.origin, r.si, path=path, borrowed=borrowed)
        value = self.trace.given(
            name, r.value, r.unit, r.origin, path=path, source=r.source, estimate=r.estimate, note=r.note
        )
        return value * r.si if r.si != 1.0 else value

    def has(self, path: str) -> bool:
        """Whether the catalog holds a value at ``path`` (optional fields)."""
        try:
            resolve(self.cat, path)
        except (KeyError, StopIteration):
            return False
        return True

    def given(
        self,
        label: str,
        value: Any,
        unit: str,
        origin: str,
        note: str | None = None,
        path: str | None = None,
        source: str | None = None,
    ) -> Any:
        """A value from a workload file, the catalog's counts or the command line (``path``: its
        ``--set workload.*`` path; ``source``: the catalog source it comes from, where one does)."""
        return self.trace.given(label, value, unit, origin, note=note, path=path, source=source)

    def quiet(self) -> Inputs:
        """The same substitutions, recording nothing (for a value read again)."""
        return Inputs(self.cat, self.trace.quiet())

    def kept(self) -> Inputs:
        """:meth:`quiet`, keeping each value read: for a search that reads the same few paths
        thousands of times (RL's weight update on every split tried). Not where values are sampled
        (each read draws anew)."""
        trace = self.trace.quiet()
        return Inputs(self.cat, trace) if trace.sampler is not None else KeptInputs(self.cat, trace)


@dataclass
class KeptInputs(Inputs):
    """:meth:`Inputs.kept`: a quiet reader whose value at a path, which records nothing and is the
    same on every read (substitutions are fixed, nothing sampled), is read once."""

    values: dict[str, Any] = field(default_factory=dict)
    present: dict[str, bool] = field(default_factory=dict)  # :meth:`has`'s answers, by path
    # callers' values derived from reads alone, or from reads and an object that holds this reader
    # (an RL Setup's weight updates: ``rl sync`` keys); unbounded, as long-lived as that holder
    memo: dict[Any, Any] = field(default_factory=dict)

    def read(self, path: str, label: str | None = None, borrowed: str | None = None) -> Any:
        value = self.values.get(path)
        if value is None:
            value = self.values[path] = super().read(path, label, borrowed)
        return value

    def has(self, path: str) -> bool:
        found = self.present.get(path)
        if found is None:
            found = self.present[path] = super().has(path)
        return found

    def quiet(self) -> Inputs:
        return self  # already quiet
