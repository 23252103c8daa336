"""Pydantic models of the catalog files (the validation boundary).

Every number from the world is a :class:`Sourced` value: the number, the id of a
source (title, URL and date live in a ``sources:`` block), whether it is an
estimate, and optionally the range over which the sources disagree. The engine
never sees these models: :mod:`ipd_cli.engine.inputs` turns them into plain
numbers.
"""

import datetime as dt
import math
import sys
from collections.abc import Callable
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    field_validator,
    model_validator,
)
from pydantic_core import CoreSchema, core_schema

PRECISIONS = ("fp4", "fp8", "bf16")
Precision = Literal["fp4", "fp8", "bf16"]


def _folded(v: object) -> object:
    """A choice as typed, in any case (`FP8`), as the command line's options and names take it (a
    CLI review: `--precision FP8` ran where `precision: FP8` in a workload was refused)."""
    return v.strip().lower() if isinstance(v, str) else v


# FP8 training recipes, as Megatron-Core's --fp8-recipe names them: one scale per tensor from its
# current amax (tensorwise, the default) or from an amax history (delayed), one per 32-value block
# with E8M0 scales (mxfp8, Blackwell's microscaling) or per 128-value tile (blockwise, DeepSeek-V3's)
FP8_RECIPES = ("tensorwise", "delayed", "mxfp8", "blockwise")
WEIGHT_RECIPES = ("bf16", "fp4", *FP8_RECIPES)  # one recipe each for bf16 and fp4 (NVFP4)
Status = Literal["shipping", "announced", "roadmap"]
PriceLabel = Literal["on-demand", "reserved", "spot", "tco-model"]


MAX_SITE_MW = 1e6  # a site power budget above a terawatt is a typo, not a site
# a model deeper than this is a typo, not a model (the deepest published are a few hundred layers);
# the plan searches grow with the depth: `train` at 1e9 layers took 25 s (1e18 ran on), the RL
# trainer's sizes at 100,000 layers 30 s; at 10,000 `rl` ends in 1.6 s
MAX_LAYERS = 10_000


def _number(v: object) -> object:
    """A finite number as written: not a boolean (YAML reads yes/true/on as true, which is 1) nor
    a string ("1.2"), not infinite or NaN, and not a subnormal float (1e-320: below the smallest
    normal double, it has lost its precision and is no real quantity)."""
    if type(v) is float:  # the common case first: every catalog load checks ~1,000 numbers
        if v == 0 or sys.float_info.min <= abs(v) < math.inf:  # NaN and inf fail both
            return v
    elif type(v) is int:  # not bool, whose type is bool
        return v
    if isinstance(v, bool):
        raise ValueError("must be a number, not true/false (YAML reads yes, no, on, off as those)")
    if isinstance(v, str):
        if _numeric(v) and not math.isfinite(float(v)):
            raise ValueError("must be a finite number")
        if _numeric(v) and not v.isascii():  # Python's float() reads full-width digits: YAML does not
            raise ValueError("must be an ASCII number, not text: type its digits as 0-9")
        raise ValueError(f"must be a number, not text{' (remove the quotes)' if _numeric(v) else ''}")
    if not isinstance(v, int | float):
        raise ValueError(f"must be a number, not {'null' if v is None else 'a ' + type(v).__name__}")
    if isinstance(v, float) and not math.isfinite(v):  # `gt=0` lets .inf through: inf/NaN output
        raise ValueError("must be a finite number")
    if isinstance(v, float) and v != 0 and abs(v) < sys.float_info.min:
        raise ValueError(f"must be 0 or at least {sys.float_info.min:.4g} in size (a normal number)")
    return v


def _boolean(v: object) -> object:
    """true or false as written: not 1 or 0, nor the text "false" (pydantic's lax mode read
    `open_weights: "false"` as false and `open_weights: 1` as true, a contract review)."""
    if isinstance(v, bool):
        return v
    quoted = isinstance(v, str) and v.strip().lower() in ("true", "false", "yes", "no", "on", "off")
    raise ValueError(f"must be true or false{' (remove the quotes)' if quoted else ''}")


