"""$/GPU-hour for a system (a labelled rental price point, or owning cost), power per GPU and PUE."""

from __future__ import annotations

import math
from typing import Any

from ipd_cli.errors import InputError

from . import formulas as f
from .inputs import Inputs

PRICING_CHOICES = ("rental", "tco")


def kw_per_gpu(inp: Inputs, system: str) -> Any:
    """Node or rack power divided by its accelerators, in kW (results report kW per GPU)."""
    watts = inp.read(f"systems.{system}.power_kw", "system power")
    return watts / 1e3 / inp.cat.systems[system].accelerators


def pue(inp: Inputs) -> Any:
    return inp.read("economics.pue", "PUE")


def price_labels() -> tuple[str, ...]:
    """The labels a rental price point may carry (``rental:LABEL`` picks one)."""
    from typing import get_args

    from ipd_cli.catalog.schema import PriceLabel

    return get_args(PriceLabel)


def check_pricing(pricing: str) -> None:
    """``rental`` (the first label of economics.rental_label_preference the system has),
    ``rental:LABEL`` (that price point) or ``tco`` (owning cost)."""
    base, colon, label = pricing.partition(":")
    if base == "rental" and colon:
        if label not in price_labels():
            raise InputError(
                f"unknown rental price label '{label}' in `pricing` '{pricing}'; "
                f"choose one of {', '.join(price_labels())}"
            )
        return
    if pricing not in PRICING_CHOICES:
        raise InputError(
            f"unknown `pricing` '{pricing}'; choose rental, rental:LABEL ({', '.join(price_labels())}) or tco"
        )


def usd_per_gpu_hour(inp: Inputs, system: str, pricing: str, always_on: bool = False) -> tuple[Any, str]:
    """Price of one GPU-hour and a label of the basis used ('rental:reserved', 'tco').

    ``always_on``: the GPU-hour of a deployment kept for one service around the clock (a
    scenario's serving, charged for every hour of the year, its idle headroom included). A rental
    price is the same; the owning cost spreads capital and opex over every hour (utilisation 1),
    not over the utilised share only, which would charge the idle hours twice."""
    check_pricing(pricing)
    cat = inp.cat
    s = cat.systems[system]
    if pricing.startswith("rental"):
        labels = {p.label for p in s.prices}
        wanted = pricing.partition(":")[2]
        label = (wanted if wanted in labels else None) if wanted else preferred_rental_label(cat, system)
        if label is not None:
            value = inp.read(f"systems.{system}.prices.{label}", f"rental price ({label})")
            return value, f"rental:{label}"
        if wanted:
            raise InputError(
                f"{cat.origin('systems', system)}: systems.{system}.prices has no '{wanted}' price "
                f"(it has {', '.join(sorted(labels))}); choose one of those in `pricing` or use tco"
            )
        from ipd_cli.catalog.overrides import library_label  # the library names `sets`

        # the preference's file too (a fresh-eyes review: a --set preference blamed the system's file)
        preferred = library_label(cat.origin_of("economics", "rental_label_preference"))
        raise InputError(
            f"{cat.origin('systems', system)}: systems.{system}.prices has none of the labels "
            f"{cat.economics.rental_label_preference} (economics.rental_label_preference, {preferred}); "
            f"add one, choose one it has ({', '.join(sorted(labels))}) or use `pricing` tco"
        )
    t = _tco_terms(inp, system, always_on)
    value = f.tco_usd_per_gpu_hour(
        t["capex_usd_per_gpu"],
        t["crf"],
        t["opex_fraction_per_year"],
        t["utilisation"],
        t["kw_per_gpu"],
        t["pue"],
        t["usd_per_kwh"],
    )
    return value, "tco"


# the economics the owning cost reads (:func:`_tco_terms`), besides each system's capex_usd: under
# rental prices nothing reads them (a `--set` of one changes nothing; the CLI says so)
OWNING_ECONOMICS = (
    "cost_of_capital",
    "depreciation_years",
    "opex_fraction_of_capex_per_year",
    "utilisation",
    "electricity_usd_per_kwh",
)


