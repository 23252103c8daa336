"""One step by mode (what overlaps what), and the generation/training split search."""

from __future__ import annotations

import math
from bisect import insort
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ipd_cli.errors import InfeasibleError, counted

from .generation import AHEAD_POOLS, Environment, Generation
from .sync import WeightSync
from .trainer import Trainer

MAX_SPLITS = 400  # a split search tries every size up to this many, else coarse to fine
ZOOM_POINTS = 64  # sizes a coarse-to-fine level tries
ZOOM_STARTS = 4  # the coarse level's best sizes a split search zooms in around (far minima)


@dataclass(frozen=True)
class SyncPhase:
    """The weight update of a step, plus (colocated) parking the training state in host memory
    and back, and switching the GPUs between trainer and engine."""

    sync: WeightSync
    offload_s: float = 0.0
    switch_s: float = 0.0

    @property
    def seconds(self) -> float:
        return self.sync.seconds + self.offload_s + self.switch_s

    @property
    def sender_busy_s(self) -> float:
        """The part the trainer GPUs drive (barrier and wire); the engine loader is the receivers' alone."""
        return self.sync.fixed_s + self.sync.transfer_s


@dataclass(frozen=True)
class Step:
    seconds: float
    sync_exposed_s: float  # weight-sync seconds on the step's critical path


def schedule(mode: str, staleness_bound: int) -> str:
    """The schedule a mode runs: async with a staleness bound of 0 cannot generate ahead of the
    update (every rollout must come from the policy being trained), so it runs as disaggregated:
    generation, then training, then the update."""
    return "disaggregated" if mode == "async" and staleness_bound < 1 else mode


def step(mode: str, gen: Generation, env: Environment, tr: Trainer, sync: SyncPhase) -> Step:
    """Colocated and disaggregated run the phases in series; one-step-off overlaps generation
    with training and then syncs (verl, NeMo RL: the update waits for both); async keeps
    generating across steps: in-flight updates skip the drain, but the engines pause for the
    whole update (NeMo RL, prime-rl, Miles, PipelineRL), while the trainer is busy only for
    the transfer it drives."""
    return timed(mode, gen.seconds + env.exposed_s, tr.logprob_s + tr.training_s, sync)


def timed(mode: str, rollout: float, training: float, sync: SyncPhase) -> Step:
    """:func:`step` of a rollout (generation and exposed environment) and a training of so many
    seconds; non-decreasing in each, so floors under them give a floor under the step."""
    t = step_seconds(mode, rollout, training, sync.seconds, sync.sender_busy_s)
    if mode in ("colocated", "disaggregated", "one-step-off"):
        return Step(t, sync.seconds)
    return Step(t, min(sync.seconds, max(0.0, t - max(rollout, training))))  # clamped: rounding


def step_seconds(mode: str, rollout: float, training: float, sync_s: float, busy_s: float) -> float:
    """:func:`timed`'s seconds, of an update of ``sync_s`` seconds whose senders are busy
    ``busy_s`` (:attr:`SyncPhase.sender_busy_s`): numbers alone, for a search that compares a
    step with the best found group after group (read once a group, not a :class:`Step` made)."""
    if mode in ("colocated", "disaggregated"):
        return rollout + training + sync_s
    if mode == "one-step-off":
        return max(rollout, training) + sync_s
    return max(rollout + sync_s, training + busy_s)


def step_floor(mode: str, rollout: Any, training: Any) -> Any:
    """:func:`timed`'s step with no update, over arrays of rollout and training seconds (numbers
    too): a floor under any step whose rollout and training take at least these (an update only
    adds: :func:`timed` is non-decreasing in each term)."""
    import numpy as np

    if mode in ("colocated", "disaggregated"):
        return np.add(rollout, training)
    return np.maximum(rollout, training)


