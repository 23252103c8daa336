"""Unit-slip warnings: a user-supplied spec value far outside what the built-in catalog holds.

A ``--set`` value or a user catalog file's value of an accelerator, system or model field is
compared with the span of the built-in entries' values for the same field. One that lies
outside ``[smallest / SANITY_FACTOR, largest x SANITY_FACTOR]`` gets one warning line naming
the field path, the value, the span and the unit the value may have been typed in (GB/s for a
TB/s field). The value is still used: a warning, never a refusal (a hypothetical machine may
well lie outside today's catalog). The lines are kept on the catalog (:attr:`Catalog.warnings`);
the CLI prints them, the library never does.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ipd_cli.errors import count_text

from .schema import Sourced, field_unit

if TYPE_CHECKING:
    from .catalog import Catalog

# A sanity band, not a world figure: no claim that hardware or models cannot be 10x beyond
# today's catalog, only that a value 10x past every built-in one is more often a unit slip (GB/s
# typed for TB/s is 1000x, GiB for TB is 1/1000x) than a real machine. A slip of 1000x lies
# far outside the band; a generation's real step (2-3x bandwidth, 4x parameters) lies inside.
SANITY_FACTOR = 10.0
CHECKED_SECTIONS = ("accelerators", "systems", "models")
BUILTIN = "builtin:"

# the units a value may have been typed in, by the unit of the field (its schema unit's first
# word): (name, field units per typed unit); a value times the factor is what was meant
ALTERNATIVES: dict[str, tuple[tuple[str, float], ...]] = {
    "TB/s": (("GB/s", 1e-3), ("PB/s", 1e3)),
    "GB/s": (("MB/s", 1e-3), ("TB/s", 1e3)),
    "Gbit/s": (("Mbit/s", 1e-3), ("Tbit/s", 1e3)),
    "GiB": (("MiB", 2**20 / 2**30), ("TB", 1e12 / 2**30)),
    "GB": (("MB", 1e-3), ("TB", 1e3)),
    "TFLOP/s": (("GFLOP/s", 1e-3), ("PFLOP/s", 1e3)),
    "W": (("kW", 1e3), ("mW", 1e-3)),
    "kW": (("W", 1e-3), ("MW", 1e3)),
    "USD": (("thousands of USD", 1e3), ("millions of USD", 1e6)),
    "USD/GPU-h": (("US cents", 1e-2), ("thousands of USD", 1e3)),
    "parameters": (("millions of parameters", 1e6), ("billions of parameters", 1e9)),
}


# economics values (one each, no entries to span): checked against their own sourced range, with
# the units a rate or a share is typed in by mistake
ECONOMICS_UNITS: dict[str, tuple[tuple[str, float], ...]] = {
    "USD/kWh": (("US cents/kWh", 1e-2), ("USD/MWh", 1e-3)),
    "1/year": (("percent a year", 1e-2),),
    "fraction": (("percent", 1e-2),),
    "years": (("months", 1 / 12),),
}

# a value this many times one inside its sourced range, and above the range: more likely a
# slipped decimal point (13 for a PUE of 1.3) than a real site
DECIMAL_SLIP = 10.0

# a span in years past this is more likely months typed as years (60 for a 5-year depreciation;
# 10 x the sourced range's top lets 60 through): said back, as a scenario's amortisation is
MONTHS_LIKE_YEARS = 10.0


def numbers(entry: BaseModel) -> Iterator[tuple[str, str, float, str | None]]:
    """(field key, path below the entry, value, unit) of each number of an entry; a price's key is
    ``prices.usd_per_gpu_hour`` (every label), its path ``prices.LABEL.usd_per_gpu_hour``."""
    for name in type(entry).model_fields:  # fields with a unit a value can slip in (see _slips)
        value = getattr(entry, name)
        if name == "prices":
            price_unit = _symbol(field_unit(type(value[0]), "usd_per_gpu_hour")) if value else None
            for p in value:
                label = f"prices.{p.label}.usd_per_gpu_hour"
                yield "prices.usd_per_gpu_hour", label, float(p.usd_per_gpu_hour.value), price_unit
            continue
        if isinstance(value, Sourced):
            value = value.value
        unit = _symbol(field_unit(type(entry), name))
        if isinstance(value, int | float) and not isinstance(value, bool) and _slips(unit):
            yield name, name, float(value), unit


def _symbol(found: tuple[str, float] | None) -> str | None:
    return found[0] if found else None


def _slips(unit: str | None) -> bool:
    """Whether a field's unit is one a value can be typed in by mistake (TB/s, GiB, USD, ...):
    counts (layers, heads, experts, GPUs) have none, so a toy model's 2 layers do not warn."""
    return unit is not None and unit.split()[0] in ALTERNATIVES


