"""The mean wait of a request for a prefill instance: a pool of ``c`` instances, Poisson arrivals,
a deterministic service time (M/D/c), on arrays.

The M/M/c mean wait is exact: W_q(M/M/c) = C(c, a) x S / (c - a), with a = lambda x S the
offered load and C(c, a) Erlang's delay probability (Erlang C), C = B / (1 - rho (1 - B)),
rho = a / c, from Erlang's loss formula B(c, a) summed in positive terms (:func:`erlang_b`: no
factorial, no cancellation; H. C. Tijms, *A First Course in Stochastic Models*, Wiley 2003, its
chapter on queueing models). The deterministic service halves it (the Allen-Cunneen factor
(c_a^2 + c_s^2) / 2 with c_a^2 = 1, c_s^2 = 0), with Cosmetatos's correction for more than one
server (G. P. Cosmetatos, "Some approximate equilibrium results for the multi-server queue
(M/G/r)", Operational Research Quarterly 27(3), 1976, pp. 615-620; also given by Tijms)::

    W_q(M/D/c) ~ 1/2 x W_q(M/M/c) x (1 + (1 - rho) (c - 1) (sqrt(4 + 5c) - 2) / (16 rho c))

exact for one server (the Pollaczek-Khinchine M/D/1 wait, rho S / (2 (1 - rho))). The constants
are the formula's own. A pool at or past its capacity (rho >= 1) has no steady state: its wait is
infinite.

At a sweep's speed: sequence-slot pools hold 10^4-10^8 requests in flight, where Erlang's sum takes
about 8.5 sqrt(a) terms a cell; past :data:`QUAD_LOAD` B is taken from its integral form by
Gauss-Legendre quadrature (a fixed cost a cell, within 1e-11 of the sum), and a search's counts
are decided from closed-form bounds on the wait (:func:`wait_interval_s`: P(X = c) of a Poisson
variable and bounds on its tail, no sum) wherever they settle the decision, which is every count
but the few next to the answer (:class:`WaitsWithin`).
"""

from __future__ import annotations

from typing import Any

from ipd_cli.engine.legendre import NODES, leggauss
from ipd_cli.engine.search import distinct

# terms of Erlang's sum taken at once (as a cumulative sum of logs), doubled from the first to the
# most, within a bound on the cells of one chunk: a pool of 10^4 instances' work needs about 10^3
# terms, one numpy pass each cost milliseconds in Python's loop
SUM_CHUNK, SUM_CHUNK_MOST, SUM_CELLS = 16, 1 << 14, 1 << 20


# offered loads (servers' worth of work) from which Erlang's B is taken by quadrature (a fixed
# cost a cell) rather than its sum (about 8.5 sqrt(a) terms a cell): sequence-slot pools reach
# 10^6 in flight, where a sweep's traffics summed for seconds; below it the sum
QUAD_LOAD = 30.0
# Gauss-Legendre nodes over the integrand's window, and the window's half-width in the
# integrand's standard deviations (the tail past 14 of them is below e^-90 of its peak): against
# the sum, a relative error within 3e-12 at loads 10^2-10^6 (tests/test_formulas.py asserts 1e-11)
QUAD_NODES, QUAD_WIDTHS = NODES, 14.0


def erlang_b(servers: Any, load: Any) -> Any:
    """Erlang's loss probability B(c, a) of ``servers`` c (whole, at least 1) at offered ``load``
    a > 0: arrays, broadcast: :func:`_erlang_b_sum` below :data:`QUAD_LOAD`, :func:`_erlang_b_quad`
    from it."""
    import numpy as np

    c, a = np.broadcast_arrays(np.asarray(servers, dtype=float), np.asarray(load, dtype=float))
    shape = np.broadcast_shapes(np.shape(servers), np.shape(load))
    c, a = c.reshape(-1), a.reshape(-1)
    big = (a >= QUAD_LOAD) & (c >= 1)
    out = np.empty(c.shape)
    if not big.all():
        out[~big] = _erlang_b_sum(c[~big], a[~big])
    if big.any():
        out[big] = _erlang_b_quad(c[big], a[big])
    return out.reshape(shape)


