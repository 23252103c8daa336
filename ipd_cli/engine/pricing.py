"""$/GPU-hour for a system: a labelled rental price point, or owning cost (TCO)."""

from __future__ import annotations

from typing import Any, Literal

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.schema import System
from ipd_cli.errors import InputError

from . import formulas as f
from .trace import Trace

Pricing = Literal["rental", "tco"]


def kw_per_gpu(cat: Catalog, name: str, system: System, trace: Trace) -> Any:
    origin = cat.origin("systems", name)
    rack_kw = trace.take("system power", system.power_kw, "kW", origin, path=f"systems.{name}.power_kw")
    return rack_kw / system.accelerators


def pue(cat: Catalog, trace: Trace) -> Any:
    return trace.take("PUE", cat.economics.pue, "ratio", cat.origin("economics", "pue"), path="economics.pue")


def usd_per_gpu_hour(cat: Catalog, name: str, system: System, pricing: str, trace: Trace) -> tuple[Any, str]:
    """Price of one GPU-hour and a label of the basis used ('rental:reserved', 'tco')."""
    origin = cat.origin("systems", name)
    if pricing == "rental":
        by_label = {p.label: p for p in system.prices}
        for label in cat.economics.rental_label_preference:
            if label in by_label:
                value = trace.take(
                    f"rental price ({label})",
                    by_label[label].usd_per_gpu_hour,
                    "USD/GPU-h",
                    origin,
                    path=f"systems.{name}.prices.{label}",
                )
                return value, f"rental:{label}"
        raise InputError(
            f"{origin}: systems.{name}.prices has none of the labels "
            f"{cat.economics.rental_label_preference}; add one or use --pricing tco"
        )
    if pricing != "tco":
        raise InputError(f"unknown pricing '{pricing}'; choose rental or tco")
    eco = cat.economics

    def e(label: str, field: str, unit: str) -> Any:
        return trace.take(
            label, getattr(eco, field), unit, cat.origin("economics", field), path=f"economics.{field}"
        )

    capex = trace.take("system capex", system.capex_usd, "USD", origin, path=f"systems.{name}.capex_usd")
    crf = f.capital_recovery_factor(
        e("cost of capital", "cost_of_capital", "1/year"), e("depreciation", "depreciation_years", "years")
    )
    value = f.tco_usd_per_gpu_hour(
        capex / system.accelerators,
        crf,
        e("opex per year", "opex_fraction_of_capex_per_year", "fraction of capex"),
        e("utilisation", "utilisation", "fraction"),
        kw_per_gpu(cat, name, system, trace.quiet()),
        pue(cat, trace.quiet()),
        e("electricity", "electricity_usd_per_kwh", "USD/kWh"),
    )
    return value, "tco"
