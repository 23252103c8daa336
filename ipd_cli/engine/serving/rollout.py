"""Handles for other engines: RL rollout generation runs on a deployment the same search picks.

:func:`rollout_deployment` chooses, among the aggregated configurations of the deployment search,
the one that generates ``rollouts`` requests fastest on ``gen_gpus`` GPUs (replicas of the
instance, each at the batch the rollouts fill, up to its KV capacity). The returned
:class:`Deployment` exposes ``gpus`` (paid GPUs per replica), ``max_batch``, ``prefill_s``,
``speculative``, ``configuration`` and a vectorised :meth:`Deployment.decode_speed`.

``serving_context``, ``serving_instance`` and ``decode_speed`` keep the interface RL used
before the search (the smallest instance that holds the model and one request).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.engine.search import best
from ipd_cli.engine.trace import CLI
from ipd_cli.errors import InfeasibleError

from .context import ServingContext, context
from .estimate import Shape, search
from .grid import Grid, Pins, layout_step
from .point import layout_name


@dataclass(frozen=True)
class Deployment:
    """One aggregated serving replica chosen by the deployment search."""

    grid: Grid
    layout: int  # index into grid.lay
    gpus: int  # GPUs paid per replica (stranded GPUs included)
    max_batch: int  # KV-capacity limit of a replica (engine cap per rank included)
    prefill_s: float  # instance seconds per request's prefill
    speculative: float  # tokens a decode step gives each sequence (1: no speculative decoding)
    configuration: str

    @property
    def precision(self) -> str:
        """Weight precision of the replica."""
        return self.grid.ph.precision

    @property
    def dense_replicas(self) -> int:
        """Copies of the dense (non-expert) weights in a replica: one per attention data-parallel rank."""
        return int(self.grid.x["d"][self.layout])

    @property
    def instance_gpus(self) -> int:
        """GPUs the replica uses (``gpus`` adds the ones it strands in its scale-up domain)."""
        return int(self.grid.lay["g"][self.layout])

    def decode_speed(self, batch) -> Any:
        """Output tokens/s of one sequence at ``batch`` sequences per replica (arrays work too)."""
        return self.speculative / layout_step(self.grid.ph, self.grid, self.layout, batch)["step_s"]


def _layout_rows(g: Grid):
    """Rows at each layout's KV limit, aggregated, feasible (one per layout)."""
    import numpy as np

    r = g.rows
    at_limit = r["batch"] >= (g.x["rank_max"] * g.x["d"])[r["layout"]] - 1e-9
    ok = g.space.feasible & (r["disagg"] == 0) & at_limit
    return np.flatnonzero(ok)


def _deployment(g: Grid, li: int) -> Deployment:
    import math

    return Deployment(
        grid=g,
        layout=li,
        gpus=int(math.ceil(float(g.x["paid"][li]) - 1e-9)),
        max_batch=int(g.x["rank_max"][li] * g.x["d"][li]),
        prefill_s=float(g.x["prefill_s"][li]),
        speculative=float(g.x["accepted"][li]),
        configuration=layout_name(g, li),
    )


def _search(ctx: ServingContext, shape: Shape) -> Grid:
    return search(ctx, shape, Pins(disaggregated=False))


def rollout_deployment(
    ctx: ServingContext,
    *,
    rollouts: float,
    gen_gpus: int | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    precision: str | None = None,
    kv_precision: str | None = None,
    speculative: str | int | None = "off",
    pricing: str = "rental",
) -> Deployment:
    """The aggregated configuration that generates ``rollouts`` requests fastest on ``gen_gpus``
    GPUs: per layout, replicas = gen_gpus // its GPUs, each at the batch the rollouts fill (up to
    its KV limit); time = rollouts / replicas x (prefill + output tokens x step / (speculation x
    batch)). Without ``gen_gpus``: the layout with the most tokens/s per GPU at its KV limit."""
    import numpy as np

    g = _search(ctx, Shape(input_tokens, output_tokens, precision, kv_precision, speculative, pricing))
    rows = _layout_rows(g)
    if rows.size == 0:
        raise InfeasibleError(f"{ctx.mname} does not fit on {ctx.name} for generation")
    li = g.rows["layout"][rows]
    if gen_gpus is None:
        return _deployment(g, int(li[best(g.rows["tokens_per_s_per_gpu"][rows], np.ones(rows.size, bool))]))
    paid = g.x["paid"][li]
    replicas = np.floor(gen_gpus / paid)
    limit = (g.x["rank_max"] * g.x["d"])[li]
    batch = np.clip(np.ceil(rollouts / np.maximum(replicas, 1)), 1, limit)
    step = _steps(g, li, batch)
    per_request = g.x["prefill_s"][li] + g.ph.osl * step / (g.x["accepted"][li] * batch)
    time = rollouts / np.maximum(replicas, 1) * per_request
    ok = replicas >= 1
    if not ok.any():
        smallest = int(np.ceil(paid.min()))
        raise InfeasibleError(
            f"{ctx.mname} needs {smallest}-GPU inference instances on {ctx.name}; "
            f"{gen_gpus} generation GPUs hold none"
        )
    return _deployment(g, int(li[best(-time, ok, -paid)]))


def _steps(g: Grid, li, batch):
    from ipd_cli.engine.search import take

    from .evaluate import step_terms

    return step_terms(g.ph, take(g.lay, li), take(g.x, li), batch)["step_s"]


# --- the interface RL used before the search ------------------------------------------------------


def serving_context(cat: Catalog, hardware: str, model: str, origin: str = CLI) -> ServingContext:
    """Resolved system and model plus a fresh :class:`Trace` (``ctx.trace``) for one estimate."""
    return context(cat, hardware, model, origin)


def serving_instance(
    ctx: ServingContext,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    precision: str | None = None,
    kv_precision: str | None = None,
    instance_gpus: int | None = None,
    attention_tp: int | None = None,
    speculative: str | int | None = "off",
    pricing: str = "rental",
    instance_note: str | None = None,
) -> Deployment:
    """The smallest aggregated instance that holds the model and one request (or ``instance_gpus``;
    ``attention_tp`` pins the attention TP group), in its layout with the most tokens/s per GPU at
    the KV limit; ``gpus``, ``max_batch``, ``prefill_s``, ``precision`` and ``dense_replicas``
    are public. Prefer :func:`rollout_deployment`."""
    import numpy as np

    shape = Shape(input_tokens, output_tokens, precision, kv_precision, speculative, pricing)
    pins = Pins(disaggregated=False, instance_gpus=instance_gpus, attention_tp=attention_tp)
    g = search(ctx, shape, pins, "smallest")
    rows = _layout_rows(g)
    rows = rows[g.pinned[rows]]
    if rows.size == 0:
        raise InfeasibleError(f"{ctx.mname} does not fit on {ctx.name} for generation")
    li = int(g.rows["layout"][rows][best(g.rows["tokens_per_s_per_gpu"][rows], np.ones(rows.size, bool))])
    d = _deployment(g, li)
    ctx.trace.given("generation instance", d.configuration, "", "deployment search", note=instance_note)
    return d


def decode_speed(inst: Deployment, batch) -> Any:
    """Output tokens/s of one sequence at ``batch`` sequences per instance (arrays work too)."""
    return inst.decode_speed(batch)