_LEGENDRE: list[Any] = []  # Gauss-Legendre nodes and weights, computed at the first use


def _erlang_b_quad(c: Any, a: Any) -> Any:
    """Erlang's B(c, a) on flat arrays (c >= 1, a > 0) from its integral form, 1 / B(c, a) = a x
    int_0^inf (1 + s)^c e^(-a s) ds (expand (1 + s)^c: the terms are the sum's, c! / (c - j)! /
    a^j), at a fixed cost a cell: the integrand exp(c ln(1 + s) - a s) peaks at s* = c / a - 1
    (> 0 for a stable pool) with a width of about (1 + s*) / sqrt(c), and is integrated by
    Gauss-Legendre over :data:`QUAD_WIDTHS` widths either side of its peak (not below 0), scaled
    by its peak (B = 0 where the peak passes the largest double, the sum's limit)."""
    import numpy as np

    if not _LEGENDRE:
        _LEGENDRE.append(leggauss())
    nodes, weights = _LEGENDRE[0]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        peak = np.maximum(c / a - 1.0, 0.0)
        width = (1.0 + peak) / np.sqrt(c)
        lo, hi = np.maximum(peak - QUAD_WIDTHS * width, 0.0), peak + QUAD_WIDTHS * width
        top = c * np.log1p(peak) - a * peak
        mid, half = (hi + lo) / 2.0, (hi - lo) / 2.0
        s = mid[:, None] + half[:, None] * nodes[None, :]
        shape = np.exp(c[:, None] * np.log1p(s) - a[:, None] * s - top[:, None])
        # summed along each row (a matrix product's rounding moves with the rows it is given)
        return np.exp(-(np.log(a) + top + np.log(half * (shape * weights).sum(axis=1))))


