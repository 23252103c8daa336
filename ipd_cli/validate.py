"""`ipd validate` and `ipd calibrate`: the model against published measurements.

The cases live in ``configs/validation/cases.yaml`` (shipped with the catalog), each with
its source, inputs, measured value and split: ``fitting`` cases may tune the efficiency
defaults, ``checking`` cases never do, and report the model's error.

A serving case at a measured interactivity (``tokens_per_user_s``: InferenceX's 1 / median TPOT)
reads the chosen configuration's curve at exactly that speed, linear in 1 / TPOT between the
largest whole batch that meets it and the next (:func:`_served`): the time-mix of the two batches
that runs at that speed.

A serving case pinned to a concurrency may also give the run's published 1 / TPOT
(``also_measured``, metric ``tokens_per_s_per_user``): ``ipd validate`` reports it beside the case's
metric (the model's 1 / TPOT on the same run and its error, :func:`_per_user_columns`), and
calibration does not fit on it: a knob is fitted on each case's own metric only. The two errors
differ by more than noise: the model's Little's law counts decode slots only, while a benchmark's
clients also spend time outside them (the time to first token, queueing, the ramp), so a run's
throughput at its client concurrency falls short of concurrency x 1 / TPOT (InferenceX's GB200
TEP8 run at 12 users: 12 x 145.26 / (44.98 x 36) = 1.077), and a decode floor fitted on that
throughput reads the step slower than the published 1 / TPOT. (Fitting the floors on 1 / TPOT
beside the throughput was tried, 2026-12-05, and not taken: the floors had also been carrying
what the model misses on MTP drafts and H200 disaggregated pools, and nine serving checking cases
got 5-9 points worse.)

Calibration procedure (reproducible, no optimiser library): each efficiency knob has the
fitting cases that depend on it (training shares by accelerator and precision, overlaps:
pre-training cases; serving per-layer step overhead: serving cases at 4 users or fewer; decode
HBM efficiency: the other dense serving cases; MoE compute share per precision: the other MoE
serving cases; weight-sync stack software and link efficiency per transport: weight-sync cases
(only values the catalog cites as ipd-calibration; sourced ones are not refitted); RL trainer
share of the plan's speed and fixed step time: RL step cases). Knobs are fitted one after another,
each by a log-spaced grid search over its catalog range (fractions, whose range ends at 1 or below,
capped at 0.95), refined near the best for the pre-training knobs and for any knob the grid
moves from its value, that minimises the mean squared
log(measured / predicted) of its cases, with the knobs before it already set.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.layers import builtin_dir
from ipd_cli.catalog.overrides import CLI_SOURCE
from ipd_cli.catalog.schema import PROFILE_PRECISION_FRACTIONS, check_acceptance_table
from ipd_cli.catalog.validation import validate_entry
from ipd_cli.catalog.workloads import read_stdin, refuse_workload_sets
from ipd_cli.catalog.yamlio import read_yaml
from ipd_cli.engine.results import Listing, Pretraining, Serving, ValidationResult
from ipd_cli.errors import InputError, IpdError, did_you_mean
from ipd_cli.files import shown_name

Kind = Literal["pretrain", "serve", "prefill", "decode", "rl-step", "weight-sync"]
SPEED_METRICS = {"tokens_per_s_per_gpu", "tokens_per_s_per_user", "mfu"}


# what each kind of case predicts, and every input a case may give (the readers below); a name
# outside them is a typo, refused, not a case 'not reached' because an input is not published
def _numbers(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(k for k, f in model.model_fields.items() if f.annotation in (float, int))


METRICS: dict[str, tuple[str, ...]] = {
    # a pre-training or serving case may measure any number of its result (predict reads it there)
    "pretrain": _numbers(Pretraining),
    "serve": _numbers(Serving),
    "prefill": ("input_tokens_per_s_per_gpu",),
    "decode": ("output_tokens_per_s_per_gpu",),
    "rl-step": ("step_seconds", "gpu_hours"),
    "weight-sync": ("weight_sync_s",),
}
INPUTS = frozenset(
    """attention_tp bulk_share checkpoint_wide colocated concurrency cp cuda_graphs days decode_instances
    dp engine_load ep eplb fits fp8_recipe fsdp gen_gpus gen_layout gen_stack global_batch gpus
    group_size hardware inference_gpus input_tokens instance_gpus instance_tp kv_precision layout
    max_instance_gpus max_response_tokens mean_response_tokens micro_batch mode model moe_a2a_overlap
    moe_dispatcher moe_routing output_tokens pipeline_schedule pp precision precision_train precision_wire
    prefill_instances prefill_layout prompt_set prompt_tokens prompts recompute scope senders seq_len
    sequence_parallel serving speculative stack stack_release staleness_bound tokens tokens_per_step
    tokens_per_user_s tp tp_comm_overlap train_gpus train_plan trainer_ep trainer_gpus trainer_pp transport
    vp""".split()
)
WITHIN = 0.25  # the share of cases within 25 % is reported


class Measured(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metric: str
    # a measurement is a finite number at least the smallest normal float (inf, or a subnormal that
    # makes predicted / measured overflow, ended as a runtime error, a fuzzing review)
    value: float = Field(gt=0, allow_inf_nan=False)
    range: tuple[float, float] | None = Field(default=None, description="published spread of the measurement")

    @field_validator("value")
    @classmethod
    def _normal(cls, v: float) -> float:
        if v < sys.float_info.min:
            raise ValueError(f"a measured value is at least {sys.float_info.min:.3g}")
        return v


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    split: Literal["fitting", "checking"]
    kind: Kind
    description: str
    source: str
    inputs: dict[str, Any]
    measured: Measured
    also_measured: Measured | None = Field(
        default=None,
        description="a serving case pinned to a concurrency: the run's published 1 / TPOT (metric "
        "tokens_per_s_per_user), reported beside `measured` by `ipd validate`; calibration does not fit "
        "on it (a knob is fitted on the case's own metric)",
    )
    calibrate: bool = Field(
        default=True, description="a fitting case whose system the model knowingly misses fits nothing"
    )
    unreachable: str | None = Field(
        default=None,
        description="what the published run did that ipd does not model, so that ipd cannot run it "
        "as published (the case is reported 'not reached'; tests check that it stays so)",
    )
    note: str | None = None


def cases_path(path: Path | None = None) -> Path:
    """The cases file given, else the shipped one."""
    return path or builtin_dir() / "validation" / "cases.yaml"


def load_cases(path: Path | None = None) -> tuple[list[Case], dict[str, Any]]:
    """The cases of a cases file (``-``: standard input; None: the shipped cases) and its sources."""
    path = cases_path(path)
    name = shown_name(path)
    doc = read_yaml(name, text=read_stdin()) if str(path) == "-" else read_yaml(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
        raise InputError(f"{name}: expected a mapping with a 'cases' list")
    if not doc["cases"]:  # `cases: []` ran nothing, and --max-median-error called it a runtime error
        raise InputError(f"{name}: has no cases (its 'cases' list is empty); add a case")
    cases = [validate_entry(Case, c, f"{name}: cases.{i}") for i, c in enumerate(doc["cases"])]
    for i, case in enumerate(cases):
        where = f"{name}: cases.{i} ({case.id})"
        metric = case.measured.metric
        if metric not in METRICS[case.kind]:
            known = METRICS[case.kind]
            raise InputError(
                f"{where}: measured.metric '{metric}' is not one a {case.kind} case predicts"
                f"{did_you_mean(metric, known)}"
            )
        if case.also_measured is not None:
            _check_also_measured(where, case)
        for key in case.inputs:
            if key not in INPUTS:
                raise InputError(f"{where}: unknown input '{key}'{did_you_mean(key, INPUTS)}")
        # `fits` checked when read, not only where calibrate reads a fitting case's (a review)
        fits = case.inputs.get("fits")
        if fits is not None and (case.kind != "serve" or fits not in SERVING_FIELDS):
            knobs = ", ".join(SERVING_FIELDS) if case.kind == "serve" else f"none for a {case.kind} case"
            raise InputError(f"{where}: input 'fits' {fits!r} is not a knob a case can name ({knobs})")
        if "tokens_per_step" in case.inputs or "prompt_set" in case.inputs:
            _check_acceptance(where, case)
        # a pre-training case's plan pin: another kind would ignore it (an RL case gives its
        # trainer's recipe in train_plan, as fp8_recipe=...)
        if "fp8_recipe" in case.inputs and case.kind != "pretrain":
            raise InputError(
                f"{where}: input 'fp8_recipe' is a pre-training case's; a {case.kind} case ignores it"
                + (" (give it in train_plan: fp8_recipe=...)" if case.kind == "rl-step" else "")
            )
    return cases, doc.get("sources") or {}


PER_USER = "tokens_per_s_per_user"  # the metric a case's also_measured gives: 1 / TPOT


def _check_also_measured(where: str, case: Case) -> None:
    """A case's ``also_measured``: the published 1 / TPOT of a serving case pinned to a concurrency
    whose own metric is another (a case at a measured interactivity runs at that speed already)."""
    also = case.also_measured
    assert also is not None
    pinned = case.kind == "serve" and case.inputs.get("concurrency") is not None
    if also.metric != PER_USER or not pinned or case.measured.metric == PER_USER:
        raise InputError(
            f"{where}: also_measured is the published {PER_USER} (1 / TPOT) of a serving case pinned to "
            f"a `concurrency` that measures another metric; got {also.metric!r}"
        )


def check_references(cat: Catalog, cases: list[Case], sources: dict[str, Any], path: Path) -> None:
    """Every case's hardware, model and source exist (a typo is refused, not 'not reached')."""
    shipped = cases_path()
    shipped_sources: dict[str, Any] | None = None  # read once, where a case needs them
    seen: set[str] = set()
    for case in cases:
        where = f"{shown_name(path)}: case {case.id}"
        if case.id in seen:  # counted twice in the summary and the fit (a fresh-eyes review)
            raise InputError(f"{where} is given twice; give each case an id of its own")
        seen.add(case.id)
        try:
            if "hardware" in case.inputs:
                cat.system(str(case.inputs["hardware"]))
            if "model" in case.inputs:
                cat.model(str(case.inputs["model"]))
        except InputError as e:
            raise InputError(f"{where}: {e}") from None
        if case.source not in sources and case.source not in cat.sources:
            if path != shipped and shipped_sources is None:
                shipped_sources = load_cases(shipped)[1]
            if path != shipped and case.source in (shipped_sources or {}):
                continue  # a source of the shipped cases
            raise InputError(
                f"{where}: source '{case.source}' is defined neither in the file's sources nor in the "
                "catalog's or the shipped cases'; add it to the file's `sources`"
            )


