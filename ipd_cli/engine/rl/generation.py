"""Generation (rollouts on the serving model) and the environment (sandboxes on host CPUs)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ipd_cli.catalog.schema import RlWorkload
from ipd_cli.engine import serving as sv
from ipd_cli.engine.inputs import Inputs
from ipd_cli.engine.search import distinct, merge_sorted
from ipd_cli.errors import InfeasibleError, InputError

from .workload import RlNumbers

NO_LOAD = (0.0, 0.0, math.inf)  # sandbox_load of trajectories without sandboxes: generation alone
Load = tuple[float, float, float]  # sandbox_load: share of the host cores, fixed seconds, in flight
ROW_KEYS = 2**40  # KeptRows keys a (candidate, replica count) pair as candidate x this + replicas


@dataclass
class KeptRows:
    """Rows of numbers kept by int64 key (a candidate and its replica count: :data:`ROW_KEYS`)."""

    keys: Any  # sorted keys of the rows kept
    at: Any  # each key's row of ``rows``
    rows: Any  # (capacity, columns): the first ``size`` rows are kept ones
    size: int = 0

    def get(self, key: Any, make: Callable[[Any], Any], columns: int | None = None) -> Any:
        """The rows of ``key`` (distinct keys), their first ``columns`` (None: all; a row is read
        once, not read whole and then cut); ``make(i)`` gives those of ``key[i]`` it has none for."""
        import numpy as np

        at, missing = self._find(key)
        if missing.any():
            new = np.flatnonzero(missing)
            at[new] = np.arange(self.size, self.size + new.size)  # where _add puts them
            self._add(key[new], make(new))
        return self.rows[at, :columns]

    def _find(self, key: Any) -> tuple[Any, Any]:
        """The row of each key (any row where it has none), and which keys have none."""
        import numpy as np

        if self.keys.size == 0:
            return np.zeros(key.size, np.int64), np.ones(key.size, bool)
        i = np.minimum(np.searchsorted(self.keys, key), self.keys.size - 1)
        return self.at[i], self.keys[i] != key  # a new array of rows (get writes into it)

    def _add(self, key: Any, rows: Any) -> None:
        """Keep ``rows`` (their first columns; the rest inf) under ``key`` (keys it has none for)."""
        import numpy as np

        end = self.size + key.size
        if end > self.rows.shape[0]:  # grow by doubling: a row is copied O(1) times on average
            grown = np.empty((max(end, 2 * self.rows.shape[0]), self.rows.shape[1]))
            grown[: self.size] = self.rows[: self.size]
            self.rows = grown
        self.rows[self.size : end, : rows.shape[1]] = rows
        self.rows[self.size : end, rows.shape[1] :] = np.inf
        order = np.argsort(key)
        self.keys, self.at = merge_sorted(self.keys, self.at, key[order], np.arange(self.size, end)[order])
        self.size = end


def _kept_rows(columns: int) -> KeptRows:
    import numpy as np

    return KeptRows(np.empty(0, np.int64), np.empty(0, np.int64), np.empty((0, columns)))


@dataclass(frozen=True)
class RowBounds:
    """What :func:`fastest` makes of a candidate's row before it compares rows, kept by candidate
    and replica count for one schedule and sandbox load: a row's numbers depend on nothing else
    (its cap follows from them), and the pools of a split search share most rows (84-92 % of
    candidate and replica count pairs in one GB200, Vera Rubin or MI355X search). ``ends``: its
    seconds at its cap and its floor; ``runs``: its lower bounds over each run of concurrencies,
    one column per rung of its table's ladder, inf on the rungs past its cap (made on the rungs of
    the call that made it, which reach its cap's)."""

    ends: KeptRows
    runs: KeptRows