def _erlang_b_sum(c: Any, a: Any) -> Any:
    """Erlang's B(c, a) on flat arrays. From 1 / B(c, a) = sum_{j=0..c} t_j, t_0 = 1,
    t_j = t_{j-1} (c - j + 1) / a (the recursion B(k) = a B(k-1) / (k + a B(k-1)) unrolled from
    k = c down), summed until the terms left, which shrink by at least the current ratio from
    their peak on, cannot move the sum in double precision: about sqrt(a) terms near saturation
    rather than c, taken :data:`SUM_CHUNK` or more at a time (each chunk's terms from the
    cumulative sum of their ratios' logs). A sum past the largest double gives B = 0, its
    limit."""
    import numpy as np

    total, log_term = np.ones(c.shape), np.zeros(c.shape)
    eps = np.finfo(float).eps
    live = np.flatnonzero(c >= 1)
    j, k = 0, SUM_CHUNK
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        while len(live):
            width = max(1, min(k, SUM_CELLS // len(live)))
            cl, al = c[live], a[live]
            js = j + 1 + np.arange(width)
            valid = js[None, :] <= cl[:, None]
            ratio = np.where(valid, (cl[:, None] - js[None, :] + 1) / al[:, None], 1.0)
            logs = log_term[live][:, None] + np.cumsum(np.log(ratio), axis=1)
            total[live] = total[live] + np.where(valid, np.exp(logs), 0.0).sum(axis=1)
            log_term[live] = logs[:, -1]
            j, k = j + width, min(2 * k, SUM_CHUNK_MOST)
            term = np.exp(log_term[live])
            nxt = (cl - j) / al  # the next ratio; every later one is smaller
            tail = np.where(nxt < 1, term * nxt / (1 - nxt), np.inf)
            done = (j >= cl) | ~np.isfinite(total[live]) | (tail <= eps * total[live])
            live = live[~done]
    return 1 / total


def erlang_c(servers: Any, load: Any) -> Any:
    """Erlang's delay probability C(c, a) (the chance an arrival waits) of ``servers`` c (whole,
    at least 1) at offered ``load`` 0 < a < c: C = B / (1 - rho (1 - B)), rho = a / c, arrays."""
    import numpy as np

    b = erlang_b(servers, load)
    rho = np.asarray(load, dtype=float) / np.asarray(servers, dtype=float)
    return b / (1 - rho * (1 - b))


def mdc_wait_s(arrivals_per_s: Any, service_s: Any, servers: Any) -> Any:
    """Mean wait in the queue (seconds, service not included) of Poisson ``arrivals_per_s`` at
    ``servers`` identical servers each taking ``service_s`` per arrival: the module's M/D/c
    approximation, on arrays (broadcast). 0 where nothing arrives; inf where rho >= 1; NaN where
    an input is NaN or ``servers`` is below 1."""
    import numpy as np

    lam, s, c = np.broadcast_arrays(
        np.asarray(arrivals_per_s, dtype=float),
        np.asarray(service_s, dtype=float),
        np.asarray(servers, dtype=float),
    )
    a = lam * s
    ok = np.isfinite(a) & np.isfinite(c) & (c >= 1) & (a >= 0)
    stable = ok & (a < c)
    cs, as_ = np.where(stable, c, 1.0), np.where(stable, a, 0.0)
    # past EXACT_LOAD (beyond any cluster, refused downstream) Erlang C is taken as 1: its sum
    # would take 8.5 sqrt(a) terms (minutes at 10^18)
    huge = as_ > EXACT_LOAD
    with np.errstate(divide="ignore", invalid="ignore"):
        delay = np.ones(cs.shape)
        delay[~huge] = erlang_c(cs[~huge], as_[~huge])
        wait = _wait_s(delay, as_, cs, s)
    wait = np.where(stable & (as_ > 0), wait, 0.0)
    wait = np.where(ok & ~stable, np.inf, wait)
    return np.where(ok, wait, np.nan)


def _wait_s(delay: Any, load: Any, servers: Any, service_s: Any) -> Any:
    """The M/D/c mean wait of a stable pool from its Erlang C ``delay`` (the chance an arrival
    waits): half the M/M/c wait, C x S / (c - a), times Cosmetatos's correction; 0 where the
    M/M/c wait is not above 0 (B below the doubles)."""
    import numpy as np

    mmc = delay * service_s / (servers - load)
    return np.where(mmc > 0, 0.5 * mmc * _cosmetatos(load / servers, servers), 0.0)


# a count search tries up to 2^GALLOP_ROUNDS more than its least stable count: past any pool
GALLOP_ROUNDS = 60
# offered loads (servers' worth of work) past which the count is searched on the wait's bound
# (Erlang C taken as 1) instead of Erlang's sum, which takes about 8.5 sqrt(a) terms, in chunks
# (:data:`SUM_CHUNK_MOST`: a few dozen numpy passes at 10^8). The bound is loose where many servers
# idle (Cosmetatos's correction grows as sqrt(c) at a low rho): sequence slots in flight reach
# 10^6 for a frontier scenario on Hopper, where a bound taken from 10^6 finds no count within a
# 1 ms budget. 10^8 servers' work is past any cluster. Past 2^52 a unit step is below a double's
# resolution: the count is the load's, floor(a) + 1, refused downstream
EXACT_LOAD = 1e8
RESOLVED_LOAD = 2.0**52


def mdc_servers_for_wait(arrivals_per_s: Any, service_s: Any, wait_s: Any) -> Any:
    """The fewest servers whose :func:`mdc_wait_s` is at most ``wait_s`` (seconds), on arrays
    (broadcast): the least stable pool, floor(a) + 1 with a = lambda x S (rho < 1), or more. The
    wait falls as servers are added (Erlang C does; the correction only shrinks with c), so the
    smallest count is found by widening the servers added until the wait fits, then narrowing
    the gap (:func:`_fewest`, every element at once). NaN where ``wait_s`` is not a
    number >= 0 (a target the service alone misses) or an input is not a number; the least stable
    pool (at least 1) where nothing arrives. One server a copy: :func:`mdc_copies_for_wait`'s
    search with one queue."""
    return mdc_copies_for_wait(arrivals_per_s, [(service_s, 1.0)], wait_s)


def mdc_copies_for_wait(arrivals_per_s: Any, groups: Any, wait_s: Any) -> Any:
    """The fewest whole copies N of a deployment behind one router at which the sum of its queues'
    mean waits is at most ``wait_s`` (seconds): ``groups`` a sequence of (service seconds, servers
    a copy) pairs (arrays, broadcast; 0 servers: no such queue, as an aggregated instance has no
    prefill pool), each the N copies' servers as one M/D/c queue (:func:`mdc_wait_s`) at
    ``arrivals_per_s`` (the router sends a request to a free server of any copy, as a prefill
    pool's instances take the next prompt). Every wait falls as copies are added, so the count is
    searched as :func:`mdc_servers_for_wait`'s, from the fewest copies at which every queue is
    stable, floor(max a / c) + 1 (rho < 1 in each; past 2^52 that count alone). NaN where
    ``wait_s`` is not a number >= 0 or an input is not a number."""
    import numpy as np

    lam = np.asarray(arrivals_per_s, dtype=float)
    w = np.asarray(wait_s, dtype=float)
    pairs = [(np.asarray(sv, dtype=float), np.asarray(c, dtype=float)) for sv, c in groups]
    shape = np.broadcast_shapes(
        lam.shape, w.shape, *(np.broadcast_shapes(sv.shape, c.shape) for sv, c in pairs)
    )
    flat = lambda v: np.broadcast_to(v, shape).reshape(-1)  # noqa: E731
    lam, w = flat(lam), flat(w)
    pairs = [(flat(sv), flat(c)) for sv, c in pairs]
    ok = np.isfinite(lam) & (lam >= 0) & (w >= 0)
    ratio = np.zeros(len(lam))
    for sv, c in pairs:
        used = c >= 1
        ok &= np.isfinite(sv) & (sv >= 0) & ((c == 0) | used)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.maximum(ratio, np.where(used, lam * sv / np.where(used, c, 1.0), 0.0))
    ok &= np.isfinite(ratio)
    low = np.where(ok, np.floor(np.where(ok, ratio, 0.0)) + 1, np.nan)  # every queue stable

    # as mdc_servers_for_wait's: the waits with Erlang C = 1 first, the sums where they miss,
    # decided from closed-form intervals wherever they can (WaitsWithin)
    waits = WaitsWithin(lam, pairs, w)
    live = np.flatnonzero(ok & (low < RESOLVED_LOAD))
    high = waits.fewest(low, live)
    return np.where(ok, high, np.nan).reshape(shape)


# counts a search tries per element in one pass, at most, and the cells of a pass it fills that
# way: each pass narrows an element's bracket by as many (a doubling search halves it), and a
# pass's numpy calls cost about as much as a few hundred cells' arithmetic (a search bound, not
# a measured number: any values give the same counts)
LADDER_MOST, LADDER_CELLS = 16, 512


def _fewest(fits: Any, low: Any, live: Any) -> Any:
    """The fewest whole counts (per element) at which ``fits(counts, elements)`` holds, where it
    holds for every count from some count on: ``low`` as given where an element is not ``live``,
    else above ``low`` (which fails there). Each pass tries k counts an element
    (:data:`LADDER_MOST`, fewer where the pass would hold more than :data:`LADDER_CELLS` cells;
    one: doubling, then halving): k in a row above the last count known to fail, k times as far
    apart each pass until one fits, then k evenly across the bracket left until it is one count
    wide (about log_k of the counts added, twice; every element at once). NaN where no count
    within 2^(:data:`GALLOP_ROUNDS`) more fits."""
    import numpy as np

    out = np.array(low, dtype=float)
    lo = out[live]  # counts known to fail
    top = out[live] + 2.0**GALLOP_ROUNDS  # past it nothing is tried
    hi, step = np.full(len(live), np.inf), np.ones(len(live))
    bad = np.zeros(len(live), dtype=bool)
    at = np.arange(len(live))  # elements (positions in ``live``) whose bracket is open
    while len(at):
        k = max(1, min(LADDER_MOST, LADDER_CELLS // len(at)))
        grow = max(k, 2)  # one count a pass: doubled, then halved
        bounded = np.isfinite(hi[at])
        gap = np.where(bounded, hi[at] - lo[at], 0.0)
        s = np.where(bounded, np.ceil(gap / grow), step[at])
        counts = lo[at][:, None] + s[:, None] * np.arange(1, k + 1)[None, :]
        edge = np.where(bounded, hi[at], top[at])[:, None]
        tried = np.where(bounded[:, None], counts < edge, counts <= edge)
        ok = ~tried & bounded[:, None]  # a count at or past a known fit fits
        row = np.broadcast_to(at[:, None], counts.shape)[tried]
        ok[tried] = fits(counts[tried], live[row])
        found = ok.any(axis=1)
        first = np.argmax(ok, axis=1)
        rows = np.arange(len(at))
        below = np.where(first > 0, counts[rows, np.maximum(first - 1, 0)], lo[at])
        hi[at] = np.where(found, np.fmin(hi[at], counts[rows, first]), hi[at])
        lo[at] = np.where(found, below, counts[:, -1])
        bad[at] = ~found & ~tried[:, -1]  # past 2^60 more without a fit
        step[at] = np.where(found, step[at], s * grow)
        # past 2^53 a step can fall below a double's resolution: the fit found is kept
        stuck = lo[at] + np.maximum(np.ceil((hi[at] - lo[at]) / grow), 1.0) == lo[at]
        at = at[~bad[at] & ~(hi[at] - lo[at] <= 1) & ~stuck]
    out[live] = np.where(bad, np.nan, hi)
    return out


# past this many servers' factorial, log(c!) is Stirling's series to its c^-5 term (an error below
# 1e-20 there); below it, a table of math.lgamma (numerics, not a measured number)
LGAMMA_TABLE = 1024
# the relative width added to each side of :func:`wait_interval_s` (far above the double rounding
# of either side or of Erlang's sum, ~1e-12): a count the interval decides, the sum decides alike
INTERVAL_MARGIN = 1e-9
# Erlang B below this is where the sum may have run past the largest double (B taken as 0): the
# interval's lower side is not used to refuse a count there
UNDERFLOW_B = 1e-280
# a wait (seconds) below which the interval's high side is taken as this (far below any budget)
UNDERFLOW_WAIT_S = 1e-290


def _log_factorials() -> Any:
    import math

    import numpy as np

    return np.array([math.lgamma(k + 1.0) for k in range(LGAMMA_TABLE)])


_LOG_FACTORIALS: list[Any] = []


def _log_poisson_pmf(c: Any, a: Any) -> Any:
    """log(e^-a a^c / c!) for whole ``c`` >= 1 and ``a`` > 0 (flat arrays): log(c!) from a table
    below :data:`LGAMMA_TABLE`, else Stirling's series, written about c - a so that no large terms
    cancel (c ln(c / a) - (c - a) = c log1p((c - a) / a) - (c - a))."""
    import numpy as np

    if not _LOG_FACTORIALS:
        _LOG_FACTORIALS.append(_log_factorials())

    def tabled(c: Any, a: Any) -> Any:  # log(c!) from the table
        return c * np.log(a) - a - _LOG_FACTORIALS[0][c.astype(np.int64)]

    small = c < LGAMMA_TABLE
    if small.all():  # (most pools: the table's, without gathering the elements and scattering back)
        return tabled(c, a)
    out = np.empty(c.shape)
    out[small] = tabled(c[small], a[small])
    cl, al = c[~small], a[~small]
    d = cl - al
    series = 1 / (12 * cl) - 1 / (360 * cl**3) + 1 / (1260 * cl**5)
    out[~small] = -(cl * np.log1p(d / al) - d) - 0.5 * np.log(2 * np.pi * cl) - series
    return out


def wait_interval_s(arrivals_per_s: Any, service_s: Any, servers: Any) -> Any:
    """Bounds (low, high, sure) on :func:`mdc_wait_s` of stable pools (flat arrays, 0 < a < c, c
    whole, a at most :data:`EXACT_LOAD`) in a fixed number of operations, without Erlang's sum.
    B(c, a) = P(X = c) / P(X <= c) for X Poisson of mean a: P(X = c) is closed (a log-factorial),
    and P(X <= c) lies between max(1/2, 1 - P(X = c + 1) / (1 - a / (c + 2))) (the median of a
    Poisson variable is below a whole c >= a, Ramanujan's; the tail's ratios are at most
    a / (c + 2)) and 1 - P(X = c + 1) (1 - q^m) / (1 - q), q = a / (c + m), m = floor(sqrt(c)) + 1
    (its first m terms, each ratio at least q). Erlang C and the wait grow with B. Near saturation
    the sides are within a factor of 2; three sqrt(a) servers past the load, within 1 %. Each
    side is widened by :data:`INTERVAL_MARGIN` (the high side at least :data:`UNDERFLOW_WAIT_S`);
    ``sure`` is false where B may be below :data:`UNDERFLOW_B` (the low side is then not to be
    used to refuse: the sum may have made the wait 0)."""
    import numpy as np

    lam, s, c = arrivals_per_s, service_s, servers
    a = lam * s
    with np.errstate(all="ignore"):
        rho = a / c
        pmf = np.exp(_log_poisson_pmf(c, a))
        first = pmf * a / (c + 1)  # P(X = c + 1)
        tail_hi = first / (1 - a / (c + 2))
        m = np.floor(np.sqrt(c)) + 1
        q = a / (c + m)
        tail_lo = first * (1 - q**m) / (1 - q)
        cdf_lo = np.maximum(0.5, 1 - tail_hi)
        cdf_hi = np.maximum(cdf_lo, 1 - tail_lo)
        b_lo, b_hi = pmf / cdf_hi, np.minimum(1.0, pmf / cdf_lo)
        base = 0.5 * s / (c - a) * _cosmetatos(rho, c)
        lo = base * b_lo / (1 - rho * (1 - b_lo)) * (1 - INTERVAL_MARGIN)
        hi = base * b_hi / (1 - rho * (1 - b_hi)) * (1 + INTERVAL_MARGIN)
    # below the normal doubles the sides lose their digits: the high side is taken at the floor
    return lo, np.maximum(hi, UNDERFLOW_WAIT_S), b_lo > UNDERFLOW_B


class WaitsWithin:
    """Per element (flat arrays), whether the mean waits of ``groups`` ((service seconds, servers a
    count) pairs; 0 servers: no queue) at a count n sum within ``budget_s`` (seconds) less the wait of
    ``other`` ((service seconds, servers), one queue at a fixed size; None: nothing), each an M/D/c
    queue at ``lam`` arrivals/s: the decision :func:`mdc_servers_for_wait` and
    :func:`mdc_copies_for_wait` take (the waits with Erlang C = 1 first, Erlang's sum where they
    miss, below :data:`EXACT_LOAD`), taken from :func:`wait_interval_s` where the interval decides
    it and from the sums only where it does not (a few counts a search, near its answer). The
    other queue's wait is summed once an element needs it."""

    def __init__(self, lam: Any, groups: Any, budget_s: Any, other: Any = None) -> None:
        import numpy as np

        self.lam, self.budget_s = lam, budget_s
        self.groups = [(sv, k) for sv, k in groups]
        self.load = np.zeros(len(lam))
        for sv, _ in self.groups:  # every group's, as the searches have always taken it
            self.load = np.maximum(self.load, lam * sv)
        self.other = other
        self.o_exact = np.zeros(len(lam)) if other is None else np.full(len(lam), np.nan)
        if other is None:
            self.o_lo = self.o_hi = np.zeros(len(lam))
        else:
            self.o_lo, self.o_hi = _interval(lam, other[0], other[1])
            known = self.o_lo == self.o_hi
            self.o_exact[known] = self.o_lo[known]

    def other_exact(self, i: Any) -> Any:
        """The other queue's wait (:func:`mdc_wait_s`) at elements ``i``, summed where not yet."""
        import numpy as np

        need = distinct(i[np.isnan(self.o_exact[i])])  # a search asks an element at several counts
        if len(need) and self.other is not None:
            self.o_exact[need] = mdc_wait_s(self.lam[need], self.other[0][need], self.other[1][need])
        return self.o_exact[i]

    def left(self, i: Any) -> Any:
        """Whether the budget less the other queue's wait is above 0 at elements ``i`` (NaN: no)."""
        import numpy as np

        b = self.budget_s[i]
        out = self.o_hi[i] < b
        maybe = np.flatnonzero(~out & ~(self.o_lo[i] >= b) & (b > 0))
        if len(maybe):
            with np.errstate(invalid="ignore"):
                out[maybe] = (b[maybe] - self.other_exact(i[maybe])) > 0
        return out

    def fits(self, n: Any, i: Any) -> Any:
        import numpy as np

        with np.errstate(invalid="ignore"):
            return self._fits(n, i)

    def _fits(self, n: Any, i: Any) -> Any:
        import numpy as np

        b = self.budget_s[i]
        tol = 4 * np.finfo(float).eps * np.abs(b)
        bound = self._bound(n, i)
        out = bound + self.o_hi[i] <= b - tol
        rest = np.flatnonzero(~out)
        if not len(rest):
            return out
        j = i[rest]
        lo, hi = np.zeros(len(j)), np.zeros(len(j))
        for sv, k in self.groups:
            glo, ghi = _interval(self.lam[j], sv[j], k[j] * n[rest])
            lo, hi = lo + glo, hi + ghi
        exact = self.load[j] <= EXACT_LOAD
        yes = exact & (hi + self.o_hi[j] <= self.budget_s[j] - tol[rest])
        no = exact & (lo + self.o_lo[j] > self.budget_s[j] + tol[rest])
        out[rest[yes]] = True
        hard = rest[~yes & ~no]
        if len(hard):
            out[hard] = self._exact(n[hard], i[hard], bound[hard])
        return out

    def _bound(self, n: Any, i: Any) -> Any:
        """The groups' waits summed with Erlang C taken as 1 (:func:`wait_bound_s`, at least each
        wait) at counts ``n`` of elements ``i``."""
        import numpy as np

        lam, bound = self.lam[i], np.zeros(len(i))
        for sv, k in self.groups:
            used = k[i] >= 1
            with np.errstate(all="ignore"):
                bound += np.where(used, wait_bound_s(lam, sv[i], np.where(used, k[i], 1.0) * n), 0.0)
        return bound

    def _exact(self, n: Any, i: Any, bound: Any) -> Any:
        """The searches' own decision at counts ``n`` of elements ``i`` (``bound``: their
        :meth:`_bound`)."""
        import numpy as np

        with np.errstate(all="ignore"):
            w = self.budget_s[i] - self.other_exact(i)
            out = bound <= w
            hard = np.flatnonzero(~out & (self.load[i] <= EXACT_LOAD))
            j, exact = i[hard], np.zeros(len(hard))
            for sv, k in self.groups:
                used = k[j] >= 1
                servers = np.where(used, k[j], 1.0) * n[hard]
                exact += np.where(used, _queue_wait_s(self.lam[j], sv[j], servers), 0.0)
            out[hard] = exact <= w[hard]
        return out

    def fewest(self, low: Any, live: Any) -> Any:
        """The fewest counts from ``low`` (a float array) that fit, at elements ``live``
        (elsewhere ``low``); NaN where none within 2^60 more does."""
        return _fewest(self.fits, low, live[~self.fits(low[live], live)])


def _queue_wait_s(lam: Any, service_s: Any, servers: Any) -> Any:
    """:func:`mdc_wait_s` of flat arrays, the same numbers: a stable pool's with some arrivals (0 <
    a < c, c >= 1, a at most :data:`EXACT_LOAD`) computed directly, every other cell by
    :func:`mdc_wait_s` (a search asks a few cells a pass: its checks cost more than the sum)."""
    import numpy as np

    a = lam * service_s
    with np.errstate(invalid="ignore"):
        direct = (a > 0) & (a < servers) & (servers >= 1) & (a <= EXACT_LOAD)
    if not direct.all():
        out = mdc_wait_s(lam, service_s, servers)
        at = np.flatnonzero(direct)
        if len(at):
            out[at] = _queue_wait_s(lam[at], service_s[at], servers[at])
        return out
    with np.errstate(divide="ignore", invalid="ignore"):
        return _wait_s(erlang_c(servers, a), a, servers, service_s)


def _interval(lam: Any, service_s: Any, servers: Any) -> Any:
    """:func:`wait_interval_s` of any pools (flat arrays): 0 where nothing arrives or there is no
    queue (0 servers), inf where unstable, NaN where an input is; the low side 0 where it is not
    sure; both sides from :func:`mdc_wait_s` itself past :data:`EXACT_LOAD` (Erlang C = 1 there)."""
    import numpy as np

    a = lam * service_s
    lo, hi = np.zeros(len(a)), np.zeros(len(a))
    with np.errstate(invalid="ignore"):
        bad = ~(np.isfinite(a) & np.isfinite(servers) & (a >= 0) & (servers >= 0))
        unstable = ~bad & (servers >= 1) & (a >= servers)
        live = np.flatnonzero(~bad & ~unstable & (a > 0) & (servers >= 1) & (a <= EXACT_LOAD))
        huge = np.flatnonzero(~bad & ~unstable & (a > EXACT_LOAD) & (servers >= 1))
    lo[bad], hi[bad] = np.nan, np.nan
    lo[unstable], hi[unstable] = np.inf, np.inf
    if len(live):
        l_, h_, sure = wait_interval_s(lam[live], service_s[live], servers[live])
        lo[live], hi[live] = np.where(sure, l_, 0.0), h_
    if len(huge):
        lo[huge] = hi[huge] = mdc_wait_s(lam[huge], service_s[huge], servers[huge])
    return lo, hi


def wait_bound_s(arrivals_per_s: Any, service_s: Any, servers: Any) -> Any:
    """:func:`mdc_wait_s` with Erlang's delay probability taken as 1, its largest: an upper bound
    on the wait, without the Erlang sum (arrays; servers past the load a = lambda x S)."""
    import numpy as np

    lam, s, c = (np.asarray(v, dtype=float) for v in (arrivals_per_s, service_s, servers))
    a = lam * s
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = 0.5 * s / (c - a) * _cosmetatos(a / c, c)
    return np.where(a > 0, bound, 0.0)


def _cosmetatos(rho: Any, servers: Any) -> Any:
    """Cosmetatos's correction of half the M/M/c wait for a deterministic service (the module's
    formula): 1 + (1 - rho) (c - 1) (sqrt(4 + 5c) - 2) / (16 rho c), 1 for one server."""
    import numpy as np

    c = servers
    return 1 + (1 - rho) * (c - 1) * (np.sqrt(4 + 5 * c) - 2) / (16 * rho * c)