def speculative_switch(v: object) -> str | int | None:
    """A speculative decoding setting as written (a scenario's serving, an RL workload's rollouts,
    `serve`'s pin through :func:`~ipd_cli.engine.serving.context.speculative_pin`): off, on, auto or
    a draft depth. YAML reads `speculative: off` as false and a sweep gives a depth
    as a float (2.0): both are taken; 1.5, -1 or yes are not (a code review: `off` was refused with
    pydantic's literal text, a sweep over depths refused 0)."""
    if v is None:
        return v
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, str) and v.strip().lower() in ("off", "on", "auto"):
        return v.strip().lower()
    depth = v.strip() if isinstance(v, str) else v
    if isinstance(depth, str) and depth.isdigit():
        depth = int(depth)
    if isinstance(depth, float) and depth.is_integer():
        depth = int(depth)
    if type(depth) is int and depth >= 0:
        return depth
    raise ValueError(
        "must be off, on, auto or a draft depth (0 is off; 1 and up, as far as the draft's acceptance "
        "is measured)"
    )


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class _Before(BeforeValidator):
    """pydantic's BeforeValidator for a function of the value alone, the same core schema without
    inspecting the function's signature at each field that uses it (``inspect.signature``, once
    per field: ~150 fields in a catalog load's schema, a third of its cost)."""

    def __get_pydantic_core_schema__(self, source_type: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(
            self.func,  # type: ignore[arg-type]
            schema=handler(source_type),
            json_schema_input_schema=None,
        )


# Every number field of the catalog and of workloads: strict about its type, lax only about
# 80.0 for an integer 80 (a --vary value comes as a float).
Num = Annotated[float, _Before(_number)]
Int = Annotated[int, _Before(_number)]
Bool = Annotated[bool, _Before(_boolean)]
# a speculative decoding setting (a scenario's serving, an RL workload's rollouts)
Speculative = Annotated[Literal["auto", "off", "on"] | int, _Before(speculative_switch)]
# a workload's or scenario's precision: a choice a user types, in any case (the catalog's keys stay
# as spelt)
ChosenPrecision = Annotated[Precision, _Before(_folded)]


def unit(symbol: str, si: float = 1.0, **kw: Any) -> Any:
    """A field declared with its unit as written in the catalog and the factor to SI.

    The engine reads every input through :class:`ipd_cli.engine.inputs.Inputs`, which returns
    the value times ``si`` (TB/s -> bytes/s, ms -> s, kW -> W, TFLOP/s -> FLOP/s) and records
    the unit; no call site retypes a unit or a scale.
    """
    return Field(json_schema_extra={"unit": symbol, "si": si}, **kw)


def field_unit(cls: type[BaseModel], name: str) -> tuple[str, float] | None:
    """(unit, SI factor) declared on ``cls.name``, or None."""
    info = cls.model_fields.get(name)
    extra = info.json_schema_extra if info is not None else None
    if isinstance(extra, dict) and "unit" in extra:
        return str(extra["unit"]), float(extra.get("si", 1.0))  # type: ignore[arg-type]
    return None


class Strict(BaseModel):
    """Base for every catalog model: unknown keys are errors, models are frozen. Numbers are
    declared ``Num`` or ``Int`` (finite numbers, not booleans or text)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Source(Strict):
    title: str
    url: str | None = None
    date: str = Field(description="publication or retrieval date, YYYY or YYYY-MM or YYYY-MM-DD")

    @field_validator("date", mode="before")
    @classmethod
    def _date_text(cls, v: object) -> object:
        # YAML reads 2026-01-05 as a date and 2026 as an int; keep the text form.
        return v.isoformat() if isinstance(v, dt.date) else str(v) if isinstance(v, int) else v


class Sourced(Strict):
    """A number from the world with its provenance."""

    value: Num
    source: str = Field(description="id of an entry in a `sources:` block")
    estimate: Bool = False
    range: tuple[Num, Num] | None = Field(
        default=None, description="low and high values where sources disagree"
    )
    note: str | None = None

    @model_validator(mode="after")
    def _range_ordered(self) -> Self:
        if self.range is not None:
            lo, hi = self.range
            if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
                raise ValueError(f"range must be [low, high] with low <= high, got {list(self.range)}")
            if not lo <= self.value <= hi:
                raise ValueError(
                    f"value {self.value:g} lies outside its range {list(self.range)}; a range holds "
                    "the values sources give, the catalog value among them"
                )
        return self


class FieldSource(Strict):
    """The source of one of a workload's own numbers (``field_sources``): ``ipd explain`` and the
    assumption lists cite it on that number's row (the workload's ``source`` covers the workload
    as a whole, and its note says which numbers are choices)."""

    source: str = Field(description="id of an entry in a `sources:` block")
    estimate: Bool = False
    note: str | None = None
    value: Num | Bool | str | None = Field(
        default=None,
        description="the value the source gives; where given, a row of another value is not cited "
        "(`ipd workloads show` writes it: a number edited in a copy loses its citation)",
    )


FIELD_SOURCES_HELP = (
    "the source of a workload number, by its field path ('tokens', 'serving.tokens_per_user_s'): "
    "explain cites it on that number's row"
)


# a workload's fields that describe or cite it rather than give a number or choice
UNCITED_FIELDS = frozenset({"field_sources", "source", "note", "description", "kind"})


def check_field_sources(model: BaseModel) -> None:
    """Each ``field_sources`` key is the dotted path of a number (or choice) the workload gives,
    not of a block or of a value that cites its own source (``success_rate: {value, source}``)."""
    for key in getattr(model, "field_sources", {}):
        node: Any = model
        for part in key.split("."):
            fields = type(node).model_fields if isinstance(node, BaseModel) else {}
            if part not in fields or part in UNCITED_FIELDS:
                raise ValueError(
                    f"field_sources: '{key}' is not a number or choice of this workload; give its "
                    "path (e.g. 'tokens', or 'serving.tokens_per_user_s' in a scenario)"
                )
            node = getattr(node, part)
        if node is None:
            raise ValueError(
                f"field_sources: '{key}' is not given by this workload; give it, or drop its source"
            )
        if isinstance(node, BaseModel):
            raise ValueError(
                f"field_sources: '{key}' is a block or a value with its own source; cite the numbers "
                "inside it (a {value, source} value cites its own)"
            )


# Accelerator fields kept for reference, which no estimate reads (a `--set` of one changes nothing,
# and the CLI says so: render.views.unread_overrides), with what is read instead
REFERENCE_ONLY = {
    "fp4_sparse_tflops": "the physics reads the dense peaks",
    "fp8_sparse_tflops": "the physics reads the dense peaks",
    "bf16_sparse_tflops": "the physics reads the dense peaks",
    "fp4_vendor_effective_tflops": "the physics reads the dense peaks",
    "tdp_w": "energy reads each system's power_kw, which tdp_w only checks for plausibility",
}


class Accelerator(Strict):
    vendor: str
    fp4_dense_tflops: Sourced | None = unit("TFLOP/s per GPU", 1e12, default=None)
    fp8_dense_tflops: Sourced | None = unit("TFLOP/s per GPU", 1e12, default=None)
    bf16_dense_tflops: Sourced = unit("TFLOP/s per GPU", 1e12)
    fp4_sparse_tflops: Sourced | None = unit("TFLOP/s per GPU", 1e12, default=None)
    fp8_sparse_tflops: Sourced | None = unit("TFLOP/s per GPU", 1e12, default=None)
    bf16_sparse_tflops: Sourced | None = unit("TFLOP/s per GPU", 1e12, default=None)
    fp4_vendor_effective_tflops: Sourced | None = unit(
        "TFLOP/s per GPU",
        1e12,
        default=None,
        description="vendor figures that are neither dense nor 2:4 sparse (Rubin 'TE')",
    )
    hbm_gib: Sourced = unit(
        "GiB per GPU",
        2**30,
        description="HBM capacity as the vendor labels it: HBM stacks come in binary sizes, so an "
        "'80 GB' H100 holds 81,559 MiB (hardware.yaml source X2); read as 2^30 bytes, not 10^9",
    )
    hbm_tb_per_s: Sourced = unit("TB/s per GPU", 1e12)
    scale_up_gb_per_s_bidir: Sourced = unit("GB/s per GPU", 1e9, description="per GPU, both directions added")
    scale_out_gbit_per_s: Sourced = unit(
        "Gbit/s per GPU", 1e9 / 8, description="scale-out NIC bandwidth per GPU (SI: bytes/s)"
    )
    tdp_w: Sourced = unit("W")
    fp8_gemm_any_layout: Sourced | None = unit(
        "flag",
        default=None,
        description="1 where the GPU's FP8 GEMMs take their operands in any layout, so a per-tensor FP8 "
        "tensor keeps no transpose beside its data (TransformerEngine's nvte_is_non_tn_fp8_gemm_supported: "
        "compute capability 10.x-11.x or 13+); absent or 0: TN only, as Hopper",
    )
    note: str | None = None

    @model_validator(mode="after")
    def _positive(self) -> Self:
        _positive_sourced_and_flags(self, flags=("fp8_gemm_any_layout",))
        return self

    def dense_tflops(self, precision: str) -> Sourced | None:
        return getattr(self, f"{precision}_dense_tflops")


class HostCpu(Strict):
    cores: Int = unit("cores", gt=0)
    threads: Int | None = None
    relative_core_throughput: Sourced | None = unit(
        "ratio to a Grace core",
        default=None,
        description="throughput per core relative to a Grace (Neoverse V2) core",
    )
    source: str
    note: str | None = None

    @model_validator(mode="after")
    def _positive(self) -> Self:
        if self.threads is not None and self.threads < self.cores:
            raise ValueError(f"threads must be >= cores ({self.cores}), got {self.threads}")
        _positive_sourced(self)
        return self


class Price(Strict):
    label: PriceLabel
    usd_per_gpu_hour: Sourced = unit("USD/GPU-h")
    term_years: Num | None = Field(
        default=None,
        gt=0,
        description="contract term of a reserved price in years (a 3-year rate is lower per hour than "
        "a 1-year one; systems priced on different terms are warned); none: on demand or not stated",
    )

    @model_validator(mode="after")
    def _positive(self) -> Self:
        _positive_sourced(self)
        return self


SYSTEM_COUNTS = ("accelerators", "scale_up_domain", "host_cpus", "gpus_per_node")


class System(Strict):
    description: str
    source: str | None = Field(
        default=None,
        description="id of the source of the system's shape: its accelerators, scale-up domain, GPUs "
        "per node and host CPUs (plain counts, cited with it)",
    )
    accelerator: str
    accelerators: Int = unit("GPUs", gt=0, description="accelerators in one node or rack")
    scale_up_domain: Int = unit("GPUs", gt=0, description="GPUs in one scale-up (NVLink/IF) domain")
    host_cpu: str
    host_cpus: Int = unit("CPUs", gt=0)
    power_kw: Sourced = unit("kW", 1e3, description="node or rack power, all accelerators and hosts (SI: W)")
    capex_usd: Sourced = unit("USD", description="purchase price of the node or rack")
    prices: list[Price] = Field(min_length=1)
    status: Status
    unstable: Bool = False
    host_link_gb_per_s: Sourced | None = unit(
        "GB/s per GPU",
        1e9,
        default=None,
        description="CPU-GPU bandwidth per GPU and direction (PCIe or NVLink-C2C)",
    )
    scale_out_gbit_per_s: Sourced | None = unit(
        "Gbit/s per GPU",
        1e9 / 8,
        default=None,
        description="scale-out bandwidth per GPU of this system's fabric, where it differs from the "
        "accelerator's reference node (SI: bytes/s); default: the accelerator's",
    )
    host_link_dedicated: Sourced | None = unit(
        "flag",
        default=None,
        description="1 where the host link carries host copies alone (NVLink-C2C), so an activation "
        "offload sends only the layers that must go; absent or 0: a PCIe link the GPU shares with its "
        "NIC's traffic, charged every layer it could send (a stand-in for that traffic)",
    )
    host_memory_gb: Sourced | None = unit(
        "GB per system",
        1e9,
        default=None,
        description="host (CPU) memory of one node or rack: where offloaded training state goes",
    )
    gpus_per_node: int | None = unit(
        "GPUs",
        default=None,
        gt=0,
        description="GPUs sharing one host and its NICs (a compute tray of a rack); default: accelerators",
    )
    aliases: list[str] = []
    note: str | None = None
    field_sources: dict[str, FieldSource] = Field(
        default_factory=dict,
        description="the source of one of the system's plain counts (accelerators, scale_up_domain, "
        "host_cpus, gpus_per_node) where it is not the system's `source`: explain cites it on that "
        "count's row; with `value`, only while the count is that value",
    )

    @model_validator(mode="after")
    def _positive(self) -> Self:
        _positive_sourced_and_flags(self, flags=("host_link_dedicated",))
        odd = sorted(k for k in self.field_sources if k not in SYSTEM_COUNTS)
        if odd:
            raise ValueError(
                f"field_sources: '{odd[0]}' is not a plain count of this system; cite "
                f"{', '.join(SYSTEM_COUNTS)} here (a {{value, source}} field cites its own)"
            )
        if "gpus_per_node" in self.field_sources and self.gpus_per_node is None:
            raise ValueError(
                "field_sources: 'gpus_per_node' is not given by this system; give it, or drop its source"
            )
        labels = [p.label for p in self.prices]
        twice = sorted({label for label in labels if labels.count(label) > 1})
        if twice:
            raise ValueError(f"prices: label {', '.join(twice)} given twice; keep one price per label")
        if self.scale_up_domain > self.accelerators and self.scale_up_domain % self.accelerators:
            raise ValueError("scale_up_domain must be a multiple of accelerators when it spans nodes")
        if self.scale_up_domain < self.accelerators and self.accelerators % self.scale_up_domain:
            # a node holds whole domains (an input review: 3 on an 8-GPU node priced 1,024 GPUs of
            # a plan on 1,536)
            raise ValueError(
                f"scale_up_domain must divide accelerators ({self.accelerators}) when it lies within a node"
            )
        for name in ("accelerators", "scale_up_domain"):  # the search enumerates a domain's sizes
            if getattr(self, name) > MAX_DOMAIN_GPUS:
                raise ValueError(f"{name} is at most {MAX_DOMAIN_GPUS:,} GPUs, got {getattr(self, name):,}")
        if self.gpus_per_node is not None and self.accelerators % self.gpus_per_node:
            raise ValueError(f"gpus_per_node must divide accelerators ({self.accelerators})")
        return self


WideModule = Literal["attention", "attention_input", "attention_but_kv_up", "lm_head", "router", "mtp"]


class WideModules(Strict):
    """Weights that a model's published checkpoint at a narrow precision keeps wider (``precision``,
    BF16 unless said), with the source that says so: ``attention`` every attention projection of
    every layer, ``attention_input`` all of them but the output projection,
    ``attention_but_kv_up`` all of them but MLA's key-value up-projection, which decode reads at
    the precision (an engine that re-quantizes it for its absorbed decode matmuls: SGLang's MXFP4
    path on CDNA 4; a prompt's up-projection of its cached latents stays wide; ``attention``
    without MLA), ``lm_head`` the output head, ``router`` every routed layer's MoE gate (none in a
    dense model), ``mtp`` the model's next-token (MTP) layer whole, routed experts included (the
    draft of a ``draft: mtp`` method). A list naming several attention modules keeps their union."""

    value: list[WideModule]
    precision: Literal["fp8", "bf16"] = "bf16"
    source: str
    estimate: Bool = False
    note: str | None = None


class CheckpointWide(WideModules):
    """:class:`WideModules` of the checkpoint most deployments run, and of the checkpoints other
    vendors publish for their accelerators (AMD's MXFP4 DeepSeek-R1 quantizes attention too)."""

    by_vendor: dict[str, WideModules] = Field(
        default_factory=dict,
        description="per accelerator vendor (an accelerator's `vendor`): the checkpoint that vendor "
        "publishes, where it keeps other weights wider",
    )


class Model(Strict):
    description: str
    total_params: Num = unit("parameters", gt=0)
    active_params: Num = unit("parameters", gt=0, description="parameters each token passes through")
    layers: Int = unit("layers", gt=0, le=MAX_LAYERS)
    hidden_size: Int = unit("values", gt=0)
    attention_heads: Int = unit("heads", gt=0)
    head_dim: Int = unit("values", gt=0)
    kv_heads: Int | None = Field(default=None, gt=0, description="GQA/MHA KV heads")
    kv_lora_rank: Int | None = Field(default=None, gt=0, description="MLA latent size")
    qk_rope_head_dim: Int | None = Field(default=None, ge=0, description="MLA decoupled RoPE key size")
    qk_nope_head_dim: Int | None = Field(
        default=None,
        gt=0,
        description="MLA query/key head size without RoPE (none: head_dim); + qk_rope_head_dim per q/k head",
    )
    q_lora_rank: Int | None = Field(
        default=None,
        gt=0,
        description="MLA query latent size (none: queries projected from the hidden state)",
    )
    experts: Int = unit("experts", default=1, gt=0, description="routed experts per MoE layer (1 = dense)")
    experts_per_token: Int = unit("experts", default=1, gt=0)
    shared_experts: Int = unit("experts", default=0, ge=0)
    attention_layers: Int | None = Field(
        default=None, gt=0, description="layers that keep a KV cache growing with context (default: all)"
    )
    sliding_window: Int | None = unit(
        "tokens",
        default=None,
        gt=0,
        description="keys each query of a sliding-window attention layer attends to, those layers being "
        "the ones beyond attention_layers (none: they hold no attention, as a hybrid's Mamba layers)",
    )
    vocab_size: Int = unit("tokens", gt=0)
    max_context: Int = unit("tokens", gt=0)
    ffn_hidden_size: Int | None = unit(
        "values", default=None, gt=0, description="dense FFN width (dense models, dense layers of MoE models)"
    )
    moe_ffn_hidden_size: Int | None = unit(
        "values", default=None, gt=0, description="width of one routed (and shared) expert's FFN"
    )
    moe_layers: Int | None = unit(
        "layers", default=None, ge=0, description="layers with routed experts (default: all of an MoE model)"
    )
    gated_ffn: Bool = Field(default=True, description="SwiGLU-style FFN (3 matrices); false: GELU (2)")
    tied_embeddings: Bool = Field(default=False, description="the LM head shares the input embedding")
    qk_norm: Bool = Field(default=False, description="a norm on each head's query and key (Qwen3's QK-Norm)")
    attention_biases: Int = Field(
        default=0,
        ge=0,
        le=4,
        description="bias vectors on the attention projections (Qwen2.5: 3, gpt-oss: 4)",
    )
    attention_sinks: Bool = Field(default=False, description="a learned sink logit per head (gpt-oss)")
    router_bias: Bool = Field(default=False, description="the MoE router has a bias tensor (gpt-oss)")
    expert_biases: Bool = Field(
        default=False,
        description="the routed experts' two projections carry biases (gpt-oss: gate_up_proj_bias and "
        "down_proj_bias); in training the second one is added per expert after its GEMM",
    )
    glu_clamp: Num | None = unit(
        "values",
        default=None,
        gt=0,
        description="the gated FFN clamps its gate half at most and its linear half within +/- this "
        "value before the activation (gpt-oss: swiglu_limit 7.0); none: no clamp",
    )
    fused_expert_tensors: Int | None = Field(
        default=None,
        gt=0,
        description="tensors that hold all of one layer's routed experts where the checkpoint fuses them "
        "(gpt-oss: gate_up_proj, down_proj and their biases, 4); unset: one per expert and matrix",
    )
    fp4_scale_format: Literal["nvfp4", "mxfp4"] = Field(
        default="nvfp4",
        description="the block scales of the model's FP4 checkpoint: nvfp4 (16 values, FP8 scales: "
        "NVIDIA Model Optimizer's exports) or mxfp4 (32 values, E8M0 scales: gpt-oss); a stack's "
        "quantized_dispatch_bytes_per_value.fp4 holds for nvfp4 checkpoints only",
    )
    checkpoint_wide: dict[Literal["fp8", "fp4"], CheckpointWide] = Field(
        default_factory=dict,
        description="per narrow weight precision: what the model's published checkpoint at that "
        "precision keeps wider, and at which precision (default: nothing, every weight at the "
        "precision)",
    )
    training_global_batch_tokens: Sourced | None = unit(
        "tokens",
        default=None,
        description="global batch of the model's pre-training recipe (tokens per step)",
    )
    training_sequence_length: Sourced | None = unit(
        "tokens",
        default=None,
        description="sequence length of the model's pre-training recipe (default: "
        "efficiency.default_training_sequence_length)",
    )
    source: str
    estimate: Bool = False
    aliases: list[str] = []
    note: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.active_params > self.total_params:
            raise ValueError("active_params cannot exceed total_params")
        if (self.kv_heads is None) == (self.kv_lora_rank is None):
            raise ValueError("give exactly one of kv_heads (GQA/MHA) or kv_lora_rank (MLA)")
        if self.kv_heads is not None and self.attention_heads % self.kv_heads:
            # each KV head serves a whole group of query heads (GQA; MHA: one each); a user review:
            # kv_heads 128 with 64 heads tripled the KV cache, 7 with 64 ran silently
            raise ValueError(
                f"kv_heads {self.kv_heads} must divide attention_heads {self.attention_heads} (each KV "
                "head serves a whole group of query heads)"
            )
        if self.q_lora_rank is not None and self.kv_lora_rank is None:
            raise ValueError("q_lora_rank is an MLA size: give kv_lora_rank too")
        if self.qk_nope_head_dim is not None and self.kv_lora_rank is None:
            raise ValueError("qk_nope_head_dim is an MLA size: give kv_lora_rank too")
        if self.experts_per_token > self.experts:
            raise ValueError("experts_per_token cannot exceed experts")
        if not self.is_moe and abs(self.active_params - self.total_params) > 1e-9 * self.total_params:
            # a dense model runs every parameter for every token; a fresh-eyes review: half the
            # active count made training 15 % faster and left serving (which reads the total) as it
            # was, and a total of three times the shapes tripled the served weights alone
            raise ValueError(
                f"a dense model (experts 1) runs every parameter for every token: active_params "
                f"{self.active_params:.4g} must equal total_params {self.total_params:.4g}; change "
                "both, or give experts > 1 for a mixture of experts"
            )
        if self.is_moe and self.experts_per_token < self.experts:
            # the routed parameters are (total - active) / (1 - k/E); k/E of them run per token
            k, e = self.experts_per_token, self.experts
            routed_active = k * (self.total_params - self.active_params) / (e - k)
            if routed_active >= self.active_params:
                raise ValueError(
                    f"active_params {self.active_params:.4g} is below what the routed experts alone "
                    f"activate ({routed_active:.4g}: {k} of {e} experts of the routed parameters, "
                    "total_params - active_params over 1 - experts_per_token / experts); raise "
                    "active_params or lower total_params or experts_per_token"
                )
        self._layer_counts()
        _positive_sourced(self, only=("training_global_batch_tokens", "training_sequence_length"))
        if self.training_sequence_length is not None:
            _whole("training_sequence_length", self.training_sequence_length)
        return self

    def _layer_counts(self) -> None:
        """The layer counts a model names each fit in its layers (and a window has layers to use it)."""
        if self.attention_layers is not None and self.attention_layers > self.layers:
            raise ValueError("attention_layers cannot exceed layers")
        if self.sliding_window is not None and self.kv_layers >= self.layers:
            raise ValueError(
                "sliding_window names the window of the layers beyond attention_layers; give "
                "attention_layers below layers (the full-attention layers) or drop sliding_window"
            )
        if self.moe_layers is not None and self.moe_layers > self.layers:
            raise ValueError("moe_layers cannot exceed layers")

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def routed_layers(self) -> int:
        """Layers with routed experts: moe_layers, or every layer of an MoE model."""
        if not self.is_moe:
            return 0
        return self.moe_layers if self.moe_layers is not None else self.layers

    @property
    def qk_head_dim(self) -> int:
        """Width of one query/key head: head_dim (GQA/MHA); MLA's non-RoPE part + the RoPE key."""
        if self.kv_lora_rank is None:
            return self.head_dim
        return (self.qk_nope_head_dim or self.head_dim) + (self.qk_rope_head_dim or 0)

    @property
    def kv_layers(self) -> int:
        """Layers whose KV cache grows with context: attention_layers, or all layers."""
        return self.attention_layers if self.attention_layers is not None else self.layers


class Economics(Strict):
    electricity_usd_per_kwh: Sourced = unit("USD/kWh")
    pue: Sourced = unit("ratio", description="facility power / IT power")
    depreciation_years: Sourced = unit("years")
    cost_of_capital: Sourced = unit("1/year", description="annual rate, e.g. 0.10")
    utilisation: Sourced = unit("fraction", description="share of hours an owned GPU does paid work")
    opex_fraction_of_capex_per_year: Sourced = unit("fraction of capex per year")
    rental_label_preference: list[PriceLabel] = Field(min_length=1)

    @model_validator(mode="after")
    def _ranges(self) -> Self:
        for name in ("electricity_usd_per_kwh", "cost_of_capital", "opex_fraction_of_capex_per_year"):
            if getattr(self, name).value < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name).value}")
            _range_at_least(name, getattr(self, name), 0)
        if self.pue.value < 1:
            raise ValueError(f"pue must be >= 1 (total power / IT power), got {self.pue.value}")
        _range_at_least("pue", self.pue, 1)
        if self.depreciation_years.value <= 0:
            raise ValueError(f"depreciation_years must be > 0, got {self.depreciation_years.value}")
        _positive_sourced(self, only=("depreciation_years",))
        _fraction("utilisation", self.utilisation)
        return self


