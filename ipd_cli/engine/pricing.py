"""$/GPU-hour for a system: a labelled rental price point, or owning cost (TCO)."""

from __future__ import annotations

from typing import Literal

from ipd_cli.catalog.loader import Catalog
from ipd_cli.catalog.schema import System
from ipd_cli.errors import InputError

from . import formulas as f
from .trace import Trace

Pricing = Literal["rental", "tco"]


def kw_per_gpu(cat: Catalog, name: str, system: System, trace: Trace) -> float:
    origin = cat.origin("systems", name)
    rack_kw = trace.take("system power", system.power_kw, "kW", origin)
    return rack_kw / system.accelerators


def usd_per_gpu_hour(
    cat: Catalog, name: str, system: System, pricing: str, trace: Trace
) -> tuple[float, str]:
    """Price of one GPU-hour and a label of the basis used ('rental:reserved', 'tco')."""
    origin = cat.origin("systems", name)
    if pricing == "rental":
        by_label = {p.label: p for p in system.prices}
        for label in cat.economics.rental_label_preference:
            if label in by_label:
                value = trace.take(
                    f"rental price ({label})", by_label[label].usd_per_gpu_hour, "USD/GPU-h", origin
                )
                return value, f"rental:{label}"
        raise InputError(
            f"{origin}: systems.{name}.prices has none of the labels "
            f"{cat.economics.rental_label_preference}; add one or use --pricing tco"
        )
    if pricing != "tco":
        raise InputError(f"unknown pricing '{pricing}'; choose rental or tco")
    eco = cat.economics
    eorigin = cat.origin("economics", "pue")
    capex = trace.take("system capex", system.capex_usd, "USD", origin) / system.accelerators
    crf = f.capital_recovery_factor(
        trace.take("cost of capital", eco.cost_of_capital, "1/year", eorigin),
        trace.take("depreciation", eco.depreciation_years, "years", eorigin),
    )
    value = f.tco_usd_per_gpu_hour(
        capex,
        crf,
        trace.take("opex per year", eco.opex_fraction_of_capex_per_year, "fraction of capex", eorigin),
        trace.take("utilisation", eco.utilisation, "fraction", eorigin),
        kw_per_gpu(cat, name, system, Trace(trace.sources)),
        trace.take("PUE", eco.pue, "ratio", eorigin),
        trace.take("electricity", eco.electricity_usd_per_kwh, "USD/kWh", eorigin),
    )
    return value, "tco"
