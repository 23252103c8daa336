"""The RL pool search: the workload's `gpus` a cap, the pool within it with the least cost per
scheduled step whose schedule fits the year; a given total or `pin_gpus` a pin."""

from __future__ import annotations

import pytest
from helpers import run_cli

from ipd_cli import load
from ipd_cli.api import rl
from ipd_cli.engine import formulas as f


@pytest.fixture(scope="module")
def catalog():
    return load()


def _run_usd_per_step(r) -> float:
    """The run's cost per scheduled step: usd_per_step x phi / goodput x (1 + periodic / step)."""
    run = r.run
    return r.usd_per_step * f.run_step_cost_factor(
        run.goodput, run.staleness_steps_factor, r.step_seconds, run.periodic_s_per_step
    )


def test_the_cap_and_the_chosen_pool_by_hand(catalog):
    # Rubin, the 550B SWE step under the workload's 512: the chosen pool and all 512 (the old
    # answer, pinned), each priced GPUs x step seconds x $8.50 / 3,600 by hand
    capped = rl(catalog, "vera-rubin", "rl-swe-agent").rl
    pinned = rl(catalog, "vera-rubin", "rl-swe-agent", gpus=512).rl
    price = capped.price_usd_per_gpu_hour
    assert price == pinned.price_usd_per_gpu_hour == 8.5
    assert capped.gpus_cap == 512 and pinned.gpus_cap is None
    assert capped.gpus == capped.gen_gpus + capped.train_gpus < 512
    assert capped.usd_per_step == pytest.approx(capped.gpus * capped.step_seconds * 8.5 / 3600, rel=1e-12)
    # the cap the search weighed it against is the pinned run: 512 x its step x the price
    assert capped.gpus_cap_step_seconds == pytest.approx(pinned.step_seconds, rel=1e-12)
    assert capped.gpus_cap_usd_per_step == pytest.approx(512 * pinned.step_seconds * 8.5 / 3600, rel=1e-12)
    assert capped.gpus_cap_usd_per_step == pytest.approx(pinned.usd_per_step, rel=1e-12)
    # the latency-bound step: a few GPUs buy nearly the same step (906.5 s on 56 against 733 s on
    # 512), at about a seventh of the cost; in whole 4-GPU trays: one 8-GPU replica beside 48
    # training (a 9-GPU replica, 890.0 s on 57 until pools took whole nodes, fills 2.25 trays; 3
    # trays run a 12-GPU one at 854.3 s, 60 x 854.3 > 56 x 906.5 GPU-seconds a step)
    assert (capped.gen_gpus, capped.train_gpus, capped.systems) == (8, 48, 1)
    assert round(capped.step_seconds, 1) == 906.5
    trays = rl(catalog, "vera-rubin", "rl-swe-agent", gen_gpus=12, train_gpus=48).rl
    assert round(trays.step_seconds, 1) == 854.3 and trays.usd_per_step > capped.usd_per_step
    assert capped.step_seconds < 1.3 * pinned.step_seconds
    assert capped.usd_per_step < pinned.usd_per_step / 5
    # the chosen pool, given as a split, is the same step
    given = rl(catalog, "vera-rubin", "rl-swe-agent", gen_gpus=capped.gen_gpus, train_gpus=capped.train_gpus)
    assert given.rl.step_seconds == pytest.approx(capped.step_seconds, rel=1e-12)


def test_whole_nodes_by_hand():
    from ipd_cli.engine.rl.step import whole_nodes

    assert [whole_nodes(g, 8) for g in (1, 8, 9, 244)] == [8, 8, 16, 248]
    assert [whole_nodes(g, 4) for g in (9, 18, 36, 122)] == [12, 20, 36, 124]


def test_a_searched_pool_takes_whole_nodes(catalog):
    # a capacity planner's audit: Kimi K2's SWE step on H200 (open-model-agent's RL) trained on 244
    # GPUs, 30.5 8-GPU nodes, beside 88 generating; nobody rents half a node. The plan search's 244
    # now take 31 whole nodes: the same plan on 244 of them and the same step, 4 GPUs idle but paid
    r = rl(catalog, "h200", "rl-swe-agent", model="kimi-k2").rl
    assert (r.gen_gpus, r.train_gpus, r.trainer.gpus_used, r.systems) == (88, 248, 244, 42)
    assert round(r.step_seconds, 1) == 1039.1 and r.price_usd_per_gpu_hour == 2.41
    # priced GPU by GPU: 336 x 1,039.1 s x $2.41 / 3,600 = $233.7 (it was 332 GPUs, $230.9)
    assert r.usd_per_step == pytest.approx(336 * r.step_seconds * 2.41 / 3600, rel=1e-12)
    assert round(r.usd_per_step, 1) == 233.7 and round(332 * r.step_seconds * 2.41 / 3600, 1) == 230.9
    assert r.gen_gpus % 8 == 0 and r.train_gpus % 8 == 0


@pytest.mark.parametrize(
    ("hardware", "workload", "cap"),
    [("vera-rubin", "rl-swe-agent", 512), ("gb200-nvl72", "rl-swe-agent", 256), ("h100", "rl-swe-agent", 512),
     ("vera-rubin", "rl-swe-agent-10t", 2048)],
)  # fmt: skip
def test_the_chosen_pool_never_costs_more_than_the_whole_cap(catalog, hardware, workload, cap):
    cat = load(sets=[f"workload.gpus={cap}"])
    capped = rl(cat, hardware, workload).rl
    pinned = rl(catalog, hardware, workload, gpus=cap).rl
    assert capped.gpus <= cap
    assert _run_usd_per_step(capped) <= _run_usd_per_step(pinned) * (1 + 1e-12)
    # and the sample costs no more (the samples per step are fixed)
    assert capped.run.usd_per_refresh <= pinned.run.usd_per_refresh * (1 + 1e-12)
    days = capped.run.wall_days_per_refresh * capped.run.refreshes_per_year
    assert capped.pool_fits_schedule and days <= f.DAYS_PER_YEAR * (1 + 1e-12)


def test_a_tight_schedule_takes_a_larger_pool_and_none_fitting_the_fastest(catalog):
    # 56 GPUs take 1.35 days a refresh, 512 about 1.1: 300 refreshes fit 365 days only on a larger
    # pool than the cheapest; 1,000 fit on none, so the fastest, all 512, as pinned
    loose = rl(catalog, "vera-rubin", "rl-swe-agent").rl
    pinned = rl(catalog, "vera-rubin", "rl-swe-agent", gpus=512).rl
    assert loose.run.wall_days_per_refresh * 300 > f.DAYS_PER_YEAR
    assert pinned.run.wall_days_per_refresh * 300 < f.DAYS_PER_YEAR
    tight = rl(load(sets=["workload.refreshes_per_year=300"]), "vera-rubin", "rl-swe-agent").rl
    assert loose.gpus < tight.gpus <= 512 and tight.pool_fits_schedule
    assert tight.run.wall_days_per_refresh * 300 <= f.DAYS_PER_YEAR * (1 + 1e-12)
    assert _run_usd_per_step(loose) <= _run_usd_per_step(tight) <= _run_usd_per_step(pinned) * (1 + 1e-12)
    none = rl(load(sets=["workload.refreshes_per_year=1000"]), "vera-rubin", "rl-swe-agent").rl
    assert none.pool_fits_schedule is False and none.gpus == 512
    assert (none.gen_gpus, none.train_gpus, none.step_seconds) == (
        pinned.gen_gpus, pinned.train_gpus, pinned.step_seconds,
    )  # fmt: skip


