"""The trainer: log-prob passes and training on the fastest parallelism plan the trainer's GPUs can
run, and whether any plan can hold the training state at all.

The pre-training plan search (:mod:`ipd_cli.engine.trainplan`) with the step's shape: sequences of
the workload's mean trajectory length E[L] (prompt, tool output and response, packed), the global
batch pinned to the step's N kept samples (one optimizer step per epoch), at the training
precision. Its memory model decides what fits (weights, gradients, optimizer state by sharding
stage, activations by recompute policy, offloaded activations against host memory); its step time
is the training pass, and its forward with the pipeline fill and drain (no backward, no gradient
traffic) is one log-prob pass; plans are ranked by both (``logprob_passes`` forward passes per
``ppo_epochs`` training passes). MFU is an output. One search serves every trainer size up to the
request's largest (:func:`~ipd_cli.engine.trainplan.search_sizes`: the best plan on at most T
GPUs for every T), memoised in the process, so the split search looks sizes up.

Colocated, the training state leaves HBM while rollouts run: it waits in host memory, which must
hold it (``rl.offload_bytes_per_param`` per parameter, spread over the GPUs).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ipd_cli.catalog.schema import Model, RlWorkload
from ipd_cli.engine import formulas as f
from ipd_cli.engine import trainplan as tpn
from ipd_cli.engine.inputs import Inputs
from ipd_cli.engine.pretraining import MAX_GPUS, supported_precision
from ipd_cli.engine.search import array_bytes
from ipd_cli.errors import InfeasibleError, InputError, counted

from .workload import RlNumbers

# the plan tables the process keeps, by the bytes of their arrays (the least recently used go
# first): a test session asks for about 150 distinct tables, some again after dozens of others. A
# search holds 0.1 to 30 MB (600 MB for those 150, so one in five was searched again); the table
# kept holds only the plans its lookups can give (:meth:`~ipd_cli.engine.trainplan.BySize.compact`,
# a few kB), so all of them stay
CACHE_BYTES = 256 * 2**20


@dataclass(frozen=True)
class TrainerRates:
    """What the trainer's time depends on, except its size: the plan-search inputs of the step."""

    y: dict[str, Any]  # the plan search's inputs (derived), seq = E[L]
    pins: dict[str, int]  # the global batch: the step's sequences
    sequences: int
    share: float  # of the plan search's speed an RL trainer reaches
    fixed_s: float
    cap: int  # the largest trainer the request can have (one search serves every size up to it)
    precision: str = "bf16"  # the training precision the accelerator runs (the workload's, or wider)
    # every input of ``y`` as text, computed once (``y`` is not changed after it is derived): the
    # key of the process's plan tables (:func:`plans_by_size`)
    key: tuple = field(default=(), compare=False, repr=False)
    # one log-prob pass of each plan already asked for (a pure function of the plan and ``y``): a
    # split search's trainer sizes share a few plans (233 sizes, 11 plans on MI355X)
    forward_s: dict[tuple, float] = field(default_factory=dict, compare=False, repr=False)
    # :func:`trainer`'s numbers of each plan row of a size table (by the table's id and the row,
    # the table held beside them so that its id stays its own): a split search asks for trainer
    # after trainer size that runs the same few rows (8.3k asks in tests/test_rl*.py; ~30 -> ~15 us
    # an ask on GB200's and MI355X's sizes)
    rows: dict[tuple[int, int], tuple[Any, _RowNumbers]] = field(
        default_factory=dict, compare=False, repr=False
    )


@contextmanager
def _in_training_plan(w: RlWorkload) -> Iterator[None]:
    """An input error of the workload's training_plan, named as its field and value."""
    try:
        yield
    except InputError as e:
        raise InputError(f"`training_plan` {w.training_plan!r}: {e}") from None


