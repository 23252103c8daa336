"""The CLI contract: formats, streams, exit codes, golden output, JSON Schema drift."""

from __future__ import annotations

import csv
import io
import json

import pytest
from helpers import GOLDEN, _to_12_digits, golden, run_cli, run_cli_once, write

from ipd_cli import output_schema

# the note counting the inputs a sampled sweep draws away from their values (pricing.one_sided_range_notes;
# by hand in test_output); tco reads no rental price, so one input fewer
RANGES = (
    "ipd: note: inputs valued outside the middle half of their ranges, which a sampled sweep draws (its "
    "median can then sit off this estimate, even outside its P10-P90): "
)


def test_compare_json_contract():
    r = run_cli("compare", "vera-rubin", "blackwell", "--format", "json")
    assert r.code == 0, r.stderr
    # one warning, one note. Rubin's plan (TP4 PP8 DP456, 32 micro-batches of 8,192-token
    # sequences: 119,537,664 tokens) and GB200's (TP8 PP64 DualPipe DP52, 318 micro-batches:
    # 135,462,912 tokens) run under the 10T model's recipe batch, the DeepSeek LLM rule's 0.292 x (3.1288e12 x
    # 1e14)^0.3271 = 135.5M: no batch warning (until 2026-12-05 Rubin's TP4 PP8 DP432 plan ran
    # 141,557,760 tokens, 1.02x, and was warned of; GB200's DualPipe plan of then 1.0005x, under
    # the 1.01x a warning takes).
    # GB200's serving deployment (43,272 GPUs x 125 kW / 72 x PUE 1.3 = 97.7 MW) fits the scenario's
    # 100 MW site (615 whole racks of 125 kW x 1.3 = 162.5 kW: 44,280 GPUs): no site warning (it
    # needed 44,424 GPUs, 100.3 MW, while each Blackwell system's decode pools had a floor of their
    # own, and 52,344, 118 MW, before GB200 took a 2026 TensorRT-LLM floor; the warning's own test:
    # tests/test_lifecycle.py); the reserved prices are 3-year contracts for a month's pre-training
    # (29,952 x 3 x 8,760 h x $8.50 = $6.69B; 122,904 x 3 x 8,760 x $4.05 = $13.1B)
    batch = ""
    assert r.stderr == batch + (
        "ipd: note: pre-training is charged for the days it rents its GPUs at contract prices, as if "
        "other work paid the contracts' other hours (whole terms: vera-rubin-nvl72's 29,952 GPUs for 3 "
        "year(s) at reserved $6.69B; gb200-nvl72's 122,904 GPUs for 3 year(s) at reserved $13.1B); tco "
        "pricing charges owned GPUs for those days alone too\n"
        # the RL pool search's pools, within the workload's 2,048 GPUs: 2,048 x 960.9 s x $8.50 /
        # 3,600 = $4,647 a step on all of them, 1,168 x 1,196.9 s x $8.50 / 3,600 = $3,301 on the pool
        "ipd: note: vera-rubin-nvl72: RL post-training runs on 1,168 GPUs (1,024 training + 144 "
        "generating) of the 2,048 its RL workload's gpus allow: the pool with the least cost per step "
        "whose schedule fits the year, $3,301 a step of 1,197 s; all 2,048 would cost $4,647 a step of "
        "960.9 s (the workload's pin_gpus: true, or `ipd rl --gpus`, runs on all of them)\n"
        "ipd: note: gb200-nvl72: RL post-training runs on 1,600 GPUs (1,024 training + 576 "
        "generating) of the 2,048 its RL workload's gpus allow: the pool with the least cost per step "
        "whose schedule fits the year, $2,539 a step of 1,410 s; all 2,048 would cost $2,937 a step of "
        "1,275 s (the workload's pin_gpus: true, or `ipd rl --gpus`, runs on all of them)\n"
        # RL likewise: its GPU-hours a year over its pool, and the pool kept all year
        # (1,168 x 8,760 h x $8.50 = $87.0M; 1,600 x $4.05 = $56.8M)
        "ipd: note: RL post-training is charged for the hours its steps run, as if other work paid its "
        "pool's other hours: vera-rubin-nvl72's 1,168 GPUs 21.1 days a year (5.8%), $87M a year kept "
        "for RL all year; gb200-nvl72's 1,600 GPUs 24.5 days a year (6.7%), $56.8M a year kept for RL "
        "all year\n" + RANGES + "vera-rubin-nvl72 32, its rental price $8.5 at the bottom of $8.5-9.75 "
        "among them; gb200-nvl72 28, its rental price $4.05 at the top of $3.3-4.05 among them\n"
    )
    # owned, a serving deployment that does not fill its last rack says what it leaves unpriced,
    # unless under half a percent: Rubin's 11,484 GPUs are 159 racks and 36 GPUs, leaving 36 (0.31 %;
    # its 9,024 of 2026-12-03 left 48, 0.53 %, and said so; test_lifecycle's 18-GPU deployment says
    # it), GB200's 43,272 fill 601 racks
    # under tco the same assumption (other work keeps the owned GPUs busy at utilisation 0.85) is
    # said with what buying the GPUs costs (a procurement review: nothing was said): Rubin's 29,952
    # GPUs are 416 racks x $7.8M = $3.24B, GB200's 122,904 are 1,707 racks x $3.75M = $6.4B; the
    # RL pools of 1,168 and 1,600 GPUs 17 and 23 racks (16.2 and 22.2 rounded up): $133M, $86.2M;
    # the RL pools' notes still say which pool each system runs, at its owning cost
    owned = run_cli("compare", "vera-rubin", "blackwell", "--pricing", "tco", "-f", "json").stderr
    lines = owned.splitlines()
    assert lines[0] == (
        "ipd: note: pre-training is charged the owning cost of the hours it runs, as if other work kept "
        "the GPUs busy the rest of their life at economics.utilisation 0.85 (bought for the run alone: "
        "vera-rubin-nvl72's 29,952 GPUs (416 systems, $3.24B to buy) for 29.5 days of their 5-year "
        "life; gb200-nvl72's 122,904 GPUs (1,707 systems, $6.4B to buy) for 29.9 days of their 5-year "
        "life)"
    )
    assert [ln.split(": RL post-training runs on ")[0] for ln in lines[1:3]] == [
        "ipd: note: vera-rubin-nvl72",
        "ipd: note: gb200-nvl72",
    ]
    assert lines[3:] == [
        "ipd: note: RL post-training is charged the owning cost of the hours its steps run, as if other "
        "work kept its pool busy the rest of the time at economics.utilisation 0.85: vera-rubin-nvl72's "
        "1,168 GPUs (17 systems, $133M to buy) 21.1 days a year (5.8%); gb200-nvl72's 1,600 GPUs (23 "
        "systems, $86.2M to buy) 24.5 days a year (6.7%)",
        RANGES + "vera-rubin-nvl72 31; gb200-nvl72 27",
    ]
    d = r.json()
    assert d["schema_version"] == "1.0"
    assert d["workload"]["name"] == "frontier-agentic" and d["workload"]["kind"] == "scenario"
    assert [s["hardware"] for s in d["systems"]] == ["vera-rubin-nvl72", "gb200-nvl72"]
    for s in d["systems"]:
        ipd = s["intelligence_per_dollar"]
        for key in (
            "usd_per_solved_task",
            "solved_tasks_per_kusd",
            "solved_tasks_per_mwh",
            "lifecycle_cost_usd",
        ):
            assert isinstance(ipd[key], float), key
        assert set(ipd["cost_breakdown_usd"]) == {"pretraining", "post_training", "serving"}
        p = s["pretraining"]
        for key in ("gpus", "wall_days", "gpu_hours", "cost_usd", "energy_mwh", "mfu"):
            assert isinstance(p[key], int | float), key
        for key in ("step_seconds", "usd_per_step", "gpu_hours_per_step", "samples_per_s"):
            assert s["rl"][key] > 0
        assert set(s["rl"]["phases"]) == {
            "generation_s",
            "environment_s",
            "logprob_s",
            "training_s",
            "weight_sync_s",
        }
        for key in (
            "tokens_per_s_per_gpu",
            "tokens_per_s_per_user",
            "ttft_s",
            "tpot_ms",
            "usd_per_million_output_tokens",
            "tokens_per_s_per_mw",
            "instance_gpus",
            "concurrency",
        ):
            assert s["serving"][key] > 0
        assert s["assumptions"], "every estimate lists its inputs"


