"""-o/--output, formats by extension, atomic writes, the budget gate, markdown."""

from __future__ import annotations

import csv
import importlib.util
import io
import json

import pytest
from helpers import run_cli, run_cli_once, write


def test_output_file_by_extension_and_force(tmp_path):
    out = tmp_path / "r.json"
    r = run_cli("compare", "vera-rubin", "blackwell", "-o", str(out))
    assert r.code == 0 and r.stdout == "" and "wrote" in r.stderr
    assert json.loads(out.read_text())["systems"][0]["hardware"] == "vera-rubin-nvl72"
    before = out.read_text()
    r = run_cli("compare", "hopper", "--workload", "pretrain-10t-moe", "-o", str(out))
    assert r.code == 2 and "already exists" in r.stderr
    assert out.read_text() == before  # the existing file is kept
    r = run_cli("compare", "hopper", "--workload", "pretrain-10t-moe", "-o", str(out), "--force")
    assert r.code == 0 and json.loads(out.read_text())["systems"][0]["hardware"] == "h100-sxm"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary files left


def test_csv_and_markdown_by_extension(tmp_path):
    run_cli("compare", "vera-rubin", "blackwell", "-o", str(tmp_path / "r.csv"))
    assert (tmp_path / "r.csv").read_text().startswith("hardware,")
    run_cli("compare", "vera-rubin", "blackwell", "-o", str(tmp_path / "r.md"))
    md = (tmp_path / "r.md").read_text()
    assert "| Metric | Unit | vera-rubin-nvl72 | gb200-nvl72 |" in md
    assert "|---|---|---:|---:|---:|" in md


def test_failed_run_leaves_no_file(tmp_path):
    out = tmp_path / "r.json"
    r = run_cli("compare", "nope", "-o", str(out))
    assert r.code == 2 and not out.exists()


def test_unknown_extension_is_a_usage_error(tmp_path):
    r = run_cli("compare", "hopper", "--workload", "pretrain-10t-moe", "-o", str(tmp_path / "r.xyz"))
    assert r.code == 2 and "cannot tell the format" in r.stderr


def test_budget_gate_exits_3_after_printing():
    d = run_cli_once("compare", "vera-rubin", "blackwell", "-f", "json").json()
    costs = [s["intelligence_per_dollar"]["lifecycle_cost_usd"] for s in d["systems"]]
    between = (min(costs) + max(costs)) / 2
    r = run_cli("compare", "vera-rubin", "blackwell", "-f", "json", "--max-usd", str(between))
    assert r.code == 3
    assert r.json() == d  # the result is printed in full first
    assert "budget exceeded" in r.stderr and "gb200-nvl72" in r.stderr
    r = run_cli("compare", "vera-rubin", "blackwell", "-f", "json", "--max-usd", str(max(costs) + 1))
    assert r.code == 0
    r = run_cli(
        "compare",
        "hopper",
        "--workload",
        "pretrain-10t-moe",
        "--max-usd",
        "1",
        "--budget-metric",
        "pretraining.nope",
    )
    # checked before anything is computed: nothing printed, a did-you-mean from the result's metrics
    assert r.code == 2 and r.stdout == "" and "not a metric of the result" in r.stderr
    assert "did you mean" in r.stderr


def test_diff_two_outputs(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    run_cli("compare", "vera-rubin", "blackwell", "--workload", "pretrain-10t-moe", "-o", str(a))
    run_cli(
        "compare",
        "vera-rubin",
        "blackwell",
        "--workload",
        "pretrain-10t-moe",
        "--set",
        "economics.pue=1.56",
        "-o",
        str(b),
    )
    pue = json.loads(a.read_text())
    r = run_cli("diff", str(a), str(b), "-f", "json")
    assert r.code == 0, r.stderr
    rows = {row["metric"]: row for row in r.json()["items"]}
    # only energy depends on PUE under rental pricing: +20 % from 1.3 to 1.56; the override given
    # is listed too (text: no change or percent)
    assert set(rows) == {
        "systems[vera-rubin-nvl72].pretraining.energy_mwh",
        "systems[gb200-nvl72].pretraining.energy_mwh",
        "overrides[0]",
    }
    assert rows["overrides[0]"] == {
        "metric": "overrides[0]",
        "old": None,
        "new": "economics.pue=1.56",
        "change": None,
        "percent": None,
    }
    old = pue["systems"][0]["pretraining"]["energy_mwh"]
    row = rows["systems[vera-rubin-nvl72].pretraining.energy_mwh"]
    assert row["old"] == old and row["new"] == __import__("pytest").approx(old * 1.2)
    assert row["percent"] == __import__("pytest").approx(20.0)
    assert run_cli("diff", str(a), str(tmp_path / "missing.json")).code == 2
    (tmp_path / "bad.json").write_text("{not json")
    assert "not ipd JSON" in run_cli("diff", str(a), str(tmp_path / "bad.json")).stderr


def test_diff_reads_one_of_its_outputs_from_stdin(tmp_path, monkeypatch):
    # a scripting review: "give a JSON file (or - for stdin)", then "-: no such file"
    import io

    a = tmp_path / "a.json"
    run_cli("compare", "vera-rubin", "--workload", "pretrain-10t-moe", "-o", str(a))
    new = run_cli(
        "compare", "vera-rubin", "--workload", "pretrain-10t-moe", "--set", "economics.pue=1.56", "-f", "json"
    )
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(new.stdout.encode()), encoding="utf-8"))
    r = run_cli("diff", str(a), "-", "-f", "json")
    assert r.code == 0, r.stderr
    assert {row["metric"] for row in r.json()["items"]} == {
        "systems[vera-rubin-nvl72].pretraining.energy_mwh",
        "overrides[0]",
    }
    both = run_cli("diff", "-", "-")
    assert (
        both.code == 2
        and both.stderr == "ipd: error: BASE and NEW are both - (stdin); give one of them as a file\n"
    )
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"{not json"), encoding="utf-8"))
    bad = run_cli("diff", "-", str(a))
    assert bad.code == 2 and bad.stderr.startswith("ipd: error: <stdin>: not ipd JSON output")


def test_a_written_file_is_said_last_on_stderr_with_the_prefix_once_it_is_complete(tmp_path):
    # a newcomer audit: "wrote FILE" had no `ipd:` prefix, and compare/train/serve printed it before
    # their notes where sweep printed it after its warnings. Every command now says it last, once
    # the file is whole: the JSON file is the run's stdout, the workbook opens
    args = ("train", "--hardware", "h100", "--model", "llama-3.1-8b", "--tokens", "1e12", "--gpus", "64")
    shown = run_cli(*args, "-f", "json")
    xlsx = importlib.util.find_spec("openpyxl") is not None  # the [xlsx] extra
    for name in ("t.json", "t.xlsx")[: 1 + xlsx]:
        path = tmp_path / name
        r = run_cli(*args, "-o", str(path))
        assert r.code == 0 and r.stdout == "", r.stderr
        lines = r.stderr.splitlines()
        assert lines[-1] == f"ipd: wrote {path}" and lines[:-1] == shown.stderr.splitlines()
        assert lines[0].startswith("ipd: note: ")  # its notes came first
    assert json.loads((tmp_path / "t.json").read_text()) == shown.json()
    if xlsx:
        from openpyxl import load_workbook

        assert load_workbook(tmp_path / "t.xlsx").sheetnames


