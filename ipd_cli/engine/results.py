"""Result models returned by the engine and rendered by :mod:`ipd_cli.render`.

These define the JSON contract: units in key names, numbers as numbers, additive
changes only (bump :data:`SCHEMA_VERSION` for anything else). ``ipd schema``
prints their JSON Schema; tests/golden/schema.json is the committed copy.
"""

from pydantic import Field, PrivateAttr

from .result_base import SCHEMA_VERSION, EntryView, Listing, Result

__all__ = ["SCHEMA_VERSION", "EntryView", "Listing", "Result"]  # and the models defined here


class Assumption(Result):
    """One input of an estimate: its value, unit and where it came from."""

    name: str
    value: int | float | str
    unit: str
    source: str | None = None
    source_title: str | None = None
    source_date: str | None = None
    source_url: str | None = None
    estimate: bool = False
    origin: str = Field(description="catalog file, workload file or 'command line'")
    note: str | None = None
    path: str | None = Field(default=None, description="the --set PATH that overrides this input")
    range: list[float] | None = Field(
        default=None, description="the catalog's low and high for this value (what --samples draws from)"
    )


class TrainingPlan(Result):
    """A parallelism plan: degrees, batch, recompute, sharding and placement."""

    tp: int = Field(description="tensor parallel (with sequence parallelism)")
    cp: int = Field(description="context parallel")
    pp: int = Field(description="pipeline stages")
    interleave: int = Field(description="virtual pipeline chunks per stage")
    pipeline_schedule: str = Field(
        description="1f1b (interleaved when interleave > 1) or dualpipe (DeepSeek-V3's two-way schedule)"
    )
    ep: int = Field(description="expert parallel (folded into tp x cp x dp)")
    moe_dispatcher: str = Field(
        description="alltoall (one copy per remote rank) or deepep (one copy per remote scale-up domain: "
        "DeepEP / HybridEP)"
    )
    a2a_overlap: bool = Field(
        description="Megatron's 1F1B expert-parallel overlap: one micro-batch's all-to-all behind "
        "another's compute"
    )
    cuda_graphs: bool = Field(
        description="CUDA graphs over the MoE routing and preprocessing (off: each MoE layer waits "
        "for the host)"
    )
    dp: int = Field(description="data-parallel replicas")
    micro_batch: int = Field(description="sequences per micro-batch")
    micro_batches: int = Field(description="micro-batches per replica and step")
    global_batch: int = Field(description="sequences per step: dp x micro_batches x micro_batch")
    recompute: str = Field(
        description="activation policy: none, selective, full, offload, or the Megatron-Core modules a "
        "selective recompute rebuilds, joined by + (mla_up_proj+mlp)"
    )
    zero_stage: int = Field(description="0-2: ZeRO stage, 3: FSDP (weights sharded too)")
    pipeline_inside_domain: bool = Field(description="pipeline ranks placed inside the scale-up domain first")
    gpus_used: int = Field(description="tp x cp x pp x dp; the rest of the cluster idles")


HOST_OFFLOAD = (
    "activations per GPU an offloading plan keeps in host memory at the peak (the layers that do not fit in "
    "HBM; 0 for the other recompute policies)"
)


class PlanSummary(Result):
    """One plan of `ipd train --plans N`."""

    plan: str
    parallelism: TrainingPlan
    global_batch: int = Field(description="sequences per step (plans can differ in it alone)")
    step_time_s: float
    mfu: float
    memory_gb_per_gpu: float
    host_offload_gb_per_gpu: float = Field(default=0.0, description=HOST_OFFLOAD)
    tokens_per_s_per_gpu: float
    batch_token_multiplier: float = Field(
        default=1.0,
        description="tokens needed for the same loss at this global batch / at the recipe batch",
    )
    useful_tokens_per_s_per_gpu: float = Field(
        description="tokens_per_s_per_gpu / batch_token_multiplier: what plans rank by (wall_days falls "
        "as it grows), so a plan with more tokens/s per GPU at a batch beyond the recipe's can rank lower",
    )
    wall_days: float