class GemmCurve(Strict):
    """GEMMs at one precision: the time of a call of F FLOPs is F / (dense peak x max_share x
    ``Efficiency.training_share`` x recipe_share) + ``Efficiency.gemm_call_overhead_us``, so the
    achieved share of the peak is a curve in the GEMM's size: small GEMMs run far below it."""

    max_share: Sourced = unit(
        "fraction of dense peak", description="share reached by the largest GEMMs (maximum achievable matmul)"
    )
    recipe_share: Sourced = unit(
        "fraction",
        description="share the precision's training recipe keeps (scaling, transforms in the GEMM)",
    )
    max_share_measured_on: list[str] = Field(
        default=[],
        description="accelerators whose own measurement max_share is; any other without an entry in "
        "training_gemm_max_share_by_accelerator borrows it (recorded as an estimate)",
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        _fraction("max_share", self.max_share)
        _fraction("recipe_share", self.recipe_share)
        return self


class Efficiency(Strict):
    training_gemm: dict[Precision, GemmCurve]
    training_gemm_max_share_by_accelerator: dict[str, dict[Precision, Sourced]] = unit(
        "fraction of dense peak",
        default={},
        description="measured best-shape GEMM share per accelerator; replaces the precision's max_share",
    )
    training_fp8_recipe_share: dict[str, Sourced] = unit(
        "fraction of the FP8 GEMM rate",
        description="share of the per-tensor (tensorwise) FP8 GEMM rate an FP8 recipe's GEMMs keep, "
        "by recipe (tensorwise, delayed, mxfp8, blockwise); a plan's fp8_recipe pin chooses one",
    )
    training_fp8_param_gather_bytes: dict[str, Sourced] = unit(
        "bytes",
        description="bytes a parameter the data-parallel all-gather of an FP8 run's weights sends, by recipe "
        "(per-tensor recipes gather the FP8 copy, Megatron's fp8_param_gather; MXFP8 and blockwise "
        "gather BF16), at most weight_bytes_per_param; other precisions gather at weight_bytes_per_param",
    )
    training_cast_bytes: dict[str, Sourced] = unit(
        "bytes",
        description="HBM bytes a value's cast to the GEMM precision moves, by recipe (bf16 none, fp4, the "
        "FP8 recipes): an amax pass where the recipe needs one, the BF16 read and the writes of the "
        "usages a GEMM input needs (row-wise, and column-wise for the weight gradient) on a GPU whose "
        "FP8 GEMMs take any layout; a TN-only GPU adds the per-tensor recipes' transpose",
    )
    training_fp8_transpose_bytes: dict[str, Sourced] = unit(
        "bytes",
        description="bytes a parameter of the FP8 transpose an FP8 recipe's parameters keep beside their "
        "data on a GPU whose FP8 GEMMs are TN only (part of weight_bytes_per_param), by FP8 recipe; a GPU "
        "with fp8_gemm_any_layout keeps none",
    )
    training_amax_reductions: dict[str, Sourced] = unit(
        "all-reduces per GEMM input",
        description="amax all-reduces over the tensor-parallel group per sequence-parallel GEMM input a "
        "recipe quantizes before gathering, by recipe: bf16, fp4 (NVFP4: one, for its per-tensor scale) "
        "and the FP8 recipes (current scaling, tensorwise: one; delayed scaling reduces its amax history "
        "once a step, the block-scaled recipes scale locally: none)",
    )
    training_weight_cache_bytes: dict[str, Sourced] = unit(
        "bytes",
        description="bytes a parameter of the quantized weight copy a low-precision recipe keeps beside its "
        "parameters across micro-batches (TransformerEngine's weight workspace), by recipe: bf16 and fp4 "
        "(NVFP4), and the FP8 recipes by name; none where the parameter is itself the quantized tensor",
    )
    training_tp_userbuffers: dict[str, Sourced] = unit(
        "flag",
        description="1 where a recipe's quantizers support TransformerEngine's userbuffers tensor-parallel "
        "overlap (tp_comm_overlap then hides that share of the sequence-parallel collectives), 0 where "
        "they do not (the NCCL path: the forward's collectives exposed, the backward's column-parallel "
        "scatter and re-gather behind their GEMMs), by recipe: bf16, fp4 (NVFP4) and the FP8 recipes",
    )
    training_sp_gather_bytes: dict[str, Sourced] = unit(
        "bytes",
        description="bytes a value of the sequence-parallel all-gather of a column-parallel layer's input "
        "(forward, and again for its weight gradient), quantized on its shard first, by recipe",
    )
    training_sp_grad_gather_bytes: dict[str, Sourced] = unit(
        "bytes",
        description="bytes a value of the sequence-parallel all-gather of a row-parallel layer's output "
        "gradient in the backward (quantized, with the copies its two GEMMs read), by recipe",
    )
    training_share: Sourced = unit(
        "fraction of max_share",
        description="share of the best-shape GEMM rate a training step's GEMMs sustain (collectives sharing "
        "the SMs, shapes, clocks under load)",
    )
    training_share_by_accelerator: dict[str, Sourced] = unit(
        "fraction of max_share",
        default={},
        description="training_share fitted for one accelerator generation whose software stack differs",
    )
    training_share_fitted_on: list[str] = Field(
        default=[],
        description="accelerators the fitting cases behind training_share ran on (or share their die); "
        "any other without its own entry borrows it (recorded as an estimate)",
    )
    low_precision_gemm_share: dict[Precision, Sourced] = unit(
        "fraction", description="share of linear-layer GEMM FLOPs run at the training precision (rest: BF16)"
    )
    attention_efficiency: Sourced = unit(
        "fraction of BF16 dense peak",
        description="fused (flash) attention, forward and backward; runs in BF16",
    )
    attention_reference_head_dim: Sourced = unit(
        "values", description="head dimension of the kernels attention_efficiency was measured on"
    )
    attention_half_head_share: Sourced = unit(
        "fraction",
        description="fused attention's efficiency at half the reference head dim over the reference's "
        "(a score's fixed softmax cost against matmul work that grows with the head dim)",
    )
    attention_sliding_window_efficiency: Sourced = unit(
        "fraction of BF16 dense peak",
        description="fused sliding-window attention on its band's FLOPs (a short key loop per query tile)",
    )
    attention_backward_flops_ratio: Sourced = unit(
        "ratio", description="attention backward FLOPs / forward FLOPs (the backward recomputes the scores)"
    )
    moe_expert_bias_values: Sourced = unit(
        "values",
        description="HBM traffic, forward and backward together, of adding a routed expert's output bias "
        "after its GEMM, weighted by the routing probability (models with expert_biases), in values "
        "of the hidden size per routed copy of a token",
    )
    glu_clamp_values: Sourced = unit(
        "values",
        description="HBM traffic, forward and backward together, of clamping a routed expert's gated "
        "FFN input before its activation (models with glu_clamp), in values of the expert FFN width "
        "per routed copy of a token",
    )
    gemm_call_overhead_us: Sourced = unit(
        "us", 1e-6, description="fixed time per GEMM or fused-attention call, any precision"
    )
    elementwise_hbm_efficiency: Sourced = unit(
        "fraction", description="achieved share of HBM bandwidth in norms, activations, casts, optimizer"
    )
    tp_comm_overlap: Sourced = unit(
        "fraction", description="share of tensor-parallel collectives hidden behind GEMMs"
    )
    overlap_tax: Sourced = unit(
        "fraction of the hidden time",
        description="compute lost while a collective runs behind it (its kernels take SMs and HBM bandwidth)",
    )
    training_goodput: Sourced = unit(
        "fraction", description="share of a production run's wall time spent in useful steps"
    )
    training_bytes_per_param: Sourced = unit("bytes", description="weights + grads + optimizer state")
    default_training_sequence_length: Sourced = unit(
        "tokens", description="pre-training sequence length of a model whose recipe gives none"
    )
    weight_bytes_per_param: Sourced = unit("bytes", description="working weights (BF16)")
    optimizer_bytes_per_param: Sourced = unit("bytes", description="FP32 master weights and Adam moments")
    optimizer_step_bytes_per_param: Sourced = unit(
        "bytes", description="HBM traffic of one Adam step per parameter (read and write)"
    )
    activation_bytes_per_value: Sourced = unit("bytes")
    logits_bytes_per_value: Sourced = unit("bytes", description="logits held for the loss (FP32)")
    loss_passes_per_logit: Sourced = unit(
        "passes", description="times the loss streams each FP32 logit through HBM (forward and backward)"
    )
    hbm_usable_fraction: Sourced = unit("fraction")
    moe_a2a_bytes_per_value: Sourced = unit("bytes")
    scale_up_link_efficiency: Sourced = unit("fraction")
    scale_out_link_efficiency: Sourced = unit("fraction")
    moe_a2a_overlap: Sourced = unit(
        "fraction", description="share of expert all-to-all hidden behind compute"
    )
    training_step_overhead_ms: Sourced = unit(
        "ms",
        1e-3,
        description="fixed time a training step spends beyond its modelled terms (the optimizer's "
        "launches outside the CUDA graph, the gradient-norm sync, callbacks and logging)",
    )
    moe_eager_layer_ms: Sourced = unit(
        "ms",
        1e-3,
        description="host-bound time of an MoE layer's forward without CUDA graphs over its routing",
    )
    moe_capacity_factor: Sourced = unit(
        "ratio",
        description="expert capacity over the balanced share in a padded token-drop run (routing=token-drop)",
    )
    moe_token_drop_share: Sourced = unit(
        "fraction",
        description="share of the routed expert GEMM rate a padded token-drop run keeps (Megatron 25.09's)",
    )
    default_batch_coefficient: Sourced = unit(
        "tokens/FLOP^exponent",  # the batch in tokens is coefficient x FLOPs^exponent (an explain review)
        description="recipe global batch when a model has none: coefficient x FLOPs^exponent",
    )
    default_batch_exponent: Sourced = unit("exponent")

    @model_validator(mode="after")
    def _fractions(self) -> Self:
        _positive_sourced(self, skip=("moe_a2a_overlap", "tp_comm_overlap"))
        _whole("default_training_sequence_length", self.default_training_sequence_length)
        for name in (
            "hbm_usable_fraction",
            "scale_up_link_efficiency",
            "scale_out_link_efficiency",
            "attention_efficiency",
            "attention_sliding_window_efficiency",
            "elementwise_hbm_efficiency",
            "training_goodput",
            "overlap_tax",
            "moe_token_drop_share",
        ):
            _fraction(name, getattr(self, name))
        half = self.attention_half_head_share
        if not 0.5 < half.value <= 1 or (half.range is not None and not 0.5 < half.range[0]):
            raise ValueError(
                "attention_half_head_share must be in (0.5, 1] (at 0.5 the softmax alone would set the "
                f"time: no head dim would reach the reference), got {half.value}"
            )
        for name in ("moe_a2a_overlap", "tp_comm_overlap"):
            v = getattr(self, name)
            if not 0 <= v.value < 1:
                raise ValueError(f"{name} must be in [0, 1), got {v.value}")
            if v.range is not None and not (0 <= v.range[0] and v.range[1] < 1):
                raise ValueError(f"{name}.range must lie in [0, 1), got {list(v.range)}")
        _every_key("training_gemm", self.training_gemm, PRECISIONS)  # a user file replaces the whole table
        _every_key("low_precision_gemm_share", self.low_precision_gemm_share, PRECISIONS)
        _check_recipe_tables(self)
        for p, s in self.low_precision_gemm_share.items():
            _fraction(f"low_precision_gemm_share.{p}", s)
        for acc, table in self.training_gemm_max_share_by_accelerator.items():
            for p, s in table.items():
                _fraction(f"training_gemm_max_share_by_accelerator.{acc}.{p}", s)
        _fraction("training_share", self.training_share)
        for acc, s in self.training_share_by_accelerator.items():
            _fraction(f"training_share_by_accelerator.{acc}", s)
        if self.weight_bytes_per_param.value + self.optimizer_bytes_per_param.value >= (
            self.training_bytes_per_param.value
        ):
            raise ValueError("training_bytes_per_param must exceed weight + optimizer bytes (gradients)")
        return self


class PretrainWorkload(Strict):
    kind: Literal["pretrain"] = "pretrain"
    description: str
    model: str
    tokens: Num = Field(gt=0)
    deadline_days: Num | None = Field(default=None, gt=0)
    gpus: Int | None = Field(default=None, gt=0)
    precision: ChosenPrecision = "bf16"
    sequence_length: Int | None = Field(
        default=None,
        gt=0,
        description="tokens per sequence (default: the model's training_sequence_length, else "
        "efficiency.default_training_sequence_length)",
    )
    plan: str | None = Field(
        default=None, description="pins on the parallelism plan, e.g. 'tp=4,pp=8,recompute=selective'"
    )
    source: str
    note: str | None = None
    field_sources: dict[str, FieldSource] = Field(default_factory=dict, description=FIELD_SOURCES_HELP)

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if (self.deadline_days is None) == (self.gpus is None):
            raise ValueError("give exactly one of deadline_days or gpus")
        check_field_sources(self)
        return self


def _whole(name: str, v: Sourced) -> None:
    """A count (tokens of a sequence) is a whole number: a fractional one priced FLOPs at it while
    the plan grid divided its integer part (a code review)."""
    if v.value != int(v.value):
        raise ValueError(f"{name} must be a whole number, got {v.value}")


def _positive_sourced(model: BaseModel, skip: tuple[str, ...] = (), only: tuple[str, ...] = ()) -> None:
    """Every spec, power and price in these models must be > 0, and so must its range."""
    for name in only or type(model).model_fields:
        v = getattr(model, name)
        if name in skip:
            continue
        if isinstance(v, Sourced) and v.value <= 0:
            raise ValueError(f"{name} must be > 0, got {v.value}")
        if isinstance(v, Sourced) and v.range is not None and v.range[0] <= 0:
            raise ValueError(f"{name}.range must be > 0 (sweeps draw from it), got {list(v.range)}")


def _positive_sourced_and_flags(model: BaseModel, flags: tuple[str, ...]) -> None:
    """:func:`_positive_sourced`, and each of ``flags`` (sourced 0/1 values) 0 or 1 where given."""
    _positive_sourced(model, skip=flags)
    for name in flags:
        flag = getattr(model, name)
        if flag is not None and flag.value not in (0, 1):
            raise ValueError(f"{name} must be 0 or 1, got {flag.value:g}")


def _every_key(name: str, table: dict, keys: tuple[str, ...]) -> None:
    missing = [k for k in keys if k not in table]
    if missing:
        raise ValueError(f"{name} needs an entry for {', '.join(missing)} (give the whole table)")


# the by-recipe tables besides the recipe share: (name, the recipes it keys, the rule's words, the rule)
RECIPE_TABLE_RULES: tuple[tuple[str, tuple[str, ...], str, Callable[[float], bool]], ...] = (
    # a gather above the weights' own bytes is capped at them (trainplan.derive)
    ("training_fp8_param_gather_bytes", FP8_RECIPES, "> 0", lambda v: v > 0),
    ("training_weight_cache_bytes", WEIGHT_RECIPES, ">= 0", lambda v: v >= 0),
    ("training_tp_userbuffers", WEIGHT_RECIPES, "0 or 1", lambda v: v in (0, 1)),
    ("training_sp_gather_bytes", WEIGHT_RECIPES, "> 0", lambda v: v > 0),
    ("training_sp_grad_gather_bytes", WEIGHT_RECIPES, "> 0", lambda v: v > 0),
    # what is left of the weights is never under an FP8 value's bytes (trainplan.derive)
    ("training_fp8_transpose_bytes", FP8_RECIPES, ">= 0", lambda v: v >= 0),
    ("training_cast_bytes", WEIGHT_RECIPES, ">= 0", lambda v: v >= 0),
    ("training_amax_reductions", WEIGHT_RECIPES, "0 or 1", lambda v: v in (0, 1)),
)


def _check_recipe_tables(e: Efficiency) -> None:
    """The by-recipe tables (the FP8 recipes'; the weight cache's and others, bf16 and fp4 too):
    whole, and each value in its range."""
    for r, s in _recipe_table("training_fp8_recipe_share", e.training_fp8_recipe_share):
        _fraction(f"training_fp8_recipe_share.{r}", s)
    for name, recipes, words, rule in RECIPE_TABLE_RULES:
        for r, s in _recipe_table(name, getattr(e, name), recipes):
            if not rule(s.value):
                raise ValueError(f"{name}.{r} must be {words}, got {s.value}")


def _recipe_table(
    name: str, table: dict[str, Sourced], recipes: tuple[str, ...] = FP8_RECIPES
) -> list[tuple[str, Sourced]]:
    """A by-recipe table's entries, every recipe present and no other key."""
    _every_key(name, table, recipes)
    for r in table:
        if r not in recipes:
            raise ValueError(f"{name}.{r}: not a recipe; one of {', '.join(recipes)}")
    return list(table.items())


def _range_at_least(name: str, s: Sourced, low: float) -> None:
    if s.range is not None and s.range[0] < low:
        raise ValueError(f"{name}.range must be >= {low} (sweeps draw from it), got {list(s.range)}")


def _fraction(name: str, s: Sourced) -> None:
    if not 0 < s.value <= 1:
        raise ValueError(f"{name} must be a fraction in (0, 1], got {s.value}")
    if s.range is not None and not (0 < s.range[0] and s.range[1] <= 1):
        raise ValueError(f"{name}.range must lie in (0, 1] (sweeps draw from it), got {list(s.range)}")


# the most GPUs a node, rack or scale-up domain holds (NVL576 is 576; a TPU pod 9,216): the serving
# search enumerates a domain's divisors (an input review: 1e8 took 40 s, 1e15 never ended)
MAX_DOMAIN_GPUS = 65536

# the most rollouts an RL step may hold (published steps run thousands: DAPO 512 x 16)
MAX_ROLLOUTS_PER_STEP = 100_000_000

# the largest values of the serving search's bounds: its grids grow with each (8-16x the catalog's)
SEARCH_BOUND_CAPS = {"max_instance_domains": 256, "max_batch_per_rank": 65536, "max_decode_instances": 128}
SEARCH_BOUND_CAPS["max_decode_stage_domains"] = SEARCH_BOUND_CAPS["max_instance_domains"]


PROFILE_FRACTIONS = (
    "decode_hbm_efficiency",
    "attention_hbm_efficiency",
    "prefill_moe_compute_share",
    "prefill_pool_moe_compute_share",
    "scale_up_link_efficiency",
)
# a profile's fractions held per weight precision: each key is the precision it was measured or
# fitted at, and holds only there (other precisions run other kernels)
PROFILE_PRECISION_FRACTIONS = ("grouped_gemm_hbm_efficiency", "moe_compute_share")


class NamedChoice(Strict):
    """A name chosen as a default, with the source that makes it the default."""

    value: str
    source: str
    note: str | None = None


class SourcedFlag(Strict):
    """A yes/no property of a stack, with the source that says so (``--set PATH.value=false``
    overrides it, as any sourced value)."""

    value: Bool
    source: str
    estimate: Bool = False
    note: str | None = None


class StackProfile(Strict):
    """What one serving stack achieves on one accelerator family (configs/serving-stacks.yaml).

    A field left out is borrowed: from the profile ``borrow`` names (the value is then an
    estimate for this family, and ``explain`` says so), else from the reference value of the
    ``serving`` section (``grouped_gemm_hbm_efficiency``, at a precision no profile of the chain
    holds, and ``attention_hbm_efficiency`` fall back to the ``decode_hbm_efficiency`` the chain
    gives; ``compute_efficiency_factor`` and ``fp4_compute_efficiency_factor`` to 1)."""

    borrow: str | None = Field(
        default=None,
        description="'<stack>/<family>' or '<family>' (same stack) whose values fill the fields left out",
    )
    decode_hbm_efficiency: Sourced | None = unit(
        "fraction",
        default=None,
        description="achieved share of HBM bandwidth streaming dense weights in decode",
    )
    grouped_gemm_hbm_efficiency: dict[Precision, Sourced] | None = unit(
        "fraction",
        default=None,
        description="achieved share of HBM bandwidth streaming routed-expert weights (the grouped GEMM), "
        "per weight precision it was measured or fitted at (other precisions run other kernels: the "
        "dense decode_hbm_efficiency for theirs)",
    )
    attention_hbm_efficiency: Sourced | None = unit(
        "fraction", default=None, description="achieved share of HBM bandwidth reading the KV cache"
    )
    compute_efficiency_factor: Sourced | None = unit(
        "ratio",
        default=None,
        description="GEMM efficiency relative to the reference decode_compute_efficiency and prefill_mfu",
    )
    decode_attention_compute_factor: Sourced | None = unit(
        "ratio",
        default=None,
        description="decode attention math (MLA's products over the KV cache) against the GEMM rate at "
        "its precision, where the stack's attention kernels measure apart from its GEMMs (default 1)",
    )
    fp4_compute_efficiency_factor: Sourced | None = unit(
        "ratio",
        default=None,
        description="FP4 math only, on top of compute_efficiency_factor: a family whose FP4 peak grew "
        "more than its FP8 and BF16 peaks reaches less of it (default 1)",
    )
    moe_compute_share: dict[Precision, Sourced] | None = unit(
        "fraction",
        default=None,
        description="routed-expert grouped GEMMs' share of the dense GEMM efficiency, per weight precision "
        "it was measured or fitted at (other precisions run other kernels: the reference for theirs)",
    )
    prefill_moe_compute_share: Sourced | None = unit(
        "fraction",
        default=None,
        description="a prompt's routed-expert grouped GEMMs' share of the prefill MFU where experts are "
        "expert parallel (thousands of tokens per expert; default: the MoE share at the weights' precision)",
    )
    prefill_pool_moe_compute_share: Sourced | None = unit(
        "fraction",
        default=None,
        description="the same share on a disaggregated deployment's prefill instances, which run prompts "
        "only (default: prefill_moe_compute_share; an aggregated instance's prompts keep that)",
    )
    scale_up_link_efficiency: Sourced | None = unit(
        "fraction", default=None, description="collectives: achieved / peak per-direction scale-up bandwidth"
    )
    step_overhead_us_per_layer: Sourced | None = unit(
        "us", 1e-6, default=None, description="per decode step and layer: the floor a layer's kernels take"
    )
    disaggregated_step_overhead_us_per_layer: Sourced | None = unit(
        "us",
        1e-6,
        default=None,
        description="the floor per decode step and layer in a disaggregated deployment's decode pool "
        "(decode-only iterations; default: step_overhead_us_per_layer, as an aggregated instance's)",
    )
    dispatch_bytes_per_value: Sourced | None = unit(
        "bytes",
        default=None,
        description="bytes per activation value an expert dispatch sends (the combine sends "
        "collective_bytes_per_value; default: that too)",
    )
    quantized_dispatch_bytes_per_value: dict[Precision, Sourced] | None = unit(
        "bytes",
        default=None,
        description="bytes per activation value an expert dispatch sends where the weights are at that "
        "precision and the stack quantizes the activations before the all-to-all (TensorRT-LLM's "
        "post-quant all-to-all of NVFP4 models: fp4 holds for a model whose fp4_scale_format is "
        "nvfp4); otherwise dispatch_bytes_per_value",
    )
    max_decode_stage_domains: Sourced | None = unit(
        "scale-up domains",
        default=None,
        description="scale-up domains one pipeline stage of a searched decode instance (its tensor- or "
        "expert-parallel group) may span: the widest decode the stack has published on the family "
        "(default: the reference serving.max_decode_stage_domains)",
    )
    two_batch_overlap: SourcedFlag | None = Field(
        default=None,
        description="a prompt's expert dispatch and combine overlap the other half-batch's compute "
        "(data-parallel attention with expert parallelism; default: no)",
    )
    host_us_per_sequence: Sourced | None = unit(
        "us",
        1e-6,
        default=None,
        description="host (CPU) time of the engine's loop per decode step and sequence of a scheduler "
        "rank: scheduling, input preparation, sampler bookkeeping, responses (default: none priced)",
    )
    host_overlaps_gpu: SourcedFlag | None = Field(
        default=None,
        description="the host's loop for one step runs while the GPU runs another (an overlap or "
        "async scheduler): a step takes the larger of the GPU's time and the host's; otherwise "
        "they add (default: no)",
    )
    attention_dp_context_timeout_steps: Sourced | None = unit(
        "steps",
        default=None,
        description="an attention-DP balance that holds a rank's new prompt until every rank has one "
        "to run in the same iteration waits at most this many decode steps (TensorRT-LLM's "
        "attention_dp_config timeout_iters with enable_balance): an aggregated instance's prompts "
        "wait for it before their first token (default: no balance, no wait)",
    )
    attention_min_precision: NamedChoice | None = Field(
        default=None,
        description="attention math runs at the KV precision, never narrower than this (fp4, fp8 or bf16; "
        "default: the reference serving.attention_min_precision)",
    )
    note: str | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        a = self.attention_min_precision
        if a is not None and a.value not in PRECISIONS:
            raise ValueError(f"attention_min_precision is one of {', '.join(PRECISIONS)}, got {a.value!r}")
        for name in PROFILE_FRACTIONS:
            v = getattr(self, name)
            if v is not None:
                _fraction(name, v)
        for name in PROFILE_PRECISION_FRACTIONS:
            for p, v in (getattr(self, name) or {}).items():
                _fraction(f"{name}.{p}", v)
        for name in ("compute_efficiency_factor", "fp4_compute_efficiency_factor"):
            v = getattr(self, name)
            if v is not None and v.value <= 0:
                raise ValueError(f"{name} must be > 0, got {v.value}")
        floors = ("step_overhead_us_per_layer", "disaggregated_step_overhead_us_per_layer")
        for name in (*floors, "host_us_per_sequence", "attention_dp_context_timeout_steps"):
            v = getattr(self, name)
            if v is not None and v.value < 0:
                raise ValueError(f"{name} must be >= 0, got {v.value}")
        if self.max_decode_stage_domains is not None:
            _search_bound("max_decode_stage_domains", self.max_decode_stage_domains.value)
        return self


def _search_bound(name: str, v: float) -> None:
    """A bound on the deployment search: a whole number from 1 to its cap (grids grow with them:
    an input review's 1e4 decode instances asked for 480 TiB)."""
    if v < 1 or v != int(v):
        raise ValueError(f"{name} must be a whole number >= 1, got {v}")
    cap = SEARCH_BOUND_CAPS[name]
    if v > cap:
        raise ValueError(f"{name} bounds the deployment search: at most {cap:,}, got {v:g}")


def borrowed_profile(stack: str, ref: str) -> tuple[str, str]:
    """``'<stack>/<family>'`` or ``'<family>'`` (in ``stack``) as (stack, family)."""
    other, sep, family = ref.partition("/")
    return (other, family) if sep else (stack, ref)


class ReleaseProfile(Strict):
    """What one release of a serving stack costs on one accelerator family beyond the stack's
    profile (configs/serving-stacks.yaml, ``releases.<release>.profiles.<family>``)."""

    prompt_stall_ms: dict[Precision, Sourced] | None = unit(
        "ms",
        1e-3,
        default=None,
        description="the least time an aggregated instance's iteration holding a prompt takes, per weight "
        "precision it was measured at (a release that runs such iterations uncaptured): a prompt "
        "stalls decode for max(the prompt's priced seconds, this); other precisions price none",
    )
    step_overhead_us_per_layer: dict[Precision, Sourced] | None = unit(
        "us",
        1e-6,
        default=None,
        description="the floor per step and layer under this release, per weight precision it was fitted at, "
        "where the stack's profile floor applies (an aggregated decode step, a prompt's latency to its first "
        "token); a disaggregated decode pool keeps its own; other precisions take the stack's profile floor",
    )
    note: str | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        for field in ("prompt_stall_ms", "step_overhead_us_per_layer"):
            for p, v in (getattr(self, field) or {}).items():
                if v.value < 0:
                    raise ValueError(f"{field}.{p} must be >= 0, got {v.value}")
        return self


class StackRelease(Strict):
    """A release of a serving stack whose measured costs differ from the stack's profile: picked
    with ``--stack-release`` (a validation case: its ``stack_release`` input)."""

    description: str
    profiles: dict[str, ReleaseProfile] = Field(
        description="per accelerator family where the release was measured (no borrowing)"
    )
    note: str | None = None


class ServingStack(Strict):
    """A serving engine (TensorRT-LLM, vLLM, SGLang, ATOM) and what it achieves per family."""

    description: str
    source: str
    profiles: dict[str, StackProfile] = Field(
        description="per accelerator family: the measured (or borrowed) efficiencies"
    )
    releases: dict[str, StackRelease] = Field(
        default_factory=dict,
        description="releases measured apart (none picked: the profiles alone, every release alike)",
    )
    note: str | None = None


class AcceleratorFamily(Strict):
    """Accelerators that share serving kernels and software (a GPU generation)."""

    accelerators: list[str] = Field(min_length=1)
    default_stack: NamedChoice = Field(description="the best published stack on this family")
    gemm_share_of_fit: Sourced | None = unit(
        "fraction",
        default=None,
        description="the best-shape BF16 GEMM share (efficiency.training_gemm_max_share_by_accelerator) "
        "the family's fitted GEMM factors stand for, its fitting member's at the fit: every member "
        "with a share of its own computes at that share over this one (none: every member alike)",
    )
    note: str | None = None

    @model_validator(mode="after")
    def _share(self) -> Self:
        if self.gemm_share_of_fit is not None:
            _fraction("gemm_share_of_fit", self.gemm_share_of_fit)
        return self


class DraftWeights(Strict):
    """A draft shipped as a checkpoint of its own: the precision its weights are published and
    measured at, and the vocabulary its head predicts over."""

    precision: Precision
    head_vocab: Int | None = unit(
        "tokens",
        default=None,
        gt=0,
        description="tokens the draft's head predicts over (none: the target's vocabulary)",
    )
    source: str
    note: str | None = None


class DraftShape(Strict):
    """A published EAGLE-3 draft's decoder layer: one Llama layer at the target's hidden size,
    whose query, key and value projections read the target's hidden state concatenated with the
    token's embedding (2 x hidden), after a fusing projection of three target layers' states
    (3 x hidden -> hidden)."""

    ffn_hidden_size: Int = unit("values", gt=0, description="the draft layer's SwiGLU FFN width")
    attention_heads: Int = unit("heads", gt=0)
    kv_heads: Int = unit("heads", gt=0, description="the draft's own KV heads (its KV cache)")
    head_dim: Int = unit("values", gt=0)
    source: str
    note: str | None = None


class DraftShapeRule(Strict):
    """The draft layer assumed for a model without a published EAGLE-3 draft (an estimate): the
    target's query heads and head size, its KV heads where it has grouped-query attention, and
    its dense FFN width where it has one."""

    kv_heads_over_latent: Sourced = unit(
        "heads", description="KV heads of a draft on a latent-attention (MLA) target"
    )
    ffn_hidden_per_hidden: Sourced = unit(
        "ratio", description="FFN width over hidden size for a target without a dense FFN"
    )

    @model_validator(mode="after")
    def _whole_heads(self) -> Self:
        v = self.kv_heads_over_latent
        if v.value < 1 or v.value != int(v.value):
            raise ValueError(f"kv_heads_over_latent: a whole number of heads, at least 1, got {v.value:g}")
        if self.ffn_hidden_per_hidden.value <= 0:
            raise ValueError(
                f"ffn_hidden_per_hidden must be positive, got {self.ffn_hidden_per_hidden.value:g}"
            )
        return self


class PromptSet(Strict):
    """A draft's acceptance measured on one benchmark's prompts, where it differs from the
    method's default (a draft accepts as much by the prompts as by the model: InferenceX's random
    prompts accept as MT-Bench does in the chat template, more without it). Only the depths
    measured on those prompts; the others keep the method's."""

    description: str
    tokens_per_step: dict[int, Sourced] = unit(
        "tokens/step",
        description="per draft depth measured on these prompts: mean tokens a verify step accepts",
    )
    note: str | None = None


class SpeculativeMethod(Strict):
    """A draft for speculative decoding and its measured acceptance.

    ``draft: mtp`` runs the model's own next-token layer (a layer of the target's shape, routed
    experts included) per draft token; ``draft: eagle`` a dense decoder layer of its own shape
    (EAGLE-3: ``draft_shapes`` where one is published, else ``draft_shape_rule``). Each draft
    token also runs the output head."""

    description: str
    draft: Literal["mtp", "eagle"]
    draft_layers: Int = unit("layers", default=1, gt=0, description="layers the draft runs per draft token")
    tokens_per_step: dict[int, Sourced] = unit(
        "tokens/step",
        description="per draft depth (draft tokens per step): mean tokens a verify step accepts, the "
        "bonus token included (1 + accepted drafts)",
    )
    models: list[str] = Field(default=[], description="models this method serves (others: the default)")
    draft_weights: DraftWeights | None = Field(
        default=None,
        description="an EAGLE draft's own checkpoint: its precision and head vocabulary (none: the "
        "target's precision and vocabulary; an MTP layer is part of the target's checkpoint)",
    )
    draft_shapes: dict[str, DraftShape] = Field(
        default={}, description="an EAGLE draft's published layer shape, per model"
    )
    draft_shape_rule: DraftShapeRule | None = Field(
        default=None, description="an EAGLE draft's assumed shape for models without a published one"
    )
    prompt_sets: dict[str, PromptSet] = Field(
        default={},
        description="acceptance measured on a named benchmark's prompts (a validation case's "
        "`prompts` input), per depth measured there; the default `tokens_per_step` is real text's",
    )
    source: str
    note: str | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.draft == "mtp" and (self.draft_shapes or self.draft_shape_rule is not None):
            raise ValueError(
                "draft_shapes and draft_shape_rule describe an EAGLE draft; an MTP draft is a layer of "
                "the target: remove them or set draft: eagle"
            )
        if self.draft == "eagle" and self.draft_shape_rule is None:
            raise ValueError(
                "draft_shape_rule: an EAGLE method needs the draft layer for models without a "
                "published one, e.g. {kv_heads_over_latent: {value: 8, source: ...}, "
                "ffn_hidden_per_hidden: {value: 6, source: ...}}"
            )
        depths = sorted(self.tokens_per_step)
        if not depths or depths != list(range(1, len(depths) + 1)):
            raise ValueError("tokens_per_step needs depths 1, 2, ... without gaps")
        check_acceptance_table("tokens_per_step", {k: v.value for k, v in self.tokens_per_step.items()})
        for name, prompts in self.prompt_sets.items():
            at = f"prompt_sets.{name}.tokens_per_step"
            extra = sorted(set(prompts.tokens_per_step) - set(depths))
            if not prompts.tokens_per_step or extra:
                raise ValueError(
                    f"{at} gives depths the method measures ({', '.join(map(str, depths))}), got "
                    f"{sorted(prompts.tokens_per_step) if not extra else extra}"
                )
            # the table a case on these prompts runs (theirs where measured, the method's elsewhere)
            # is checked where it is built: a --set of the method's own table must not refuse it
            check_acceptance_table(at, {k: v.value for k, v in prompts.tokens_per_step.items()})
        return self


def check_acceptance_table(at: str, table: dict[int, float]) -> None:
    """Tokens a step per draft depth: each between the depth before's (1 without a draft) and
    1 + depth (every draft accepted)."""
    last = 1.0
    for k in sorted(table):
        v = table[k]
        if not last <= v <= k + 1:
            raise ValueError(
                f"{at}.{k} must lie between the depth before ({last:g}) and {k + 1} "
                f"(every draft accepted), got {v:g}"
            )
        last = v


class ServingEfficiency(Strict):
    """Serving formats and achieved efficiencies (configs/serving.yaml, section ``serving``)."""

    bytes_per_weight: dict[Precision, Sourced] = unit(
        "bytes", description="stored bytes per weight, scales included"
    )
    kv_bytes_per_value: dict[Precision, Sourced] = unit("bytes", description="bytes per cached K/V value")
    default_precision: Precision | Literal["narrowest"] = Field(
        description="weight precision when none is asked for; 'narrowest': the narrowest precision the "
        "accelerator has a dense figure for (fp4 on Blackwell and Rubin, fp8 on Hopper, bf16 on Ampere)"
    )
    kv_precisions: list[Precision] = Field(
        min_length=1,
        description="KV-cache precisions the deployment search may choose, where the accelerator has a "
        "dense figure for them (else the next wider one); --kv-precision pins one",
    )
    attention_min_precision: Precision = Field(
        description="attention math runs at the KV precision, never narrower than this"
    )
    checkpoint_wide_default: dict[Literal["fp8", "fp4"], WideModules] = Field(
        default_factory=dict,
        description="what a narrow checkpoint keeps wider for a model without an entry of its own "
        "(models.<model>.checkpoint_wide.<precision> replaces it; an entry of [] keeps nothing)",
    )
    default_input_tokens: Int = unit(
        "tokens", gt=0, description="prompt tokens per request when none are given"
    )
    default_output_tokens: Int = unit(
        "tokens", gt=0, description="generated tokens per request when none are given"
    )
    kv_cache_free_fraction: Sourced = unit(
        "fraction",
        description="share of the HBM left after weights, workspace and activations given to the KV cache",
    )
    workspace_gb_per_gpu: Sourced = unit(
        "GB per GPU",
        1e9,
        description="runtime workspace inside the engine's share: CUDA graphs, NCCL buffers",
    )
    max_num_tokens: Sourced = unit(
        "tokens",
        description="tokens one forward pass holds (the prefill chunk): sizes the activation reserve",
    )
    activation_bytes_per_token_hidden: Sourced = unit(
        "bytes", description="activation bytes reserved per token of a forward pass and hidden unit"
    )
    decode_hbm_efficiency: Sourced = unit("fraction", description="achieved share of HBM bandwidth in decode")
    decode_compute_efficiency: dict[Precision, Sourced] = unit(
        "fraction of dense peak",
        description="achieved share of the dense peak in large-M GEMMs (compute-bound decode, prefill)",
    )
    prefill_mfu: dict[Precision, Sourced] = unit(
        "fraction of dense peak",
        description="achieved share of the dense peak in prefill attention and routed experts",
    )
    moe_compute_share: dict[Precision, Sourced] = unit(
        "fraction",
        description="share of the dense prefill MFU and decode compute efficiency the routed-expert grouped "
        "GEMMs reach, per weight precision",
    )
    expert_imbalance: Sourced = unit(
        "max/mean", description="tokens on the busiest GPU over the mean, at the reference EP, without EPLB"
    )
    expert_imbalance_eplb: Sourced = unit(
        "max/mean", description="the same with expert-parallel load balancing"
    )
    expert_imbalance_reference_ep: Sourced = unit(
        "GPUs", description="EP degree the imbalance was measured at"
    )
    expert_imbalance_reference_experts_per_gpu: Sourced = unit(
        "experts", description="routed experts per GPU where the imbalance was measured"
    )
    eplb_slots_per_gpu: Sourced = unit(
        "experts", description="redundant expert slots per GPU that EPLB adds (memory cost)"
    )
    attention_dp_imbalance: Sourced = unit(
        "max/mean", description="attention load of the busiest data-parallel rank over the mean"
    )
    attention_dp_imbalance_reference_ranks: Sourced = unit(
        "ranks", description="attention data-parallel ranks the imbalance was measured at"
    )
    step_overhead_ms_scale_up: Sourced = unit(
        "ms",
        1e-3,
        description="per decode step: launches, scheduler, sampling (collective latency is counted apart)",
    )
    step_overhead_us_per_layer: Sourced = unit(
        "us", 1e-6, description="per decode step and layer: kernel launches and small kernels"
    )
    step_overhead_us_per_sequence: Sourced = unit(
        "us", 1e-6, description="per decode step and sequence: scheduling, sampling, KV-block bookkeeping"
    )
    draft_pass_overhead_layers: Sourced = unit(
        "layers' floors",
        description="per speculative draft pass, beyond its layer(s): the kernels that embed its input, "
        "gather and sample its token and ready the next pass, as many layers' floors "
        "(step_overhead_us_per_layer of the stack)",
    )
    collective_latency_us_scale_up: Sourced = unit(
        "us", 1e-6, description="fixed latency of one collective (all-reduce, dispatch, combine) in a domain"
    )
    collective_latency_us_scale_out: Sourced = unit(
        "us", 1e-6, description="the same over the scale-out network"
    )
    collective_bytes_per_value: Sourced = unit(
        "bytes", description="activation bytes in tensor/expert collectives"
    )
    scale_up_link_efficiency: Sourced = unit(
        "fraction", description="achieved / peak per-direction scale-up bandwidth"
    )
    scale_out_link_efficiency: Sourced = unit(
        "fraction", description="achieved / line rate of the scale-out NIC"
    )
    overlap_comm_sm_share: Sourced = unit(
        "fraction", description="share of a GPU's SMs communication kernels hold while overlapping compute"
    )
    instance_gpus: list[Int] = Field(
        min_length=1, description="instance sizes tried inside a scale-up domain, smallest first"
    )
    max_instance_domains: Sourced = unit(
        "scale-up domains", description="largest instance tried, in scale-up domains"
    )
    max_decode_stage_domains: Sourced = unit(
        "scale-up domains",
        description="scale-up domains one pipeline stage of a searched decode instance may span, where "
        "the serving stack's profile has no value of its own (serving-stacks.yaml)",
    )
    max_batch_per_rank: Sourced = unit(
        "sequences",
        description="engine cap on concurrent sequences per scheduler (attention data-parallel) rank",
    )
    max_decode_instances: Sourced = unit(
        "instances",
        description="decode instances per prefill pool tried when sizing disaggregated xPyD pools",
    )
    ttft_target_s: Sourced = unit(
        "s",
        description="at a traffic, the mean time to first token (queue wait + prefill + KV hand-off) a "
        "disaggregated deployment's prefill pool is sized for, where the workload sets none",
    )
    step_floor_exponent: Sourced = unit(
        "exponent",
        description="how a layer's floor and its work combine: time = (floor^p + work^p)^(1/p); "
        "1 adds them, a large p takes the larger",
    )
    families: dict[str, AcceleratorFamily] = Field(
        default={}, description="accelerator families: which accelerators share serving stacks"
    )
    stacks: dict[str, ServingStack] = Field(
        default={}, description="serving engines and their efficiencies per accelerator family"
    )
    speculative_methods: dict[str, SpeculativeMethod] = Field(
        default={}, description="speculative decoding drafts and their acceptance per draft depth"
    )
    default_speculative_method: NamedChoice | None = Field(
        default=None, description="the draft for models no method lists"
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        zero_ok: tuple[str, ...] = (
            "step_overhead_us_per_sequence",
            "step_overhead_us_per_layer",
            "workspace_gb_per_gpu",
        )
        zero_ok += ("eplb_slots_per_gpu",)
        zero_ok += ("collective_latency_us_scale_up", "collective_latency_us_scale_out")
        zero_ok += ("draft_pass_overhead_layers",)
        _positive_sourced(self, skip=zero_ok)
        for name in zero_ok:
            if getattr(self, name).value < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name).value}")
        self._check_precision_tables()
        for name in (
            "kv_cache_free_fraction",
            "decode_hbm_efficiency",
            "scale_up_link_efficiency",
            "scale_out_link_efficiency",
            "overlap_comm_sm_share",
        ):
            _fraction(name, getattr(self, name))
        for name in ("expert_imbalance", "expert_imbalance_eplb", "attention_dp_imbalance"):
            if getattr(self, name).value < 1:
                raise ValueError(f"{name} is max/mean: it must be >= 1, got {getattr(self, name).value}")
        if any(g <= 0 for g in self.instance_gpus) or self.instance_gpus != sorted(set(self.instance_gpus)):
            raise ValueError("instance_gpus must be positive, distinct and ascending")
        for name in (
            "expert_imbalance_reference_ep",
            "expert_imbalance_reference_experts_per_gpu",
            "attention_dp_imbalance_reference_ranks",
        ):
            v = getattr(self, name).value
            if v < 1 or v != int(v):
                raise ValueError(f"{name} must be a whole number >= 1, got {v}")
        for name in SEARCH_BOUND_CAPS:
            _search_bound(name, getattr(self, name).value)
        if self.step_floor_exponent.value < 1:
            raise ValueError(f"step_floor_exponent must be >= 1, got {self.step_floor_exponent.value}")
        self._check_stacks()
        return self

    def _check_precision_tables(self) -> None:
        """Every per-precision table has every precision, each value > 0 (efficiencies <= 1)."""
        tables = ("bytes_per_weight", "kv_bytes_per_value", "decode_compute_efficiency", "prefill_mfu")
        for name in (*tables, "moe_compute_share"):
            table = getattr(self, name)
            missing = [p for p in PRECISIONS if p not in table]
            if missing:
                raise ValueError(f"{name} needs a value for {', '.join(missing)}")
            for p, s in table.items():
                if s.value <= 0:
                    raise ValueError(f"{name}.{p} must be > 0, got {s.value}")
                if name in ("decode_compute_efficiency", "prefill_mfu", "moe_compute_share"):
                    _fraction(f"{name}.{p}", s)

    def _check_stacks(self) -> None:
        owner: dict[str, str] = {}
        for fam, f in self.families.items():
            for acc in f.accelerators:
                if acc in owner:
                    raise ValueError(f"families: {acc} is in both {owner[acc]} and {fam}")
                owner[acc] = fam
            stack = self.stacks.get(f.default_stack.value)
            if stack is None or fam not in stack.profiles:
                raise ValueError(  # with the fix (a fresh-eyes review: a new family had none)
                    f"families.{fam}.default_stack: '{f.default_stack.value}' has no profile for {fam}; "
                    "list its accelerators in an existing family instead, or give the stack a profile "
                    f"for it (`profiles: {{{fam}: {{borrow: FAMILY}}}}` in a copy of the whole "
                    f"`stacks.{f.default_stack.value}` entry)"
                )
        for name, st in self.stacks.items():
            for fam, prof in st.profiles.items():
                if fam not in self.families:
                    raise ValueError(f"stacks.{name}.profiles: unknown family '{fam}'")
                seen = {(name, fam)}
                at = (name, fam, prof)
                while at[2].borrow is not None:
                    ref = borrowed_profile(at[0], at[2].borrow)
                    target = self.stacks.get(ref[0])
                    if target is None or ref[1] not in target.profiles:
                        raise ValueError(
                            f"stacks.{at[0]}.profiles.{at[1]}.borrow: no profile '{at[2].borrow}'"
                        )
                    if ref in seen:
                        raise ValueError(
                            f"stacks.{name}.profiles.{fam}.borrow: a cycle through {ref[0]}/{ref[1]}"
                        )
                    seen.add(ref)
                    at = (ref[0], ref[1], target.profiles[ref[1]])
        if self.speculative_methods and self.default_speculative_method is None:
            raise ValueError("default_speculative_method: name the draft for models no method lists")
        if (
            self.default_speculative_method is not None
            and self.default_speculative_method.value not in self.speculative_methods
        ):
            raise ValueError(
                f"default_speculative_method: unknown method '{self.default_speculative_method.value}'"
            )