def trainer_rates(
    inp: Inputs,
    system: str,
    accelerator: str,
    arch: Model,
    model: str,
    w: RlWorkload,
    nums: RlNumbers,
    cap: int,
) -> TrainerRates:
    """The plan-search inputs of the step: the model, the system's accelerator at the training
    precision, the training efficiencies, sequences of E[L] tokens, N of them per optimizer step."""
    cat = inp.cat
    precision = supported_precision(cat.accelerators[accelerator], w.training_precision)
    sequences = max(1, round(nums.samples))
    with _in_training_plan(w):
        published = tpn.parse_plan(w.training_plan)
        gpu = (accelerator, cat.accelerators[accelerator])
        tpn.check_recipe_pin(published, precision, w.training_precision, gpu, "training_precision")
    x = {
        **tpn.model_inputs(inp, cat, model),
        **tpn.hardware_inputs(inp, cat, system, precision, published),
        **tpn.step_inputs(inp, precision),
        "seq": float(max(1, round(nums.mean_length))),
        "tokens": sequences * nums.mean_length,
        # the plan is ranked by the trainer's whole time: its log-prob passes (forward only) run on
        # it too, so a plan whose training pass is a little faster but whose forward is slower loses
        "forward_weight": w.logprob_passes / w.ppo_epochs,
    }
    # RL trainers (NeMo RL and verl on Megatron-Core or FSDP) run 1F1B pipelines, not DualPipe;
    # a published plan (the workload's training_plan) pins its degrees, the global batch stays the
    # step's sequences
    with _in_training_plan(w):
        tpn.check_moe_pins(published, bool(x["is_moe"]), model)
        tpn.check_recompute_pins(published, x, model)
    pins = {"sched": 0, **published, "gbs": sequences}
    y = tpn.derive({**x, "pins": pins})
    return TrainerRates(
        y=y,
        pins=pins,
        sequences=sequences,
        share=inp.read(
            f"rl.trainer_efficiency.{'moe' if arch.is_moe else 'dense'}",
            "RL trainer share of the plan's speed",
        ),
        fixed_s=inp.read("rl.step_fixed_s", "RL trainer fixed time per step"),
        cap=max(1, int(cap)),
        precision=precision,
        key=_key(y),
    )


_SIZES: dict[tuple, tpn.BySize] = {}  # least recently used first
_BYTES: dict[tuple, int] = {}


def _key(y: dict) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in y.items() if not k.startswith("_")))


def plans_by_size(r: TrainerRates, cap: int | None = None) -> tpn.BySize:
    """The fastest plan on every trainer size up to ``cap`` (default: the request's largest),
    memoised in the process by every input; a table kept for a larger cap of the same inputs
    answers a smaller one (:func:`_within`) without a search of its own."""
    cap = max(cap or 0, r.cap)
    inputs = (r.key or _key(r.y), tuple(sorted(r.pins.items())))
    key = (*inputs, cap)
    found = _SIZES.pop(key, None)
    if found is None:
        wider = min((k[-1] for k in _SIZES if k[:-1] == inputs and k[-1] > cap), default=None)
        if wider is not None:
            found = _within(_SIZES[(*inputs, wider)], cap)
        else:
            import numpy as np

            with np.errstate(all="ignore"):
                found = tpn.search_sizes(r.y, cap, r.pins).compact()
        _BYTES[key] = array_bytes(found)
        while _SIZES and sum(_BYTES.values()) > CACHE_BYTES:
            _BYTES.pop(oldest := next(iter(_SIZES)), None)
            del _SIZES[oldest]
    _SIZES[key] = found  # the most recently used last
    return found


def _within(table: tpn.BySize, cap: int) -> tpn.BySize:
    """``table`` (a search up to a larger cap) cut to the plans that use at most ``cap`` GPUs: the
    search up to ``cap``'s answers (:meth:`~ipd_cli.engine.trainplan.BySize.best` of every size up
    to it, the same plan and numbers; :attr:`~ipd_cli.engine.trainplan.BySize.min_gpus` None where
    no plan fits in ``cap``). The search's best plan on T GPUs is the fastest of those using at most
    T, found exactly whatever the cap beyond T (branch and bound drops only rows that cannot beat
    it); checked in tests/test_rl.py."""
    import numpy as np

    k = int(np.searchsorted(table.used, cap, side="right"))
    return tpn.BySize(table.s, table.used[:k], table.rows[:k])