def test_diff_of_two_sweeps_pairs_each_systems_rows_in_order(tmp_path):
    # a sweep's rows of one system shared one key, the later overwriting the earlier: two sweeps
    # whose first rows differed diffed as empty (a user review)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    metric = "intelligence_per_dollar.lifecycle_cost_usd"
    for path, first in ((a, "1e6"), (b, "2e6")):
        axis = f"workload.serving.tasks_per_day={first},1e7"
        r = run_cli(
            "sweep", "--vary", "hardware=vera-rubin", "--vary", axis, "--metrics", metric, "-o", str(path)
        )
        assert r.code == 0, r.stderr
        # as every other command says (a review), last, prefixed as every other line (an audit)
        assert r.stderr.splitlines()[-1] == f"ipd: wrote {path} (2 rows)"
    r = run_cli("diff", str(a), str(b), "-f", "json")
    rows = {row["metric"]: row for row in r.json()["items"]}
    assert set(rows) == {
        "[vera-rubin-nvl72].workload.serving.tasks_per_day",
        f"[vera-rubin-nvl72].{metric}",
    }
    tasks = rows["[vera-rubin-nvl72].workload.serving.tasks_per_day"]
    assert (tasks["old"], tasks["new"]) == (1e6, 2e6)
    old, new = (json.loads(p.read_text())[0][metric] for p in (a, b))
    assert rows[f"[vera-rubin-nvl72].{metric}"]["change"] == __import__("pytest").approx(new - old)
    # a one-row sweep against a two-row one: the row pairs with the first, the second is new
    one = tmp_path / "one.json"
    run_cli("sweep", "--vary", "hardware=vera-rubin", "--vary", "workload.serving.tasks_per_day=2e6",
            "--metrics", metric, "-o", str(one))  # fmt: skip
    r = run_cli("diff", str(one), str(b), "-f", "json")
    changed = {row["metric"] for row in r.json()["items"]}
    assert changed == {
        "[vera-rubin-nvl72#2].hardware",
        "[vera-rubin-nvl72#2].workload.serving.tasks_per_day",
        f"[vera-rubin-nvl72#2].{metric}",
    }


def test_diff_reads_a_sweeps_json_lines_as_its_json_rows(tmp_path):
    # `ipd diff` refused a sweep written with --format jsonl ("Extra data"), its streaming format
    metric = "pretraining.energy_mwh"  # PUE moves the energy
    out = {}
    for fmt in ("json", "jsonl"):
        for name, pue in (("a", "1.2"), ("b", "1.5")):
            path = tmp_path / f"{name}.{fmt}"
            r = run_cli(
                "sweep", "--vary", "hardware=vera-rubin,blackwell", "--vary", "price_usd_per_gpu_hour=4,8",
                "--workload", "pretrain-10t-moe", "--set", f"economics.pue={pue}", "--metrics", metric,
                "-f", fmt, "-o", str(path),
            )  # fmt: skip
            assert r.code == 0, r.stderr
        r = run_cli("diff", str(tmp_path / f"a.{fmt}"), str(tmp_path / f"b.{fmt}"), "-f", "json")
        assert r.code == 0, r.stderr
        out[fmt] = r.json()["items"]
    # each system's two rows, the metric and the `--set` items the rows name (an output review: a
    # sweep's rows did not say which overrides made them, so a diff could not show them)
    assert out["jsonl"] == out["json"] and len(out["json"]) == 8
    sets = [row for row in out["json"] if row["metric"].endswith("].overrides")]
    assert len(sets) == 4
    assert {(r["old"], r["new"]) for r in sets} == {("economics.pue=1.2", "economics.pue=1.5")}
    # a one-row sweep's JSON lines are one object: still a sweep's rows
    one = tmp_path / "one.jsonl"
    args = ("sweep", "--vary", "hardware=vera-rubin", "--workload", "pretrain-10t-moe", "--metrics", metric)
    args += ("-f", "jsonl", "-o", str(one))
    assert run_cli(*args).code == 0
    r = run_cli("diff", str(one), str(one), "--all", "-f", "json")
    assert r.code == 0 and f"[vera-rubin-nvl72].{metric}" in [row["metric"] for row in r.json()["items"]]
    # two JSON documents in one file: the error says where the second begins
    doc = tmp_path / "two.json"
    run_cli("compare", "vera-rubin", "--workload", "pretrain-10t-moe", "-o", str(doc))
    write(doc, doc.read_text() * 2)
    r = run_cli("diff", str(doc), str(doc))
    assert r.code == 2 and "Extra data" in r.stderr
    # lines that are not objects are not an ipd output
    bad = write(tmp_path / "bad.jsonl", "[1]\n[2]\n")
    r = run_cli("diff", str(bad), str(tmp_path / "b.jsonl"))
    assert r.code == 2 and "not ipd JSON output" in r.stderr


def test_diff_names_a_changed_price_basis_beside_the_numbers(tmp_path):
    # a user review: rental -> tco read as a 40 % cut with nothing saying the price basis changed
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    args = ("compare", "vera-rubin", "--workload", "pretrain-10t-moe")
    run_cli(*args, "-o", str(a))
    run_cli(*args, "--pricing", "tco", "-o", str(b))
    r = run_cli("diff", str(a), str(b), "-f", "json")
    assert r.code == 0, r.stderr
    rows = {row["metric"]: row for row in r.json()["items"]}
    basis = rows["systems[vera-rubin-nvl72].pretraining.pricing"]
    assert (basis["old"], basis["new"], basis["change"]) == ("rental:reserved", "tco", None)
    assert rows["systems[vera-rubin-nvl72].pretraining.cost_usd"]["change"] < 0
    # unchanged text (the model, the plan) is listed only with --all
    assert "systems[vera-rubin-nvl72].pretraining.model" not in rows
    every = {row["metric"] for row in run_cli("diff", str(a), str(b), "--all", "-f", "json").json()["items"]}
    assert "systems[vera-rubin-nvl72].pretraining.model" in every


def test_golden_markdown_and_yaml():
    from helpers import golden

    args = ("compare", "vera-rubin", "blackwell", "--workload", "pretrain-10t-moe")
    golden("compare-pretrain.md", run_cli(*args, "-f", "markdown").stdout)
    golden("compare-pretrain.yaml", run_cli(*args, "-f", "yaml").stdout)