@dataclass(frozen=True)
class Rollouts:
    """The rollout engine: the serving configurations generation can use, the one in use
    (``choice``), and how generation uses it."""

    candidates: sv.RolloutCandidates
    choice: int  # index into the candidates
    tail_fraction: float
    async_waste: float
    staleness_bound: int
    concurrency: int | None = None  # sequences a replica runs at (None: as many as fit and are wanted)
    # seconds a trajectory stays in flight after its GPU slot, before the trainer can take it: its
    # sandbox's start and verification (:func:`exposed_floor` of a synchronous step), which async
    # counts against the staleness bound (:func:`_seconds`)
    after_s: float = 0.0
    # async: whether trajectories run on through in-flight updates (the workload's
    # partial_rollouts); False holds the longest within the staleness bound (:func:`_seconds`)
    partial: bool = True
    chosen: dict[tuple[int, bool, int | None, Load], tuple[int, int | None, float]] = field(
        default_factory=dict, compare=False, repr=False
    )
    # each pool's groups' floors (:func:`fastest`), by (floor, group): :meth:`alternatives`' order
    floors: dict[tuple[int, bool, Load], dict[int, float]] = field(
        default_factory=dict, compare=False, repr=False
    )
    bounds: dict[tuple[bool, Load], RowBounds | None] = field(default_factory=dict, compare=False, repr=False)
    guessed: dict[tuple[int, bool, int | None, Load], tuple[int, int, float]] = field(
        default_factory=dict, compare=False, repr=False
    )  # :meth:`ahead`'s answers for a pool's alternative, until asked (then ``chosen``'s)
    # :meth:`member`'s, shared by every ``with_choice`` copy: right while copies differ only in
    # ``choice`` and ``concurrency`` (which member resets); a copy with other candidates needs its own
    members: dict[int, Rollouts] = field(default_factory=dict, compare=False, repr=False)
    # :meth:`alternatives`' answers by pool, schedule and load (what they read, ``chosen`` and
    # ``floors`` of the pool, is set once), asked by each step on the pool (:meth:`ahead` reads the
    # first alone: :meth:`first_alternative`); shared too
    alternative: dict[tuple[int, bool, None, Load], list[tuple[int, float]]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def inst(self) -> sv.Deployment:
        return self.candidates.deployment(self.choice)

    @property
    def gpus(self) -> int:
        return int(self.candidates.gpus[self.choice])

    @property
    def max_batch(self) -> int:
        return max(1, int(self.candidates.max_batch[self.choice]))

    def on(self, nums: RlNumbers, gen_gpus: int, asynchronous: bool, load: Load = NO_LOAD) -> Rollouts:
        """The configuration and concurrency that generate the step's rollouts soonest on
        ``gen_gpus`` GPUs, the sandboxes' bound included (``load``, :func:`sandbox_load`;
        :func:`fastest`; ties: fewer GPUs per replica, more sequences)."""
        return self.in_group(nums, gen_gpus, asynchronous, None, load)[0]

    def in_group(
        self,
        nums: RlNumbers,
        gen_gpus: int,
        asynchronous: bool,
        group: int | None,
        load: Load = NO_LOAD,
    ) -> tuple[Rollouts, float]:
        """:meth:`on` among the configurations of one group of ``sync_groups`` (None: all), and
        its seconds (:func:`fastest`; inf where no replica fits: generation() names the smallest)."""
        import numpy as np

        key = (gen_gpus, asynchronous, group, load)
        if key in self.guessed:
            self.chosen[key] = self.guessed.pop(key)
        if key not in self.chosen:
            found, floors = fastest(self, nums, gen_gpus, asynchronous, group, load)
            # none fits: generation() names the smallest replica
            self.chosen[key] = found or (int(np.argmin(self.candidates.gpus)), None, math.inf)
            if group is None:
                self.floors[(gen_gpus, asynchronous, load)] = floors
        k, b, t = self.chosen[key]
        return self.with_choice(k, b), t

    def with_choice(self, choice: int, concurrency: int | None) -> Rollouts:
        """``replace(self, choice=choice, concurrency=concurrency)``: a copy sharing every other
        field (its kept answers and tables), made by copying the fields as they are, not through
        ``replace``'s keyword arguments and ``__init__`` (a split search makes one per step it
        evaluates, and per group it tries: 31k in tests/test_rl*.py; ~8.8 -> ~1.4 us a copy). The
        same object ``replace`` makes: no field has its own ``__post_init__`` or ``init=False``
        (checked in tests/test_rl.py)."""
        copy = object.__new__(type(self))
        fields = copy.__dict__
        fields.update(self.__dict__)
        fields["choice"], fields["concurrency"] = choice, concurrency
        return copy

    def ahead(
        self,
        nums: RlNumbers,
        sizes: list[int],
        asynchronous: bool,
        load: Load | list[Load] = NO_LOAD,
        guess: bool = True,
    ) -> None:
        """Keep :meth:`in_group`'s answers for pools of each of ``sizes`` GPUs, among all groups
        and among each pool's first alternative (:meth:`alternatives`), made :data:`AHEAD_POOLS`
        pools at a time (:func:`fastest_many`); any it cannot make are made pool by pool when
        asked. The alternative is a guess, kept apart (``guessed``) until asked: a step may rule it
        out by its floor and never ask (most asks are for it: 86 of 97 in a Vera Rubin search, 55
        of 70 on GB200; its 232 pools at once cost less than those asks one by one). ``guess``
        False: among all groups alone (:meth:`soonest`, whose caller asks for nothing else).
        ``load``: one for every pool, or each pool's (a list as long as ``sizes``)."""
        each = load if isinstance(load, list) else [load] * len(sizes)
        pairs = dict.fromkeys(zip(sizes, each, strict=True))
        # a pool that holds no replica is left to in_group (fastest answers it at once): among
        # the others it would make fastest_many give up on its whole chunk, pool by pool
        least = float(self.candidates.gpus.min())
        new = [(g, x) for g, x in pairs if g >= least and (g, asynchronous, None, x) not in self.chosen]
        for i in range(0, len(new), AHEAD_POOLS):
            chunk = new[i : i + AHEAD_POOLS]
            found = fastest_many(self, nums, [g for g, _ in chunk], asynchronous, [x for _, x in chunk])
            if found is None:
                continue
            for (g, x), (best, floors) in zip(chunk, found, strict=True):
                self.chosen[(g, asynchronous, None, x)] = best
                self.floors[(g, asynchronous, x)] = floors
            if not guess:
                continue
            # each pool's first other group, the one a step tries first (estimate.evaluate)
            firsts = [(g, x, self.first_alternative(nums, g, asynchronous, x)) for g, x in chunk]
            other = [(g, x, a) for g, x, a in firsts if a is not None]
            other = [(g, x, a) for g, x, a in other if (g, asynchronous, a, x) not in self.chosen]
            if other:
                pools, loads = [g for g, _, _ in other], [x for _, x, _ in other]
                among = [a for _, _, a in other]
                for (g, x, a), (best, _) in zip(
                    other, fastest_many(self, nums, pools, asynchronous, loads, among) or [], strict=False
                ):
                    self.guessed[(g, asynchronous, a, x)] = best

    def made(self, gen_gpus: int, asynchronous: bool, group: int | None, load: Load = NO_LOAD) -> bool:
        """Whether :meth:`in_group`'s answer for this pool and group is kept (asked or guessed)."""
        key = (gen_gpus, asynchronous, group, load)
        return key in self.chosen or key in self.guessed

    def guess(
        self, nums: RlNumbers, gen_gpus: int, asynchronous: bool, groups: list[int], load: Load = NO_LOAD
    ) -> None:
        """Keep :meth:`in_group`'s answers for ``groups`` on one pool of ``gen_gpus`` GPUs, made at
        once (:func:`fastest_many` on the pool once per group), as guesses until asked: a step
        that asks for an alternative group :meth:`ahead` did not guess goes on to the next ones
        while their floors may beat its best (one by one, each ask cost about what 10 to 40
        groups at once do). Any it cannot make are made one by one when asked, as are the groups
        with no replica on the pool (fastest answers them at once; among the others they would make
        fastest_many give up on all)."""
        new = [a for a in dict.fromkeys(groups) if not self.made(gen_gpus, asynchronous, a, load)]
        if len(new) >= 2:
            c = self.candidates
            fit = set(c.sync_groups()[c.gpus <= gen_gpus].tolist())
            new = [a for a in new if a in fit]
        if len(new) < 2:  # one group: fastest's own call costs less
            return
        found = fastest_many(self, nums, [gen_gpus] * len(new), asynchronous, load, new)
        for a, (best, _) in zip(new, found or [], strict=False):
            self.guessed[(gen_gpus, asynchronous, a, load)] = best

    def soonest(self, nums: RlNumbers, sizes: list[int], asynchronous: bool, load: Load = NO_LOAD) -> Any:
        """:meth:`in_group`'s seconds among all groups on pools of each of ``sizes`` GPUs, as one
        array (inf where no replica fits), with no :class:`Rollouts` made per pool: the pools made
        at once (:meth:`ahead`, without its guesses of each pool's alternative group, which only a
        step asks for), any :func:`fastest_many` cannot make pool by pool, then the answers kept
        read out (a pool search's rollout floors, where one :meth:`in_group` per size built a copy
        of the engine to read one number)."""
        import numpy as np

        self.ahead(nums, sizes, asynchronous, load, guess=False)
        keys = [(g, asynchronous, None, load) for g in sizes]
        for key in keys:
            if key not in self.chosen:  # a pool fastest_many could not make
                self.in_group(nums, key[0], asynchronous, None, load)
        chosen = self.chosen
        return np.fromiter((chosen[key][2] for key in keys), float, count=len(keys))

    def member(self, group: int) -> Rollouts:
        """A configuration of ``group`` (``sync_groups``; all of one group take the same update)."""
        have = self.members.get(group)
        if have is None:  # the same on every ask: only choice and concurrency differ from ``self``
            k = self.candidates.sync_group_members().get(group, 0)  # as argmax(sync_groups() == group)
            have = self.with_choice(k, None)
            self.members[group] = have
        return have

    def alternatives(
        self, nums: RlNumbers, gen_gpus: int, asynchronous: bool, load: Load = NO_LOAD
    ) -> list[tuple[int, float]]:
        """The other groups of configurations that fit (``sync_groups``: each takes another weight
        update than :meth:`on`'s), each with a floor under its seconds, lowest first."""
        key = (gen_gpus, asynchronous, None, load)
        have = self.alternative.get(key)
        if have is not None:
            return have
        floors, own = self._floors(nums, gen_gpus, asynchronous, load)
        have = list(floors.items())  # by (floor, group): :func:`fastest`'s order of them
        if own in floors:
            del have[list(floors).index(own)]
        self.alternative[key] = have
        return have

    def first_alternative(
        self, nums: RlNumbers, gen_gpus: int, asynchronous: bool, load: Load = NO_LOAD
    ) -> int | None:
        """The first group of :meth:`alternatives` (None: none), with no list made of them."""
        floors, own = self._floors(nums, gen_gpus, asynchronous, load)
        return next((g for g in floors if g != own), None)

    def _floors(self, nums: RlNumbers, gen_gpus: int, asynchronous: bool, load: Load) -> tuple[dict, int]:
        """The floors of the groups on a pool (by floor, then group) and :meth:`on`'s group."""
        key = (gen_gpus, asynchronous, None, load)
        if key not in self.chosen:
            self.in_group(nums, gen_gpus, asynchronous, None, load)
        own = int(self.candidates.sync_groups()[self.chosen[key][0]])  # :meth:`on`'s configuration's
        return self.floors[(gen_gpus, asynchronous, load)], own


def rollout_engine(
    ctx: sv.ServingContext, w: RlWorkload, nums: RlNumbers, pricing: str, after_s: float = 0.0
) -> Rollouts:
    """The serving deployment search's configurations for the step's rollouts, starting from the
    one with the most tokens/s per GPU at its KV limit (its size sets the split search's grain);
    :meth:`Rollouts.on` picks, for each generation pool, the one that generates the step soonest."""
    if w.inference_precision is not None:  # `ipd rl` has no precision option: name the workload's
        from ipd_cli.engine.serving.context import check_precision

        def fix(wide: str) -> str:
            return (
                f" for the RL workload's rollouts; set its `inference_precision` to {wide} "
                f"(`sets` workload.inference_precision={wide})"
            )

        check_precision(ctx, w.inference_precision, "inference_precision", fix)
    try:
        cands = sv.rollout_candidates(
            ctx,
            input_tokens=int(nums.prompt_tokens + nums.observation_tokens),
            output_tokens=int(round(nums.mean_response_tokens)),
            precision=w.inference_precision,
            speculative=w.speculative,
            pricing=pricing,
            layout=w.generation_layout,
            stack=w.generation_stack,
            stack_release=w.generation_stack_release,
        )
    except InputError as e:
        if w.generation_stack is not None and "`stack`" in str(e):  # the serving search's word for it
            raise InputError(str(e).replace("`stack`", "`generation_stack`")) from None
        if "`stack_release`" in str(e):
            raise InputError(str(e).replace("`stack_release`", "`generation_stack_release`")) from None
        if w.generation_layout is None:
            raise
        raise InputError(f"`generation_layout` {w.generation_layout!r}: {e}") from None
    inp = ctx.inp
    return Rollouts(
        candidates=cands,
        choice=cands.densest(),
        tail_fraction=inp.read("rl.tail_concurrency_fraction", "tail concurrency share"),
        async_waste=inp.read("rl.async_waste_fraction", "async waste"),
        staleness_bound=w.staleness_bound,
        after_s=after_s,
        partial=w.partial_rollouts,
    )


def _seconds(r: Rollouts, nums: RlNumbers, asynchronous: bool, at: dict[str, Any], load: Load) -> Any:
    """What :func:`generation` and :func:`environment` make of a configuration (arrays): its
    generation seconds from the decode step at the concurrency (``step_s``), the step at the tail
    concurrency (``tail_step_s``), the concurrency ``b`` the bulk divides by, and the candidates'
    ``replicas``, ``prefill_s`` and ``speculative``; or the sandboxes' bound where longer
    (``load``, :func:`sandbox_load`: a slower decode holds each sandbox longer), which a step
    waits for as environment time. It grows with either step and shrinks with ``b``, so bounds
    on them bound it.

    The arrays broadcast to ``step_s``'s shape. Each term is made once and then updated in place,
    in the formula's order of operations (the same numbers): the split search calls this ~2,000
    times on up to ~24,000 values, where a new array for every operation cost more than the
    arithmetic."""
    import numpy as np

    spec = at["speculative"]
    decode_s = spec / at["step_s"]  # the bulk's decode speed, then a response's decode seconds
    np.divide(nums.mean_response_tokens, decode_s, out=decode_s)
    slot_s = decode_s + nums.turns * nums.tool_s
    slots = at["replicas"] * at["b"]
    seconds = nums.generated * slot_s
    seconds /= slots
    prefill = nums.generated * at["prefill_s"] / at["replicas"]
    seconds += prefill  # the bulk, prefills included
    if asynchronous:
        if r.after_s > 0:  # the staleness window: every trajectory in flight, verifying ones too
            np.maximum(seconds, window_seconds(r, nums, slot_s, prefill, load), out=seconds)
        if not r.partial:  # the longest trajectory within the bound: its response at the bulk's speed
            own = nums.max_response_tokens * at["step_s"] / spec + nums.max_turns * nums.tool_s
            np.maximum(seconds, whole_trajectory_seconds(r, own, prefill), out=seconds)
        seconds *= 1 + r.async_waste
    else:
        v_tail = spec / at["tail_step_s"]
        drain = (nums.max_response_tokens - nums.mean_response_tokens) / v_tail
        seconds += drain  # drained
        # the longest trajectory: its wait for a slot, its first mean-length tokens at the bulk's
        # speed (the engine is full around it), the rest at the tail's, as the drain, its tools
        longest = queued_start_s(nums.generated, slots, slot_s)
        longest += decode_s
        longest += drain
        longest += nums.max_turns * nums.tool_s
        np.maximum(seconds, longest, out=seconds)
    share, fixed, _ = load
    if np.ndim(share) or share > 0:  # per-row loads (:func:`fastest_many`'s pools) all have a share
        decode_s += fixed
        decode_s *= share
        np.maximum(seconds, decode_s, out=seconds)
    return seconds


def in_flight_limit(r: Rollouts, nums: RlNumbers, load: Any) -> Any:
    """Async: the most trajectories in flight at once: the staleness bound's bound x N, or the
    sandboxes the host's cores hold (one each, ``load``: :func:`sandbox_load`) where fewer."""
    import numpy as np

    if np.ndim(load[2]):  # per-row loads (:func:`fastest_many`'s pools): each row's
        return np.minimum(nums.generated * max(1, r.staleness_bound), load[2])
    return min(nums.generated * max(1, r.staleness_bound), load[2])


def window_seconds(r: Rollouts, nums: RlNumbers, slot_s: Any, prefill_s: Any, load: Load) -> Any:
    """Async: the least step at which every trajectory in flight, those in their sandbox's start
    and verification after their GPU slot (``r.after_s``) included, stays within
    :func:`in_flight_limit` (L). A slot holds its trajectory for its decode and tool waits
    (``slot_s``) and through its replica's prefills (``prefill_s``, the step's P): at a step T the
    slots hold N slot_s / (T - P) and the sandboxes N after_s / T (Little's law), at most L when
    T >= N (slot_s + after_s) / L + P (rl-loop.md 7.6 (i) and (iii)). Two reviews: the bound
    counted GPU slots alone, so a 10-minute test run changed nothing (GB200's SWE step at bound 1
    read a mean staleness of 1.0 where 1.56 were in flight); then the window left out the
    prefills, and the staleness read 2.2 at bound 2 (2.3 with a minute's verification)."""
    return nums.generated * (slot_s + r.after_s) / in_flight_limit(r, nums, load) + prefill_s


def whole_trajectory_seconds(r: Rollouts, own_s: Any, prefill_s: Any) -> Any:
    """Async with ``partial_rollouts`` false: the least step at which the longest trajectory (its
    response and tool waits, ``own_s``, then its sandbox's start and verification) spans at most
    the staleness bound's updates, its slot waiting through the replica's prefills (``prefill_s``,
    as :func:`window_seconds`)."""
    return (own_s + r.after_s) / max(1, r.staleness_bound) + prefill_s


def sandbox_cap(nums: RlNumbers, load: Load, replicas: Any, asynchronous: bool) -> Any:
    """Sequences per replica the host's sandboxes allow, one each (``load``: :func:`sandbox_load`),
    at least 1; inf where they cap nothing: a synchronous step whose cores hold every rollout (its
    slots then hold min(rollouts, slots) trajectories)."""
    import numpy as np

    if np.ndim(load[2]):  # per-row loads (:func:`fastest_many`'s pools): the same, row by row
        capped = np.maximum(1, np.floor(load[2] / replicas))
        return capped if asynchronous else np.where(nums.generated > load[2], capped, math.inf)
    if not (asynchronous or nums.generated > load[2]):
        return math.inf
    return np.maximum(1, np.floor(load[2] / replicas))


def _load_rows(load: Any, rows: Any) -> Any:
    """Rows ``rows`` of a load of per-row arrays (:func:`fastest_many`'s pools of several loads);
    a :data:`Load` of numbers, as it is (every row's)."""
    import numpy as np

    return tuple(x[rows] for x in load) if np.ndim(load[0]) else load


def sandbox_load(nums: RlNumbers, host: HostCpus, total_gpus: int) -> Load:
    """(a, c, m): the sandboxes' bound on a step's rollouts is a x (mean response / decode speed + c)
    seconds: every trajectory holds its cores for its decode, tool waits, start and verification,
    on the host cores of ``total_gpus`` GPUs; and at most m trajectories are in flight at once,
    one sandbox each (NO_LOAD where trajectories need no sandbox)."""
    if nums.sandbox_cores <= 0:
        return NO_LOAD
    cores = host.cores_per_gpu * total_gpus
    share = nums.generated * nums.sandbox_cores / cores
    fixed = nums.turns * nums.tool_s + nums.boot_s + nums.verify_s / host.core_speed
    return share, fixed, cores / nums.sandbox_cores


def queued_start_s(rollouts: Any, slots: Any, slot_s: Any) -> Any:
    """When the step's rollouts outnumber the slots, the longest trajectory is, as likely as any
    other, one of the queued ones, which start as slots free up (S / slot_s a second): its expected
    start, (queued / N) x (queued + 1) / 2 x slot_s / S. Numbers or arrays (``slot_s`` broadcast
    to the shape of ``rollouts - slots``; updated in place, in that order: :func:`_seconds`)."""
    import numpy as np

    queued = np.maximum(0.0, rollouts - slots)
    start = queued / rollouts
    queued += 1.0
    start *= queued
    start /= 2.0
    start *= slot_s
    start /= slots
    return start


def _row_bounds(r: Rollouts, asynchronous: bool, load: Load, rungs: int) -> RowBounds | None:
    """The rows :func:`fastest` keeps for ``r`` on a schedule and load (``rungs``: its table's).
    A row made by one call holds the numbers another takes, on the rungs through the row's cap
    (below either call's last rung), where each concurrency's tail is at or below it (so are the
    tail rungs, and a cap's tail rung), as a tail share of at most 1 makes it: else None, nothing
    kept. The last run through a row's cap ends at its cap in either call."""
    import numpy as np

    if (asynchronous, load) not in r.bounds:
        keep = bool(np.all(r.tail_fraction <= 1))
        r.bounds[(asynchronous, load)] = RowBounds(_kept_rows(2), _kept_rows(rungs)) if keep else None
    return r.bounds[(asynchronous, load)]


def fastest(
    r: Rollouts,
    nums: RlNumbers,
    gen_gpus: int,
    asynchronous: bool,
    group: int | None = None,
    load: Load = NO_LOAD,
) -> tuple[tuple[int, int, float] | None, dict[int, float]]:
    """The candidate configuration and the concurrency per replica (any whole number up to what
    its KV cache holds and the rollouts fill) that make :func:`generation` soonest on
    ``gen_gpus`` GPUs, or the sandboxes' bound where that is longer (``load``: a faster
    generation at more sequences decodes each slower and holds its sandbox longer; a code review
    found the soonest generation's stall lengthening an MI300X step 1,158.6 -> 1,287.1 s), with
    those seconds (None where no replica fits), among the candidates of
    ``group`` of ``sync_groups`` (None: all); and for each group that fits, a floor under its
    soonest seconds. Fewer sequences per replica decode each faster: a latency-bound step can
    gain more from that than it loses.

    Exact, without evaluating every concurrency: the candidates' decode steps on a ladder of
    batches (:meth:`~ipd_cli.engine.serving.RolloutCandidates.table`) bound the seconds over
    each run of concurrencies between two rungs from below (the lower rung's steps, the run's
    largest concurrency; the groups' floors) and give achievable seconds at a candidate's most
    promising rung and at its cap from above (the upper rungs' steps); only the runs whose lower
    bound reaches the best achievable seconds are evaluated, every concurrency in them exactly.
    A candidate whose floor (its first rung's step at its cap) is past the best seconds at a cap,
    and past its group's floor, is not bounded rung by rung. The premise: a decode step never
    shortens with more sequences, so each ladder row is non-decreasing (tested). Ties: fewer GPUs
    per replica, then more sequences, then the earlier candidate."""
    import numpy as np

    c = r.candidates
    ladder, steps = c.table()
    fits = c.gpus <= gen_gpus  # at least one replica (gen_gpus // gpus >= 1: gpus are whole, >= 1)
    groups = c.sync_groups()
    ok = np.flatnonzero(fits if group is None else fits & (groups == group))
    if ok.size == 0:
        return None, {}
    in_flight = nums.generated * in_flight_batches(r.staleness_bound, asynchronous)
    replicas = active_replicas(gen_gpus // c.gpus[ok], in_flight, asynchronous)[:, None]
    per_replica = wanted_per_replica(in_flight, replicas[:, 0], asynchronous)
    # at most the sandboxes the host cores hold in flight (rl-loop.md 7.6 (iii)): more sequences
    # than cores would wait for a sandbox, not decode (a review: MI300X async at staleness 4 ran
    # 2,048 trajectories on 1,024 cores). A synchronous step has min(rollouts, slots) in flight:
    # where the cores hold every rollout, its slots are not capped (a code review)
    cap = np.maximum(1, np.minimum(np.maximum(1, c.max_batch[ok]), per_replica))
    cap = np.maximum(1, np.minimum(cap, sandbox_cap(nums, load, replicas[:, 0], asynchronous)))
    rungs = int(np.searchsorted(ladder, cap.max(), "left")) + 1  # up to the first at or above every cap
    ladder, table = ladder[:rungs], steps  # the table's rows are all candidates: table[ok[i]] is row i's
    per = dict(replicas=replicas, prefill_s=c.prefill_s[ok][:, None], speculative=c.speculative[ok][:, None])

    given = per_replica[:, None]  # each row's rollouts, whose long ones the drain runs

    def tail(b, rows):  # rows ``rows``' tail concurrencies at concurrencies ``b`` (a row each, or one)
        return _tail(r, b, given[rows])

    def above(b):  # the lowest rung at or above b
        return np.searchsorted(ladder, b, "left")

    # runs [lo, hi] of concurrencies, one per rung: lo the rung, hi the next rung's less one (or the cap)
    run_end = np.append(ladder[1:] - 1, cap.max())
    top = cap[:, None]

    # A row's seconds at any concurrency are at least its seconds at its smallest step (b = 1) and
    # its cap (a longer step or fewer sequences only add): rows whose floor is past the best seconds
    # at a cap, and (for the groups' floors) past their group's floor, need no bounds over runs.
    # Rows with a step that is not finite keep them (their bounds may be NaN, as before).
    def ends_of(sel):  # rows ``sel``'s seconds at their cap and their floor (columns)
        at, t = {k: v[sel] for k, v in per.items()}, top[sel]
        cand, first_step = ok[sel][:, None], table[ok[sel], :1]
        at_top = dict(step_s=table[cand, above(t)], tail_step_s=table[cand, above(tail(t, sel))], b=t)
        least = dict(step_s=first_step, tail_step_s=first_step, b=t)
        ends = (
            _seconds(r, nums, asynchronous, at | at_top, load),
            _seconds(r, nums, asynchronous, at | least, load),
        )
        return np.concatenate(ends, axis=1)

    def bounds_of(sel):  # rows ``sel``'s lower bounds over their runs, inf on rungs past their caps
        rows_per = {k: v[sel] for k, v in per.items()}
        return _run_bounds(
            r, nums, asynchronous, load, ladder, run_end, table, ok[sel], top[sel], given[sel], rows_per
        )

    kept = _row_bounds(r, asynchronous, load, table.shape[1])
    key = ok.astype(np.int64) * ROW_KEYS + replicas[:, 0].astype(np.int64)

    def lower_of(sel):  # bounds_of, kept
        if kept is None:
            return bounds_of(sel)
        return kept.runs.get(key[sel], lambda new: bounds_of(sel[new]), rungs)

    ends = ends_of(np.arange(ok.size)) if kept is None else kept.ends.get(key, ends_of)
    at_cap, row_floor = ends[:, 0], ends[:, 1]
    wanted = ~(row_floor > float(at_cap.min()) * (1 + 1e-9)) | ~c.finite_steps()[ok]
    gk = groups[ok]
    floors: dict[int, float] = {}
    if group is None:  # each group's floor: its lowest lower bound
        # first the row of each group with the lowest row floor (its bounds set the group's floor
        # so far), then the rows that could lower it
        by_floor = np.lexsort((np.arange(ok.size), row_floor, gk))
        probe = by_floor[np.concatenate(([True], gk[by_floor][1:] != gk[by_floor][:-1]))]
        floor = np.full(int(groups.max()) + 1, np.inf)
        np.minimum.at(floor, gk[probe], lower_of(probe).min(axis=1))
        wanted |= ~(row_floor >= floor[gk])
        wanted[probe] = True
    need = np.flatnonzero(wanted)
    lower = lower_of(need)
    lowest = lower.min(axis=1)  # each row's lowest lower bound (NaN where one is)
    if group is None:
        np.minimum.at(floor, gk[need], lowest)
        found = np.flatnonzero(np.isfinite(floor))
        found = found[np.lexsort((found, floor[found]))]  # by (floor, group): alternatives' order
        floors = dict(zip(found.tolist(), floor[found].tolist(), strict=True))
    # achievable seconds at each row's most promising rung (its lowest lower bound): any achievable
    # seconds bound the soonest from above, and these few cost a column, not the whole table
    near = np.argmin(lower, axis=1)[:, None]
    cand = ok[need][:, None]
    at_rung = dict(
        step_s=table[cand, near], tail_step_s=table[cand, above(tail(ladder[near], need))], b=ladder[near]
    )
    upper = _seconds(r, nums, asynchronous, {k: v[need] for k, v in per.items()} | at_rung, load)
    bound = min(float(upper.min()), float(at_cap.min()))
    # the runs that may hold the soonest (with a margin for rounding between bound and exact), in
    # the rows whose lowest bound does not rule them out (few)
    within = bound * (1 + 1e-9)
    rows = np.flatnonzero(~(lowest > within))
    i, j = np.nonzero((ladder <= top[need[rows]]) & (lower[rows] <= within))
    k, b = _every_concurrency(need[rows[i]], j, ladder, run_end, cap)
    seconds = _seconds(r, nums, asynchronous, _at(r, ok[k], b, replicas[k, 0], per_replica[k]), load)
    pick = np.lexsort((k, -b, c.gpus[ok[k]], seconds))[0]
    return (int(ok[k[pick]]), int(b[pick]), float(seconds[pick])), floors


RUN_BOUND_BLOCKS = 4  # blocks of rows by cap that _run_bounds makes a large table in
RUN_BOUND_CELLS = 20_000  # rows x rungs under which _run_bounds makes one block (numpy's fixed cost)


def _run_bounds(
    r: Rollouts,
    nums: RlNumbers,
    asynchronous: bool,
    load: Load,
    ladder: Any,
    run_end: Any,
    table: Any,
    cand: Any,
    top: Any,
    given: Any,
    per: dict[str, Any],
) -> Any:
    """Rows' lower bounds over their runs of concurrencies (:func:`fastest`'s and
    :func:`fastest_many`'s): candidates ``cand`` (rows of ``table``) with caps ``top``, rollouts
    per replica ``given`` and ``per``'s replicas, prefill and speculation (columns of one each),
    one column per rung of ``ladder``: the lower rung's steps (its tail rung's for the drain) at the
    run's largest concurrency; inf on the rungs past a row's cap. A call's ladder runs to its
    largest cap, and about half the cells of a row-by-rung table lay past their row's cap (47 %
    in 17 split searches, 36-52 % in the RL tests): a large table is made in
    :data:`RUN_BOUND_BLOCKS` blocks of rows by cap, each on the rungs through its largest cap
    (the 17 searches' tables of 100k cells or more: 7.7M -> 4.7M cells made; CPU in here -35 %);
    the same numbers, cell by cell (:func:`_seconds` works element by element)."""
    import numpy as np

    def block(rows: Any, n: int) -> Any:  # the whole row-by-rung table of rows ``rows``, rungs [0, n)
        steps, rungs_n = table[cand[rows], :n], ladder[:n]
        at = {k: v[rows] for k, v in per.items()} | dict(
            step_s=steps,
            tail_step_s=_tail_steps(r, steps, rungs_n, given[rows]),
            b=np.minimum(run_end[:n], top[rows]),
        )
        seconds = _seconds(r, nums, asynchronous, at, _load_rows(load, rows))
        return np.where(rungs_n <= top[rows], seconds, np.inf)

    if cand.size * ladder.size < RUN_BOUND_CELLS:
        return block(slice(None), ladder.size)
    rungs = np.searchsorted(ladder, top[:, 0], "left") + 1  # the rungs through each row's cap
    lower = np.full((cand.size, ladder.size), np.inf)
    for rows in np.array_split(np.argsort(rungs, kind="stable"), RUN_BOUND_BLOCKS):
        if rows.size:
            n = int(rungs[rows].max())
            lower[rows, :n] = block(rows, n)
    return lower


def _tail_steps(r: Rollouts, steps: Any, rungs: Any, given: Any) -> Any:
    """Each cell's step at the rung at or below its tail concurrency (:func:`_tail` of the rung,
    ``given`` a row's rollouts per replica): rows ``steps`` on the distinct sorted ``rungs``
    (the first 1). Rung j's tail is the rung itself where the row's tail share x = given x
    tail_fraction reaches it, else max(1, x), at or below it: its rung is min(j, k), k the rung at
    or below max(1, x), one search a row, not a cell (the same index, so the same step)."""
    import numpy as np

    share = given * r.tail_fraction
    if np.ndim(r.tail_fraction) or not np.isfinite(share).all():  # each cell searched
        below = np.searchsorted(rungs, _tail(r, rungs[None, :], given), "right") - 1
        return np.take_along_axis(steps, below, axis=1)
    k = np.searchsorted(rungs, np.maximum(1.0, share[:, 0]), "right") - 1
    return np.where(np.arange(rungs.size) <= k[:, None], steps, steps[np.arange(k.size), k][:, None])


def _every_concurrency(i: Any, j: Any, ladder: Any, run_end: Any, cap: Any) -> tuple[Any, Any]:
    """Rows ``i`` repeated once for each concurrency of the run that starts at rung ``j`` (to the
    next rung's less one, or the row's cap), and those concurrencies: the exact evaluations of
    :func:`fastest` and :func:`fastest_many`."""
    import numpy as np

    lo = ladder[j]
    count = (np.minimum(run_end[j], cap[i]) - lo + 1).astype(int)
    first = np.repeat(np.cumsum(count) - count, count)
    return np.repeat(i, count), np.repeat(lo, count) + (np.arange(count.sum()) - first)


AHEAD_POOLS = 64  # pools :func:`fastest_many` takes at once (its arrays grow with them)


def rollout_floors(
    r: Rollouts, nums: RlNumbers, sizes: list[int], asynchronous: bool, load: Load = NO_LOAD
) -> Any:
    """A floor under :meth:`Rollouts.soonest` on each of ``sizes`` generation GPUs, in one pass of
    one column: the least, over the candidates that fit, of a candidate's seconds at its smallest
    decode step (the ladder's first rung, for the bulk and the tail) and at its cap (the most
    sequences a replica takes), the row floor :func:`fastest` starts from (its seconds grow with
    either step and shrink with the concurrency, and each operation rounds monotonically, so no
    concurrency's seconds are lower); 0 from a candidate with a step that is not finite (no floor),
    inf where none fits. A few percent under the soonest (2-8 % at the median of a pool search's
    sizes on four systems) at a sixth of its cost."""
    import numpy as np

    c = r.candidates
    _, table = c.table()
    pools = np.asarray(sizes, np.int64)
    seg, ok = np.nonzero(c.gpus[None, :] <= pools[:, None])
    in_flight = nums.generated * in_flight_batches(r.staleness_bound, asynchronous)
    replicas = active_replicas(pools[seg] // c.gpus[ok], in_flight, asynchronous)
    per_replica = wanted_per_replica(in_flight, replicas, asynchronous)
    cap = np.maximum(1, np.minimum(np.maximum(1, c.max_batch[ok]), per_replica))  # as fastest's
    cap = np.maximum(1, np.minimum(cap, sandbox_cap(nums, load, replicas, asynchronous)))
    first = table[ok, 0]
    at = dict(replicas=replicas, prefill_s=c.prefill_s[ok], speculative=c.speculative[ok],
              step_s=first, tail_step_s=first.copy(), b=cap)  # fmt: skip
    seconds = _seconds(r, nums, asynchronous, at, load)
    seconds = np.where(c.finite_steps()[ok] & ~np.isnan(seconds), seconds, 0.0)
    floors = np.full(pools.size, np.inf)
    np.minimum.at(floors, seg, seconds)
    return floors


def fastest_many(
    r: Rollouts,
    nums: RlNumbers,
    sizes: list[int],
    asynchronous: bool,
    load: Load | list[Load] = NO_LOAD,
    among: list[int] | None = None,
) -> list[tuple[tuple[int, int, float], dict[int, float]]] | None:
    """:func:`fastest` among all groups (or among group ``among[i]`` of ``sync_groups`` on the
    i-th pool, with no floors) on each of ``sizes`` generation GPUs, in one pass over the
    pools (a split search knows its sizes up front; one call per pool was mostly numpy's fixed
    cost per call): the same numbers, as each step is :func:`fastest`'s, element by element, on
    the pools' rows side by side, and each reduction (a pool's least seconds at a cap, its groups'
    floors, its bound, its pick) is taken over the pool's own rows. Rows are computed once per
    (candidate, replica count) the pools share. The ladder runs to the rung the largest cap of
    any pool needs: rungs past a pool's own are past each of its rows' caps, inf in its bounds,
    and the run through a row's cap ends at its cap either way. None where :func:`fastest` keeps
    no rows (:func:`_row_bounds`), or a pool holds no replica or has no run to evaluate: the caller
    asks pool by pool.

    ``load``: the sandboxes' (:func:`sandbox_load`), one for every pool or one each (the pools of a
    grown split each have their own, beside one trainer); rows are then computed once per load,
    candidate and replica count, all at once, and kept by load as :func:`fastest` keeps them
    (:func:`_kept_each`). None where the loads mix a sandbox share with none (one workload's loads
    all have one, or none)."""
    import numpy as np

    c = r.candidates
    ladder, table = c.table()
    loads = list(dict.fromkeys(load)) if isinstance(load, list) else [load]
    kept_by = _kept_by_load(r, asynchronous, loads, table.shape[1])
    if kept_by is None or not sizes:
        return None
    groups = c.sync_groups()
    pools = np.asarray(sizes, np.int64)
    fits = c.gpus[None, :] <= pools[:, None]
    if among is not None:
        fits &= groups[None, :] == np.asarray(among)[:, None]
    seg, ok = np.nonzero(fits)  # each pool's fitting candidates, in order
    counts = np.bincount(seg, minlength=pools.size)
    if not counts.all():
        return None
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    in_flight = nums.generated * in_flight_batches(r.staleness_bound, asynchronous)
    replicas = active_replicas(pools[seg] // c.gpus[ok], in_flight, asynchronous)
    per_replica = wanted_per_replica(in_flight, replicas, asynchronous)
    which, rows_load = _rows_loads(load, loads, seg)
    cap = np.maximum(1, np.minimum(np.maximum(1, c.max_batch[ok]), per_replica))
    cap = np.maximum(1, np.minimum(cap, sandbox_cap(nums, rows_load, replicas, asynchronous)))
    rungs = int(np.searchsorted(ladder, cap.max(), "left")) + 1
    ladder = ladder[:rungs]
    run_end = np.append(ladder[1:] - 1, cap.max())

    # the rows the pools share, once: u, a row of each (load, candidate, replica count)
    key = ok.astype(np.int64) * ROW_KEYS + replicas.astype(np.int64)
    ukey, inv = distinct(key + which * (int(key.max()) + 1), inverse=True)  # which: 0 with one load
    u = np.empty(ukey.size, np.intp)
    u[inv] = np.arange(key.size)  # a row of each key (their numbers are the same)
    per = dict(replicas=replicas[u][:, None], prefill_s=c.prefill_s[ok[u]][:, None],
               speculative=c.speculative[ok[u]][:, None])  # fmt: skip
    top = cap[u][:, None]
    given = per_replica[u][:, None]  # as fastest's, a distinct row each
    u_load = _load_rows(rows_load, (u, None))  # columns, a distinct row each (or the one load)

    def ends_of(sel):  # as fastest's, on distinct rows ``sel``
        at, t = {k: v[sel] for k, v in per.items()}, top[sel]
        cand, first_step = ok[u[sel]][:, None], table[ok[u[sel]], :1]
        above_t = np.searchsorted(ladder, t, "left")
        above_tail = np.searchsorted(ladder, _tail(r, t, given[sel]), "left")
        at_top = dict(step_s=table[cand, above_t], tail_step_s=table[cand, above_tail], b=t)
        least = dict(step_s=first_step, tail_step_s=first_step, b=t)
        sel_load = _load_rows(u_load, sel)
        ends = (
            _seconds(r, nums, asynchronous, at | at_top, sel_load),
            _seconds(r, nums, asynchronous, at | least, sel_load),
        )
        return np.concatenate(ends, axis=1)

    def bounds_of(sel):  # as fastest's, on distinct rows ``sel``
        rows_per, sel_load = {k: v[sel] for k, v in per.items()}, _load_rows(u_load, sel)
        cand = ok[u[sel]]
        return _run_bounds(
            r, nums, asynchronous, sel_load, ladder, run_end, table, cand, top[sel], given[sel], rows_per
        )

    u_key, u_which = key[u], which[u]  # a distinct row's key among its load's kept rows, and its load

    def kept_rows(part: str, sel: Any, make: Callable[[Any], Any], columns: int | None = None) -> Any:
        if len(loads) == 1:  # distinct rows ``sel``'s, their first ``columns``
            return getattr(kept_by[0], part).get(u_key[sel], make, columns)
        stores = [getattr(kept, part) for kept in kept_by]
        return _kept_each(stores, u_which[sel], u_key[sel], make, columns)

    def lower_of(rows):  # bounds of rows ``rows`` (of the pools'), each distinct row once, and where
        d, back = distinct(inv[rows], inverse=True)
        return kept_rows("runs", d, lambda new: bounds_of(d[new]), rungs), d, back

    ends = kept_rows("ends", np.arange(ukey.size), ends_of)[inv]
    at_cap, row_floor = ends[:, 0], ends[:, 1]
    least_at_cap = np.minimum.reduceat(at_cap, starts)
    wanted = ~(row_floor > least_at_cap[seg] * (1 + 1e-9)) | ~c.finite_steps()[ok]
    gk = groups[ok]
    floor = np.full((pools.size, int(groups.max()) + 1), np.inf)
    if among is None:  # each group's floor, as fastest's
        # fastest's order by group, row floor and row, within each pool: two stable sorts, not
        # lexsort's four (the pool and group as one key)
        pool_group = seg * floor.shape[1] + gk
        by_floor = np.argsort(row_floor, kind="stable")
        by_floor = by_floor[np.argsort(pool_group[by_floor], kind="stable")]
        new_group = np.ones(ok.size, bool)
        new_group[1:] = pool_group[by_floor][1:] != pool_group[by_floor][:-1]
        probe = by_floor[new_group]
        rows_of, _, back = lower_of(probe)
        np.minimum.at(floor, (seg[probe], gk[probe]), rows_of.min(axis=1)[back])
        wanted |= ~(row_floor >= floor[seg, gk])
        wanted[probe] = True
    need = np.flatnonzero(wanted)
    if not np.bincount(seg[need], minlength=pools.size).all():
        return None
    lower, d, back = lower_of(need)
    lowest = lower.min(axis=1)[back]
    if among is None:
        np.minimum.at(floor, (seg[need], gk[need]), lowest)
    near = np.argmin(lower, axis=1)[:, None]  # of the distinct rows
    cand = ok[u[d]][:, None]
    tail_rung = np.searchsorted(ladder, _tail(r, ladder[near], given[d]), "left")
    at_rung = dict(step_s=table[cand, near], tail_step_s=table[cand, tail_rung], b=ladder[near])
    d_at, d_load = {k: v[d] for k, v in per.items()} | at_rung, _load_rows(u_load, d)
    upper = _seconds(r, nums, asynchronous, d_at, d_load)[back, 0]
    least_upper = np.minimum.reduceat(upper, np.searchsorted(need, starts))
    bound = np.where(least_at_cap < least_upper, least_at_cap, least_upper)  # min(upper, at cap)
    within = bound * (1 + 1e-9)
    rows = np.flatnonzero(~(lowest > within[seg[need]]))
    i, j = np.nonzero(
        (ladder <= cap[need[rows]][:, None]) & (lower[back[rows]] <= within[seg[need[rows]]][:, None])
    )
    k, b = _every_concurrency(need[rows[i]], j, ladder, run_end, cap)
    exact = _at(r, ok[k], b, replicas[k], per_replica[k])
    seconds = _seconds(r, nums, asynchronous, exact, _load_rows(rows_load, k))
    pick = _pick_each(seconds, seg[k], k, b, c.gpus[ok[k]])
    if pick.size != pools.size:
        return None
    at, grp = np.nonzero(np.isfinite(floor))
    by = np.lexsort((grp, floor[at, grp], at))  # by pool, then (floor, group): fastest's dict order
    at, grp = at[by], grp[by]
    cut = np.searchsorted(at, np.arange(pools.size + 1)).tolist()
    grp_of, floor_of = grp.tolist(), floor[at, grp].tolist()
    floors = [dict(zip(grp_of[i:j], floor_of[i:j], strict=True)) for i, j in zip(cut, cut[1:], strict=False)]
    found = zip(ok[k[pick]].tolist(), b[pick].tolist(), seconds[pick].tolist(), strict=True)
    return [((int(kk), int(bb), float(t)), f) for (kk, bb, t), f in zip(found, floors, strict=True)]


def _kept_by_load(r: Rollouts, asynchronous: bool, loads: list[Load], rungs: int) -> list[RowBounds] | None:
    """:func:`_row_bounds` of each of ``loads`` (distinct); None where they keep none, where the
    loads mix a sandbox share with none (:func:`_seconds`' share term, taken per row: one
    workload's loads all have one, or none), or where a row's key with its load's index past it
    (candidate x :data:`ROW_KEYS` + replicas, x the loads) would not fit an int64."""
    kept = [_row_bounds(r, asynchronous, one, rungs) for one in loads]
    if len(loads) > 1 and not all(one[0] > 0 for one in loads):
        return None
    if r.candidates.gpus.size * ROW_KEYS * len(loads) >= 2**62:  # a row's key, its load's beside it
        return None
    return None if any(k is None for k in kept) else [k for k in kept if k is not None]


def _rows_loads(load: Load | list[Load], loads: list[Load], seg: Any) -> tuple[Any, Any]:
    """Each row's load (rows of pools ``seg``) as an index into ``loads`` (the distinct ones of
    ``load``, each pool's), and the loads themselves: per-row arrays of the three terms where the
    pools have more than one, else the one :data:`Load`."""
    import numpy as np

    if len(loads) == 1:
        return np.zeros(seg.size, np.int64), loads[0]
    assert isinstance(load, list)
    which = np.array([loads.index(one) for one in load], np.int64)[seg]
    return which, tuple(np.array(term)[which] for term in zip(*loads, strict=True))


def _kept_each(
    stores: list[KeptRows], which: Any, key: Any, make: Callable[[Any], Any], columns: int | None = None
) -> Any:
    """:meth:`KeptRows.get` of rows kept apart (by load: :func:`fastest_many`): row i is ``key[i]``
    of ``stores[which[i]]`` (distinct within each store); ``make(i)`` gives the rows of every
    store that has none in one call (many loads' rows at once, not a call a load)."""
    import numpy as np

    parts = []  # (a store, its rows, where each is kept)
    new = []  # the rows each store has none for
    for j in distinct(which).tolist():
        rows = np.flatnonzero(which == j)
        store = stores[j]
        at, missing = store._find(key[rows])
        fresh = np.flatnonzero(missing)
        at[fresh] = np.arange(store.size, store.size + fresh.size)  # where _add puts them
        parts.append((store, rows, at))
        new.append(rows[fresh])
    if any(rows.size for rows in new):
        values = make(np.concatenate(new))
        cut = np.cumsum([0, *(rows.size for rows in new)]).tolist()
        for (store, _, _), rows, i, e in zip(parts, new, cut, cut[1:], strict=False):
            if rows.size:
                store._add(key[rows], values[i:e])
    out = np.empty((key.size, stores[0].rows[:0, :columns].shape[1]))  # (the columns asked for)
    for store, rows, at in parts:
        out[rows] = store.rows[at, :columns]
    return out


def _pick_each(seconds: Any, pool: Any, k: Any, b: Any, gpus: Any) -> Any:
    """Of each pool's concurrencies (``pool`` non-decreasing), the first by (seconds, ``gpus``,
    -``b``, ``k``), as a lexsort of the five keys picks it, NaN seconds last: lexsorted among the
    least seconds of each pool alone (a few of the thousands: its ties), the same pick. Where a
    pool's seconds are all NaN, all lexsorted."""
    import numpy as np

    if not seconds.size:
        return np.empty(0, np.intp)
    starts = np.flatnonzero(np.concatenate(([True], pool[1:] != pool[:-1])))
    least = np.fmin.reduceat(seconds, starts)
    if np.isnan(least).any():
        tie = np.arange(seconds.size)
    else:
        tie = np.flatnonzero(seconds == np.repeat(least, np.diff(np.append(starts, seconds.size))))
    order = tie[np.lexsort((k[tie], -b[tie], gpus[tie], seconds[tie], pool[tie]))]
    return order[np.concatenate(([True], pool[order][1:] != pool[order][:-1]))]


def fewest_in_flight(r: Rollouts, nums: RlNumbers, gen_gpus: int, load: Load, limit_s: float) -> int:
    """Async: the fewest sequences per replica of ``r``'s configuration (at most its concurrency)
    whose rollouts (generation, or the sandboxes' bound) take at most ``limit_s``: where the
    trainer sets the step, more trajectories in flight only make rollouts staler (a review: H100 at
    staleness bounds 3 to 16 ran the same 259.8 s step with 3 to 16 steps of mean staleness)."""
    import numpy as np

    top = int(r.concurrency or 1)
    in_flight = nums.generated * in_flight_batches(r.staleness_bound, True)
    replicas = active_replicas(gen_gpus // r.gpus, in_flight, True)
    b = np.arange(1, top + 1, dtype=float)
    wanted = wanted_per_replica(in_flight, replicas, True)
    at = _at(r, np.full(b.size, r.choice), b, replicas, np.full(b.size, wanted))
    ok = np.flatnonzero(_seconds(r, nums, True, at, load) <= limit_s)
    return int(b[ok[0]]) if ok.size else top


def _tail(r: Rollouts, b: Any, wanted: Any) -> Any:
    """The tail concurrency of concurrency ``b`` (numbers or arrays): the drain's mean, the long
    responses among the ``wanted`` rollouts a replica is given (their tail share), as many as its
    ``b`` slots hold, at least one sequence. Continuous batching refills a slot when a
    response ends, so the long ones of every wave end together: a share of the rollouts, not of
    the slots (b / 8 let fewer slots drain faster, and Rubin's 10T step took 24 a replica in two
    waves of its 37 rollouts: an RL review). Not rounded, so that the step does not rise and fall
    with ``b`` (rounding down made each multiple of 1 / share a step up, which the concurrency
    search rode: 31 sequences where 32 were one wave, an RL review)."""
    import numpy as np

    return np.maximum(1.0, np.minimum(b, wanted * r.tail_fraction))


def _at(r: Rollouts, cand: Any, b: Any, replicas: Any, wanted: Any) -> dict[str, Any]:
    """:func:`_seconds`' inputs for candidates ``cand`` (indices) at concurrencies ``b``, exactly:
    the decode steps at ``b`` and at its tail concurrency (``wanted``: the rollouts each replica
    is given, :func:`wanted_per_replica`). A tail is its concurrency itself (the same step) or,
    past a row's tail share, that share: the same for each of a row's concurrencies beyond it, so
    each run of equal (candidate, tail) pairs is asked once (the exact evaluations of a split
    search ask for a row's runs of consecutive concurrencies: about half the keys as asking for
    every tail; the same keys, so the same values kept and read)."""
    import numpy as np

    c = r.candidates
    tail = _tail(r, b, wanted)
    own = np.flatnonzero(tail != b)  # the tails that are not their concurrency
    new = np.ones(own.size, bool)
    new[1:] = (cand[own][1:] != cand[own][:-1]) | (tail[own][1:] != tail[own][:-1])
    first = own[new]
    both = c.step_at(np.concatenate([b, tail[first]]), np.concatenate([cand, cand[first]]))
    step = both[: b.size]
    tail_step = step.copy()
    tail_step[own] = both[b.size :][np.cumsum(new) - 1]
    return dict(replicas=replicas, prefill_s=c.prefill_s[cand], speculative=c.speculative[cand], b=b,
                step_s=step, tail_step_s=tail_step)  # fmt: skip


@dataclass(frozen=True)
class Generation:
    seconds: float
    replicas: int
    concurrency: int
    tail_concurrency: float
    decode_tokens_per_s_per_user: float
    live_sequences: float
    latency_bound: bool
    mean_staleness_steps: float | None
    # the longest trajectory's own time: its response (synchronous: the mean-length part at the
    # bulk's speed, the rest at the tail's; async: all at the bulk's) and its tool waits; async,
    # also its sandbox's start and verification (it is in flight until the trainer can take it)
    critical_s: float
    # the terms of ``seconds`` (explain): the slots' decode and tool waits, the prefills, the drain
    # of the longest response (synchronous), the longest trajectory with its wait for a slot
    rollouts: float
    decode_and_tools_s: float
    prefill_s: float
    drain_s: float
    longest_trajectory_s: float
    tail_decode_tokens_per_s_per_user: float
    queued_start_s: float = 0.0  # synchronous: the longest trajectory's wait for a slot
    staleness_window_s: float = 0.0  # async: the least step the bound allows (window_seconds)
    prompt_prefill_s: float = 0.0  # one prompt's prefill on a replica (prefill_s's per-prompt term)


def in_flight_batches(staleness_bound: int, asynchronous: bool) -> int:
    """Batches of rollouts in generation at once. Async with a staleness bound of eta keeps at most
    eta + 1 batches outstanding, the one the trainer is on included (AReaL's rule: rollouts
    submitted <= (version + eta + 1) x batch), so at most eta generate while it trains and their
    mean staleness is at most eta (Little's law, rl-loop.md 7.6(i)); synchronous modes generate one."""
    return staleness_bound if asynchronous else 1


def active_replicas(replicas: Any, in_flight: float, asynchronous: bool) -> Any:
    """Replicas that generate: all of them, but in async no more than the rollouts the staleness
    bound lets be in flight (one sequence each; the rest idle, paid), else the bound would be
    exceeded. Numbers or arrays."""
    import numpy as np

    return np.minimum(replicas, max(1.0, math.floor(in_flight))) if asynchronous else replicas


def wanted_per_replica(in_flight: float, replicas: Any, asynchronous: bool) -> Any:
    """Sequences each replica is given: synchronous, one wave holds every rollout (rounded up);
    async, never more in flight than the bound allows (rounded down). Numbers or arrays."""
    import numpy as np

    return (np.floor if asynchronous else np.ceil)(in_flight / replicas)


def generation(
    r: Rollouts, nums: RlNumbers, gen_gpus: int, asynchronous: bool, where: str, load: Load = NO_LOAD
) -> Generation:
    """Bulk decode by Little's law on ``gen_gpus // instance`` replicas; synchronous modes also
    drain the longest response at the tail concurrency, or wait for the longest trajectory."""
    replicas = gen_gpus // r.gpus
    if replicas < 1:
        raise InfeasibleError(
            f"{where} needs {r.gpus}-GPU inference instances; {gen_gpus} generation GPUs hold none"
        )
    # synchronous: one wave of the step's rollouts; async: in flight up to the staleness bound
    in_flight = nums.generated * in_flight_batches(r.staleness_bound, asynchronous)
    replicas = int(active_replicas(replicas, in_flight, asynchronous))
    wanted = int(wanted_per_replica(in_flight, replicas, asynchronous))
    b = max(1, min(r.max_batch, wanted, r.concurrency or wanted))
    b_tail = float(_tail(r, b, wanted))
    v_bulk = r.inst.decode_speed(b)
    v_tail = r.inst.decode_speed(b_tail)  # (kept by the deployment, as v_bulk)
    prefill = nums.generated * r.inst.prefill_s / replicas  # prefills share the instance with decode
    # Little's law: each of the b slots holds one trajectory for its decode time plus tool waits
    slot_s = nums.mean_response_tokens / v_bulk + nums.turns * nums.tool_s
    slots = nums.generated * slot_s / (replicas * b)
    bulk = slots + prefill
    # the longest response's tokens beyond the mean, at the tail's speed (synchronous: async
    # engines stay full and drain nothing)
    drain = 0.0 if asynchronous else (nums.max_response_tokens - nums.mean_response_tokens) / v_tail
    # the longest trajectory: synchronous, its first mean-length tokens at the bulk's speed (the
    # engine is full around it) and the rest as the drain; async, all of it at the bulk's speed
    if asynchronous:
        own = nums.max_response_tokens / v_bulk + nums.max_turns * nums.tool_s
    else:
        own = nums.mean_response_tokens / v_bulk + drain + nums.max_turns * nums.tool_s
    # when it ends: synchronous schedules may start it late, waiting for a slot (an under-filled
    # wave was free to the search)
    wait = 0.0 if asynchronous else float(queued_start_s(nums.generated, replicas * b, slot_s))
    crit = own + wait
    live: float  # trajectories in flight: on the GPUs, then (async) in their sandboxes' verification
    staleness, window = None, 0.0
    if asynchronous:
        window = float(window_seconds(r, nums, slot_s, prefill, load)) if r.after_s > 0 else 0.0
        if not r.partial:  # every trajectory within the bound, the longest included
            window = max(window, whole_trajectory_seconds(r, own, prefill))
        step_s = max(bulk, window)  # the step before the waste
        # Little's law: the slots hold N slot_s / (T - P), every slot where the bulk sets T
        on_gpus = replicas * b if bulk >= window else nums.generated * slot_s / (step_s - prefill)
        live = on_gpus + nums.generated * r.after_s / step_s
        seconds, latency_bound, staleness = step_s * (1 + r.async_waste), False, live / nums.generated
        # the longest trajectory's time in flight: its slot through the prefills, then the sandbox
        own = own * step_s / (step_s - prefill) if step_s > prefill else own
    else:
        drained = bulk + drain
        seconds, latency_bound, live = max(drained, crit), crit > drained, min(nums.generated, replicas * b)
    return Generation(
        seconds=seconds,
        replicas=replicas,
        concurrency=b,
        tail_concurrency=b_tail,
        decode_tokens_per_s_per_user=v_bulk,
        live_sequences=live,
        latency_bound=latency_bound,
        mean_staleness_steps=staleness,
        critical_s=own + (r.after_s if asynchronous else 0.0),  # async: until the trainer can take it
        rollouts=nums.generated,
        decode_and_tools_s=slots,
        prefill_s=prefill,
        drain_s=drain,
        longest_trajectory_s=crit,
        tail_decode_tokens_per_s_per_user=v_tail,
        queued_start_s=wait,
        staleness_window_s=window if asynchronous else 0.0,
        prompt_prefill_s=float(r.inst.prefill_s),
    )


@dataclass(frozen=True)
class HostCpus:
    cores_per_gpu: float
    core_speed: float  # relative to a Grace core


def host_cpus(inp: Inputs, system_name: str) -> HostCpus:
    cat = inp.cat
    system = cat.systems[system_name]
    cpu = cat.cpus[system.host_cpu]
    cores = system.host_cpus * cpu.cores / system.accelerators
    note = f"{system.host_cpus} x {cpu.cores}-core {system.host_cpu} per {system.accelerators} GPUs"
    # the core count's source (an explain review: it read "source -")
    inp.given(
        "host cores per GPU", cores, "cores", cat.origin("systems", system_name), note=note, source=cpu.source
    )
    speed = 1.0
    if cpu.relative_core_throughput is not None:
        speed = inp.read(f"cpus.{system.host_cpu}.relative_core_throughput", "host core speed (Grace = 1)")
    return HostCpus(cores, speed)


@dataclass(frozen=True)
class Environment:
    exposed_s: float  # sandbox start, verification and CPU stalls not hidden by generation
    cores_needed: float
    cores_available: float
    stall_s: float  # the part of exposed_s generation waits for sandbox cores

    @property
    def env_bound(self) -> bool:
        return self.stall_s > 0


def exposed_floor(nums: RlNumbers, host: HostCpus, asynchronous: bool) -> float:
    """The environment time a step exposes whatever generates: synchronous steps wait for the
    sandbox start and the verification after the last rollout; async hides them."""
    return 0.0 if asynchronous else nums.boot_s + nums.verify_s / host.core_speed


def environment(
    nums: RlNumbers, host: HostCpus, gen: Generation, total_gpus: int, asynchronous: bool
) -> Environment:
    """Sandboxes hold cores for a whole trajectory; too few cores stretch generation."""
    share, fixed, _ = sandbox_load(nums, host, total_gpus)
    env_bound_s = share * (nums.mean_response_tokens / gen.decode_tokens_per_s_per_user + fixed)
    stall = max(0.0, env_bound_s - gen.seconds)
    return Environment(
        exposed_s=stall + exposed_floor(nums, host, asynchronous),
        cores_needed=nums.sandbox_cores * gen.live_sequences,
        cores_available=host.cores_per_gpu * total_gpus,
        stall_s=stall,
    )