def test_pretrain_workload_compare_keeps_the_pretraining_contract():
    d = run_cli("compare", "vera-rubin", "blackwell", "--workload", "pretrain-10t-moe", "-f", "json").json()
    assert d["workload"]["name"] == "pretrain-10t-moe"
    for s in d["systems"]:
        assert s["pretraining"]["gpus"] > 0 and s["rl"] is None and s["serving"] is None


def test_goldens_compare_decimals_to_12_digits_and_nothing_else():
    # the last-bit drift of numpy's exp/log between CPUs (the compare golden's slot_queue_s,
    # 0.36796476644157583 against 0.3679647664415768) is equal at 12 digits
    a, b = '"slot_queue_s": 0.36796476644157583', '"slot_queue_s": 0.3679647664415768'
    assert a != b and _to_12_digits(a) == _to_12_digits(b) == '"slot_queue_s": 0.367964766442'
    # a change of 1e-11 of the value is not
    assert _to_12_digits('"x": 0.36796476644') != _to_12_digits('"x": 0.36796476645')
    # integers, versions, release names and exponents keep their text or their value exactly
    assert _to_12_digits("gpus 29952, v0.2.0, 1.1.0rc2, 2.5e-05") == "gpus 29952, v0.2.0, 1.1.0rc2, 2.5e-05"


def test_compare_golden_json_and_csv():
    golden(
        "compare-vera-rubin-blackwell.json",
        run_cli("compare", "vera-rubin", "blackwell", "-f", "json").stdout,
    )
    out = run_cli(
        "compare", "vera-rubin", "blackwell", "hopper", "--workload", "pretrain-10t-moe", "-f", "csv"
    ).stdout
    golden("compare-vera-rubin-blackwell-hopper.csv", out)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["hardware"] for r in rows] == ["vera-rubin-nvl72", "gb200-nvl72", "h100-sxm"]
    float(rows[0]["pretraining.cost_usd"])  # raw numbers, no currency symbols


def test_compare_table_names_the_drivers():
    r = run_cli("compare", "vera-rubin", "blackwell", "--format", "table")
    assert r.code == 0
    for text in (
        "GPUs",
        "gb200-nvl72 vs vera-rubin-nvl72",
        "Dense peak at precision",
        "Effective MFU",
        "drivers",
    ):
        assert text in r.stdout, text


def test_train_json_matches_the_compare_object():
    r = run_cli(
        "train",
        "--hardware",
        "vera-rubin",
        "--model",
        "moe-10t",
        "--tokens",
        "1e14",
        "--days",
        "30",
        "--precision",
        "fp4",
        "--format",
        "json",
    )
    assert r.code == 0, r.stderr
    c = run_cli("compare", "vera-rubin", "--workload", "pretrain-10t-moe", "--format", "json").json()
    assert r.json()["pretraining"] == c["systems"][0]["pretraining"]


def test_yaml_format_and_listing_commands():
    r = run_cli("hardware", "list", "--format", "yaml")
    assert r.code == 0 and "vera-rubin-nvl72" in r.stdout
    r = run_cli("models", "show", "deepseek-r1", "--format", "json")
    assert r.code == 0 and r.json()["name"] == "deepseek-v3" and r.json()["sources"]
    r = run_cli("workloads", "list", "--format", "csv")
    assert r.code == 0 and r.stdout.startswith("name,")


def test_memory_reads_in_one_unit_per_name_across_commands():
    # a newcomer audit: pre-training reports a plan's memory in GB, the RL trainer in bytes, and
    # `hardware list` both hbm_gib and hbm_gb. rl.trainer gains memory_gb_per_gpu (its bytes / 1e9);
    # hbm_gb is hbm_gib read in 10^9 bytes: H100's 80 GiB x 2^30 / 1e9 = 85.899 -> 85.9
    h100 = next(
        r for r in run_cli("hardware", "list", "-f", "json").json()["items"] if r["name"] == "h100-sxm"
    )
    assert (h100["hbm_gib"], h100["hbm_gb"]) == (80, 85.9)
    trainer = run_cli("rl", "--hardware", "h100", "-f", "json").json()["rl"]["trainer"]
    assert trainer["memory_gb_per_gpu"] == pytest.approx(trainer["memory_bytes_per_gpu"] / 1e9, rel=1e-15)
    # and the plan fits the usable HBM, 80 GiB x 0.85 (efficiency.hbm_usable_fraction) = 73.01 GB
    assert 60 < trainer["memory_gb_per_gpu"] <= 80 * 2**30 * 0.85 / 1e9