def _split_candidates(
    lo: int, hi: int, units: Sequence[int], points: int = MAX_SPLITS
) -> tuple[list[int], bool]:
    """Generation sizes from ``lo`` to ``hi`` GPUs in whole ``units`` (replica sizes, systems):
    every such size and True where they are at most ``points``, else False and, for each of
    ``points`` sizes stepping geometrically from ``lo`` to ``hi``, the first whole size at or
    above it (and the last at or below ``hi``)."""
    units = sorted(set(units))
    if sum(hi // u - (lo - 1) // u for u in units) <= points * len(units):
        every = sorted({k * u for u in units for k in range(-(-lo // u), hi // u + 1)})
        if len(every) <= points:
            return every, True
    ratio = (hi / lo) ** (1 / (points - 1))
    steps = {math.ceil(lo * ratio**i) for i in range(points)}
    sizes = {_first_whole(t, units) for t in steps} | {max(hi // u * u for u in units)}
    return sorted(g for g in sizes if lo <= g <= hi), False


def _first_whole(gpus: int, units: Sequence[int]) -> int:
    """The first size at or above ``gpus`` that is a whole number of one of ``units``."""
    return min(whole_nodes(gpus, u) for u in units)


# a pool search's generation sizes past its first MAX_SPLITS: one at or above each step of this ratio
POOL_SIZE_RATIO = 1 + 1 / 128


def pool_candidates(lo: int, hi: int, units: Sequence[int], points: int = MAX_SPLITS) -> list[int]:
    """Generation sizes from ``lo`` to ``hi`` GPUs in whole ``units`` for a pool search: every
    whole size up to the ``points``-th, then the first whole size at or above each step of
    POOL_SIZE_RATIO from there. One grid whatever ``hi`` (it only stops there), so a larger cap
    tries every size a smaller one does and its cheapest pool never costs more (a code review:
    :func:`_split_candidates`' steps, spread over [lo, hi], moved with the cap, and H100's 10T SWE
    step took 5,104 GPUs at $7,687 a step under a cap of 8,192 where 6,000 and 12,000 found 5,248 at
    $7,682)."""
    units = sorted(set(units))
    if hi < lo:
        return []
    near = sorted({k * u for u in units for k in range(-(-lo // u), -(-lo // u) + points)})
    sizes = [g for g in near[:points] if g <= hi]
    if not sizes:
        return []
    step = float(near[points - 1])  # the points-th whole size from lo (near holds points a unit)
    while True:
        step *= POOL_SIZE_RATIO
        size = _first_whole(math.ceil(step), units)
        if size > hi:
            return sizes
        if size > sizes[-1]:
            sizes.append(size)


def whole_nodes(gpus: int, node: int) -> int:
    """``gpus`` rounded up to whole units of ``node`` GPUs (a node, a rack, a replica): a searched
    pool's grain (a capacity planner's audit: nobody rents 30.5 HGX nodes, as H200's 244-GPU
    trainer took)."""
    return -(-gpus // node) * node


def fewest_split_gpus(instance_gpus: int, min_train: int) -> int:
    """The fewest GPUs a disaggregated step can run on: one generation instance and a trainer
    that holds the training state."""
    return instance_gpus + max(1, min_train)


GROWN_REPLICAS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)  # replicas a grown generation pool tries


def grown_split(
    pools: list[int], min_train: int, balance: Callable[[int, int], float], grain: int | None = None
) -> tuple[int, int]:
    """Where the request's GPUs are too few (``grow_gpus_to_fit``): a trainer of the fewest GPUs
    that hold the training state (``min_train``) plus the generation pool, in whole replicas of
    any candidate's size (``pools``) or whole systems of ``grain`` GPUs that hold one, no larger
    than the trainer, with the least cost per step: (pool + trainer) x step (ties: fewer GPUs).
    A pool of one replica left a 4,096-GPU H100 trainer idle while one 256-GPU replica decoded at
    4 tokens/s per user ($11,391 a step; 4 replicas: $7,262, a user review); the replica counts
    are :data:`GROWN_REPLICAS`. Where ``balance`` has an ``ahead_each(splits)`` method, it is told the
    (generation, trainer) splits first: it may make them at once; where it has a
    ``soonest_floor(total, gen)`` method (:func:`split_gpus`'), the pools are tried in the order of
    their GPUs x that floor, until it is above the least cost found (:func:`_least`)."""
    import numpy as np

    units = set(pools)
    if grain:
        units.update(whole_nodes(g, grain) for g in pools)
    train = max(1, min_train)
    sizes = sorted({k * u for u in units for k in GROWN_REPLICAS if k * u <= max(train, u)})
    told = getattr(balance, "ahead_each", None)
    if told is not None:  # told the splits about to be tried, before they are (as split_gpus' ahead)
        told([(g, train) for g in sizes])
    floor = getattr(balance, "soonest_floor", None)

    def cost(g: int) -> float:  # GPU-seconds a step
        return (g + train) * balance(g, train)

    def floor_of(gens: list[int]) -> Any:  # the GPUs x a floor under the step (x GPUs keeps the order)
        return None if floor is None else np.array([(g + train) * floor(g + train, g) for g in gens])

    return _least(sizes, 1, cost, floor_of=floor_of)[0], train


def _nothing(sizes: list[int]) -> None:
    """The default ``ahead`` (told nothing) and ``floor_of`` (no floors: every size is tried)."""
    return None


def _unknown(size: int) -> float:
    """The default ``sharper`` of :func:`_least`: no floor beyond ``floor_of``'s."""
    return -math.inf


def _least(
    sizes: list[int],
    k: int,
    step_s: Callable[[int], float],
    ahead: Callable[[list[int]], None] = _nothing,
    floor_of: Callable[[list[int]], Any] = _nothing,
    sharper: Callable[[int], float] = _unknown,
) -> list[int]:
    """``sorted(sizes, key=lambda g: (step_s(g), g))[:k]``, the ``k`` sizes with the shortest
    steps (ties: fewer GPUs), ``ahead`` told the sizes before they are tried. Where
    ``floor_of(sizes)`` gives a floor under each size's step (else None: every size is tried),
    the sizes are tried in the order of their floor (then size), until a floor is above the k-th
    shortest step found: no size left can rank among the first k (its step is at least its floor,
    above that step; a floor equal to it is tried, as its size may tie and win on GPUs).
    ``ahead`` is told :data:`~.generation.AHEAD_POOLS` of them at a time, those whose floor is
    not above the k-th step found as they are told (one call for many: :func:`~.generation.fastest_many`),
    and those are tried in the order of ``sharper(size)``'s floor where it is the higher (one
    that may read what ``ahead`` made; -inf: none), until it too is above the k-th step found:
    the shortest steps first, so the bar falls soonest (in ``floor_of``'s order, the sizes on one
    flat floor go smallest first, each shorter than the last: GB200's one-step-off SWE step on
    2,048 GPUs rules out 15 of its 345 sizes in that order, 46 in this one). An async split search
    on 512 GB200 GPUs tries 133 of its 224 sizes by ``floor_of`` alone, 49 with :func:`split_gpus`'
    ``sharper``."""
    floor = floor_of(sizes) if len(sizes) > k else None
    if floor is None:
        ahead(sizes)
        return sorted(sizes, key=lambda g: (step_s(g), g))[:k]
    order = sorted(zip(floor.tolist(), sizes, strict=True))
    found: list[tuple[float, int]] = []  # (step, size) of the sizes tried, shortest first
    for start in range(0, len(order), AHEAD_POOLS):
        bar = found[k - 1][0] if len(found) >= k else math.inf
        told = [(lowest, g) for lowest, g in order[start : start + AHEAD_POOLS] if not lowest > bar]
        if not told:
            break  # nor any size after them (their floors are at least these)
        ahead([g for _, g in told])
        for lowest, g in sorted((max(lowest, sharper(g)), g) for lowest, g in told):
            if len(found) >= k and lowest > found[k - 1][0]:
                break  # nor any size told with it after it
            insort(found, (step_s(g), g))
    return [g for _, g in found[:k]]


def _zoom(
    lo: int,
    hi: int,
    units: Sequence[int],
    step_s: Callable[[int], float],
    ahead: Callable[[list[int]], None] = _nothing,
    floor_of: Callable[[list[int]], Any] = _nothing,
    sharper: Callable[[int], float] = _unknown,
) -> int:
    """Coarse to fine: ZOOM_POINTS sizes stepping geometrically over [lo, hi], then again between
    the best one's neighbours, until every size left between them can be tried; the best size
    (``ahead``: told each level's sizes before they are tried; ``floor_of`` and ``sharper``:
    :func:`_least`'s)."""
    sizes, every = _split_candidates(lo, hi, units, ZOOM_POINTS)
    while True:
        best = _least(sizes, 1, step_s, ahead, floor_of, sharper)[0]
        if every:
            return best
        i = sizes.index(best)
        window = sizes[max(0, i - 1)], sizes[min(len(sizes) - 1, i + 1)]
        # between the best size's neighbours; where that is no narrower, every size in it
        points = hi - lo + 1 if window == (lo, hi) else ZOOM_POINTS
        lo, hi = window
        sizes, every = _split_candidates(lo, hi, units, points)


def _descend(
    best: int,
    lo: int,
    hi: int,
    units: Sequence[int],
    step_s: Callable[[int], float],
    ahead: Callable[[list[int]], None] = _nothing,
    floor_of: Callable[[list[int]], Any] = _nothing,
    sharper: Callable[[int], float] = _unknown,
) -> int:
    """Down the sawtooth from ``best``: to the next or previous whole size of any unit in [lo, hi]
    while one is shorter (the teeth a coarse level stepped over, near the best)."""
    while True:
        near = {(best // u + 1) * u for u in units} | {(-(-best // u) - 1) * u for u in units}
        sizes = [best, *(g for g in near if lo <= g <= hi)]
        moved = _least(sizes, 1, step_s, ahead, floor_of, sharper)[0]
        if moved == best:
            return best
        best = moved


def split_gpus(
    total: int,
    pools: Sequence[int],
    balance: Callable[[int, int], float],
    min_train: int = 1,
    grain: int | None = None,
) -> tuple[int, int]:
    """The generation/training split of ``total`` GPUs with the shortest step, given
    ``balance(gen, train) -> seconds`` (ties: fewer generation GPUs): generation in whole
    replicas of any candidate size (``pools``: the replica ``generation.fastest`` picks on a
    pool may be any of them) or in whole systems of ``grain`` GPUs that hold the smallest; at
    least ``min_train`` GPUs training. Every such size where they are at most MAX_SPLITS (exact);
    more, coarse to fine (:func:`_zoom`) around each of the ZOOM_STARTS best sizes of the first
    level (a code review: one zoom stopped 1.2 % long on Vera Rubin's 4,000-GPU async step, the
    shortest at 2,304 generation GPUs, far from its 1,152), then down the sawtooth from the best
    (:func:`_descend`). Not exhaustive there: the step is a sawtooth over the size (it drops where
    a pool holds one more replica of some candidate, then rises as the trainer shrinks), and a
    tooth the levels step over can be missed (GB200 5,000 GPUs: 189.52 s where 188.10 s exists).

    Where ``balance`` has an ``ahead(total, gens)`` method, it is told the generation sizes about
    to be tried (all of them, or a level's), before they are: it may make them at once. Where it
    has a ``floors(total, gens)`` method (an array: a floor under each size's step, or None), a
    size is tried only where its floor may still rank it (:func:`_least`): the same split; where
    it also has a ``soonest_floor(total, gen)`` method (a floor under that size's step, sharper
    than its ``floors``' and dearer: asked once ``ahead`` was told the size; -inf where none), nor
    where that floor rules it out (:func:`_least`'s ``sharper``)."""
    train = max(1, min_train)
    lo, hi = min(pools), total - train
    units = [*pools, grain] if grain else list(pools)
    seen: dict[int, float] = {}

    def step_s(g: int) -> float:
        if g not in seen:
            seen[g] = balance(g, total - g)
        return seen[g]

    told = getattr(balance, "ahead", None)
    floors = getattr(balance, "floors", None)
    soonest_floor = getattr(balance, "soonest_floor", None)

    def ahead(sizes: list[int]) -> None:
        if told is not None:
            told(total, [g for g in sizes if g not in seen])

    def floor_of(sizes: list[int]) -> Any:
        return None if floors is None else floors(total, sizes)

    def sharper(g: int) -> float:  # (a size tried already costs nothing to try again)
        return -math.inf if soonest_floor is None or g in seen else soonest_floor(total, g)

    sizes, every = _split_candidates(lo, hi, units) if hi >= lo else ([], True)
    if every:
        _least(sizes, 1, step_s, ahead, floor_of, sharper)
    else:  # zoom in around each of the coarse level's ZOOM_STARTS best sizes, then descend once
        coarse = _split_candidates(lo, hi, units, ZOOM_POINTS)[0]
        for g in _least(coarse, ZOOM_STARTS, step_s, ahead, floor_of, sharper):
            i = coarse.index(g)
            window = coarse[max(0, i - 1)], coarse[min(len(coarse) - 1, i + 1)]
            _zoom(*window, units, step_s, ahead, floor_of, sharper)
        _descend(min(seen, key=lambda g: (seen[g], g)), lo, hi, units, step_s, ahead, floor_of, sharper)
    if not seen:
        need = fewest_split_gpus(min(pools), min_train)
        raise InfeasibleError(
            f"{counted(total)} cannot be split into generation (replicas of {min(pools)} GPUs at least) and "
            f"training (at least {counted(train)} to hold the training state); give `gpus` >= {need}"
            + (" or use `mode` colocated" if min_train <= 1 else "")
        )
    gen = min(seen, key=lambda g: (seen[g], g))
    return gen, total - gen