def min_trainer_gpus(r: TrainerRates) -> tuple[int | None, str]:
    """The smallest trainer with a plan that holds the training state, and that plan (None: none up
    to the sanity bound): the request's own search, else searches on clusters four times larger."""
    need = tpn.smallest_by_size(r.y, r.pins, r.cap, MAX_GPUS, lambda n: plans_by_size(r, n))
    if need is None:
        return None, ""
    table = plans_by_size(r, need)
    row = table.best(need)
    return need, "" if row is None else tpn.plan_name(tpn.plan_of(table.s, row))


def trainer_sizes(r: TrainerRates, lo: int, hi: int) -> list[int]:
    """The trainer sizes from ``lo`` (the fewest GPUs that hold the training state) to ``hi`` at
    which the plan search's fastest plan changes: its units. A size between two of them runs the
    smaller one's plan and leaves the rest idle, so a pool search need try no other."""
    import numpy as np

    if hi < lo:
        return []
    table = plans_by_size(r, hi)
    used, rows = np.asarray(table.used), np.asarray(table.rows)
    starts = used[np.flatnonzero(np.append(True, rows[1:] != rows[:-1]))]
    return sorted({lo, *(int(u) for u in starts if lo < u <= hi)})


@dataclass(frozen=True)
class Trainer:
    logprob_s: float
    training_s: float
    plan: tpn.Choice | None = None
    forward_s: float = 0.0  # one forward-only pass over the step (log-probabilities)
    step_s: float = 0.0  # one training pass (an optimizer step over the step's samples)
    mfu: float = 0.0  # of the training pass on the GPUs the plan uses


def trainer_holding_gpus(tr: Trainer, train_gpus: int) -> int:
    """The trainer GPUs that hold the model, those its plan uses: the ones it leaves idle neither
    send an update, quantise nor offload (a review: 16 idle of GB200's 80 sent a fifth of it, so a
    split search could buy a faster update with trainer GPUs no plan used)."""
    return tr.plan.gpus_used if tr.plan is not None else train_gpus


def trainer(r: TrainerRates, w: RlWorkload, train_gpus: int) -> Trainer:
    """The step's log-prob passes and ``ppo_epochs`` training passes on the fastest plan that fits
    ``train_gpus`` GPUs, at the share of the plan's speed RL trainers reach (``rl.trainer_efficiency``:
    variable-length trajectories packed into micro-batches, several optimizer steps per rollout
    batch, the framework's work per micro-batch; an optimizer step's own fixed time,
    ``efficiency.training_step_overhead_ms``, is not scaled by it), plus the fixed time per step
    (``rl.step_fixed_s``); InfeasibleError when no plan fits."""
    table = plans_by_size(r, train_gpus)
    i = table.best(train_gpus)
    if i is None:
        raise InfeasibleError(f"no parallelism plan holds the training state on {counted(train_gpus)}")
    kept = r.rows.get((id(table), i))  # (the table is held beside its numbers: its id is its own)
    if kept is None:
        kept = r.rows[(id(table), i)] = (table, _row_numbers(r, table, i))
    n = kept[1]
    return Trainer(
        logprob_s=w.logprob_passes * n.forward_s,
        training_s=w.ppo_epochs * n.step_s + r.fixed_s,
        plan=tpn.Choice(dict(n.plan), dict(n.out), train_gpus),  # (its own dicts, as made per ask)
        forward_s=n.forward_s,
        step_s=n.step_s,
        mfu=n.mfu,
    )


@dataclass(frozen=True)
class _RowNumbers:
    """What :func:`trainer` makes of a size table's plan row, whatever the trainer's size: the
    plan, its outputs, one log-prob pass and one training pass at the RL share, the MFU."""

    plan: dict[str, int]
    out: dict[str, float]
    forward_s: float
    step_s: float
    mfu: float


def _row_numbers(r: TrainerRates, table: tpn.BySize, i: int) -> _RowNumbers:
    c = tpn.choice(table.s, i, 0)  # (the size is the caller's: the numbers do not read it)
    forward = _forward_seconds(r, c.plan) / r.share
    # the step's fixed time is the framework's, not the plan's speed: not scaled by the share
    step = (c.out["step_s"] - c.out["fixed_s"]) / r.share + c.out["fixed_s"]
    y = r.y
    mfu = y["fpt"] * c.out["tokens_per_step"] / (step * c.gpus_used * y["low_peak"])
    return _RowNumbers(c.plan, c.out, forward, step, mfu)