def owning_input(path: str) -> bool:
    """Whether a catalog path is an input of the owning cost only (``--pricing tco``)."""
    return path in {f"economics.{k}" for k in OWNING_ECONOMICS} or (
        path.startswith("systems.") and path.endswith(".capex_usd")
    )


def preferred_rental_label(cat: Any, system: str) -> str | None:
    """The label `rental` pricing charges on ``system``: the first of
    economics.rental_label_preference it has a price for (None: none)."""
    labels = {p.label for p in cat.system(system).prices}
    return next((label for label in cat.economics.rental_label_preference if label in labels), None)


def price_point(cat: Any, system: str, label: str) -> Any:
    """System ``system``'s rental price point labelled ``label`` (None where it has none)."""
    return next((p for p in cat.system(system).prices if p.label == label), None)


def rental_input(path: str) -> bool:
    """Whether a catalog path is a system's rental price point (``systems.NAME.prices.LABEL``),
    read only under rental pricing of that label."""
    parts = path.split(".")
    return len(parts) == 4 and parts[0] == "systems" and parts[2] == "prices"


def _tco_terms(inp: Inputs, system: str, always_on: bool) -> dict[str, Any]:
    """The owning cost's inputs (read in this order: capex, capital, opex, utilisation, power,
    electricity), for :func:`usd_per_gpu_hour` and, with their names, ``ipd explain``."""
    capex = inp.read(f"systems.{system}.capex_usd", "system capex")
    rate = inp.read("economics.cost_of_capital", "cost of capital")
    years = inp.read("economics.depreciation_years", "depreciation")
    quiet = inp.quiet()
    return {
        "capex_usd_per_gpu": capex / inp.cat.systems[system].accelerators,
        "crf": f.capital_recovery_factor(rate, years),
        "cost_of_capital": rate,
        "depreciation_years": years,
        "opex_fraction_per_year": inp.read("economics.opex_fraction_of_capex_per_year", "opex per year"),
        "utilisation": 1.0 if always_on else inp.read("economics.utilisation", "utilisation"),
        "kw_per_gpu": kw_per_gpu(quiet, system),
        "pue": pue(quiet),
        "usd_per_kwh": inp.read("economics.electricity_usd_per_kwh", "electricity"),
    }


def price_formula(
    inp: Inputs, system: str, pricing: str, always_on: bool = False
) -> tuple[Any, str, dict[str, float | str]]:
    """:func:`usd_per_gpu_hour`'s value and how it came to it, for ``ipd explain``: the rental
    point read, or the owning-cost formula with its inputs (:func:`_tco_terms`; ``always_on``:
    utilisation 1)."""
    value, basis = usd_per_gpu_hour(inp, system, pricing, always_on)
    if basis != "tco":
        label = basis.partition(":")[2]
        return value, f"systems.{system}.prices.{label} (the {basis} price point)", {"pricing": basis}
    formula = (
        "capex_usd_per_gpu x (crf + opex_fraction_per_year) / (8760 x utilisation) + kw_per_gpu x pue "
        "x usd_per_kwh; crf = r / (1 - (1 + r)^-years) at cost_of_capital r over depreciation_years"
        + ("; utilisation 1: GPUs kept for one service around the clock" if always_on else "")
    )
    return value, formula, _tco_terms(inp, system, always_on)