def test_hardware_list_names_each_systems_price_and_capex():
    # a capacity planner's review: the systems' first listing named no price; the values are
    # configs/hardware.yaml's and hardware-legacy.yaml's (GB200 NVL72 reserved $4.05 for 3 years,
    # capex $3.75M; A100 has no reserved price, so `rental` charges its on-demand $2.45; H20 has
    # only a tco-model point, $0.90, which economics.rental_label_preference takes third)
    rows = {r["name"]: r for r in run_cli("hardware", "list", "-f", "json").json()["items"]}
    gb200 = rows["gb200-nvl72"]
    assert (gb200["price_usd_per_gpu_hour"], gb200["pricing"], gb200["price_term_years"]) == (
        4.05,
        "rental:reserved",
        3,
    )
    assert gb200["capex_usd"] == 3_750_000
    a100 = rows["a100-sxm"]
    assert (a100["price_usd_per_gpu_hour"], a100["pricing"], a100["price_term_years"]) == (
        2.45,
        "rental:on-demand",
        None,
    )
    assert (rows["h20"]["price_usd_per_gpu_hour"], rows["h20"]["pricing"]) == (0.9, "rental:tco-model")
    # the price the estimates charge, a --set included
    r = run_cli("hardware", "list", "-f", "csv", "--set", "systems.gb200-nvl72.prices.reserved=3.3")
    row = next(r for r in csv.DictReader(io.StringIO(r.stdout)) if r["name"] == "gb200-nvl72")
    assert float(row["price_usd_per_gpu_hour"]) == 3.3
    args = ["--model", "llama-3.1-8b", "--tokens", "1e9", "--gpus", "72", "-f", "json"]
    for system, row in (("gb200-nvl72", gb200), ("a100-sxm", a100)):
        trained = run_cli("train", "--hardware", system, *args).json()["pretraining"]
        assert (trained["price_usd_per_gpu_hour"], trained["pricing"]) == (
            row["price_usd_per_gpu_hour"],
            row["pricing"],
        )


def test_train_and_rl_note_the_ranges_as_compare_does_for_the_same_run():
    # a capacity planner's review: the note that a sampled sweep's median sits off the estimate came
    # with `compare --workload` and not with `train` or `rl` of the same run
    def notes(r):
        assert r.code == 0, r.stderr
        return [line for line in r.stderr.splitlines() if line.startswith("ipd: note:")]

    trained = run_cli(
        "train", "--hardware", "vera-rubin", "--model", "moe-10t", "--tokens", "1e14", "--days", "30",
        "--precision", "fp4", "-f", "json",
    )  # fmt: skip
    compared = run_cli("compare", "vera-rubin", "--workload", "pretrain-10t-moe", "-f", "json")
    assert notes(trained) == notes(compared) and any(n.startswith(RANGES) for n in notes(trained))
    rl = run_cli("rl", "--hardware", "gb200", "--workload", "rl-swe-agent", "-f", "json")
    compared = run_cli("compare", "gb200", "--workload", "rl-swe-agent", "-f", "json")
    assert notes(rl) == notes(compared) and notes(rl)[-1].startswith(RANGES + "gb200-nvl72 ")


def test_unknown_names_exit_2_with_suggestion():
    r = run_cli("compare", "vera-rubin", "blakwell")
    assert r.code == 2
    assert r.stdout == ""
    assert r.stderr.strip() == "ipd: error: unknown hardware 'blakwell'; did you mean 'blackwell'?"
    r = run_cli(
        "train", "--hardware", "h100-sxn", "--model", "llama-3.1-8b", "--tokens", "1e12", "--gpus", "8"
    )
    assert r.code == 2 and "did you mean 'h100-sxm'?" in r.stderr
    # separators do not hide a name ('llama3'); a list cut short says how many more and where
    r = run_cli("train", "--hardware", "h100", "--model", "llama3", "--tokens", "1e12", "--gpus", "8")
    assert r.code == 2 and "did you mean 'llama-3.1-8b'," in r.stderr
    r = run_cli("serve", "--hardware", "zzz", "--model", "llama-3.1-8b")
    assert r.code == 2 and r.stderr.rstrip().endswith("more (ipd hardware list)")


def test_usage_errors_exit_2_and_infeasible_exit_1():
    assert run_cli("compare", "hopper", "--workload", "pretrain-10t-moe", "--format", "xml").code == 2
    r = run_cli("train", "--hardware", "hopper", "--model", "llama-3.1-8b", "--tokens", "1e12")
    assert r.code == 2 and "--gpus or --days" in r.stderr
    r = run_cli(
        "train", "--hardware", "hopper", "--model", "llama-3.1-405b", "--tokens", "1e12", "--gpus", "8"
    )
    assert r.code == 1 and "needs at least" in r.stderr and "Traceback" not in r.stderr


def test_debug_env_shows_the_traceback():
    import pytest

    from ipd_cli.errors import InputError

    with pytest.raises(InputError):
        run_cli("compare", "nope", env={"IPD_DEBUG": "1"})


def test_version():
    r = run_cli("--version")
    assert r.code == 0 and r.stdout.startswith("ipd ")


def test_every_command_has_help_with_an_example():
    # walk the real command tree, so a new command without an example fails here
    import typer.main

    from ipd_cli.cli import app

    def walk(group, prefix):
        for name, cmd in group.commands.items():
            if hasattr(cmd, "commands"):
                yield from walk(cmd, [*prefix, name])
            else:
                yield [*prefix, name]

    commands = list(walk(typer.main.get_command(app), []))
    assert ["serve"] in commands and ["plot", "curve"] in commands
    for cmd in commands:
        r = run_cli(*cmd, "--help")
        assert r.code == 0, cmd
        assert "Example:" in r.stdout, cmd


def test_the_traffic_help_quotes_the_catalogs_ttft_target(catalog):
    # `ipd serve --help` does not load the catalog (start-up), so the TTFT target its
    # --requests-per-s text quotes is typed there: a catalog edit must be mirrored in it
    r = run_cli("serve", "--help", env={"COLUMNS": "400"})
    target_s = catalog.serving.ttft_target_s.value
    assert target_s == 2.0  # configs/serving.yaml, MLPerf Inference's server TTFT constraint
    assert f"serving.ttft_target_s ({target_s:g} s;" in " ".join(r.stdout.split())


def test_output_schema_has_not_drifted():
    committed = json.loads((GOLDEN / "schema.json").read_text())
    assert output_schema() == committed, "output schema changed: review, then IPD_REGEN_GOLDEN=1 pytest"


def test_schema_command_prints_the_committed_schema():
    r = run_cli("schema")
    golden("schema.json", r.stdout)


def test_compare_output_validates_against_its_schema():
    from ipd_cli.engine.results import CompareResult

    d = run_cli_once("compare", "vera-rubin", "blackwell", "-f", "json").json()
    assert CompareResult.model_validate(d).model_dump(mode="json") == d


