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
    value: int | float | str
    unit: str
    source: str | None = None
    source_title: str | None = None
    source_date: str | None = None
    estimate: bool = False
    origin: str = Field(description="catalog file, workload file or 'command line'")
    note: str | None = None
    path: str | None = Field(default=None, description="the --set PATH that overrides this input")


class TrainingPlan(Result):
    """A parallelism plan: degrees, batch, recompute, sharding and placement."""

    tp: int = Field(description="tensor parallel (with sequence parallelism)")
    cp: int = Field(description="context parallel")
    pp: int = Field(description="pipeline stages")
    interleave: int = Field(description="virtual pipeline chunks per stage")
    ep: int = Field(description="expert parallel (folded into tp x cp x dp)")
    dp: int = Field(description="data-parallel replicas")
    micro_batch: int = Field(description="sequences per micro-batch")
    micro_batches: int = Field(description="micro-batches per replica and step")
    global_batch: int = Field(description="sequences per step: dp x micro_batches x micro_batch")
    recompute: str = Field(description="activation recompute: none, selective or full")
    zero_stage: int = Field(description="0-2: ZeRO stage, 3: FSDP (weights sharded too)")
    pipeline_inside_domain: bool = Field(description="pipeline ranks placed inside the scale-up domain first")
    gpus_used: int = Field(description="tp x cp x pp x dp; the rest of the cluster idles")


class PlanSummary(Result):
    """One plan of `ipd train --plans N`."""

    plan: str
    parallelism: TrainingPlan
    step_time_s: float
    mfu: float
    memory_gb_per_gpu: float
    tokens_per_s_per_gpu: float
    wall_days: float


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
    mfu: float = Field(
        description="model FLOPs utilisation of the dense peak achieved by the plan on the GPUs it uses "
        "(an output of the plan search, or the value pinned with `mfu`)"
    )
    mfu_pinned: bool = Field(default=False, description="mfu was given, not derived from the plan")
    effective_mfu: float = Field(
        description="useful model FLOPs / (GPUs paid x wall time x dense peak): idle GPUs, goodput and "
        "the batch penalty included"
    )
    scale_efficiency: float = Field(description="training goodput: share of wall time in useful steps")
    moe_comm_exposed_fraction: float = Field(description="share of step time spent in exposed all-to-all")
    training_flops: float
    flops_per_token: float
    peak_tflops_per_gpu: float
    min_gpus_for_memory: int = Field(
        description="fewest GPUs that hold the training state (FSDP, full recompute)"
    )
    price_usd_per_gpu_hour: float
    pricing: str = Field(description="'rental:<label>' or 'tco'")
    kw_per_gpu: float = Field(description="node or rack power divided by its accelerators")
    plan: str = Field(default="", description="the chosen parallelism plan, named")
    parallelism: TrainingPlan | None = None
    step_time_s: float = 0.0
    global_batch_tokens: float = 0.0
    memory_gb_per_gpu: float = Field(default=0.0, description="peak HBM per GPU of the plan")
    tokens_per_s_per_gpu: float = Field(
        default=0.0, description="steady-state training tokens/s per GPU paid"
    )
    gpus_used: int = 0
    batch_token_multiplier: float = Field(
        default=1.0, description="tokens needed for the same loss at this global batch / at the recipe batch"
    )
    step_breakdown_s: dict[str, float] = Field(
        default={}, description="seconds per step by term (GEMMs, attention, memory-bound, exposed comm, ...)"
    )
    plans_evaluated: int = 0
    plans: list[PlanSummary] | None = Field(
        default=None, description="the runners-up (`ipd train --plans N`)"
    )


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
    tokens: float | None = None
    precision: str | None = None
    deadline_days: float | None = None
    gpus: int | None = None
    origin: str


class CostBreakdown(Result):
    pretraining: float
    post_training: float
    serving: float


