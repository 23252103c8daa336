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