def test_yaml_is_pyyamls_own_text_whichever_emitter_writes_it():
    # to_yaml hands printable text to libyaml's emitter and anything else to PyYAML's pure-Python
    # one; both must give the bytes PyYAML's safe_dump gives. The odd strings are ones libyaml
    # writes differently (found by comparing the two): a long double-quoted string with a newline
    # or a tab (libyaml folds it without PyYAML's "\\" line ends), a character beyond U+FFFF (it
    # escapes it, PyYAML prints it), a non-ASCII key of 43 characters but 129 bytes (libyaml counts
    # bytes against the 128 limit of a simple key and writes a "? " key), an ASCII key of 125
    # characters (PyYAML counts the key and its unwritten 5-character "!!str" tag against 128)
    import yaml
    from pydantic import BaseModel

    from ipd_cli.render import to_yaml

    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML without libyaml: to_yaml has one emitter")

    class Doc(BaseModel):
        notes: dict[str, str]

    words = "word " * 20
    odd = {
        "newline": f"{words}\n end",
        "tab": f"{words}\t end",
        "emoji": f"{words}\U0001f600",
        "\u2014" * 43: "x",
        "k" * 125: "x",
    }
    for name, text in odd.items():
        one = Doc(notes={name: text})
        assert yaml.dump(one.model_dump(), Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True) != (
            expected := yaml.safe_dump(one.model_dump(), sort_keys=False, allow_unicode=True)
        )  # the case still tells the emitters apart
        assert to_yaml(one) == expected, name
    plain = Doc(notes={"a": f"{words}\u00d7 \u2014 \u2265 1", "\u2014" * 42: words})  # libyaml writes it
    assert to_yaml(plain) == yaml.safe_dump(plain.model_dump(), sort_keys=False, allow_unicode=True)


def test_scenario_from_stdin(monkeypatch):
    import io

    from ipd_cli import load

    text = (load().workloads["pretrain-10t-moe"].model_copy(update={"tokens": 5e13})).model_dump_json()
    monkeypatch.setattr("sys.stdin", io.StringIO(text))  # JSON is YAML
    r = run_cli("compare", "vera-rubin", "--workload", "-", "-f", "json")
    assert r.code == 0, r.stderr
    d = r.json()
    assert d["workload"]["origin"] == "<stdin>" and d["workload"]["tokens"] == 5e13


def test_set_reaches_every_data_command():
    # PUE enters every energy figure: raising it must raise each command's energy or per-MW metric
    def metric(args, path):
        lo = run_cli(*args, "-f", "json", "--set", "economics.pue=1.1").json()
        hi = run_cli(*args, "-f", "json", "--set", "economics.pue=1.5").json()
        for key in path:
            lo, hi = lo[key], hi[key]
        return lo, hi

    train = ("train", "--hardware", "hopper", "--model", "llama-3.1-8b", "--tokens", "1e12", "--gpus", "64")
    lo, hi = metric(train, ["pretraining", "energy_mwh"])
    assert hi / lo == pytest.approx(1.5 / 1.1)
    serve = ("serve", "--hardware", "b200", "--model", "llama-3.3-70b", "--precision", "fp8")
    lo, hi = metric(serve, ["serving", "tokens_per_s_per_mw"])
    assert lo / hi == pytest.approx(1.5 / 1.1)
    rl = ("rl", "--hardware", "gb200-nvl72", "--workload", "rl-math-reasoning")
    lo, hi = metric(rl, ["rl", "run", "energy_mwh_per_year"])
    assert hi / lo == pytest.approx(1.5 / 1.1)
    compare = ("compare", "vera-rubin", "--scenario", "open-model-agent")
    lo, hi = metric(compare, ["systems", 0, "intelligence_per_dollar", "solved_tasks_per_mwh"])
    assert lo / hi == pytest.approx(1.5 / 1.1)


def test_systems_priced_on_different_rental_points_are_labelled_each_and_warned_once(tmp_path):
    # A100 has no reserved price: it is priced on-demand while Vera Rubin is reserved, and the
    # footer said "Pricing: rental:reserved" for both
    out = tmp_path / "r.md"
    r = run_cli("compare", "vera-rubin", "a100", "--workload", "rl-swe-agent", "-o", str(out))
    assert r.code == 0, r.stderr
    md = out.read_text()
    assert "Pricing: rental:reserved (vera-rubin-nvl72); rental:on-demand (a100-sxm)." in md
    assert "Pricing: rental:reserved." not in md and "priced on different bases" not in md
    mixed = [line for line in r.stderr.splitlines() if "priced on different bases" in line]
    assert mixed == [
        "ipd: warning: the systems are priced on different bases, not like for like: rental:reserved "
        "(vera-rubin-nvl72); rental:on-demand (a100-sxm): each takes the first point of "
        "economics.rental_label_preference it has; --pricing tco (or a rental:LABEL every system has) "
        "prices all on one"
    ]
    r = run_cli(
        "compare", "vera-rubin", "a100", "--workload", "rl-swe-agent", "--pricing", "tco", "-f", "markdown"
    )
    assert r.code == 0 and "Pricing: tco." in r.stdout and "priced on different" not in r.stderr


def test_budget_gate_message_keeps_the_digits_of_per_unit_values():
    # `:,.0f` printed "> 1 USD (a100-sxm 2)" for $2.45 per GPU-hour
    args = ("compare", "a100", "--workload", "rl-swe-agent", "-f", "json", "--budget-metric")
    r = run_cli(*args, "rl.price_usd_per_gpu_hour", "--max-usd", "1")
    assert r.code == 3
    assert "ipd: error: budget exceeded: rl.price_usd_per_gpu_hour > 1 USD (a100-sxm 2.45)\n" in r.stderr
    r = run_cli(*args, "rl.price_usd_per_gpu_hour", "--max-usd", "2.449")
    assert "> 2.449 USD (a100-sxm 2.450)\n" in r.stderr  # the digits that tell it from the budget


def test_a_budget_metric_the_workload_lacks_is_refused_before_anything_is_written(tmp_path):
    # an RL workload has no pretraining block: the JSON (88 kB) was printed, or the -o file written
    # and left, and only then exit 2, suggesting the metric just refused (a contract review)
    args = ("compare", "a100", "--workload", "rl-swe-agent", "--max-usd", "5", "--budget-metric")
    r = run_cli(*args, "pretraining.cost_usd", "-f", "json")
    assert r.code == 2 and r.stdout == ""
    assert r.stderr == (
        "ipd: error: --budget-metric pretraining.cost_usd: not a number in this output (its blocks: rl); "
        "e.g. --budget-metric rl.usd_per_step\n"
    )
    out = tmp_path / "r.json"
    r = run_cli(*args, "pretraining.cost_usd", "-o", str(out))
    assert r.code == 2 and not out.exists() and "wrote" not in r.stderr
    r = run_cli(*args, "rl.usd_per_step", "-f", "json")  # the block's metric: checked after the output
    assert r.code == 3 and r.json()["systems"][0]["rl"]["usd_per_step"] > 5
    train = ("train", "--hardware", "a100", "--model", "llama-3.1-8b", "--tokens", "1e9", "--gpus", "8")
    r = run_cli(*train, "--max-usd", "1", "-f", "json")  # train's gate: pretraining.cost_usd
    assert r.code == 3 and r.json()["pretraining"]["cost_usd"] > 1


def test_budget_metric_without_max_usd_is_a_usage_error():
    r = run_cli("compare", "vera-rubin", "--budget-metric", "rl.usd_per_step")
    assert r.code == 2 and r.stdout == ""
    assert r.stderr == (
        "ipd: error: --budget-metric rl.usd_per_step needs --max-usd USD (the budget it checks); "
        "give both, or drop --budget-metric\n"
    )