def test_a_pin_keeps_the_whole_pool(catalog):
    # --gpus, pin_gpus and --split auto run on all of the total, split for the shortest step, as
    # before the pool search (the 550B step on Rubin: 432 generating + 80 training, 733.5 s)
    given = rl(catalog, "vera-rubin", "rl-swe-agent", gpus=512).rl
    pinned = rl(load(sets=["workload.pin_gpus=true"]), "vera-rubin", "rl-swe-agent").rl
    auto = rl(catalog, "vera-rubin", "rl-swe-agent", split="auto").rl
    for r in (given, pinned, auto):
        assert (r.gpus, r.gen_gpus, r.train_gpus) == (512, 432, 80) and r.gpus_cap is None
        assert r.step_seconds == pytest.approx(733.4927, rel=1e-6)


def test_the_pool_is_named_on_stderr_and_in_explain():
    res = run_cli("rl", "--hardware", "vera-rubin", "-f", "json")
    data = res.json()["rl"]
    assert data["gpus_cap"] == 512 and data["gpus"] < 512
    assert f"RL post-training runs on {data['gpus']} GPUs" in res.stderr
    assert "of the 512 its RL workload's gpus allow: the pool with the least cost per step" in res.stderr
    assert "ipd: note:" in res.stderr
    pinned = run_cli("rl", "--hardware", "vera-rubin", "--gpus", "512", "-f", "json")
    assert "gpus allow" not in pinned.stderr
    explained = run_cli("explain", "vera-rubin", "--workload", "rl-swe-agent", "-f", "json").json()
    rows = {a["metric"]: a for a in explained["items"]}
    assert rows["input: training GPUs"]["origin"] == rows["input: generation GPUs"]["origin"] == "pool search"
    assert rows["input: training GPUs"]["value"] == data["train_gpus"]
    assert "least cost per step whose schedule fits the year" in rows["input: training GPUs"]["note"]
    assert "a cap" in rows["input: GPUs asked for (generation and training)"]["note"]


def test_the_step_floor_is_timed_without_an_update():
    import numpy as np

    from ipd_cli.engine.rl.step import SyncPhase, step_floor, timed
    from ipd_cli.engine.rl.sync import NO_SYNC

    rollout, training = np.array([10.0, 3.0, 7.0]), np.array([4.0, 8.0, 7.0])
    for mode in ("colocated", "disaggregated", "one-step-off", "async"):
        want = [timed(mode, r, t, SyncPhase(NO_SYNC)).seconds for r, t in zip(rollout, training, strict=True)]
        assert list(step_floor(mode, rollout, training)) == want
    assert list(step_floor("one-step-off", rollout, training)) == [10.0, 8.0, 7.0]  # by hand
    assert list(step_floor("disaggregated", rollout, training)) == [14.0, 11.0, 14.0]


def test_a_steps_seconds_by_mode_by_hand():
    # step_seconds: timed()'s seconds, as the split search compares a step with the best found,
    # group after group; a rollout of 10 s, a training of 20 s, an update of 3 s whose senders are
    # busy 1 s of it
    from ipd_cli.engine.rl.step import Step, SyncPhase, step_seconds, timed
    from ipd_cli.engine.rl.sync import NO_SYNC

    assert step_seconds("colocated", 10.0, 20.0, 3.0, 1.0) == 33.0  # 10 + 20 + 3, in series
    assert step_seconds("disaggregated", 10.0, 20.0, 3.0, 1.0) == 33.0
    assert step_seconds("one-step-off", 10.0, 20.0, 3.0, 1.0) == 23.0  # max(10, 20) + 3
    assert step_seconds("async", 10.0, 20.0, 3.0, 1.0) == 21.0  # max(10 + 3, 20 + 1)
    assert step_seconds("async", 30.0, 20.0, 3.0, 1.0) == 33.0  # max(30 + 3, 20 + 1)
    # timed(): the same seconds, and what of the update the step exposes; no update but a colocated
    # offload of 2 s and a switch of 0.5 s (the senders busy 0 s): async max(10 + 2.5, 20 + 0) = 20,
    # exposed min(2.5, 20 - max(10, 20)) = 0; one-step-off max(10, 20) + 2.5 = 22.5, all exposed
    parked = SyncPhase(NO_SYNC, 2.0, 0.5)
    assert timed("async", 10.0, 20.0, parked) == Step(20.0, 0.0)
    assert timed("one-step-off", 10.0, 20.0, parked) == Step(22.5, 2.5)


def test_trainer_sizes_start_at_the_fewest_and_each_trains_faster(catalog):
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl.estimate import setup
    from ipd_cli.engine.rl.trainer import trainer, trainer_sizes

    w = catalog.rl_workload("rl-swe-agent")
    s = setup(sv.serving_context(load(), "vera-rubin", w.model), w, "rental", "test")
    sizes = trainer_sizes(s.rates, s.memory.min_gpus, 512)
    assert sizes[0] == s.memory.min_gpus and sizes == sorted(set(sizes)) and sizes[-1] <= 512
    times = [(tr := trainer(s.rates, w, n)).logprob_s + tr.training_s for n in sizes]
    # each size is where a faster plan starts (the fastest plan on n GPUs runs on any more)
    assert all(b < a for a, b in zip(times, times[1:], strict=False)), times
    assert trainer_sizes(s.rates, 64, 63) == []


@pytest.mark.parametrize(("hardware", "cap"), [("vera-rubin", 96), ("gb200-nvl72", 128)])
def test_the_floor_prunes_no_cheaper_pool(hardware, cap):
    # every pool of the grid (trainer sizes x generation sizes within the cap), evaluated: the
    # search, which evaluates only those its floor cannot rule out, finds the cheapest of them
    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl.estimate import (
        _run_step_s,
        _StepSeconds,
        cheapest_pool,
        evaluate,
        schedule_step_s,
        setup,
    )
    from ipd_cli.engine.rl.step import pool_candidates, split_gpus
    from ipd_cli.engine.rl.trainer import trainer_sizes

    cat = load(sets=[f"workload.gpus={cap}"])
    _, w, origin = resolve_workload(cat, "rl-swe-agent", {})
    s = setup(sv.serving_context(cat, hardware, w.model), w, "rental", origin)
    pools = sorted({int(g) for g in s.rollouts.candidates.gpus})
    gen, train = split_gpus(cap, pools, _StepSeconds(s), s.memory.min_gpus, grain=s.system_gpus)
    chosen = cheapest_pool(s, pools, cap, gen, train)
    allowed = schedule_step_s(s)
    best = None
    trains = trainer_sizes(s.rates, s.memory.min_gpus, cap - min(pools))
    gens = pool_candidates(min(pools), cap - trains[0], [*pools, s.system_gpus])
    for t in trains:
        for g in gens:
            if g + t > cap:
                continue
            run_s = _run_step_s(s, evaluate(s, g, t, quiet=True), g, t)
            if run_s <= allowed and (best is None or ((g + t) * run_s, g + t) < best[:2]):
                best = ((g + t) * run_s, g + t, g, t)
    out = evaluate(s, chosen.gen_gpus, chosen.train_gpus, quiet=True)
    cost = (chosen.gen_gpus + chosen.train_gpus) * _run_step_s(s, out, chosen.gen_gpus, chosen.train_gpus)
    assert best is not None and cost <= best[0] * (1 + 1e-12), (chosen, best)
    assert chosen.tried < len(trains) * len(gens)  # the floor ruled some out


