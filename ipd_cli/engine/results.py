"""Result models returned by the engine and rendered by :mod:`ipd_cli.render`.

These define the JSON contract: units in key names, numbers as numbers, additive
changes only (bump :data:`SCHEMA_VERSION` for anything else). ``ipd schema``
prints their JSON Schema; tests/golden/schema.json is the committed copy.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = "1.0"


class Result(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


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
    path: str | None = Field(default=None, description="the --set PATH that overrides this input")


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
    overrides: list[str] = Field(default=[], description="--set PATH=VALUE items applied")


class TrainResult(Result):
    schema_version: str = SCHEMA_VERSION
    hardware: str
    pretraining: Pretraining
    assumptions: list[Assumption]
    overrides: list[str] = Field(default=[], description="--set PATH=VALUE items applied")


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


class Serving(Result):
    """One serving operating point: throughput, interactivity, latency and cost."""

    tokens_per_s_per_gpu: float = Field(description="output tokens/s per GPU")
    tokens_per_s_per_user: float = Field(description="decode speed of one sequence (speculation included)")
    ttft_s: float = Field(description="time to first token: prefill of one request, no queueing")
    tpot_ms: float = Field(description="time per output token")
    usd_per_million_output_tokens: float
    usd_per_million_total_tokens: float = Field(description="input + output tokens")
    tokens_per_s_per_mw: float = Field(description="output tokens/s per MW of all-in power (incl. PUE)")
    instance_gpus: int = Field(description="GPUs that serve one copy of the model (TP/EP group)")
    concurrency: int = Field(description="sequences in flight per instance")
    model: str
    parallelism: str = Field(
        description="'tp' (tensor parallel) or 'dep' (data-parallel attention + expert parallel, MoE)"
    )
    precision: str = Field(description="weight precision")
    kv_precision: str
    input_tokens: int
    output_tokens: int
    operating_point: str = Field(description="'concurrency', 'target' or 'max-throughput'")
    target_tokens_per_s_per_user: float | None = None
    target_met: bool | None = Field(default=None, description="false: even concurrency 1 is too slow")
    max_concurrency: int = Field(description="KV-capacity limit per instance (after the engine cap)")
    kv_bytes_per_token: float
    weight_gb_per_instance: float
    decode_bound: str = Field(description="'memory' or 'compute': the larger roofline term of a step")
    step_time_ms: float = Field(description="one decode step, all sequences of the instance")
    memory_time_ms: float
    compute_time_ms: float
    collective_time_ms: float
    overhead_ms: float
    experts_touched_share: float = Field(description="share of routed expert weights read per step")
    prefill_share: float = Field(description="share of instance time spent in prefill")
    total_tokens_per_s_per_gpu: float = Field(description="input + output tokens/s per GPU")
    speculative_speedup: float
    price_usd_per_gpu_hour: float
    pricing: str = Field(description="'rental:<label>' or 'tco'")
    kw_per_gpu: float = Field(description="node or rack power divided by its accelerators")
    gpus_for_traffic: int | None = Field(default=None, description="whole instances for the traffic")
    instances_for_traffic: int | None = None
    traffic_requests_per_s: float | None = None


class ServeResult(Result):
    """``ipd serve``: one operating point on one system."""

    schema_version: str = SCHEMA_VERSION
    hardware: str
    description: str
    serving: Serving
    assumptions: list[Assumption]


class ServeCurveResult(Result):
    """``ipd serve --curve``: throughput per GPU against speed per user as concurrency grows."""

    schema_version: str = SCHEMA_VERSION
    hardware: str
    description: str
    model: str
    precision: str
    instance_gpus: int
    max_concurrency: int
    points: list[Serving]
    assumptions: list[Assumption]