def predict(cat: Catalog, case: Case) -> float:
    """The model's value for the case's metric, from its inputs. Serving cases pass the pins they
    publish (layout, instance size, pools, concurrency) and let the deployment search choose the
    rest."""
    return predictions(cat, case)[0]


def predictions(cat: Catalog, case: Case) -> tuple[float, float | None]:
    """The model's value for the case's metric and, where the case gives ``also_measured``, its
    tokens/s per user (1 / TPOT) on the same run (None otherwise)."""
    i = dict(case.inputs)
    metric = case.measured.metric
    if "checkpoint_wide" in i:
        cat = _run_checkpoint(cat, i)
    if "tokens_per_step" in i or "prompt_set" in i:
        cat = _run_acceptance(cat, i)
    if case.kind == "pretrain":
        from ipd_cli.engine.pretraining import pretraining_numbers

        plan = published_plan(i)
        try:
            p = pretraining_numbers(
                cat,
                i["hardware"],
                i["model"],
                float(i["tokens"]),
                gpus=i.get("gpus"),
                deadline_days=i.get("days"),
                precision=i.get("precision", "bf16"),
                sequence_length=int(i["seq_len"]) if "seq_len" in i else None,
                plan=plan,
            )
        except IpdError as e:
            raise type(e)(_own_pins(str(e), plan, i), e.exit_code) from None
        return float(p[metric]), None  # tokens_per_s_per_gpu: steady state, as benchmarks report it
    if case.kind == "serve":
        value, s = _served_run(cat, i, metric)
        return value, float(s.tokens_per_s_per_user) if case.also_measured is not None else None
    if case.kind == "prefill":
        return _prefill_rate(cat, i), None
    if case.kind == "decode":
        return _decode_rate(cat, i), None
    if case.kind == "rl-step":
        return _rl_step(cat, i, metric), None
    return _weight_sync(cat, i), None


def _run_checkpoint(cat: Catalog, i: dict) -> Catalog:
    """The catalog with the checkpoint the run loaded, where it keeps other weights wider than the
    model's ``checkpoint_wide`` entry says (``{value: [modules], precision: fp8}``: SGLang's GB200
    runs with FP8 attention beside NVFP4 experts)."""
    pin = i["checkpoint_wide"]
    if not isinstance(pin, dict) or "value" not in pin or "precision" not in i:
        raise InputError(
            "case input `checkpoint_wide` is {value: [modules], precision: ...} beside `precision`"
        )
    arch = cat.model(i["model"])
    at = f"models.{cat.canonical('models', i['model'])}.checkpoint_wide.{i['precision']}"
    if i["precision"] not in arch.checkpoint_wide:  # --set cannot add an entry (each is checked alone):
        # a model without one reads the catalog's default, which the case's run alone reads here
        at = f"serving.checkpoint_wide_default.{i['precision']}"
    return cat.with_overrides([f"{at}.{k}={json.dumps(v)}" for k, v in pin.items()])


def _check_acceptance(where: str, case: Case) -> None:
    """A case's ``tokens_per_step`` (a serving case's {draft depth: tokens a step}; the catalog
    checks each value against its depth when the case runs) or ``prompt_set`` (the name of the
    benchmark prompts whose acceptance the catalog holds), one of them."""
    name = "prompt_set" if "prompt_set" in case.inputs else "tokens_per_step"
    if case.kind != "serve":
        raise InputError(f"{where}: input '{name}' is a serving case's; a {case.kind} case ignores it")
    if name == "prompt_set":
        if "tokens_per_step" in case.inputs:
            raise InputError(
                f"{where}: inputs 'prompt_set' and 'tokens_per_step' both set the draft's acceptance; "
                "give one (tokens_per_step: what the case's own source measured)"
            )
        if not isinstance(case.inputs["prompt_set"], str):
            raise InputError(
                f"{where}: input 'prompt_set' {case.inputs['prompt_set']!r} names the benchmark's prompts, "
                "e.g. inferencex-random-chat"
            )
        return
    pin = case.inputs["tokens_per_step"]
    if not _acceptance_shape(pin):
        raise InputError(
            f"{where}: input 'tokens_per_step' {pin!r} is {{draft depth: tokens a step}}, e.g. {{3: 2.5}}"
        )