def test_pool_candidates_are_one_grid_the_cap_only_ends():
    from ipd_cli.engine.rl.step import MAX_SPLITS, POOL_SIZE_RATIO, pool_candidates

    units = [128, 144, 192, 8]
    small, large = pool_candidates(128, 4000, units), pool_candidates(128, 8000, units)
    assert small == [g for g in large if g <= 4000]  # a larger cap tries every size a smaller one does
    assert all(any(g % u == 0 for u in units) for g in large) and large == sorted(set(large))
    # every multiple of 8 from 128 up to the MAX_SPLITS-th, then steps of the ratio at most
    assert large[:MAX_SPLITS] == list(range(128, 128 + 8 * MAX_SPLITS, 8))
    tail = large[MAX_SPLITS - 1 :]
    assert all(b <= a * POOL_SIZE_RATIO + 8 for a, b in zip(tail, tail[1:], strict=False))
    # few sizes: every one, as the split search's exact grid
    assert pool_candidates(128, 600, [128, 144]) == [128, 144, 256, 288, 384, 432, 512, 576]
    assert pool_candidates(128, 100, units) == []


def test_a_larger_cap_never_takes_a_costlier_pool():
    # H100's 10T SWE step: under caps of 6,000 and 12,000 the cheapest pool is 1,152 generating +
    # 4,096 training; under 8,192 the cap-dependent grid stepped over 1,152 and took 1,008 + 4,096,
    # $7,686.5 a step against $7,682.1 (a code review)
    small, large = (
        rl(load(sets=[f"workload.gpus={cap}"]), "h100", "rl-swe-agent-10t").rl for cap in (6000, 8192)
    )
    assert small.pool_fits_schedule and large.pool_fits_schedule
    assert _run_usd_per_step(large) <= _run_usd_per_step(small) * (1 + 1e-12)
    assert (large.gen_gpus, large.train_gpus) == (small.gen_gpus, small.train_gpus) == (1152, 4096)


def _setup(hardware: str, workload: str, sets: tuple[str, ...] = ()):
    """A fresh pool-search setup (its own rollout engine and caches)."""
    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl.estimate import setup

    cat = load(sets=list(sets))
    _, w, origin = resolve_workload(cat, workload, {})
    return setup(sv.serving_context(cat, hardware, w.model), w, "rental", origin)


@pytest.mark.parametrize(
    ("hardware", "workload", "sets"),
    [("vera-rubin", "rl-swe-agent", ()), ("gb200-nvl72", "rl-swe-agent", ("workload.mode=async",)),
     ("h100", "rl-swe-agent-10t", ("workload.mode=one-step-off", "workload.gpus=8192")),
     ("mi355x", "rl-swe-agent", ())],
)  # fmt: skip
def test_the_pool_floors_at_once_are_each_pools_own(hardware, workload, sets):
    # the pool search's floors as arrays (Rollouts.soonest over every generation size, one
    # trainer_seconds over every trainer size) equal, bit for bit, the scalar answers one pool at a
    # time (in_group on an engine of its own, whose caches soonest did not fill; trainer)
    import numpy as np

    from ipd_cli.engine.rl.generation import NO_LOAD
    from ipd_cli.engine.rl.step import pool_candidates, schedule
    from ipd_cli.engine.rl.trainer import trainer, trainer_seconds, trainer_sizes

    s, scalar = _setup(hardware, workload, sets), _setup(hardware, workload, sets)
    asynchronous = schedule(s.w.mode, s.w.staleness_bound) == "async"
    pools = sorted({int(g) for g in s.rollouts.candidates.gpus})
    gens = pool_candidates(min(pools), 20_000, [*pools, s.system_gpus])
    # the grid's first sizes and a spread of the rest, plus one too small for any replica (inf)
    sizes = [min(pools) - 1, *gens[:40], *gens[40::25]]
    fast = s.rollouts.soonest(s.nums, sizes, asynchronous, NO_LOAD)
    one = [scalar.rollouts.in_group(scalar.nums, g, asynchronous, None, NO_LOAD)[1] for g in sizes]
    assert fast.tolist() == one and np.isinf(fast[0]) and np.isfinite(fast[1:]).all()
    # every trainer size of the search, a size between two of them, the cap itself, and one past
    # the request's largest trainer (its trainer reads a table of its own)
    trains = trainer_sizes(s.rates, s.memory.min_gpus, s.rates.cap)
    sizes = [*trains, trains[0] + 1, s.rates.cap, s.rates.cap + 8]
    fast = trainer_seconds(s.rates, s.w, sizes)
    one = [(tr := trainer(scalar.rates, scalar.w, t)).logprob_s + tr.training_s for t in sizes]
    assert fast.tolist() == one
    assert fast[len(trains)] == fast[0]  # a size between two runs the smaller one's plan


def test_the_trainer_floors_by_hand_and_every_plan_of_a_table(catalog):
    # trainer_seconds by its formula, written out for one size from the plan table's row:
    # logprob_passes x forward / share + ppo_epochs x ((step - fixed) / share + fixed) + the
    # step's fixed time; and the one evaluation of every distinct plan's log-prob pass equals
    # the scalar one's (plan_forward_seconds) on each row of a MoE trainer's table
    from ipd_cli.engine import trainplan as tpn
    from ipd_cli.engine.rl.trainer import _forward_seconds_of_rows, plans_by_size, trainer_seconds
    from ipd_cli.errors import InfeasibleError

    s = _setup("vera-rubin", "rl-swe-agent-10t", ("workload.gpus=16384",))
    r, w = s.rates, s.w
    table = plans_by_size(r)
    n = s.memory.min_gpus
    i = table.best(n)
    out = {k: float(v[i]) for k, v in table.s.out.items() if not isinstance(v, tuple)}
    forward = tpn.plan_forward_seconds(tpn.plan_of(table.s, i), r.y) / r.share
    step = (out["step_s"] - out["fixed_s"]) / r.share + out["fixed_s"]
    want = w.logprob_passes * forward + (w.ppo_epochs * step + r.fixed_s)
    assert trainer_seconds(r, w, [n]).tolist() == [want]
    # 1,024 to 8,192 GPUs (a searched split's trainer has at most 16,383: 16,384's plan is not searched)
    assert s.arch.is_moe and len(set(table.rows.tolist())) == 4
    rows = sorted(set(table.rows.tolist()))
    one = [tpn.plan_forward_seconds(tpn.plan_of(table.s, k), r.y) for k in rows]
    assert _forward_seconds_of_rows(r, table.s, rows).tolist() == one
    with pytest.raises(InfeasibleError, match=f"on {n - 1:,} GPUs"):
        trainer_seconds(r, w, [n, n - 1])