RlMode = Literal["colocated", "disaggregated", "one-step-off", "async"]
RL_MODES = ("colocated", "disaggregated", "one-step-off", "async")
SyncTransport = Literal["nccl-broadcast", "nccl-reshard", "rdma-p2p", "checkpoint-engine", "colocated"]
SYNC_TRANSPORTS = ("nccl-broadcast", "nccl-reshard", "rdma-p2p", "checkpoint-engine", "colocated")
# the software that drives a weight update: one entry per framework's weight-update path
SyncStackName = Literal["nemo-rl", "verl", "verl-per-tensor", "slime", "checkpoint-engine", "perplexity"]
SYNC_STACKS = ("nemo-rl", "verl", "verl-per-tensor", "slime", "checkpoint-engine", "perplexity")
StackSchedule = Literal["pipelined", "serial", "stage-lock"]
TensorWork = Literal["trainer", "engine"]


class RlWorkload(Strict):
    """One RL post-training step (GRPO/PPO family): rollouts, environment, training, sync."""

    kind: Literal["rl"] = "rl"
    description: str
    model: str
    prompts_per_step: Int = Field(gt=0)
    group_size: Int = Field(gt=0, description="samples per prompt")
    keep_fraction: Num = Field(default=1.0, gt=0, le=1, description="share of rollouts kept after filtering")
    prompt_tokens: Int = Field(gt=0)
    observation_tokens: Int = Field(default=0, ge=0, description="tool output tokens appended per trajectory")
    mean_response_tokens: Num = Field(gt=0, description="generated tokens per trajectory, mean")
    max_response_tokens: Int = Field(gt=0, description="the longest trajectory of a step")
    turns: Num = Field(default=1, ge=1, description="agent turns per trajectory, mean")
    max_turns: Int = Field(default=1, ge=1)
    tool_latency_s: Num = Field(default=0, ge=0, description="wall time per tool call")
    sandbox_boot_s: Num = Field(default=0, ge=0)
    verify_s: Num = Field(default=0, ge=0, description="final test/verification on one reference core")
    sandbox_cores: Num = Field(default=0, ge=0, description="CPU cores held by one live sandbox")
    logprob_passes: Int = Field(default=1, ge=0, description="extra forward passes: old policy, reference")
    ppo_epochs: Int = Field(default=1, ge=1)
    inference_precision: ChosenPrecision = Field(
        default="fp8",
        description="rollout (generation) precision",
        json_schema_extra={"reported_as": "generation_precision"},  # the RL result's name for it
    )
    training_precision: ChosenPrecision = "bf16"
    sync_precision: ChosenPrecision = "bf16"
    mode: RlMode = "colocated"
    staleness_bound: Int = Field(default=1, ge=0, description="async: max policy versions behind")
    partial_rollouts: Bool = Field(
        default=True,
        description="async: a trajectory runs on through in-flight weight updates as a mixed-version "
        "rollout (AReaL's interruptible rollouts, NeMo RL's in-flight updates), so the longest may "
        "span more policy versions than staleness_bound; false: every trajectory, from its start "
        "to the trainer, spans at most staleness_bound updates (the step is at least the longest "
        "trajectory's time in flight / staleness_bound)",
    )
    sync_transport: SyncTransport | None = Field(
        default=None,
        description="how weights reach the rollout engines (default: colocated in colocated mode, "
        "else the catalog's rl.default_sync_transport)",
    )
    sync_stack: SyncStackName | None = Field(
        default=None,
        description="the framework that drives the weight update (its software costs and what overlaps; "
        "default: the catalog's rl.default_sync_stack)",
    )
    speculative: Speculative = Field(
        default="off",
        description="speculative decoding of the rollouts: off, on (the draft depth searched), auto (the "
        "deployment search decides) or a draft depth",
    )
    generation_layout: str | None = Field(
        default=None,
        description="serving layout of each rollout replica as a run published it (tp8, tep16, dep8, "
        "tp8pp2; default: searched, the fastest for the step)",
    )
    generation_stack: str | None = Field(
        default=None,
        description="serving stack the rollout engines run (serving.stacks: trtllm, vllm, sglang; "
        "default: the system's family default, the best published there)",
    )
    generation_stack_release: str | None = Field(
        default=None,
        description="a release of that stack measured apart, as `ipd serve --stack-release` "
        "(serving.stacks.<stack>.releases: trtllm 1.1.0rc2, whose prompts stall a replica's decode); "
        "default: the stack's profile, every release alike",
    )
    training_plan: str | None = Field(
        default=None,
        description="the trainer's parallelism as a run published it, in `ipd train --plan` form "
        "(tp=2,cp=2,ep=16,pp=8); the rest of the plan is searched (default: all of it)",
    )
    gpus: Int | None = Field(
        default=None,
        gt=0,
        description="total GPUs; disaggregated modes split them. A cap (the cluster available): a "
        "searched split (or a colocated step) runs on the pool within it with the least cost per step "
        "whose schedule fits the year; pin_gpus (or `ipd rl --gpus`) runs on all of them",
    )
    pin_gpus: Bool = Field(
        default=False,
        description="run a searched split (the one with the shortest step) or a colocated step on all "
        "of `gpus`, not the cheapest pool within them: a measured cluster, a deployment already bought",
    )
    gen_gpus: Int | None = Field(default=None, gt=0, description="generation GPUs (disaggregated modes)")
    train_gpus: Int | None = Field(default=None, gt=0, description="training GPUs (disaggregated modes)")
    grow_gpus_to_fit: Bool = Field(
        default=False,
        description="when `gpus` cannot hold the training state plus one generation instance on a "
        "system, run on the fewest GPUs that can (the result says so in gpus_requested) instead of "
        "refusing: for comparisons across systems whose HBM differs",
    )
    steps_per_refresh: Int = Field(default=100, gt=0)
    refreshes_per_year: Num = Field(default=12, gt=0)
    eval_interval_steps: Int | None = Field(
        default=None,
        gt=0,
        description="optimiser steps between evaluations of the policy (none: the run evaluates nothing); "
        "each evaluation generates eval_tasks x eval_attempts trajectories of the step's shape on the "
        "rollout GPUs, synchronously, while the run's other GPUs wait",
    )
    eval_tasks: Int = Field(
        default=0, ge=0, description="tasks in the evaluation set (SWE-bench Verified: 500)"
    )
    eval_attempts: Int = Field(default=1, ge=1, description="attempts per evaluation task (pass@k's k)")
    checkpoint_interval_steps: Int | None = Field(
        default=None,
        gt=0,
        description="optimiser steps between checkpoints of the training state (weights and optimizer "
        "state; none: the run writes none)",
    )
    checkpoint_async: Bool = Field(
        default=False,
        description="checkpoints written in the background (Megatron-LM's async save): the step waits "
        "only for the copy to host memory, and for a write still running when the next checkpoint "
        "is due; false: the run waits for the whole write",
    )
    source: str
    note: str | None = None
    field_sources: dict[str, FieldSource] = Field(default_factory=dict, description=FIELD_SOURCES_HELP)

    @model_validator(mode="after")
    def _lengths(self) -> Self:
        if self.max_response_tokens < self.mean_response_tokens:
            raise ValueError(
                f"max_response_tokens ({self.max_response_tokens:g}) must be >= mean_response_tokens "
                f"({self.mean_response_tokens:g})"
            )
        if self.max_turns < self.turns:
            raise ValueError(f"max_turns ({self.max_turns:g}) must be >= turns ({self.turns:g})")
        rollouts = self.prompts_per_step * self.group_size
        if rollouts > MAX_ROLLOUTS_PER_STEP:  # 1e15 ran for minutes (an input review)
            raise ValueError(
                f"prompts_per_step x group_size is {rollouts:,} rollouts a step; at most "
                f"{MAX_ROLLOUTS_PER_STEP:,} (published steps run thousands)"
            )
        if (self.gen_gpus is None) != (self.train_gpus is None):
            raise ValueError("give both gen_gpus and train_gpus, or neither")
        if self.gpus is None and self.gen_gpus is None:
            raise ValueError("give gpus (total) or gen_gpus and train_gpus")
        check_field_sources(self)
        return self

    def given_split(self) -> tuple[int, int] | None:
        """(gen_gpus, train_gpus) when the workload gives both (it gives both or neither)."""
        if self.gen_gpus is None or self.train_gpus is None:
            return None
        return self.gen_gpus, self.train_gpus

    def total_gpus(self) -> int:
        """All GPUs of the run: ``gpus``, else ``gen_gpus + train_gpus``."""
        if self.gpus is not None:
            return self.gpus
        given = self.given_split()
        if given is None:  # the validator refuses this; a model_copy(update=...) could still make it
            raise ValueError("give gpus (total) or gen_gpus and train_gpus")
        return given[0] + given[1]