def test_an_override_the_estimate_never_reads_is_warned():
    # under rental prices the owning-cost inputs change nothing; compare listed them under
    # `overrides` and said nothing, and sweep suggested an unrelated field (a user review)
    r = run_cli("compare", "vera-rubin", "--set", "economics.electricity_usd_per_kwh=0.5", "-f", "json")
    base = run_cli("compare", "vera-rubin", "-f", "json")
    assert r.code == 0
    cost = "intelligence_per_dollar"
    assert (
        r.json()["systems"][0][cost]["lifecycle_cost_usd"]
        == base.json()["systems"][0][cost]["lifecycle_cost_usd"]
    )
    assert "--set economics.electricity_usd_per_kwh: not an input of this estimate" in r.stderr
    assert "--pricing tco" in r.stderr
    tco = run_cli(
        "compare", "vera-rubin", "--set", "systems.vera-rubin.capex_usd=1e7", "--pricing", "tco", "-f", "json"
    )
    assert tco.code == 0 and "not an input" not in tco.stderr  # read (an alias of the entry's name)
    s = run_cli(
        "sweep", "--vary", "hardware=vera-rubin", "--vary", "economics.electricity_usd_per_kwh=0.05,0.1"
    )
    assert s.code == 2 and "owning-cost input" in s.stderr and "--pricing tco" in s.stderr


def test_systems_priced_on_contracts_of_different_terms_are_warned():
    # H100's reserved price is a 1-year contract, Vera Rubin's a 3-year one (cheaper per hour): the
    # same label hid it (a user review); priced on one term, no warning
    r = run_cli("compare", "vera-rubin", "h100", "-f", "json")
    assert r.code == 0
    line = next(ln for ln in r.stderr.splitlines() if "different terms" in ln)
    assert "vera-rubin-nvl72 3-year" in line and "h100-sxm 1-year" in line
    # the advice names only bases every system has: Vera Rubin has no on-demand price, and
    # `--pricing rental:on-demand` was suggested, then refused (a data audit)
    assert "compare on one basis with --pricing tco," in line and "rental:on-demand" not in line
    line = next(
        ln for ln in run_cli("compare", "b200", "h100", "-f", "json").stderr.splitlines() if "terms" in ln
    )
    assert "--pricing rental:on-demand" in line
    # every rental-priced system counts, those of an unstated term too (H20 has tco-model only)
    three = run_cli("compare", "h100", "b200", "h20", "-f", "json").stderr.splitlines()
    line = next(ln for ln in three if "terms" in ln)
    assert "--pricing rental:tco-model or --pricing tco," in line and "on-demand" not in line
    same = run_cli("compare", "vera-rubin", "h100", "--set", "systems.h100-sxm.prices.reserved=2.0",
                   "--set", "systems.h100-sxm.prices.reserved.term_years=3", "-f", "json")  # fmt: skip
    assert same.code == 0 and "different terms" not in same.stderr and "not an input" not in same.stderr
    assert "different terms" not in run_cli_once("compare", "vera-rubin", "blackwell", "-f", "json").stderr


def test_a_read_override_without_an_assumption_record_is_not_called_unread():
    # a model's shape and a CPU's cores are read without an `assumptions` record; a general
    # "not listed, not read" check warned on them while they moved the answer (a code review)
    base = run_cli("serve", "--hardware", "h100", "--model", "llama-3.1-70b", "-f", "json")
    r = run_cli("serve", "--hardware", "h100", "--model", "llama-3.1-70b", "--set",
                "models.llama-3.1-70b.kv_heads=16", "-f", "json")  # fmt: skip
    key = "usd_per_million_output_tokens"
    assert r.json()["serving"][key] != base.json()["serving"][key]
    assert "not an input" not in r.stderr