def test_every_listings_rows_validate_against_their_row_schema(tmp_path):
    # a scripting review: `ipd schema` typed the rows of explain, calibrate, diff and the catalog
    # listings as free objects, so no test could tell when one drifted; each kind has a row model
    from ipd_cli.engine.rows import ROWS

    cases = write(
        tmp_path / "cases.yaml",
        "sources:\n  mine: {title: my notes, date: 2026-12-01}\ncases:\n"
        "  - {id: mine, split: fitting, kind: serve, description: d, source: mine,\n"
        "     inputs: {hardware: h200, model: llama-2-70b, precision: fp8, kv_precision: fp8,\n"
        "              input_tokens: 221, output_tokens: 292, layout: tp1, mode: offline-max-throughput},\n"
        "     measured: {metric: tokens_per_s_per_gpu, value: 4374}}\n",
    )
    explained = run_cli_once("explain", "vera-rubin", "-f", "json")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(explained.stdout)
    b.write_text(run_cli("explain", "vera-rubin", "--set", "economics.pue=1.4", "-f", "json").stdout)
    runs = [
        run_cli("hardware", "list", "-f", "json"),
        run_cli("models", "list", "-f", "json"),
        run_cli("workloads", "list", "-f", "json"),
        explained,
        run_cli("calibrate", "--cases", str(cases), "-f", "json"),
        run_cli("diff", str(a), str(b), "--all", "-f", "json"),
    ]
    kinds = set()
    for r in runs:
        assert r.code == 0, r.stderr
        d = r.json()
        kinds.add(d["kind"])
        assert d["items"], d["kind"]
        for row in d["items"]:
            assert ROWS[d["kind"]].model_validate(row).model_dump(mode="json") == row, d["kind"]
    assert kinds == set(ROWS)
    # a knob none of whose cases the model reaches is reported with no fit (a code review)
    from ipd_cli import validate as val

    skipped = val._skipped("efficiency.training_share", 0.684, [])
    assert ROWS["calibration"].model_validate(skipped).model_dump(mode="json") == skipped


def test_serve_done_check_and_curve():
    r = run_cli(
        "serve",
        "--hardware",
        "vera-rubin",
        "--model",
        "kimi-k2",
        "--precision",
        "fp4",
        "--tokens-per-user-s",
        "50",
        "--format",
        "json",
    )
    assert r.code == 0, r.stderr
    s = r.json()["serving"]
    for key in (
        "tokens_per_s_per_gpu",
        "tokens_per_s_per_user",
        "ttft_s",
        "tpot_ms",
        "usd_per_million_output_tokens",
        "tokens_per_s_per_mw",
        "instance_gpus",
        "concurrency",
    ):
        assert s[key] > 0, key
    assert s["tokens_per_s_per_user"] >= 50
    c = run_cli(
        "serve",
        "--hardware",
        "b200",
        "--model",
        "llama-3.3-70b",
        "--precision",
        "fp8",
        "--curve",
        "-f",
        "json",
    )
    points = c.json()["serving"]
    speeds = [p["interactivity_tokens_per_s"] for p in points]  # the frontier's axis: 1 / TPOT
    throughput = [p["tokens_per_s_per_gpu"] for p in points]
    assert speeds == sorted(speeds) and throughput == sorted(throughput, reverse=True)  # the frontier
    assert all(p["configuration"] for p in points)
    t = run_cli(
        "serve",
        "--hardware",
        "b200",
        "--model",
        "llama-3.3-70b",
        "--precision",
        "fp8",
        "--curve",
        "-f",
        "table",
    )
    assert "tok/s per user" in t.stdout
    bad = run_cli("serve", "--hardware", "b200", "--model", "llama-3.3-70b", "--curve", "--concurrency", "4")
    assert bad.code == 2 and "--concurrency picks one point; --curve gives them all" in bad.stderr


SERVE = ("serve", "--hardware", "h100-sxm", "--model", "llama-3.1-70b", "--precision", "fp8", "-f", "json")


def test_serve_names_the_configuration_and_pins_narrow_the_search():
    free = run_cli(*SERVE)
    assert free.code == 0, free.stderr
    s = free.json()["serving"]
    assert (
        s["configuration"]
        and s["deployment_gpus"] >= s["instance_gpus"]
        and s["configurations_searched"] > 1000
    )
    pinned = run_cli(*SERVE, "--layout", "tp4", "--aggregated")
    assert pinned.code == 0, pinned.stderr
    p = pinned.json()["serving"]
    assert p["configuration"].startswith("TP4 batch ") and p["tp"] == 4 and p["disaggregated"] is False
    assert p["tokens_per_s_per_gpu"] <= s["tokens_per_s_per_gpu"]  # a pin can only narrow the search
    dis = run_cli(*SERVE, "--instance-gpus", "2", "--disaggregated").json()["serving"]
    assert dis["disaggregated"] and dis["instance_gpus"] == 2 and " prefill x " in dis["configuration"]
    assert (
        dis["deployment_gpus"]
        == dis["prefill_instances"] * dis["prefill_instance_gpus"] + dis["decode_instances"] * 2
    )


def test_serve_eplb_pins_both_pools():
    base = ("serve", "--hardware", "gb200-nvl72", "--model", "deepseek-v3", "--precision", "fp4")
    off = run_cli(*base, "--no-eplb", "--disaggregated", "-f", "json")
    assert off.code == 0, off.stderr
    s = off.json()["serving"]
    assert s["eplb"] is False and "EPLB" not in s["configuration"]
    on = run_cli(*base, "--eplb", "-f", "json")
    assert on.code == 0, on.stderr
    assert on.json()["serving"]["eplb"] is True and "EPLB" in on.json()["serving"]["configuration"]
    dense = run_cli("serve", "--hardware", "h100-sxm", "--model", "llama-3.1-70b", "--eplb")
    assert dense.code == 2 and "no routed experts" in dense.stderr and "--eplb" in dense.stderr
    assert dense.stdout == "" and "Traceback" not in dense.stderr


def test_serve_stack_and_speculative_options():
    base = (
        "serve",
        "--hardware",
        "mi355x",
        "--model",
        "deepseek-r1",
        "--tokens-per-user-s",
        "50",
        "-f",
        "json",
    )
    default = run_cli(*base)
    assert default.code == 0, default.stderr
    d = default.json()["serving"]
    # the family's best published stack; speculation searched (MTP wins at 50 tokens/s per user)
    assert (
        d["stack"] == "sglang"
        and d["stack_family"] == "cdna4"
        and d["stack_borrowed_from"] == "vllm on cdna4"
    )
    assert d["draft_depth"] >= 1 and d["speculation"].startswith("mtp: ") and "MTP" in d["configuration"]
    vllm = run_cli(*base, "--stack", "vllm", "--speculative", "off").json()["serving"]
    assert vllm["stack"] == "vllm" and vllm["draft_depth"] == 0 and vllm["speculation"] == "off"
    assert vllm["speculative_speedup"] == 1.0 and "MTP" not in vllm["configuration"]
    two = run_cli(*base, "--speculative", "2").json()["serving"]
    assert two["draft_depth"] == 2 and two["speculative_speedup"] == 2.43  # the catalog's MTP at depth 2
    assert two["speculation"] == "mtp: 2 drafts, 2.43 tokens/step"
    on = run_cli(*base, "--speculative", "on").json()["serving"]
    assert on["draft_depth"] >= 1
    # the stack is named in the table too
    table = run_cli(*base[:-2], "--stack", "atom", "-f", "table")
    assert table.code == 0 and "atom" in table.stdout
    for bad, words in (
        (("--stack", "trtllm"), "--stack trtllm has no measurement or profile for mi355x (cdna4 family)"),
        (("--stack", "sglng"), "unknown --stack 'sglng'"),
        (
            ("--stack-release", "1.1.0rc2"),
            "unknown --stack-release '1.1.0rc2' for sglang (the serving stack of mi355x); releases measured ",
        ),
        (("--stack", "vllm", "--stack-release", "1.1.0RC2"), "unknown --stack-release '1.1.0rc2' for vllm"),
        (("--speculative", "7"), "acceptance is measured up to 3 draft tokens"),
        (("--speculative", "maybe"), "--speculative is auto, off, on or a draft depth"),
    ):
        r = run_cli(*base, *bad)
        assert r.code == 2 and words in r.stderr, (bad, r.stderr)