class TransportChoice(Strict):
    """A weight-sync transport chosen as a default, with the source that makes it the default."""

    value: SyncTransport
    source: str
    note: str | None = None


class StackChoice(Strict):
    """A weight-sync stack chosen as a default, with the source that makes it the default."""

    value: SyncStackName
    source: str
    note: str | None = None


class ScheduleChoice(Strict):
    """How a stack orders its software and the wire, with the source (code or design doc) that shows it.

    ``pipelined``: double buffers overlap the per-tensor work with the wire; ``serial``: each bucket
    waits for the engines before the next leaves; ``stage-lock``: serial, and the trainer's pipeline
    stages take turns on one broadcast lock (one sender at a time)."""

    value: StackSchedule
    source: str
    note: str | None = None


class TensorWorkChoice(Strict):
    """Where a stack's per-tensor work runs: on the ``trainer`` (parameter generation, a collective
    per tensor: every update pays it) or in the rollout ``engine`` (its weight loader: paid only
    where the receivers load)."""

    value: TensorWork
    source: str
    note: str | None = None


class SyncStack(Strict):
    """One framework's weight-update software (configs/rl.yaml ``rl.sync_stacks``): what it costs
    beyond the wire and what it overlaps. Fields a framework's design lacks are left out."""

    schedule: ScheduleChoice
    tensor_work: TensorWorkChoice
    tensor_us: Sourced = unit(
        "us per tensor",
        1e-6,
        description="software per weight tensor on the update's critical path (engine loader, "
        "per-tensor collective, trainer-side parameter generation)",
    )
    ipc_gb_per_s: Sourced | None = unit(
        "GB/s per GPU",
        1e9,
        default=None,
        description="colocated: model bytes per GPU through the CUDA-IPC hand-off and the engine's load",
    )
    replica_tensor_us: Sourced | None = unit(
        "us per tensor",
        1e-6,
        default=None,
        description="rdma-p2p through a CPU engine replica: per weight tensor loaded into the replica",
    )
    colocated_overhead_s: Sourced | None = unit(
        "s",
        default=None,
        description="colocated: what the framework's update timer holds beyond the transfer "
        "(engine pause and cache flush, re-creating the process groups freed at offload, barriers)",
    )

    @model_validator(mode="after")
    def _positive(self) -> Self:
        if self.tensor_us.value < 0:
            raise ValueError("tensor_us must be >= 0")
        for name in ("ipc_gb_per_s",):
            v = getattr(self, name)
            if v is not None and v.value <= 0:
                raise ValueError(f"{name} must be > 0")
        for name in ("replica_tensor_us", "colocated_overhead_s"):
            v = getattr(self, name)
            if v is not None and v.value < 0:
                raise ValueError(f"{name} must be >= 0")
        return self