def trainer_seconds(r: TrainerRates, w: RlWorkload, sizes: Any) -> Any:
    """:func:`trainer`'s ``logprob_s + training_s`` on each of ``sizes`` GPUs, as one array: the
    same formulas over the rows :meth:`~ipd_cli.engine.trainplan.BySize.best` gives (one
    ``searchsorted``), each distinct plan's log-prob pass evaluated once, over all of them at once
    (:func:`_forward_seconds_of_rows`), where a :func:`trainer` each built a :class:`Trainer` and
    its plan's dict (a pool search's trainer floors). Sizes past the request's largest trainer
    (``r.cap``), whose :func:`trainer` reads a table of its own, are each its :func:`trainer`'s.
    InfeasibleError as :func:`trainer`'s where a size holds no plan."""
    import numpy as np

    sizes = np.asarray(sizes, np.int64).reshape(-1)
    seconds = np.empty(sizes.size)
    past = sizes > r.cap
    for i in np.flatnonzero(past):  # none in a pool search: its sizes are within the cap
        tr = trainer(r, w, int(sizes[i]))
        seconds[i] = tr.logprob_s + tr.training_s
    within = np.flatnonzero(~past)
    if within.size == 0:
        return seconds
    table = plans_by_size(r)  # the one :func:`trainer` reads for each of them
    k = np.searchsorted(table.used, sizes[within], side="right") - 1
    if k.min() < 0:
        raise InfeasibleError(
            f"no parallelism plan holds the training state on {counted(int(sizes[within][np.argmin(k)]))}"
        )
    rows, at = np.unique(np.asarray(table.rows)[k], return_inverse=True)
    at = at.reshape(-1)
    out = table.s.out
    forward = _forward_seconds_of_rows(r, table.s, rows)[at] / r.share
    step = ((out["step_s"][rows] - out["fixed_s"][rows]) / r.share + out["fixed_s"][rows])[at]
    seconds[within] = w.logprob_passes * forward + (w.ppo_epochs * step + r.fixed_s)
    return seconds


def _forward_seconds_of_rows(r: TrainerRates, s: tpn.Searched, rows: Any) -> Any:
    """:func:`_forward_seconds` of the plans of ``s``'s ``rows`` in one evaluation over their
    columns: :func:`~ipd_cli.engine.trainplan.plan_of`'s fields (its ``a2ao`` rule,
    :func:`~ipd_cli.engine.trainplan.a2a_overlap_named`, over arrays)
    into :func:`~ipd_cli.engine.trainplan.plan_forward_seconds`' formula, the same numbers (each
    operation the scalar one, element by element)."""
    import numpy as np

    from ipd_cli.engine import trainstep as ts

    if len(rows) == 0:
        return np.empty(0)
    P = {k: np.trunc(np.asarray(s.cols[k][rows], float)) for k in tpn.PLAN_COLS}  # plan_of's int()
    P["a2ao"] = np.asarray(tpn.a2a_overlap_named(P), float)
    forward = ts.forward_seconds(P, ts.micro_terms(P, r.y), r.y)
    return np.broadcast_to(np.asarray(forward, float), (len(rows),))


def _forward_seconds(r: TrainerRates, plan: dict[str, int]) -> float:
    """:func:`~ipd_cli.engine.trainplan.plan_forward_seconds` of ``plan`` on ``r``'s inputs, kept."""
    key = tuple(sorted(plan.items()))
    seconds = r.forward_s.get(key)
    if seconds is None:
        seconds = r.forward_s[key] = tpn.plan_forward_seconds(plan, r.y)
    return seconds


@dataclass(frozen=True)
class TrainerMemory:
    """The training state (weights, gradients, optimizer) against usable HBM: ``min_gpus`` is the
    smallest trainer the plan search can run; ``sharded_gpus`` the fewest GPUs whose HBM holds the
    state fully sharded (the group a weight update gathers from). Colocated: where the state waits
    while rollouts run (host memory)."""

    state_bytes: float
    usable_hbm_per_gpu: float
    min_gpus: int
    sharded_gpus: int
    min_plan: str = ""  # the plan of the smallest trainer
    offload_bytes: float | None = None  # colocated: moved to host memory during rollouts
    host_per_gpu: float | None = None
    min_gpus_for_host: int | None = None


