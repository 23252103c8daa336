"""Fixes from a user scripting review (script branch): exact range values, a closed pipe, the library's
parameter names in its errors, user files' source ids, and explain's derivations."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_cli, run_cli_once, write

import ipd_cli
from ipd_cli.engine import sweep as sw
from ipd_cli.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = (ROOT / "configs" / "workloads" / "frontier-agentic.yaml").read_text(encoding="utf-8")


# --- 1. range axes hold the values as typed ----------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("1.1:1.5:0.1", [1.1, 1.2, 1.3, 1.4, 1.5]),  # 1.1 + 0.1 was 1.2000000000000002
        ("0.1:0.5:0.1", [0.1, 0.2, 0.3, 0.4, 0.5]),  # 0.1 + 2 x 0.1 was 0.30000000000000004
        ("2:3:0.25", [2.0, 2.25, 2.5, 2.75, 3.0]),
        ("1e-3:3e-3:1e-3", [0.001, 0.002, 0.003]),
        ("-1:-0.8:0.1", [-1.0, -0.9, -0.8]),
    ],
)
def test_a_range_axis_holds_the_values_as_typed(spec, expected):
    r = sw.parse_spec("economics.pue", spec)
    assert list(r) == expected  # each value is the float its decimal text reads as
    assert r[len(expected) - 1] == expected[-1] and r[-1] == expected[-1]
    assert r[0 : len(expected)].tolist() == expected  # the array path (streamed chunks) too


def test_a_long_range_is_exact_at_every_value():
    r = sw.parse_spec("price_usd_per_gpu_hour", "1:1000:0.01")
    assert len(r) == 99_901
    values = r[0 : len(r)]
    assert values[29] == 1.29 and values[-1] == 1000.0
    assert all(float(repr(v)) == float(f"{v:.2f}") for v in values[::997].tolist())


def test_sweep_formats_print_the_range_values_as_typed():
    args = ("sweep", "--vary", "hardware=blackwell", "--vary", "price_usd_per_gpu_hour=0.1:0.3:0.1",
            "--workload", "pretrain-10t-moe", "--metrics", "pretraining.cost_usd")  # fmt: skip
    jsonl = run_cli(*args, "-f", "jsonl")
    assert jsonl.code == 0, jsonl.stderr
    rows = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert [r["price_usd_per_gpu_hour"] for r in rows] == [0.1, 0.2, 0.3]
    assert '"price_usd_per_gpu_hour": 0.3,' in jsonl.stdout  # not 0.30000000000000004
    csv = run_cli(*args, "-f", "csv")
    assert [line.split(",")[1] for line in csv.stdout.splitlines()[1:]] == ["0.1", "0.2", "0.3"]


# --- 2. a reader that goes away ----------------------------------------------------------------


def test_a_sweep_into_a_closed_pipe_exits_0_quietly(tmp_path):
    # 99,901 rows: far more than a pipe holds, so the writes meet EPIPE (was exit 1, no message)
    env = {**os.environ, "IPD_CACHE_DIR": "off", "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(
        [sys.executable, "-m", "ipd_cli", "sweep", "--vary", "hardware=blackwell", "--vary",
         "price_usd_per_gpu_hour=1:1000:0.01", "--workload", "pretrain-10t-moe", "-f", "csv"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert p.stdout is not None and p.stderr is not None
    assert p.stdout.readline().startswith(b"hardware,")
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0 and err == ""


def test_a_failed_write_spoils_the_recording():
    from ipd_cli.resultcache import _Recorder

    class Gone:
        def write(self, text):
            raise BrokenPipeError

        def flush(self):
            raise BrokenPipeError

    writes: list = []
    for call in (lambda r: r.write("x"), lambda r: r.flush()):
        spoiled = [False]
        with pytest.raises(BrokenPipeError):
            call(_Recorder(Gone(), 1, writes, spoiled))
        assert spoiled == [True] and writes == []  # a cut output is never stored (and replayed)


# --- 3. the library speaks of parameters, the CLI of flags -------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda c: ipd_cli.train(c, "h100", "llama-3.1-8b", 1e12, gpus="64"),
            "`gpus` must be a number, got '64'",
        ),
        (
            lambda c: ipd_cli.train(c, "h100", "llama-3.1-8b", 1e12, gpus=64.7),
            "`gpus` must be a whole number, got 64.7",
        ),
        (
            lambda c: ipd_cli.train(c, "h100", "llama-3.1-8b", 1e12, gpus=True),
            "`gpus` must be a number, got True",
        ),
        (
            lambda c: ipd_cli.train(c, "h100", "llama-3.1-8b", 1e12, gpus=64, plans=2.5),
            "`plans` must be a whole",
        ),
        (
            lambda c: ipd_cli.compare(c, ["h100"], "pretrain-10t-moe", mfu="0.5"),
            "`mfu` must be a number, got '0.5'",
        ),
        (
            lambda c: ipd_cli.serve(c, "h100", "llama-3.1-8b", concurrency=2.5),
            "`concurrency` must be a whole number",
        ),
        (lambda c: ipd_cli.rl(c, "h100", gpus=128.5), "`gpus` must be a whole number, got 128.5"),
        (lambda c: ipd_cli.compare(c, "h100"), "`systems` is a list; give ['h100'], not 'h100'"),
        (lambda c: ipd_cli.load(sets="economics.pue=1.2"), "`sets` is a list; give ['economics.pue=1.2']"),
        (lambda c: ipd_cli.load(sets=[1]), "`sets` holds str items, got 1"),
        # a library review: "'int' object is not iterable"; a lone string to with_overrides read a
        # letter at a time; an int item an AttributeError
        (lambda c: ipd_cli.compare(c, 5), "`systems` is a list, got 5"),
        (lambda c: ipd_cli.load(sets=5), "`sets` is a list, got 5"),
        (lambda c: c.with_overrides("economics.pue=1.2"), "`sets` is a list of PATH=VALUE strings"),
        (lambda c: c.with_overrides([3]), "`sets` holds PATH=VALUE strings, got 3"),
        (lambda c: ipd_cli.load(extra_dirs=[5]), "`extra_dirs` holds str or Path items, got 5"),
        # a library review: AttributeError, "unhashable type: 'list'", "at most -1" rows, int() calls
        (lambda c: ipd_cli.serve(None, "h100", "llama-3.1-8b"), "`cat` is a catalog, ipd_cli.load()'s"),
        (lambda c: ipd_cli.rl(None, "h100"), "`cat` is a catalog, ipd_cli.load()'s, got None"),
        (lambda c: ipd_cli.list_hardware(None), "`cat` is a catalog, ipd_cli.load()'s, got None"),
        (lambda c: ipd_cli.show_hardware(c, ["h100"]), "`name` must be text, got ['h100']"),
        (
            lambda c: ipd_cli.sweep(c, ["hardware=b200"], max_rows=-1),
            "`max_rows` must be a whole number >= 1",
        ),
        (lambda c: ipd_cli.sweep(c, ["hardware=b200"], progress=5), "`progress` is a function"),
        (lambda c: ipd_cli.sweep(c, "hardware=h100,b200"), "`vary` is a list; give ['hardware=h100,b200']"),
        (
            lambda c: ipd_cli.train(c, "h100", "llama-3.1-8b", 1e12, gpus=64, plans=float("inf")),
            "`plans` must be a whole",
        ),
        (lambda c: ipd_cli.train(c, "h100", "llama-3.1-8b", 1e12, gpus=10**400), "`gpus` is out of range"),
        (
            lambda c: ipd_cli.serve(c, "h100", "llama-3.1-8b", disaggregated="false"),
            "`disaggregated` must be true or false",
        ),
        (lambda c: ipd_cli.serve(c, "b200", "llama-3.3-70b", layout=8), "`layout` must be text, got 8"),
        (
            lambda c: ipd_cli.train(c, "b200", "llama-3.1-70b", 1e12, gpus=8, plan=["tp=2"]),
            "`plan` must be text",
        ),
        (lambda c: ipd_cli.train(c, "b200", "llama-3.1-70b", None, gpus=8), "`tokens` is required, got None"),
        (lambda c: ipd_cli.compare(c, ["b200"], pricing=None), "`pricing` is required, got None"),
        (lambda c: ipd_cli.rl(c, "b200", None), "`workload` is required, got None"),
        (lambda c: ipd_cli.sweep(c, ["hardware=b200"], max_rows="5"), "`max_rows` must be a number"),
        (
            lambda c: ipd_cli.serve(c, "h100", "llama-3.1-70b", curve=True, max_instance_gpus=8),
            "`max_instance_gpus` bounds",
        ),
    ],
)
def test_library_arguments_of_the_wrong_type_are_refused_naming_the_parameter(catalog, call, message):
    # '64' was a TypeError deep in the engine, 64.7 ran on 64 GPUs, True on one, and a lone string
    # was read a letter at a time ("unknown hardware 'h'") (a contract review)
    with pytest.raises(InputError) as e:
        call(catalog)
    assert str(e.value).startswith(message)


def test_library_takes_paths_metric_lists_and_its_documented_pins(catalog, tmp_path):
    # an API review: a Path workload, a list of metrics and max_instance_gpus (in the README) failed
    # with AttributeError / TypeError; list_workloads was not exported; the catalog's repr was 233 kB
    path = tmp_path / "w.yaml"
    path.write_text("model: llama-3.1-8b\ntokens: 1e12\ngpus: 8\n")
    assert ipd_cli.compare(catalog, ["b200"], path).workload.name == "w"
    _, rows = ipd_cli.sweep(catalog, ["hardware=b200"], path, metrics=["pretraining.cost_usd"])
    assert rows == 1
    point = ipd_cli.serve(catalog, "h100-sxm", "llama-3.1-70b", max_instance_gpus=2).serving
    assert point.instance_gpus <= 2
    assert "rl-swe-agent" in {i["name"] for i in ipd_cli.list_workloads(catalog).items}
    assert repr(catalog).startswith("Catalog(") and len(repr(catalog)) < 200


def test_library_counts_given_as_whole_floats_are_taken_as_counts(catalog):
    # `instance_gpus=8.0` and `gpus=2048.0` passed the check, then failed in the engine (TypeError);
    # 1e3 is a natural way to write a thousand GPUs
    assert ipd_cli.serve(catalog, "h100", "llama-3.1-8b", instance_gpus=8.0).serving.instance_gpus == 8
    assert ipd_cli.train(catalog, "h100", "llama-3.1-8b", 1e12, gpus=1e3, plans=2.0).pretraining.gpus == 1000


def test_library_errors_name_parameters_and_the_cli_flags(catalog):
    with pytest.raises(InputError, match=r"^`mfu` applies to pretrain workloads"):
        ipd_cli.compare(catalog, ["blackwell"], mfu=0.5)
    with pytest.raises(InputError, match=r"^`sets` economics\.pue=-1: economics: "):
        ipd_cli.load(sets=["economics.pue=-1"])
    entry = r"^builtin:hardware\.yaml \+ `sets` accelerators\.gb200\.hbm_gib=-1: "
    with pytest.raises(InputError, match=entry):
        ipd_cli.load(sets=["accelerators.gb200.hbm_gib=-1"])
    hbm = r"accelerators\.gb200\.hbm_gib"
    twice = rf"^builtin:hardware\.yaml \+ `sets` {hbm}=200 \+ `sets` {hbm}=-1: "
    with pytest.raises(InputError, match=twice):  # every override in the label is the parameter's
        ipd_cli.load(sets=["accelerators.gb200.hbm_gib=200", "accelerators.gb200.hbm_gib=-1"])
    with pytest.raises(InputError, match=r"train has no workload; use `tokens`, `gpus`, `deadline_days`"):
        ipd_cli.train(ipd_cli.load(sets=["workload.tokens=3"]), "blackwell", "llama-3.1-8b", 1e12, gpus=8)
    assert run_cli("compare", "blackwell", "--mfu", "0.5").stderr.startswith("ipd: error: --mfu applies")
    r = run_cli("compare", "blackwell", "--set", "economics.pue=-1")
    assert r.code == 2 and r.stderr.startswith("ipd: error: --set economics.pue=-1: economics: ")
    r = run_cli("compare", "blackwell", "--set", "accelerators.gb200.hbm_gib=-1")
    assert r.stderr.startswith("ipd: error: builtin:hardware.yaml + --set accelerators.gb200.hbm_gib=-1: ")
    r = run_cli(
        "compare",
        "blackwell",
        "--set",
        "accelerators.gb200.hbm_gib=200",
        "--set",
        "accelerators.gb200.hbm_gib=-1",
    )
    twice = (
        "builtin:hardware.yaml + --set accelerators.gb200.hbm_gib=200 + --set accelerators.gb200.hbm_gib=-1: "
    )
    assert r.stderr.startswith(f"ipd: error: {twice}")
    r = run_cli("train", "--hardware", "blackwell", "--model", "llama-3.1-8b", "--tokens", "1e12",
                "--gpus", "8", "--set", "workload.tokens=3")  # fmt: skip
    assert r.code == 2 and "use --tokens, --gpus, --days, --precision, --seq-len, --plan" in r.stderr


def test_library_values_out_of_range_name_the_argument_not_a_file(catalog):
    # serve(input_tokens=0) said "input and output tokens must be > 0"; rl(model='nope') and
    # `ipd rl --model nope` blamed the default workload file's `workload.model` field
    above = "must be a whole number of tokens above 0"
    with pytest.raises(InputError, match=rf"^`input_tokens` {above}, got 0$"):
        ipd_cli.serve(catalog, "h100", "llama-3.1-70b", input_tokens=0)
    with pytest.raises(InputError, match=rf"^`output_tokens` {above}, got -5$"):
        ipd_cli.serve(catalog, "h100", "llama-3.1-70b", output_tokens=-5)
    with pytest.raises(InputError, match=r"^unknown model 'nope'; choose one of: "):
        ipd_cli.rl(catalog, "vera-rubin", model="nope")
    r = run_cli("rl", "--hardware", "vera-rubin", "--model", "nope")
    assert r.code == 2 and r.stderr.startswith("ipd: error: unknown model 'nope'; choose one of: ")


def test_train_names_itself_and_its_keywords_for_an_unknown_one(catalog):
    with pytest.raises(TypeError) as e:
        ipd_cli.train(catalog, "blackwell", "llama-3.1-8b", 1e12, days=3)
    message = str(e.value)
    assert message.startswith("train() got an unexpected keyword argument 'days'")
    assert "`deadline_days`" in message and "estimate_pretraining" not in message


# --- 4. user files cite known sources; an unknown model names the file ------------------------


def test_a_scenario_file_citing_an_unknown_source_is_refused(tmp_path):
    path = write(tmp_path / "s.yaml", SCENARIO.replace("source: swe-bench-2026", "source: nope-src"))
    r = run_cli("compare", "blackwell", "--scenario", str(path), "-f", "json")
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.startswith(
        f"ipd: error: {path}: workload.task_success.success_rate.source: unknown source id 'nope-src'"
    )
    assert "sources:" in r.stderr and "\n" not in r.stderr.rstrip("\n")


def test_a_workload_file_may_cite_its_own_sources_or_none(tmp_path):
    own = SCENARIO.replace("source: swe-bench-2026", "source: my-src").replace(
        "\nsources:\n", '\nsources:\n  my-src:\n    title: "my measurement"\n    date: 2026-01-01\n'
    )
    bare = SCENARIO.replace("    source: swe-bench-2026\n", "")
    titles = {}
    for name, text in (("own.yaml", own), ("bare.yaml", bare)):
        path = write(tmp_path / name, text)
        r = run_cli("explain", "blackwell", "--scenario", str(path), "-f", "json")
        assert r.code == 0, r.stderr
        (row,) = [i for i in r.json()["items"] if i["path"] == "workload.task_success.success_rate"]
        titles[name] = (row["source"], row["source_title"], row["source_date"])
    # the file's own source with its title (the row had the id alone); none: the file's 'user'
    assert titles["own.yaml"] == ("my-src", "my measurement", "2026-01-01")
    assert titles["bare.yaml"][0] == "user" and "names no source" in titles["bare.yaml"][1]


def test_an_unknown_model_in_a_workload_file_names_the_file_and_field(tmp_path):
    path = write(tmp_path / "s.yaml", SCENARIO.replace("\nmodel: moe-10t", "\nmodel: moe-nope"))
    r = run_cli("compare", "blackwell", "--scenario", str(path), "-f", "json")
    assert r.code == 2
    assert r.stderr.startswith(f"ipd: error: {path}: workload.model: unknown model 'moe-nope'")


# --- 5. explain derives the serving price, the run's cost and the RL step's cost ---------------


@pytest.fixture(scope="module")
def explained():
    r = run_cli("explain", "blackwell", "-f", "json")
    assert r.code == 0, r.stderr
    return r.json()["items"]


def _inputs(item: dict) -> dict:
    return dict(p.split(" = ", 1) for p in item["inputs"].split("; "))


def test_explain_derives_the_serving_deployment_and_the_costs(explained):
    by = {i["metric"]: i for i in explained}
    # serving: the traffic, the GPUs of the deployment sized for it, then their rent around the clock
    # (it was busy GPU-hours priced at the point's $ per million output tokens)
    traffic = by["serving.traffic_output_tokens_per_s"]
    x = _inputs(traffic)
    per_s = float(x["tasks_per_day"]) * float(x["expected_attempts"]) * float(x["requests"])
    assert traffic["value"] == pytest.approx(per_s * float(x["output_tokens"]) / 86400, rel=1e-12)
    gpus = by["serving.gpus_for_traffic"]
    x = _inputs(gpus)
    assert float(x["traffic_output_tokens_per_s"]) == pytest.approx(traffic["value"], rel=1e-12)
    # GB200: pools sized for the traffic, DEP72 decode and prefill instances of one NVL72 rack each
    # (nothing stranded; its prefill took DEP36, half a rack, until attention TP held MLA's
    # down-projections whole on every rank)
    decode = math.ceil(traffic["value"] / (float(x["concurrency"]) * float(x["tokens_per_s_per_user"])))
    prefill = math.ceil(float(x["traffic_requests_per_s"]) * float(x["prefill_instance_s"]))
    assert (float(x["decode_instances"]), float(x["prefill_instances"])) == (decode, prefill)
    # counts print as counts (a cross-command review: `decode_instances = 29.0`)
    assert (x["decode_instances"], x["prefill_instances"]) == (f"{decode}", f"{prefill}")
    sizes = (float(x["instance_gpus"]), float(x["prefill_instance_gpus"]), float(x["stranded_gpus"]))
    assert sizes == (72, 72, 0)
    assert gpus["value"] == decode * 72 + prefill * 72
    assert "EAGLE-3" in x["configuration"]  # the deployment the tokens/s come from
    usd = by["serving_usd"]
    x = _inputs(usd)
    assert float(x["gpus_for_traffic"]) == gpus["value"]
    hours = float(x["gpus_for_traffic"]) * 8760 * float(x["H"])
    assert usd["value"] == pytest.approx(hours * float(x["price_usd_per_gpu_hour"]), rel=1e-12)
    pre, rl = by["pretraining.cost_usd"], by["rl.usd_per_step"]
    x = _inputs(pre)
    cost = float(x["gpu_hours"]) * float(x["price_usd_per_gpu_hour"])
    assert pre["value"] == pytest.approx(cost, rel=1e-12)
    assert float(_inputs(by["pretraining_usd"])["cost_usd"]) == pytest.approx(pre["value"], rel=1e-12)
    x = _inputs(rl)
    assert rl["value"] == pytest.approx(
        float(x["gpu_hours_per_step"]) * float(x["price_usd_per_gpu_hour"]), rel=1e-12
    )
    assert float(_inputs(by["post_training_usd"])["usd_per_step"]) == pytest.approx(rl["value"], rel=1e-12)
    names = [i["metric"] for i in explained]
    steps = [
        "serving.traffic_output_tokens_per_s",
        "serving.step_time_ms",
        "serving.tokens_per_s_per_user",
        "serving.interactivity_tokens_per_s",
        "serving.request_tokens_per_s",
        "serving.tokens_per_s_per_gpu",
        "serving.tpot_ms",
        "serving.ttft_s",
        "serving.prefill_instance_s",
        "serving.prefill_queue_s",
        "serving.slot_queue_s",
        "serving.ttft_at_traffic_s",
        "serving.prefill_utilisation",
        "serving.slot_utilisation",
        "serving.ttft_target_s",
        "serving.usd_per_million_output_tokens",
        "serving.total_tokens_per_s_per_gpu",
        "serving.usd_per_million_total_tokens",
        "serving.gpus_for_traffic",
        "serving.systems_for_traffic",
        "serving.usd_per_million_output_tokens_at_traffic",
        "serving_usd",
    ]
    first = names.index(steps[0])
    assert [names.index(n) for n in steps] == list(range(first, first + len(steps)))
    # the whole racks of the deployment and of the RL pool, from the inputs beside them
    for metric, gpus in (("serving.systems_for_traffic", "gpus_for_traffic"), ("rl.systems", "gpus")):
        x = _inputs(by[metric])
        assert by[metric]["value"] == math.ceil(float(x[gpus]) / float(x["gpus_per_system"]))


def test_explain_derives_the_serving_tokens_per_gpu_from_the_decode_step(explained):
    # the decode step's printed parts add up to it, and Little's law over the deployment gives the
    # tokens/s per GPU every serving cost divides by (a vendor-claim review: neither was explained)
    by = {i["metric"]: i for i in explained}
    step, x = by["serving.step_time_ms"], _inputs(by["serving.step_time_ms"])
    assert step["unit"] == "ms"
    parts = float(x["kernel_time_ms"]) + float(x["collective_time_ms"]) + float(x["overhead_ms"])
    assert step["value"] == pytest.approx(parts, rel=1e-9)
    memory, compute = float(x["memory_time_ms"]), float(x["compute_time_ms"])
    assert max(memory, compute) <= float(x["kernel_time_ms"]) <= memory + compute
    tps, x = by["serving.tokens_per_s_per_gpu"], _inputs(by["serving.tokens_per_s_per_gpu"])
    little = (
        float(x["deployment_concurrency"]) * float(x["tokens_per_s_per_user"]) / float(x["deployment_gpus"])
    )
    assert tps["value"] == pytest.approx(little, rel=1e-9)
    # GB200's deployment is disaggregated: the decode pool's time per token is the step over the
    # tokens each speculative step gives
    assert float(x["tpot_ms"]) == pytest.approx(step["value"] / float(x["speculative_speedup"]), rel=1e-9)
    assert float(x["tokens_per_s_per_user"]) == pytest.approx(1000 / float(x["tpot_ms"]), rel=1e-9)
    # the speed rows beside it, from the times the rows print (a review: no row named them)
    user, x = by["serving.tokens_per_s_per_user"], _inputs(by["serving.tokens_per_s_per_user"])
    assert user["value"] == pytest.approx(1000 / float(x["tpot_ms"]), rel=1e-9) and user["unit"] == "tokens/s"
    req, x = by["serving.request_tokens_per_s"], _inputs(by["serving.request_tokens_per_s"])
    out, ttft, tpot = (float(x[k]) for k in ("output_tokens", "ttft_s", "tpot_ms"))
    assert req["value"] == pytest.approx(out / (ttft + out * tpot / 1000), rel=1e-9)


def test_explain_derives_the_serving_blocks_other_speeds_and_prices(explained):
    # JSON carried them with no row (a review of the outputs); each rebuilt from the inputs it prints
    by = {i["metric"]: i for i in explained}
    row, x = (item := by["serving.interactivity_tokens_per_s"]), _inputs(item)
    assert row["value"] == pytest.approx(1000 / float(x["tpot_ms"]), rel=1e-9) and row["unit"] == "tokens/s"
    # frontier-agentic: 3,000 new tokens and 400 out a request
    row, x = (item := by["serving.total_tokens_per_s_per_gpu"]), _inputs(item)
    assert (x["input_tokens"], x["output_tokens"]) == ("3000", "400")
    assert row["value"] == pytest.approx(float(x["tokens_per_s_per_gpu"]) * 3400 / 400, rel=1e-9)
    total = row["value"]
    row, x = (item := by["serving.usd_per_million_total_tokens"]), _inputs(item)
    assert float(x["total_tokens_per_s_per_gpu"]) == pytest.approx(total, rel=1e-9)
    assert row["value"] == pytest.approx(float(x["price_usd_per_gpu_hour"]) / (total * 3600) * 1e6, rel=1e-9)
    row, x = (item := by["serving.usd_per_million_output_tokens_at_traffic"]), _inputs(item)
    gpus = by["serving.gpus_for_traffic"]["value"]
    per_s = by["serving.traffic_output_tokens_per_s"]["value"]
    pair = (float(x["gpus_for_traffic"]), float(x["traffic_output_tokens_per_s"]))
    assert pair == pytest.approx((gpus, per_s))
    usd = float(x["price_usd_per_gpu_hour"]) * gpus / (per_s * 3600) * 1e6
    assert row["value"] == pytest.approx(usd, rel=1e-9) and row["unit"] == "USD/M tokens"


def test_explain_as_markdown_keeps_the_catalog_notes_a_table_leaves_out():
    # the prices' lower-bound caveats showed in JSON only: markdown (a report) and the table hid the
    # note column (a hand-check review); markdown lists them under the grids, the table still not
    md = run_cli("explain", "blackwell", "vera-rubin", "-f", "markdown")
    assert md.code == 0, md.stderr
    notes = md.stdout.split("**Notes**", 1)[1]
    assert "- input: rental price (reserved) (vera-rubin-nvl72): " in notes and "lower bound" in notes
    table = run_cli("explain", "blackwell", "vera-rubin", "-f", "table", env={"COLUMNS": "200"})
    assert "Notes" not in table.stdout and "lower bound" not in table.stdout


def test_explain_of_an_aggregated_serving_point_recomputes_its_speed_per_user():
    # aggregated, the rate per user counts the request's own prefill: the formula printed
    # 1000 / tpot_ms (52.1) beside tokens_per_s_per_user 46.9 (a serving review)
    r = run_cli(
        "explain", "b200", "--workload", "open-model-agent", "--set", "workload.serving.tasks_per_day=100",
        "--set", "workload.serving.input_tokens_per_request=30000", "--set", "workload.serving.context=fresh",
        "-f", "json",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    item = next(i for i in r.json()["items"] if i["metric"] == "serving.tokens_per_s_per_gpu")
    x = _inputs(item)
    assert "output_tokens / (ttft_s + output_tokens x tpot_ms / 1000)" in item["formula"]
    out = float(x["output_tokens"])
    by_formula = out / (float(x["ttft_s"]) + out * float(x["tpot_ms"]) / 1000)
    assert float(x["tokens_per_s_per_user"]) == pytest.approx(by_formula, rel=1e-9)
    assert float(x["tokens_per_s_per_user"]) < 1000 / float(x["tpot_ms"])


def test_explain_gives_the_gpu_hour_price_rental_or_owning_cost_by_its_formula(explained):
    first = explained[0]
    assert (first["metric"], first["value"]) == ("price_usd_per_gpu_hour", 4.05)
    assert first["formula"].startswith("systems.gb200-nvl72.prices.reserved")
    r = run_cli("explain", "blackwell", "--pricing", "tco", "-f", "json")
    by = {i["metric"]: i for i in r.json()["items"]}
    price = by["price_usd_per_gpu_hour"]
    x = {k: float(v) for k, v in _inputs(price).items()}
    # by hand (a user review): $3.75M / 72 GPUs = $52,083; crf(10 %, 5 y) = 0.26380; + 6 % opex;
    # / (8,760 h x 0.85); + 1.7361 kW x 1.3 x $0.08 = 2.2648 + 0.1806 = 2.4455 $/GPU-h
    r_, n = x["cost_of_capital"], x["depreciation_years"]
    assert x["crf"] == pytest.approx(r_ / (1 - (1 + r_) ** -n), rel=1e-12)
    by_hand = x["capex_usd_per_gpu"] * (x["crf"] + x["opex_fraction_per_year"]) / (8760 * x["utilisation"])
    by_hand += x["kw_per_gpu"] * x["pue"] * x["usd_per_kwh"]
    assert price["value"] == pytest.approx(by_hand, rel=1e-12) and price["value"] == pytest.approx(
        2.4455, abs=1e-4
    )
    # the price every stage's cost starts from; serving's GPUs, kept around the clock, at utilisation 1
    assert float(_inputs(by["pretraining.cost_usd"])["price_usd_per_gpu_hour"]) == price["value"]
    kept = by["serving.price_usd_per_gpu_hour"]
    y = {k: float(v) for k, v in _inputs(kept).items()}
    assert y["utilisation"] == 1.0 and {k: v for k, v in y.items() if k != "utilisation"} == {
        k: v for k, v in x.items() if k != "utilisation"
    }
    at_one = x["capex_usd_per_gpu"] * (x["crf"] + x["opex_fraction_per_year"]) / 8760
    assert kept["value"] == pytest.approx(at_one + x["kw_per_gpu"] * x["pue"] * x["usd_per_kwh"], rel=1e-12)
    assert float(_inputs(by["serving_usd"])["price_usd_per_gpu_hour"]) == kept["value"]


def test_an_estimated_speculative_method_is_flagged_as_an_estimate(explained):
    spec = next(i for i in explained if i["metric"] == "input: speculative decoding method")
    assert spec["estimate"] is True and spec["formula"].endswith("(estimate)")


def test_explain_labels_the_goodput_by_its_result_field(explained):
    labels = [i["metric"] for i in explained]
    assert "input: scale efficiency (training goodput)" in labels
    assert "input: training goodput" not in labels
    r = run_cli("explain", "blackwell", "--workload", "pretrain-10t-moe", "-f", "json")
    wall = next(i for i in r.json()["items"] if i["metric"] == "pretraining.wall_days")
    assert "scale_efficiency" in wall["formula"] and "scale_efficiency = 0.9" in wall["inputs"]
    assert not re.search(r"\bgoodput\b", wall["formula"])


def test_each_explained_number_names_the_output_field_that_holds_it():
    # a user review: explain's `pretraining_usd` and `lifecycle_cost_usd` are not paths of compare's
    # JSON (`intelligence_per_dollar.cost_breakdown_usd.pretraining`, ...), so a number could not
    # be traced to `--metrics` or `--budget-metric`; each line now names its `field`
    explained = run_cli_once("explain", "vera-rubin", "-f", "json").json()["items"]
    system = run_cli("compare", "vera-rubin", "-f", "json").json()["systems"][0]
    lines = [i for i in explained if not i["metric"].startswith("input: ")]
    fields = {i["metric"]: i["field"] for i in lines}
    assert fields["pretraining_usd"] == "intelligence_per_dollar.cost_breakdown_usd.pretraining"
    assert fields["solved_tasks_per_kusd"] == "intelligence_per_dollar.solved_tasks_per_kusd"
    assert fields["serving.traffic_output_tokens_per_s"] is None  # an intermediate
    for i in lines:
        if i["field"] is None:
            continue
        node = system
        for key in i["field"].split("."):
            node = node[key]
        assert node == pytest.approx(i["value"], rel=1e-12), i["metric"]
    assert sum(i["field"] is not None for i in lines) >= 12


def test_a_shown_workload_is_a_workload_file_as_it_is(tmp_path):
    # a scripting review: `ipd workloads show frontier-agentic -f yaml > mine.yaml`, the natural
    # start of a what-if, was refused ("unknown workload kind 'workload'")
    shown = run_cli("workloads", "show", "frontier-agentic", "-f", "yaml")
    path = tmp_path / "mine.yaml"
    path.write_text(shown.stdout, encoding="utf-8")
    mine = run_cli("compare", "vera-rubin", "--scenario", str(path), "-f", "json")
    assert mine.code == 0, mine.stderr
    builtin = run_cli("compare", "vera-rubin", "-f", "json")
    key = "intelligence_per_dollar"
    assert mine.json()["systems"][0][key] == builtin.json()["systems"][0][key]
    assert mine.json()["workload"]["origin"] == str(path)


def test_explain_names_an_inputs_unit_and_source_without_an_empty_part():
    # a scripting review: a plain number's formula read "; source swe-bench-2026"
    r = run_cli_once("explain", "vera-rubin", "-f", "json")
    assert r.code == 0, r.stderr
    inputs = [i for i in r.json()["items"] if i["metric"].startswith("input: ")]
    assert not [i["formula"] for i in inputs if i["formula"].startswith(";")]
    rate = next(i for i in inputs if i["metric"] == "input: success per attempt")
    # its source's date beside the ID (an explain review), and its estimate flag: a measured score
    # of another model taken as the 10T model's
    assert rate["formula"] == "source swe-bench-2026, 2026-03-04 (estimate)" and rate["unit"] == ""
    assert (rate["source_date"], rate["source_url"]) == (
        "2026-03-04",
        "https://www.morphllm.com/swe-benchmark",
    )


def test_a_comparisons_csv_rows_carry_the_overrides_that_made_them():
    # a scripting review: train, serve and rl CSVs have an `overrides` column, compare's had none
    r = run_cli("compare", "vera-rubin", "--workload", "pretrain-10t-moe", "--set", "economics.pue=1.5",
                "--set", "economics.electricity_usd_per_kwh=0.05", "-f", "csv")  # fmt: skip
    assert r.code == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [row["overrides"] for row in rows] == ["economics.pue=1.5;economics.electricity_usd_per_kwh=0.05"]
    plain = run_cli("compare", "vera-rubin", "--workload", "pretrain-10t-moe", "-f", "csv")
    assert [row["overrides"] for row in csv.DictReader(io.StringIO(plain.stdout))] == [""]


def test_a_sweep_metric_that_is_a_flag_or_a_record_says_so():
    # a scripting review: `--metrics serving.disaggregated` was "unknown metric; did you mean
    # 'serving.draft_depth'?", although the field is in compare's JSON
    r = run_cli("sweep", "--vary", "hardware=vera-rubin", "--metrics", "serving.disaggregated", "-f", "csv")
    assert r.code == 2 and r.stderr.startswith(
        "ipd: error: --metrics: 'serving.disaggregated' is a field of the result, not a sweep metric"
    )
    typo = run_cli("sweep", "--vary", "hardware=vera-rubin", "--metrics", "serving.tokens_per_s_per_gp")
    assert typo.code == 2 and "unknown metric 'serving.tokens_per_s_per_gp'; did you mean" in typo.stderr
    # a key inside such a record (a review: "unknown metric; did you mean 'pretraining.step_time_s'?")
    r = run_cli("sweep", "--vary", "hardware=vera-rubin", "--workload", "pretrain-10t-moe",
                "--metrics", "pretraining.step_breakdown_s.gemm_s")  # fmt: skip
    assert r.code == 2 and r.stderr.startswith(
        "ipd: error: --metrics: 'pretraining.step_breakdown_s.gemm_s' is inside "
        "'pretraining.step_breakdown_s', a field of the result, not a sweep metric"
    )


@pytest.mark.parametrize(
    "args",
    [
        ("hardware", "list"),
        ("hardware", "show", "gb200-nvl72"),
        ("models", "list"),
        ("models", "show", "kimi-k2"),
        ("workloads", "list"),
        ("validate",),
        ("calibrate",),
    ],
    ids=" ".join,
)
def test_a_workload_set_a_command_never_reads_is_refused(args):
    # `ipd validate --set workload.gpus=5` exited 0 and changed nothing (a help audit)
    r = run_cli(*args, "--set", "workload.gpus=5")
    command = " ".join(args[:2]) if args[0] in ("hardware", "models", "workloads") else args[0]
    assert r.code == 2 and r.stdout == ""
    assert r.stderr == (
        f"ipd: error: --set workload.gpus=5: {command} reads no workload, so it would change nothing; "
        "drop it (workload.* sets apply to compare, rl, sweep, explain and workloads show)\n"
    )


def test_workloads_show_applies_the_workload_sets(catalog):
    # they were accepted and ignored: the catalog's 100T tokens shown
    r = run_cli("workloads", "show", "pretrain-10t-moe", "--set", "workload.tokens=5e13", "-f", "json")
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["entry"]["tokens"] == 5e13
    # the sets it is shown with, beside its description ("on 100T tokens"), which it leaves as data
    # (a scripting review: it stood beside 5e13 as if nothing had changed)
    shown = json.loads(r.stdout)
    assert shown["sets"] == ["workload.tokens=5e13"] and "100T" in shown["entry"]["description"]
    assert run_cli("workloads", "show", "pretrain-10t-moe", "-f", "json").json()["sets"] == []
    r = run_cli("hardware", "show", "h100", "--set", "accelerators.h100-sxm.hbm_tb_per_s=4", "-f", "json")
    assert r.json()["sets"] == ["accelerators.h100-sxm.hbm_tb_per_s=4"] and r.stderr == ""
    assert ipd_cli.show_workload(catalog, "pretrain-10t-moe").entry["tokens"] == 1e14
    r = run_cli("workloads", "show", "pretrain-10t-moe", "--set", "workload.tokenz=5e13")
    assert r.code == 2 and "did you mean 'tokens'" in r.stderr


def test_workloads_show_says_a_stage_set_is_not_in_the_entry_it_writes(tmp_path):
    # a CLI review (s60): `workloads show frontier-agentic --set workload.pretraining.tokens=2e14 -f
    # yaml > mine.yaml` wrote the stage's workload by name, without the 2e14, and `--scenario
    # mine.yaml` then ran 1e14 tokens without a word (the scenario's own fields keep their sets)
    stage, own = "workload.pretraining.tokens=2e14", "workload.pretraining.amortisation_years=3"
    r = run_cli("workloads", "show", "frontier-agentic", "--set", stage, "--set", own, "-f", "yaml")
    assert r.code == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if line.startswith("ipd: warning: ")]
    assert len(said) == 1 and f"--set {stage}: changes the workload 'pretrain-10t-moe'" in said[0], r.stderr
    path = write(tmp_path / "mine.yaml", r.stdout)
    ran = run_cli("compare", "vera-rubin", "--scenario", str(path), "-f", "json")
    assert ran.json()["systems"][0]["pretraining"]["tokens"] == 1e14  # as the warning says
    again = run_cli("compare", "vera-rubin", "--scenario", str(path), "--set", stage, "-f", "json")
    assert again.json()["systems"][0]["pretraining"]["tokens"] == 2e14  # the remedy it gives
    quiet = run_cli("workloads", "show", "frontier-agentic", "--set", own, "-f", "yaml")
    assert "ipd: warning" not in quiet.stderr


def test_a_shown_workload_written_into_a_catalog_directory_runs_as_a_stage(tmp_path):
    # a CLI review (s60): `ipd workloads show pretrain-10t-moe -f yaml > mycat/workloads/mine.yaml`
    # was refused, "sources.N1 is already defined in builtin:hardware.yaml", its copy of N1 the
    # same source with its date quoted (as show writes it) where the catalog's YAML reads a date
    shown = run_cli("workloads", "show", "pretrain-10t-moe", "--set", "workload.tokens=2e14", "-f", "yaml")
    write(tmp_path / "mycat" / "workloads" / "mine.yaml", shown.stdout)
    r = run_cli("workloads", "show", "mine", "--catalog", str(tmp_path / "mycat"), "-f", "json")
    assert r.code == 0, r.stderr
    assert r.json()["entry"]["tokens"] == 2e14 and "N1" in r.json()["sources"]
    # a source of the same id that differs is still refused
    write(tmp_path / "other" / "workloads" / "mine.yaml", shown.stdout.replace("(K. Aubrey; ", "("))
    r = run_cli("workloads", "list", "--catalog", str(tmp_path / "other"))
    assert r.code == 2 and "sources.N1 is already defined in builtin:hardware.yaml" in r.stderr


def test_serve_refuses_two_pins_of_the_instance_size(catalog):
    # `--instance smallest --instance-gpus 2` served the 2-GPU instance without a word (a help audit)
    with pytest.raises(InputError, match=r"^`instance` smallest and `instance_gpus` both pin"):
        ipd_cli.serve(catalog, "h100", "llama-3.1-8b", instance="smallest", instance_gpus=2)
    r = run_cli("serve", "--hardware", "h100", "--model", "llama-3.1-8b", "--instance", "smallest",
                "--instance-gpus", "2")  # fmt: skip
    assert r.code == 2 and r.stderr == (
        "ipd: error: --instance smallest and --instance-gpus both pin the instance's size; give one\n"
    )


def test_each_load_has_a_catalog_of_its_own(monkeypatch, tmp_path):
    # a library review: with the catalog cache, load() gave back one shared catalog, so a notebook's
    # `cat.systems["mine"] = ...` reached every later load, and a `sets` load then failed on the
    # aliases it duplicated
    monkeypatch.setenv("IPD_CACHE_DIR", str(tmp_path))
    ipd_cli.load()  # builds and stores the cache entry; the next loads decode it
    first = ipd_cli.load()
    first.systems["zz-mine"] = first.systems["b200"]
    second = ipd_cli.load()
    assert "zz-mine" not in second.systems and second.systems["b200"] is first.systems["b200"]
    assert ipd_cli.load(sets=["economics.pue=1.2"]).economics.pue.value == 1.2


def test_the_api_is_listed_and_its_errors_exported():
    # a library review: dir(ipd_cli) had none of the API functions (imported on first use), the
    # listings had no docstring, the exceptions had to be found in ipd_cli.errors, and a keyword
    # typo in rl() named the engine function it was passed on to
    from ipd_cli import errors

    assert {"serve", "compare", "rl", "train", "sweep", "InputError"} <= set(dir(ipd_cli))
    assert (ipd_cli.InputError, ipd_cli.InfeasibleError, ipd_cli.IpdError) == (
        errors.InputError, errors.InfeasibleError, errors.IpdError
    )  # fmt: skip
    assert all(getattr(ipd_cli, n).__doc__ for n in ipd_cli.__all__ if n != "__version__")
    with pytest.raises(
        TypeError, match=r"^rl\(\) got an unexpected keyword argument 'gpu' \(accepted: model, mode"
    ):
        ipd_cli.rl(ipd_cli.load(), "h100", gpu=64)


def test_a_listing_row_edited_by_the_caller_leaves_the_catalog_alone():
    # a library review: list_hardware's rows held each entry's own aliases list, shared by every
    # load through the cache, so appending to a row's aliases added an alias to later catalogs
    rows = ipd_cli.list_hardware(ipd_cli.load()).items
    h100 = next(r for r in rows if r["name"] == "h100-sxm")
    h100["aliases"].append("my-gpu")
    models = ipd_cli.list_models(ipd_cli.load()).items
    models[0]["aliases"].append("my-model")
    fresh = ipd_cli.load()
    assert "my-gpu" not in fresh.systems["h100-sxm"].aliases
    assert "my-model" not in fresh.models[models[0]["name"]].aliases