class RlEfficiency(Strict):
    """Achieved efficiencies of the RL loop (configs/rl.yaml, section ``rl``)."""

    trainer_efficiency: dict[Literal["dense", "moe"], Sourced] = unit(
        "fraction", description="share of the parallelism plan search's training speed an RL trainer reaches"
    )
    step_fixed_s: Sourced = unit(
        "s", description="per-step fixed overhead: optimiser, orchestration, logging"
    )
    tail_concurrency_fraction: Sourced = unit(
        "fraction", description="sequences decoding in the drain / rollouts a replica is given"
    )
    async_waste_fraction: Sourced = unit(
        "fraction", description="generation redone in async mode (aborts, KV recompute)"
    )
    staleness_steps_factor: Sourced = unit(
        "ratio", description="phi(eta): optimiser steps an off-policy run needs per synchronous step"
    )
    staleness_bound_measured: Sourced = unit(
        "policy versions", description="the largest staleness bound staleness_steps_factor was measured at"
    )
    sync_link_efficiency: dict[SyncTransport, Sourced] = unit(
        "fraction", description="achieved share of the binding path's line rate, per weight-sync transport"
    )
    sync_stacks: dict[SyncStackName, SyncStack] = Field(
        description="per framework: the weight-update software's costs and schedule"
    )
    default_sync_stack: StackChoice = Field(description="weight-sync stack when a workload names none")
    broadcast_senders: Sourced = unit(
        "GPUs", description="trainer GPUs that broadcast the full tensors (nccl-broadcast)"
    )
    default_sync_transport: TransportChoice = Field(
        description="weight-sync transport of disaggregated modes when a workload names none"
    )
    sync_fixed_s: Sourced = unit(
        "s", description="fixed latency of one weight update: barriers, gather, reshard"
    )
    engine_switch_s: Sourced = unit(
        "s", description="colocated: waking/sleeping the inference engine per step"
    )
    offload_bytes_per_param: Sourced = unit(
        "bytes", description="colocated: training state moved to host and back"
    )
    default_host_link_gb_per_s: Sourced = unit(
        "GB/s per GPU", 1e9, description="CPU-GPU bandwidth per GPU when a system has none"
    )
    storage_write_gb_per_s_per_gpu: Sourced = unit(
        "GB/s per GPU",
        1e9,
        description="a GPU's share of the shared storage's aggregate write bandwidth: a run's "
        "checkpoint is written at no more than this times the run's GPUs",
    )
    storage_node_write_gb_per_s_per_gpu: Sourced = unit(
        "GB/s per GPU",
        1e9,
        description="a node's write bandwidth to the shared storage per GPU: the GPUs that hold the "
        "training state write their checkpoint at no more than this each",
    )

    @model_validator(mode="after")
    def _ranges(self) -> Self:
        _fraction("tail_concurrency_fraction", self.tail_concurrency_fraction)
        _every_key("sync_link_efficiency", self.sync_link_efficiency, SYNC_TRANSPORTS)
        for k, v in self.sync_link_efficiency.items():
            _fraction(f"sync_link_efficiency.{k}", v)
        _every_key("sync_stacks", self.sync_stacks, SYNC_STACKS)
        if self.broadcast_senders.value < 1 or self.broadcast_senders.value != int(
            self.broadcast_senders.value
        ):
            raise ValueError(
                f"broadcast_senders must be a whole number >= 1, got {self.broadcast_senders.value}"
            )
        if self.default_sync_transport.value == "colocated":
            raise ValueError("default_sync_transport is for disaggregated modes; 'colocated' is not one")
        _every_key("trainer_efficiency", self.trainer_efficiency, ("dense", "moe"))
        for family, v in self.trainer_efficiency.items():
            _fraction(f"trainer_efficiency.{family}", v)
        if not 0 <= self.async_waste_fraction.value < 1:
            raise ValueError("async_waste_fraction must be in [0, 1)")
        if self.staleness_steps_factor.value < 1:
            # a code review: 0.5 halved the RL run's cost without a word
            raise ValueError(
                "staleness_steps_factor must be >= 1 (the steps an off-policy run takes per synchronous "
                f"step; AReaL measured 1.0 up to staleness 4), got {self.staleness_steps_factor.value}"
            )
        bound = self.staleness_bound_measured.value
        if bound < 0 or bound != int(bound):
            raise ValueError(f"staleness_bound_measured must be a whole number >= 0, got {bound}")
        for name in ("step_fixed_s", "sync_fixed_s", "engine_switch_s", "offload_bytes_per_param"):
            if getattr(self, name).value < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.default_host_link_gb_per_s.value <= 0:
            raise ValueError("default_host_link_gb_per_s must be > 0")
        for name in ("storage_write_gb_per_s_per_gpu", "storage_node_write_gb_per_s_per_gpu"):
            if getattr(self, name).value <= 0:
                raise ValueError(f"{name} must be > 0")
        return self