def trainer_memory(
    inp: Inputs,
    system: str,
    accelerator: str,
    arch: Model,
    colocated: bool,
    min_gpus: int | None = None,
    min_plan: str = "",
) -> TrainerMemory:
    """The training state against HBM (``min_gpus``: the plan search's smallest trainer, when known;
    else the fully sharded bound) and, colocated, the fewest GPUs whose host memory holds it while
    rollouts run."""
    state = (
        inp.read("efficiency.training_bytes_per_param", "training state per parameter") * arch.total_params
    )
    usable = inp.read(f"accelerators.{accelerator}.hbm_gib", "HBM per GPU")
    usable *= inp.read("efficiency.hbm_usable_fraction", "usable HBM share (training)")
    sharded = f.min_gpus_for_bytes(state, usable)
    need = sharded if min_gpus is None else min_gpus
    mem = TrainerMemory(
        state_bytes=state, usable_hbm_per_gpu=usable, min_gpus=need, sharded_gpus=sharded, min_plan=min_plan
    )
    if not colocated or not inp.has(f"systems.{system}.host_memory_gb"):
        return mem
    offload = inp.read("rl.offload_bytes_per_param", "offload bytes per parameter") * arch.total_params
    host = inp.read(f"systems.{system}.host_memory_gb", "host memory") / inp.cat.systems[system].accelerators
    return TrainerMemory(
        state_bytes=state,
        usable_hbm_per_gpu=usable,
        min_gpus=need,
        sharded_gpus=sharded,
        min_plan=min_plan,
        offload_bytes=offload,
        host_per_gpu=host,
        min_gpus_for_host=f.min_gpus_for_bytes(offload, host),
    )


def check_trainer_memory(mem: TrainerMemory, gpus: int, param: str, what: str, seq: float = 0.0) -> None:
    """InfeasibleError when ``gpus`` trainer GPUs cannot hold the state (``param``: the parameter
    to raise), naming the smallest trainer that can."""
    if gpus < mem.min_gpus:
        tokens = f" and the activations of {seq:,.0f}-token sequences" if seq else ""
        plan = f" ({mem.min_plan})" if mem.min_plan else ""
        raise InfeasibleError(
            f"{gpus} training GPUs cannot hold the training state of {what}: no parallelism plan fits its "
            f"{mem.state_bytes / 1e12:.3g} TB of weights, gradients and optimizer state{tokens} in "
            f"{mem.usable_hbm_per_gpu / 1e9:.0f} GB of usable HBM per GPU; the smallest trainer that can "
            f"is {counted(mem.min_gpus)}{plan}; give `{param}` >= {mem.min_gpus}"
        )
    need, host, offload = mem.min_gpus_for_host, mem.host_per_gpu, mem.offload_bytes
    if need is not None and host is not None and offload is not None and gpus < need:
        raise InfeasibleError(
            f"{gpus} colocated GPUs cannot park the training state of {what} in host memory while rollouts "
            f"run: {offload / 1e12:.3g} TB over {host / 1e9:.0f} GB of host memory per "
            f"GPU needs at least {need}; give `{param}` >= {need}"
        )


def no_trainer(what: str, mem: TrainerMemory, seq: float, plan: str | None = None) -> InfeasibleError:
    """No trainer of any size up to the sanity bound holds the state (with the workload's
    ``training_plan``, where it pins one: then the pin is the likely cause)."""
    if plan:
        return InfeasibleError(
            f"no trainer of up to {MAX_GPUS:,} GPUs runs {what} with the workload's `training_plan` "
            f"{plan!r} ({seq:,.0f}-token sequences, {mem.usable_hbm_per_gpu / 1e9:.0f} GB of usable HBM per "
            "GPU); pin degrees the model can take (pp at most its layers, tp dividing its heads) or leave "
            "the plan to the search"
        )
    return InfeasibleError(
        f"no trainer of up to {MAX_GPUS:,} GPUs holds the training state of {what} with "
        f"{seq:,.0f}-token sequences in {mem.usable_hbm_per_gpu / 1e9:.0f} GB of usable HBM per GPU; "
        "give a smaller model, shorter trajectories or more memory per GPU"
    )