def contract_term_notes(cat: Any, systems: list[Any]) -> list[str]:
    """One line naming the systems whose pre-training rents its GPUs at a price point of a contract
    term (``term_years``: a reserved rate) for a run shorter than the term: the estimate charges
    the run's GPU-hours only, as if other work paid the contract's other hours (a pricing review:
    Rubin's 10T month on 27,648 GPUs at the 3-year reserved $8.50 costs $167.9M; the contract for
    those GPUs, $6.18B). Owned (``tco``), the run is charged the owning cost of its hours at
    ``economics.utilisation``, as if other work kept the GPUs busy the rest of their life: a second
    line says what buying them costs (a procurement review: the note vanished under tco, where the
    same assumption holds, and the rental one said tco "prices owning them"). RL steps are charged
    the same way: :func:`rl_busy_notes` says it. ``systems``: the compared systems' results
    (``hardware``, ``pretraining``)."""
    whole, owned = [], []
    for r in systems:
        p = r.pretraining
        if p is None:
            continue
        if p.pricing == "tco":
            life = cat.economics.depreciation_years.value
            if p.wall_days < life * f.DAYS_PER_YEAR:
                owned.append(
                    f"{r.hardware}'s {_fleet(cat, r.hardware, p.gpus)} for {p.wall_days:.3g} days of "
                    f"their {life:g}-year life"
                )
            continue
        if not p.pricing.startswith("rental:"):
            continue
        label = p.pricing.partition(":")[2]
        point = price_point(cat, r.hardware, label)
        term = point.term_years if point is not None else None
        if term is None or p.wall_days >= term * f.DAYS_PER_YEAR:
            continue
        usd = p.gpus * term * f.HOURS_PER_YEAR * p.price_usd_per_gpu_hour
        whole.append(f"{r.hardware}'s {p.gpus:,} GPUs for {term:g} year(s) at {label} {_money(usd)}")
    out = []
    if whole:
        out.append(
            "pre-training is charged for the days it rents its GPUs at contract prices, as if other work "
            f"paid the contracts' other hours (whole terms: {'; '.join(whole)}); tco pricing charges "
            "owned GPUs for those days alone too"
        )
    if owned:
        out.append(
            "pre-training is charged the owning cost of the hours it runs, as if other work kept the "
            f"GPUs busy the rest of their life at economics.utilisation {_utilisation(cat):g} "
            f"(bought for the run alone: {'; '.join(owned)})"
        )
    return out


def _money(usd: float) -> str:
    return f"${usd / 1e9:.3g}B" if usd >= 1e9 else f"${usd / 1e6:.3g}M"


def _utilisation(cat: Any) -> float:
    return float(cat.economics.utilisation.value)


def _fleet(cat: Any, hardware: str, gpus: float) -> str:
    """'1,472 GPUs (184 systems, $54.5M to buy)': whole systems at the catalog's capex."""
    system = cat.system(hardware)
    racks = math.ceil(gpus / system.accelerators)
    return f"{gpus:,} GPUs ({racks:,} systems, {_money(racks * system.capex_usd.value)} to buy)"


def rl_pool_notes(systems: list[Any]) -> list[str]:
    """A line for each system whose RL pool search (the workload's ``gpus`` a cap, not pinned) chose
    fewer GPUs than the cap: its pool, its step's cost and what all of the cap would cost (a
    capacity planner's audit: 512 GPUs on every system, 448 of them buying Rubin a 9 % shorter step
    at 7.3x the cost, and nothing said which count was taken or why)."""
    out = []
    for r in systems:
        rl = getattr(r, "rl", None)
        cap = getattr(rl, "gpus_cap", None)
        if rl is None or not cap or rl.gpus >= cap or rl.gpus_cap_usd_per_step is None:
            continue
        fits = " whose schedule fits the year" if rl.pool_fits_schedule else ""
        days = rl.run.wall_days_per_refresh * rl.run.refreshes_per_year
        if rl.pool_fits_schedule and f.beyond_a_year(days):
            # a budget bought more refreshes than the RL workload's, which the search checked (an
            # RL review: "whose schedule fits the year" beside a warning that it takes 662 days)
            fits = (
                " whose schedule fits the year at the RL workload's own refreshes (the "
                f"{rl.run.refreshes_per_year:,.4g} a year bought here take {days:,.4g} days)"
            )
        # ranked by the scheduled step (evaluations and checkpoints included): the cap's bare step
        # can cost less (an RL review: MI300X's 10T async step read $1,132 "the least" beside the
        # cap's $1,131)
        dearer = (
            ", less a step but more with its share of the evaluations and checkpoints, which the "
            "search ranks by"
            if rl.gpus_cap_usd_per_step < rl.usd_per_step
            else ""
        )
        roles = (
            "generating and training on the same GPUs"
            if rl.mode == "colocated"
            else f"{rl.train_gpus:,} training + {rl.gen_gpus:,} generating"
        )
        out.append(
            f"{r.hardware}: RL post-training runs on {rl.gpus:,} GPUs ({roles}) of the {cap:,} its RL "
            "workload's gpus allow: the pool with "
            f"the least cost per step{fits}, ${rl.usd_per_step:,.4g} a step of {rl.step_seconds:,.4g} s; all "
            f"{cap:,} would cost ${rl.gpus_cap_usd_per_step:,.4g} a step of "
            f"{rl.gpus_cap_step_seconds:,.4g} s{dearer} (the workload's pin_gpus: true, or `ipd rl "
            "--gpus`, runs on all of them)"
        )
    return out


