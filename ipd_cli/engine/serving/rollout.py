"""Handles for other engines: RL rollout generation runs on a deployment the same search picks.

:func:`rollout_deployment` chooses, among the aggregated configurations of the deployment search,
the one that generates ``rollouts`` requests fastest on ``gen_gpus`` GPUs (replicas of the
instance, each at the batch the rollouts fill, up to its KV capacity). The returned
:class:`Deployment` exposes ``gpus`` (paid GPUs per replica), ``max_batch``, ``prefill_s``,
``speculative``, ``configuration`` and a vectorised :meth:`Deployment.decode_speed`.

:func:`rollout_candidates` gives RL every such configuration at once (:class:`RolloutCandidates`:
arrays over the candidates, decode steps at any batch, and a table of them on a ladder of batches
kept with the grid), from which RL picks the configuration and concurrency per generation pool.

``serving_context``, ``serving_instance`` and ``decode_speed`` keep the interface RL used
before the search (the smallest instance that holds the model and one request).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.engine.search import best, best_of, distinct, merge_sorted
from ipd_cli.engine.trace import CLI
from ipd_cli.errors import InfeasibleError

from .context import ServingContext, context
from .estimate import Shape, pins_of, search
from .evaluate import prompt_with_stall
from .grid import Grid, Pins, layout_step
from .point import layout_name

# The ladder of batches RolloutCandidates.table tabulates decode steps at. Only how much work the
# exact search of RL's rollout concurrency does depends on them, never its answer.
EXACT_BATCHES = 32  # every batch up to this
BATCHES_PER_OCTAVE = 8  # then this many per doubling
# RolloutCandidates.step_at keys a (candidate, batch) pair as k x BATCH_KEYS + batch x BATCH_UNITS:
# batches in 1,024ths (an RL tail concurrency is a replica's rollouts x 1/8)
BATCH_KEYS = 2**40
BATCH_UNITS = 2**10
# keys RolloutCandidates.step_at adds to a small table before it merges them into the large one
RECENT_STEPS = 4096


def gpu_expert_shares(grid: Any, rows: Any) -> tuple[Any, Any]:
    """Shares of the whole model's routed-expert weights on the fullest and on the mean GPU of the
    layouts ``rows`` (a stage's shares, ``experts_held`` and ``experts_mean``, over its pp stages):
    what a weight update delivers to a receiving GPU."""
    pp = grid.lay["pp"][rows]
    return grid.x["experts_held"][rows] / pp, grid.x["experts_mean"][rows] / pp


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
    # decode_speed at whole batches already asked for: RL asks for the same few on pool after pool
    _speeds: dict[int, float] = field(default_factory=dict, compare=False, repr=False)
    # and at ``float`` batches (RL's tail concurrencies), apart: an int and a float of one value are
    # one dict key, and a step worked out from either need not be the same to the last bit
    _float_speeds: dict[float, float] = field(default_factory=dict, compare=False, repr=False)

    @property
    def precision(self) -> str:
        """Weight precision of the replica."""
        return self.grid.ph.precision

    @property
    def dense_replicas(self) -> int:
        """Copies of the dense (non-expert) weights in a replica: one per attention data-parallel rank."""
        return int(self.grid.x["d"][self.layout])

    @property
    def attention_tp(self) -> int:
        """GPUs of each attention tensor-parallel group (each holds MLA's down-projections and the
        routers whole)."""
        return int(self.grid.lay["t"][self.layout])

    @property
    def stages(self) -> int:
        """Pipeline stages of the replica."""
        return int(self.grid.lay["pp"][self.layout])

    @property
    def experts_on_fullest_gpu(self) -> float:
        """The share of the routed experts' weights the replica's fullest GPU holds (whole experts
        where expert parallelism does not divide them, EPLB's replica slots included)."""
        return float(gpu_expert_shares(self.grid, self.layout)[0])

    @property
    def experts_on_mean_gpu(self) -> float:
        """The same on the mean GPU of the replica (with EPLB every GPU holds as many slots)."""
        return float(gpu_expert_shares(self.grid, self.layout)[1])

    @property
    def instance_gpus(self) -> int:
        """GPUs the replica uses (``gpus`` adds the ones it strands in its scale-up domain)."""
        return int(self.grid.lay["g"][self.layout])

    def decode_speed(self, batch) -> Any:
        """Output tokens/s of one sequence at ``batch`` sequences per replica (arrays work too);
        kept for a whole number (an ``int``), as RL's generation asks for it again and again (720
        asks, 74 distinct, in one MI355X split search), and for a ``float`` (its tail
        concurrencies: kept here, with the deployment, they serve every RL setup on its grid, where
        one setup's own table of them worked them out again per setup, a third of the 7.5k in
        tests/test_rl*.py); the same scalar arithmetic either way."""
        kind = type(batch)
        kept = self._speeds if kind is int else self._float_speeds if kind is float else None
        if kept is None:
            return self._speed(batch)
        speed = kept.get(batch)
        if speed is None:
            speed = kept[batch] = self._speed(batch)
        return speed

    def _speed(self, batch) -> Any:
        return (
            self.speculative / layout_step(self.grid.ph, self.grid, self.layout, batch, parts=False)["step_s"]
        )


def prompt_s(g: Grid, li):
    """A prompt's seconds on the aggregated layouts ``li``: its own, or a stack release's prompt
    stall where longer (an aggregated instance's, as :func:`.evaluate.aggregated` prices it)."""
    return prompt_with_stall(g.ph, g.x["prefill_s"][li])


def _layout_rows(g: Grid):
    """Rows at each layout's KV limit, aggregated, feasible and within the pins (one per layout)."""
    import numpy as np

    r = g.rows
    at_limit = r["batch"] >= (g.x["rank_max"] * g.x["d"])[r["layout"]] - 1e-9
    ok = g.feasible & (r["disagg"] == 0) & at_limit
    return np.flatnonzero(ok)


def _deployment(g: Grid, li: int) -> Deployment:
    import math

    return Deployment(
        grid=g,
        layout=li,
        gpus=int(math.ceil(float(g.x["paid"][li]) - 1e-9)),
        max_batch=int(g.x["rank_max"][li] * g.x["d"][li]),
        prefill_s=float(prompt_s(g, li)),
        speculative=float(g.x["accepted"][li]),
        configuration=layout_name(g, li),
    )


def _search(ctx: ServingContext, shape: Shape, layout: str | None = None) -> Grid:
    return search(ctx, shape, pins_of(layout=layout, disaggregated=False))


@dataclass(frozen=True)
class RolloutCandidates:
    """The aggregated configurations at their KV limit that generation can run on (one per
    layout), as arrays over the candidates: paid ``gpus`` per replica, ``max_batch``,
    ``prefill_s`` and ``speculative``; :meth:`step_s` is the decode step at a batch per candidate."""

    grid: Grid
    li: Any  # layout index of each candidate
    gpus: Any
    max_batch: Any
    prefill_s: Any
    speculative: Any

    def step_s(self, batch, k: Any = None) -> Any:
        """Decode-step seconds at ``batch`` of every candidate, or of candidates ``k`` (an index
        array that broadcasts with ``batch``)."""
        return _steps(self.grid, self.li if k is None else self.li[k], batch)

    def step_at(self, batch: Any, k: Any) -> Any:
        """:meth:`step_s` of candidates ``k`` at batches ``batch`` (1-D arrays of one size; whole
        numbers of 1,024ths, as whole batches and RL's tail concurrencies are), kept: RL's split
        search asks for the same few (candidate, batch) pairs on pool after pool (137k asked, 11k
        distinct, in a four-system RL comparison). Each value is computed once, by the same
        element-wise arithmetic, so it is the value :meth:`step_s` gives for arrays (a 0-d input
        may differ in the last bit: numpy's scalar and vector loops)."""
        import numpy as np

        units = batch * BATCH_UNITS  # exact: a power of two
        keyable = np.isfinite(units) & (units >= 0) & (units < BATCH_KEYS) & (units == np.floor(units))
        if not keyable.all():  # not in 1,024ths, or out of the key's range: computed, not kept
            return self.step_s(batch, k)
        key = k.astype(np.int64) * BATCH_KEYS + units.astype(np.int64)
        # two sorted tables: the values kept, and the ones added since they were last merged into
        # them (a merge copies the whole table: once per call that adds, it cost more than the
        # steps it kept, at ~170k keys in a test session)
        keys, values = self._tables.get("steps at") or _no_steps()
        recent, recent_values = self._tables.get("steps at, recent") or _no_steps()
        at = np.minimum(np.searchsorted(keys, key), max(keys.size - 1, 0))
        hit = keys[at] == key if keys.size else np.zeros(key.size, bool)
        if hit.all():
            return values[at]
        out = np.where(hit, values[at] if keys.size else 0.0, 0.0)
        miss = np.flatnonzero(~hit)
        if recent.size:
            asked = key[miss]
            at = np.minimum(np.searchsorted(recent, asked), recent.size - 1)
            found = recent[at] == asked
            out[miss[found]] = recent_values[at[found]]
            miss = miss[~found]
        if miss.size:
            new_keys = distinct(key[miss])
            units = (new_keys % BATCH_KEYS).astype(float)
            new_values = self.step_s(units / BATCH_UNITS, new_keys // BATCH_KEYS)
            out[miss] = new_values[np.searchsorted(new_keys, key[miss])]
            recent, recent_values = merge_sorted(recent, recent_values, new_keys, new_values)
            if recent.size > max(RECENT_STEPS, keys.size // 8):
                keys, values = merge_sorted(keys, values, recent, recent_values)
                self._tables["steps at"] = (keys, values)
                recent, recent_values = _no_steps()
            self._tables["steps at, recent"] = (recent, recent_values)
        return out

    def table(self) -> tuple[Any, Any]:
        """Decode-step seconds of every candidate (rows) at a fixed ladder of batches (columns):
        every batch up to ``EXACT_BATCHES``, then ``BATCHES_PER_OCTAVE`` per doubling, ending at
        the largest KV limit. Computed once per candidate set (and so once per grid): the ladder
        brackets every whole batch between two of its rungs, and a step is non-decreasing in the
        batch, so the rungs bound the step at any batch between them. Returns (batches, steps)."""
        import numpy as np

        have = self._tables.get("ladder")
        if have is None:
            top = float(max(1.0, np.max(self.max_batch, initial=1.0)))
            octaves = max(0.0, np.log2(top / EXACT_BATCHES))
            geometric = EXACT_BATCHES * 2.0 ** (
                np.arange(1, int(np.ceil(octaves * BATCHES_PER_OCTAVE)) + 1) / BATCHES_PER_OCTAVE
            )
            ladder = distinct(np.concatenate([np.arange(1.0, EXACT_BATCHES + 1), np.round(geometric), [top]]))
            ladder = ladder[ladder <= top]
            steps = self.step_s(ladder[None, :], np.arange(self.li.size)[:, None])  # (candidate, rung)
            have = self._tables["ladder"] = (ladder, steps)
        return have

    def finite_steps(self) -> Any:
        """True for each candidate whose decode steps on the ladder (:meth:`table`) are all finite."""
        import numpy as np

        have = self._tables.get("finite")
        if have is None:
            have = self._tables["finite"] = np.isfinite(self.table()[1]).all(axis=1)
        return have

    def deployment(self, k: int) -> Deployment:
        """Candidate ``k`` as a :class:`Deployment`."""
        if k not in self._deployments:
            self._deployments[k] = _deployment(self.grid, int(self.li[k]))
        return self._deployments[k]

    def sync_groups(self) -> Any:
        """A group number per candidate: candidates of one group take the same weight update (the
        same paid GPUs per replica, copies of the dense weights and shares of the routed experts on
        the fullest and the mean GPU: what ``rl.sync_plan`` reads of a replica), so RL's choice
        among them is the generation's alone."""
        import numpy as np

        have = self._tables.get("sync groups")
        if have is None:
            d = self.grid.x["d"][self.li]
            share, mean = gpu_expert_shares(self.grid, self.li)
            order = np.lexsort((mean, share, d, self.gpus))
            keys = np.stack([self.gpus, d, share, mean])[:, order]
            first = np.concatenate(([True], np.any(keys[:, 1:] != keys[:, :-1], axis=0)))
            have = self._tables["sync groups"] = np.empty(order.size, int)
            have[order] = np.cumsum(first) - 1
        return have

    def sync_group_members(self) -> dict[int, int]:
        """Each group of :meth:`sync_groups` -> its first candidate (a table, not a scan per ask)."""
        import numpy as np

        have = self._tables.get("sync group members")
        if have is None:
            groups, first = np.unique(self.sync_groups(), return_index=True)
            members = dict(zip(groups.tolist(), first.tolist(), strict=True))
            have = self._tables["sync group members"] = members
        return have

    def densest(self) -> int:
        """The candidate with the most tokens/s per GPU at its KV limit."""
        import numpy as np

        tps = self.grid.rows["tokens_per_s_per_gpu"][self._rows]
        return best_of(tps, np.ones(tps.size, bool))

    _rows: Any = None  # rows of the grid the candidates come from
    _deployments: dict[int, Deployment] = field(default_factory=dict, compare=False, repr=False)
    _tables: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def rollout_candidates(
    ctx: ServingContext,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    precision: str | None = None,
    kv_precision: str | None = None,
    speculative: str | int | None = "off",
    pricing: str = "rental",
    layout: str | None = None,
    stack: str | None = None,
    stack_release: str | None = None,
) -> RolloutCandidates:
    """Every aggregated configuration of the deployment search, at its KV limit, for generation
    (``layout``: only that serving layout, as a run deployed it; ``stack``: the serving stack the
    engines run, None: the family's default; ``stack_release``: its release measured apart)."""
    import numpy as np

    shape = Shape(
        input_tokens, output_tokens, precision, kv_precision, speculative, pricing, stack,
        stack_release=stack_release,
    )  # fmt: skip
    g = _search(ctx, shape, layout)
    rows = _layout_rows(g)
    if rows.size == 0:
        if layout is not None:
            raise InfeasibleError(
                f"no {layout} rollout replica of {ctx.mname} fits on {ctx.name}; "
                "pin another layout (tp, tep or dep with the GPUs a replica holds) or leave it searched"
            )
        raise InfeasibleError(f"{ctx.mname} does not fit on {ctx.name} for generation")
    have = g.derived.get("rollout candidates")
    if have is None:
        li = g.rows["layout"][rows]
        have = g.derived["rollout candidates"] = RolloutCandidates(
            grid=g,
            li=li,
            gpus=np.ceil(g.x["paid"][li] - 1e-9),
            max_batch=np.floor(g.x["rank_max"][li] * g.x["d"][li]),
            prefill_s=prompt_s(g, li),
            speculative=g.x["accepted"][li],
            _rows=rows,
        )
    return have


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

    c = rollout_candidates(
        ctx, input_tokens=input_tokens, output_tokens=output_tokens, precision=precision,
        kv_precision=kv_precision, speculative=speculative, pricing=pricing,
    )  # fmt: skip
    g, li = c.grid, c.li
    if gen_gpus is None:
        return c.deployment(c.densest())
    paid = g.x["paid"][li]
    replicas = np.floor(gen_gpus / paid)
    limit = (g.x["rank_max"] * g.x["d"])[li]
    batch = np.clip(np.ceil(rollouts / np.maximum(replicas, 1)), 1, limit)
    step = _steps(g, li, batch)
    per_request = prompt_s(g, li) + g.ph.osl * step / (g.x["accepted"][li] * batch)
    time = rollouts / np.maximum(replicas, 1) * per_request
    ok = replicas >= 1
    if not ok.any():
        smallest = int(np.ceil(paid.min()))
        raise InfeasibleError(
            f"{ctx.mname} needs {smallest}-GPU inference instances on {ctx.name}; "
            f"{gen_gpus} generation GPUs hold none"
        )
    return c.deployment(best_of(-time, ok, -paid))


def _no_steps() -> tuple[Any, Any]:
    import numpy as np

    return np.empty(0, np.int64), np.empty(0)


def _steps(g: Grid, li, batch):
    from ipd_cli.engine.search import take

    from .evaluate import STEP_LAYOUT, STEP_TERMS, columns, step_terms

    lay, x = take(columns(g.lay, STEP_LAYOUT), li), take(columns(g.x, STEP_TERMS), li)
    return step_terms(g.ph, lay, x, batch, parts=False)["step_s"]


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
    rows = _layout_rows(g)  # within the pins
    if rows.size == 0:
        raise InfeasibleError(f"{ctx.mname} does not fit on {ctx.name} for generation")
    li = int(g.rows["layout"][rows][best(g.rows["tokens_per_s_per_gpu"][rows], np.ones(rows.size, bool))])
    d = _deployment(g, li)
    ctx.trace.given("generation instance", d.configuration, "", "deployment search", note=instance_note)
    return d


def decode_speed(inst: Deployment, batch) -> Any:
    """Output tokens/s of one sequence at ``batch`` sequences per instance (arrays work too)."""
    return inst.decode_speed(batch)
