"""The serving search's shortcuts give the numbers the plain computation gives, to the bit (issue 11,
speed): the step's parts worked out only for the rows a result reports, the target's bisection over
the rows whose range is still open (several of its steps in one pass where they are few), the
chosen pools' paid GPUs taken from the pricing that chose them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ipd_cli.engine import formulas as f
from ipd_cli.engine.search import take
from ipd_cli.engine.serving import grid
from ipd_cli.engine.serving.context import context
from ipd_cli.engine.serving.estimate import Shape, search
from ipd_cli.engine.serving.evaluate import _deployment_cost, layout_terms, step_terms
from ipd_cli.engine.serving.grid import Pins, _batch_for_target, step_parts, work_out_parts


def _same(a, b) -> bool:
    return np.float64(a).tobytes() == np.float64(b).tobytes()


@pytest.mark.parametrize(
    "hw, model, stack",
    [
        ("gb200-nvl72", "deepseek-r1", None),
        ("gb200-nvl72", "deepseek-r1", "sglang"),
        ("h100-sxm", "llama-3.1-70b", None),
        # no pool floor of its own: a decode pool's step worked out again on its DEP layouts only
        ("h100-sxm", "deepseek-r1", None),
    ],
)
def test_a_rows_step_parts_are_those_of_every_row_at_once(catalog, hw, model, stack):
    g = search(context(catalog, hw, model), Shape(stack=stack), Pins())
    whole, live = _every_row_at_once(g)
    if stack == "sglang":
        assert (whole["tbo"][live] == 1).any()  # two-batch overlap is among the parts checked
    rows = np.random.default_rng(0).choice(len(live), 400, replace=False)
    work_out_parts(g, rows[:200])  # some at once, the rest one by one
    for i in rows:
        parts = step_parts(g, int(i))
        for key, col in whole.items():
            assert _same(parts[key], col[i] if live[i] else np.nan), (int(i), key)


def _every_row_at_once(g):
    """Every row's step parts (:func:`step_terms` of the rows as a flat table: no grouping of the
    layouts' experts shares, no transposed blocks), checked against the grid's steps to the bit;
    and which rows run."""
    r = g.rows
    li = r["layout"]
    with np.errstate(all="ignore"):  # every row at once, as the search once kept them
        whole = step_terms(g.ph, take(g.lay, li), take(g.x, li), r["batch"], pool=r["disagg"])
    live = ~np.isnan(r["step_s"])
    assert whole["step_s"][live].tobytes() == r["step_s"][live].tobytes()
    return whole, live


def test_a_refined_grids_steps_are_those_of_every_row_at_once(catalog):
    # the finer ladder's rungs, over a block of layouts large enough to share their experts' shares
    # by group (a draft depth, stages and attention DP ranks apiece)
    g = search(context(catalog, "gb200-nvl72", "deepseek-r1"), Shape(), Pins())
    li = g.rows["layout"]
    first = np.flatnonzero(np.diff(li, prepend=-1) != 0)  # a row of each layout
    fine = grid.refine(g, first[:: max(1, len(first) // 200)].tolist())
    assert fine is not None and len(np.unique(fine.rows["layout"])) >= 2 * grid.GROUPED_LAYOUTS
    _every_row_at_once(fine)


def test_the_additive_floor_is_the_general_forms_numbers():
    # p = 1 (the catalog's): the floor and the work added, (f^1 + w^1)^(1/1) to the bit
    work = np.array([0.0, -0.0, 5e-324, 1e-7, 3.3e-5, 0.1, 7.0, 1e300, np.inf, -np.inf, np.nan])
    for floor in (0.0, 6.83e-05, 1e-4, np.inf, np.full(len(work), 1e-4), 1):
        with np.errstate(all="ignore"):  # (inf - inf)
            fast = f.floor_combined_seconds(floor, work, 1.0)
            general = f.floor_combined_seconds(floor, work, np.array(1.0))  # (an array p: the power form)
        assert np.asarray(fast).tobytes() == np.asarray(general).tobytes(), floor
    assert _same(f.floor_combined_seconds(1e-4, 3.3e-5, 1), (1e-4**1 + 3.3e-5**1) ** (1.0 / 1))


def _plain_bisection(ph, lay, x, target):
    """:func:`grid._batch_for_target` as it was: every row through every step."""
    n = len(x["d"])
    two = {k: np.concatenate([v, v]) for k, v in lay.items()}
    x2 = {k: np.concatenate([v, v]) for k, v in x.items()}
    waits = np.concatenate([np.ones(n), np.zeros(n)])
    lo, hi = np.ones(2 * n), np.maximum(x2["rank_max"] * x2["d"], 1.0)
    for _ in range(int(np.log2(max(float(hi.max()), 2.0))) + 2):
        mid = np.floor((lo + hi + 1) / 2)
        step = step_terms(ph, two, x2, mid, pool=1.0 - waits)["step_s"]
        speed = 1.0 / f.aggregated_tpot_seconds(mid, ph.osl, waits * x2["prefill_s"], step, x2["accepted"])
        ok = speed >= target
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid - 1)
    return lo[:n], lo[n:]


@pytest.mark.parametrize(
    "hw, model, layouts, pass_rows",
    [
        ("gb200-nvl72", "deepseek-r1", None, None),  # every layout, the default passes
        ("h100-sxm", "llama-3.1-70b", None, None),
        ("h100-sxm", "llama-3.1-70b", None, 1),  # one step a pass
        # a pinned search's few layouts: several steps a pass (the default's), or 7-8 at once
        ("gb200-nvl72", "deepseek-r1", 6, None),
        ("gb200-nvl72", "deepseek-r1", 6, 4096),
        ("h100-sxm", "llama-3.1-70b", 3, 4096),
    ],
)
def test_the_bisection_over_open_rows_finds_the_plain_bisections_batches(
    catalog, monkeypatch, hw, model, layouts, pass_rows
):
    if pass_rows is not None:
        monkeypatch.setattr(grid, "BISECTION_ROWS", pass_rows)
    g = search(context(catalog, hw, model), Shape(), Pins())
    lay, x = g.lay, g.x
    if layouts is not None:  # spread over the grid (sizes, families, precisions, drafts)
        at = np.linspace(0, len(x["d"]) - 1, layouts).astype(int)
        lay, x = take(lay, at), take(x, at)
    for target in (3.0, 50.0, 400.0, 1e6):
        with np.errstate(all="ignore"):
            got, want = (
                _batch_for_target(g.ph, lay, x, target),
                _plain_bisection(g.ph, lay, x, target),
            )
        for a, b in zip(got, want, strict=True):
            assert a.tobytes() == b.tobytes(), target


def test_the_chosen_pools_paid_gpus_are_their_price(catalog):
    g = search(context(catalog, "gb200-nvl72", "deepseek-r1"), Shape(), Pins())
    r, p = g.rows, g.pools
    at = p["rows"]
    cost = _deployment_cost(g.ph, p["prefill"], p["x"])(r["prefill_instances"][at], r["decode_instances"][at])
    assert r["deployment_gpus"][at].tobytes() == cost.tobytes()


def test_by_blocks_joins_as_concatenate_does():
    from ipd_cli.engine import search as sr

    rng = np.random.default_rng(3)
    n = sr.BLOCK * 2 + 123
    table = {"a": rng.random(n), "b": rng.integers(0, 9, n)}

    def fn(t):
        return {
            "x": t["a"] * 2.0,
            "pair": (t["b"] + 1, t["a"] > 0.5),
            "two": np.stack([t["a"], t["a"]], axis=1),
            "k": 7,
        }

    got, want = sr.by_blocks(fn, table), fn(table)
    assert got.keys() == want.keys() and got["k"] == 7
    for key in ("x", "two"):
        assert got[key].dtype == want[key].dtype and got[key].tobytes() == want[key].tobytes()
    for g, w in zip(got["pair"], want["pair"], strict=True):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()

    # a later block of another dtype (the short last one): joined as np.concatenate would (promoted),
    # not cast to the first block's
    def mixed(t):
        return t["b"] if len(t["b"]) == sr.BLOCK else t["b"] * 1.5

    out, last = sr.by_blocks(mixed, table), 2 * sr.BLOCK
    want = np.concatenate([table["b"][:last], table["b"][last:] * 1.5])
    assert out.dtype == want.dtype == np.float64 and out.tobytes() == want.tobytes()


def test_member_is_isin_and_the_stored_legendre_rule_is_numpys():
    # the serving search's np.isin / np.union1d / np.setdiff1d / np.intersect1d and numpy's
    # Gauss-Legendre rule imported numpy.ma and numpy.polynomial on the compare path (~25 ms)
    from ipd_cli.engine.legendre import leggauss
    from ipd_cli.engine.search import member

    rng = np.random.default_rng(5)
    values = rng.integers(-3, 400, (7, 9))
    for of in ([], [5], (0, 1, 2), rng.integers(0, 400, 30), np.array([399, 7, 7, -3]), [10**6]):
        got, want = member(values, of), np.isin(values, of)
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), of
    assert not member(np.array([np.nan, 1.0]), [np.nan, 2.0]).any()  # a NaN is among nothing, as isin
    nodes, weights = leggauss()
    want_nodes, want_weights = np.polynomial.legendre.leggauss(64)
    assert nodes.tobytes() == want_nodes.tobytes() and weights.tobytes() == want_weights.tobytes()


@pytest.mark.parametrize("draft_bytes", [None, float("inf")])
def test_rows_that_do_not_draft_step_as_they_do_beside_rows_that_draft(catalog, draft_bytes):
    # step_terms prices the draft's later passes once for rows that draft; where no row does, it
    # takes the first pass's numbers for them (every width is 1 + 0): the rows without a draft
    # must get the same parts, to the bit, alone and beside drafting rows, an infinite what-if
    # draft too (its passes, times 0 passes, still make those steps NaN either way)
    g = search(context(catalog, "gb200-nvl72", "deepseek-r1"), Shape(), Pins())
    ph = g.ph if draft_bytes is None else replace(g.ph, draft_dense_bytes=draft_bytes)
    with np.errstate(all="ignore"):
        x = layout_terms(ph, g.lay)
    rows = np.flatnonzero(~np.isnan(g.rows["step_s"]))[::7]
    li, batch, pool = g.rows["layout"][rows], g.rows["batch"][rows], g.rows["disagg"][rows]
    drafts = g.lay["k"][li] > 0
    assert drafts.any() and (~drafts).any() and (g.lay["k"][li] > 1).any()
    with np.errstate(all="ignore"):
        together = step_terms(ph, take(g.lay, li), take(x, li), batch, pool=pool)
        plain = ~drafts
        alone = step_terms(ph, take(g.lay, li[plain]), take(x, li[plain]), batch[plain], pool=pool[plain])
    for key, col in alone.items():
        assert col.tobytes() == together[key][plain].tobytes(), key
    assert np.isnan(alone["step_s"]).all() == (draft_bytes is not None)


def test_a_contexts_reader_is_built_once_and_reads_into_its_own_trace(catalog):
    # one reader per context (~57k reads in `ipd calibrate` built one each): the same reader every
    # time, reading the context's catalog into the context's trace; a context made from it with
    # another trace (a quiet one) reads through a reader of its own
    ctx = context(catalog, "gb200-nvl72", "deepseek-r1")
    assert ctx.inp is ctx.inp and ctx.inp.cat is catalog and ctx.inp.trace is ctx.trace
    hbm = ctx.spec("HBM bandwidth", "hbm_tb_per_s")
    assert hbm == catalog.accelerators[ctx.system.accelerator].hbm_tb_per_s.value * 1e12  # TB/s -> B/s
    assert ctx.trace.items[-1].path == f"accelerators.{ctx.system.accelerator}.hbm_tb_per_s"
    quiet = replace(ctx, trace=ctx.trace.quiet())
    assert quiet.inp is not ctx.inp and quiet.inp.trace is quiet.trace


def test_the_kept_expert_spread_is_the_one_worked_out_for_the_same_sizes_model_and_domain(catalog):
    # _prefill_work takes a token's remote EP ranks and scale-up domains from _expert_spread, kept
    # per (model, domain, expert group sizes): a second ask returns the kept arrays, and another
    # domain, another expert count or another set of sizes must not (each is checked against
    # the numbers worked out afresh, to the bit)
    from ipd_cli.engine.serving.evaluate import _expert_spread, _spread

    g = search(context(catalog, "gb200-nvl72", "deepseek-r1"), Shape(), Pins())
    e = g.lay["e"]
    first = _expert_spread(g.ph, e)
    assert _expert_spread(g.ph, e.copy()) is first  # the same sizes, another array: kept
    assert not first[0].flags.writeable and not first[1].flags.writeable
    for ph, sizes in (
        (g.ph, e),
        (replace(g.ph, domain=8), e),  # 8-GPU domains: DEP16+ groups span more of them
        (replace(g.ph, experts=64), e),
        (g.ph, e[::3]),
    ):
        got, want = _expert_spread(ph, sizes), _spread(ph, sizes)
        for a, b in zip(got, want, strict=True):
            assert a.tobytes() == b.tobytes()
    assert _expert_spread(replace(g.ph, domain=8), e)[1].tobytes() != first[1].tobytes()
    assert _expert_spread(replace(g.ph, experts=64), e)[0].tobytes() != first[0].tobytes()


def test_the_prefill_choices_best_row_is_the_first_largest_above_zero_and_none_at_a_nan():
    # _prefill_choice's pick without a second reduction: argmax's row where its value is above 0,
    # else -1, is `argmax if max > 0 else -1` on every array, ties, NaN (argmax: the first NaN's
    # row, max: NaN) and all-negative ones included
    rng = np.random.default_rng(16)
    cases = [np.array([-2.0, -1.0]), np.array([0.0, -2.0]), np.array([3.0, 3.0, 1.0]), np.array([np.nan])]
    cases += [np.array([1.0, np.nan, 5.0]), np.array([-2.0, np.nan, -1.0]), np.array([np.inf, 2.0])]
    values, odds = [-2.0, -1.0, 0.0, 0.5, 1.0, 2.0, np.nan], [0.2, 0.2, 0.1, 0.2, 0.15, 0.1, 0.05]
    cases += [rng.choice(values, size=n, p=odds) for n in (1, 2, 3, 7, 40) for _ in range(50)]
    for v in cases:
        plain = int(np.argmax(v)) if v.max() > 0 else -1
        assert grid._best_above_zero(v) == plain, v


def _plain_prefill_choice(ph, lay, x, pins):
    """grid._prefill_choice's picks as it first wrote them: every group's and every hole's masked
    argmax, taken where the masked maximum is above 0."""
    pf = grid._prefill_choice(ph, lay, x, pins)  # its score, holes and tiles (the picks redone below)
    drafting = grid._drafts(lay)
    depths = lay["k"][lay["k"] > 0]
    first = depths.min() if depths.size else 0
    ok = (x["free_gpu"] > 0) & (x["rank_max"] >= 1) & (lay["pp"] == 1)
    ok &= (lay["k"] == 0) | (lay["k"] == first)
    ok &= grid._tp_divides_heads(ph, lay) & grid._ep_within_experts(ph, lay)
    score = np.where(ok, 1.0 / (x["pool_prefill_s"] * x["paid"]), -1.0)
    best, fill = np.full_like(pf["index"], -1), np.full_like(pf["fill"], -1)
    for k in range(len(ph.kv_precisions)):
        for e in (0, 1):
            for drafts in (0, 1):
                fits = (lay["kv"] == k) & ((lay["eplb"] == e) | (lay["e"] == 1)) & (drafting == drafts)
                cand = np.where(fits, score, -2.0)
                best[k, e, drafts] = int(np.argmax(cand)) if cand.max() > 0 else -1
                for j, h in enumerate(pf["holes"]):
                    tiling = np.where(h % lay["g"] == 0, cand, -2.0)
                    fill[j, k, e, drafts] = int(np.argmax(tiling)) if tiling.max() > 0 else -1
    return pf, best, fill


@pytest.mark.parametrize(
    "hw, model, speculative", [("gb200-nvl72", "deepseek-r1", None), ("gb200-nvl72", "deepseek-r1", 2),
                               ("vera-rubin", "kimi-k2", None), ("h100-sxm", "llama-3.1-70b", None)],
)  # fmt: skip
def test_the_prefill_choice_picks_what_every_masked_argmax_picks(catalog, hw, model, speculative):
    # the group's best taken for a hole it tiles, and no search where no score is above 0, give
    # each pick of the masked argmaxes: on the real scores, and with NaN scores (a group holding
    # one picks nothing, a hole may still pick among the rest), no score above 0, or one alone;
    # the 72-GPU racks leave holes (DEP64: 8), the 8-GPU H100 node none
    g = search(context(catalog, hw, model), Shape(speculative=speculative), Pins())
    rng = np.random.default_rng(7)
    n = len(g.lay["g"])
    cases = {"real": g.x["pool_prefill_s"]}
    cases["nan"] = np.where(rng.random(n) < 0.05, np.nan, g.x["pool_prefill_s"])
    cases["none above 0"] = np.full(n, np.inf)
    cases["one"] = np.where(np.arange(n) == rng.integers(n), 1.0, np.inf)
    for name, seconds in cases.items():
        x = dict(g.x, pool_prefill_s=seconds)
        pf, best, fill = _plain_prefill_choice(g.ph, g.lay, x, g.pins)
        assert np.array_equal(pf["index"], best) and np.array_equal(pf["fill"], fill), name
        if name == "real" and hw != "h100-sxm":  # the hole searches ran, and some picked a layout
            assert len(pf["holes"]) and (pf["fill"] >= 0).any()


@pytest.mark.parametrize(
    "hw, model, speculative", [("gb200-nvl72", "deepseek-r1", 2), ("h100-sxm", "llama-3.1-70b", None)]
)
def test_a_prefill_partners_columns_at_the_rows_are_those_gathered_from_every_layout(
    catalog, hw, model, speculative
):
    # _partner_rows works a pinned grid's few rows out at their own (decode, prefill) pairs, and
    # a grid of as many rows as layouts once per layout, gathered: every column, elementwise in
    # the pair, the same to the bit either way (the hole partners' -1 included), and of one dtype
    g = search(context(catalog, hw, model), Shape(speculative=speculative), Pins())
    lay, pf = g.lay, g.prefill
    n = len(lay["g"])
    chosen = pf["index"][lay["kv"], lay["eplb"], grid._drafts(lay)]
    rng = np.random.default_rng(11)
    for p_lay in (chosen, grid._hole_partners(lay, pf)):
        for rows in (np.array([n - 1]), rng.integers(0, n, 3), rng.integers(0, n, 2 * n), np.arange(0)):
            each = grid._partner_rows(g.ph, lay, g.x, p_lay, rows, per_layout=False)
            gathered = grid._partner_rows(g.ph, lay, g.x, p_lay, rows, per_layout=True)
            assert each.keys() == gathered.keys()
            for k, v in each.items():
                assert v.dtype == gathered[k].dtype and v.tobytes() == gathered[k].tobytes(), k
            assert (each["handoff_s"] > 0).all() and (each["prefill_s"] > 0).all()


@pytest.mark.parametrize("hw, model", [("gb200-nvl72", "deepseek-r1"), ("gb200-nvl72", "kimi-k2")])
def test_the_layout_rules_at_the_rows_are_those_gathered_from_every_layout(catalog, hw, model):
    # _checks works a pinned grid's few rows' layout rules (the layers, the heads, the experts,
    # the reach, the weights, the KV cache) out at their own layouts, and a grid of as many rows as
    # layouts once per layout, gathered: every check's mask the same either way, over rows drawn
    # from every layout, each rule broken by some and kept by others (every third layout given
    # more stages than layers: no default layout breaks that rule, a pinned `--layout pp100` does)
    g = search(context(catalog, hw, model), Shape(), Pins())
    n = len(g.lay["g"])
    lay = g.lay | {"pp": np.where(np.arange(n) % 3 == 0, g.ph.layers + 1, g.lay["pp"])}
    reach = grid._within_reach(g.ph, lay, g.pins)
    rng = np.random.default_rng(5)
    for li in (np.array([n - 1]), rng.integers(0, n, 7), rng.integers(0, n, 2 * n), np.arange(0)):
        ones = np.ones(len(li))
        r = {"layout": li, "prefill_ok": ones > 0, "tokens_per_s_per_gpu": ones}
        r |= {"tokens_per_s_per_user": ones, "step_s": ones}
        fits = rng.random(len(li)) < 0.5
        each = grid._checks(g.ph, lay, g.x, r, fits, reach, per_layout=False).checks
        gathered = grid._checks(g.ph, lay, g.x, r, fits, reach, per_layout=True).checks
        assert [c for c, _ in each] == [c for c, _ in gathered]
        for (c, a), (_, b) in zip(each, gathered, strict=True):
            assert a.dtype == b.dtype == bool and a.tobytes() == b.tobytes(), c
        if len(li) > n:  # the six layout columns' checks: each broken by some rows, kept by others
            for c, mask in each[:6]:
                assert mask.any() and not mask.all(), c