def test_serve_refuses_a_release_the_catalog_does_not_hold_in_one_line():
    r = run_cli(
        "serve", "--hardware", "b200", "--model", "deepseek-r1", "--stack-release", "1.2", "-f", "json"
    )
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "ipd: error: unknown --stack-release '1.2' for trtllm (the serving stack of b200); releases measured "
        "apart: 1.1.0rc2 (leave it out for the stack's profile)"
    ]
    # refused before any estimate in the words rl and compare use, on every system
    r = run_cli("serve", "--hardware", "mi300x", "--model", "deepseek-r1", "--stack-release", "1.1.0rc2")
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "ipd: error: unknown --stack-release '1.1.0rc2' for sglang (the serving stack of mi300x); releases "
        "measured apart: 0.5.7-mori-0122 (leave it out for the stack's profile)"
    ]


# B200 FP4 DeepSeek-V3 TEP8 aggregated, no draft: every point's prompt (ipd's ~15.5 ms at 922 new
# tokens, ~147 ms at 8,192) against TensorRT-LLM 1.1.0rc2's 42.1 ms stall
RELEASE_CURVE = (
    "serve", "--hardware", "b200", "--model", "deepseek-v3", "--precision", "fp4", "--layout", "tep8",
    "--aggregated", "--speculative", "off", "--stack", "trtllm", "--no-eplb", "--output-tokens", "922",
    "--curve", "-f", "json",
)  # fmt: skip


def test_serve_curve_takes_a_release_and_moves_exactly_where_its_stall_binds():
    """With 922 new tokens the prompt (15.5 ms) is below the stall: every point takes 42.1 ms a
    prompt, its decode step that of the release's own FP4 floor (87 us a layer, pinned on the plain
    curve), so tokens/s per GPU = B x 922 / (B x 0.0421 + 922 x step) / 8 GPUs (batch 1935 at a
    65.74 ms step: 1,784,070 / (81.46 + 60.61) / 8 = 1,569.6). With 8,192
    the prompt (147 ms) is above it: the curve is the plain one, point for point."""
    runs = {}
    for isl in ("922", "8192"):
        # the release's own FP4 floor (87 us a layer) pinned on the plain curve leaves the stall
        # alone between the two
        floor_87 = ("--set", "serving.stacks.trtllm.profiles.blackwell.step_overhead_us_per_layer=87")
        for release in (floor_87, ("--stack-release", "1.1.0rc2")):
            r = run_cli(*RELEASE_CURVE, "--input-tokens", isl, *release)
            assert r.code == 0, r.stderr
            runs[isl, release != floor_87] = json.loads(r.stdout)
    plain, rc2 = runs["922", False]["serving"], runs["922", True]["serving"]
    assert [p["configuration"] for p in rc2] == [p["configuration"] for p in plain] and len(rc2) > 10
    for p, q in zip(plain, rc2, strict=True):
        assert p["prefill_instance_s"] < 0.0421 and q["prefill_instance_s"] == pytest.approx(0.0421)
        assert q["step_time_ms"] == p["step_time_ms"] and q["stack_release"] == "1.1.0rc2"
        b, step_s = q["concurrency"], q["step_time_ms"] / 1e3
        assert q["tokens_per_s_per_gpu"] == pytest.approx(b * 922 / (b * 0.0421 + 922 * step_s) / 8, rel=1e-9)
        assert q["tokens_per_s_per_gpu"] < p["tokens_per_s_per_gpu"]
    first = rc2[0]
    assert (first["concurrency"], round(first["tokens_per_s_per_gpu"], 1)) == (1935, 1569.6)
    stall = [a for a in runs["922", True]["assumptions"] if a["name"].startswith("prompt stall")]
    assert [(a["value"], a["unit"], a["source"]) for a in stall] == [(42.1, "ms", "inferencex-trt-1.1-stall")]
    long_plain, long_rc2 = runs["8192", False]["serving"], runs["8192", True]["serving"]
    assert all(p["prefill_instance_s"] > 0.0421 for p in long_plain)
    assert [p | {"stack_release": "1.1.0rc2"} for p in long_plain] == long_rc2


RC2_NOTE = (
    "ipd: note: trtllm 1.1.0rc2 prices nothing on {system} ({family}) at {precision}: it was measured on "
    "blackwell at fp4, fp8 only; the estimate is trtllm's profile alone"
)


def test_a_release_that_prices_nothing_on_the_system_says_so_once_on_stderr():
    """TensorRT-LLM 1.1.0rc2 holds values on blackwell only (prompt stall at fp4, floors at fp4 and
    fp8, configs/serving-stacks.yaml): H100 at its fp8 and B200 at bf16 price nothing of it, which
    only an assumptions row said (a newcomer audit); B200 at fp8 takes its floor and says nothing."""
    base = ("serve", "--hardware", "h100", "--model", "llama-3.1-70b", "-f", "json")
    plain, rc2 = run_cli(*base), run_cli(*base, "--stack-release", "1.1.0rc2")
    assert plain.code == rc2.code == 0, rc2.stderr
    assert rc2.json()["serving"] | {"stack_release": None} == plain.json()["serving"]  # nothing moved
    note = RC2_NOTE.format(system="h100-sxm", family="hopper", precision="fp8")
    assert note in rc2.stderr.splitlines() and "1.1.0rc2" not in plain.stderr
    b200 = ("serve", "--hardware", "b200", "--model", "llama-3.1-70b", "--stack-release", "1.1.0rc2")
    bf16, fp8 = (run_cli(*b200, "--precision", p, "-f", "json") for p in ("bf16", "fp8"))
    assert RC2_NOTE.format(system="b200", family="blackwell", precision="bf16") in bf16.stderr.splitlines()
    assert fp8.code == 0 and "prices nothing" not in fp8.stderr
    rl = run_cli("rl", "--hardware", "h100", "--workload", "rl-math-reasoning", "--stack-release", "1.1.0rc2")
    assert rl.code == 0 and note in rl.stderr.splitlines()  # its rollouts at the workload's fp8
    scenario = ("compare", "b200", "h200", "--workload", "open-model-agent", "--stack-release", "1.1.0rc2")
    compared = run_cli(*scenario, "-f", "json")
    h200 = RC2_NOTE.format(system="h200", family="hopper", precision="fp8")
    assert [line for line in compared.stderr.splitlines() if "prices nothing" in line] == [h200]