class Pretraining(Result):
    model: str
    precision: str
    precision_requested: str | None = Field(
        default=None,
        description="the precision asked for, where the system has no dense figure for it and runs "
        "the next wider one (precision) instead; null otherwise",
    )
    fp8_recipe: str | None = Field(
        default=None,
        description="an FP8 run's scaling recipe (tensorwise, delayed, mxfp8 or blockwise: the plan's "
        "fp8_recipe pin, else tensorwise); null at other precisions",
    )
    tokens: float
    gpus: int
    systems: int = Field(
        description="whole nodes or racks the run takes: gpus rounded up to them, or the domains the "
        "plan's GPUs span in whole copies of its in-domain groups where more (832 GPUs of 64-GPU "
        "groups: 13 NVL72 racks)"
    )
    gpus_per_system: int = Field(default=0, description="GPUs of one node or rack of the system")
    wall_days: float
    gpu_hours: float
    cost_usd: float
    energy_mwh: float
    mfu: float = Field(
        description="model FLOPs utilisation of the dense peak achieved by the plan on the GPUs it uses "
        "(gpus_used; tokens_per_s_per_gpu divides by all gpus) (an output of the plan search, or "
        "the value pinned with `mfu`)"
    )
    mfu_pinned: bool = Field(default=False, description="mfu was given, not derived from the plan")
    effective_mfu: float = Field(
        description="useful model FLOPs / (GPUs paid x wall time x dense peak): idle GPUs, goodput and "
        "the batch penalty included"
    )
    scale_efficiency: float = Field(description="training goodput: share of wall time in useful steps")
    moe_comm_exposed_fraction: float = Field(
        description="share of step time spent in exposed expert all-to-all (dispatch and combine, "
        "forward and backward, on the most loaded stage; the chunks the 1F1B overlap cannot pair "
        "included); part of step_breakdown_s.exposed_comm_s"
    )
    training_flops: float
    flops_per_token: float = Field(
        description="model FLOPs per token, as NVIDIA's and Megatron's 'model TFLOP/s' count them: 6 x "
        "active parameters plus the causal attention's score and value products (Llama 3.1 70B at "
        "8K: 455.8e9, 6N alone 423.6e9); mfu and effective_mfu use it"
    )
    counted_active_params: float = Field(
        default=0.0,
        description="the parameters the 6N of flops_per_token counts: the model's active_params, or the "
        "parameters one token's GEMMs pass through where the model's shape holds more (an "
        "active_params override does not shrink attention widths or experts)",
    )
    attention_flops_per_token: float = Field(
        default=0.0,
        description="of flops_per_token, the causal attention's score and value products, forward and "
        "backward: 3 x layers x sequence length x (query-key width + value width) x the share of "
        "layers with attention, and the sliding-window layers' band (2 x the keys a query sees in its "
        "window instead of the sequence length); flops_per_token = 6 x counted_active_params + this",
    )
    peak_tflops_per_gpu: float
    min_gpus_for_memory: int = Field(
        description="a lower bound on the GPUs that hold the training state: weights, gradients and "
        "optimizer state sharded over every GPU (FSDP) plus one sequence's full-recompute checkpoints "
        "in usable HBM; no plan fits on fewer, and the plans' own layouts (whole tp x cp x pp groups, "
        "activations, buffers) may need more: a cluster too small is refused naming the fewest that fit"
    )
    price_usd_per_gpu_hour: float
    pricing: str = Field(description="'rental:<label>' or 'tco'")
    kw_per_gpu: float = Field(description="node or rack power divided by its accelerators")
    plan: str = Field(default="", description="the chosen parallelism plan, named")
    parallelism: TrainingPlan | None = None
    step_time_s: float = 0.0
    global_batch_tokens: float = 0.0
    memory_gb_per_gpu: float = Field(
        default=0.0,
        description="peak HBM per GPU of the plan (an offloading plan's is the usable HBM: it sends what "
        "does not fit, host_offload_gb_per_gpu)",
    )
    host_offload_gb_per_gpu: float = Field(default=0.0, description=HOST_OFFLOAD)
    tokens_per_s_per_gpu: float = Field(
        default=0.0, description="steady-state training tokens/s per GPU paid"
    )
    gpus_used: int = 0
    batch_token_multiplier: float = Field(
        default=1.0, description="tokens needed for the same loss at this global batch / at the recipe batch"
    )
    recipe_batch_tokens: float = Field(
        default=0.0,
        description="the training recipe's global batch (tokens): the model's published one, else the "
        "DeepSeek LLM rule at the run's FLOPs (efficiency.default_batch_coefficient x "
        "training_flops^default_batch_exponent); a larger global batch pays batch_token_multiplier",
    )
    step_breakdown_s: dict[str, float] = Field(
        default={},
        description="seconds per step by term (GEMMs, attention, memory-bound, exposed comm, ...); "
        "they add up to step_time_s (with mfu pinned: the plan's terms in proportion)",
    )
    memory_breakdown_gb_per_gpu: dict[str, float] = Field(
        default={},
        description="memory_gb_per_gpu by part: weights, gradients and optimizer_state (each by the "
        "plan's ZeRO stage; FSDP's weights include its two gathered layers) and activations (the "
        "rest: in-flight micro-batches under the recompute policy, logits, recompute working set)",
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
    cost_breakdown_usd: CostBreakdown = Field(
        description="each stage's share of lifecycle_cost_usd over the horizon: pre-training's is its "
        "cost_usd amortised (x horizon_years / amortisation_years / deployments; 0 with open weights), not "
        "pretraining.cost_usd; RL's the refreshes of the horizon; serving's the deployment around the clock"
    )
    energy_breakdown_mwh: CostBreakdown = Field(
        description="the same split of the energy behind solved_tasks_per_mwh (pre-training amortised "
        "like its cost)"
    )
    horizon_years: float
    tasks_attempted: float = Field(
        description="tasks taken on over the horizon, each tried until solved or out of retries (not the "
        "attempts: those are tasks_attempted x expected_attempts, the calls the serving traffic carries)"
    )
    tasks_solved: float
    success_per_attempt: float
    success_per_task: float = Field(description="after retries: 1 - (1 - p)^attempts")
    expected_attempts: float
    rl_samples: float
    score: float | None = Field(
        default=None,
        description="learning-curve score reached at the horizon's end (fraction); success_per_attempt "
        "is the curve's mean over the horizon, its samples accruing evenly",
    )
    score_points_per_kusd: float | None = Field(default=None, description="percentage points per k$ of RL")
    rl_rollouts_per_kwh: float | None = Field(
        default=None,
        description="RL rollouts generated per kWh of a steady step (rl.rollouts_per_kwh); a whole run "
        "also pays the steps its goodput loses, which post_training_mwh counts",
    )
    serving_target_met: bool | None = None
    site_mw: float | None = None
    site_gpus: int | None = None
    site_tasks_solved_per_day: float | None = None


class Infeasible(Result):
    """Why a block of one system could not be computed (the block itself is null)."""

    stage: str = Field(description="the stage that failed: 'pretraining', 'post_training' or 'serving'")
    workload: str | None = Field(default=None, description="the workload that stage ran, if any")
    reason: str
    hint: str | None = Field(default=None, description="what to change, as options of the command")


class SystemResult(Result):
    hardware: str
    description: str
    status: str
    intelligence_per_dollar: IntelligencePerDollar | None = None
    pretraining: Pretraining | None = None
    rl: "Rl | None" = None
    serving: "Serving | None" = None
    infeasible: dict[str, Infeasible] = Field(
        default={},
        description="blocks that could not be computed on this system (null above), by block name",
    )
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


class Serving(Result):
    """One serving operating point: the deployment configuration, throughput, interactivity,
    latency and cost. Little's law holds on every point: tokens_per_s_per_gpu x deployment_gpus =
    deployment_concurrency x tokens_per_s_per_user."""

    # an aggregated point under a stack release that stalls its prompts: (the prompt's own seconds,
    # the release's stall), whose larger is prefill_instance_s; what `ipd explain` writes as that
    # step, not an output (None: no stall priced)
    _prompt_stall: tuple[float, float] | None = PrivateAttr(default=None)

    @property
    def prompt_stall(self) -> tuple[float, float] | None:
        return self._prompt_stall

    tokens_per_s_per_gpu: float = Field(
        description="output tokens/s per GPU paid for: the whole deployment unit (prefill pool and "
        "stranded GPUs included)"
    )
    tokens_per_s_per_user: float = Field(
        description="output tokens/s of one request while it holds a decode slot (speculation "
        "included; aggregated: the prefills that take turns on the instance included)"
    )
    ttft_s: float = Field(
        description="time to first token: one request's prefill alone, no queueing (its prompt's "
        "attention and dense layers on one attention rank, the pipeline stages one after another, "
        "every layer's kernel floor and collective latency); aggregated under a stack's attention-DP "
        "balance (TensorRT-LLM's), plus the mean steps it holds a new prompt until the other ranks "
        "have one (formulas.attention_dp_context_wait_steps)"
    )
    prefill_instance_s: float = Field(
        default=0.0,
        description="seconds of a prefill (or aggregated) instance's time per request's prompt when "
        "prompts come in batches (every rank and stage busy): what throughput is priced on; at most "
        "ttft_s",
    )
    tpot_ms: float = Field(
        description="time per output token after the first ((latency - TTFT) / output tokens): "
        "1000 / interactivity as benchmarks publish it; aggregated, the other requests' prefills "
        "included, the request's own (its TTFT) not"
    )
    interactivity_tokens_per_s: float = Field(
        description="1 / TPOT: a user's output tokens/s after the first token, as benchmarks publish "
        "interactivity; the tokens/s per user target is checked against it (tokens_per_s_per_user "
        "is the rate over the whole slot: aggregated, the request's own prefill included)"
    )
    request_tokens_per_s: float = Field(
        description="one request's output tokens / (ttft_s + output tokens x TPOT): its rate from "
        "arrival to last token, no queueing, the same for aggregated and disaggregated deployments "
        "(tokens_per_s_per_user leaves a disaggregated request's prefill out: it holds no decode "
        "slot then)",
    )
    usd_per_million_output_tokens: float
    usd_per_million_total_tokens: float = Field(description="input + output tokens")
    tokens_per_s_per_mw: float = Field(description="output tokens/s per MW of all-in power (incl. PUE)")
    instance_gpus: int = Field(description="GPUs of one (decode) instance: TP x EP x PP group")
    concurrency: int = Field(description="sequences in flight per (decode) instance")
    model: str
    parallelism: str = Field(
        description="'tp' (tensor parallel), 'tep' (MoE: attention TP, experts EP), 'dep' (MoE: "
        "data-parallel attention, experts EP) or 'tp-attention+ep' (MoE: attention TP in groups of "
        "attention_tp GPUs, data parallel across them, experts EP)"
    )
    attention_tp: int = Field(description="GPUs per attention tensor-parallel group")
    precision: str = Field(description="weight precision")
    precision_requested: str | None = Field(
        default=None,
        description="the scenario's precision, where the system has no dense figure for it and "
        "serves the next wider one (precision) instead; null otherwise",
    )
    kv_precision: str
    input_tokens: int
    output_tokens: int
    context_tokens: int = Field(
        default=0,
        description="cached context tokens each request attends to beyond its new prompt (earlier "
        "turns: in its KV cache and attention, not prefilled again)",
    )
    operating_point: str = Field(description="'concurrency', 'target', 'max-throughput' or 'frontier'")
    target_tokens_per_s_per_user: float | None = None
    target_met: bool | None = Field(
        default=None,
        description="whether interactivity_tokens_per_s meets the target (false: no configuration is "
        "that fast)",
    )
    max_concurrency: int = Field(description="KV-capacity limit per instance (after the engine cap per rank)")
    kv_bytes_per_token: float
    weight_gb_per_instance: float
    decode_bound: str = Field(description="'memory' or 'compute': the larger roofline term of a step")
    step_time_ms: float = Field(
        description="one decode step, all sequences of the instance: kernel_time_ms + "
        "collective_time_ms + overhead_ms"
    )
    kernel_time_ms: float = Field(
        description="the step's kernels, each at the slower of its memory and compute time: between "
        "the larger of memory_time_ms and compute_time_ms and their sum"
    )
    memory_time_ms: float = Field(description="HBM traffic of the step's kernels at the decode HBM rate")
    compute_time_ms: float = Field(description="math of the step's kernels at their achieved rates")
    collective_time_ms: float = Field(description="exposed collectives and pipeline hand-offs")
    overhead_ms: float = Field(
        description="what the step takes beyond its kernels' work and collectives: the per-layer "
        "kernel floor and the host's per-step and per-sequence work"
    )
    host_time_ms: float = Field(
        default=0.0,
        description="the engine's host (CPU) loop per decode step over one scheduler rank's sequences "
        "(the stack's host_us_per_sequence; 0 where it prices none): a stack that overlaps it with "
        "the GPU takes the larger of the two per step, another adds them; what it adds is in overhead_ms",
    )
    experts_touched_share: float = Field(description="share of routed expert weights read per step")
    prefill_share: float = Field(
        description="aggregated: share of instance time spent in prefill; disaggregated: share of the "
        "deployment's GPUs in the prefill pool"
    )
    total_tokens_per_s_per_gpu: float = Field(description="input + output tokens/s per GPU")
    speculative_speedup: float = Field(
        description="tokens a decode step gives each sequence on average: 1 without speculative decoding, "
        "else 1 + accepted drafts at draft_depth"
    )
    price_usd_per_gpu_hour: float
    pricing: str = Field(description="'rental:<label>' or 'tco'")
    kw_per_gpu: float = Field(description="node or rack power divided by its accelerators")
    gpus_per_system: int = Field(description="GPUs of one node or rack (a site or an owner holds whole ones)")
    gpus_for_traffic: int | None = Field(
        default=None,
        description="GPUs that serve the traffic: whole copies of an aggregated instance, or disaggregated "
        "pools sized for it (one deployment)",
    )
    systems_for_traffic: int | None = Field(
        default=None,
        description="whole nodes or racks that hold gpus_for_traffic: ceil(gpus_for_traffic / "
        "gpus_per_system), the instances packed (two 36-GPU instances share a 72-GPU rack); the last "
        "one's other GPUs are not priced (GPUs are priced one by one)",
    )
    instances_for_traffic: int | None = Field(
        default=None, description="copies of the deployment for the traffic (pools sized for it: 1)"
    )
    traffic_requests_per_s: float | None = None
    usd_per_million_output_tokens_at_traffic: float | None = Field(
        default=None,
        description="$ per million output tokens at the traffic: gpus_for_traffic at their price over the "
        "traffic's tokens (usd_per_million_output_tokens is at the deployment's full load)",
    )
    prefill_queue_s: float | None = Field(
        default=None,
        description="at a traffic, a disaggregated deployment's mean wait for a prefill instance: "
        "Poisson arrivals at traffic_requests_per_s, each prompt prefill_instance_s of one of the "
        "prefill_instances of every one of instances_for_traffic copies, behind one router (an M/D/c "
        "queue, Cosmetatos's approximation from Erlang C). None without "
        "a traffic, at or past the pool's capacity (rho >= 1: no steady state, the wait grows "
        "without bound), and for an aggregated deployment (its prompts take turns with decode inside "
        "each instance; a request waits for a sequence slot: slot_queue_s)",
    )
    slot_queue_s: float | None = Field(
        default=None,
        description="at a traffic, the mean wait for a free sequence slot: Poisson arrivals at "
        "traffic_requests_per_s, each request holding one of the decode_instances x batch slots "
        "(aggregated: its instance's batch) of every one of instances_for_traffic copies, behind one "
        "router, for output tokens / tokens_per_s_per_user seconds (Little's law), an M/D/c queue "
        "as prefill_queue_s's. None "
        "without a traffic and at or past the slots' capacity (rho >= 1)",
    )
    ttft_at_traffic_s: float | None = Field(
        default=None,
        description="ttft_s + prefill_queue_s (disaggregated) + slot_queue_s: the mean time to first "
        "token at the traffic (ttft_s stays the lone prompt's, the input of tokens_per_s_per_user "
        "and request_tokens_per_s)",
    )
    prefill_utilisation: float | None = Field(
        default=None,
        description="at a traffic, a disaggregated deployment's prefill pool utilisation rho = "
        "traffic_requests_per_s / instances_for_traffic x prefill_instance_s / prefill_instances "
        "(None where prefill_queue_s is)",
    )
    slot_utilisation: float | None = Field(
        default=None,
        description="at a traffic, the sequence slots' utilisation rho = traffic_requests_per_s / "
        "instances_for_traffic x output tokens / tokens_per_s_per_user / (decode_instances x batch), "
        "the mean sequences in flight over the slots (Little's law; None where slot_queue_s is)",
    )
    ttft_target_s: float | None = Field(
        default=None,
        description="at a traffic, the mean time to first token the deployment is sized for "
        "(serving.ttft_target_s in the catalog, a scenario's serving.ttft_target_s): the fewest "
        "GPUs (prefill and decode instances, or copies of an aggregated instance or of pinned pools) "
        "whose ttft_at_traffic_s is within it",
    )
    ttft_target_met: bool | None = Field(
        default=None,
        description="whether ttft_at_traffic_s is within ttft_target_s: some configuration's lone "
        "prompt (ttft_s) is (false: none is; the deployment is then the fewest GPUs with every queue "
        "at its least stable count, rho < 1). None without a traffic",
    )
    configuration: str = Field(
        default="",
        description="the deployment, named: 'DEP8 batch 256' (batch per scheduler rank), 'TP8 PP4 batch "
        "64', '2 prefill x TP2 + 1 decode x DEP8 batch 256'",
    )
    layout: str = Field(default="", description="'tp', 'tep' or 'dep' (decode instance)")
    tp: int = Field(default=1, description="attention tensor parallelism per pipeline stage")
    ep: int = Field(default=1, description="expert parallelism (1: experts tensor parallel or dense)")
    pp: int = Field(default=1, description="pipeline stages (across scale-up domains)")
    attention_dp: int = Field(default=1, description="attention data-parallel ranks per stage")
    eplb: bool = Field(default=False, description="expert-parallel load balancing (redundant experts)")
    batch_per_rank: int = Field(
        default=1, description="sequences per scheduler (attention data-parallel) rank"
    )
    disaggregated: bool = Field(default=False, description="prefill and decode on separate instances")
    decode_instances: int = Field(default=1, description="decode instances of the deployment unit")
    prefill_instances: int = Field(default=0, description="prefill instances of the deployment unit")
    prefill_instance_gpus: int | None = Field(default=None, description="GPUs per prefill instance")
    prefill_configuration: str | None = Field(default=None, description="layout of the prefill instances")
    decode_two_batch_overlap: bool = Field(
        default=False,
        description="decode steps run as two half-batches whose expert dispatch and combine overlap the "
        "other's compute",
    )
    prefill_two_batch_overlap: bool = Field(
        default=False,
        description="prompts run as two half-batches whose expert dispatch and combine overlap the other's "
        "compute (the prefill instances', or the aggregated instance's)",
    )
    deployment_gpus: int | float = Field(
        default=0,
        description="GPUs paid for by one deployment unit: decode and prefill instances, plus the GPUs an "
        "instance that does not tile its scale-up domain strands and the other pool does not fill "
        "(the pools share the domains)",
    )
    stranded_gpus: int | float = Field(
        default=0,
        description="GPUs of the unit left idle by instances that do not tile (net of the other pool's "
        "instances that fill them)",
    )
    deployment_concurrency: int | float = Field(
        default=0,
        description="sequences in flight in the deployment unit on average (Little's law): decode "
        "instances x concurrency, less where a prefill-bound pool leaves decode slots empty",
    )
    expert_imbalance: float = Field(
        default=1.0, description="tokens on the busiest GPU over the mean (routed experts)"
    )
    attention_dp_imbalance: float = Field(
        default=1.0,
        description="attention load of the busiest rank over the mean, as the step prices it (a whole "
        "sequence at least: DEP8 at one sequence 8.0)",
    )
    bottleneck: str = Field(
        default="",
        description="what takes most of the deployment's GPU time: 'prefill' where prefill_share is "
        "over one half, otherwise the largest part of the decode step: 'memory', 'compute', "
        "'collectives' or 'overhead'",
    )
    configurations_searched: int = Field(
        default=0, description="configurations the deployment search evaluated"
    )
    stack: str = Field(
        default="",
        description="serving stack whose efficiencies were used (trtllm, vllm, sglang, atom; 'reference' "
        "where none is measured on the accelerator)",
    )
    stack_family: str | None = Field(default=None, description="accelerator family of the stack's profile")
    stack_borrowed_from: str | None = Field(
        default=None,
        description="'<stack> on <family>' when this stack's profile on this family is borrowed (estimates)",
    )
    stack_release: str | None = Field(
        default=None,
        description="the stack's release whose measured profile was applied (--stack-release); null: "
        "the stack's profile alone",
    )
    speculative_method: str | None = Field(
        default=None, description="speculative decoding draft ('mtp', 'eagle3'); null: no speculation"
    )
    draft_depth: int = Field(default=0, description="draft tokens per decode step (0: no speculation)")
    speculation: str = Field(
        default="off",
        description="speculative decoding in words: 'off', or the draft, its depth and the tokens a step "
        "accepts ('mtp: 2 drafts, 2.43 tokens/step')",
    )


class ServeResult(Result):
    """``ipd serve``: one operating point on one system."""

    schema_version: str = SCHEMA_VERSION
    hardware: str
    description: str
    serving: Serving
    assumptions: list[Assumption]
    overrides: list[str] = Field(default=[], description="--set PATH=VALUE items applied")


class ServeCurveResult(Result):
    """``ipd serve --curve``: the Pareto frontier of throughput per GPU against speed per user over
    every deployment configuration searched."""

    schema_version: str = SCHEMA_VERSION
    hardware: str
    description: str
    model: str
    precision: str
    instance_gpus: int = Field(description="decode instance GPUs of the maximum-throughput point")
    max_concurrency: int = Field(description="KV-capacity limit per instance of the maximum-throughput point")
    max_throughput_configuration: str = Field(
        default="",
        description="the configuration of the maximum-throughput point (the frontier's most tokens/s per "
        "GPU), which instance_gpus and max_concurrency describe; the other points' are in serving",
    )
    configurations_searched: int = Field(
        default=0, description="configurations the deployment search evaluated"
    )
    serving: list[Serving] = Field(
        description="the frontier, slowest user first: no configuration has both more tokens/s per GPU "
        "and more tokens/s per user; each point names its configuration"
    )
    assumptions: list[Assumption]
    overrides: list[str] = Field(default=[], description="--set PATH=VALUE items applied")


class RlPhases(Result):
    """Seconds of each phase of one RL step, before overlap."""

    generation_s: float
    environment_s: float = Field(
        description="sandbox start, verification and CPU stalls not hidden by generation"
    )
    logprob_s: float
    training_s: float
    weight_sync_s: float


class RlGeneration(Result):
    """The terms of phases.generation_s (Little's law on the replicas' decode slots): synchronous
    modes, max(decode_and_tools_s + prefill_s + drain_s, longest_trajectory_s); async,
    max(decode_and_tools_s + prefill_s, staleness_window_s) x (1 + async_waste_fraction)."""

    rollouts: float = Field(
        description="trajectories generated a step (the prompts' samples over the keep fraction)"
    )
    decode_and_tools_s: float = Field(
        description="rollouts x (mean response tokens / decode_tokens_per_s_per_user + turns x tool "
        "latency) / (replicas x concurrency): each decode slot holds one trajectory for its decode "
        "and tool waits"
    )
    prefill_s: float = Field(
        description="rollouts x prompt_prefill_s / replicas: the prompts' prefills, which the replica's "
        "decode slots wait through"
    )
    prompt_prefill_s: float = Field(
        default=0.0,
        description="one prompt's prefill on a replica (its context: prompt and tool observations)",
    )
    drain_s: float = Field(
        description="synchronous: the longest response's tokens beyond the mean at "
        "tail_decode_tokens_per_s_per_user (0 in async)"
    )
    longest_trajectory_s: float = Field(
        description="the longest trajectory: its wait for a free slot (synchronous) + mean response "
        "tokens at decode_tokens_per_s_per_user + the rest of the max response at "
        "tail_decode_tokens_per_s_per_user (async: the whole max response at "
        "decode_tokens_per_s_per_user: engines stay full) + max turns x tool latency"
    )
    tail_decode_tokens_per_s_per_user: float = Field(
        description="decode speed per sequence at tail_concurrency (the last sequences of a step)"
    )
    async_waste_fraction: float = Field(description="async: the share of generation redone (0 otherwise)")
    staleness_window_s: float = Field(
        default=0.0,
        description="async: the least step at which the trajectories in flight (generating, through "
        "their replica's prefills, then in their sandbox's start and verification) stay within "
        "staleness_bound x rollouts, or the sandboxes the host's cores hold where fewer: rollouts x "
        "(one slot's decode and tool waits + start + verification) / that limit + prefill_s "
        "(Little's law; 0 otherwise)",
    )
    queued_start_s: float = Field(
        default=0.0,
        description="synchronous: the longest trajectory's expected wait for a free slot, part of "
        "longest_trajectory_s ((queued / rollouts) x (queued + 1) / 2 x slot time / slots; 0 in async)",
    )


class RlRun(Result):
    """A refresh cycle (steps_per_refresh steps of a synchronous run) and a year of refreshes, each
    step paid staleness_steps_factor / goodput times, lengthened by its share of the periodic
    evaluations and checkpoints (periodic_s_per_step)."""

    steps_per_refresh: int = Field(description="optimiser steps of a synchronous run a refresh takes")
    refreshes_per_year: float
    goodput: float = Field(
        description="share of a run's wall time in useful steps (efficiency.training_goodput, as "
        "pre-training: failures, restarts); the refresh and the year take 1 / goodput more"
    )
    staleness_steps_factor: float = Field(
        description="phi: steps an off-policy run (one-step-off, async) takes per synchronous step "
        "(rl.staleness_steps_factor; 1 when synchronous)"
    )
    staleness_bound_measured: int | None = Field(
        default=None,
        description="off-policy: the largest staleness bound staleness_steps_factor was measured at "
        "(rl.staleness_bound_measured); an async bound beyond it is warned",
    )
    eval_interval_steps: int | None = Field(
        default=None,
        description="optimiser steps between evaluations (workload.eval_interval_steps; none: none)",
    )
    eval_trajectories: float = Field(
        default=0.0, description="trajectories one evaluation generates: eval_tasks x eval_attempts"
    )
    eval_s: float = Field(
        default=0.0,
        description="one evaluation's wall seconds: its trajectories generated on the step's rollout "
        "replicas (the step's generation physics, synchronously) and their sandboxes' start and "
        "verification after the last; the run's other GPUs wait",
    )
    checkpoint_interval_steps: int | None = Field(
        default=None,
        description="optimiser steps between checkpoints (workload.checkpoint_interval_steps; none: none)",
    )
    checkpoint_async: bool = Field(default=False, description="checkpoints written in the background")
    checkpoint_bytes: float = Field(
        default=0.0,
        description="a checkpoint's bytes: the training state without gradients (efficiency."
        "weight_bytes_per_param + optimizer_bytes_per_param, x the model's parameters)",
    )
    checkpoint_write_gb_per_s: float = Field(
        default=0.0,
        description="the rate a checkpoint reaches shared storage: min(the run's GPUs x "
        "rl.storage_write_gb_per_s_per_gpu, the GPUs that hold the state x "
        "rl.storage_node_write_gb_per_s_per_gpu)",
    )
    checkpoint_write_s: float = Field(default=0.0, description="checkpoint_bytes / checkpoint_write_gb_per_s")
    checkpoint_staging_s: float = Field(
        default=0.0,
        description="asynchronous: the copy of each GPU's share of the state to host memory over its "
        "host link, which the run waits for (0 when blocking)",
    )
    checkpoint_exposed_s: float = Field(
        default=0.0,
        description="seconds a checkpoint stops the run: the whole write when blocking; asynchronous, "
        "the staging and any write still running when the next checkpoint is due",
    )
    periodic_s_per_step: float = Field(
        default=0.0,
        description="seconds of the run's GPUs each optimiser step carries for the periodic work: "
        "eval_s / eval_interval_steps + checkpoint_exposed_s / checkpoint_interval_steps",
    )
    wall_days_per_refresh: float
    gpu_hours_per_refresh: float
    usd_per_refresh: float
    gpu_hours_per_year: float
    usd_per_year: float
    energy_mwh_per_year: float


class RlWeightSync(Result):
    """One weight update as a transfer schedule: what it moves and which bound sets its time."""

    transport: str = Field(
        description="nccl-broadcast, nccl-reshard, rdma-p2p, checkpoint-engine or colocated"
    )
    bytes_moved: float = Field(description="bytes delivered to all rollout GPUs together")
    bytes_per_sender: float
    bytes_per_receiver: float
    bound: str = Field(
        description="the term that sets the time (a link, the engine loader, a latency; with a pipelined "
        "stack the gather and the per-tensor software behind it, where they outlast the wire)"
    )
    transfer_s: float = Field(description="the wire (at the link efficiency) and quantisation: senders busy")
    load_s: float = Field(description="the rollout engine's loader, where the wire does not hide it")
    fixed_s: float
    offload_s: float = Field(
        description="colocated: training state to host memory and back, and the engine switch"
    )
    exposed_s: float = Field(description="seconds of the update on the step's critical path")
    hidden_s: float = Field(description="seconds of the update overlapped with generation or training")
    terms_s: dict[str, float] = Field(description="every bound and cost of the update, in seconds")
    composition: str = Field(
        default="",
        description="how transfer_s and load_s are built from terms_s under the transport and the sync "
        "stack's schedule (wire: the longest link bound; software: the engine's per-tensor work)",
    )


class RlTrainerMemory(Result):
    """The training state against the trainer's usable HBM (fully sharded), and in colocated mode
    against host memory, where it waits while rollouts run."""

    training_state_bytes: float
    bytes_per_gpu: float = Field(
        description="the training state fully sharded over all train_gpus (the test that they hold "
        "it); the chosen plan's own per-GPU memory, over the GPUs it uses, is "
        "trainer.memory_bytes_per_gpu"
    )
    usable_hbm_bytes_per_gpu: float
    min_train_gpus: int = Field(
        description="fewest trainer GPUs on which a parallelism plan holds the state, its activations "
        "included (at least the state over usable HBM; the plan's degrees and batch round it up)"
    )
    location_during_rollouts: str = Field(description="HBM (disaggregated) or host memory (colocated)")
    host_bytes_per_gpu: float | None = None
    host_capacity_bytes_per_gpu: float | None = None


class RlTrainer(Result):
    """The trainer's parallelism plan (the pre-training plan search on the training GPUs, the global
    batch pinned to the step's samples at the mean trajectory length) and what it gives."""

    plan: str
    parallelism: TrainingPlan
    sequence_tokens: float = Field(description="tokens per trained sequence: the mean trajectory length")
    global_batch: int = Field(description="sequences per optimizer step: the step's kept samples")
    training_pass_s: float = Field(description="one optimizer step over the step's samples")
    forward_pass_s: float = Field(description="one forward-only (log-prob) pass over them")
    fixed_s: float = Field(description="the calibrated fixed trainer time per RL step")
    mfu: float = Field(description="model FLOPs of the training pass / (GPUs it uses x dense peak)")
    memory_bytes_per_gpu: float = Field(description="peak HBM per GPU of the plan, bytes")
    memory_gb_per_gpu: float = Field(
        description="memory_bytes_per_gpu in GB (10^9 bytes), the unit of pretraining.memory_gb_per_gpu"
    )
    gpus_used: int
    fp8_recipe: str | None = Field(
        default=None,
        description="an FP8 trainer's scaling recipe (the training_plan's fp8_recipe pin, else "
        "tensorwise); null at other precisions",
    )


class Rl(Result):
    model: str
    workload: str
    mode: str
    generation_precision: str = Field(description="weight precision of the rollouts (generation)")
    generation_precision_requested: str | None = Field(
        default=None,
        description="the workload's inference_precision where the system has no dense figure for it "
        "and a comparison (a scenario, or the RL workload compared alone) generates at the next "
        "wider one (generation_precision); null otherwise",
    )
    training_precision: str = Field(description="precision of the trainer's GEMMs")
    training_precision_requested: str | None = Field(
        default=None,
        description="the workload's training_precision where the system has no dense figure for it "
        "and trains at the next wider one (training_precision); null otherwise",
    )
    step_seconds: float
    usd_per_step: float
    gpu_hours_per_step: float
    samples_per_s: float
    phases: RlPhases
    generation: RlGeneration
    hidden_by_overlap_s: float
    usd_per_1k_samples: float
    usd_per_million_generated_tokens: float
    rollouts_per_kwh: float = Field(
        description="rollouts generated (kept or filtered out) per kWh of the step; per kept sample: "
        "usd_per_1k_samples"
    )
    gpus: int
    systems: int = Field(
        default=0,
        description="whole nodes or racks that hold gpus: ceil(gpus / gpus_per_system), the trainer "
        "and the generation pool packed (they share the system where one holds both); the last one's "
        "other GPUs are not priced (GPUs are priced one by one)",
    )
    gpus_per_system: int = Field(default=0, description="GPUs of one node or rack of the system")
    gpus_requested: int | None = Field(
        default=None,
        description="the workload's GPUs when they were too few to run on this system and "
        "grow_gpus_to_fit raised them to `gpus` (else null)",
    )
    cheaper_grown_gpus: int | None = Field(
        default=None,
        description="where grow_gpus_to_fit may grow the workload and its GPUs ran as asked: the GPUs "
        "of the larger run a request too small to split grows to (the trainer's fewest plus the "
        "generation pool with the least cost per step), where that costs less a step than this run "
        "(else null; `ipd rl` only, a comparison does not price it); the request binds, so ask for "
        "these to get it",
    )
    cheaper_grown_usd_per_step: float | None = Field(
        default=None, description="that larger run's cost per step (else null)"
    )
    gpus_cap: int | None = Field(
        default=None,
        description="where the pool search chose `gpus` (a searched split of the workload's gpus, not "
        "pinned): the workload's gpus, the cap it chose within (the trainer and whole rollout "
        "replicas with the least cost per step whose schedule fits the year); else null",
    )
    gpus_cap_step_seconds: float | None = Field(
        default=None, description="the step on all of gpus_cap, split for the shortest step (else null)"
    )
    gpus_cap_usd_per_step: float | None = Field(
        default=None, description="that step's cost on all of gpus_cap (else null)"
    )
    pool_fits_schedule: bool | None = Field(
        default=None,
        description="whether the chosen pool's schedule fits the year (false: no pool within the cap "
        "fits, the fastest on all of it is taken); null where no pool search ran",
    )
    gen_gpus: int
    train_gpus: int
    instance_gpus: int
    replicas: int
    concurrency: int = Field(description="decode sequences per inference instance in the bulk phase")
    max_concurrency: int
    tail_concurrency: float = Field(
        description="sequences a replica decodes at the end of a synchronous step, while the longest "
        "responses drain: the rollouts a replica is given x rl.tail_concurrency_fraction (its long "
        "responses), at most concurrency, at least 1, a mean, not rounded (async keeps its replicas "
        "full and does not use it)"
    )
    decode_tokens_per_s_per_user: float
    cpu_cores_needed: float = Field(
        description="host cores the sandboxes hold at the peak: sequences live in generation (async: "
        "and those in their sandbox's start and verification after it) x sandbox cores each (a peak "
        "above cpu_cores_available queues sandboxes; env_bound says whether that stretches the step)"
    )
    cpu_cores_available: float = Field(description="host cores per GPU x the step's GPUs")
    env_bound: bool = Field(
        description="true when too few host cores leave GPUs waiting for sandboxes: the step's "
        "sandbox core-seconds (every generated trajectory's cores x its lifetime) exceed "
        "cpu_cores_available x the generation time, an average over the step, not the peak"
    )
    sandbox_stall_s: float = Field(
        default=0.0,
        description="seconds of phases.environment_s that generation waits for host cores (the "
        "sandboxes' core-seconds over cpu_cores_available, beyond the generation time; 0 unless "
        "env_bound); the rest is the sandbox start and verification after the last rollout",
    )
    sandbox_cores_bind: bool = Field(
        default=False,
        description="true when the host's cores, one sandbox per trajectory in flight (async: the "
        "verifying ones too), cost the step time: a synchronous step's sequences a replica runs "
        "capped below what its KV cache and the rollouts would give it; async, a generation with "
        "as many sandboxes as it wants sooner than with the host's. phases.generation_s is longer "
        "for it (warned; more host cores, or fewer a sandbox, shorten it)",
    )
    mean_staleness_steps: float | None = Field(
        default=None,
        description="policy versions a rollout is behind the policy it trains, on average: 0 in "
        "colocated and disaggregated steps (and async with staleness_bound 0, which runs as "
        "disaggregated), 1 in one-step-off, rollouts in flight (generating, then in their sandbox's "
        "start and verification) / rollouts per step in async (Little's law)",
    )
    staleness_bound: int | None = Field(
        default=None, description="async: the most policy versions a rollout may be behind on average"
    )
    longest_trajectory_in_flight_s: float | None = Field(
        default=None,
        description="async: the longest trajectory's time in flight: generation.longest_trajectory_s "
        "stretched by its replica's prefills (x generation step / (generation step - prefill_s)), "
        "plus its sandbox's start and verification",
    )
    longest_trajectory_policy_versions: float | None = Field(
        default=None,
        description="async: policy updates during the longest trajectory, "
        "longest_trajectory_in_flight_s / step_seconds (its response at the bulk's "
        "speed, the engines staying full, plus its tool waits and its sandbox's start and "
        "verification, over the step): beyond "
        "staleness_bound it runs on through "
        "in-flight weight updates as a mixed-version rollout (its KV recomputed: "
        "rl.async_waste_fraction) or is aborted",
    )
    latency_bound: bool = Field(
        description="true when the longest trajectory, not throughput, sets generation"
    )
    price_usd_per_gpu_hour: float
    pricing: str
    run: RlRun
    energy_kwh_per_step: float = Field(description="GPU-hours x system kW per GPU x PUE of one step")
    weight_sync: RlWeightSync
    trainer_memory: RlTrainerMemory
    trainer: RlTrainer | None = None

    @property
    def holding_gpus(self) -> int:
        """The trainer GPUs that hold the model and write its checkpoint: those its plan uses, else
        every training GPU (as :func:`~ipd_cli.engine.rl.trainer.trainer_holding_gpus` counts them
        on the engine's trainer)."""
        return self.trainer.gpus_used if self.trainer is not None else self.train_gpus


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
    summary: list[dict] = Field(
        description="per group of cases: cases, reached (cases the model can price), "
        "median_abs_error_pct (percent), within_25_pct (the fraction, 0 to 1, of reached cases "
        "within 25 % of their measurement: 0.787 is 78.7 %), worst_case and worst_error_pct "
        "(signed percent), over_2x (cases off by more than a factor of 2)"
    )


# the intelligence_per_dollar fields the serving point prices (the rest: pre-training, RL, the
# tasks and their success, the site's GPUs)
SERVING_PRICED = frozenset(
    {
        "solved_tasks_per_kusd",
        "usd_per_solved_task",
        "solved_tasks_per_mwh",
        "lifecycle_cost_usd",
        "cost_breakdown_usd.serving",
        "energy_breakdown_mwh.serving",
        "site_tasks_solved_per_day",
    }
)
# a serving point's speed and whether it met the target: what a missed target is measured by
SERVING_SPEED = frozenset(
    {
        "tokens_per_s_per_user",
        "request_tokens_per_s",
        "interactivity_tokens_per_s",
        "ttft_s",
        "tpot_ms",
        "target_met",
    }
)


def priced_at_serving_point(path: str) -> bool:
    """Whether a result's ``path`` (``serving.tokens_per_s_per_gpu``) is priced at the serving
    point, so that a system that misses the interactivity target, priced at its own slower speed,
    is not like for like with one that meets it (a procurement review: GB200 at 172 tokens/s per
    user, its best 137, read "1.62x better" than Rubin, which met it). Not its speed, which says
    by how much the target was missed, nor a price."""
    block, _, key = path.partition(".")
    if block == "serving":
        return key not in SERVING_SPEED and not key.startswith("price_")
    return block == "intelligence_per_dollar" and key in SERVING_PRICED


def metric_paths(model: type[Result], prefix: str = "") -> list[str]:
    """Every dotted path to a number (int or float, not bool) in a result model
    (pretraining.cost_usd, rl.run.usd_per_year): the metrics a sweep, a budget or a CSV column can name."""
    import types
    import typing

    model.model_rebuild()  # resolve the forward references of a deferred result model
    out: list[str] = []
    for name, info in model.model_fields.items():
        ann = info.annotation
        args = typing.get_args(ann) if typing.get_origin(ann) in (typing.Union, types.UnionType) else (ann,)
        for arg in args:
            if hasattr(arg, "model_fields"):
                out += metric_paths(arg, f"{prefix}{name}.")
            elif arg in (int, float) and arg is not bool:
                out.append(f"{prefix}{name}")
    return list(dict.fromkeys(out))
