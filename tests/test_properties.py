"""Invariants over the valid input space, checked with hypothesis (issue 8).

Each property is a law the model must obey whatever the catalog says: numbers are finite
and non-negative, cost is linear in every price, GPU-hours are linear in tokens, more GPUs
never take longer, identical systems compare at exactly 1, output is deterministic and
round-trips through the result models, and more HBM bandwidth never slows decode.
Examples are bounded (deadline=None: the first call of a path pays for imports).
"""

from __future__ import annotations

import functools
import json
import math

import pytest
from helpers import run_cli
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from ipd_cli import compare, load, train
from ipd_cli.catalog.schema import PRECISIONS
from ipd_cli.engine import formulas as f
from ipd_cli.engine.results import CompareResult, TrainResult
from ipd_cli.errors import InfeasibleError, IpdError
from ipd_cli.render import to_json

MODELS = ["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen3-30b-a3b", "deepseek-v3", "moe-10t"]
REL = 1e-12


@functools.cache
def _catalog():
    # not a fixture argument: hypothesis would print the whole catalog with every failing example
    return load()


def bounded(n: int):
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,  # the same examples on every run: CI stays reproducible
        suppress_health_check=[HealthCheck.too_slow],
    )


def numbers(node, path=""):
    """(dotted path, number) for every number in a dumped result."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from numbers(v, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from numbers(v, f"{path}.{i}")
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield path, node


def assert_finite_non_negative(result) -> None:
    for path, v in numbers(result.model_dump(mode="python")):
        assert math.isfinite(v) and v >= 0, (path, v)


tokens_st = st.floats(9, 15).map(lambda e: float(f"{10**e:.6g}"))
days_st = st.floats(0.5, 3650, allow_nan=False)


@st.composite
def train_args(draw, models=tuple(MODELS)):
    """A feasible pre-training request: hardware, model, tokens and a fixed or deadline target (the
    catalog is not an argument: hypothesis would build a 200 kB repr of the strategy to print it)."""
    catalog = _catalog()
    hw = draw(st.sampled_from(sorted(catalog.systems)))
    model = draw(st.sampled_from(models))
    tokens = draw(tokens_st)
    acc = catalog.accelerator_of(catalog.system(hw))
    has = [p for p in PRECISIONS if acc.dense_tflops(p) is not None]  # `train` refuses the others
    kw = {"precision": draw(st.sampled_from(has)), "pricing": draw(st.sampled_from(["rental", "tco"]))}
    if draw(st.booleans()):
        kw["deadline_days"] = draw(days_st)
        try:  # beyond MAX_GPUS a deadline is refused as infeasible: a clean error, not an example
            train(catalog, hw, model, tokens, **kw)
        except InfeasibleError:
            assume(False)
    else:
        kw["gpus"] = memory_floor(catalog, hw, model, tokens, kw) * draw(st.integers(1, 64))
        try:  # the floor is a lower bound: a cluster no plan fits is a clean error, not an example
            train(catalog, hw, model, tokens, **kw)
        except InfeasibleError:
            assume(False)
    return hw, model, tokens, kw


def memory_floor(catalog, hw, model, tokens, kw) -> int:
    """A cluster that holds the training state: twice the lower bound, in whole systems."""
    from ipd_cli.engine.pretraining import min_training_gpus

    per = catalog.system(hw).accelerators
    floor = min_training_gpus(catalog, hw, model, 8192, kw.get("precision", "bf16"))
    return -(-2 * floor // per) * per


@bounded(8)
@given(data=st.data())
def test_pretraining_outputs_are_finite_non_negative_and_consistent(data):
    catalog = _catalog()
    hw, model, tokens, kw = data.draw(train_args())
    r = train(catalog, hw, model, tokens, **kw)
    assert_finite_non_negative(r)
    p = r.pretraining
    assert p.gpus >= p.min_gpus_for_memory and p.gpus > 0
    assert 0 < p.scale_efficiency <= 1
    assert 0 <= p.moe_comm_exposed_fraction < 1
    assert p.effective_mfu <= p.mfu * (1 + REL)
    assert p.gpu_hours == pytest.approx(p.gpus * p.wall_days * 24, rel=1e-9)
    assert p.cost_usd == pytest.approx(p.gpu_hours * p.price_usd_per_gpu_hour, rel=1e-9)
    # GPU-seconds = step time x GPUs paid, over the steps the tokens take, over the goodput
    steps = p.tokens * p.batch_token_multiplier / p.global_batch_tokens
    assert p.gpu_hours * 3600 == pytest.approx(p.step_time_s * p.gpus * steps / p.scale_efficiency, rel=1e-9)
    if "deadline_days" in kw:  # a deadline always finds a GPU count, and meets it
        assert p.wall_days <= kw["deadline_days"] * (1 + 1e-9)


def systems_from(catalog, first: str = "vera-rubin-nvl72") -> list[str]:
    """The catalog's systems, ``first`` first: hypothesis starts from (and shrinks towards) the first
    element, and an example whose every system is refused tests nothing (vera-rubin-nvl72 runs
    every catalog workload; a100-sxm, alphabetically first, runs only two)."""
    return sorted(catalog.systems, key=lambda s: (s != first, s))


@pytest.mark.slow  # seconds: every catalog workload compared on two systems
def test_each_catalog_workload_gives_finite_non_negative_numbers_on_both_vendors():
    # every workload once, on a system that runs them all and one that rotates over the vendors
    # and generations, under both pricings (the random draws below favour the first workload)
    catalog = _catalog()
    others = ["mi355x", "gb300-nvl72", "h200", "mi325x", "b200", "rubin-ultra"]
    for i, workload in enumerate(sorted(catalog.workloads)):
        systems = ["vera-rubin-nvl72", others[i % len(others)]]
        r = compare(catalog, systems, workload, pricing=("rental", "tco")[i % 2])
        assert [s.hardware for s in r.systems] == systems
        assert_finite_non_negative(r)


@bounded(6)
@given(data=st.data())
def test_every_catalog_workload_gives_finite_non_negative_numbers(data):
    catalog = _catalog()
    workload = data.draw(st.sampled_from(sorted(catalog.workloads)))
    systems = data.draw(st.lists(st.sampled_from(systems_from(catalog)), min_size=1, max_size=3))
    pricing = data.draw(st.sampled_from(["rental", "tco"]))
    try:
        r = compare(catalog, systems, workload, pricing=pricing)
    except IpdError:  # a model that does not fit, a system without a price: clean errors
        assume(False)
    assert_finite_non_negative(r)


@bounded(8)
@given(data=st.data(), k=st.floats(0.01, 100))
def test_cost_is_linear_in_the_rental_price(data, k):
    catalog = _catalog()
    hw, model, tokens, kw = data.draw(train_args())
    kw["pricing"] = "rental"
    base = train(catalog, hw, model, tokens, **kw).pretraining
    label = base.pricing.split(":", 1)[1]
    cat = catalog.with_overrides([f"systems.{hw}.prices.{label}={base.price_usd_per_gpu_hour * k!r}"])
    scaled = train(cat, hw, model, tokens, **kw).pretraining
    assert scaled.cost_usd == pytest.approx(k * base.cost_usd, rel=1e-9)
    assert (scaled.gpus, scaled.gpu_hours, scaled.energy_mwh) == (base.gpus, base.gpu_hours, base.energy_mwh)


@bounded(6)
@given(data=st.data(), k=st.floats(0.05, 20))
def test_tco_cost_is_linear_in_capex_and_electricity(data, k):
    catalog = _catalog()
    hw, model, tokens, kw = data.draw(train_args())
    kw["pricing"] = "tco"
    capex = catalog.system(hw).capex_usd.value
    kwh = catalog.economics.electricity_usd_per_kwh.value

    def cost(capex_usd: float, usd_per_kwh: float) -> float:
        sets = [f"systems.{hw}.capex_usd={capex_usd!r}", f"economics.electricity_usd_per_kwh={usd_per_kwh!r}"]
        return train(catalog.with_overrides(sets), hw, model, tokens, **kw).pretraining.cost_usd

    base = cost(capex, kwh)
    assert base == pytest.approx(train(catalog, hw, model, tokens, **kw).pretraining.cost_usd, rel=1e-12)
    assert cost(capex * k, kwh * k) == pytest.approx(k * base, rel=1e-9)  # both prices scaled: cost scales
    capex_only = cost(capex, 0.0)  # without power the owning cost is proportional to capex
    assert cost(capex * k, 0.0) == pytest.approx(k * capex_only, rel=1e-9)
    assert cost(capex, kwh * k) - capex_only == pytest.approx(k * (base - capex_only), rel=1e-6)


@pytest.mark.slow  # seconds: each example runs three or four plan searches
@bounded(5)
@given(data=st.data(), mfu=st.floats(0.05, 0.8))
def test_doubling_tokens_doubles_gpu_hours_at_fixed_mfu_and_gpus(data, mfu):
    catalog = _catalog()
    # models without a published recipe batch take one from the training FLOPs, so tokens move the plan
    recipe = [m for m in MODELS if catalog.model(m).training_global_batch_tokens is not None]
    assert len(recipe) >= 2  # llama-3.1-405b, deepseek-v3, moe-10t today
    hw, model, tokens, kw = data.draw(train_args(tuple(recipe)))
    days = kw.pop("deadline_days", None)
    if days is not None:  # fix the GPU count the deadline asks for
        kw["gpus"] = train(catalog, hw, model, tokens, deadline_days=days, **kw).pretraining.gpus
    one = train(catalog, hw, model, tokens, mfu=mfu, **kw).pretraining
    two = train(catalog, hw, model, 2 * tokens, mfu=mfu, **kw).pretraining
    assert two.gpus == one.gpus
    for field in ("gpu_hours", "wall_days", "cost_usd", "energy_mwh", "training_flops"):
        assert getattr(two, field) == pytest.approx(2 * getattr(one, field), rel=REL), field


@pytest.mark.slow  # seconds: each example runs three to five plan searches, up to a million GPUs
@bounded(4)
@given(args=train_args(), more=st.integers(1, 1_000_000))
# the edges, besides the drawn examples: one GPU more than the memory floor; a million more with
# the shortest deadline the strategy draws; a million more on an AMD system, an MoE model, fp8,
# with the longest deadline
@example(args=("h100-sxm", "llama-3.1-8b", 1e12, {"precision": "bf16", "pricing": "tco", "gpus": 8}), more=1)
@example(
    args=("h100-sxm", "llama-3.1-8b", 1e12, {"precision": "bf16", "pricing": "tco", "deadline_days": 0.5}),
    more=1_000_000,
)
@example(
    args=(
        "mi355x",
        "qwen3-30b-a3b",
        1e15,
        {"precision": "fp8", "pricing": "rental", "deadline_days": 3650.0},
    ),
    more=999_999,
)
def test_more_gpus_never_lengthen_pretraining(args, more):
    catalog = _catalog()
    hw, model, tokens, kw = args
    kw = dict(kw)  # an explicit example's dict is the same object on each run
    days, n = kw.pop("deadline_days", None), kw.pop("gpus", None)
    n = n or memory_floor(catalog, hw, model, tokens, kw)
    fewer = train(catalog, hw, model, tokens, gpus=n, **kw).pretraining
    many = train(catalog, hw, model, tokens, gpus=n + more, **kw).pretraining
    assert many.wall_days <= fewer.wall_days * (1 + REL)
    if days is not None:  # and a later deadline never needs more GPUs
        sooner = train(catalog, hw, model, tokens, deadline_days=days, **kw).pretraining
        later = train(catalog, hw, model, tokens, deadline_days=days * 1.5, **kw).pretraining
        assert later.gpus <= sooner.gpus


@bounded(5)
@given(data=st.data())
def test_identical_systems_compare_at_exactly_one(data):
    catalog = _catalog()
    from ipd_cli.render.views import view

    hw = data.draw(st.sampled_from(systems_from(catalog)))
    twin = data.draw(st.sampled_from([hw, *catalog.system(hw).aliases]))
    workload = data.draw(st.sampled_from(sorted(catalog.workloads)))
    try:
        r = compare(catalog, [hw, twin], workload)
    except IpdError:
        assume(False)
    a, b = (s.model_dump(mode="json") for s in r.systems)
    assert a == b
    ratio_cells = [row[-1] for grid in view(r.model_dump(mode="json")).grids for row in grid.rows]
    ratios = {c for c in ratio_cells if isinstance(c, str) and c.endswith(("x", "same", "better", "worse"))}
    assert ratios <= {"same"}, ratios  # directed or not (a plain ratio read '1x' beside '1.00x better')


@pytest.mark.fresh_grids  # both runs evaluate their grids
@bounded(3)
@given(data=st.data())
def test_the_same_inputs_give_byte_identical_json_that_round_trips(data):
    catalog = _catalog()
    systems = data.draw(st.lists(st.sampled_from(systems_from(catalog)), min_size=1, max_size=3))
    workload = data.draw(st.sampled_from(sorted(catalog.workloads)))
    pricing = data.draw(st.sampled_from(["rental", "tco"]))
    args = ("compare", *systems, "--workload", workload, "--pricing", pricing, "-f", "json")
    first = run_cli(*args)
    assume(first.code == 0)
    assert run_cli(*args).stdout == first.stdout
    assert run_cli(*args, env={"IPD_CACHE_DIR": "off"}).stdout == first.stdout  # cache or YAML: same bytes
    parsed = json.loads(first.stdout)
    model = CompareResult.model_validate(parsed)
    assert model.model_dump(mode="json") == parsed
    assert to_json(model) == first.stdout


@bounded(6)
@given(data=st.data())
def test_train_json_round_trips(data):
    catalog = _catalog()
    hw, model, tokens, kw = data.draw(train_args())
    args = ["train", "--hardware", hw, "--model", model, "--tokens", repr(tokens), "-f", "json"]
    args += ["--precision", kw["precision"], "--pricing", kw["pricing"]]
    args += ["--days", repr(kw["deadline_days"])] if "deadline_days" in kw else ["--gpus", str(kw["gpus"])]
    r = run_cli(*args)
    assert r.code == 0, r.stderr
    parsed = json.loads(r.stdout)
    assert TrainResult.model_validate(parsed).model_dump(mode="json") == parsed
    assert (
        parsed["pretraining"]
        == train(catalog, hw, model, tokens, **kw).model_dump(mode="json")["pretraining"]
    )


@bounded(30)
@given(data=st.data(), low=st.floats(0.2, 5), gain=st.floats(1.0, 4), concurrency=st.integers(1, 256))
def test_higher_hbm_bandwidth_never_lowers_decode_throughput(data, low, gain, concurrency):
    catalog = _catalog()
    from ipd_cli.engine.serving import estimate_serving

    hw = data.draw(st.sampled_from(sorted(catalog.systems)))
    model = data.draw(st.sampled_from(MODELS[:5]))
    acc = catalog.system(hw).accelerator
    bw = catalog.accelerators[acc].hbm_tb_per_s.value

    def serve(factor: float, instance_gpus: int | None = None):
        cat = catalog.with_overrides([f"accelerators.{acc}.hbm_tb_per_s={bw * factor!r}"])
        return estimate_serving(cat, hw, model, concurrency=concurrency, instance_gpus=instance_gpus).serving

    try:
        slow = serve(low)
    except InfeasibleError:  # the model or its KV does not fit: bandwidth does not enter
        assume(False)
    fast = serve(low * gain, slow.instance_gpus)
    assert fast.instance_gpus == slow.instance_gpus
    # the search maximises tokens/s per GPU: that never falls
    assert fast.tokens_per_s_per_gpu >= slow.tokens_per_s_per_gpu * (1 - REL)
    # per-user speed is not the objective at a pinned concurrency: with faster HBM the search may
    # pick another deployment that serves more per GPU a little slower per user (b200 DeepSeek-V3
    # at 57 users, HBM x3 -> x6: 1 prefill x TP4 + 6 decode x DEP4 becomes one aggregated DEP4,
    # 1,770 -> 2,010 tokens/s per GPU, 144.9 -> 141.1 per user, as prefills now take turns with
    # decode); the same deployment is never slower
    if fast.configuration == slow.configuration:
        assert fast.tokens_per_s_per_user >= slow.tokens_per_s_per_user * (1 - REL)
        assert fast.tpot_ms <= slow.tpot_ms * (1 + REL)


@bounded(300)
@given(
    span=st.integers(1, 1024),
    domain=st.integers(1, 144),
    grow=st.integers(1, 144),
    k=st.integers(1, 22),
)
def test_a_bigger_domain_never_sends_a_token_to_more_domains(span, domain, grow, k):
    # an expert group's tokens reach no more other domains when each domain holds more of the
    # group (a larger scale-up domain never adds NIC traffic), and no fewer when the group spans
    # more GPUs; never more than one domain per pick, nor more than the other domains there are
    rd = f.remote_domains
    assert rd(float(span), float(domain + grow), k) <= rd(float(span), float(domain), k) + REL
    assert rd(float(span + grow), float(domain), k) >= rd(float(span), float(domain), k) - REL
    others = -(-span // domain) - 1
    assert 0.0 <= rd(float(span), float(domain), k) <= min(k, others) + REL


# Slow (seconds: each example a comparison of up to three systems; each example three comparisons,
# their grids evaluated afresh; each example two plan searches, or a comparison of a system with
# its twin, 1.7-1.9 s CPU a test on 2026-12-06), marked here rather than by a decorator: hypothesis
# derandomizes from a digest of the test's source, decorators included, so a decorator line would
# change the examples these tests draw
test_every_catalog_workload_gives_finite_non_negative_numbers = pytest.mark.slow(
    test_every_catalog_workload_gives_finite_non_negative_numbers
)
test_the_same_inputs_give_byte_identical_json_that_round_trips = pytest.mark.slow(
    test_the_same_inputs_give_byte_identical_json_that_round_trips
)
test_cost_is_linear_in_the_rental_price = pytest.mark.slow(test_cost_is_linear_in_the_rental_price)
test_identical_systems_compare_at_exactly_one = pytest.mark.slow(
    test_identical_systems_compare_at_exactly_one
)


@bounded(60)
@given(
    eval_s=st.floats(0, 1e5),
    write_s=st.floats(0, 1e5),
    staging_s=st.floats(0, 1e3),
    step_s=st.floats(1, 1e5),
    interval=st.integers(1, 1000),
    longer=st.integers(0, 1000),
    checkpoint=st.one_of(st.none(), st.integers(1, 1000)),
    asynchronous=st.booleans(),
)
def test_a_longer_eval_interval_never_raises_the_run_cost(
    eval_s, write_s, staging_s, step_s, interval, longer, checkpoint, asynchronous
):
    # an evaluation every N steps is paid N times less often: a longer interval (or none) never
    # costs a run more, whatever its checkpoints do; no periodic work leaves the run's cost as it was
    exposed = f.checkpoint_exposed_seconds(write_s, staging_s, checkpoint or 1, step_s, asynchronous)
    assert (exposed == write_s) if not asynchronous else (staging_s <= exposed <= staging_s + write_s)

    def usd_per_year(every):
        periodic = f.per_interval(eval_s, every) + f.per_interval(exposed, checkpoint)
        return f.rl_run(100, 12, step_s, 64 * step_s / 3600, 1.0, 1.0, 0.9, 1.1, periodic)["usd_per_year"]

    assert usd_per_year(interval + longer) <= usd_per_year(interval) * (1 + REL)
    assert usd_per_year(None) <= usd_per_year(interval + longer) * (1 + REL)
    if checkpoint is None:  # nothing periodic: exactly the run without the term
        assert f.rl_run(100, 12, step_s, 1.0, 1.0, 1.0, 0.9, 1.1, 0.0)["usd_per_year"] == 1200 * (1.1 / 0.9)
