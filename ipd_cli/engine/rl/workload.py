"""The request and the workload's numbers, read once with their provenance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ipd_cli.catalog.overrides import library_label
from ipd_cli.catalog.schema import RL_MODES, SYNC_TRANSPORTS, RlWorkload
from ipd_cli.engine.pretraining import MAX_GPUS, check_cluster
from ipd_cli.engine.trace import Trace
from ipd_cli.errors import InputError, count_text

# transports that need separate trainer and rollout GPUs, and those that reload in place
DISAGGREGATED_TRANSPORTS = ("nccl-broadcast", "nccl-reshard", "rdma-p2p", "checkpoint-engine")
COLOCATED_TRANSPORTS = ("colocated", "checkpoint-engine")


def resolve_request(
    workload: RlWorkload, split: str | None, transport_set: str | None = None, **given: Any
) -> RlWorkload:
    """The workload with the caller's values applied (``model``, ``mode``, ``gpus``, ``gen_gpus``,
    ``train_gpus``, ``transport``), checked. ``transport_set``: the path of a ``sets`` item that
    gave the workload's transport, which is then held to its mode as ``transport`` is (it was
    dropped without a word where the mode could not use it: an input review)."""
    split_given = _check_counts(given, split)
    updates: dict[str, Any] = {k: given[k] for k in ("model", "mode") if given.get(k) is not None}
    if given.get("transport") is not None:
        updates["sync_transport"] = given["transport"]
    if given.get("gpus") is not None:  # the caller's total is a pin, the workload's a cap
        updates.update(gpus=given["gpus"], gen_gpus=None, train_gpus=None, pin_gpus=True)
    if split == "auto":  # the split of the whole total, as before the pool search
        updates["pin_gpus"] = True
    if split_given:
        updates.update(gen_gpus=given.get("gen_gpus"), train_gpus=given.get("train_gpus"))
    w = workload.model_copy(update=updates)
    for name in ("gpus", "gen_gpus", "train_gpus"):  # the workload's own counts too (a fuzzing review)
        value = getattr(w, name)
        if value is not None and given.get(name) is None and value > MAX_GPUS:
            # named as the workload's field: a file, a scenario's post_training or a --set gave it
            raise InputError(
                f"the RL workload's {name} {count_text(value)} is more than {MAX_GPUS:,} GPUs; give a "
                "cluster that can exist"
            )
    check_mode(w.mode)
    caller = given.get("transport") is not None
    named = f"`sets` {transport_set}=" if transport_set and not caller else "`transport` "
    w = _checked_transport(w, caller or transport_set is not None, named)
    if split == "auto" and w.mode == "colocated":
        raise InputError(
            "`split` auto chooses a disaggregated split; colocated mode runs generation and training "
            "on the same GPUs (give `gpus`, or a disaggregated `mode`)"
        )
    if split_given and w.mode == "colocated":
        raise InputError(
            "colocated mode runs generation and training on the same GPUs: give `gpus`, not `gen_gpus` "
            "and `train_gpus` (or a disaggregated `mode`)"
        )
    if (w.gen_gpus is None) != (w.train_gpus is None):
        raise InputError("give both `gen_gpus` and `train_gpus`, or `gpus` (the split is then chosen)")
    if split not in (None, "auto"):
        raise InputError(f"`split` {split}: only 'auto' is supported; or give `gen_gpus` and `train_gpus`")
    return w


def check_mode(mode: str) -> None:
    """An RL mode the estimate knows."""
    if mode not in RL_MODES:
        raise InputError(f"`mode` '{mode}' is unknown; choose one of: {', '.join(RL_MODES)}")


def _check_counts(given: dict[str, Any], split: str | None) -> bool:
    """The caller's GPU counts are in range and do not contradict each other (``gpus`` and a split,
    or ``split`` auto and a split); whether the caller gave a split."""
    for name in ("gpus", "gen_gpus", "train_gpus"):
        if given.get(name) is not None and given[name] <= 0:
            raise InputError(f"`{name}` must be > 0, got {given[name]}")
        if given.get(name) is not None:
            check_cluster(name, given[name])
    split_given = given.get("gen_gpus") is not None or given.get("train_gpus") is not None
    total = (given.get("gen_gpus") or 0) + (given.get("train_gpus") or 0)
    if total > MAX_GPUS:  # each was in range, the two together not (an input review: 2e8 ran)
        raise InputError(f"`gen_gpus` + `train_gpus` is {total:,} GPUs, more than {MAX_GPUS:,}")
    if split_given and given.get("gpus") is not None:
        raise InputError("give `gpus` (the split is then chosen) or `gen_gpus` and `train_gpus`, not both")
    if split_given and split == "auto":
        raise InputError("`split` auto chooses `gen_gpus` and `train_gpus`: give one or the other")
    return split_given


def check_own_transport(w: RlWorkload, origin: str) -> None:
    """A workload whose own mode cannot use its own transport (both from its file) is refused,
    naming both fields: the transport was dropped without a word (an input review). A mode the
    caller gives (``mode``, a ``sets`` item, a sweep axis) may still drop it: :func:`resolve_request`."""
    t = w.sync_transport
    allowed = COLOCATED_TRANSPORTS if w.mode == "colocated" else DISAGGREGATED_TRANSPORTS
    if t is None or t not in SYNC_TRANSPORTS or t in allowed:
        return
    default = "" if "mode" in w.model_fields_set else " (the default)"
    modes = "a disaggregated mode" if w.mode == "colocated" else "mode colocated"
    raise InputError(  # the library names the parameter, `sets`, not the flag (a review)
        f"{library_label(origin)}: workload.sync_transport {t} does not work in workload.mode "
        f"{w.mode}{default}; give a transport the mode can use ({', '.join(allowed)}) or {modes}"
    )


def _checked_transport(w: RlWorkload, given: bool, named: str = "`transport` ") -> RlWorkload:
    """The weight-sync transport, known and one the mode can use (a workload's transport for another
    mode is dropped; the caller's is refused)."""
    if w.sync_transport is not None and w.sync_transport not in SYNC_TRANSPORTS:
        raise InputError(
            f"unknown transport '{w.sync_transport}'; choose one of: {', '.join(SYNC_TRANSPORTS)}"
        )
    allowed = COLOCATED_TRANSPORTS if w.mode == "colocated" else DISAGGREGATED_TRANSPORTS
    if w.sync_transport is not None and w.sync_transport not in allowed and not given:
        w = w.model_copy(update={"sync_transport": None})  # the workload's transport is for another mode
    if w.sync_transport is not None and w.sync_transport not in allowed:
        raise InputError(
            f"{named}{w.sync_transport} does not work in mode {w.mode}; choose one of: {', '.join(allowed)}"
        )
    return w


@dataclass(frozen=True)
class RlNumbers:
    """One step's rollouts: counts, lengths, tool and sandbox times."""

    samples: float  # N, kept for training
    generated: float  # N / keep: the rollouts generated
    prompt_tokens: float
    observation_tokens: float
    mean_response_tokens: float
    max_response_tokens: float
    turns: float
    max_turns: float
    tool_s: float
    boot_s: float
    verify_s: float
    sandbox_cores: float

    @property
    def mean_length(self) -> float:
        """E[L]: prompt + tool output + generated tokens of one trajectory."""
        return self.prompt_tokens + self.observation_tokens + self.mean_response_tokens


def _gpus_note(pinned: bool, colocated: bool) -> str:
    """What the workload's ``gpus`` are to the step: all of it where pinned, else a cap within which
    the pool with the least cost per scheduled step runs (a split's, or a colocated step's)."""
    if pinned:
        return (
            "pinned: generation and training both run on all of it"
            if colocated
            else "pinned: the pool the split search divides"
        )
    step = "the step, generating and training on the same GPUs," if colocated else "a searched split"
    return (
        f"a cap (the cluster available): {step} runs on the pool within it with the least cost per step "
        "whose schedule fits the year (workload.pin_gpus=true: on all of it)"
    )


def workload_numbers(trace: Trace, w: RlWorkload, origin: str) -> RlNumbers:
    """The workload's numbers, each recorded with its ``workload.*`` path."""

    def given(field: str, unit: str) -> Any:
        return trace.given(field.replace("_", " "), getattr(w, field), unit, origin, path=f"workload.{field}")

    prompts, group = given("prompts_per_step", "prompts"), given("group_size", "samples per prompt")
    # what schedules the step and sizes the trainer's work, for the explanation (read from w)
    given("mode", "")
    if w.mode == "async":
        given("staleness_bound", "policy versions")
        given("partial_rollouts", "")
    if w.gpus is not None:  # the pool the split search divides (a review: the RL cost rests on it,
        # and no row named it or its path; a code review read it as the pool a grown trainer runs)
        trace.given(
            "GPUs asked for (generation and training)",
            w.gpus,
            "GPUs",
            origin,
            path="workload.gpus",
            note=_gpus_note(w.pin_gpus, w.mode == "colocated")
            + "; a trainer that cannot hold the training state grows it to the fewest that can (the "
            "RL GPU rows and a warning say so)",
        )
    given("ppo_epochs", "training passes per step")
    given("logprob_passes", "forward passes per step")
    keep = given("keep_fraction", "fraction")
    return RlNumbers(
        samples=prompts * group,
        generated=prompts * group / keep,
        prompt_tokens=given("prompt_tokens", "tokens"),
        observation_tokens=given("observation_tokens", "tokens"),
        mean_response_tokens=given("mean_response_tokens", "tokens"),
        max_response_tokens=given("max_response_tokens", "tokens"),
        turns=given("turns", "turns"),
        max_turns=given("max_turns", "turns"),
        tool_s=given("tool_latency_s", "s"),
        boot_s=given("sandbox_boot_s", "s"),
        verify_s=given("verify_s", "s on a reference core"),
        sandbox_cores=given("sandbox_cores", "cores"),
    )