def test_a_trainer_table_kept_for_a_larger_cap_answers_a_smaller_one_as_its_own_search():
    # plans_by_size answers a cap below one it keeps for the same inputs from that table, cut to
    # the plans using at most the cap (_within), with no search; every size's plan and numbers,
    # and the smallest trainer, are those of a search up to the smaller cap itself (vera-rubin's
    # SWE trainer, whose smallest is 48 GPUs: caps below it hold none, as their own search)
    from dataclasses import replace

    from ipd_cli.engine import trainplan as tpn
    from ipd_cli.engine.rl import trainer as rt

    r = _setup("vera-rubin", "rl-swe-agent").rates
    inputs = (r.key, tuple(sorted(r.pins.items())))
    kept = rt.plans_by_size(r, 1024)
    searched = []
    real = tpn.search_sizes
    try:
        tpn.search_sizes = lambda *a: searched.append(a) or real(*a)
        for cap in (600, 512, 100, 48, 40):
            for key in [k for k in rt._SIZES if k[:-1] == inputs and k[-1] < 1024]:
                rt._SIZES.pop(key), rt._BYTES.pop(key)  # the cap's own entry, if an earlier test kept it
            assert rt._SIZES[(*inputs, 1024)] is kept
            cut, own = rt.plans_by_size(replace(r, cap=cap)), real(r.y, cap, r.pins).compact()
            assert cut.min_gpus == own.min_gpus == (48 if cap >= 48 else None)
            _same_plans(cut, own, cap)
    finally:
        tpn.search_sizes = real
    assert searched == []


@pytest.mark.parametrize(
    ("hardware", "workload"), [("vera-rubin", "rl-swe-agent"), ("gb200-nvl72", "rl-swe-agent-10t")]
)
def test_a_searched_split_searches_trainers_of_all_gpus_but_one(catalog, monkeypatch, hardware, workload):
    # a searched split's generation takes at least one GPU, so its trainer table goes up to the
    # workload's gpus less one (512 -> 511, 2,048 -> 2,047: no plan on exactly 2^k GPUs searched);
    # the estimate is the one a table up to all of them gives (the old cap), field for field;
    # colocated, the trainer has all of them, and a given split its own trainer
    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import trainplan as tpn
    from ipd_cli.engine.rl import estimate as est
    from ipd_cli.engine.rl import trainer as rt

    caps: list[int] = []
    real = tpn.search_sizes
    monkeypatch.setattr(tpn, "search_sizes", lambda x, cap, pins: caps.append(cap) or real(x, cap, pins))

    def fresh() -> object:  # (no table kept from another test or run)
        monkeypatch.setattr(rt, "_SIZES", {})
        monkeypatch.setattr(rt, "_BYTES", {})
        return rl(catalog, hardware, workload)

    _, w, _ = resolve_workload(catalog, workload, {})
    mine = fresh()
    assert caps == [w.total_gpus() - 1]
    largest = est._largest_trainer
    monkeypatch.setattr(est, "_largest_trainer", lambda w, split: w.total_gpus())
    theirs = fresh()
    assert caps[1:] == [w.total_gpus()]
    assert mine == theirs
    assert largest(w.model_copy(update={"mode": "colocated"}), None) == w.total_gpus()
    assert largest(w.model_copy(update={"gen_gpus": 40, "train_gpus": 88}), None) == 88
    assert largest(w.model_copy(update={"gen_gpus": 40, "train_gpus": 88}), "auto") == w.total_gpus() - 1


@pytest.mark.parametrize("system,workload", [("vera-rubin", "rl-swe-agent"), ("h100", "rl-math-reasoning")])
def test_a_trainer_search_prices_only_the_micro_rows_with_a_plan(monkeypatch, system, workload):
    # rows_with_plans tests each run of grid rows alike in what dp_candidates and _runnable read
    # once per micro-batch size: the same mask as the test on every row, holding every row expand
    # builds a plan of and dropping others (39 % of the dense grid, 66 % of the MoE one); kept
    # per grid (the same read-only array, and the same mask again from a copy of the grid); and
    # search_sizes pricing only those rows gives every size the plan and numbers of the search
    # over the whole grid
    import numpy as np

    from ipd_cli.engine import trainplan as tpn

    r, cap = _setup(system, workload).rates, 512
    x, pins = r.y, r.pins
    P = tpn.micro_grid(x, cap, pins)
    mask = tpn.rows_with_plans(P, x, cap, pins)
    d, mb = tpn.dp_candidates(P, x, cap, pins)
    ok = ~np.isnan(d)
    row = np.nonzero(ok)[0]
    cols = {c: P[c][row] for c in (*tpn._RUN_COLS, "mbs")}
    one = np.zeros(len(mask), dtype=bool)
    one[row[tpn._runnable({**cols, "dp": d[ok], "mb": mb[ok]})]] = True
    assert mask.tolist() == one.tolist()
    built = np.unique(tpn.expand(P, x, cap, pins)["row"])
    assert mask[built].all() and 0 < mask.mean() < 1
    assert tpn.rows_with_plans(P, x, cap, pins) is mask
    copy = {k: np.array(v) for k, v in P.items()}
    assert tpn.rows_with_plans(copy, x, cap, pins).tolist() == mask.tolist()
    fast = tpn.search_sizes(x, cap, pins).compact()
    monkeypatch.setattr(tpn, "rows_with_plans", lambda P, *a: np.ones(len(P["tp"]), dtype=bool))
    every = tpn.search_sizes(x, cap, pins).compact()
    assert fast.min_gpus == every.min_gpus is not None
    _same_plans(fast, every, cap)


def _same_plans(mine, theirs, cap: int) -> None:
    """Two size tables (trainplan.search_sizes(...).compact()) give every size 1..cap the same
    plan and numbers, or both none."""
    from ipd_cli.engine import trainplan as tpn

    for n in range(1, cap + 1):
        a, b = mine.best(n), theirs.best(n)
        assert (a is None) == (b is None)
        if a is not None:
            pa, pb = tpn.choice(mine.s, a, n), tpn.choice(theirs.s, b, n)
            assert (pa.plan, pa.out) == (pb.plan, pb.out)


_SETUPS = [
    ("vera-rubin", "rl-swe-agent", ()),
    ("gb200-nvl72", "rl-swe-agent", ("workload.mode=async",)),
    ("h100", "rl-swe-agent-10t", ("workload.mode=one-step-off", "workload.gpus=8192")),
    ("mi355x", "rl-swe-agent", ("workload.gpus=2048",)),
]


