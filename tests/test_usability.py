"""What a new user hits first (issue 13): names, suggestions, precision, calibrate, option checks."""

from __future__ import annotations

import pytest
from helpers import run_cli

from ipd_cli.errors import did_you_mean


@pytest.mark.parametrize(
    ("typed", "canonical"),
    [
        ("h100", "h100-sxm"),
        ("gb200", "gb200-nvl72"),
        ("gb300", "gb300-nvl72"),
        ("hgx-b200", "b200"),
        ("rubin", "vera-rubin-nvl72"),
        ("mi300x", "mi300x"),
        ("a100", "a100-sxm"),
    ],
)
def test_the_names_people_type_are_aliases(catalog, typed, canonical):
    assert catalog.canonical("systems", typed) == canonical
    catalog.system(typed)  # resolves, no error


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("blakwell", "; did you mean 'blackwell'?"),  # a typo: edit distance
        ("gb20", "; did you mean 'gb200'"),  # a prefix before edit distance
        ("vera-rubin-nvl7", "; did you mean 'vera-rubin-nvl72'?"),
    ],
)
def test_suggestions_rank_prefix_and_substring_before_spelling(catalog, typed, expected):
    names = [*catalog.systems, *catalog.aliases["systems"]]
    assert expected in did_you_mean(typed, names)


def test_a_substring_lists_its_matches(catalog):
    text = did_you_mean("nvl72", [*catalog.systems, *catalog.aliases["systems"]])
    assert all(f"'{n}'" in text for n in ("gb200-nvl72", "gb300-nvl72", "vera-rubin-nvl72"))


@pytest.mark.parametrize("typed", ["h101", "gb201", "b201", "h100-pcie", "mi325x"])
def test_a_different_machine_is_never_suggested(catalog, typed):
    # before: 'h100' -> 'v100', 'gb200' -> 'b200', 'gb300' -> 'b300'; a model number is not a typo
    names = [*catalog.systems, *catalog.aliases["systems"]]
    assert "did you mean" not in did_you_mean(typed, names)
    r = run_cli("compare", typed)
    assert r.code == 2 and "did you mean" not in r.stderr and "choose one of" in r.stderr


def test_compare_h100_b200_runs_on_the_aliases():
    r = run_cli("compare", "h100", "b200", "--workload", "pretrain-10t-moe", "-f", "json")
    assert r.code == 0, r.stderr
    assert [s["hardware"] for s in r.json()["systems"]] == ["h100-sxm", "b200"]


def test_explain_prints_its_inputs_in_full_precision():
    # before: 6 significant digits ("lifecycle_cost_usd = 4.29912e+08"), so the steps did not reproduce
    r = run_cli("explain", "vera-rubin", "--format", "json")
    assert r.code == 0, r.stderr
    rows = {row["metric"]: row for row in r.json()["items"]}
    inputs = dict(part.split(" = ") for part in rows["usd_per_solved_task"]["inputs"].split("; "))
    c = run_cli("compare", "vera-rubin", "--format", "json").json()["systems"][0]["intelligence_per_dollar"]
    assert float(inputs["lifecycle_cost_usd"]) == c["lifecycle_cost_usd"]
    assert float(inputs["tasks_solved"]) == c["tasks_solved"]
    assert float(inputs["lifecycle_cost_usd"]) / float(inputs["tasks_solved"]) == c["usd_per_solved_task"]


# --- a comparison shows every system (item 1) -----------------------------------------------------


def test_compare_keeps_every_system_when_one_stage_cannot_run():
    # before: exit 1, "moe-10t at fp8 needs 10,382 GB on 144 h100-sxm GPUs", no stage named
    r = run_cli("compare", "hopper", "blackwell", "-f", "json")
    assert r.code == 0, r.stderr
    hopper, blackwell = r.json()["systems"]
    assert hopper["rl"] is None and hopper["intelligence_per_dollar"] is None
    assert hopper["pretraining"] is not None and hopper["serving"] is not None  # what can run, runs
    why = hopper["infeasible"]["rl"]
    assert why["stage"] == "post_training" and why["workload"] == "rl-swe-agent"
    assert "h100-sxm" in why["reason"] and why["hint"]
    headline = hopper["infeasible"]["intelligence_per_dollar"]
    assert headline["stage"] == "post_training" and "RL post-training" in headline["reason"]
    assert blackwell["infeasible"] == {} and blackwell["intelligence_per_dollar"]["solved_tasks_per_kusd"] > 0
    assert "ipd: warning: h100-sxm: RL post-training (rl-swe-agent) cannot run" in r.stderr


