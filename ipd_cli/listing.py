"""The catalog as results: ``ipd hardware|models|workloads list|show``."""

from __future__ import annotations

from typing import Any

from .catalog.catalog import Catalog, require_catalog
from .catalog.overrides import WORKLOAD
from .catalog.workloads import refuse_workload_sets, resolve_workload
from .engine.formulas import GIBI, GIGA
from .engine.result_base import EntryView, Listing
from .errors import InputError


def _check(cat: Any, command: str | None, name: Any = "") -> None:
    """The arguments of a listing (a library review: a list for a name was "unhashable type", None
    for the catalog an AttributeError), and, for a ``command`` that reads no workload, no ``sets``
    workload.* (None: `workloads show`, which applies them)."""
    require_catalog(cat)
    if not isinstance(name, str):
        raise InputError(f"`name` must be text, got {name!r}")
    if command is not None:
        refuse_workload_sets(cat, command, [])


def list_hardware(cat: Catalog) -> Listing:
    """The catalog's systems with their key specs (``ipd hardware list``)."""
    _check(cat, "hardware list")
    items = []
    from .engine.pricing import preferred_rental_label, price_point

    for name, s in cat.systems.items():
        acc = cat.accelerator_of(s)
        # the price `--pricing rental` charges: a buyer's first look at the systems named none (a
        # capacity planner's review)
        label = preferred_rental_label(cat, name)
        price = price_point(cat, name, label) if label else None
        fp4 = acc.fp4_dense_tflops.value if acc.fp4_dense_tflops else None
        fp8 = acc.fp8_dense_tflops.value if acc.fp8_dense_tflops else None
        items.append(
            {
                "name": name,
                "aliases": list(s.aliases),  # a copy: the entry is shared by every load (a library review)
                "description": s.description,
                "status": s.status,
                "gpus": s.accelerators,
                "scale_up_domain": s.scale_up_domain,
                "fp4_dense_tflops": fp4,
                "fp8_dense_tflops": fp8,
                "bf16_dense_tflops": acc.bf16_dense_tflops.value,
                "hbm_gib": acc.hbm_gib.value,
                # the same capacity in decimal GB (the key this listing has always had)
                "hbm_gb": round(acc.hbm_gib.value * GIBI / GIGA, 1),
                "hbm_tb_per_s": acc.hbm_tb_per_s.value,
                "power_kw": s.power_kw.value,
                "price_usd_per_gpu_hour": price.usd_per_gpu_hour.value if price else None,
                "pricing": f"rental:{price.label}" if price else None,
                "price_term_years": price.term_years if price else None,
                "capex_usd": s.capex_usd.value,
            }
        )
    return Listing(kind="hardware", items=items)


def _sets_shown(cat: Catalog, workload: bool = False) -> list[str]:
    """The --set values an entry is shown with: a workload's workload.* ones, the catalog's others."""
    return [o.text for o in cat.overrides if o.path.startswith(WORKLOAD + ".") == workload]


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
    """One system (a name or alias), its accelerator and host CPU, every value with its source."""
    _check(cat, "hardware show", name)
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
        sets=_sets_shown(cat),
    )


def list_models(cat: Catalog) -> Listing:
    """The catalog's model architectures (``ipd models list``)."""
    _check(cat, "models list")
    items = [
        {
            "name": n,
            "aliases": list(m.aliases),  # a copy: the entry is shared by every load
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
    """One model architecture (a name or alias) and its sources."""
    _check(cat, "models show", name)
    m = cat.model(name)
    canonical = cat.canonical("models", name)
    entry = m.model_dump(mode="json", exclude_none=True)
    return EntryView(
        kind="model",
        name=canonical,
        origin=cat.origin("models", canonical),
        entry=entry,
        sources=_sources_of(cat, entry),
        sets=_sets_shown(cat),
    )


def list_workloads(cat: Catalog) -> Listing:
    """The catalog's workloads (``ipd workloads list``)."""
    _check(cat, "workloads list")
    items = [
        {"name": n, "kind": w.kind, "model": w.model, "description": w.description}
        for n, w in cat.workloads.items()
    ]
    return Listing(kind="workloads", items=items)


def _value_cited(entry: dict) -> None:
    """Each ``field_sources`` entry with the value it cites, so that a copy whose number is edited
    no longer cites it (a review: a what-if file from ``show`` kept NVIDIA's source on its own 100
    tokens/s)."""
    for key, cite in (entry.get("field_sources") or {}).items():
        node: Any = entry
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            cite.setdefault("value", node)


def show_workload(cat: Catalog, name: str) -> EntryView:
    """The catalog's workload, with the ``sets`` workload.* overrides applied (as compare, rl and
    sweep would run it; they were ignored here)."""
    _check(cat, None, name)
    if name.endswith((".yaml", ".yml")) and cat.canonical("workloads", name) not in cat.workloads:
        from pathlib import Path

        # a fresh-eyes review: a what-if file got "unknown workload 'sc1.yaml'" and no why
        raise InputError(
            f"unknown workload '{name}': a listing shows catalog workloads by name; compare, rl and "
            "sweep take a workload file as their workload, and a file in a catalog directory's "
            f"workloads/ (`extra_dirs`) is listed by its name, '{Path(name).stem}'"
        )
    w = cat.workload(name)
    sets = _sets_shown(cat, workload=True)
    if sets:
        w = resolve_workload(cat, name)[1]
    entry = w.model_dump(mode="json", exclude_none=True)
    _value_cited(entry)
    return EntryView(
        kind="workload",
        name=name,
        origin=cat.origin("workloads", name),
        entry=entry,
        sources=_sources_of(cat, entry),
        sets=sets,
    )