@pytest.mark.parametrize(("hardware", "workload", "sets"), _SETUPS)
def test_the_rollout_floors_are_under_each_sizes_soonest(hardware, workload, sets):
    # rollout_floors, the one cheap pass that stands in for a size's soonest rollouts until the
    # search reaches it, is never above them (else the search could pass over a pool), and inf
    # exactly where no replica fits
    import numpy as np

    from ipd_cli.engine.rl.generation import NO_LOAD, rollout_floors
    from ipd_cli.engine.rl.step import pool_candidates, schedule

    s = _setup(hardware, workload, sets)
    asynchronous = schedule(s.w.mode, s.w.staleness_bound) == "async"
    pools = sorted({int(g) for g in s.rollouts.candidates.gpus})
    sizes = [min(pools) - 1, *pool_candidates(min(pools), 3000, [*pools, s.system_gpus])]
    floors = rollout_floors(s.rollouts, s.nums, sizes, asynchronous, NO_LOAD)
    soonest = s.rollouts.soonest(s.nums, sizes, asynchronous, NO_LOAD)
    assert np.isinf(floors[0]) and np.isinf(soonest[0])
    assert (floors[1:] <= soonest[1:]).all() and (floors[1:] > 0).all()
    assert np.median(soonest[1:] / floors[1:]) < 1.2  # a floor near them, not 0


@pytest.mark.parametrize(("hardware", "workload", "sets"), _SETUPS)
def test_the_search_takes_the_pools_in_the_order_of_every_sizes_soonest(
    monkeypatch, hardware, workload, sets
):
    # cheapest_pool makes a size's soonest rollouts only when it reaches one of its pools; it
    # evaluates the same pools in the same order, and answers the same, as the search that made
    # the soonest of every size first and sorted every pool by its floor (written out here)
    import numpy as np

    from ipd_cli.engine.rl import estimate as est
    from ipd_cli.engine.rl.generation import NO_LOAD, exposed_floor, in_flight_batches
    from ipd_cli.engine.rl.step import pool_candidates, schedule, split_gpus, step_floor, whole_nodes
    from ipd_cli.engine.rl.trainer import trainer, trainer_sizes

    seen: list[tuple[int, int]] = []
    evaluate = est.evaluate

    def recorded(s, g, t, quiet=False):
        seen.append((g, t))
        return evaluate(s, g, t, quiet=quiet)

    monkeypatch.setattr(est, "evaluate", recorded)
    s, eager = _setup(hardware, workload, sets), _setup(hardware, workload, sets)
    cap = s.w.total_gpus()
    pools = sorted({int(g) for g in s.rollouts.candidates.gpus})
    gen, train = split_gpus(cap, pools, est._StepSeconds(s), s.memory.min_gpus, grain=s.system_gpus)
    seen.clear()
    chosen = est.cheapest_pool(s, pools, cap, gen, train)
    assert seen[0] == (gen, train)  # the whole cap's fastest split, first
    lazy = seen[1:]

    # the eager search: every size's soonest, every trainer, all pools sorted by their floor
    s = eager
    mode = schedule(s.w.mode, s.w.staleness_bound)
    asynchronous = mode == "async"
    allowed = est.schedule_step_s(s)
    fast = est.evaluate(s, gen, train, quiet=True)
    best = ((gen + train) * est._run_step_s(s, fast, gen, train), gen + train, gen, train)
    # the plan search's trainer sizes in whole nodes (MI355X's 54 take 56: 7 of its 8-GPU nodes)
    node = int(s.links.node)
    sized = (whole_nodes(t, node) for t in trainer_sizes(s.rates, s.memory.min_gpus, cap - min(pools)))
    trains = sorted({t for t in sized if t <= cap - min(pools)})
    units = [*pools, s.system_gpus]
    in_flight = int(np.ceil(s.nums.generated * in_flight_batches(s.w.staleness_bound, asynchronous)))
    gens = pool_candidates(min(pools), min(cap - trains[0], max(units) * in_flight), units)
    env = exposed_floor(s.nums, s.host, asynchronous)
    # every size's soonest at once (Rollouts.soonest: the same numbers, to the bit, as in_group's one
    # pool at a time, test_the_pool_floors_at_once_are_each_pools_own; ~1,800 fastest() calls less)
    rollout = s.rollouts.soonest(s.nums, gens, asynchronous, NO_LOAD) + env
    training = np.array([(tr := trainer(s.rates, s.w, t)).logprob_s + tr.training_s for t in trains])
    g_grid, t_grid = np.meshgrid(np.array(gens), np.array(trains), indexing="ij")
    floor = step_floor(mode, rollout[:, None], training[None, :])
    gpus = g_grid + t_grid
    bound = gpus * floor
    candidates = np.flatnonzero(((gpus <= cap) & (floor <= allowed) & np.isfinite(bound)).ravel())
    seen.clear()
    for k in candidates[np.argsort(bound.ravel()[candidates], kind="stable")]:
        if bound.flat[k] >= best[0]:
            break
        g, t = int(g_grid.flat[k]), int(t_grid.flat[k])
        if (g, t) == (gen, train):
            continue
        run_s = est._run_step_s(s, est.evaluate(s, g, t, quiet=True), g, t)
        if run_s <= allowed and ((g + t) * run_s, g + t) < best[:2]:
            best = ((g + t) * run_s, g + t, g, t)
    assert lazy == seen and len(seen) >= 5
    assert (chosen.gen_gpus, chosen.train_gpus, chosen.tried) == (best[2], best[3], len(seen) + 1)


@pytest.mark.parametrize(("hardware", "workload", "sets"), _SETUPS[:2])
def test_the_pools_made_ahead_answer_as_those_made_one_by_one(monkeypatch, hardware, workload, sets):
    # where cheapest_pool reaches a pool not made, it makes the next ones it would take (each beside
    # its trainer, its own sandbox load: fastest_many) at once: the same pools evaluated in the same
    # order, the same answer, as one fastest() a pool (POOLS_AHEAD 1), with fewer fastest() calls
    from ipd_cli.engine.rl import estimate as est
    from ipd_cli.engine.rl import generation
    from ipd_cli.engine.rl.step import split_gpus

    seen: list[tuple[int, int]] = []
    calls = [0]
    evaluate, fastest = est.evaluate, generation.fastest

    def recorded(s, g, t, quiet=False):
        seen.append((g, t))
        return evaluate(s, g, t, quiet=quiet)

    def counted(*args, **kw):
        calls[0] += 1
        return fastest(*args, **kw)

    monkeypatch.setattr(est, "evaluate", recorded)
    monkeypatch.setattr(generation, "fastest", counted)
    answers = []
    for ahead in (1, est.POOLS_AHEAD):
        monkeypatch.setattr(est, "POOLS_AHEAD", ahead)
        s = _setup(hardware, workload, sets)
        cap = s.w.total_gpus()
        pools = sorted({int(g) for g in s.rollouts.candidates.gpus})
        gen, train = split_gpus(cap, pools, est._StepSeconds(s), s.memory.min_gpus, grain=s.system_gpus)
        seen.clear()
        calls[0] = 0
        chosen = est.cheapest_pool(s, pools, cap, gen, train)
        answers.append((repr(chosen), list(seen), calls[0]))
    (one, seen_one, calls_one), (many, seen_many, calls_many) = answers
    assert many == one and seen_many == seen_one and len(seen_one) > 2
    assert calls_many < calls_one