def test_a_release_on_a_disaggregated_point_says_it_moves_only_the_time_to_first_token():
    """A review (hz): a release priced on the family said nothing on a disaggregated point, where its
    prompt stall (aggregated instances only) and floor (not the decode pool, which keeps trtllm's
    measured 68.3 us) leave the rate as it was. B200 Llama 3.1 70B FP4 picks `5 prefill x TP1 +
    12 decode x TP1`: the same tokens/s per GPU with and without 1.1.0rc2, a shorter ttft_s (its
    prompt's layers at the release's 87 us floor, not 100) and the note once; pinned aggregated,
    the release prices the decode step and no note is printed."""
    base = ("serve", "--hardware", "b200", "--model", "llama-3.1-70b", "--precision", "fp4", "-f", "json")
    plain, rc2 = run_cli(*base), run_cli(*base, "--stack-release", "1.1.0rc2")
    assert plain.code == rc2.code == 0, rc2.stderr
    p, r = plain.json()["serving"], rc2.json()["serving"]
    assert p["disaggregated"] and r["configuration"] == p["configuration"]
    assert r["tokens_per_s_per_gpu"] == p["tokens_per_s_per_gpu"] and r["ttft_s"] < p["ttft_s"]
    note = (
        "ipd: note: trtllm 1.1.0rc2 on b200 at fp4, a disaggregated deployment: the decode pool keeps "
        "trtllm's own floor and its prompt stall applies to aggregated instances only, so the release "
        "moves only each prompt's own time to its first token (ttft_s, through its floor per layer)"
    )
    assert rc2.stderr.splitlines().count(note) == 1 and "1.1.0rc2" not in plain.stderr
    agg = run_cli(*base, "--aggregated", "--stack-release", "1.1.0rc2")
    assert agg.code == 0 and "1.1.0rc2" not in agg.stderr and not agg.json()["serving"]["disaggregated"]


def test_explain_says_which_serving_efficiencies_roadmap_rubin_borrows():
    r = run_cli_once("explain", "vera-rubin", "-f", "json")
    assert r.code == 0, r.stderr
    rows = {i["metric"]: i for i in r.json()["items"] if i["hardware"] == "vera-rubin-nvl72"}
    # a decode pool's floor and an aggregated instance's (RL rollouts) from B200's profile, through
    # Blackwell Ultra's
    pool = rows["input: per-step overhead per layer (disaggregated decode pool)"]
    assert (
        "(estimate); range 10 to 400; borrowed: trtllm on rubin: borrowed from trtllm on blackwell"
        in (pool["formula"])
    )
    assert pool["inputs"].endswith(
        "--set serving.stacks.trtllm.profiles.blackwell.disaggregated_step_overhead_us_per_layer"
    )
    floor = rows["input: per-step overhead per layer"]
    assert "borrowed: trtllm on rubin: borrowed from trtllm on blackwell" in floor["formula"]
    assert floor["inputs"].endswith(
        "--set serving.stacks.trtllm.profiles.blackwell.step_overhead_us_per_layer"
    )
    assert rows["input: serving stack"]["value"] == "trtllm"


def test_a_layout_and_an_instance_size_that_disagree_are_a_usage_error_naming_both():
    # a user review: `--layout tp8pp4 --instance-gpus 16` was told only that no configuration had 4
    # pipeline stages; 8 x 4 = 32 GPUs is not 16, and tp8pp2 is the layout of 16
    base = ("serve", "--hardware", "h100", "--model", "llama-3.1-70b")
    r = run_cli(*base, "--layout", "tp8pp4", "--instance-gpus", "16")
    assert r.code == 2 and r.stdout == ""
    assert r.stderr == (
        "ipd: error: --layout tp8pp4 runs on 32 GPUs (4 stages of 8), not --instance-gpus 16: drop one; "
        "tp8pp2 runs on 16\n"
    )
    assert run_cli(*base, "--layout", "tp8pp2", "--instance-gpus", "16", "-f", "json").code == 0
    # a one-stage layout echoed as typed; DEP is never pipelined: its layout of 16 is dep16 (a code
    # review: it suggested dep8pp2, which is then refused)
    moe = ("serve", "--hardware", "h100", "--model", "deepseek-v3", "--instance-gpus", "16")
    r = run_cli(*moe, "--layout", "dep8")
    assert r.code == 2 and r.stderr == (
        "ipd: error: --layout dep8 runs on 8 GPUs (one stage), not --instance-gpus 16: drop one; "
        "dep16 runs on 16\n"
    )


def test_an_infeasible_pin_exits_1_naming_the_nearest_configuration():
    r = run_cli(*SERVE[:-2], "--precision", "bf16", "--instance-gpus", "1", "--layout", "tp1")
    assert r.code == 1 and "the nearest feasible configuration is" in r.stderr
    assert "--instance-gpus 1" in r.stderr or "--instance-gpus" in r.stderr
    bad = run_cli(*SERVE, "--layout", "dep8")
    assert bad.code == 2 and "--layout" in bad.stderr and "dense" in bad.stderr


def test_serve_curve_csv_has_one_row_per_point_with_numeric_columns():
    r = run_cli("serve", "--hardware", "b200", "--model", "llama-3.3-70b", "--curve", "-f", "csv")
    assert r.code == 0, r.stderr
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert len(rows) > 3 and "serving.tokens_per_s_per_gpu" in rows[0]
    assert all(float(row["serving.tokens_per_s_per_gpu"]) > 0 for row in rows)
    assert not any("{" in value for row in rows for value in row.values())  # no dict text in a cell


def test_serve_curve_names_the_point_its_top_level_instance_fields_describe():
    # a newcomer audit: the curve's top-level instance_gpus 1 and max_concurrency 304 are the
    # maximum-throughput point's, while its points reach TP8 (3,813 sequences); the envelope now
    # names that point's configuration, and the fields are that point's
    args = ("serve", "--hardware", "b200", "--model", "llama-3.3-70b", "--precision", "fp8", "--curve")
    r = run_cli(*args, "-f", "json")
    assert r.code == 0, r.stderr
    d = r.json()
    peak = max(d["serving"], key=lambda p: p["tokens_per_s_per_gpu"])
    assert d["max_throughput_configuration"] == peak["configuration"]
    assert (d["instance_gpus"], d["max_concurrency"]) == (peak["instance_gpus"], peak["max_concurrency"])
    assert {p["instance_gpus"] for p in d["serving"]} - {d["instance_gpus"]}  # the others differ