def test_four_system_compare_runs():
    r = run_cli("compare", "h100-sxm", "h200", "b200", "mi355x", "-f", "json")
    assert r.code == 0, r.stderr
    assert [s["hardware"] for s in r.json()["systems"]] == ["h100-sxm", "h200", "b200", "mi355x"]


def test_an_infeasible_block_is_a_dash_with_a_footnote_in_tables():
    r = run_cli("compare", "hopper", "blackwell", "-f", "markdown")
    assert r.code == 0
    rl_rows = r.stdout.split("**RL post-training**")[1].split("\n")
    assert "cannot run [1]" in rl_rows[0]
    assert rl_rows[1].startswith("| Step time | s | - | ")  # hopper's cell is '-'
    assert "[1] h100-sxm: RL post-training (rl-swe-agent) cannot run" in r.stdout


def test_a_comparison_no_system_can_run_exits_1_naming_the_stage():
    r = run_cli("compare", "hopper")
    assert r.code == 1 and r.stdout == ""
    assert "h100-sxm: post_training (rl-swe-agent)" in r.stderr


def test_hints_name_options_the_command_has():
    # before: `compare a100 h100-sxm` said "use --precision bf16", an option compare does not have
    r = run_cli("compare", "a100", "h100-sxm")
    assert r.code == 1 and "--precision" not in r.stderr
    r = run_cli("compare", "h200", "blackwell", "--set", "workload.serving.precision=bf16", "-f", "json")
    assert r.code == 0, r.stderr
    hint = r.json()["systems"][0]["infeasible"]["serving"]["hint"]
    assert hint.startswith("--set workload.serving.precision=fp8"), hint
    followed = run_cli("compare", "h200", "--set", "workload.serving.precision=fp8", "-f", "json")
    assert followed.code == 0 and followed.json()["systems"][0]["serving"]["precision"] == "fp8"


# --- usage errors before any work (item 3) --------------------------------------------------------


@pytest.fixture
def no_estimates(monkeypatch):
    """Computing anything fails the command with exit 1 (an internal error): a usage error must be
    reported (exit 2) before any estimate starts."""
    from ipd_cli.engine import lifecycle, pretraining

    def boom(*a, **k):
        raise RuntimeError("an estimate was computed before the options were checked")

    monkeypatch.setattr(lifecycle, "estimate_lifecycle", boom)
    monkeypatch.setattr(pretraining, "estimate_pretraining", boom)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["compare", "hopper", "--format", "xml"], "unknown format 'xml'"),
        (["compare", "vera-rubin", "--max-usd", "nan"], "--max-usd must be a finite number"),
        (
            ["compare", "vera-rubin", "--max-usd", "1", "--budget-metric", "cost"],
            "not a metric of the result",
        ),
        (["compare", "vera-rubin", "--pricing", "owned"], "unknown --pricing 'owned'"),
        (["compare", "vera-rubin", "blakwell"], "unknown hardware 'blakwell'"),
        (
            [
                "train",
                "--hardware",
                "hopper",
                "--model",
                "llama-3.1-8b",
                "--tokens",
                "1e12",
                "--gpus",
                "8",
                "-f",
                "xml",
            ],
            "unknown format",
        ),
        (["explain", "vera-rubin", "-f", "xlsx"], "xlsx is a binary format"),
        (["sweep", "--vary", "hardware=hopper", "-f", "yaml"], "for a sweep"),
    ],
)
def test_usage_errors_come_before_any_work(no_estimates, args, message):
    r = run_cli(*args)
    assert r.code == 2, r.stderr
    assert message in r.stderr and r.stdout == ""


def test_budget_metric_names_are_the_results_metric_paths(no_estimates):
    r = run_cli("compare", "vera-rubin", "--max-usd", "1", "--budget-metric", "pretraining.cost")
    assert r.code == 2 and "did you mean 'pretraining.cost_usd'" in r.stderr
