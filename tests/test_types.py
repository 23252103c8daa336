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


def test_choices_are_read_in_any_case_by_the_library_and_the_cli(catalog):
    # a library review: `precision="FP8"` and `pricing="TCO"` were refused where hardware names and
    # `speculative="OFF"` were taken, and a numpy depth where a numpy count was; the CLI took
    # --precision FP8 but refused --pricing TCO, --mode ASYNC and --instance BEST
    import numpy as np
    from helpers import run_cli

    kw = dict(input_tokens=1000, output_tokens=200, concurrency=8)
    lower = api.serve(catalog, "h100", "llama-3.1-8b", pricing="tco", precision="fp8", speculative=0, **kw)
    upper = api.serve(
        catalog, "h100", "llama-3.1-8b", pricing="TCO", precision="FP8", speculative=np.int64(0), **kw
    )
    assert upper.model_dump() == lower.model_dump()
    args = ["serve", "--hardware", "h100", "--model", "llama-3.1-8b", "--concurrency", "8", "-f", "json"]
    a = run_cli(*args, "--pricing", "tco", "--instance", "best", "--layout", "tp1", "--speculative", "off")
    b = run_cli(*args, "--pricing", "TCO", "--instance", "BEST", "--layout", "TP1", "--speculative", "OFF")
    assert a.code == b.code == 0 and a.stdout == b.stdout, b.stderr
    assert a.json()["serving"]["price_usd_per_gpu_hour"] > 0
    r = run_cli(
        "rl", "--hardware", "h100", "--workload", "rl-math-reasoning", "--mode", "ASYNC", "-f", "json"
    )
    assert r.code == 0 and r.json()["rl"]["mode"] == "async", r.stderr
