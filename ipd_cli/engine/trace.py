"""Provenance of every input the engine uses, so each output can be explained.

Every catalog value the engine reads goes through :meth:`Trace.take` (and every value
from a workload or the command line through :meth:`Trace.given`), with the dotted
``--set`` path that overrides it. Sweeps use the same doorway: a path listed in
``subs`` returns an array of values instead of the catalog number, and in sampling
mode a value with a ``range`` returns random draws from it. So whatever the engine
reads can be swept, sampled and explained.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ipd_cli import defaults
from ipd_cli.catalog.schema import Sourced

from .results import Assumption

# the origin of a value a caller gives (a command-line option or an API argument), not the catalog
CLI = defaults.CLI

# Assumption records already built, by everything they hold: a frozen model, shared by the traces
# that read the same input (bounded: a long-running library user must not grow it without end)
_RECORDS: dict[tuple, Assumption] = {}
_RECORDS_MAX = 1 << 16

# inside an `unrecorded()` block: the traces made there record nothing
_UNRECORDED: ContextVar[bool] = ContextVar("ipd_unrecorded_traces", default=False)


@contextmanager
def unrecorded() -> Iterator[None]:
    """Inside the block, a trace made without ``record`` records nothing: for callers that read
    an estimate's numbers alone, never its assumptions (``ipd calibrate``'s trial values, ~1,200
    estimates). What a read returns is the same either way (:meth:`Trace.take`, :meth:`Trace.given`),
    and no number an estimate computes reads its trace's records (they become its result's
    ``assumptions`` only)."""
    token = _UNRECORDED.set(True)
    try:
        yield
    finally:
        _UNRECORDED.reset(token)


def _recording() -> bool:
    return not _UNRECORDED.get()


@dataclass
class Trace:
    """Collects the inputs read for one estimate, with their source and catalog file."""

    sources: dict  # id -> Source
    items: list[Assumption] = field(default_factory=list)
    subs: dict[str, Any] = field(default_factory=dict)  # --set path -> value or array (sweeps)
    sampler: Any = None  # callable(low, mode, high) -> array, for --samples
    record: bool = field(default_factory=_recording)  # False inside an `unrecorded()` block
    _seen: set = field(default_factory=set, repr=False)  # inputs recorded: each is listed once

    def _add(
        self,
        name: str,
        value: Any,
        unit: str,
        origin: str,
        note: str | None,
        path: str | None,
        source: str | None,
        estimate: bool,
        span: tuple[float, float] | None = None,
    ) -> None:
        key = (name, path, repr(value), note, origin)
        if key in self._seen:
            return
        self._seen.add(key)
        src = self.sources.get(source) if source else None
        title, date, url = (src.title, src.date, src.url) if src else (None, None, None)
        # an input read by many estimates (calibrate, validate) is one immutable record
        memo = (*key, type(value), unit, source, title, date, url, estimate, span)
        a = _RECORDS.get(memo)
        if a is None:
            a = Assumption(
                name=name,
                value=value,
                unit=unit,
                source=source,
                source_title=title,
                source_date=date,
                source_url=url,
                estimate=estimate,
                origin=origin,
                note=note,
                path=path,
                range=None if span is None else list(span),
            )
            if len(_RECORDS) < _RECORDS_MAX:
                _RECORDS[memo] = a
        self.items.append(a)

    def take(
        self,
        name: str,
        s: Sourced,
        unit: str,
        origin: str,
        scale: float = 1.0,
        path: str | None = None,
        borrowed: str | None = None,
    ) -> Any:
        """A catalog value as a plain number times ``scale`` (or its sweep/sample array).

        ``borrowed`` says where a value measured elsewhere comes from (another accelerator family
        or serving stack): the input is then recorded as an estimate with that note first."""
        value: Any = s.value
        if path is not None and path in self.subs:
            value = self.subs[path]
        elif self.sampler is not None and s.range is not None:
            value = self.sampler(s.range[0], s.value, s.range[1])
        if self.record:
            note = s.note if borrowed is None else f"{borrowed}; {s.note}" if s.note else borrowed
            estimate = s.estimate or borrowed is not None
            self._add(name, s.value, unit, origin, note, path, s.source, estimate, s.range)
        return value * scale

    def given(
        self,
        name: str,
        value: Any,
        unit: str,
        origin: str,
        note: str | None = None,
        path: str | None = None,
        source: str | None = None,
        estimate: bool = False,
    ) -> Any:
        """A value from the workload, the model architecture or the command line."""
        if path is not None and path in self.subs:
            value = self.subs[path]
        elif self.record:
            self._add(name, value, unit, origin, note, path, source, estimate)
        return value

    def quiet(self) -> Trace:
        """The same substitutions, recording nothing (for a value read twice)."""
        return Trace(self.sources, [], self.subs, self.sampler, record=False)
