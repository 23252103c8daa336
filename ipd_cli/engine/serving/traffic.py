"""A deployment sized for a traffic, for every traffic value at once.

One mechanism for ``serve --tokens-per-day`` (one value) and a sweep whose rows move a scenario's
traffic (every distinct value of a physics point): the disaggregated rows' pools sized for each
traffic (:func:`evaluate.traffic_pools`: with a TTFT target, the fewest GPUs whose prefill and
sequence-slot queues hold the time to first token within it; without, ceil(traffic / decode rate)
decode instances, ceil(traffic x prefill_s / osl) prefill instances), their paid GPUs and tokens/s
per GPU, the copies of every other row's deployment (:func:`copies_for_traffic`), the GPUs each row
takes for each traffic (ceil(copies x deployment GPUs)) and the choice
(:func:`choose_for_traffic`: the fewest GPUs among the rows meeting the target; ties: the speed
per user, then the most tokens/s per GPU, then the fewer deployment GPUs, then the first row) are
2-D arrays, rows x traffic values, evaluated in blocks of at most :data:`BLOCK_CELLS` cells. Ties
go to speed first: the same GPUs cost the same, and the faster configuration serves the traffic's
users better (an audit: DeepSeek-V3 on B200 at 0.1 requests/s was served by `DEP4 EPLB batch 986`
at 6.7 tokens/s per user, 0.4 % of its slots in use, where the same 4 GPUs serve `TP4 batch 2` at 187).

Without a TTFT target, rows whose columns no traffic moves (aggregated instances, pinned pools)
are reduced first, per deployment size, to those no other row of the size beats on both tokens/s
per GPU and speed: for equal deployment GPUs the GPUs a traffic takes never grow with tokens/s per
GPU, so a row with no more of either (the first of equals) is beaten at every traffic. With one,
their copies also hold their queues'
waits, which tokens/s per GPU does not order: a bound (:class:`_Bound`) leaves out those whose
copies that merely carry the traffic already take more GPUs than some row's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ipd_cli.engine import formulas as f
from ipd_cli.engine.search import distinct, member, near_max

from .evaluate import GPU_FLOOR_SLACK, traffic_pools
from .point import queue_groups

BLOCK_CELLS = 1 << 22  # rows x traffic values per block at most (each 2-D column 32 MB)
BLOCK_VALUES = 64  # traffic values per block (sorted: a block's bound prunes rows for all of them)
POOL_COLUMNS = (
    "tokens_per_s_per_gpu",
    "deployment_gpus",
    "decode_instances",
    "prefill_instances",
    "prefill_share",
)


@dataclass
class Sized:
    """Per traffic value: the chosen row and its columns at that traffic (``cols``: the
    :data:`POOL_COLUMNS`, the row's pools sized for the traffic where they are), and whether some
    row met the target (None: no target)."""

    rows: Any
    met: bool | None
    cols: dict[str, Any]
    # whether some row's time to first token at the traffic met ``ttft_target_s`` (None: no target)
    ttft_met: bool | None = None


def _best_columns(mask: Any, keys: list[Any]) -> Any:
    """:func:`search.best` down each column of a 2-D ``mask`` (rows x values; some row true in
    each): per key, keep the candidates at its largest known value (NaN ranks below every
    number), then the first row."""
    import numpy as np

    c = mask
    for key in keys:
        k = np.broadcast_to(key, c.shape)
        known = c & ~np.isnan(k)
        top = np.max(np.where(known, k, -np.inf), axis=0)
        c = np.where(known.any(axis=0), known & (k == top), c)
    return np.argmax(c, axis=0)


def _pool_index(g: Any) -> Any:
    """Per grid row, its position in ``g.pools`` where a traffic sizes its pools (a feasible
    disaggregated row whose pools are not pinned), else -1; kept with the grid."""
    import numpy as np

    derived = getattr(g, "derived", None)
    if derived is not None and "traffic pools" in derived:
        return derived["traffic pools"]
    p = getattr(g, "pools", None) or {}
    pos = np.full(len(g.feasible), -1, dtype=np.int64)
    if p and len(p["rows"]):
        keep = g.feasible[p["rows"]]
        pos[p["rows"][keep]] = np.flatnonzero(keep)
    if derived is not None:
        derived["traffic pools"] = pos
    return pos


def choose_for_traffic(
    g: Any, target: float | None, tokens_per_s: Any, ttft_target_s: float | None = None
) -> Sized:
    """The row :func:`estimate.choose` takes for each of ``tokens_per_s`` (output tokens/s, an
    array), every value at once; with each chosen row's columns at its traffic. With a
    ``ttft_target_s``, the rows whose lone prompt (``ttft_s``) is within it, their pools
    (:func:`evaluate.decode_and_prefill_for_ttft`) or copies (:func:`copies_for_traffic`) sized to
    keep the time to first token at the traffic within it; where no row's is, every row (queues at
    their least stable count) and ``ttft_met`` False, as a missed speed target takes the rows that
    miss it."""
    import numpy as np

    tokens = np.asarray(tokens_per_s, dtype=float).reshape(-1)
    r, ok = g.rows, g.feasible
    ttft_met = None
    if ttft_target_s is not None:
        within = ok & (r["ttft_s"] < ttft_target_s)
        ttft_met = bool(within.any())
        ok = within if ttft_met else ok
    tps, usr, gpus = r["tokens_per_s_per_gpu"], r["tokens_per_s_per_user"], r["deployment_gpus"]
    speed = 1.0 / r["tpot_s"] if target is not None else usr
    meets = ok & (speed >= target) if target is not None else ok
    met = None if target is None else bool(meets.any())
    pos = _pool_index(g)
    bound = None
    if meets.any():
        cand = _candidates(np.flatnonzero(meets), pos, tps, speed, gpus, ttft_target_s is None)
        bound = _Bound(g, cand, pos, ttft_target_s, speed)
    else:  # the fastest rows (speed moves with no traffic), then tokens/s per GPU, fewer GPUs
        cand = np.flatnonzero(ok)
        s = near_max(speed, ok)[cand]  # a tie in the last bits is a tie
        known = ~np.isnan(s)
        if known.any():
            cand = cand[known & (s == np.max(s[known]))]
    rows = np.empty(len(tokens), dtype=np.int64)
    cols = {k: np.empty(len(tokens)) for k in (*POOL_COLUMNS, "copies") if k in r or k == "copies"}
    order = np.argsort(tokens, kind="stable")  # near traffics together: a bound prunes more
    if bound is not None:
        bound.size_probe(tokens[order])
    start = 0
    while start < len(tokens):
        width = min(BLOCK_VALUES, max(1, BLOCK_CELLS // max(1, len(cand))))
        at = order[start : start + width]
        start += width
        t = tokens[at]
        keep, cap = (cand, None) if bound is None else bound.candidates(t, slice(start - width, start))
        probed, rival = (None, None) if bound is None else (bound.probed, bound.rival)
        block = _columns(g, keep, pos, t, ttft_target_s, cap, probed, rival)
        bt, bg = block["tokens_per_s_per_gpu"], block["deployment_gpus"]
        if bound is not None:
            need = _gpus(block)
            keys = [-need, speed[keep][:, None], bt, -bg]
        else:
            keys = [bt, -bg]
        best = _best_columns(np.ones(bt.shape, dtype=bool), keys)
        rows[at] = keep[best]
        for k in cols:
            cols[k][at] = block[k][best, np.arange(len(t))]
    return Sized(rows, met, cols, ttft_met)


def _ranks_below(mine: Any, theirs: Any) -> Any:
    """Whether (tokens/s per GPU, speed, deployment GPUs, row) ``mine`` (arrays, broadcast) ranks
    strictly below ``theirs`` in :func:`choose_for_traffic`'s order among rows of as many GPUs: more
    speed, then tokens/s per GPU, then fewer deployment GPUs, then the first row. False where a key
    is not a number (such a row is kept)."""
    bt, sp, bg, row = mine
    r_bt, r_sp, r_bg, r_row = theirs
    return (sp < r_sp) | (
        (sp == r_sp) & ((bt < r_bt) | ((bt == r_bt) & ((bg > r_bg) | ((bg == r_bg) & (row > r_row)))))
    )


def _gpus(block: dict[str, Any]) -> Any:
    """Whole GPUs of a block's rows at each traffic: :func:`formulas.gpus_for_traffic` of their
    copies (NaN where a count is not a number)."""
    import numpy as np

    with np.errstate(all="ignore"):
        return f.gpus_for_traffic(block["copies"], block["deployment_gpus"])


class _Bound:
    """Which candidate rows can take a block of traffics: a row whose pools are sized takes at
    least the GPUs its instances use, ``max(T / rate, 1) x decode GPUs + max(T x prefill_s / osl,
    1) x prefill GPUs`` (paid GPUs are never fewer than used, and whole copies never fewer than
    one), and a row no traffic moves at least the whole copies that carry the traffic
    (:func:`formulas.deployment_copies`; its queues may take more), so it cannot be chosen where
    that is more than the GPUs some row takes (``probe``: of the rows that no traffic moves, the
    one with the most tokens/s per GPU of each deployment size, and the sized rows the bound ranks
    first): the block's rows are the rows the bounds leave, in their order. Exact: a row left out
    takes more GPUs than the probe's best at every traffic of the block. The probe is sized once
    for every traffic (:meth:`size_probe`; a block takes its columns), its rows no traffic moves
    first, then its leading sized rows, then the others, each only where its floor is within the
    GPUs the earlier ones take (:meth:`_probe`)."""

    PROBE = 16  # sized rows probed, by each bound
    LEAD = 1  # of them, sized first at every traffic: the others only below the GPUs these take

    def __init__(
        self, g: Any, cand: Any, pos: Any, ttft_target_s: float | None = None, speed: Any = None
    ) -> None:
        import numpy as np

        self.g, self.pos, self.cand, self.ttft, self.speed = g, pos, cand, ttft_target_s, speed
        self.rival: Any = None  # the probe's choice at a block's traffics (:meth:`candidates`)
        self.probed: Any = None  # (rows, their columns) at a block's traffics (:meth:`candidates`)
        self.columns: Any = None  # the probe's columns at every traffic (:meth:`size_probe`)
        r = g.rows
        sized = pos[cand] >= 0
        self.fixed, self.sized = cand[~sized], cand[sized]
        tps, gpus = r["tokens_per_s_per_gpu"], r["deployment_gpus"]
        # ascending, as distinct's below (:func:`_columns` looks its rows up by searchsorted)
        self.probe = self.lead = _candidates(self.fixed, pos, tps, tps, gpus)
        if not len(self.sized):
            return
        lay, p = g.lay, g.pools
        i = pos[self.sized]
        g_d = lay["g"][r["layout"][self.sized]]
        g_p = lay["g"][np.maximum(r["prefill_layout"][self.sized], 0)]
        with np.errstate(all="ignore"):
            per_token = g_d / p["rate"][i] + g_p * p["prefill"]["prefill_s"][i] / g.ph.osl
        slack = 1 - GPU_FLOOR_SLACK
        self.per_token, self.least = per_token * slack, (g_d + g_p) * slack
        by_token = np.argsort(self.per_token, kind="stable")
        by_least = np.argsort(self.least, kind="stable")
        lead = self.sized[np.concatenate([by_token[: self.LEAD], by_least[: self.LEAD]])]
        self.lead = distinct(np.concatenate([self.probe, lead]))
        probe = np.concatenate([by_token[: self.PROBE], by_least[: self.PROBE]])
        self.probe = distinct(np.concatenate([self.probe, self.sized[probe]]))

    def _probe(self, tokens: Any) -> dict[str, Any]:
        """The probe's columns at ``tokens``, in three stages, each sized only where it may take
        fewer GPUs than the stages before it (the cap of :func:`_columns`): its rows no traffic
        moves, then the sized rows each bound ranks first, then the others. Its fewest GPUs at
        each traffic are the whole probe's: a row past the cap takes more GPUs than an earlier
        stage's row there."""
        import numpy as np

        done, *stages = [s for s in (self.lead[self.pos[self.lead] < 0], self.lead, self.probe) if len(s)]
        cols = _columns(self.g, done, self.pos, tokens, self.ttft)
        for rows in stages:
            if len(rows) == len(done):
                continue  # each stage holds the one before it
            most = _fewest_gpus(cols)
            cap = np.where(tokens > 0, most, np.inf)  # no traffic: no copy at all, no floor to cap by
            cols = _columns(self.g, rows, self.pos, tokens, self.ttft, cap, (done, cols))
            done = rows
        return cols

    def size_probe(self, tokens: Any) -> None:
        """The probe's columns at every traffic of ``tokens`` (sorted), at once (in blocks of at
        most :data:`BLOCK_CELLS` cells): :meth:`candidates` takes a block's from them. Nothing
        where the candidates are few enough to be sized alike."""
        import numpy as np

        self.columns = None
        if len(self.sized) <= 4 * self.PROBE and len(self.fixed) <= 4 * self.PROBE:
            return
        width = max(1, BLOCK_CELLS // max(1, len(self.probe)))
        parts = [self._probe(tokens[s : s + width]) for s in range(0, len(tokens), width)]
        self.columns = {k: np.concatenate([part[k] for part in parts], axis=1) for k in parts[0]}

    def candidates(self, tokens: Any, at: slice) -> Any:
        """The rows that can take the traffics ``tokens`` (sorted; ``at``: their place among those
        :meth:`size_probe` took), and the fewest GPUs a probed row takes at each (None where
        nothing was probed): a row's GPUs above it at a traffic are never chosen there, so its
        pools and copies need not be sized there (:func:`_columns`)."""
        import numpy as np

        self.rival = None
        if self.columns is None:
            return self.cand, None
        few = len(self.sized) <= 4 * self.PROBE
        block = {k: v[:, at] for k, v in self.columns.items()}
        self.probed = (self.probe, block)  # sized once: the block's own sizing takes them as they are
        most = _fewest_gpus(block)  # the fewest GPUs a probed row takes
        with np.errstate(all="ignore"):
            # no traffic: no copy at all, the bounds (a copy at least) do not hold
            if not (np.isfinite(most).all() and (tokens > 0).all()):
                return self.cand, None
            sized = self.sized
            if not few:
                # the block's bounds first (a floor not a number keeps its row), then the rows
                # left, each traffic's: a floor within the fewest GPUs at one of them at least
                per_token, least = self.per_token, self.least
                near = ~((per_token > np.max(most / tokens)) | (least > np.max(most)))
                sized, per_token, least = sized[near], per_token[near], least[near]
                floor = np.maximum(tokens[None, :] * per_token[:, None], least[:, None])
                unknown = np.isnan(per_token) | np.isnan(least)
                sized = sized[(floor <= most[None, :]).any(axis=1) | unknown]
            r = self.g.rows
            fixed = self.fixed[
                _fixed_within(
                    tokens, most, r["tokens_per_s_per_gpu"][self.fixed], r["deployment_gpus"][self.fixed]
                )
            ]
        if self.speed is not None:
            self.rival = self._rival(block)
        return np.sort(np.concatenate([fixed, sized])), most

    def _rival(self, block: dict[str, Any]) -> Any:
        """The probe's choice at each traffic of ``block`` (its columns), with the keys the choice
        ranks it by after its GPUs (:func:`choose_for_traffic`, speed first): (every row's speed,
        and per traffic its tokens/s per GPU, speed, deployment GPUs, row). A row no traffic moves whose
        copies that carry a traffic take as many GPUs as the probe's fewest, and that ranks below
        it on those keys, is never chosen there (:func:`copies_for_traffic`)."""
        import numpy as np

        bt, bg = block["tokens_per_s_per_gpu"], block["deployment_gpus"]
        keys = [-_gpus(block), self.speed[self.probe][:, None], bt, -bg]
        best = _best_columns(np.ones(bt.shape, dtype=bool), keys)
        at = np.arange(bt.shape[1])
        row = self.probe[best]
        return self.speed, (bt[best, at], self.speed[row], bg[best, at], row)


def _fewest_gpus(block: dict[str, Any]) -> Any:
    """Per traffic, the fewest GPUs a row of ``block`` takes (inf where none is a number)."""
    import numpy as np

    need = _gpus(block)
    with np.errstate(all="ignore"):
        return np.where(np.isnan(need), np.inf, need).min(axis=0)


def _fixed_within(tokens: Any, most: Any, tps: Any, gpus: Any) -> Any:
    """Per row no traffic moves (``tps`` tokens/s per GPU, ``gpus`` a copy), whether at some of
    ``tokens`` the GPUs of the copies that carry it, at least max(gpus, tokens / tps), are within
    ``most`` (the fewest GPUs a probed row takes there): elsewhere it is never chosen. Per row at
    once, not per traffic: the traffics whose ``most`` reaches ``gpus`` are a suffix of them sorted
    by ``most``, whose least tokens / most is kept from the end (a hair of slack kept toward
    keeping a row)."""
    import numpy as np

    slack = 1 - GPU_FLOOR_SLACK
    order = np.argsort(most, kind="stable")
    ranked = most[order]
    ratio = (tokens / most)[order]
    least_ratio = np.append(np.minimum.accumulate(ratio[::-1])[::-1], np.inf)
    k = np.searchsorted(ranked, gpus * slack, side="left")
    return tps >= least_ratio[k] * slack


def _candidates(rows: Any, pos: Any, tps: Any, speed: Any, gpus: Any, reduce: bool = True) -> Any:
    """``rows`` (ascending) less the rows no traffic can choose: of the rows whose columns no
    traffic moves, per deployment size those no other beats on both tokens/s per GPU and speed
    (ordered by the most tokens/s per GPU, then speed, then the first: each kept where its speed is
    above every earlier one's), where ``reduce`` (no TTFT target: with one, a row's copies also
    hold its queues' waits, which its tokens/s per GPU does not order). A NaN speed is below every
    number, as the choice ranks it."""
    import numpy as np

    fixed = rows[pos[rows] < 0]
    if not (reduce and len(fixed) > 1):
        return rows  # every row, ascending as given
    sp = np.where(np.isnan(speed[fixed]), -np.inf, speed[fixed])
    order = np.lexsort((fixed, -sp, -tps[fixed], gpus[fixed]))
    g_sorted, s_sorted = gpus[fixed][order], sp[order]
    head = np.concatenate([[True], g_sorted[1:] != g_sorted[:-1]])
    # the fastest before each row of its size (-inf for a size's first): a running maximum per size
    # (a loop over the deployment sizes, a few dozen, not over rows)
    before = np.full(len(order), -np.inf)
    starts = np.flatnonzero(head)
    for a, b in zip(starts, [*starts[1:], len(order)], strict=True):
        before[a + 1 : b] = np.maximum.accumulate(s_sorted[a : b - 1])
    keep = head | (s_sorted > before)
    fixed = fixed[order][keep]
    return np.sort(np.concatenate([fixed, rows[pos[rows] >= 0]]))


def _columns(
    g: Any,
    cand: Any,
    pos: Any,
    tokens: Any,
    ttft_target_s: float | None = None,
    cap: Any = None,
    probed: Any = None,
    rival: Any = None,
) -> dict[str, Any]:
    """The :data:`POOL_COLUMNS` of rows ``cand`` at each of ``tokens`` (rows x values): the grid's
    own, or the pools sized for the traffic (:func:`evaluate.traffic_pools`, at ``ttft_target_s``);
    and ``copies``, the whole copies of each row's deployment the traffic takes
    (:func:`copies_for_traffic`). With ``cap`` (GPUs per traffic value, which some row takes),
    where a row's GPUs are surely above it (the GPUs its least stable pools use, the copies that
    carry the traffic) it is not sized for the target: it is not chosen there. ``probed``: (rows,
    their columns at ``tokens``) already sized, taken as they are; ``rival`` (:meth:`_Bound._rival`):
    rows no traffic moves that cannot rank above it are not sized where they merely tie the cap."""
    import numpy as np

    if probed is not None:
        done = member(cand, probed[0])
        if done.any():
            rest = _columns(g, cand[~done], pos, tokens, ttft_target_s, cap, None, rival)
            where = np.searchsorted(probed[0], cand[done])  # the probe is ascending (_Bound)
            out = {}
            for k, v in rest.items():
                full = np.empty((len(cand), len(tokens)))
                full[~done] = v
                full[done] = probed[1][k][where]
                out[k] = full
            return out

    r = g.rows
    shape = (len(cand), len(tokens))
    out = {
        k: np.broadcast_to(np.asarray(r[k], dtype=float)[cand][:, None], shape)
        for k in POOL_COLUMNS
        if k in r
    }
    at = pos[cand]
    sized = np.flatnonzero(at >= 0)
    if len(sized):
        p, i = g.pools, at[sized]
        x = {k: v[i][:, None] for k, v in p["x"].items()}
        pre = {k: v[i][:, None] for k, v in p["prefill"].items()}
        used = None
        if cap is not None:
            lay = g.lay
            g_d = lay["g"][r["layout"][cand[sized]]][:, None]
            g_p = lay["g"][np.maximum(r["prefill_layout"][cand[sized]], 0)][:, None]
            used = (g_p, g_d, cap[None, :])
        with np.errstate(all="ignore"):
            cols = traffic_pools(g.ph, x, p["rate"][i][:, None], pre, tokens[None, :], ttft_target_s, used)
        for k in POOL_COLUMNS:
            full = np.array(out[k])
            full[sized] = cols[k]
            out[k] = full
    out["copies"] = copies_for_traffic(g, cand, out, tokens, ttft_target_s, at >= 0, cap, rival)
    return out


def copies_for_traffic(
    g: Any,
    cand: Any,
    cols: dict[str, Any],
    tokens: Any,
    ttft_target_s: float | None,
    sized: Any,
    cap: Any = None,
    rival: Any = None,
) -> Any:
    """Whole copies of each row's deployment (``cols``: its columns at each of ``tokens``, rows x
    values) that serve the traffic: as many as carry it (:func:`formulas.deployment_copies`), and
    with ``ttft_target_s``, for a deployment no traffic sizes (an aggregated instance, pinned pools:
    ``sized`` false), as many as hold the mean time to first token within it, the copies behind one
    router (:func:`queueing.mdc_copies_for_wait`): their sequence slots (decode instances x batch
    each, a request holding one for osl / tokens_per_s_per_user seconds, Little's law) one queue
    and, disaggregated, their prefill instances another. Where the lone prompt misses the target,
    the fewest copies at which every queue is stable (rho < 1). With ``cap`` (GPUs per traffic
    value), only where the carrying copies' GPUs are within it (elsewhere the row is not chosen),
    and with ``rival`` (:meth:`_Bound._rival`) not where they equal it and the row ranks below the
    rival (it is not chosen there either)."""
    import numpy as np

    from .queueing import mdc_copies_for_wait

    with np.errstate(all="ignore"):
        copies = f.deployment_copies(tokens[None, :], cols["tokens_per_s_per_gpu"], cols["deployment_gpus"])
    fixed = np.flatnonzero(~sized)
    if ttft_target_s is None or not len(fixed):
        return copies
    r, ph = g.rows, g.ph
    rows = cand[fixed][:, None]
    budget = ttft_target_s - r["ttft_s"][rows]
    shape = (len(fixed), len(tokens))
    groups = queue_groups(g, rows, r["decode_instances"][rows], r["prefill_instances"][rows])
    lam = np.broadcast_to(tokens[None, :] / ph.osl, shape)
    wait = np.broadcast_to(np.where(budget > 0, budget, np.inf), shape)
    within = np.ones(shape, dtype=bool)
    if cap is not None:
        with np.errstate(all="ignore"):
            floor = f.gpus_for_traffic(copies[fixed], cols["deployment_gpus"][fixed])
            within = ~(floor > cap[None, :])
            if rival is not None:
                speed, keys = rival
                mine = (
                    cols["tokens_per_s_per_gpu"][fixed],
                    speed[rows],
                    cols["deployment_gpus"][fixed],
                    rows,
                )
                within &= ~((floor == cap[None, :]) & _ranks_below(mine, keys))
    held = np.full(shape, np.nan)
    groups_at = [(np.broadcast_to(sv, shape)[within], np.broadcast_to(c, shape)[within]) for sv, c in groups]
    with np.errstate(all="ignore"):
        held[within] = mdc_copies_for_wait(lam[within], groups_at, wait[within])
    out = np.array(copies, dtype=float)
    out[fixed] = np.fmax(copies[fixed], held)
    return out