def test_a_reserved_price_of_no_stated_term_beside_a_stated_one_is_warned():
    # a user review: a user catalog's reserved price without term_years was left out of the
    # mixed-term check, so a 3-year GB200 rate beside it drew no warning
    r = run_cli(
        "compare", "gb200", "h100", "--workload", "pretrain-10t-moe", "-f", "json",
        "--set", "systems.h100-sxm.prices.reserved.term_years=null",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    assert "h100-sxm: the reserved price names no contract term, beside gb200-nvl72 3-year" in r.stderr


def test_explain_prints_counted_inputs_as_counts_and_other_numbers_as_before():
    # integral counts read as floats printed as 32.00 scale-up domains; a global rule then printed
    # a price of 2 as `2` beside 1.76 (a code review): only counted units drop their decimals
    from ipd_cli.render.views import _item_cell

    assert _item_cell({"unit": "scale-up domains", "value": 32.0}, "value") == "32"
    assert _item_cell({"unit": "GPUs", "value": 2.5}, "value") == "2.50"
    assert _item_cell({"unit": "USD/GPU-h", "value": 2.0}, "value") == "2.00"
    table = run_cli("explain", "vera-rubin", "-f", "table").stdout
    turns = next(line for line in table.splitlines() if "input: turns " in line)
    assert "│ 30 " in turns and "30.00" not in turns


def test_each_stage_of_a_comparison_table_prints_its_own_price():
    # a units review: under tco serving is priced at its own utilisation ($4.34 on Rubin against
    # pre-training's $5.04), and the table printed only pre-training's: the serving cost could not
    # be traced. Each stage's block now has its price, and $ per M output tokens follows from it
    from ipd_cli.render.views import view

    r = run_cli("compare", "vera-rubin", "--pricing", "tco", "-f", "json")
    assert r.code == 0, r.stderr
    data = r.json()
    system = data["systems"][0]
    rows = [row for grid in view(data).grids for row in grid.rows]
    labels = [row[0] for row in rows]
    prices = [float(row[2]) for row in rows if row[0] in ("Price", "  price")]
    assert prices == [
        round(system[block]["price_usd_per_gpu_hour"], 2) for block in ("pretraining", "rl", "serving")
    ]
    serving = system["serving"]
    assert serving["price_usd_per_gpu_hour"] < system["pretraining"]["price_usd_per_gpu_hour"]
    per_m = serving["price_usd_per_gpu_hour"] / 3600 / serving["tokens_per_s_per_gpu"] * 1e6
    assert per_m == pytest.approx(serving["usd_per_million_output_tokens"], rel=1e-9)
    assert "Output tokens/s per MW (incl. PUE)" in labels


def test_numbers_below_a_tenth_keep_three_significant_figures():
    # a review: a ratio of 0.00636 printed "0.006" (6 % off) and 0.00156 "0.002" (28 %) in tables
    from ipd_cli.render.views import fmt_num

    cases = {
        0.00636: "0.00636",
        0.00156: "0.00156",
        0.05: "0.0500",
        0.0845: "0.0845",
        0.1: "0.100",
        0.672: "0.672",
    }
    assert {v: fmt_num(v) for v in cases} == cases
    assert fmt_num(0.0009) == "0.0009" and fmt_num(2.5) == "2.50" and fmt_num(1234.5) == "1,234"


def test_a_column_shows_the_decimals_that_tell_its_values_apart():
    # a --curve table read 121 / 250 and 121 / 236 for 120.754 and 121.348 tokens/s per user, as if
    # one point were dominated; two listed plans read alike (1.0037 shown 1.00: an output review)
    from ipd_cli.render.views import _curve, _rows, fmt_column

    assert fmt_column([120.754, 121.348, 250.0]) == ["120.8", "121.3", "250.0"]
    assert fmt_column([1.0, 1.0037, 7]) == ["1.000", "1.004", "7"]
    assert fmt_column([120.75, 250.0, None]) == ["121", "250", ""]  # nothing to tell apart: as fmt_num
    assert fmt_column([1.00001, 1.00002]) == ["1.00001", "1.00002"]  # at most three more decimals
    assert fmt_column([1.000001, 1.000002]) == ["1.00000", "1.00000"]
    point = {"configuration": "TP1", "tokens_per_s_per_gpu": 250.0, "ttft_s": 0.05512, "deployment_gpus": 1}
    frontier = [
        point | {"interactivity_tokens_per_s": 120.754, "usd_per_million_output_tokens": 0.3932},
        point | {"interactivity_tokens_per_s": 121.348, "usd_per_million_output_tokens": 0.3934},
    ]
    rows = _curve({"model": "m", "hardware": "h", "precision": "fp8", "serving": frontier}).grids[0].rows
    assert [r[1] for r in rows] == ["120.8", "121.3"]  # the axis: apart
    assert [r[4] for r in rows] == ["0.393", "0.393"]  # not an axis: as fmt_num
    plans = _rows("plans", [{"plan": "a", "multiplier": 1.0}, {"plan": "a", "multiplier": 1.0037}]).rows
    assert plans == [["a", "1.000"], ["a", "1.004"]]


def test_explain_tables_show_inputs_to_six_significant_digits():
    # the markdown read `load_s = 0.31672999999999996` (an output review); JSON keeps every digit
    from ipd_cli.render.views import _item_cell

    item = {
        "inputs": "fixed_s = 0.25; load_s = 0.31672999999999996; bytes = 449275362318.84143; "
        "tokens = 55050240.0; tiny = 6.313131313131314e-05; gpus = 26928; term: NIC = 2.389223132363674; "
        "training_flops = 3.12884901888e+26"
    }
    assert _item_cell(item, "inputs") == (
        "fixed_s = 0.25; load_s = 0.31673; bytes = 449275362319; tokens = 55050240.0; "
        "tiny = 6.31313e-05; gpus = 26928; term: NIC = 2.38922; training_flops = 3.12885e+26"
    )


def test_a_single_result_table_leaves_out_fields_without_a_value():
    # `ipd train` printed precision_requested and plans as empty rows, `ipd rl` staleness_bound
    # outside async (a user review); JSON keeps them as null
    args = ("train", "--hardware", "h100", "--model", "llama-3.1-8b", "--tokens", "1e12", "--gpus", "64")
    table = run_cli(*args, "-f", "table", env={"COLUMNS": "150"})
    data = run_cli(*args, "-f", "json").json()["pretraining"]
    assert data["precision_requested"] is None and "precision_requested" not in table.stdout
    assert "wall_days" in table.stdout


def test_a_table_title_wider_than_its_table_is_not_cut_inside_a_name():
    # a fresh-eyes review: over its two-column table `ipd train` titled the memory breakdown
    # "pretraining.memory_breakdow" / "n_gb_per_gpu"; a title wraps between words alone
    args = ("train", "--hardware", "h100", "--model", "llama-3.1-8b", "--tokens", "1e12", "--gpus", "64")
    lines = run_cli(*args, "-f", "table", env={"COLUMNS": "150"}).stdout.splitlines()
    assert "pretraining.memory_breakdown_gb_per_gpu" in [line.strip() for line in lines]


def test_a_table_to_a_pipe_takes_the_width_columns_gives():
    # COLUMNS was read only on a terminal: `COLUMNS=80 ipd hardware list -f table | less` drew rows
    # as wide as the table needs (327 characters for a compare; an output review)
    wide = run_cli("hardware", "list", "-f", "table").stdout.splitlines()
    assert max(map(len, wide)) > 100
    narrow = run_cli("hardware", "list", "-f", "table", env={"COLUMNS": "100"})
    assert narrow.code == 0 and max(map(len, narrow.stdout.splitlines())) <= 100
    assert "h100-sxm" in narrow.stdout


def test_plain_ratios_read_like_directed_ones():
    # an output review: 'Instance size ... 1x' beside '1.00x better', '1.5x' beside '1.50x'
    from ipd_cli.render.views import HI, ratio_text

    assert [ratio_text(v, 1.0, "") for v in (0.225, 1.5, 2.97, 123.4)] == ["0.225x", "1.50x", "2.97x", "123x"]
    assert ratio_text(72, 72, "") == ratio_text(3.0, 3.0, HI) == "same"
    # a procurement review: the same $2M budget summed in two orders read "1.00x better"
    assert ratio_text(2000000.0000000002, 1999999.9999999998, HI) == "same"
    assert ratio_text(1.001, 1.0, HI) == "1.00x better"  # a real difference keeps its direction
    assert ratio_text(1.5, 1.0, HI) == "1.50x better"


def test_compare_reads_a_queue_wait_against_the_first_by_its_difference():
    """A newcomer audit: Rubin waited 1.08e-07 s for a sequence slot at the traffic and GB200 0.368 s;
    their ratio read '3.4e+06x worse', which says nothing of a wait that adds to the time to first
    token. The headline now waits 0.00490 s and 1.05 s (its JSON; GB200's 270 decode instances keep
    up at rho 0.9999): the difference 1.046497939 - 0.004895100 = 1.041602839 s, worse (lower is
    better), not their ratio."""
    d = run_cli_once("compare", "vera-rubin", "blackwell", "-f", "json").json()
    waits = [s["serving"]["slot_queue_s"] for s in d["systems"]]
    assert [round(w, 9) for w in waits] == [0.0048951, 1.046497939]
    r = run_cli_once("compare", "vera-rubin", "blackwell", "-f", "markdown")
    assert r.code == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if "wait for a sequence slot" in line]
    assert rows == [
        "| &nbsp;&nbsp;wait for a sequence slot at the traffic | s | 0.00490 | 1.05 | 1.04 s worse |"
    ]
    assert "a queue's wait by the difference" in r.stdout  # the note under the table says so
    # the time to first token it adds to keeps its ratio: 0.887 / 0.610 = 1.45 (0.896 / 0.616 until a
    # TensorRT-LLM prefill instance took its own MoE share, 2026-12-06)
    assert "| Time to first token (a lone prompt) | s | 0.610 | 0.887 | 1.45x worse |" in r.stdout
    from ipd_cli.render.views import HI, LO, difference_text, ratio_text

    # the audit's pair: 0.36796 - 1.08e-07 = 0.368 s, where the ratio was 3.4e+06
    assert ratio_text(0.36796476644, 1.0838e-07, LO) == "3.4e+06x worse"
    assert difference_text(0.36796476644, 1.0838e-07, LO, "s") == "0.368 s worse"
    assert difference_text(0.5, 0.25, LO, "s") == "0.250 s worse"
    assert difference_text(0.25, 0.5, LO, "s") == difference_text(0.5, 0.25, HI, "s") == "0.250 s better"
    assert difference_text(0.25, 0.25, LO, "s") == "same"