# ScenarioPretraining's defaults, which open weights (nothing to share) leave as they are
DEFAULTS = {"amortisation_years": 2.0, "deployments": 1.0}


class ScenarioPretraining(Strict):
    """How pre-training enters the lifecycle: computed, given, or not paid (open weights)."""

    workload: str | None = Field(default=None, description="a pretrain workload computed on each system")
    open_weights: Bool = False
    cost_usd: Num | None = Field(default=None, ge=0, description="a given pre-training cost instead")
    amortisation_years: Num = Field(
        default=DEFAULTS["amortisation_years"], gt=0, description="years over which the model earns"
    )
    deployments: Num = Field(
        default=DEFAULTS["deployments"],
        ge=1,
        description="deployments sharing the pre-training cost (this one among them: at least 1; a "
        "fraction below 1 charged more than the whole run, a user review)",
    )

    @model_validator(mode="after")
    def _one_way(self) -> Self:
        given = [self.workload is not None, self.open_weights, self.cost_usd is not None]
        if sum(given) != 1:
            raise ValueError("give exactly one of workload, open_weights: true or cost_usd")
        # open weights cost nothing to share: a field that shares it would be read by nothing (the
        # defaults pass, as `ipd workloads show -f yaml` writes them)
        shared = [k for k in ("amortisation_years", "deployments") if getattr(self, k) != DEFAULTS[k]]
        if self.open_weights and shared:
            raise ValueError(
                f"{' and '.join(shared)} share a pre-training cost, and open weights have none: "
                "remove them, or give workload or cost_usd instead of open_weights"
            )
        return self