class IntelligencePerDollar(Result):
    """The headline: tasks solved per dollar (and per MWh) over the scenario's horizon."""

    usd_per_solved_task: float
    solved_tasks_per_kusd: float
    solved_tasks_per_mwh: float
    lifecycle_cost_usd: float
    cost_breakdown_usd: CostBreakdown
    energy_breakdown_mwh: CostBreakdown
    horizon_years: float
    tasks_attempted: float
    tasks_solved: float
    success_per_attempt: float
    success_per_task: float = Field(description="after retries: 1 - (1 - p)^attempts")
    expected_attempts: float
    rl_samples: float
    score: float | None = Field(default=None, description="learning-curve score reached (fraction)")
    score_points_per_kusd: float | None = Field(default=None, description="percentage points per k$ of RL")
    rl_rollouts_per_kwh: float | None = None
    serving_target_met: bool | None = None
    site_mw: float | None = None
    site_gpus: int | None = None
    site_tasks_solved_per_day: float | None = None


class SystemResult(Result):
    hardware: str
    description: str
    status: str
    intelligence_per_dollar: IntelligencePerDollar | None = None
    pretraining: Pretraining | None = None
    rl: Rl | None = None
    serving: Serving | None = None
    assumptions: list[Assumption]


class CompareResult(Result):
    schema_version: str = SCHEMA_VERSION
    workload: WorkloadInfo
    baseline: str = Field(description="the system ratios are taken against (the first one)")
    systems: list[SystemResult]
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
        description="'tp' (dense), 'dep' (MoE: data-parallel attention + expert parallel) or "
        "'tp-attention+ep' (MoE: attention tensor parallel in groups of attention_tp GPUs)"
    )
    attention_tp: int = Field(description="GPUs per attention tensor-parallel group")
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
    serving: list[Serving] = Field(description="one point per concurrency: 1, 2, 4, ... and the KV limit")
    assumptions: list[Assumption]


class RlPhases(Result):
    """Seconds of each phase of one RL step, before overlap."""

    generation_s: float
    environment_s: float = Field(
        description="sandbox start, verification and CPU stalls not hidden by generation"
    )
    logprob_s: float
    training_s: float
    weight_sync_s: float


class RlRun(Result):
    """A refresh cycle (steps_per_refresh steps) and a year of refreshes."""

    steps_per_refresh: int
    refreshes_per_year: float
    wall_days_per_refresh: float
    gpu_hours_per_refresh: float
    usd_per_refresh: float
    gpu_hours_per_year: float
    usd_per_year: float
    energy_mwh_per_year: float


class Rl(Result):
    model: str
    workload: str
    mode: str
    step_seconds: float
    usd_per_step: float
    gpu_hours_per_step: float
    samples_per_s: float
    phases: RlPhases
    hidden_by_overlap_s: float
    usd_per_1k_samples: float
    usd_per_million_generated_tokens: float
    rollouts_per_kwh: float
    gpus: int
    gen_gpus: int
    train_gpus: int
    instance_gpus: int
    replicas: int
    concurrency: int = Field(description="decode sequences per inference instance in the bulk phase")
    max_concurrency: int
    tail_concurrency: int
    decode_tokens_per_s_per_user: float
    cpu_cores_needed: float
    cpu_cores_available: float
    env_bound: bool = Field(description="true when too few host cores leave GPUs waiting for sandboxes")
    mean_staleness_steps: float | None = None
    latency_bound: bool = Field(
        description="true when the longest trajectory, not throughput, sets generation"
    )
    price_usd_per_gpu_hour: float
    pricing: str
    run: RlRun


class RlResult(Result):
    schema_version: str = SCHEMA_VERSION
    hardware: str
    rl: Rl
    assumptions: list[Assumption]
    overrides: list[str] = Field(default=[], description="--set PATH=VALUE items applied")


class ValidationResult(Result):
    """``ipd validate``: each case (predicted, measured, signed error) and the summary per kind."""

    schema_version: str = SCHEMA_VERSION
    kind: str = "validation"
    split: str
    items: list[dict]
    summary: list[dict]
