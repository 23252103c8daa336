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


def erlang_b(servers: Any, load: Any) -> Any:
    """Erlang's loss probability B(c, a) of ``servers`` c (whole, at least 1) at offered ``load``
    a > 0: arrays, broadcast. From 1 / B(c, a) = sum_{j=0..c} t_j, t_0 = 1, t_j = t_{j-1} (c - j + 1)
    / a (the recursion B(k) = a B(k-1) / (k + a B(k-1)) unrolled from k = c down), summed until the
    terms left, which shrink by at least the current ratio from their peak on, cannot move the sum
    in double precision: about sqrt(a) terms near saturation rather than c (a pool of millions of
    instances is not millions of steps). A sum past the largest double gives B = 0, its limit."""
    import numpy as np

    c, a = np.broadcast_arrays(np.asarray(servers, dtype=float), np.asarray(load, dtype=float))
    c, a = c.reshape(-1), a.reshape(-1)
    total, term = np.ones(c.shape), np.ones(c.shape)
    eps = np.finfo(float).eps
    live = np.flatnonzero(c >= 1)
    j = 0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        while len(live):
            j += 1
            cl, al = c[live], a[live]
            ratio = (cl - j + 1) / al
            term[live] = term[live] * ratio
            total[live] = total[live] + term[live]
            nxt = (cl - j) / al  # the next ratio; every later one is smaller
            tail = np.where(nxt < 1, term[live] * nxt / (1 - nxt), np.inf)
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
    with np.errstate(divide="ignore", invalid="ignore"):
        mmc = erlang_c(cs, as_) * s / (cs - as_)
        wait = np.where(mmc > 0, 0.5 * mmc * _cosmetatos(as_ / cs, cs), 0.0)  # B below the doubles: none
    wait = np.where(stable & (as_ > 0), wait, 0.0)
    wait = np.where(ok & ~stable, np.inf, wait)
    return np.where(ok, wait, np.nan)


# extra servers tried beyond the least stable pool, doubled each round: 2^60 is past any pool
GALLOP_ROUNDS = 60
# offered loads (instances of work) past which the count is searched on the wait's bound (Erlang C
# taken as 1: a few instances more at most) instead of Erlang's sum, which takes about sqrt(a)
# steps; a million instances is past any cluster. Past 2^52 a unit step is below a double's
# resolution: the count is the load's, floor(a) + 1 (as ceil(a) was), refused downstream
EXACT_LOAD = 1e6
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

    bad = np.zeros(len(a), dtype=bool)
    live = np.flatnonzero(ok & (a < RESOLVED_LOAD))
    live = live[~fits(low[live], live)]
    # low fails: double the servers added until they fit (high), the last failing count below
    high, step = low.copy(), np.ones(len(a))
    for _ in range(GALLOP_ROUNDS):
        if not len(live):
            break
        high[live] = low[live] + step[live]
        done = fits(high[live], live)
        low[live[~done]] = high[live[~done]]
        step[live[~done]] *= 2
        live = live[~done]
    bad[live] = True  # never fits within 2^60 servers more: no count (a wait_s of 0 with arrivals)
    # between low (fails) and high (fits), where low failed
    live = np.flatnonzero(ok & ~bad & (high > low))
    while len(live):
        mid = np.floor((low[live] + high[live]) / 2)
        moves = (mid != low[live]) & (mid != high[live])  # below 2^52 always
        done = fits(mid, live)
        high[live[done]] = mid[done]
        low[live[~done]] = mid[~done]
        live = live[moves & (high[live] - low[live] > 1)]
    out = np.where(ok & ~bad, high, np.nan)
    return out.reshape(shape)


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
