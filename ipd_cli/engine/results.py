"""Result models returned by the engine and rendered by :mod:`ipd_cli.render`.

These define the JSON contract: units in key names, numbers as numbers, additive
changes only (bump :data:`SCHEMA_VERSION` for anything else). ``ipd schema``
prints their JSON Schema; tests/golden/schema.json is the committed copy.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = "1.0"


class Result(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Assumption(Result):
    """One input of an estimate: its value, unit and where it came from."""

    name: str
    value: float | str
    unit: str
    source: str | None = None
    source_title: str | None = None
    source_date: str | None = None
    estimate: bool = False
    origin: str = Field(description="catalog file, workload file or 'command line'")
    note: str | None = None


class Pretraining(Result):
    model: str
    precision: str
    tokens: float
    gpus: int
    systems: int = Field(description="whole nodes or racks: gpus is rounded up to these")
    wall_days: float
    gpu_hours: float
    cost_usd: float
    energy_mwh: float
    mfu: float = Field(description="model FLOPs utilisation of the dense peak, before scale and comms")
    effective_mfu: float = Field(
        description="achieved share of dense peak after scale loss and exposed comms"
    )
    scale_efficiency: float
    moe_comm_exposed_fraction: float = Field(description="share of step time spent in exposed all-to-all")
    training_flops: float
    flops_per_token: float
    peak_tflops_per_gpu: float
    min_gpus_for_memory: int
    price_usd_per_gpu_hour: float
    pricing: str = Field(description="'rental:<label>' or 'tco'")
    kw_per_gpu: float = Field(description="node or rack power divided by its accelerators")


class SystemPretraining(Result):
    hardware: str
    description: str
    status: str
    pretraining: Pretraining
    assumptions: list[Assumption]


class WorkloadInfo(Result):
    name: str
    kind: str
    description: str
    model: str
    tokens: float
    precision: str
    deadline_days: float | None = None
    gpus: int | None = None
    origin: str


class CompareResult(Result):
    schema_version: str = SCHEMA_VERSION
    workload: WorkloadInfo
    baseline: str = Field(description="the system ratios are taken against (the first one)")
    systems: list[SystemPretraining]


class TrainResult(Result):
    schema_version: str = SCHEMA_VERSION
    hardware: str
    pretraining: Pretraining
    assumptions: list[Assumption]


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
