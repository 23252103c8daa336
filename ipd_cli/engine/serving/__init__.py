"""Serving: the deployment search and its estimates (catalog models in, result models out).

* :mod:`.context` resolves the system, model, precisions and request shape;
* :mod:`.physics` reads every catalog input once (SI units, traced);
* :mod:`.grid` enumerates the deployment space as numpy columns, masks what cannot run and
  applies the caller's pins; :mod:`.evaluate` is the decode/prefill model over those columns;
* :mod:`.estimate` chooses (a target, a concurrency, maximum throughput, the Pareto frontier)
  and :mod:`.point` names the chosen configuration in a :class:`~ipd_cli.engine.results.Serving`;
* :mod:`.traffic` sizes the deployment for a traffic, every traffic of a sweep at once;
* :mod:`.rollout` gives RL generation a deployment chosen by the same search.
"""

from __future__ import annotations

from .context import (
    ServingContext,
    held_whole_params,
    kv_bytes_per_token,
    mla_down_params,
    router_params,
    weight_split,
)
from .estimate import INSTANCE_CHOICES, estimate_serving, estimate_serving_curve
from .rollout import (
    Deployment,
    RolloutCandidates,
    decode_speed,
    rollout_candidates,
    rollout_deployment,
    serving_context,
    serving_instance,
)

__all__ = [
    "INSTANCE_CHOICES",
    "Deployment",
    "RolloutCandidates",
    "ServingContext",
    "decode_speed",
    "estimate_serving",
    "estimate_serving_curve",
    "held_whole_params",
    "kv_bytes_per_token",
    "mla_down_params",
    "rollout_candidates",
    "rollout_deployment",
    "router_params",
    "serving_context",
    "serving_instance",
    "weight_split",
]