def _acceptance_shape(pin: Any) -> bool:
    """Whether ``pin`` is {draft depth (a whole number from 1): tokens a step (a number)}."""

    def number(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    def depth(k: Any) -> bool:
        return isinstance(k, int) and not isinstance(k, bool) and k >= 1

    return isinstance(pin, dict) and bool(pin) and all(depth(k) and number(v) for k, v in pin.items())


def _run_acceptance(cat: Catalog, i: dict) -> Catalog:
    """The catalog with the draft acceptance the run's prompts gave (``tokens_per_step``:
    {draft depth: tokens a step}), where its source measured it on the prompts the run used: a
    draft's acceptance is the prompts' as much as the model's (TensorRT-LLM's DeepSeek-R1 MTP-3
    accepts 2.82 tokens a step on NVIDIA's real 1k/2k dataset, about 2.50 on InferenceX's random
    prompts in the chat template), so the catalog's one value per depth is the default; or
    (``prompt_set``) the acceptance the catalog holds for the benchmark prompts the case names."""
    from ipd_cli.engine.serving.physics import draft_method

    mname = cat.canonical("models", i["model"])
    method = draft_method(cat, mname)
    if "prompt_set" in i:
        return _run_prompt_set(cat, i["prompt_set"], method, mname)
    pin = i["tokens_per_step"]
    if not _acceptance_shape(pin):
        raise InputError("case input `tokens_per_step` is {draft depth: tokens a step}, e.g. {3: 2.5}")
    if method is None:
        raise InputError(f"case input `tokens_per_step`: no speculative decoding method for {mname}")
    at = f"serving.speculative_methods.{method}.tokens_per_step"
    try:
        return cat.with_overrides([f"{at}.{depth}={json.dumps(v)}" for depth, v in pin.items()])
    except InputError as e:  # the override's words name the flag; the case gave an input
        said = str(e).removeprefix("--set ").partition(": ")[2] or str(e)
        raise InputError(f"case input `tokens_per_step` {pin}: {said}") from None


def _run_prompt_set(cat: Catalog, name: Any, method: str | None, mname: str) -> Catalog:
    """The catalog whose draft accepts as it was measured on the benchmark prompts ``name``
    (``serving.speculative_methods.<method>.prompt_sets``): those depths' values, sources kept,
    the method's default (real text) at the others."""
    sets = cat.serving.speculative_methods[method].prompt_sets if method is not None else {}
    if name not in sets:
        known = ", ".join(sets) or "none"
        draft = f"{method}'s" if method is not None else f"{mname} has no draft, so no"
        raise InputError(
            f"case input `prompt_set` {name!r}: not among {draft} measured prompt sets ({known})"
            f"{did_you_mean(str(name), list(sets))}"
        )
    assert method is not None
    m = cat.serving.speculative_methods[method]
    tokens = {**m.tokens_per_step, **sets[name].tokens_per_step}
    try:  # theirs where measured, the method's elsewhere: still one table that rises with the depth
        check_acceptance_table(
            f"serving.speculative_methods.{method}.tokens_per_step", {k: v.value for k, v in tokens.items()}
        )
    except ValueError as e:
        raise InputError(f"case input `prompt_set` {name!r}: {e}") from None
    methods = {**cat.serving.speculative_methods, method: m.model_copy(update={"tokens_per_step": tokens})}
    return dataclasses.replace(cat, serving=cat.serving.model_copy(update={"speculative_methods": methods}))


SERVING_MODES = {"aggregated": False, "disaggregated": True}


def _serve(cat: Catalog, i: dict) -> Any:
    """A serving case: the published pins (instance size, layout, aggregated or disaggregated,
    KV precision, EPLB, speculation, concurrency, serving stack) are passed; everything else is
    searched."""
    from ipd_cli.engine.serving import estimate_serving

    mode = i.get("serving")
    if mode is not None and mode not in SERVING_MODES:
        raise InputError(f"serving case: `serving` is aggregated or disaggregated, got {mode!r}")
    return estimate_serving(
        cat,
        i["hardware"],
        i["model"],
        input_tokens=i.get("input_tokens"),
        output_tokens=i.get("output_tokens"),
        precision=i.get("precision"),
        kv_precision=i.get("kv_precision"),
        concurrency=i.get("concurrency"),
        tokens_per_user_s=i.get("tokens_per_user_s"),
        instance_gpus=i.get("instance_gpus"),
        max_instance_gpus=i.get("max_instance_gpus"),
        layout=i.get("layout"),
        attention_tp=i.get("attention_tp"),
        disaggregated=SERVING_MODES.get(mode) if mode else None,
        eplb=i.get("eplb"),
        prefill_layout=i.get("prefill_layout"),
        prefill_instances=i.get("prefill_instances"),
        decode_instances=i.get("decode_instances"),
        # a published point ran no speculative decoding unless its case says so ('on': the depth
        # is not published and the search chooses it; 'auto': whether it ran is not published)
        speculative=i.get("speculative", "off"),
        stack=i.get("stack"),
        stack_release=i.get("stack_release"),
    ).serving


def _served(cat: Catalog, i: dict, metric: str) -> float:
    """A serving case's metric; tokens/s per GPU at a measured speed per user read on the chosen
    configuration's curve at exactly that speed, between its batch that meets it and the next
    (:func:`~ipd_cli.engine.serving.estimate.speed_reading`): the time-mix of the two batches
    that runs at that speed; a whole batch read alone turns a 0.1 % difference in speed into a
    2x one in throughput (the H200 TP8 8k/1k four-user point read 17.5 at batch 2, 24.4 on the
    curve)."""
    return _served_run(cat, i, metric)[0]


def _served_run(cat: Catalog, i: dict, metric: str) -> tuple[float, Any]:
    """:func:`_served`'s value and the serving result it read it on."""
    from ipd_cli.engine.serving.estimate import read_at_speed

    with read_at_speed() as readings:
        s = _serve(cat, i)
    if metric == "tokens_per_s_per_gpu" and readings:
        return readings[-1], s
    return float(getattr(s, metric)), s


def _prefill_rate(cat: Catalog, i: dict) -> float:
    """A prefill case (metric input_tokens_per_s_per_gpu): the prompt tokens per second one GPU of
    the published prefill instance (``prefill_layout``, EPLB and stack as run) works through,
    ``input_tokens`` over the instance's seconds per request (prompts in batches, every rank busy:
    ``prefill_instance_s``) and GPUs. Published prefill-only throughputs measure that instance
    saturated with prompts."""
    one = {"output_tokens": 100, **i, "serving": "disaggregated", "concurrency": 1}
    s = _serve(cat, one)  # speculation off, as every serving case unless it says otherwise
    return float(i["input_tokens"]) / (s.prefill_instance_s * float(s.prefill_instance_gpus or 1))


def _decode_rate(cat: Catalog, i: dict) -> float:
    """A decode case (metric output_tokens_per_s_per_gpu): the tokens per second one GPU of the
    published decode instances generates at the published concurrency (layout, EPLB and stack as
    run), concurrency x tokens/s per user over the decode GPUs (Little's law). Published
    decode-only throughputs give the prefill pool whatever it needs, as a disaggregated
    deployment sized by the search does."""
    s = _serve(cat, {**i, "serving": "disaggregated", "decode_instances": i.get("decode_instances", 1)})
    return s.concurrency * s.tokens_per_s_per_user / (s.instance_gpus * s.decode_instances)


PLAN_INPUTS = {"tp": "tp", "pp": "pp", "vp": "vp", "cp": "cp", "ep": "ep", "dp": "dp"}
PLAN_INPUTS.update(micro_batch="mbs", global_batch="gbs")


def published_plan(i: dict) -> str:
    """The plan fields a case publishes, as pins (the search chooses the rest): degrees, micro and
    global batch, pipeline schedule, recompute (torchtitan's selective-op counts as selective), FSDP
    sharding."""
    pins = [f"{key}={i[name]}" for name, key in PLAN_INPUTS.items() if name in i]
    # the schedule the run used: DualPipe only where the case says so (DeepSeek-V3's own run); the
    # other runs' stacks (Megatron-LM/Core, NeMo, Megatron-DeepSpeed, torchtitan, HAI-LLM) ran 1F1B
    # or its interleaved form, which the plan search models as one schedule
    pins.append(f"schedule={i.get('pipeline_schedule', '1f1b')}")
    # the MoE dispatcher and 1F1B expert-parallel overlap: as the case's recipe says, else plain
    # all-to-all without overlap (what ipd modelled for every run before they were plan dimensions)
    pins.append(f"dispatcher={i.get('moe_dispatcher', 'alltoall')}")
    pins.append(f"a2a_overlap={i.get('moe_a2a_overlap', 'off')}")
    pins.append(f"cuda_graphs={i.get('cuda_graphs', 'on')}")
    if "moe_routing" in i:  # token-drop: the run padded its experts to capacity (none given: dropless)
        pins.append(f"routing={i['moe_routing']}")
    if "recompute" in i:
        pins.append(f"recompute={str(i['recompute']).removesuffix('-op')}")
    if "fp8_recipe" in i:  # the FP8 run's scaling recipe (none given: tensorwise, the search's)
        pins.append(f"fp8_recipe={i['fp8_recipe']}")
    if "tp_comm_overlap" in i:  # off: the run's stack had no userbuffers (none given: the recipe's)
        pins.append(f"tp_comm_overlap={i['tp_comm_overlap']}")
    if int(i.get("fsdp", 1)) > 1:
        pins.append("zero=3")
    return ",".join(pins)


# the case inputs published_plan reads: what a case may give of its run's plan
PLAN_CASE_INPUTS = (*PLAN_INPUTS, "pipeline_schedule", "moe_dispatcher", "moe_a2a_overlap", "cuda_graphs")
PLAN_CASE_INPUTS += ("moe_routing",)
PLAN_CASE_INPUTS += ("recompute", "fsdp", "fp8_recipe", "tp_comm_overlap")


def _own_pins(message: str, plan: str, i: dict) -> str:
    """An engine message that names the plan's pins with those the case gives, as it gives them:
    :func:`published_plan` adds the recipe's defaults (schedule=1f1b, dispatcher=alltoall, ...),
    which a case that does not fit was told it had pinned (the input review: a dense case was
    told of its dispatcher)."""
    from ipd_cli.engine.trainplan import parse_plan, pins_text

    given = ", ".join(f"{k}={i[k]}" for k in PLAN_CASE_INPUTS if k in i)
    return message.replace(
        f" with `plan` {pins_text(parse_plan(plan))}", f" with the case's {given}" if given else ""
    )


def _rl_step(cat: Catalog, i: dict, metric: str) -> float:
    from ipd_cli.catalog.schema import RlWorkload
    from ipd_cli.engine.rl import estimate_rl

    body = {
        "description": "validation case",
        "model": i["model"],
        "prompts_per_step": int(i["prompts"]),
        "group_size": int(i.get("group_size", 1)),
        # every length as the case publishes it: one it lacks leaves the case not reached (it took
        # 200 prompt tokens and 3x the mean response as the longest, numbers from nowhere)
        "mean_response_tokens": float(i["mean_response_tokens"]),
        "prompt_tokens": int(i["prompt_tokens"]),
        "max_response_tokens": int(i["max_response_tokens"]),
        "mode": i.get("mode", "colocated"),
        "source": "validation",
        "training_precision": i.get("precision", "bf16"),
        # the frameworks measured (NeMo RL, verl) run the rollout engine at the training precision
        "inference_precision": i.get("precision", "bf16"),
        "sync_precision": i.get("precision", "bf16"),
    }
    if "staleness_bound" in i:
        body["staleness_bound"] = int(i["staleness_bound"])
    if "transport" in i:
        body["sync_transport"] = i["transport"]
    if "stack" in i:
        body["sync_stack"] = i["stack"]
    if "gen_layout" in i:  # the rollout engine's layout as the run deployed it (vLLM TP8: tp8)
        body["generation_layout"] = i["gen_layout"]
    if "gen_stack" in i:  # the rollout engine the run deployed (NeMo RL: vLLM)
        body["generation_stack"] = i["gen_stack"]
    if "train_plan" in i:  # the trainer's published degrees (Megatron TP2 CP2 EP16 PP8)
        body["training_plan"] = i["train_plan"]
    if "gen_gpus" in i:
        body.update(gen_gpus=int(i["gen_gpus"]), train_gpus=int(i["train_gpus"]))
    else:  # the cluster the case measured: a pin, not a cap for the pool search
        body.update(gpus=int(i["gpus"]), pin_gpus=True)
    w = RlWorkload.model_validate(body)
    r = estimate_rl(cat, i["hardware"], w).rl
    return r.step_seconds if metric == "step_seconds" else r.gpu_hours_per_step


def _weight_sync(cat: Catalog, i: dict) -> float:
    """The RL engine's weight-sync schedule for the case's transport, GPUs and precisions."""
    from ipd_cli.engine.rl import estimate_weight_sync

    wire = i.get("precision_wire", "bf16")
    return estimate_weight_sync(
        cat,
        i["hardware"],
        i["model"],
        transport=i["transport"],
        trainer_gpus=int(i["trainer_gpus"]),
        inference_gpus=int(i["inference_gpus"]),
        instance_gpus=i.get("instance_gpus"),
        instance_tp=i.get("instance_tp"),
        wire=wire,
        training=i.get("precision_train", wire),
        colocated=bool(i.get("colocated", i["transport"] == "colocated")),
        senders=i.get("senders"),
        engine_load=i.get("engine_load"),
        stack=i.get("stack"),
        trainer_stages=int(i.get("trainer_pp", 1)),
        gather_gpus=i.get("trainer_ep"),
        overhead=i.get("scope", "update") == "update",
        bulk_share=i.get("bulk_share"),
    ).seconds


def speed_ratio(case: Case, predicted: float) -> float:
    """measured speed / predicted speed: > 1 means the model is too pessimistic."""
    measured = case.measured.value
    return measured / predicted if case.measured.metric in SPEED_METRICS else predicted / measured


SPLITS = ("fitting", "checking", "all")


def validate(cat: Catalog, split: str = "checking", path: Path | None = None) -> ValidationResult:
    """Every case of the split with its error, and the summary (overall and per kind)."""
    if split not in SPLITS:
        raise InputError(f"unknown split '{split}'; choose one of: {', '.join(SPLITS)}")
    refuse_workload_sets(cat, "validate", [])  # each case gives its own inputs
    rows = run(cat, split, path).items
    return ValidationResult(split=split, items=rows, summary=summary(rows))


def run(cat: Catalog, split: str = "checking", path: Path | None = None) -> Listing:
    from ipd_cli.engine.serving.grid import memoized

    with memoized():  # cases with equal serving physics, pins and target share one search (17 of 222)
        return _run(cat, split, path)


def _run(cat: Catalog, split: str, path: Path | None) -> Listing:
    cases, sources = load_cases(path)
    check_references(cat, cases, sources, cases_path(path))
    if split != "all" and not any(case.split == split for case in cases):  # exited 0, or 1 gated
        other = "checking" if split == "fitting" else "fitting"
        raise InputError(f"{shown_name(cases_path(path))}: has no {split} cases; give `split` {other} or all")
    rows = []
    for case in cases:
        if split != "all" and case.split != split:
            continue
        per_user: float | None = None
        try:
            pred, per_user = predictions(cat, case)
            err = 100.0 * (pred - case.measured.value) / case.measured.value
            status = "ok"
            if not math.isfinite(err):  # a measurement far below the prediction (1e-306 tokens/s)
                raise IpdError(f"the error of {pred:.4g} against {case.measured.value:.4g} is beyond a float")
        except InputError as e:  # the case's own inputs (`precision: bf17`, `layout: banana`): the
            # file's error, as a misspelt system is (a fresh-eyes review: "not reached", exit 0)
            raise case_error(path, case, str(e)) from None
        except IpdError as e:
            pred, err, status = None, None, f"not reached: {e}"
            if case.unreachable:  # what the run did that ipd does not model, as the case says
                status += f" (expected: {case.unreachable})"
        except KeyError as e:
            pred, err, status = None, None, f"not reached: input {e} is not published"
        except (TypeError, ValueError) as e:
            raise wrong_kind(path, case, e) from None
        rows.append(
            {
                "id": case.id,
                "split": case.split,
                "kind": case.kind,
                "metric": case.measured.metric,
                "measured": case.measured.value,
                "predicted": pred,
                "error_pct": err,
                "status": status,
                "source": case.source,
                **_serving_tags(cat, case),
                **_per_user_columns(case, per_user),
            }
        )
    return Listing(kind="validation", items=rows)


def _per_user_columns(case: Case, predicted: float | None) -> dict[str, Any]:
    """Serving cases: the published 1 / TPOT a case pinned to a concurrency gives
    (``also_measured``), the model's on the same run, and its signed error in percent (None where
    the case gives none or is not reached)."""
    if case.kind != "serve":
        return {}
    measured = case.also_measured.value if case.also_measured is not None else None
    err = None if measured is None or predicted is None else 100.0 * (predicted - measured) / measured
    return {"measured_per_user": measured, "predicted_per_user": predicted, "per_user_error_pct": err}


def fixed_interactivity(case: Case) -> bool:
    """A serving case compared at its measured tokens/s per user (tokens/s per GPU at a given
    speed per user), not at maximum throughput nor at a pinned concurrency."""
    i = case.inputs
    return (
        case.kind == "serve"
        and i.get("tokens_per_user_s") is not None
        and i.get("concurrency") is None
        and i.get("mode") is None
    )


def _serving_tags(cat: Catalog, case: Case) -> dict[str, Any]:
    """Serving cases: the accelerator's vendor and whether the case fixes the interactivity."""
    if case.kind != "serve":
        return {}
    try:
        vendor = cat.accelerator_of(cat.system(case.inputs["hardware"])).vendor
    except IpdError:
        vendor = None
    return {"vendor": vendor, "fixed_interactivity": fixed_interactivity(case)}


PER_USER_GROUP = "serve: 1/TPOT at a pinned concurrency"


def summary(rows: list[dict]) -> list[dict]:
    """Median absolute error, worst case and share within 25 %, overall, per kind, and for serving
    per accelerator vendor, for the cases that fix the interactivity and, on their per-user errors,
    for the published 1 / TPOT of the cases pinned to a concurrency (:data:`PER_USER_GROUP`)."""
    out = []
    groups: dict[str, list[dict]] = {"all": rows}
    for r in rows:
        groups.setdefault(r["kind"], []).append(r)
    for r in rows:
        if r.get("vendor"):
            groups.setdefault(f"{r['kind']}: {r['vendor']}", []).append(r)
    for r in rows:
        if r.get("fixed_interactivity"):
            groups.setdefault(f"{r['kind']}: fixed interactivity", []).append(r)
    # the published 1 / TPOT of the cases pinned to a concurrency that give it: its own errors
    per_user = [
        {**r, "error_pct": r["per_user_error_pct"]} for r in rows if r.get("measured_per_user") is not None
    ]
    if per_user:
        groups[PER_USER_GROUP] = per_user
    for name, rs in groups.items():
        errs = [abs(r["error_pct"]) for r in rs if r["error_pct"] is not None]
        worst = max(
            (r for r in rs if r["error_pct"] is not None), key=lambda r: abs(r["error_pct"]), default=None
        )
        out.append(
            {
                "group": name,
                "cases": len(rs),
                "reached": len(errs),
                "median_abs_error_pct": statistics.median(errs) if errs else None,
                "within_25_pct": sum(e <= 100 * WITHIN for e in errs) / len(errs) if errs else None,
                "worst_case": worst["id"] if worst else None,
                "worst_error_pct": worst["error_pct"] if worst else None,
                "over_2x": sum(
                    1 for r in rs if r["error_pct"] is not None and not 0.5 <= 1 + r["error_pct"] / 100 <= 2
                ),
            }
        )
    return out


def _is_moe(cat: Catalog, case: Case) -> bool:
    return cat.model(case.inputs["model"]).is_moe


def _userbuffers(cat: Catalog, i: dict) -> bool:
    """Whether a pre-training case's run overlaps its TP collectives with userbuffers: its published
    plan does not pin them off, and its recipe's quantizers have them at the precision the engine
    runs it at (the recipe as trainplan.fp8_recipe reads the plan)."""
    from ipd_cli.engine.pretraining import supported_precision
    from ipd_cli.engine.trainplan import fp8_recipe, parse_plan

    pins = parse_plan(published_plan(i))
    if pins.get("tpo", 1) == 0:
        return False
    precision = supported_precision(cat.accelerator_of(cat.system(i["hardware"])), i.get("precision", "bf16"))
    recipe = fp8_recipe(pins, precision) or precision
    return cat.efficiency.training_tp_userbuffers[recipe].value == 1


def knobs_of(cat: Catalog, case: Case) -> list[str]:
    """The efficiencies a fitting case calibrates."""
    i = case.inputs
    if not case.calibrate:
        return []
    if case.kind == "pretrain":
        from ipd_cli.engine.trainplan import training_share_path

        if i.get("moe_routing") == "token-drop":
            # a token-drop run fits what its path costs beyond the dropless physics, alone: the
            # shares, overlaps and host wait are dropless runs' (a run of another release's path
            # pulled them toward its own cost)
            return ["efficiency.moe_token_drop_share"]
        share = training_share_path(cat, cat.system(i["hardware"]).accelerator)
        fp4 = ["efficiency.training_gemm.fp4.recipe_share"] if i.get("precision") == "fp4" else []
        moe = ["efficiency.moe_a2a_overlap"] if _is_moe(cat, case) else []
        moe += (
            ["efficiency.moe_eager_layer_ms"] if _is_moe(cat, case) and i.get("cuda_graphs") == "off" else []
        )
        # tp_comm_overlap prices userbuffers, which a run without them (its recipe's quantizers have
        # none: NVFP4, blockwise; its stack had none: tp_comm_overlap off) does not read
        tp = ["efficiency.tp_comm_overlap"] if int(i.get("tp", 1)) > 1 and _userbuffers(cat, i) else []
        return [share, *fp4, *moe, *tp]
    if case.kind == "serve":
        return _serving_knobs(cat, case)
    if case.kind == "rl-step":
        return [f"rl.trainer_efficiency.{'moe' if _is_moe(cat, case) else 'dense'}", "rl.step_fixed_s"]
    if case.kind == "prefill":
        return _prefill_knobs(cat, case)
    if case.kind == "decode":
        return []  # decode cases check; none fits a knob
    return [k for k in _weight_sync_knobs(cat, i) if _calibrated(cat, k)]


SERVING_FIELDS = (
    "step_overhead_us_per_layer",
    "disaggregated_step_overhead_us_per_layer",
    "draft_pass_overhead_layers",
    "collective_latency_us_scale_out",
    "decode_hbm_efficiency",
    "compute_efficiency_factor",
    "decode_attention_compute_factor",
    "grouped_gemm_hbm_efficiency",
    "moe_compute_share",
    "prefill_moe_compute_share",
)
# one value for every stack and family (the draft pass's overhead is counted in its stack's floors)
SHARED_FIELDS = ("draft_pass_overhead_layers", "collective_latency_us_scale_out")


def _serving_knobs(cat: Catalog, case: Case) -> list[str]:
    """The serving efficiency a fitting case calibrates: the one its inputs name (``fits``), else
    the floor per layer for a few users, the MoE share of the GEMM efficiency for an MoE model and
    the decode HBM efficiency for a dense one; read from the case's stack on its accelerator
    family, and only where that profile holds the value itself (not borrowed) as a fitted one. A
    case that names its knob (``fits``) fits it where its stack's own borrowing chain holds it (the
    GB200 and GB300 decode-pool sweeps fit Blackwell's one decode-pool floor, which they read)."""
    i = case.inputs
    named = field = i.get("fits")
    if field is None:
        if (i.get("concurrency") or 99) <= 4:  # a few users: the floor per layer sets the speed
            field = "step_overhead_us_per_layer"
        else:
            field = "moe_compute_share" if _is_moe(cat, case) else "decode_hbm_efficiency"
    if field not in SERVING_FIELDS:
        raise InputError(
            f"serving case {case.id}: `fits` is one of {', '.join(SERVING_FIELDS)}, got {field!r}"
        )
    if field in SHARED_FIELDS:
        return [f"serving.{field}"] if _calibrated(cat, f"serving.{field}") else []
    sv = cat.serving
    stack, family = _stack_family(cat, i)
    # the MoE share and the grouped GEMM's streaming are held per weight precision: a case fits the
    # one it ran at
    at = f".{_serving_precision(cat, i)}" if field in PROFILE_PRECISION_FRACTIONS else ""
    if family is None or stack not in sv.stacks or family not in sv.stacks[stack].profiles:
        knob = f"serving.{field}{at}"
        return [knob] if _calibrated(cat, knob) else []
    if named is not None:
        family = _holder(cat, stack, family, f"{field}{at}")
    if field == "step_overhead_us_per_layer" and (release := i.get("stack_release")):
        # a case of a release whose profile holds its own floor at the case's precision fits that
        precision = _serving_precision(cat, i)
        knob = f"serving.stacks.{stack}.releases.{release}.profiles.{family}.{field}.{precision}"
        if _has(cat, knob):
            return [knob] if _calibrated(cat, knob) else []
    knob = f"serving.stacks.{stack}.profiles.{family}.{field}{at}"
    return [knob] if _calibrated(cat, knob) else []


def _holder(cat: Catalog, stack: str, family: str, field: str) -> str:
    """The family of the first profile of ``stack``'s own chain on ``family`` that sets ``field``
    (``name.key``), the case's family where none does or another stack's profile does."""
    from ipd_cli.engine.serving.stack import chain_of, first_setting

    found = first_setting(chain_of(cat, stack, family), field)
    return found[1] if found is not None and found[0] == stack else family


def _serving_precision(cat: Catalog, i: dict) -> str:
    """The weight precision a serving case runs at: its own, else the catalog policy on its GPU."""
    from ipd_cli.engine.serving.context import default_precision

    return i.get("precision") or default_precision(cat, cat.accelerator_of(cat.system(i["hardware"])))


def _prefill_knobs(cat: Catalog, case: Case) -> list[str]:
    """A prefill case fits its stack's prefill MoE share on its accelerator family, where the
    profile holds one as a fitted value."""
    stack, family = _stack_family(cat, case.inputs)
    knob = f"serving.stacks.{stack}.profiles.{family}.prefill_moe_compute_share"
    return [knob] if family is not None and _calibrated(cat, knob) else []


def _stack_family(cat: Catalog, i: dict) -> tuple[str | None, str | None]:
    """The serving stack a case ran (its `stack`, else its family's default) and the accelerator
    family of its hardware (None: in no family)."""
    from ipd_cli.engine.serving.stack import accelerator_family

    family = accelerator_family(cat, cat.system(i["hardware"]).accelerator)
    return i.get("stack") or (cat.serving.families[family].default_stack.value if family else None), family


def _weight_sync_knobs(cat: Catalog, i: dict) -> list[str]:
    """What a weight-sync case's time depends on: its transport's link efficiency and the
    software of its stack on that path (the per-tensor work, the CPU replica, the colocated hand-off
    and update overhead)."""
    t = i["transport"]
    stack = f"rl.sync_stacks.{i.get('stack') or cat.rl.default_sync_stack.value}"
    knobs = [f"rl.sync_link_efficiency.{t}"]
    if t == "colocated":
        knobs.append(f"{stack}.ipc_gb_per_s")
        if i.get("scope", "update") == "update":
            knobs.append(f"{stack}.colocated_overhead_s")
    elif t == "rdma-p2p" and _has(cat, f"{stack}.replica_tensor_us"):
        knobs.append(f"{stack}.replica_tensor_us")
    elif i.get("engine_load") or (
        i.get("engine_load") is None and t in ("nccl-broadcast", "checkpoint-engine")
    ):
        knobs.append(f"{stack}.tensor_us")
    return knobs


def _has(cat: Catalog, path: str) -> bool:
    try:
        return _current(cat, path) is not None
    except (KeyError, AttributeError):
        return False


def _calibrated(cat: Catalog, path: str) -> bool:
    """Only values the catalog cites as fitted (ipd-calibration) are knobs; sourced ones stay. A
    value set on the command line is a candidate too: :func:`_calibrate` keeps it where the
    shipped catalog fits it."""
    return _has(cat, path) and _current(cat, path).source in ("ipd-calibration", CLI_SOURCE)


# fitted in this order: serving knobs before the RL knobs whose cases also generate tokens (the
# floor per layer first, then the bandwidths, GEMM factors and MoE shares); the weight-sync
# engine loader before the link efficiencies it shares cases with
ORDER = (
    "efficiency.",
    *(f"serving:{f}" for f in SERVING_FIELDS),
    "rl.sync_stacks",
    "rl.sync_link",
    "rl.trainer_efficiency",
    "rl.step_fixed",
)


def _rank(knob: str) -> int:
    for i, prefix in enumerate(ORDER):
        if prefix.startswith("serving:"):
            if knob.startswith("serving.") and prefix.split(":")[1] in knob.split("."):
                return i
        elif knob.startswith(prefix):
            return i
    return len(ORDER)


def _current(cat: Catalog, path: str) -> Any:
    from ipd_cli.catalog.overrides import joined_keys

    node: Any = cat
    keys = path.split(".")
    while keys:
        key = keys.pop(0)
        if isinstance(node, dict):
            if key not in node and (joined := joined_keys(node, [key, *keys])) > 1:
                key, keys = ".".join([key, *keys[: joined - 1]]), keys[joined - 1 :]  # a release: 1.1.0rc2
            node = node[int(key)] if key not in node and key.isdigit() else node[key]
        else:
            node = getattr(node, key)
    return node


def _grid(s: Any, points: int = 17) -> list[float]:
    """Log-spaced points over the knob's range (a fraction, whose range ends at 1 or below, is capped
    at 0.95; a value that is 1 or less but not a fraction, such as 1 us, keeps its range)."""
    lo, hi = s.range if s.range else (s.value / 2, s.value * 2)
    lo = max(lo, 1e-3)
    fraction = hi <= 1 if s.range else s.value <= 1
    hi = min(hi, 0.95) if fraction else hi
    return [lo * (hi / lo) ** (k / (points - 1)) for k in range(points)] if hi > lo else [s.value]


def _refined(grid: list[float], at: float, points: int = 8) -> list[float]:
    """Log-spaced points between the grid neighbours of ``at`` (``at`` excluded)."""
    below = max((g for g in grid if g < at), default=at)
    above = min((g for g in grid if g > at), default=at)
    if below >= above:
        return []
    return [below * (above / below) ** (k / (points + 1)) for k in range(1, points + 1)]


def _error(
    cat: Catalog, case: Case, path: Path | None = None, first: bool = False, fit: _Fit | None = None
) -> float | None:
    """The case's squared log error (None: the model does not reach it). ``first``: the run at the
    catalog's own values, where an input error is the case file's (a trial value's is not).
    ``fit``: the calibration's record of the cases priced, by the values ``cat`` sets."""
    try:
        return math.log(speed_ratio(case, predict(cat, case) if fit is None else fit.predict(cat, case))) ** 2
    except InputError as e:
        if first:
            raise case_error(path, case, str(e)) from None
        return None
    except (IpdError, KeyError):
        return None
    except (TypeError, ValueError) as e:
        raise wrong_kind(path, case, e) from None


def wrong_kind(path: Path | None, case: Case, e: Exception) -> InputError:
    """An input of the wrong type (`eplb: nope`, `tokens: two`, an RL `mode: colocate`): the case
    file's error, named, not an internal one (a fresh-eyes review: exit 1, "internal error")."""
    errors = getattr(e, "errors", None)
    if callable(errors):  # pydantic's: its first error, on one line
        first = errors()[0]
        why = f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
    else:
        why = str(e)
    return case_error(
        path, case, f"an input has a value of the wrong kind ({why}); see the shipped cases' inputs"
    )


def case_error(path: Path | None, case: Case, text: str) -> InputError:
    """An error of one case of the cases file ``path`` (None: the shipped one), named by both."""
    return InputError(f"{shown_name(cases_path(path))}: case {case.id}: {text}")


def _loss(cat: Catalog, cases: list[Case], bar: float = math.inf, fit: _Fit | None = None) -> float:
    """Mean squared log error of the cases the model reaches (inf: none). ``bar``: a trial that
    cannot fall under it stops early and reads inf: once the squares so far, over every case,
    reach it, the mean over the reached cases (a sum of more non-negative squares over no more
    cases) cannot fall under it either. Neither the mean nor whether a trial reads inf depends on
    the order of ``cases`` (the squares are non-negative and summed exactly, by ``math.fsum``):
    ``fit`` given, a trial that stops early puts ``cases`` in the order of their last errors,
    largest first, so that the next value tried is stopped sooner (5 % fewer predictions in
    ``ipd calibrate``)."""
    errs: list[float] = []
    for case in cases:
        err = _error(cat, case, fit=fit)
        if fit is not None:
            fit.last[case.id] = -1.0 if err is None else err
        if err is None:
            continue
        errs.append(err)
        if math.fsum(errs) / len(cases) >= bar:
            if fit is not None:
                cases.sort(key=lambda c: -fit.last.get(c.id, 0.0))
            return math.inf
    return statistics.fmean(errs) if errs else math.inf


@dataclasses.dataclass
class _Fit:
    """What a calibration knows of the cases it priced. ``moved``: the knobs fitted so far whose
    value differs from the catalog's, by the value set; a trial catalog is the catalog with those
    and the trial's value set. A case's prediction is a function of its inputs and the values the
    catalog holds (a value set equal to the catalog's changes only its source, which no number
    reads), so a case priced again on the same values (a case of several knobs, priced at the
    catalog's values for each knob that did not move before it) is read from ``known``, not run
    again. ``last``: each case's latest squared log error, for :func:`_loss`'s order."""

    moved: dict[str, float] = dataclasses.field(default_factory=dict)
    known: dict[tuple, Any] = dataclasses.field(default_factory=dict)  # a prediction, or what it raised
    last: dict[str, float] = dataclasses.field(default_factory=dict)
    trial: tuple = ()  # the key of the values the catalog being priced sets

    def at(self, knob: str | None = None, value: float | None = None, current: Any = None) -> _Fit:
        """This record, pricing the catalog with ``knob`` set to ``value`` (None: the knobs fitted
        so far alone; ``current``: the catalog's value of the knob)."""
        moved = dict(self.moved)
        if knob is not None and value is not None and value != current:
            moved[knob] = value
        self.trial = tuple(sorted(moved.items()))
        return self

    def predict(self, cat: Catalog, case: Case) -> float:
        key = (case.id, self.trial)
        if key not in self.known:
            try:
                self.known[key] = predict(cat, case)
            except Exception as e:  # raised again, as it was, where the case is priced again
                self.known[key] = e
                raise
        found = self.known[key]
        if isinstance(found, Exception):
            raise found
        return float(found)


def _rms(mean_square: float) -> float | None:
    """RMS log error, or None when no fitting case of the knob can be reached."""
    return math.sqrt(mean_square) if math.isfinite(mean_square) else None


JOINT = "efficiency."  # pre-training knobs: cheap to price, so their grid is refined near the best


def calibrate(cat: Catalog, path: Path | None = None, sets: list[str] | None = None) -> Listing:
    """Fit each knob on its fitting cases by a log-spaced grid search over the catalog range
    (least squares of log(measured / predicted)), refined between the grid points around the best
    for the pre-training knobs and for any knob the grid moves from its value; knobs are fitted
    one after another, each with the ones before it already set. The defaults are a fixed point:
    a pass moves none of them by more than a few per cent. Prints the values and the --set that
    applies them (``sets``: overrides the fit starts from, on top of ``cat``)."""
    from ipd_cli.engine.serving.grid import memoized

    base = cat.with_overrides(sets) if sets else cat
    refuse_workload_sets(base, "calibrate", [])  # each case gives its own inputs
    with memoized():  # a knob's trial values leave most cases' serving search unchanged
        return _calibrate(cat, base, path)


def _calibrate(cat: Catalog, base: Catalog, path: Path | None) -> Listing:
    cases, sources = load_cases(path)
    # the hardware, models and sources the cases name, as validate checks them (a fresh-eyes review:
    # a misspelt system silently left its case out of the fit, "cases 2, fitted")
    check_references(cat, cases, sources, cases_path(path))
    if not any(case.split == "fitting" for case in cases):  # nothing to fit: an empty listing, exit 0
        name = shown_name(cases_path(path))
        raise InputError(f"{name}: has no fitting cases, so nothing to calibrate; add a fitting case")
    groups: dict[str, list[Case]] = {}
    for case in cases:
        # the knobs a case reads on the catalog it runs on (the sets applied), a set one among them
        # where the shipped catalog fits it (a set value cites the command line: a set serving knob
        # dropped out of the fit without a word, a scripting review; a value a set creates, such as
        # GB200's own decode-pool floor, is no knob); its grid: half to twice the value set
        for knob in knobs_of(base, case) if case.split == "fitting" else []:
            if _current(base, knob).source != CLI_SOURCE or _shipped_fit(cat, knob):
                groups.setdefault(knob, []).append(case)
    rows = []
    fit = _Fit()
    for knob in sorted(groups, key=lambda k: (_rank(k), k)):
        row = _fit_knob(base, knob, groups[knob], path, fit)
        rows.append(row)
        if row["status"] == "fitted":  # the knobs after it are fitted with it set
            base = base.with_overrides([f"{knob}={row['fitted']}"])
            if row["fitted"] != row["current"]:
                fit.moved[knob] = row["fitted"]
    return Listing(kind="calibration", items=rows)


def _shipped_fit(cat: Catalog, path: str) -> bool:
    """Whether ``cat`` holds ``path`` as a fitted value (one citing ipd-calibration)."""
    return _has(cat, path) and _current(cat, path).source == "ipd-calibration"


def _fit_knob(
    base: Catalog, knob: str, cases: list[Case], path: Path | None = None, fit: _Fit | None = None
) -> dict[str, Any]:
    """One knob's grid search on ``base``, the catalog with the knobs before it already fitted
    (``fit``: the cases priced so far, by the values fitted)."""
    fit = fit or _Fit()
    current = _current(base, knob)
    # a wrong input names its file
    errs = [_error(base, case, path, first=True, fit=fit.at()) for case in cases]
    reached = [e for e in errs if e is not None]
    if not reached:  # every fitting case of this knob is out of the model's reach
        return _skipped(knob, current.value, cases)
    before = statistics.fmean(reached)
    # the trials price the cases furthest off at the current value first: a trial that cannot
    # beat the best stops sooner (the mean is the same in any order)
    order = sorted(range(len(cases)), key=lambda i: (errs[i] is None, -(errs[i] or 0.0)))
    trial = [cases[i] for i in order]
    fit.last.update((c.id, -1.0 if e is None else e) for c, e in zip(cases, errs, strict=True))
    best = (before, current.value)
    grid = _grid(current)
    # a trial that ties the best is priced in full (its bar is just above the best), so a range of
    # values that price the cases alike can be told: the fit is then flat there, not a minimum
    losses: dict[float, float] = {}
    for value in grid:
        tried = fit.at(knob, _tried(value), current.value)
        loss = _trial_loss(base, knob, value, trial, best[0] + TIE, tried)
        losses[_tried(value)] = loss
        if loss < best[0] - TIE:
            best = (loss, value)
    # refined between the grid points around the best: the pre-training knobs always (cheap to
    # price), the others where the grid moves them, so that a move lands where the cases put it
    # rather than a whole grid step away (~26 % for a serving floor, whose flat loss let a small
    # physics change flip it one step: TensorRT-LLM's Blackwell Ultra floor 79.6 -> 63.2 us, 71.0
    # by a finer trial); a knob the grid leaves at its value is not refined (refining every serving
    # knob moved values by less than their cases can tell apart; a grid point within the printed
    # precision of the value, where most values were fitted, does not move it)
    if knob.startswith(JOINT) or _printed(best[1]) != _printed(current.value):
        for value in _refined(grid, best[1]):
            tried = fit.at(knob, _tried(value), current.value)
            loss = _trial_loss(base, knob, value, trial, best[0] + TIE, tried)
            losses[_tried(value)] = loss
            if loss < best[0] - TIE:
                best = (loss, value)
    fitted = _printed(best[1])
    # the cases the fit used: one the model does not reach is left out, and said (a fresh-eyes
    # review: rl.step_fixed_s counted 7 cases where it fitted 6)
    used = [c.id for c, e in zip(cases, errs, strict=True) if e is not None]
    missed = [c.id for c in cases if c.id not in used]
    left_out = f"not reached, so not fitted on: {', '.join(missed)}" if missed else ""
    note = "; ".join(p for p in (_fit_note(losses, best, grid), left_out) if p)
    return {
        "parameter": knob,
        "current": current.value,
        "fitted": fitted,
        "cases": len(used),
        "rms_log_error_before": _rms(before),
        "rms_log_error_after": _rms(best[0]),
        "case_ids": ", ".join(used),
        "set": f"--set {knob}={fitted}",
        "status": "fitted",
        "fit_note": note,
    }


TIE = 1e-12  # mean squared log errors closer than this price the cases alike


def _trial_loss(base: Catalog, knob: str, value: float, cases: list[Case], bar: float, fit: _Fit) -> float:
    """:func:`_loss` of ``base`` with ``knob`` set to the trial ``value``, its estimates recording no
    assumptions (:func:`~ipd_cli.engine.trace.unrecorded`): a trial reads their numbers alone, and
    they are the same numbers (the serving and RL knobs' trials spent ~14 % of their CPU on records
    nothing read). Each case was priced first at the knob's own value with its assumptions
    recorded, as ``ipd validate`` prices it: an input the record refuses is the case file's error there."""
    from ipd_cli.engine.trace import unrecorded

    with unrecorded():
        return _loss(base.with_overrides([f"{knob}={value:.4g}"]), cases, bar, fit)


def _printed(value: float) -> float:
    """A fitted value as the listing prints it and ``--set`` applies it (3 significant figures)."""
    return float(f"{value:.3g}")


def _tried(value: float) -> float:
    """The value a trial sets (``--set`` takes it to 4 significant figures)."""
    return float(f"{value:.4g}")


def _fit_note(losses: dict[float, float], best: tuple[float, float], grid: list[float]) -> str:
    """What the trials (``losses`` by value set) say of the fit beyond its value: a flat stretch
    around it (every value tried there prices the knob's cases alike: a cap binds it there, or no
    case reaches the stretch), or a best at an end of the range searched (the best may lie beyond)."""
    at = _tried(best[1])
    tried = sorted({*losses, at})
    alike = [abs(losses.get(v, best[0]) - best[0]) <= TIE for v in tried]
    i = j = tried.index(at)
    while i > 0 and alike[i - 1]:
        i -= 1
    while j < len(tried) - 1 and alike[j + 1]:
        j += 1
    lo, hi = f"{tried[i]:.3g}", f"{tried[j]:.3g}"
    if lo != hi:  # (a stretch within the printed precision, such as 166.9 to 167, says nothing)
        return f"flat: every value tried from {lo} to {hi} prices its cases alike"
    if len(grid) > 1 and at == _tried(grid[0]):
        return f"at the low end of the range searched ({grid[0]:.3g}): the best may lie below"
    if len(grid) > 1 and at == _tried(grid[-1]):
        return f"at the high end of the range searched ({grid[-1]:.3g}): the best may lie above"
    return ""


def _skipped(knob: str, current: float, cases: list[Case]) -> dict[str, Any]:
    """A knob none of whose fitting cases the model can reach: reported, kept at its value."""
    return {
        "parameter": knob,
        "current": current,
        "fitted": None,
        "cases": len(cases),
        "rms_log_error_before": None,
        "rms_log_error_after": None,
        "case_ids": ", ".join(c.id for c in cases),
        "set": "",
        "status": "skipped: no fitting case can be reached",
        "fit_note": "",
    }