class ScenarioPostTraining(Strict):
    """Continuous RL post-training: an RL workload run for a number of steps, or for a budget."""

    workload: str
    steps_per_refresh: Int | None = Field(default=None, gt=0)
    refreshes_per_year: Num | None = Field(default=None, gt=0)
    budget_usd_per_year: Num | None = Field(default=None, gt=0, description="spend this on RL instead")

    @model_validator(mode="after")
    def _one_schedule(self) -> Self:
        # a budget buys the refreshes (of steps_per_refresh steps each): a count beside it was
        # dropped without a word (a scenario author's review)
        if self.budget_usd_per_year is not None and self.refreshes_per_year is not None:
            raise ValueError(
                "budget_usd_per_year sets the refreshes a year (what it buys); remove "
                "refreshes_per_year or the budget"
            )
        return self


class ScenarioServing(Strict):
    """The serving workload: tasks, tokens per task, interactivity."""

    tasks_per_day: Num = Field(gt=0)
    requests_per_task: Int = Field(default=1, gt=0, description="model calls (turns) per task attempt")
    input_tokens_per_request: Int = Field(gt=0, description="new (not cached) prompt tokens per call")
    output_tokens_per_request: Int = Field(gt=0)
    context: Literal["fresh", "carried"] = Field(
        default="fresh",
        description="fresh: each call starts a new context; carried: each call attends to its "
        "task's earlier calls (their prompts and outputs, cached), (requests_per_task - 1) / 2 x "
        "(input + output) tokens a call on average",
    )
    tokens_per_user_s: Num | None = Field(default=None, gt=0, description="interactivity target")
    ttft_target_s: Num | None = Field(
        default=None,
        gt=0,
        description="the mean time to first token at the scenario's traffic (queue wait + prefill) "
        "the prefill pool is sized for; unset: the catalog's serving.ttft_target_s",
    )
    precision: ChosenPrecision | None = None
    speculative: Speculative | None = Field(
        default=None,
        description="speculative decoding, as `ipd serve --speculative`: off, on (a searched depth), "
        "auto or a draft depth; unset: searched (off or any depth)",
    )
    stack_release: str | None = Field(
        default=None,
        description="a release of each system's serving stack measured apart, as `ipd serve "
        "--stack-release` (serving.stacks.<stack>.releases: trtllm 1.1.0rc2); unset: the stack's "
        "profile, every release alike",
    )


class LearningCurve(Strict):
    """ScaleRL's saturating sigmoid: score(x) = r0 + (asymptote - r0) / (1 + (midpoint / x)^exponent),
    x = RL samples over the horizon."""

    r0: Num = Field(ge=0, le=1)
    asymptote: Num = Field(gt=0, le=1)
    midpoint_samples: Num = Field(gt=0)
    exponent: Num = Field(gt=0)
    source: str
    estimate: Bool = False
    note: str | None = None

    @model_validator(mode="after")
    def _order(self) -> Self:
        if self.asymptote <= self.r0:
            raise ValueError("asymptote must be above r0")
        return self


class TaskSuccess(Strict):
    """Success per attempt: measured, r^k, or from a learning curve; plus a retry policy."""

    success_rate: Sourced | None = None
    step_reliability: Num | None = Field(default=None, gt=0, le=1)
    steps_per_workflow: Int | None = Field(default=None, gt=0)
    learning_curve: LearningCurve | None = None
    max_attempts: Int = Field(default=1, gt=0)

    @model_validator(mode="after")
    def _one_way(self) -> Self:
        ways = [
            self.success_rate is not None,
            self.step_reliability is not None or self.steps_per_workflow is not None,
            self.learning_curve is not None,
        ]
        if sum(ways) != 1:
            raise ValueError(
                "give exactly one of success_rate, step_reliability + steps_per_workflow, learning_curve"
            )
        if (self.step_reliability is None) != (self.steps_per_workflow is None):
            raise ValueError("give step_reliability and steps_per_workflow together")
        if self.success_rate is not None and not 0 < self.success_rate.value <= 1:
            raise ValueError(f"success_rate must be in (0, 1], got {self.success_rate.value}")
        return self

    def reliability_and_steps(self) -> tuple[float, int]:
        """(step_reliability, steps_per_workflow): the r^k way, which gives both or neither."""
        if self.step_reliability is None or self.steps_per_workflow is None:
            raise ValueError("give step_reliability and steps_per_workflow together")
        return self.step_reliability, self.steps_per_workflow


class Scenario(Strict):
    """A lifecycle: pre-train (or not), keep post-training with RL, serve tasks; count tasks solved."""

    kind: Literal["scenario"] = "scenario"
    description: str
    model: str
    horizon_years: Num = Field(default=1.0, gt=0)
    pretraining: ScenarioPretraining
    post_training: ScenarioPostTraining | None = None
    serving: ScenarioServing
    task_success: TaskSuccess
    site_mw: Num | None = Field(
        default=None,
        gt=0,
        le=MAX_SITE_MW,
        description="a site power budget to fill, in MW (at most a terawatt)",
    )
    source: str
    note: str | None = None
    field_sources: dict[str, FieldSource] = Field(default_factory=dict, description=FIELD_SOURCES_HELP)

    @model_validator(mode="after")
    def _field_sources(self) -> Self:
        check_field_sources(self)
        return self


# a scenario's stages that run a workload of their own, and that workload's model
STAGE_WORKLOADS: dict[str, type[PretrainWorkload | RlWorkload]] = {
    "pretraining": PretrainWorkload,
    "post_training": RlWorkload,
}


# The workload union, tagged by ``kind``: pydantic picks the model by the tag (no trying each model in
# turn). A catalog or file workload without ``kind`` is a pre-training run: validation.validate_workload
# fills that default and reports an unknown kind in one line before the union sees it.
Workload = Annotated[PretrainWorkload | RlWorkload | Scenario, Field(discriminator="kind")]