def test_the_attention_imbalance_reads_as_the_step_prices_it_in_both_modes():
    # a review (hz): with fewer sequences than attention ranks a DEP8 decode pool reported 8.0 (its
    # one sequence on one rank: 1 / (1 / 8)) where an aggregated DEP8 reported the measured 1.14,
    # though its step too prices the busiest rank's whole sequence (step_terms' max(., min(m, 1))).
    # Both now read what the step prices: 1 / (1 / 8) = 8.0 at one sequence, 1 / (4 / 8) = 2.0 at
    # four; at 64 (8 a rank) the aggregated 8 x 1.14 / 8 = 1.14 (serving.attention_dp_imbalance)
    base = ("serve", "--hardware", "b200", "--model", "deepseek-r1", "--layout", "dep8", "-f", "json")
    read = {}
    for mode, users in (
        ("--aggregated", 1),
        ("--aggregated", 4),
        ("--aggregated", 64),
        ("--disaggregated", 1),
    ):
        r = run_cli(*base, mode, "--concurrency", str(users))
        assert r.code == 0, r.stderr
        read[mode, users] = r.json()["serving"]["attention_dp_imbalance"]
    want = {("--aggregated", 1): 8.0, ("--aggregated", 4): 2.0, ("--aggregated", 64): 1.14}
    assert read == pytest.approx(want | {("--disaggregated", 1): 8.0}, rel=1e-12)


def test_serve_and_plot_default_to_each_systems_narrowest_precision():
    # issue 13 item 5: `plot curve vera-rubin blackwell` ran Rubin at fp8, far below GB200's fp4
    for hw in ("vera-rubin", "blackwell"):
        r = run_cli("serve", "--hardware", hw, "--model", "kimi-k2", "--curve", "-f", "json")
        assert r.code == 0 and r.json()["precision"] == "fp4", hw
    hopper = run_cli("serve", "--hardware", "hopper", "--model", "llama-3.1-8b", "-f", "json")
    assert hopper.json()["serving"]["precision"] == "fp8"
    plot = run_cli("plot", "curve", "vera-rubin", "blackwell", "--model", "kimi-k2")
    assert plot.code == 0 and "vera-rubin-nvl72" in plot.stdout and "gb200-nvl72" in plot.stdout


def test_a_precision_the_gpu_lacks_is_refused_alone_and_runs_the_next_wider_one_in_a_comparison():
    # H100 has no dense FP4 figure. `train` and `serve` (single-system commands) refuse it, exit 2
    # naming the next wider one (an audit: train ran fp8 with a warning where serve refused);
    # a comparison's pre-training and a scenario's serving run FP8, name the asked precision in JSON
    # (precision_requested) and warn on stderr; data stays on stdout
    alone = ("--hardware", "h100", "--model", "llama-3.1-8b", "--precision", "fp4")
    for cmd in (("train", *alone, "--tokens", "1e12", "--gpus", "64"), ("serve", *alone)):
        r = run_cli(*cmd)
        assert (r.code, r.stdout) == (2, "")
        assert (
            r.stderr == "ipd: error: h100-sxm has no fp4 support (no dense fp4 figure); use --precision fp8\n"
        )
    pretrain = ("--workload", "pretrain-10t-moe", "--set", "workload.model=llama-3.1-8b")
    r = run_cli("compare", "h100", "b200", *pretrain, "--set", "workload.tokens=1e12", "-f", "json")
    assert r.code == 0, r.stderr
    trained = {s["hardware"]: s["pretraining"] for s in r.json()["systems"]}
    assert (trained["h100-sxm"]["precision"], trained["h100-sxm"]["precision_requested"]) == ("fp8", "fp4")
    assert (trained["b200"]["precision"], trained["b200"]["precision_requested"]) == ("fp4", None)
    assert (
        "ipd: warning: h100-sxm pre-trains at fp8, not fp4" in r.stderr and "b200 pre-trains" not in r.stderr
    )
    r = run_cli("compare", "h100", "b200", "--scenario", "open-model-agent", "-f", "json")
    assert r.code == 0, r.stderr
    served = {s["hardware"]: s["serving"] for s in r.json()["systems"]}
    assert served["h100-sxm"]["precision_requested"] == "fp4" and served["h100-sxm"]["precision"] == "fp8"
    assert served["b200"]["precision_requested"] is None and served["b200"]["precision"] == "fp4"
    assert "h100-sxm serves at fp8, not fp4" in r.stderr and "b200 serves" not in r.stderr


def test_an_rl_precision_the_gpu_lacks_is_named_and_warned():
    # A100 has no dense FP8: a scenario's rollouts (the RL workload's inference_precision fp8) run
    # at BF16; H100 has no FP4: an RL trainer asked for FP4 runs FP8. Both were silent.
    r = run_cli("compare", "a100-sxm", "h100", "--scenario", "open-model-agent", "-f", "json")
    assert r.code == 0, r.stderr
    rl = {s["hardware"]: s["rl"] for s in r.json()["systems"]}
    a100, h100 = rl["a100-sxm"], rl["h100-sxm"]
    assert (a100["generation_precision"], a100["generation_precision_requested"]) == ("bf16", "fp8")
    assert (h100["generation_precision"], h100["generation_precision_requested"]) == ("fp8", None)
    assert (
        "a100-sxm generates RL rollouts at bf16, not fp8" in r.stderr and "h100-sxm generates" not in r.stderr
    )
    # `ipd rl` on one system refuses the trainer's precision as it refuses its rollouts' (an audit)
    r = run_cli(
        "rl", "--hardware", "h100", "--workload", "rl-math-reasoning",
        "--set", "workload.training_precision=fp4", "-f", "json",
    )  # fmt: skip
    assert (r.code, r.stdout) == (2, "")
    assert r.stderr == (
        "ipd: error: h100-sxm has no fp4 support (no dense fp4 figure) for the RL workload's trainer; "
        "set its training_precision to fp8 (--set workload.training_precision=fp8)\n"
    )
    # compared, the same workload trains at fp8 on H100, named and warned, as a scenario's rollouts
    cmp = (
        "compare",
        "h100",
        "b200",
        "--workload",
        "rl-math-reasoning",
        "--set",
        "workload.training_precision=fp4",
    )
    r = run_cli(*cmp, "-f", "json")
    assert r.code == 0, r.stderr
    rl = {s["hardware"]: s["rl"] for s in r.json()["systems"]}
    assert (rl["h100-sxm"]["training_precision"], rl["h100-sxm"]["training_precision_requested"]) == (
        "fp8",
        "fp4",
    )
    assert (rl["b200"]["training_precision"], rl["b200"]["training_precision_requested"]) == ("fp4", None)
    assert "ipd: warning: h100-sxm trains (RL) at fp8, not fp4" in r.stderr


