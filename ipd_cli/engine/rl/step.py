"""One step by mode (what overlaps what), and the generation/training split search."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ipd_cli.errors import InfeasibleError, counted

from .generation import Environment, Generation
from .sync import WeightSync
from .trainer import Trainer

MAX_SPLITS = 400


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
    rollout, training = gen.seconds + env.exposed_s, tr.logprob_s + tr.training_s
    if mode in ("colocated", "disaggregated"):
        return Step(rollout + training + sync.seconds, sync.seconds)
    if mode == "one-step-off":
        return Step(max(rollout, training) + sync.seconds, sync.seconds)
    t = max(rollout + sync.seconds, training + sync.sender_busy_s)
    return Step(t, min(sync.seconds, max(0.0, t - max(rollout, training))))  # clamped: rounding


def _multiples(unit: int, first: int, last: int) -> list[int]:
    """``k * unit`` for every k from ``first`` to ``last``, or a geometric grid of MAX_SPLITS of them."""
    if last - first + 1 <= MAX_SPLITS:
        return [k * unit for k in range(first, last + 1)]
    ratio = (last / first) ** (1 / (MAX_SPLITS - 1))
    return [
        k * unit for k in sorted({max(first, min(last, round(first * ratio**i))) for i in range(MAX_SPLITS)})
    ]


def _split_candidates(total: int, instance_gpus: int, min_train: int, grain: int | None = None) -> list[int]:
    """Generation sizes to try that leave ``min_train`` GPUs to train: whole numbers of instances
    (``instance_gpus`` each) and, with ``grain``, whole numbers of systems (``grain`` GPUs each)
    that hold an instance. The systems' multiples depend on the cluster alone, not on the
    instance the physics favours, so a faster part never loses those sizes."""
    free = total - min_train
    sizes = set(_multiples(instance_gpus, 1, free // instance_gpus))
    if grain:
        sizes.update(_multiples(grain, -(-instance_gpus // grain), free // grain))
    return sorted(sizes)


def fewest_split_gpus(instance_gpus: int, min_train: int) -> int:
    """The fewest GPUs a disaggregated step can run on: one generation instance and a trainer
    that holds the training state."""
    return instance_gpus + max(1, min_train)


def grown_split(
    pools: list[int], min_train: int, balance: Callable[[int, int], float], grain: int | None = None
) -> tuple[int, int]:
    """Where the request's GPUs are too few (``grow_gpus_to_fit``): a trainer of the fewest GPUs
    that hold the training state (``min_train``) plus a generation pool the size of one rollout
    replica (any candidate's ``pools`` size, or the whole systems of ``grain`` GPUs that hold it),
    the one with the shortest step (ties: fewer GPUs), over every candidate's pool size."""
    sizes = set(pools)
    if grain:
        sizes.update(-(-g // grain) * grain for g in pools)
    train = max(1, min_train)
    gen = min(sorted(sizes), key=lambda g: balance(g, train))  # min() keeps the first: fewer GPUs
    return gen, train


def split_gpus(
    total: int,
    instance_gpus: int,
    balance: Callable[[int, int], float],
    min_train: int = 1,
    grain: int | None = None,
) -> tuple[int, int]:
    """The generation/training split of ``total`` GPUs (generation in whole instances, or in
    whole systems of ``grain`` GPUs; at least ``min_train`` GPUs training) with the shortest
    step, given ``balance(gen, train) -> seconds``."""
    best: tuple[float, int, int] | None = None
    for gen in _split_candidates(total, instance_gpus, max(1, min_train), grain):
        seconds = balance(gen, total - gen)
        if best is None or seconds < best[0]:
            best = (seconds, gen, total - gen)
    if best is None:
        need = fewest_split_gpus(instance_gpus, min_train)
        raise InfeasibleError(
            f"{counted(total)} cannot be split into generation (instances of {instance_gpus}) and training "
            f"(at least {counted(max(1, min_train))} to hold the training state); give `gpus` >= {need}"
            + (" or use `mode` colocated" if min_train <= 1 else "")
        )
    return best[1], best[2]
