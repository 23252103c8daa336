"""The Python API: the same estimates as the CLI, returned as result models.

Example::

    import ipd_cli
    cat = ipd_cli.load()
    r = ipd_cli.compare(cat, ["vera-rubin", "blackwell"], "pretrain-10t-moe")
    print(r.systems[1].pretraining.gpus / r.systems[0].pretraining.gpus)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .catalog.loader import Catalog, load_catalog, read_workload_doc, validate_workload
from .catalog.schema import PretrainWorkload
from .engine.pretraining import estimate_pretraining
from .engine.results import (
    CompareResult,
    EntryView,
    Listing,
    TrainResult,
    WorkloadInfo,
)
from .errors import InputError

DEFAULT_WORKLOAD = "pretrain-10t-moe"


def load(extra_dirs: list[Path] | None = None) -> Catalog:
    """The built-in catalog plus ``IPD_CATALOG`` and ``extra_dirs`` (later ones win)."""
    return load_catalog(list(extra_dirs or []))


def list_hardware(cat: Catalog) -> Listing:
    items = []
    for name, s in cat.systems.items():
        acc = cat.accelerator_of(s)
        fp4 = acc.fp4_dense_tflops.value if acc.fp4_dense_tflops else None
        items.append(
            {
                "name": name,
                "aliases": s.aliases,
                "description": s.description,
                "status": s.status,
                "gpus": s.accelerators,
                "scale_up_domain": s.scale_up_domain,
                "fp4_dense_tflops": fp4,
                "fp8_dense_tflops": acc.fp8_dense_tflops.value,
                "bf16_dense_tflops": acc.bf16_dense_tflops.value,
                "hbm_gb": acc.hbm_gb.value,
                "hbm_tb_per_s": acc.hbm_tb_per_s.value,
                "power_kw": s.power_kw.value,
            }
        )
    return Listing(kind="hardware", items=items)


def _sources_of(cat: Catalog, data: Any) -> dict[str, dict]:
    found: dict[str, dict] = {}

    def walk(d: Any) -> None:
        if isinstance(d, dict):
            ref = d.get("source")
            if isinstance(ref, str) and ref in cat.sources:
                found[ref] = cat.sources[ref].model_dump(mode="json")
            for v in d.values():
                walk(v)
        elif isinstance(d, list):
            for v in d:
                walk(v)

    walk(data)
    return dict(sorted(found.items()))


def show_hardware(cat: Catalog, name: str) -> EntryView:
    system = cat.system(name)
    canonical = cat.canonical("systems", name)
    entry = system.model_dump(mode="json", exclude_none=True)
    entry["accelerator_spec"] = cat.accelerator_of(system).model_dump(mode="json", exclude_none=True)
    entry["host_cpu_spec"] = cat.cpus[system.host_cpu].model_dump(mode="json", exclude_none=True)
    return EntryView(
        kind="hardware",
        name=canonical,
        origin=cat.origin("systems", canonical),
        entry=entry,
        sources=_sources_of(cat, entry),
    )


def list_models(cat: Catalog) -> Listing:
    items = [
        {
            "name": n,
            "aliases": m.aliases,
            "total_params": m.total_params,
            "active_params": m.active_params,
            "layers": m.layers,
            "hidden_size": m.hidden_size,
            "experts": m.experts,
            "experts_per_token": m.experts_per_token,
            "attention": "MLA" if m.kv_lora_rank else "GQA",
            "estimate": m.estimate,
        }
        for n, m in cat.models.items()
    ]
    return Listing(kind="models", items=items)


def show_model(cat: Catalog, name: str) -> EntryView:
    m = cat.model(name)
    canonical = cat.canonical("models", name)
    entry = m.model_dump(mode="json", exclude_none=True)
    return EntryView(
        kind="model",
        name=canonical,
        origin=cat.origin("models", canonical),
        entry=entry,
        sources=_sources_of(cat, entry),
    )


def list_workloads(cat: Catalog) -> Listing:
    items = [
        {"name": n, "kind": w.kind, "model": w.model, "description": w.description}
        for n, w in cat.workloads.items()
    ]
    return Listing(kind="workloads", items=items)


def show_workload(cat: Catalog, name: str) -> EntryView:
    w = cat.workload(name)
    entry = w.model_dump(mode="json", exclude_none=True)
    return EntryView(
        kind="workload",
        name=name,
        origin=cat.origin("workloads", name),
        entry=entry,
        sources=_sources_of(cat, entry),
    )


def resolve_workload(cat: Catalog, ref: str) -> tuple[str, PretrainWorkload, str]:
    """A workload by catalog name, or from a YAML file path: (name, workload, origin)."""
    if ref in cat.workloads:
        return ref, cat.workloads[ref], cat.origin("workloads", ref)
    path = Path(ref)
    if ref.endswith((".yaml", ".yml")) or path.exists():
        body = read_workload_doc(path)
        extra_sources = body.pop("sources", {}) or {}
        workload = validate_workload(body, str(path))
        ref_src = workload.source
        if ref_src not in cat.sources and ref_src not in extra_sources:
            raise InputError(f"{path}.source: unknown source id '{ref_src}'; add it under sources:")
        cat.model(workload.model)
        return path.stem, workload, str(path)
    return ref, cat.workload(ref), ""


def train(cat: Catalog, hardware: str, model: str, tokens: float, **kw: Any) -> TrainResult:
    r = estimate_pretraining(cat, hardware, model, tokens, **kw)
    return TrainResult(hardware=r.hardware, pretraining=r.pretraining, assumptions=r.assumptions)


def compare(
    cat: Catalog,
    systems: list[str],
    workload: str = DEFAULT_WORKLOAD,
    *,
    mfu: float | None = None,
    pricing: str = "rental",
) -> CompareResult:
    """Estimate the workload on each system; the first system is the ratio baseline."""
    if len(systems) < 1:
        raise InputError("give at least one system to compare")
    name, w, origin = resolve_workload(cat, workload)
    results = [
        estimate_pretraining(
            cat,
            s,
            w.model,
            w.tokens,
            gpus=w.gpus,
            deadline_days=w.deadline_days,
            precision=w.precision,
            mfu=mfu,
            sequence_length=w.sequence_length,
            pricing=pricing,
            origin=origin,
        )
        for s in systems
    ]
    info = WorkloadInfo(
        name=name,
        kind=w.kind,
        description=w.description,
        model=cat.canonical("models", w.model),
        tokens=w.tokens,
        precision=w.precision,
        deadline_days=w.deadline_days,
        gpus=w.gpus,
        origin=origin,
    )
    return CompareResult(workload=info, baseline=results[0].hardware, systems=results)


def output_schema() -> dict[str, Any]:
    """JSON Schema of the compare and train outputs (the JSON contract)."""
    return {
        "compare": CompareResult.model_json_schema(),
        "train": TrainResult.model_json_schema(),
    }