def test_an_rl_workload_compared_alone_falls_back_like_a_scenario():
    # `compare gb200 a100 --workload rl-swe-agent` exited 2 with nothing printed: A100 has no dense
    # FP8 for the rollouts. A comparison runs the next wider precision there (BF16), as the same
    # workload inside a scenario does, with its warning; GB200 keeps the workload's FP8.
    for workload in ("rl-swe-agent", "rl-math-reasoning"):
        r = run_cli("compare", "gb200", "a100", "--workload", workload, "-f", "json")
        assert r.code == 0, r.stderr
        rl = {s["hardware"]: s["rl"] for s in r.json()["systems"]}
        a100, gb200 = rl["a100-sxm"], rl["gb200-nvl72"]
        assert (a100["generation_precision"], a100["generation_precision_requested"]) == ("bf16", "fp8")
        assert (gb200["generation_precision"], gb200["generation_precision_requested"]) == ("fp8", None)
        assert r.stderr.count("generates RL rollouts at bf16, not fp8") == 1, r.stderr
        assert "a100-sxm generates RL rollouts at bf16, not fp8" in r.stderr


def test_rl_on_a_gpu_without_the_rollout_precision_names_the_fix_it_can_take():
    # `ipd rl` has no --precision: the error said "use precision bf16"; it names the --set path,
    # and that path runs
    args = ("rl", "--hardware", "a100", "--workload", "rl-swe-agent", "-f", "json")
    r = run_cli(*args)
    assert r.code == 2 and r.stderr.count("\n") == 1
    assert "(--set workload.inference_precision=bf16)" in r.stderr and "use precision" not in r.stderr
    fixed = run_cli(*args, "--set", "workload.inference_precision=bf16")
    assert fixed.code == 0, fixed.stderr
    assert fixed.json()["rl"]["generation_precision"] == "bf16"


def test_a_batch_beyond_the_recipe_is_a_warning():
    # 405B on 15.6T tokens in 7 days takes tens of millions of H100: the deadline is met with a global
    # batch several times the recipe's, which costs tokens; stderr says so (the JSON has the multiplier)
    r = run_cli(
        "train", "--hardware", "hopper", "--model", "llama-3.1-405b", "--tokens", "15.6e12", "--days", "7",
        "-f", "json",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    m = r.json()["pretraining"]["batch_token_multiplier"]
    assert m > 2 and f"it needs {m:.2f}x the tokens for the same loss" in r.stderr
    r = run_cli(
        "train", "--hardware", "hopper", "--model", "llama-3.1-8b", "--tokens", "1e12", "--gpus", "64"
    )
    assert r.code == 0 and "beyond the recipe" not in r.stderr
    # a multiplier the warning would print as 1.00x is not worth one (moe-10t on MI300X: 1.0008)
    from ipd_cli.render.views import warnings

    for m, warned in ((1.0008, False), (1.004, False), (1.006, True)):
        lines = warnings(
            {"hardware": "x", "pretraining": {"batch_token_multiplier": m, "global_batch_tokens": 1e7}}
        )
        assert any("beyond the recipe" in line for line in lines) is warned, m


def test_show_output_validates_against_its_schema():
    # `hardware show` had no schema (the listing one rejects its entry, name, origin and sources)
    from ipd_cli import output_schema
    from ipd_cli.engine.result_base import EntryView

    assert "show" in output_schema()
    r = run_cli("hardware", "show", "b200", "-f", "json")
    assert r.code == 0
    EntryView.model_validate(r.json())


def test_a_serve_instance_larger_than_any_layout_names_the_size():
    # it said only "tensor parallelism must divide the 64 attention heads"
    r = run_cli("serve", "--hardware", "h100", "--model", "llama-3.1-70b", "--instance-gpus", "100000")
    assert r.code == 1 and r.stdout == "" and r.stderr.count("\n") == 1
    assert "an instance of 100,000 GPUs is larger than the search's largest, 256 GPUs" in r.stderr
    assert "(32 scale-up domains of 8, serving.max_instance_domains)" in r.stderr
    assert "smallest of the searched instance sizes" not in r.stderr


def test_a_switch_in_an_error_is_the_flag_as_typed():
    # it echoed "--disaggregated False" for --aggregated
    args = ("serve", "--hardware", "gb200", "--model", "deepseek-v3", "--layout", "tep72")
    r = run_cli(*args, "--aggregated")
    assert r.code == 1 and "with --layout tep72, --aggregated:" in r.stderr and "False" not in r.stderr
    r = run_cli(*args, "--no-eplb")
    assert "with --layout tep72, --no-eplb:" in r.stderr and "False" not in r.stderr
    r = run_cli(*args, "--disaggregated")
    assert "with --layout tep72, --disaggregated:" in r.stderr and "True" not in r.stderr


def test_two_names_of_one_system_are_warned_about_once():
    # `compare vera-rubin rubin` printed two identical columns silently
    r = run_cli("compare", "vera-rubin", "rubin", "--workload", "pretrain-10t-moe", "-f", "json")
    assert r.code == 0, r.stderr
    assert [s["hardware"] for s in r.json()["systems"]] == ["vera-rubin-nvl72"] * 2  # kept, as given
    line = "ipd: warning: vera-rubin-nvl72 is given 2 times (names or aliases of one system)"
    assert r.stderr.count(line) == 1
    other = run_cli("compare", "vera-rubin", "blackwell", "--workload", "pretrain-10t-moe", "-f", "json")
    assert "is given" not in other.stderr


def test_python_m_ipd_cli_cli_runs_the_command():
    # `python -m ipd_cli.cli ...` printed nothing and exited 0 (no __main__ block); helpers and
    # users reach for it as they would for `python -m ipd_cli`
    import os
    import subprocess
    import sys

    env = {**os.environ, "IPD_CACHE_DIR": "off"}
    r = subprocess.run(
        [sys.executable, "-m", "ipd_cli.cli", "hardware", "list", "-f", "json"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kind"] == "hardware"


def test_pricing_picks_a_rental_label():
    # a review: `--pricing rental:on-demand` was refused though outputs print 'rental:reserved';
    # H100's spot price point is $2.60 (Silicon Data), H200 has none
    base = ("serve", "--hardware", "h100", "--model", "llama-3.1-70b")
    r = run_cli(*base, "--pricing", "rental:spot", "-f", "json")
    assert r.code == 0, r.stderr
    s = r.json()["serving"]
    assert (s["pricing"], s["price_usd_per_gpu_hour"]) == ("rental:spot", 2.6)
    assert run_cli(*base, "-f", "json").json()["serving"]["pricing"] == "rental:reserved"
    r = run_cli("serve", "--hardware", "h200", "--model", "llama-3.1-70b", "--pricing", "rental:spot")
    assert r.code == 2 and "systems.h200.prices has no 'spot' price (it has on-demand, reserved" in r.stderr
    r = run_cli(*base, "--pricing", "rental:cheap")
    assert r.code == 2 and "unknown rental price label 'cheap' in --pricing" in r.stderr