def rl_busy_notes(systems: list[Any], cat: Any = None) -> list[str]:
    """One line naming the systems whose RL run (a scenario's, or an RL workload's year of
    refreshes) is charged for the hours its steps run in a year, below the year: the GPUs of its
    pool otherwise serve other work, as pre-training's contract days do (a capacity planner's
    review: 15.4 days a year on 512 Rubin GPUs were charged $1.61M a year where a pool kept for RL
    costs $38.1M, and nothing said so). At a rental price it says what the pool kept all year
    costs; owned (``tco``, with ``cat`` given), what buying it costs (a procurement review: nothing
    was said under tco). ``systems``: the results (``hardware``, ``rl`` with its ``run``)."""
    busy, owned = [], []
    for r in systems:
        rl = getattr(r, "rl", None)
        if rl is None or rl.run is None or rl.gpus <= 0:
            continue
        rental = rl.pricing.startswith("rental:")
        if not rental and (rl.pricing != "tco" or cat is None):
            continue
        days = rl.run.gpu_hours_per_year / rl.gpus * f.SECONDS_PER_HOUR / f.SECONDS_PER_DAY
        if days >= f.DAYS_PER_YEAR:
            continue
        when = f"{days:.3g} days a year ({days / f.DAYS_PER_YEAR:.1%})"
        if rental:
            kept = rl.gpus * f.HOURS_PER_YEAR * rl.price_usd_per_gpu_hour
            busy.append(
                f"{r.hardware}'s {rl.gpus:,} GPUs {when}, ${kept / 1e6:.3g}M a year kept for RL all year"
            )
        else:
            owned.append(f"{r.hardware}'s {_fleet(cat, r.hardware, rl.gpus)} {when}")
    out = []
    if busy:
        out.append(
            "RL post-training is charged for the hours its steps run, as if other work paid its pool's "
            f"other hours: {'; '.join(busy)}"
        )
    if owned:
        out.append(
            "RL post-training is charged the owning cost of the hours its steps run, as if other work "
            f"kept its pool busy the rest of the time at economics.utilisation {_utilisation(cat):g}: "
            f"{'; '.join(owned)}"
        )
    return out


def one_sided_range_notes(systems: list[Any]) -> list[str]:
    """One line counting, per system, the inputs whose catalog value lies outside the middle half
    of its range: a sampled sweep draws each from a triangular (low, value, high), so its median
    moves off this estimate towards the far side (a procurement review: Rubin's 70,941 solved tasks
    per $1k sat above its own P90, GB200 ahead at the median, and compare said nothing). The
    system's rental price is named where it is one of them. ``systems``: results with
    ``assumptions``."""
    parts = []
    for r in systems:
        seen: dict[str, tuple[float, list[float]]] = {}
        for a in r.assumptions:
            v, span = a.value, a.range
            if a.path is None or span is None or isinstance(v, bool) or not isinstance(v, int | float):
                continue
            lo, hi = float(span[0]), float(span[1])
            if hi > lo and not lo + (hi - lo) / 4 <= v <= hi - (hi - lo) / 4:
                seen[a.path] = (float(v), [lo, hi])
        if not seen:
            continue
        price = next(
            ((p, vr) for p, vr in seen.items() if p.startswith(f"systems.{r.hardware}.prices.")), None
        )
        named = ""
        if price is not None:
            (v, (lo, hi)) = price[1]
            end = "bottom" if v - lo < hi - v else "top"
            named = f", its rental price ${v:g} at the {end} of ${lo:g}-{hi:g} among them"
        parts.append(f"{r.hardware} {len(seen)}{named}")
    if not parts:
        return []
    return [
        "inputs valued outside the middle half of their ranges, which a sampled sweep draws (its median "
        f"can then sit off this estimate, even outside its P10-P90): {'; '.join(parts)}"
    ]