def builtin_spans(cat: Catalog, section: str) -> dict[str, tuple[float, float]]:
    """The smallest and largest value of each field among the built-in entries of ``section``
    (entries a user file replaced or a ``--set`` changed are left out)."""
    spans: dict[str, tuple[float, float]] = {}
    for name, entry in getattr(cat, section).items():
        if not _builtin(cat.origins.get((section, name), "")):
            continue
        for key, _, value, _ in numbers(entry):
            lo, hi = spans.get(key, (value, value))
            spans[key] = (min(lo, value), max(hi, value))
        found = _capex_gpus(entry)
        if found is not None:
            per_gpu = found[0] / found[1]
            lo, hi = spans.get(PER_GPU_CAPEX, (per_gpu, per_gpu))
            spans[PER_GPU_CAPEX] = (min(lo, per_gpu), max(hi, per_gpu))
    return spans


# a system's capex spread over its GPUs: its span among the built-in systems catches a per-GPU
# price typed into the per-system field, which the span of whole systems (8-GPU nodes to 144-die
# racks) lets through (a procurement review: Rubin's rack at $110,000 read $0.40 a GPU-hour)
PER_GPU_CAPEX = "capex_usd per GPU"


def _capex_gpus(entry: BaseModel) -> tuple[float, int] | None:
    """(capex_usd, GPUs) of a system entry; None for other entries."""
    capex, gpus = getattr(entry, "capex_usd", None), getattr(entry, "accelerators", None)
    if not isinstance(capex, Sourced) or not isinstance(gpus, int) or gpus <= 0:
        return None
    return float(capex.value), gpus


def _builtin(origin: str) -> bool:
    return origin.startswith(BUILTIN) and "--set" not in origin


def check(value: float, span: tuple[float, float] | None, path: str, unit: str | None) -> str | None:
    """The warning for ``value`` at ``path`` if it lies outside the band around ``span``."""
    if span is None or not math.isfinite(value):
        return None
    lo, hi = span
    where = _beyond(value, lo, hi, "the largest built-in value", "the smallest built-in value")
    if where is None:
        return None
    return f"{path} = {value:g} is {where} (built-in span {lo:g} to {hi:g}){_fix(value, span, unit)}"


def _beyond(value: float, lo: float, hi: float, top: str, bottom: str) -> str | None:
    """How far ``value`` lies outside SANITY_FACTOR x [lo, hi] ('1,000x the top ...'), or None."""
    if value > hi * SANITY_FACTOR and hi > 0:
        return f"{_times(value / hi)}x {top}"
    if 0 < value < lo / SANITY_FACTOR:
        return f"1/{_times(lo / value)} of {bottom}"
    return None


def _times(ratio: float) -> str:
    return count_text(ratio) if ratio >= 10 else f"{ratio:.2g}"


def _fix(value: float, span: tuple[float, float], unit: str | None, alternatives: dict | None = None) -> str:
    """The likely fix: the unit that brings the value nearest the middle of the built-in span."""
    if unit is None:
        return ""
    lo, hi = span
    middle = math.sqrt(lo * hi) if lo > 0 else hi
    fits = [
        (abs(math.log(value * factor / middle)), name)
        for name, factor in (ALTERNATIVES if alternatives is None else alternatives).get(unit.split()[0], ())
        if value > 0 and lo / SANITY_FACTOR <= value * factor <= hi * SANITY_FACTOR
    ]
    if fits:
        return f": is it in {min(fits)[1]}? the field is in {unit}"
    return f"; check the value and its unit ({unit})"


def entry_warnings(
    entry: BaseModel, where: str, spans: dict[str, tuple[float, float]], only: str | None = None
) -> list[str]:
    """The warnings of an entry's numbers (``only``: those at or below that path)."""
    out = []
    for key, path, value, unit in numbers(entry):
        if only is not None and path != only and not path.startswith(only + "."):
            continue
        line = check(value, spans.get(key), f"{where}.{path}", unit)
        if line is not None:
            out.append(line)
    found, span = _capex_gpus(entry), spans.get(PER_GPU_CAPEX)
    if found is not None and span is not None and (only is None or only == "capex_usd"):
        capex, gpus = found
        per_gpu = capex / gpus
        below = _beyond(per_gpu, *span, "the largest built-in", "the smallest built-in")
        said = any(line.startswith(f"{where}.capex_usd = ") for line in out)  # a unit slip first
        if below is not None and per_gpu < span[0] and not said:
            out.append(
                f"{where}.capex_usd = {capex:g} is ${per_gpu:,.0f} a GPU, {below} (built-in "
                f"span ${span[0]:,.0f} to ${span[1]:,.0f} a GPU): is it a GPU's price? the field is "
                f"the whole system's ({gpus} GPUs)"
            )
    return out


