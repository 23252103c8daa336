"""Issue 17's typed pieces: the tagged workload union, the scenario stage table, api.serve's
keyword parameters."""

from __future__ import annotations

import typing

import pytest

from ipd_cli import api
from ipd_cli.catalog.schema import Scenario, Workload
from ipd_cli.catalog.validation import WORKLOAD_KINDS, validate_workload
from ipd_cli.catalog.workloads import STAGES
from ipd_cli.errors import InputError


def test_workload_kinds_are_the_tagged_unions_members():
    members = typing.get_args(typing.get_args(Workload)[0])
    assert {cls.__name__ for cls in members} == {"PretrainWorkload", "RlWorkload", "Scenario"}
    assert set(WORKLOAD_KINDS) == {"pretrain", "rl", "scenario"}
    assert typing.get_args(Workload)[1].discriminator == "kind"


def test_an_unknown_kind_is_one_line_naming_the_field():
    with pytest.raises(InputError) as e:
        validate_workload({"kind": "rll", "model": "m", "tokens": 1e12}, "w.yaml: workload")
    assert str(e.value) == "w.yaml: workload.kind: unknown workload kind 'rll'; did you mean 'rl'?"


def test_a_file_without_kind_whose_fields_are_another_kinds_is_told_to_add_it():
    # an RL workload with its `kind` line dropped was read as pretrain and refused for 14 unknown
    # fields (`prompts_per_step: unknown field`), never naming `kind` (a contract review)
    rl = {"description": "d", "model": "qwen3-235b-a22b", "prompts_per_step": 512, "group_size": 16}
    with pytest.raises(InputError) as e:
        validate_workload(rl, "w.yaml: workload")
    assert str(e.value) == (
        "w.yaml: workload.kind: missing (a file without it is read as kind: pretrain); its fields are "
        "those of kind: rl: add `kind: rl`"
    )
    scenario = {"description": "d", "model": "kimi-k2", "horizon_years": 1, "serving": {}}
    with pytest.raises(InputError, match="add `kind: scenario`"):
        validate_workload(scenario, "w.yaml: workload")
    # a field only a pretrain workload has (`tokens`) makes it one: its other fields are the error
    # (it was told to add `kind: rl` for `training_precision`, a code review)
    mixed = {
        "description": "d",
        "model": "llama-3.1-8b",
        "tokens": 1e12,
        "gpus": 64,
        "training_precision": "fp8",
    }
    with pytest.raises(InputError, match="training_precision: unknown field"):
        validate_workload(mixed, "w.yaml: workload")
    # a pretrain workload may still leave it out
    pretrain = {"description": "d", "model": "llama-3.1-8b", "tokens": 1e12, "gpus": 64, "source": "s"}
    assert validate_workload(pretrain, "w").kind == "pretrain"


def test_the_scenario_stage_table_follows_the_schema():
    # workloads.STAGES names the model of each scenario stage that runs a workload of its own
    for stage, cls in STAGES.items():
        assert cls in typing.get_args(Scenario.model_fields[stage].annotation) + (
            Scenario.model_fields[stage].annotation,
        )


@pytest.mark.parametrize(
    "pin", ["prefill_layout", "prefill_instances", "concurrency", "requests_per_s", "output_tokens_per_day"]
)
def test_serve_curve_refuses_single_point_pins(catalog, pin):
    value = "tp8" if pin == "prefill_layout" else 2
    with pytest.raises(InputError, match=f"`{pin}`"):
        api.serve(catalog, "h100-sxm", "llama-3.1-70b", curve=True, **{pin: value})
