"""The base of the result models, and the listing models (``ipd hardware list``, ``show``): apart
from :mod:`ipd_cli.engine.results` so that listing the catalog does not define the estimate models
(about 40 classes). :mod:`~ipd_cli.engine.results` re-exports them."""

from pydantic import BaseModel, ConfigDict, PrivateAttr

SCHEMA_VERSION = "1.0"


class Result(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    # lines for stderr that are not data (a scenario's pretrain workload written for another
    # model): not in the outputs, which they must not change; the CLI prints them as notes
    _notes: list[str] = PrivateAttr(default_factory=list)

    @property
    def notes(self) -> list[str]:
        return self._notes


class Listing(Result):
    """``ipd hardware list`` and friends: one item per catalog entry."""

    schema_version: str = SCHEMA_VERSION
    kind: str
    items: list[dict]


class EntryView(Result):
    """``ipd hardware show`` and friends: the entry, the file it came from, its sources."""

    schema_version: str = SCHEMA_VERSION
    kind: str
    name: str
    origin: str
    entry: dict
    sources: dict[str, dict]
    # the --set values the entry shows applied (workload.* ones for a workload): its description's
    # words may name a value a set changed (a scripting review); not `overrides`, which an
    # estimate's output lists and its unread-input warnings check against what it read
    sets: list[str] = []
