"""Provenance of every input the engine uses, so each output can be explained."""

from __future__ import annotations

from dataclasses import dataclass, field

from ipd_cli.catalog.schema import Sourced

from .results import Assumption


@dataclass
class Trace:
    """Collects the inputs read for one estimate, with their source and catalog file."""

    sources: dict  # id -> Source
    items: list[Assumption] = field(default_factory=list)

    def take(self, name: str, s: Sourced, unit: str, origin: str, scale: float = 1.0) -> float:
        """Record a catalog value and return it as a plain number times ``scale``."""
        src = self.sources.get(s.source)
        self.items.append(
            Assumption(
                name=name,
                value=s.value,
                unit=unit,
                source=s.source,
                source_title=src.title if src else None,
                source_date=src.date if src else None,
                estimate=s.estimate,
                origin=origin,
                note=s.note,
            )
        )
        return s.value * scale

    def given(self, name: str, value: float, unit: str, origin: str, note: str | None = None) -> float:
        """Record a value that came from the workload or the command line."""
        self.items.append(Assumption(name=name, value=value, unit=unit, origin=origin, note=note))
        return value