def _power_line(name: str, power_kw: float, gpus: int, tdp_w: float) -> str | None:
    floor_kw = gpus * tdp_w / 1e3
    if power_kw >= floor_kw:
        return None
    return (
        f"systems.{name}.power_kw = {power_kw:g} is below its accelerators' TDP alone ({gpus} x "
        f"{tdp_w:g} W = {floor_kw:g} kW): is it per GPU, or in another unit?"
    )


def power_warnings(cat: Catalog, only: set[str] | None = None) -> list[str]:
    """A system whose power is below its accelerators' TDP alone (72 x 1,100 W in 20 kW: a user
    review found it accepted, and power prices every owning cost): systems of a user file or a
    ``--set``, or those of ``only``."""
    out = []
    for name, system in cat.systems.items():
        origin = cat.origins.get(("systems", name), "")
        acc_origin = cat.origins.get(("accelerators", system.accelerator), "")
        mine = not _builtin(origin) or not _builtin(acc_origin)
        if (only is not None and name not in only) or (only is None and not mine):
            continue
        tdp_w = float(cat.accelerators[system.accelerator].tdp_w.value)
        line = _power_line(name, float(system.power_kw.value), system.accelerators, tdp_w)
        if line is not None:  # a user file's names that file, as a unit slip's does (a fresh-eyes review)
            out.append(
                line if only is not None else f"{origin if not _builtin(origin) else acc_origin}: {line}"
            )
    return out


# A consistency band, not a world figure: every built-in MoE model's expert width lies within 1 %
# of the one its parameter counts give; a width 1.5x off says the counts and the shapes describe
# different models (a capacity planner's review: moe_ffn_hidden_size 64 to 65,536 changed nothing)
SHAPE_FACTOR = 1.5
# the fields an expert's width is derived from (a --set of any of them checks it again)
SHAPE_FIELDS = frozenset(
    {"moe_ffn_hidden_size", "total_params", "active_params", "experts", "experts_per_token",
     "moe_layers", "layers", "hidden_size", "gated_ffn"}
)  # fmt: skip


def _shape_line(name: str, m: Any) -> str | None:
    """A routed expert's FFN width far from the one the model's parameter counts give it: the
    counts set the weights (their bytes, their traffic, the FLOPs), the width only the shape of the
    expert GEMMs, so a width that disagrees is otherwise silent."""
    given = m.moe_ffn_hidden_size
    if not m.is_moe or given is None or m.experts_per_token >= m.experts:
        return None
    from ipd_cli.engine.formulas import routed_expert_params

    routed = routed_expert_params(
        float(m.total_params), float(m.active_params), m.experts_per_token / m.experts
    )
    implied = routed / (m.routed_layers * m.experts) / ((3 if m.gated_ffn else 2) * m.hidden_size)
    if implied <= 0 or 1 / SHAPE_FACTOR <= given / implied <= SHAPE_FACTOR:
        return None
    return (
        f"models.{name}.moe_ffn_hidden_size = {given:,} is {given / implied:.3g}x the width its "
        f"parameter counts give a routed expert ({implied:,.0f}: (total_params - active_params) / "
        "(1 - experts_per_token / experts) over its routed layers, experts, FFN matrices and "
        "hidden_size): the counts set the weights, their traffic and FLOPs, the width only the "
        "expert GEMMs' shape"
    )


def shape_warnings(cat: Catalog, only: set[str] | None = None) -> list[str]:
    """:func:`_shape_line` of the models of a user file or a ``--set`` (those of ``only``)."""
    out = []
    for name, m in cat.models.items():
        origin = cat.origins.get(("models", name), "")
        if (only is not None and name not in only) or (only is None and _builtin(origin)):
            continue
        line = _shape_line(name, m)
        if line is not None:
            out.append(line if only is not None else f"{origin}: {line}")
    return out


def user_file_warnings(cat: Catalog) -> list[str]:
    """The warnings of the entries user catalog files define (none for the built-in catalog)."""
    out: list[str] = [*power_warnings(cat), *shape_warnings(cat)]
    for section in CHECKED_SECTIONS:
        user = [(n, o) for (s, n), o in cat.origins.items() if s == section and not o.startswith(BUILTIN)]
        if not user:
            continue
        spans = builtin_spans(cat, section)
        for name, origin in user:
            for line in entry_warnings(getattr(cat, section)[name], f"{section}.{name}", spans):
                out.append(f"{origin}: {line}")
    return out


