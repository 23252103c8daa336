"""The rows of the listing outputs (``items`` of a :class:`~ipd_cli.engine.result_base.Listing`):
``ipd hardware|models|workloads list``, ``ipd explain``, ``ipd calibrate`` and ``ipd diff``. The
commands build their rows as plain dicts (the listings stay off pydantic's model building on their
fast path); these models describe them for ``ipd schema`` only, and a test checks every row a
command prints against its model's fields (a scripting review: the schema typed these rows as free
objects, so nothing could drift-check them)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .result_base import Result


class HardwareRow(Result):
    """One system of ``ipd hardware list``."""

    name: str
    aliases: list[str]
    description: str
    status: str = Field(description="shipping, sampling, announced or roadmap")
    gpus: int = Field(description="accelerators per system (node or rack)")
    scale_up_domain: int = Field(description="GPUs in one scale-up (NVLink / Infinity Fabric) domain")
    fp4_dense_tflops: float | None
    fp8_dense_tflops: float | None
    bf16_dense_tflops: float
    hbm_gib: float = Field(description="HBM per GPU, binary GiB (the vendor's GB read as GiB)")
    hbm_gb: float = Field(description="hbm_gib in decimal GB")
    hbm_tb_per_s: float
    power_kw: float = Field(description="the system's all-in power")
    price_usd_per_gpu_hour: float | None = Field(
        description="the GPU-hour price --pricing rental charges: the first label of "
        "economics.rental_label_preference the system has (none: it has none of them)"
    )
    pricing: str | None = Field(description="that price's basis, rental:LABEL, as the estimates print it")
    price_term_years: float | None = Field(
        description="that price's contract term in years (none: on demand or not stated)"
    )
    capex_usd: float = Field(description="the system's purchase price, what --pricing tco reads")


class ModelRow(Result):
    """One model architecture of ``ipd models list``."""

    name: str
    aliases: list[str]
    total_params: float
    active_params: float
    layers: int
    hidden_size: int
    experts: int
    experts_per_token: int
    attention: str = Field(description="MLA (a latent KV cache) or GQA")
    estimate: bool = Field(description="a shape not published in full (a roadmap model)")


class WorkloadRow(Result):
    """One workload of ``ipd workloads list``."""

    name: str
    kind: str = Field(description="scenario, pretrain or rl")
    model: str
    description: str


class ExplainRow(Result):
    """One line of ``ipd explain``: a headline number (its formula, its inputs with their values) or
    an input (its unit, source, range and where it came from)."""

    hardware: str
    metric: str = Field(description="an output's dotted path, or 'input: <name>'")
    value: float | str | bool | None
    formula: str | None
    inputs: str | None = Field(description="name = value pairs, or an input's origin and --set path")
    unit: str | None
    source: str | None
    source_title: str | None
    source_date: str | None
    source_url: str | None
    range: list[float] | None
    estimate: bool | None
    origin: str | None
    path: str | None = Field(description="the catalog path a --set changes")
    field: str | None = Field(description="where the number is in `ipd compare --format json`")
    note: str | None


class CalibrationRow(Result):
    """One knob of ``ipd calibrate``."""

    parameter: str = Field(description="the catalog path fitted")
    current: float
    fitted: float | None = Field(description="null where no fitting case of the knob can be reached")
    cases: int
    rms_log_error_before: float | None
    rms_log_error_after: float | None
    case_ids: str
    set: str = Field(description="the --set that applies the fit")
    status: str = Field(description="fitted, or why not")
    fit_note: str


class DiffRow(Result):
    """One changed (or, with --all, unchanged) leaf of ``ipd diff``."""

    metric: str = Field(description="the dotted path; list items named by hardware, id, group or metric")
    old: Any
    new: Any
    change: float | None = Field(description="new - old, for numbers")
    percent: float | None = Field(description="100 x change / |old|, for numbers with old != 0")


ROWS: dict[str, type[Result]] = {
    "hardware": HardwareRow,
    "models": ModelRow,
    "workloads": WorkloadRow,
    "explain": ExplainRow,
    "calibration": CalibrationRow,
    "diff": DiffRow,
}
