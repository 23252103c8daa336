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