def override_warnings(
    before: Catalog, after: Catalog, section: str, name: str, fields: list[str]
) -> list[str]:
    """The warnings of one ``--set`` of an entry field (spans from the catalog ``before`` it)."""
    if section not in CHECKED_SECTIONS:
        return []
    only = ".".join(fields[:-1] if fields[-1:] == ["value"] else fields)
    entry: Any = getattr(after, section)[name]
    return entry_warnings(entry, f"{section}.{name}", builtin_spans(before, section), only)


def axis_warnings(cat: Catalog, path: str, values: Any) -> list[str]:
    """The warnings of a sweep axis's values (``ipd sweep --vary PATH=...``) of an entry field:
    its smallest and largest value checked like a ``--set`` (``values``: numbers, or a range that
    indexes them in order)."""
    parts = path.split(".")
    ends = {float(values[0]), float(values[len(values) - 1])} if len(values) else set()
    ends = {min(map(float, values)), max(map(float, values))} if isinstance(values, list) else ends
    if parts[0] == "economics" and len(parts) in (2, 3) and parts[2:] in ([], ["value"]):
        return economics_warnings(cat, parts[1], sorted(ends), prefix="`vary` ")
    if len(parts) < 3 or parts[0] not in CHECKED_SECTIONS:
        return []
    power = _axis_power(cat, parts, sorted(ends))
    section, name = parts[0], parts[1]
    entry = getattr(cat, section).get(name)
    if entry is None:
        return []
    only = ".".join(parts[2:-1] if parts[-1] == "value" else parts[2:])
    keyed = {path: (key, unit) for key, path, _, unit in numbers(entry)}
    if only not in keyed:
        return []
    key, unit = keyed[only]
    span = builtin_spans(cat, section).get(key)
    lines = [check(v, span, f"{section}.{name}.{only}", unit) for v in sorted(ends)]
    return [f"`vary` {line}" for line in lines if line is not None] + power


def economics_warnings(cat: Catalog, field: str, values: list[float], prefix: str = "") -> list[str]:
    """The warnings of values given for ``economics.FIELD`` (a ``--set`` or a sweep axis's ends):
    one beyond SANITY_FACTOR x its sourced range in ``cat`` (the catalog before the change) is more
    often a unit slip (120 for 0.12 USD/kWh, 8 for an 8 % rate) than a real site."""
    from .schema import Economics

    known = getattr(cat.economics, field, None)
    if not isinstance(known, Sourced) or known.range is None:
        return []
    lo, hi = (float(v) for v in known.range)
    unit = _symbol(field_unit(Economics, field))
    out = []
    for value in sorted(set(values)):
        where = _beyond(value, lo, hi, "the top of its sourced range", "the bottom of its sourced range")
        if where is None and unit == "years" and value > MONTHS_LIKE_YEARS:
            where = f"over {MONTHS_LIKE_YEARS:g} years, past the top of its sourced range"
        fix = None
        if where is None and value > hi and lo <= value / DECIMAL_SLIP <= hi:
            # inside the band, yet ten times a sourced value: a decimal point slipped (an energy
            # review: `economics.pue=13` for 1.3 took every energy figure 10x without a word)
            where = "past the top of its sourced range"
            fix = f": is it {value / DECIMAL_SLIP:g}, a decimal point slipped?"
        if where is None:
            continue
        fix = fix or _fix(value, (lo, hi), unit, ECONOMICS_UNITS)
        out.append(f"{prefix}economics.{field} = {value:g} is {where} ({lo:g} to {hi:g}){fix}")
    return out


def _axis_power(cat: Catalog, parts: list[str], values: list[float]) -> list[str]:
    """:func:`power_warnings` of a sweep axis over a system's power or an accelerator's TDP."""
    field = parts[2] if len(parts) > 2 else ""
    out: list[str] = []
    for value in values:
        for name, system in cat.systems.items():
            acc = cat.accelerators[system.accelerator]
            if parts[0] == "systems" and field == "power_kw" and cat.canonical("systems", parts[1]) == name:
                line = _power_line(name, value, system.accelerators, float(acc.tdp_w.value))
            elif parts[0] == "accelerators" and field == "tdp_w" and system.accelerator == parts[1]:
                line = _power_line(name, float(system.power_kw.value), system.accelerators, value)
            else:
                continue
            if line is not None:
                out.append(f"at `vary` {'.'.join(parts[:3])}={value:g}: {line}")
    return out