# steps 5 3 3 7 4 9 on sizes 1..6 and floors under them 1 3 2 7 3 9.5, for _least by hand
_STEPS = {1: 5.0, 2: 3.0, 3: 3.0, 4: 7.0, 5: 4.0, 6: 9.0}
_FLOORS = {1: 1.0, 2: 3.0, 3: 2.0, 4: 7.0, 5: 3.0, 6: 9.5}


def _least_by_hand(k, sharper=None):
    """``_least`` of the k best of _STEPS' sizes with _FLOORS (and a ``sharper`` floor): its
    answer (checked against a sort of every size), the sizes it priced, the lists it told ahead."""
    import numpy as np

    from ipd_cli.engine.rl.step import _least

    tried: list[int] = []
    told: list[list[int]] = []

    def step_s(g):
        tried.append(g)
        return _STEPS[g]

    floor_of = lambda gs: np.array([_FLOORS[g] for g in gs])  # noqa: E731
    more = () if sharper is None else (sharper.__getitem__,)
    got = _least(list(_STEPS), k, step_s, told.append, floor_of, *more)
    assert got == sorted(_STEPS, key=lambda g: (_STEPS[g], g))[:k]
    return got, tried, told


def test_sizes_taken_by_their_floors_rank_as_every_size_tried():
    # _least tries sizes in the order of a floor under their steps and stops at the first floor
    # above the k-th step found. In floor order: 1 (5 s), 3 (3 s), 2 (floor 3, not above 3 s:
    # tied, and the fewer GPUs win), 5 (floor 3), then 4's floor 7 is above 3 s: 4 and 6 are never
    # tried; the two best, 2 and 3 (ties: fewer GPUs), as a sort of all six
    for k, want in ((1, [2]), (2, [2, 3])):
        got, tried, told = _least_by_hand(k)
        assert got == want
        assert tried == [1, 3, 2, 5] and told == [[1, 3, 2, 5, 4, 6]]  # (one ahead: <= AHEAD_POOLS)


def test_sizes_told_together_are_tried_by_their_sharper_floors():
    # the sizes told ahead together are tried in the order of the higher of their two floors
    # (sharper: known once told), until it is above the k-th step found: sharper 5 3 2.5 7 4 -inf,
    # so by the higher 3 (2.5), 2 (3), 5 (4), 1 (5), 4 (7), 6 (9.5). 3 takes 3 s, 2 ties it (tried:
    # the fewer GPUs win), then 5's 4 is above 3 s: two tried where the floors alone try four
    # (1 3 2 5), the same two best
    import numpy as np

    sharper = {1: 5.0, 2: 3.0, 3: 2.5, 4: 7.0, 5: 4.0, 6: -np.inf}
    for k, want in ((1, [2]), (2, [2, 3])):
        got, tried, told = _least_by_hand(k, sharper)
        assert got == want
        assert tried == [3, 2] and told == [[1, 3, 2, 5, 4, 6]]


def test_a_zooming_split_search_skipping_sizes_by_floor_finds_the_same_split():
    # 100,000 GPUs in replicas of 3 and 8 (coarse to fine: too many sizes to try each), step
    # seconds 1 + |gen - 40,001| (40,000 and 40,002 tie at 2 s: the fewer GPUs win), a floor of
    # half that distance: the same split as without floors, from fewer sizes tried
    import numpy as np

    from ipd_cli.engine.rl.step import split_gpus

    class Balance:
        def __init__(self):
            self.tried = []

        def __call__(self, gen, train):
            self.tried.append(gen)
            return 1.0 + abs(gen - 40_001)

    class Floored(Balance):
        def floors(self, total, gens):
            return 1.0 + np.abs(np.array(gens) - 40_001) / 2

    every, floored = Balance(), Floored()
    assert split_gpus(100_000, [3, 8], every, min_train=10) == (40_000, 60_000)
    assert split_gpus(100_000, [3, 8], floored, min_train=10) == (40_000, 60_000)
    assert len(set(floored.tried)) < len(set(every.tried))


class _Counted:
    """A split search's ``balance``: _StepSeconds (a fresh setup's) counting the sizes it prices,
    without its floors (split_gpus and grown_split read what it has: ``ahead``, ``ahead_each``,
    ``floors``, ``soonest_floor``)."""

    def __init__(self, seconds):
        self.seconds, self.ahead, self.ahead_each, self.tried = seconds, seconds.ahead, seconds.ahead_each, []

    def __call__(self, gen, train):
        self.tried.append(gen)
        return self.seconds(gen, train)


class _Floored(_Counted):  # with the floors (rollout floor and trainer, no update)
    def floors(self, total, gens):
        return self.seconds.floors(total, gens)


class _Sharpened(_Floored):  # and the sharper one (a size's soonest rollouts)
    def soonest_floor(self, total, gen):
        return self.seconds.soonest_floor(total, gen)


@pytest.mark.parametrize(("hardware", "workload", "sets"), [_SETUPS[1], _SETUPS[3]])
def test_the_split_search_skipping_sizes_by_floor_finds_every_sizes_split(hardware, workload, sets):
    # split_gpus tries a size only where its floor (_StepSeconds.floors: rollout floor and trainer,
    # no update) is not above the best step found, nor where its sharper floor (soonest_floor: its
    # soonest rollouts) is: the same split, the same step seconds to the bit, as trying every
    # size (async on 512 GB200 GPUs: 133 sizes tried of 224 by the floors, 49 with the sharper;
    # MI355X's one-step-off on 2,048, coarse to fine: 226 of 242, 202)
    from ipd_cli.engine.rl import estimate as est
    from ipd_cli.engine.rl.step import split_gpus

    answers = []
    for kind in (_Sharpened, _Floored, _Counted):
        s = _setup(hardware, workload, sets)
        balance = kind(est._StepSeconds(s))
        cap = s.w.total_gpus()
        pools = sorted({int(g) for g in s.rollouts.candidates.gpus})
        gen, train = split_gpus(cap, pools, balance, est._min_train(s), grain=s.system_gpus)
        answers.append(((gen, train), balance.seconds(gen, train), len(balance.tried)))
    (split, step_s, fewest), (split_some, step_some, some), (split_all, step_all, every) = answers
    assert split == split_some == split_all and step_s == step_some == step_all
    assert fewest < some <= every