def test_catalog_counts_and_flags_read_as_counts_and_flags_while_json_keeps_its_floats():
    """An audit: `models list -f csv` wrote Llama 2 7B's 6.74e9 parameters as 6740000000.0 and
    `hardware show gb300` its flag host_link_dedicated (1: NVLink-C2C) as 1.00 and its cited
    gpus_per_node (4 a tray, SMC1) as 4.00. The CSV and the tables say 6740000000, yes and 4; JSON
    keeps the catalog's floats."""
    rows = list(csv.DictReader(io.StringIO(run_cli("models", "list", "-f", "csv").stdout)))
    seven = next(r for r in rows if r["name"] == "llama-2-7b")
    assert (seven["total_params"], seven["active_params"], seven["layers"]) == (
        "6740000000",
        "6740000000",
        "32",
    )
    item = next(
        i for i in run_cli("models", "list", "-f", "json").json()["items"] if i["name"] == "llama-2-7b"
    )
    assert item["total_params"] == 6.74e9 and isinstance(item["total_params"], float)
    hw = {r["name"]: r for r in csv.DictReader(io.StringIO(run_cli("hardware", "list", "-f", "csv").stdout))}
    assert hw["h100-sxm"]["hbm_tb_per_s"] == "3.35"  # a column with fractions keeps them
    md = run_cli("hardware", "show", "gb300", "-f", "markdown").stdout.splitlines()
    assert "| entry.host_link_dedicated | yes  [N1 (estimate)] |" in md
    assert "| entry.field_sources.gpus_per_node | 4  [SMC1] |" in md
    entry = run_cli("hardware", "show", "gb300", "-f", "json").json()["entry"]
    assert (entry["host_link_dedicated"]["value"], entry["field_sources"]["gpus_per_node"]["value"]) == (
        1.0,
        4.0,
    )


def test_tables_say_yes_or_no_and_show_whole_counts_whole():
    # an output review: serve / train / rl tables showed True/False (yes/no in compare) and
    # `turns 30.00 turns` among the inputs
    from ipd_cli.render.views import _assumptions, fmt_num

    assert (fmt_num(True), fmt_num(False)) == ("yes", "no")
    rows = _assumptions(
        [
            {"name": "turns", "value": 30.0, "unit": "turns", "source": None, "origin": "w.yaml"},
            {"name": "HBM", "value": 80.0, "unit": "GiB per GPU", "source": "S1", "origin": "hw.yaml"},
        ]
    ).rows
    assert [r[1] for r in rows] == ["30", "80.00"]


def test_the_dump_emit_shares_is_left_as_it_was_and_renders_as_the_results_own(catalog, capsys):
    # cli._emit dumps a result once (model_dump(mode="json")) for render and _warn: every format
    # renders that dump as it renders the result, and neither changes it (the next reader sees
    # what the result dumps)
    import copy

    from ipd_cli import compare
    from ipd_cli.cli import _warn
    from ipd_cli.render import OutputContext, render

    result = compare(catalog, ["hopper"], "pretrain-10t-moe")
    data = result.model_dump(mode="json")
    before = copy.deepcopy(data)
    for fmt in ("json", "yaml", "csv", "markdown", "table"):
        assert render(result, fmt, OutputContext(), data) == render(result, fmt, OutputContext()), fmt
    _warn(result, catalog, data=data)
    shared = capsys.readouterr().err
    _warn(result, catalog)
    assert capsys.readouterr().err == shared
    assert data == before


def test_a_pretraining_shorter_than_its_price_contract_is_noted(catalog):
    # a pricing review: 27,648 Rubin GPUs rented for 30 days at the 3-year reserved $8.50 cost
    # $165M, without a word that the contract for them runs $6.2B (27,648 x 3 x 8,760 h x $8.50;
    # 32,256 GPUs and $7.21B while the 10T recipe batch was Kimi K2's, 27,648 and $6.18B again
    # until a step paid its fixed time, 28,440 and $6.35B until the FP4 recipe share's refit
    # 0.627 -> 0.574, 29,232 and $6.53B until a cast paid its HBM traffic by recipe, 2026-12-05,
    # thirty-sixth session: 29,952 and $6.69B now)
    from ipd_cli import compare, load

    note = compare(catalog, ["vera-rubin"], "pretrain-10t-moe").notes[0]
    assert "(whole terms: vera-rubin-nvl72's 29,952 GPUs for 3 year(s) at reserved $6.69B)" in note
    # owned: other work keeps the GPUs busy (utilisation 0.85) and the note says what buying them
    # costs, 416 racks x $7.8M (a procurement review: nothing was said under tco)
    owned = compare(catalog, ["vera-rubin"], "pretrain-10t-moe", pricing="tco").notes[0]
    assert (
        "utilisation 0.85 (bought for the run alone: vera-rubin-nvl72's 29,952 GPUs (416 systems, $3.24B"
        in owned
    )
    life = load(sets=["economics.depreciation_years=0.05"])  # 18 days, a 30-day run: nothing to say
    assert not any(
        "bought for" in n for n in compare(life, ["vera-rubin"], "pretrain-10t-moe", pricing="tco").notes
    )
    # no term stated (A100's on-demand price), or a run as long as the term: nothing to say
    small = load(sets=["workload.tokens=1e11"])
    assert not any("whole terms" in n for n in compare(small, ["a100"], "pretrain-10t-moe").notes)
    year = load(sets=["systems.vera-rubin.prices.reserved.term_years=0.05"])
    assert not any(
        "whole terms" in n for n in compare(year, ["vera-rubin"], "pretrain-10t-moe").notes
    )  # 18 d


def test_listed_plans_fit_a_narrow_terminal_one_grid_each():
    # an output review: `train --plans 3` drew its plans 162 characters wide on 80 columns
    args = ("train", "--hardware", "h100", "--model", "llama-3.1-70b", "--tokens", "1e12", "--gpus", "1024")
    r = run_cli(*args, "--plans", "3", "-f", "table", env={"COLUMNS": "80"})
    assert r.code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    assert sum(line.startswith("pretraining.plans: ") for line in lines) == 3


def test_the_compare_table_says_what_pre_training_draws_beside_the_site():
    # an energy review: Rubin's 29,952 GPUs draw 29,952 x 230 kW / 72 x PUE 1.3 = 124.4 MW while
    # they pre-train, GB200's 122,904 x 125 / 72 x 1.3 = 277.4 MW, beside the scenario's 100 MW
    # site, whose rows count serving alone, and nothing said so
    md = run_cli("compare", "vera-rubin", "blackwell", "-f", "markdown")
    assert md.code == 0, md.stderr
    assert (
        "Pre-training draws vera-rubin-nvl72 124 MW, gb200-nvl72 277 MW while it runs (PUE included); "
        "the 100 MW site's rows count serving alone." in md.stdout
    )
    alone = run_cli("compare", "vera-rubin", "--workload", "pretrain-10t-moe", "-f", "markdown")
    assert alone.code == 0 and "Pre-training draws" not in alone.stdout  # no site: nothing to say


