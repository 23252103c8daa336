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
"""

from __future__ import annotations

from typing import Any

# terms of Erlang's sum taken at once (as a cumulative sum of logs), doubled from the first to the
# most, within a bound on the cells of one chunk: a pool of 10^4 instances' work needs about 10^3
# terms, one numpy pass each cost milliseconds in Python's loop
SUM_CHUNK, SUM_CHUNK_MOST, SUM_CELLS = 16, 1 << 14, 1 << 20


def erlang_b(servers: Any, load: Any) -> Any:
    """Erlang's loss probability B(c, a) of ``servers`` c (whole, at least 1) at offered ``load``
    a > 0: arrays, broadcast. From 1 / B(c, a) = sum_{j=0..c} t_j, t_0 = 1, t_j = t_{j-1} (c - j + 1)
    / a (the recursion B(k) = a B(k-1) / (k + a B(k-1)) unrolled from k = c down), summed until the
    terms left, which shrink by at least the current ratio from their peak on, cannot move the sum
    in double precision: about sqrt(a) terms near saturation rather than c (a pool of millions of
    instances is not millions of steps), taken :data:`SUM_CHUNK` or more at a time (each chunk's
    terms from the cumulative sum of their ratios' logs). A sum past the largest double gives
    B = 0, its limit."""
    import numpy as np

    c, a = np.broadcast_arrays(np.asarray(servers, dtype=float), np.asarray(load, dtype=float))
    c, a = c.reshape(-1), a.reshape(-1)
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
    return (1 / total).reshape(np.broadcast_shapes(np.shape(servers), np.shape(load)))


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
        mmc = delay * s / (cs - as_)
        wait = np.where(mmc > 0, 0.5 * mmc * _cosmetatos(as_ / cs, cs), 0.0)  # B below the doubles: none
    wait = np.where(stable & (as_ > 0), wait, 0.0)
    wait = np.where(ok & ~stable, np.inf, wait)
    return np.where(ok, wait, np.nan)


# extra servers tried beyond the least stable pool, doubled each round: 2^60 is past any pool
GALLOP_ROUNDS = 60
# offered loads (servers' worth of work) past which the count is searched on the wait's bound
# (Erlang C taken as 1) instead of Erlang's sum, which takes about 8.5 sqrt(a) terms, in chunks
# (:data:`SUM_CHUNK_MOST`: a few dozen numpy passes at 10^8). The bound is loose where many servers
# idle (Cosmetatos's correction grows as sqrt(c) at a low rho): sequence slots in flight reach
# 10^6 for a frontier scenario on Hopper, where a bound at 10^6 (the prefill pools' cutoff until
# 2026-12-05) found no count within a 1 ms budget. 10^8 servers' work is past any cluster. Past
# 2^52 a unit step is below a double's resolution: the count is the load's, floor(a) + 1 (as
# ceil(a) was), refused downstream
EXACT_LOAD = 1e8
RESOLVED_LOAD = 2.0**52


def mdc_servers_for_wait(arrivals_per_s: Any, service_s: Any, wait_s: Any) -> Any:
    """The fewest servers whose :func:`mdc_wait_s` is at most ``wait_s`` (seconds), on arrays
    (broadcast): the least stable pool, floor(a) + 1 with a = lambda x S (rho < 1), or more. The
    wait falls as servers are added (Erlang C does; the correction only shrinks with c), so the
    smallest count is found by doubling the servers added until the wait fits, then halving the
    gap: about 2 log2 of the servers added, every element at once. NaN where ``wait_s`` is not a
    number >= 0 (a target the service alone misses) or an input is not a number; the least stable
    pool (at least 1) where nothing arrives."""
    import numpy as np

    lam, s, w = np.broadcast_arrays(
        np.asarray(arrivals_per_s, dtype=float),
        np.asarray(service_s, dtype=float),
        np.asarray(wait_s, dtype=float),
    )
    shape = lam.shape
    lam, s, w = lam.reshape(-1), s.reshape(-1), w.reshape(-1)
    a = lam * s
    ok = np.isfinite(a) & (a >= 0) & np.isfinite(s) & (w >= 0)  # NaN w fails too
    low = np.where(ok, np.floor(np.where(ok, a, 0.0)) + 1, np.nan)  # the least stable pool

    def fits(c: Any, i: Any) -> Any:
        # Erlang C is at most 1: where the wait with C = 1 fits, so does the wait (no Erlang sum: a
        # pool of many instances at a target of seconds is most rows)
        out = wait_bound_s(lam[i], s[i], c) <= w[i]
        exact = np.flatnonzero(~out & (a[i] <= EXACT_LOAD))
        out[exact] = mdc_wait_s(lam[i][exact], s[i][exact], c[exact]) <= w[i][exact]
        return out

    live = np.flatnonzero(ok & (a < RESOLVED_LOAD))
    high = _fewest(fits, low, live[~fits(low[live], live)])
    return np.where(ok, high, np.nan).reshape(shape)


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

    def fits(n: Any, i: Any) -> Any:
        # as mdc_servers_for_wait's: the waits with Erlang C = 1 first, the sums where they miss
        bound, exact = np.zeros(len(i)), np.zeros(len(i))
        loads = [lam[i] * sv[i] for sv, _ in pairs]
        for sv, c in pairs:
            used = c[i] >= 1
            bound += np.where(used, wait_bound_s(lam[i], sv[i], np.where(used, c[i], 1.0) * n), 0.0)
        out = bound <= w[i]
        hard = np.flatnonzero(~out & (np.max(loads, axis=0) <= EXACT_LOAD))
        for sv, c in pairs:
            used = c[i][hard] >= 1
            servers = np.where(used, c[i][hard], 1.0) * n[hard]
            exact[hard] += np.where(used, mdc_wait_s(lam[i][hard], sv[i][hard], servers), 0.0)
        out[hard] = exact[hard] <= w[i][hard]
        return out

    live = np.flatnonzero(ok & (low < RESOLVED_LOAD))
    high = _fewest(fits, low, live[~fits(low[live], live)])
    return np.where(ok, high, np.nan).reshape(shape)


def _fewest(fits: Any, low: Any, live: Any) -> Any:
    """The fewest whole counts (per element) at which ``fits(counts, elements)`` holds, where it
    holds for every count from some count on: ``low`` as given where an element is not ``live``,
    else above ``low`` (which fails there), found by doubling the counts added until they fit,
    then halving the gap (about 2 log2 of the counts added, every element at once). NaN where no
    count within 2^60 more fits. ``low`` is a float array, written over."""
    import numpy as np

    bad = np.zeros(len(low), dtype=bool)
    high, step = low.copy(), np.ones(len(low))
    for _ in range(GALLOP_ROUNDS):
        if not len(live):
            break
        high[live] = low[live] + step[live]
        done = fits(high[live], live)
        low[live[~done]] = high[live[~done]]
        step[live[~done]] *= 2
        live = live[~done]
    bad[live] = True  # never fits within 2^60 more
    # between low (fails) and high (fits), where low failed
    live = np.flatnonzero(~bad & (high > low))
    while len(live):
        mid = np.floor((low[live] + high[live]) / 2)
        moves = (mid != low[live]) & (mid != high[live])  # below 2^52 always
        done = fits(mid, live)
        high[live[done]] = mid[done]
        low[live[~done]] = mid[~done]
        live = live[moves & (high[live] - low[live] > 1)]
    return np.where(bad, np.nan, high)


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