def test_a_grown_split_skipping_pools_by_floor_finds_every_pools_split():
    # grown_split tries a pool only where its GPUs x its soonest_floor are not above the least
    # GPU-seconds a step found: the same split, the same step to the bit, as trying every pool
    # (B300's 10T SWE step grown from 1,151 GPUs: 1 of its 18 pools tried)
    from ipd_cli.engine.rl import estimate as est
    from ipd_cli.engine.rl.step import grown_split, whole_nodes

    answers = []
    for kind in (_Sharpened, _Counted):  # (grown_split reads soonest_floor, not floors)
        s = _setup("b300", "rl-swe-agent-10t", ("workload.gpus=1151", "workload.grow_gpus_to_fit=true"))
        balance = kind(est._StepSeconds(s))
        node = int(s.links.node)
        pools = sorted({whole_nodes(int(g), node) for g in s.rollouts.candidates.gpus})  # as choose_split's
        gen, train = grown_split(pools, est._min_train(s), balance, grain=s.system_gpus)
        answers.append(((gen, train), balance.seconds(gen, train), len(balance.tried)))
    (split, step_s, some), (split_all, step_all, every) = answers
    assert split == split_all and step_s == step_all
    assert some < every


def test_a_grown_splits_floors_are_under_each_pools_cost(monkeypatch):
    # the floors grown_split skips pools by (GPUs x soonest_floor, GPU-seconds a step) are never
    # above the pool's cost (GPUs x its step; else the search could pass over the cheapest) and
    # near it: B300's 10T SWE step grown from 1,151 GPUs, all 43 pools (max floor / cost 0.9991).
    # The test above cannot tell: the cheapest pool has the least floor there, so it is tried
    # first and the answer stands with its floors x 5 (a code review)
    from ipd_cli.engine.rl import estimate as est
    from ipd_cli.engine.rl import step as rs

    seen: dict = {}
    least = rs._least

    def spy(sizes, k, step_s, ahead=rs._nothing, floor_of=rs._nothing, sharper=rs._unknown):
        seen.update(floors=floor_of(sizes).tolist(), costs=[step_s(g) for g in sizes])
        return least(sizes, k, step_s, ahead, floor_of, sharper)

    monkeypatch.setattr(rs, "_least", spy)
    s = _setup("b300", "rl-swe-agent-10t", ("workload.gpus=1151", "workload.grow_gpus_to_fit=true"))
    pools = sorted({rs.whole_nodes(int(g), int(s.links.node)) for g in s.rollouts.candidates.gpus})
    # (528 + 1,024 since the serving search's pipelines of stages dividing a node (B300: 36, 54, 81,
    # 108 and 162-GPU replicas) added pools of 88-GPU nodes: 2,455,417 GPU-s a step against 512's
    # 2,456,323, 2026-12-07)
    assert rs.grown_split(pools, est._min_train(s), est._StepSeconds(s), grain=s.system_gpus) == (528, 1024)
    ratios = [floor / cost for floor, cost in zip(seen["floors"], seen["costs"], strict=True)]
    assert len(ratios) == 43 and max(ratios) <= 1 and max(ratios) > 0.99  # (18 pools before those nodes)


@pytest.mark.parametrize(("hardware", "workload", "sets"), [_SETUPS[1], _SETUPS[3]])
def test_the_split_searchs_floors_are_under_each_sizes_step(hardware, workload, sets):
    # _StepSeconds.floors and soonest_floor (the rollout floor, or the soonest rollouts, with the
    # environment every step exposes, beside the trainer, no update) are never above the step of
    # the size they stand for (else the split search could pass over the shortest: _least stops
    # at the first floor above the best found), and near it (a floor of 0 would pass the search's
    # own check, skipping nothing): async on 512 GB200 GPUs, the workload's one-step-off on 2,048
    # MI355X (its exposed environment: a 1 s boot, 120 s of verification); 32 generation sizes of
    # the split each
    from ipd_cli.engine.rl import estimate as est
    from ipd_cli.engine.rl.step import _split_candidates, whole_nodes

    s = _setup(hardware, workload, sets)
    total, node = s.w.total_gpus(), int(s.links.node)
    pools = sorted({whole_nodes(int(g), node) for g in s.rollouts.candidates.gpus})
    units = [*pools, s.system_gpus] if s.system_gpus else list(pools)
    sizes = _split_candidates(min(pools), total - est._min_train(s), units, 32)[0]
    seconds = est._StepSeconds(s)
    floors = seconds.floors(total, sizes)
    sharper = [seconds.soonest_floor(total, g) for g in sizes]  # (each size's soonest made here)
    steps = [seconds(g, total - g) for g in sizes]
    assert floors is not None and len(sizes) > 10
    assert all(floor <= step for floor, step in zip(floors.tolist(), steps, strict=True))
    assert max(floor / step for floor, step in zip(floors.tolist(), steps, strict=True)) > 0.9
    # soonest_floor (its soonest rollouts for the rollout floor) too, and above the floor somewhere
    assert all(sharp <= step for sharp, step in zip(sharper, steps, strict=True))
    assert any(sharp > floor for sharp, floor in zip(sharper, floors.tolist(), strict=True))
    assert max(sharp / step for sharp, step in zip(sharper, steps, strict=True)) > 0.99


def _pool_note(**rl_fields):
    from types import SimpleNamespace

    from ipd_cli.engine.pricing import rl_pool_notes

    days, refreshes = rl_fields.pop("days", 1.0), rl_fields.pop("refreshes", 12.0)
    run = SimpleNamespace(wall_days_per_refresh=days, refreshes_per_year=refreshes)
    rl_ = SimpleNamespace(mode="one-step-off", gpus=56, train_gpus=48, gen_gpus=8, gpus_cap=512,
                          usd_per_step=100.0, step_seconds=900.0, gpus_cap_usd_per_step=800.0,
                          gpus_cap_step_seconds=700.0, pool_fits_schedule=True, run=run)  # fmt: skip
    for k, v in rl_fields.items():
        setattr(rl_, k, v)
    (note,) = rl_pool_notes([SimpleNamespace(hardware="x", rl=rl_)])
    return note


def test_the_pool_note_says_when_the_caps_bare_step_costs_less():
    # ranked per scheduled step (evaluations and checkpoints included), the cap's bare step can cost
    # less than the chosen pool's (MI300X's 10T async step: $1,132 against the cap's $1,131); the
    # note said "the least cost per step" beside the lower figure and nothing more
    assert "less a step but more with its share of the evaluations" in _pool_note(gpus_cap_usd_per_step=99.0)
    assert "less a step" not in _pool_note()


def test_the_pool_note_does_not_say_a_budgets_schedule_fits_the_year():
    # a budget buys refreshes beyond the RL workload's: 680 of 0.974 days take 662 days, warned as
    # 1.81 deployments side by side, while the note said "whose schedule fits the year"
    plain = _pool_note()
    assert "whose schedule fits the year," in plain
    over = _pool_note(days=0.974, refreshes=680.0)
    assert "whose schedule fits the year," not in over
    assert "at the RL workload's own refreshes (the 680 a year bought here take 662.3 days)" in over


def test_a_budgets_pool_note_and_its_schedule_warning_agree():
    res = run_cli("compare", "vera-rubin", "--scenario", "open-model-agent",
                  "--set", "workload.post_training.budget_usd_per_year=2e7", "-f", "json")  # fmt: skip
    assert "such RL deployments run side by side" in res.stderr
    assert "whose schedule fits the year," not in res.stderr
    assert "at the RL workload's own refreshes" in res.stderr