def test_diff_pairs_explain_rows_by_system_and_metric_and_validation_groups_by_name(tmp_path):
    # a scripting review: two `ipd explain` outputs 251 and 241 rows long were paired by place (a
    # tokens-per-step row against a bytes-per-weight row, -66.5 %), and two validation outputs'
    # summaries by index (the same cases in another order: 8 false changes)
    def explain(*rows):
        items = [{"hardware": "h100-sxm", "metric": m, "value": v, "formula": "f"} for m, v in rows]
        return {"schema_version": "1.0", "kind": "explain", "items": items}

    a = write(tmp_path / "a.json", json.dumps(explain(("depth 1", 1.68), ("bytes per weight", 0.5625))))
    b = write(tmp_path / "b.json", json.dumps(explain(("bytes per weight", 0.5625))))
    rows = {row["metric"]: row for row in run_cli("diff", str(a), str(b), "-f", "json").json()["items"]}
    assert set(rows) == {
        "items[h100-sxm:depth 1].value",
        "items[h100-sxm:depth 1].formula",
        "items[h100-sxm:depth 1].hardware",
        "items[h100-sxm:depth 1].metric",
    }
    assert rows["items[h100-sxm:depth 1].value"]["new"] is None  # removed, not paired with another row

    def validation(*groups):
        summary = [{"group": g, "cases": n, "median_abs_error_pct": e} for g, n, e in groups]
        return {
            "schema_version": "1.0",
            "kind": "validation",
            "split": "checking",
            "items": [],
            "summary": summary,
        }

    c = write(tmp_path / "c.json", json.dumps(validation(("all", 2, 10.0), ("serve", 1, 5.0))))
    d = write(tmp_path / "d.json", json.dumps(validation(("serve", 1, 5.0), ("all", 2, 10.0))))
    assert run_cli("diff", str(c), str(d), "-f", "json").json()["items"] == []  # the same groups


def test_a_sub_dollar_rl_step_is_not_printed_as_zero_dollars():
    # a code review: the cheaper-grown line printed `$0` for a small model's sub-dollar step
    from ipd_cli.render.views import _rl_lines

    rl = {"gpus": 16, "usd_per_step": 0.4512, "cheaper_grown_gpus": 24, "cheaper_grown_usd_per_step": 0.3871}
    line = next(ln for ln in _rl_lines("h100", rl) if "would cost" in ln)
    assert "at $0.451 a step" in line and "would cost $0.387:" in line
    rl.update(usd_per_step=3549.4, cheaper_grown_usd_per_step=3084.2)
    line = next(ln for ln in _rl_lines("b300", rl) if "would cost" in ln)
    assert "at $3,549 a step" in line and "would cost $3,084:" in line


def test_a_diff_with_no_differences_keeps_its_columns_and_says_so(tmp_path):
    # an output review: `ipd diff` of two equal files printed a CSV of one newline (no header), a
    # markdown table with no columns and a blank table
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"schema_version": "1.0", "kind": "models", "items": [{"name": "a", "x": 1}]}))
    csv_out = run_cli("diff", str(base), str(base), "-f", "csv")
    assert csv_out.code == 0 and csv_out.stdout == "metric,old,new,change,percent\n"
    md = run_cli("diff", str(base), str(base), "-f", "markdown").stdout
    assert "| metric | old | new | change | percent |\n|---|---|---|---|---|\n" in md
    assert md.rstrip().endswith("no differences")
    assert "no differences" in run_cli("diff", str(base), str(base), "-f", "table").stdout
    assert run_cli("diff", str(base), str(base), "-f", "json").json()["items"] == []
    # and its workbook, which had no header row (a review of the xlsx outputs)
    openpyxl = pytest.importorskip("openpyxl")
    book = tmp_path / "d.xlsx"
    assert run_cli("diff", str(base), str(base), "-o", str(book)).code == 0
    rows = list(openpyxl.load_workbook(book)["results"].iter_rows(values_only=True))
    assert rows == [("metric", "old", "new", "change", "percent")]


def test_a_budget_metric_not_in_the_result_is_offered_costs_only():
    # a sampled-sweep review: --budget-metric serving.configuration suggested
    # serving.configurations_searched, a count, where --max-usd checks dollars
    r = run_cli("compare", "gb200", "--max-usd", "1", "--budget-metric", "serving.configuration")
    assert r.code == 2 and r.stdout == "" and "not a metric of the result" in r.stderr
    assert "configurations_searched" not in r.stderr and "pretraining.cost_usd" in r.stderr
    typo = run_cli("compare", "gb200", "--max-usd", "1", "--budget-metric", "pretraining.cost_us")
    assert "did you mean 'pretraining.cost_usd'?" in typo.stderr


def test_idle_gpus_of_a_count_that_is_no_whole_system_and_a_run_past_a_year_are_warned():
    # a procurement review: 100 H200 GPUs (12.5 8-GPU nodes) ran a plan on 96, the other 4 priced,
    # for 4.5 years, and nothing was said
    args = ("train", "--hardware", "h200", "--model", "deepseek-v3", "--tokens", "1.48e13", "-f", "json")
    r = run_cli(*args, "--gpus", "100")
    assert r.code == 0, r.stderr
    pre = r.json()["pretraining"]
    used, days = pre["gpus_used"], pre["wall_days"]
    assert used % 8 == 0 and used < 100 and days > 365
    assert (
        f"ipd: warning: h200: 100 GPUs are 12.5 8-GPU systems; the plan runs on {used} and the other "
        f"{100 - used} are idle but priced"
    ) in r.stderr
    assert (
        f"pre-training takes {days:,.0f} days ({days / 365:.3g} years) on 100 GPUs: more GPUs shorten it "
        "(a shorter deadline sizes more)"
    ) in r.stderr
    # whole systems, and a run inside the year: neither line
    quiet = run_cli(*args[:-2], "--gpus", "2048", "-f", "json").stderr
    assert "idle but priced" not in quiet and "years) on" not in quiet


def test_inputs_at_one_side_of_their_ranges_are_counted_for_a_sampled_sweep():
    # a procurement review: Rubin's nominal solved tasks per $1k sat above its own P90 (a sampled
    # sweep draws triangular(low, value, high)) and compare said nothing. Outside the middle half:
    # $8.50 in 8.5-9.75 (its bottom), 8 us in 1-200 (under 1 + 199 / 4 = 50.75); 5 in 0-10 is not
    from types import SimpleNamespace as NS

    from ipd_cli.engine.pricing import one_sided_range_notes
    from ipd_cli.engine.results import Assumption

    def row(path, value, span):
        return Assumption(name=path, value=value, unit="", origin="test", path=path, range=span)

    rows = [
        row("systems.vera-rubin-nvl72.prices.reserved", 8.5, [8.5, 9.75]),
        row("efficiency.gemm_call_overhead_us", 8.0, [1.0, 200.0]),
        row("efficiency.gemm_call_overhead_us", 8.0, [1.0, 200.0]),  # listed twice: one input
        row("economics.pue", 5.0, [0.0, 10.0]),
        row("accelerators.rubin.hbm_gib", 279.0, None),
    ]
    [note] = one_sided_range_notes([NS(hardware="vera-rubin-nvl72", assumptions=rows)])
    assert note.endswith(": vera-rubin-nvl72 2, its rental price $8.5 at the bottom of $8.5-9.75 among them")
    assert one_sided_range_notes([NS(hardware="x", assumptions=rows[3:])]) == []


