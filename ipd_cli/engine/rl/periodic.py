"""A run's periodic work beyond its steps: evaluations of the policy and checkpoints of the
training state, each every so many optimiser steps, charged to every step as its share."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ipd_cli.engine import formulas as f

from .generation import environment, generation, sandbox_load
from .step import schedule
from .trainer import trainer_holding_gpus

if TYPE_CHECKING:
    from .estimate import Outcome, Setup


@dataclass(frozen=True)
class Periodic:
    """One evaluation's and one checkpoint's seconds, and how often each comes (None: never)."""

    eval_interval: int | None = None
    eval_trajectories: float = 0.0
    eval_s: float = 0.0
    checkpoint_interval: int | None = None
    checkpoint_async: bool = False
    checkpoint_bytes: float = 0.0
    write_bytes_per_s: float = 0.0
    write_s: float = 0.0
    staging_s: float = 0.0
    exposed_s: float = 0.0

    @property
    def per_step_s(self) -> float:
        """Seconds of the run's GPUs each optimiser step carries for them."""
        return f.periodic_s_per_step(
            self.eval_s, self.eval_interval, self.exposed_s, self.checkpoint_interval
        )

    def fields(self) -> dict:
        """The fields of ``rl.run`` they give (``periodic_s_per_step`` comes with the run)."""
        return {
            "eval_interval_steps": self.eval_interval,
            "eval_trajectories": self.eval_trajectories,
            "eval_s": self.eval_s,
            "checkpoint_interval_steps": self.checkpoint_interval,
            "checkpoint_async": self.checkpoint_async,
            "checkpoint_bytes": self.checkpoint_bytes,
            "checkpoint_write_gb_per_s": self.write_bytes_per_s / f.GIGA,
            "checkpoint_write_s": self.write_s,
            "checkpoint_staging_s": self.staging_s,
            "checkpoint_exposed_s": self.exposed_s,
        }


NO_PERIODIC = Periodic()


def periodic_terms(
    s: Setup, out: Outcome, gen_gpus: int, train_gpus: int, origin: str, quiet: bool = False
) -> Periodic:
    """The workload's evaluations and checkpoints on the step ``out`` (absent: none, nothing read;
    ``quiet``: recording nothing, as a search that tries many pools reads them)."""
    w, inp = s.w, (s.kept if quiet else s.inp)
    p = NO_PERIODIC
    if w.eval_interval_steps is not None:
        interval = inp.given("eval interval", w.eval_interval_steps, "steps", origin,
                             path="workload.eval_interval_steps")  # fmt: skip
        tasks = inp.given("eval tasks", w.eval_tasks, "tasks", origin, path="workload.eval_tasks")
        attempts = inp.given("eval attempts", w.eval_attempts, "attempts per task", origin,
                             path="workload.eval_attempts")  # fmt: skip
        n = float(tasks * attempts)
        eval_s = _eval_seconds(s, out, gen_gpus, train_gpus, n)
        p = replace(p, eval_interval=int(interval), eval_trajectories=n, eval_s=eval_s)
    if w.checkpoint_interval_steps is not None:
        interval = inp.given("checkpoint interval", w.checkpoint_interval_steps, "steps", origin,
                             path="workload.checkpoint_interval_steps")  # fmt: skip
        # recorded as written (true or false: what a --set of its path takes), not as a number
        asynchronous = w.checkpoint_async
        inp.given("checkpoint async", "true" if asynchronous else "false", "", origin,
                  path="workload.checkpoint_async")  # fmt: skip
        per_param = inp.read("efficiency.weight_bytes_per_param", "checkpoint: weight bytes per parameter")
        per_param += inp.read(
            "efficiency.optimizer_bytes_per_param", "checkpoint: optimizer bytes per parameter"
        )
        state = per_param * s.arch.total_params  # the training state without its gradients
        writers = trainer_holding_gpus(out.trainer, train_gpus)
        run_gpus = gen_gpus if w.mode == "colocated" else gen_gpus + train_gpus
        share = inp.read("rl.storage_write_gb_per_s_per_gpu", "storage write bandwidth per GPU")
        node = inp.read("rl.storage_node_write_gb_per_s_per_gpu", "storage write bandwidth per GPU of a node")
        rate = float(f.checkpoint_write_bytes_per_s(run_gpus, writers, share, node))
        write_s = f.checkpoint_write_seconds(state, rate)
        staging_s = f.checkpoint_staging_seconds(state, writers, s.links.host) if asynchronous else 0.0
        exposed = f.checkpoint_exposed_seconds(write_s, staging_s, interval, out.step.seconds, asynchronous)
        p = replace(p, checkpoint_interval=int(interval), checkpoint_async=asynchronous,
                    checkpoint_bytes=state, write_bytes_per_s=rate, write_s=write_s,
                    staging_s=staging_s, exposed_s=float(exposed))  # fmt: skip
    return p


def _eval_seconds(s: Setup, out: Outcome, gen_gpus: int, train_gpus: int, trajectories: float) -> float:
    """One evaluation: ``trajectories`` of the step's shape generated at once on the step's rollout
    replicas (a synchronous batch), then their sandboxes' start and verification, as a synchronous
    step's generation and environment. The replicas run at the step's concurrency where the step is
    a synchronous batch too (the search's fastest for it), else as full as the batch wants (an async
    step's concurrency holds its staleness down, which an evaluation need not)."""
    if trajectories <= 0:
        return 0.0
    nums = replace(s.nums, samples=trajectories, generated=trajectories)
    total = gen_gpus if s.w.mode == "colocated" else gen_gpus + train_gpus
    load = sandbox_load(nums, s.host, total)
    asynchronous = schedule(s.w.mode, s.w.staleness_bound) == "async"
    rollouts = replace(out.rollouts, concurrency=None) if asynchronous else out.rollouts
    gen = generation(rollouts, nums, gen_gpus, False, s.where, load)
    return gen.seconds + environment(nums, s.host, gen, total, False).exposed_s