def test_a_total_too_small_for_whole_nodes_names_the_split_that_runs():
    # --gpus 50 on Rubin: a searched split takes whole 4-GPU nodes (4 + 48 = 52), but the smallest
    # replica is 2 GPUs and a given split 2 + 48 runs on the 50; the error named only "replicas of 4
    # GPUs at least" and --gpus >= 52
    res = run_cli("rl", "--hardware", "vera-rubin", "--gpus", "50", "-f", "json")
    assert res.code == 1
    assert "--gen-gpus 2 and --train-gpus 48 give a split of 50 GPUs" in res.stderr
    given = run_cli("rl", "--hardware", "vera-rubin", "--gen-gpus", "2", "--train-gpus", "48", "-f", "json")
    assert given.code == 0 and given.json()["rl"]["gpus"] == 50


def test_a_colocated_pool_is_the_cheapest_of_the_sizes_tried(catalog):
    # a capacity planner's audit (2026-12-07): colocated ran on all of the workload's gpus, so the
    # cap chose the winner. Rubin's colocated math step under the workload's 128: each pool of the
    # colocated grid (whole replicas or systems holding the training state: 16, 20, ... 128 GPUs),
    # pinned, priced GPUs x step x $8.50 / 3,600 with its run's factors: the pool search's is the
    # least of them, 16 GPUs at 2,550 s ($96.34) against all 128 at 546.3 s ($165.1)
    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl.estimate import _colocated_grid, _replica_pools, setup

    capped = rl(catalog, "vera-rubin", "rl-math-reasoning").rl
    assert capped.mode == "colocated" and capped.gpus_cap == 128 and capped.pool_fits_schedule
    assert capped.gpus == capped.gen_gpus == capped.train_gpus == 16
    assert capped.usd_per_step == pytest.approx(16 * capped.step_seconds * 8.5 / 3600, rel=1e-12)
    assert (round(capped.step_seconds, 1), round(capped.usd_per_step, 2)) == (2550.1, 96.34)
    pinned = rl(catalog, "vera-rubin", "rl-math-reasoning", gpus=128).rl
    assert (round(pinned.step_seconds, 1), round(pinned.usd_per_step, 1)) == (546.3, 165.1)
    assert capped.gpus_cap_usd_per_step == pytest.approx(pinned.usd_per_step, rel=1e-12)
    _, w, origin = resolve_workload(catalog, "rl-math-reasoning", {})
    s = setup(sv.serving_context(catalog, "vera-rubin", w.model), w, "rental", origin)
    sizes = _colocated_grid(s, _replica_pools(s), 128)[0]
    assert sizes[:4] == [16, 20, 24, 28] and sizes[-1] == 128 and len(sizes) == 29
    costs = {n: _run_usd_per_step(rl(catalog, "vera-rubin", "rl-math-reasoning", gpus=n).rl) for n in sizes}
    assert min(costs, key=lambda n: (costs[n], n)) == 16
    assert _run_usd_per_step(capped) == pytest.approx(costs[16], rel=1e-12)
    # the same step as the chosen pool pinned
    assert capped.step_seconds == pytest.approx(
        rl(catalog, "vera-rubin", "rl-math-reasoning", gpus=16).rl.step_seconds, rel=1e-12
    )


def test_a_colocated_pin_keeps_the_whole_pool(catalog):
    # --gpus and pin_gpus run a colocated step on all of them, as before the pool search
    given = rl(catalog, "hopper", "rl-math-reasoning", gpus=128).rl
    pinned = rl(load(sets=["workload.pin_gpus=true"]), "hopper", "rl-math-reasoning").rl
    for r in (given, pinned):
        assert (r.gpus, r.gen_gpus, r.train_gpus, r.gpus_cap) == (128, 128, 128, None)
        assert round(r.step_seconds, 1) == 2066.1
    capped = rl(catalog, "hopper", "rl-math-reasoning").rl
    assert capped.gpus == 64 < 128 == capped.gpus_cap
    assert _run_usd_per_step(capped) < _run_usd_per_step(given)
    res = run_cli(
        "rl", "--hardware", "hopper", "--workload", "rl-math-reasoning", "--gpus", "128", "-f", "json"
    )
    assert res.json()["rl"]["gpus"] == 128 and "gpus allow" not in res.stderr
    # where no pool's schedule fits the year (1,000 refreshes), the fastest: all of the cap
    none = rl(load(sets=["workload.refreshes_per_year=1000"]), "hopper", "rl-math-reasoning").rl
    assert none.pool_fits_schedule is False and none.gpus == 128 == none.gpus_cap
    assert none.step_seconds == pytest.approx(given.step_seconds, rel=1e-12)


def test_a_colocated_comparison_is_not_decided_by_the_cap():
    # the audit's comparison: colocated SWE RL, GB200 against H100. On all of the cap H100 was
    # 1.19x cheaper a step at 512 ($447.6 against $533.7) and 1.09x dearer at 128 ($183.1 against
    # $167.8); each now runs its cheapest pool within either cap (GB200 64, H100 128: both within
    # 128), so the two caps give the same steps and the same winner
    runs = {}
    for cap in (512, 128):
        cat = load(sets=["workload.mode=colocated", f"workload.gpus={cap}"])
        runs[cap] = {hw: rl(cat, hw, "rl-swe-agent").rl for hw in ("gb200-nvl72", "h100")}
        for hw, pinned_usd in (
            ("gb200-nvl72", {512: 533.74, 128: 167.78}),
            ("h100", {512: 447.64, 128: 183.14}),
        ):
            assert round(runs[cap][hw].gpus_cap_usd_per_step, 2) == pinned_usd[cap]
    for hw, gpus in (("gb200-nvl72", 64), ("h100", 128)):
        a, b = runs[512][hw], runs[128][hw]
        assert a.gpus == b.gpus == gpus and a.step_seconds == pytest.approx(b.step_seconds, rel=1e-12)
        assert a.usd_per_step == pytest.approx(b.usd_per_step, rel=1e-12)
    for cap in (512, 128):
        assert runs[cap]["gb200-nvl72"].usd_per_step < runs[cap]["h100"].usd_per_step


def test_a_colocated_pool_is_named_on_stderr_and_in_explain():
    res = run_cli("rl", "--hardware", "vera-rubin", "--workload", "rl-math-reasoning", "-f", "json")
    data = res.json()["rl"]
    assert (data["gpus"], data["gpus_cap"]) == (16, 128)
    assert "runs on 16 GPUs (generating and training on the same GPUs) of the 128" in res.stderr
    explained = run_cli(
        "explain",
        "vera-rubin",
        "--workload",
        "rl-math-reasoning",
        "--set",
        "workload.mode=colocated",
        "-f",
        "json",
    ).json()
    rows = {a["metric"]: a for a in explained["items"]}
    assert rows["input: training GPUs"]["origin"] == rows["input: generation GPUs"]["origin"] == "pool search"
    assert "generating and training on the same GPUs" in rows["input: training GPUs"]["note"]
    assert "a cap" in rows["input: GPUs asked for (generation and training)"]["note"]