def test_a_terms_set_without_its_price_is_said_to_relabel_not_reprice():
    # a procurement review: --set systems.h200.prices.reserved.term_years=3 silenced the mixed-terms
    # warning and left H200's 1-year $2.41 as it was, now read as a 3-year rate
    args = ("compare", "vera-rubin", "h200", "--set", "systems.h200.prices.reserved.term_years=3")
    said = (
        "ipd: warning: --set systems.h200.prices.reserved.term_years restates the term of h200's "
        "reserved $2.41 without repricing it (a longer term is cheaper per hour): give that term's "
        "price too, --set systems.h200.prices.reserved=USD"
    )
    assert said in run_cli(*args, "-f", "json").stderr
    # with its price, or owned (tco reads no term): nothing to say
    assert "restates" not in run_cli(*args, "--set", "systems.h200.prices.reserved=2.0", "-f", "json").stderr
    assert "restates" not in run_cli(*args, "--pricing", "tco", "-f", "json").stderr


def test_an_estimate_without_a_source_reads_estimate_alone():
    # a fresh-eyes review: serve's inputs read " (estimate)" (markdown "&nbsp;(estimate)") for the
    # speculative decoding method, an estimate that names no source
    args = ("serve", "--hardware", "vera-rubin", "--model", "kimi-k2", "--precision", "fp4")
    out = run_cli(*args, "--tokens-per-user-s", "50", "-f", "markdown").stdout
    row = next(line for line in out.splitlines() if line.startswith("| speculative decoding method |"))
    assert row.split("|")[4].strip() == "(estimate)", row
    assert "&nbsp;(estimate)" not in out


def test_a_non_finite_number_in_a_result_is_refused_naming_its_dotted_path():
    # output.check_finite: the first NaN or infinity, depth first in the dump's order, named by its
    # keys and list indexes; numbers nested at every depth before it are finite
    from typing import Any

    from pydantic import BaseModel

    from ipd_cli.errors import IpdError
    from ipd_cli.output import check_finite

    class Result(BaseModel):
        name: str
        body: dict[str, Any]

    finite = {"a": 1.5, "b": [0.0, {"c": -2.0, "d": [3.0, "x", None, True]}], "e": {}}
    check_finite(Result(name="ok", body=finite))  # nothing refused
    for bad, where, shown in [
        (float("nan"), "body.b.1.d.2", "nan"),
        (float("inf"), "body.b.1.d.2", "inf"),
        (-float("inf"), "body.b.1.d.2", "-inf"),
    ]:
        body = {**finite, "b": [0.0, {"c": -2.0, "d": [3.0, "x", bad, 4.0]}], "z": float("nan")}
        with pytest.raises(IpdError, match="not a finite number") as e:
            check_finite(Result(name="bad", body=body))
        assert str(e.value).startswith(f"the result is not a finite number: {where} is {shown}; "), e.value


def test_tables_drawn_without_rich_are_richs_own_drawing(monkeypatch):
    # render.table draws a table or a note itself where Rich would draw the same bytes, and hands
    # the rest to Rich. Here every output is drawn both ways: with the shortcut, and by Rich alone
    # (the shortcut switched off). The outputs: the headline comparison (sections, right-aligned
    # numbers, notes), the hardware listing (wrapped multi-line cells, dropped columns, one grid per
    # system at 40 columns), and a made-up view of what the shortcut must get
    # right or leave to Rich: a header wrapped to more lines than a row (Rich sets a header at the
    # bottom of its cell), an empty cell, a grid with no rows, a cell of double-width characters
    # (Rich counts cells), a tab, a note wider than the terminal (Rich wraps it), a note with an
    # emoji code (Rich replaces it), an empty note
    from ipd_cli.render import OutputContext, table
    from ipd_cli.render.views import Grid, View, view

    compare = view(run_cli_once("compare", "vera-rubin", "blackwell", "-f", "json").json())
    listing = view(run_cli_once("hardware", "list", "-f", "json").json())
    made_up = View(
        [
            Grid(
                "a title that wraps between its words over a narrow table",
                ["metric", "a header of many words", "n"],
                [["  an indented label", "1", "2"], ["x", "", "3"], ["y", "z", "4"]],
                right={1, 2},
                sections=[0, 2],
            ),
            Grid("Rich's", ["a", "b"], [["x", "\u4e2d\u6587"], ["y", "a\tb"]]),
            Grid("", ["empty"], []),
            Grid("plain \u00d7 \u2014 \u2265", ["name", "value"], [["a b c d e f g h", "1,234"]], right={1}),
        ],
        notes=["a short note", "a long note " * 12, "a :smile: note", "", "two\nlines"],
    )
    cases = [(compare, OutputContext())] + [
        (v, OutputContext(width=width, ascii_only=ascii_only))
        for v in (listing, made_up)
        for width, ascii_only in [(None, False), (40, False), (100, True)]  # ASCII: another box, spelling
    ]
    shortcut: list[str | None] = []
    real = table._table_text
    monkeypatch.setattr(table, "_table_text", lambda *a: shortcut.append(real(*a)) or shortcut[-1])
    drawn = [table.to_table(v, ctx) for v, ctx in cases]
    assert None in shortcut and len([t for t in shortcut if t is not None]) > 20  # both ways taken
    monkeypatch.setattr(table, "_table_text", lambda *a: None)
    monkeypatch.setattr(table, "_plain_note", lambda *a: None)
    for (v, ctx), text in zip(cases, drawn, strict=True):
        assert text == table.to_table(v, ctx), (ctx, v.grids[0].title)


def test_diff_keeps_a_json_integer_an_integer(tmp_path):
    # a CLI review: `ipd diff` read every number as a float, so a GPU count of 29,952 was written
    # 29952.0 in every format; the change of two integers is an integer, its percent a float
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"schema_version": "1.0", "pretraining": {"gpus": 29952, "mfu": 0.5}}))
    b.write_text(json.dumps({"schema_version": "1.0", "pretraining": {"gpus": 473472, "mfu": 0.25}}))
    r = run_cli("diff", str(a), str(b), "-f", "json")
    assert r.code == 0, r.stderr
    rows = {row["metric"]: row for row in r.json()["items"]}
    gpus = rows["pretraining.gpus"]
    assert [type(gpus[k]) for k in ("old", "new", "change")] == [int, int, int]
    assert gpus["change"] == 473472 - 29952 == 443520
    assert gpus["percent"] == __import__("pytest").approx(100 * 443520 / 29952)
    assert rows["pretraining.mfu"]["change"] == -0.25
    csv = run_cli("diff", str(a), str(b), "-f", "csv").stdout
    assert "pretraining.gpus,29952,473472,443520," in csv
    # integers a float holds whose difference it does not: no change, as for two such floats
    a.write_text('{"schema_version": "1.0", "pretraining": {"gpus": -%s}}' % ("9" * 308))
    b.write_text('{"schema_version": "1.0", "pretraining": {"gpus": %s}}' % ("9" * 308))
    big = run_cli("diff", str(a), str(b), "-f", "json")
    assert big.code == 0, big.stderr
    (row,) = big.json()["items"]
    assert row["change"] is None and row["percent"] is None
