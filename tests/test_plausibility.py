"""Unit-slip warnings: a user value far outside the built-in catalog's span is named on stderr."""

from __future__ import annotations

import copy

import pytest
import yaml
from helpers import run_cli, write

from ipd_cli import load
from ipd_cli.catalog import layers
from ipd_cli.catalog.plausibility import SANITY_FACTOR, builtin_spans

SHOW = ("hardware", "show", "vera-rubin", "-f", "json")


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ipd: warning: ")]


def test_a_value_typed_in_gb_per_s_for_a_tb_per_s_field_warns_once_and_runs():
    r = run_cli(*SHOW, "--set", "accelerators.rubin.hbm_tb_per_s=19600")
    assert r.code == 0, r.stderr
    [line] = warnings(r.stderr)
    assert line.startswith("ipd: warning: --set accelerators.rubin.hbm_tb_per_s = 19600 is ")
    assert "x the largest built-in value (built-in span " in line
    assert line.endswith(": is it in GB/s? the field is in TB/s per GPU"), line
    spec = r.json()["entry"]["accelerator_spec"]
    assert spec["hbm_tb_per_s"]["value"] == 19600  # used as given: never refused


@pytest.mark.parametrize(
    ("item", "needle"),
    [
        ("accelerators.gb200.hbm_gib=0.432", "of the smallest built-in value (built-in span 32 to"),
        ("accelerators.gb200.hbm_gib=0.432", ": is it in TB? the field is in GiB per GPU"),
        ("systems.vera-rubin.capex_usd=3.5", ": is it in millions of USD? the field is in USD"),
        ("systems.vera-rubin.prices.reserved=350", "prices.reserved.usd_per_gpu_hour = 350 is "),
        ("systems.vera-rubin.prices.reserved=350", ": is it in US cents?"),
        ("accelerators.rubin.tdp_w=1.8", ": is it in kW? the field is in W"),
        ("accelerators.rubin.bf16_dense_tflops=1e300", "; check the value and its unit (TFLOP/s per GPU)"),
    ],
)
def test_slips_name_the_field_the_value_and_the_likely_unit(item, needle):
    r = run_cli(*SHOW, "--set", item)
    assert r.code == 0, r.stderr
    [line] = warnings(r.stderr)
    assert needle in line, line


def test_a_value_within_the_band_does_not_warn():
    cat = load()
    lo, hi = builtin_spans(cat, "accelerators")["hbm_tb_per_s"]
    for value in (hi * SANITY_FACTOR * 0.99, lo / SANITY_FACTOR * 1.01, 30):
        r = run_cli(*SHOW, "--set", f"accelerators.rubin.hbm_tb_per_s={value}")
        assert r.code == 0 and r.stderr == "", r.stderr


def test_counts_have_no_unit_to_slip_in_so_a_toy_model_does_not_warn():
    # 1 layer lies 10x below every built-in model's count, but a count has no other unit to slip in
    r = run_cli("models", "show", "llama-3.1-8b", "-f", "json", "--set", "models.llama-3.1-8b.layers=1")
    assert r.code == 0 and r.stderr == "", r.stderr


def test_the_builtin_catalog_loads_without_warnings():
    assert load().warnings == []
    for args in (("hardware", "list", "-f", "json"), ("models", "list", "-f", "json"), SHOW):
        r = run_cli(*args)
        assert r.code == 0 and r.stderr == "", r.stderr


def test_the_library_keeps_the_warnings_and_prints_nothing(capsys):
    cat = load(sets=["accelerators.rubin.hbm_tb_per_s=19600"])
    assert capsys.readouterr().err == ""
    [line] = cat.warnings
    assert line.startswith("`sets` accelerators.rubin.hbm_tb_per_s = 19600 is ")


def _user_catalog(tmp_path, **changes):
    """A user catalog file replacing the built-in rubin accelerator with ``changes`` applied."""
    body = copy.deepcopy(layers.load_raw([]).sections["accelerators"]["rubin"])
    for field, value in changes.items():
        body[field] = {**body[field], "value": value}
        body[field].pop("range", None)
    return write(tmp_path / "mycat" / "hw.yaml", yaml.safe_dump({"accelerators": {"rubin": body}}))


def test_a_user_catalog_file_with_a_slip_warns_naming_the_file_and_field(tmp_path):
    path = _user_catalog(tmp_path, hbm_tb_per_s=19600)
    r = run_cli(*SHOW, "--catalog", str(path.parent))
    assert r.code == 0, r.stderr
    [line] = warnings(r.stderr)
    assert line.startswith(f"ipd: warning: {path}: accelerators.rubin.hbm_tb_per_s = 19600 is "), line
    assert "is it in GB/s?" in line


def test_a_plausible_user_catalog_file_does_not_warn(tmp_path):
    path = _user_catalog(tmp_path, hbm_tb_per_s=25)
    r = run_cli(*SHOW, "--catalog", str(path.parent))
    assert r.code == 0 and r.stderr == "", r.stderr


def test_an_ipd_catalog_slip_warns_on_a_listing_served_from_the_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("IPD_CACHE_DIR", str(cache))
    path = _user_catalog(tmp_path, hbm_gib=0.432)
    env = {"IPD_CATALOG": str(path.parent)}
    first = run_cli("hardware", "list", "-f", "json", env=env)
    second = run_cli("hardware", "list", "-f", "json", env=env)  # the cached listing
    assert first == second
    [line] = warnings(second.stderr)
    assert f"{path}: accelerators.rubin.hbm_gib = 0.432 is 1/" in line and "is it in TB?" in line


def test_an_hbm_capacity_the_workspace_fills_is_an_input_error_naming_the_field():
    r = run_cli("serve", "--hardware", "blackwell", "--model", "llama-3.1-8b", "--set",
                "accelerators.gb200.hbm_gib=0.432", "-f", "json")  # fmt: skip
    assert r.code == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    *warned, error = r.stderr.splitlines()
    assert len(warned) == 1 and "is it in TB?" in warned[0]
    assert error.startswith("ipd: error: accelerators.gb200.hbm_gib = 0.432 GiB per GPU is no more than")
    assert "serving.workspace_gb_per_gpu" in error


def test_a_sweep_axis_of_a_spec_is_checked_like_a_set(tmp_path):
    # a review: --vary values were not checked; the axis's ends are, once each
    small = write(
        tmp_path / "small.yaml",
        "kind: pretrain\ndescription: s\nmodel: llama-3.1-8b\ntokens: 1e12\ngpus: 64\n",
    )
    args = ("sweep", "--vary", "hardware=h100", "--workload", str(small), "-f", "csv")
    r = run_cli(*args, "--vary", "accelerators.h100-sxm.hbm_tb_per_s=3.35,3350")
    assert r.code == 0, r.stderr
    [line] = warnings(r.stderr)
    assert line.startswith("ipd: warning: --vary accelerators.h100-sxm.hbm_tb_per_s = 3350 is ")
    assert line.endswith(": is it in GB/s? the field is in TB/s per GPU")
    r = run_cli(*args, "--vary", "accelerators.h100-sxm.hbm_tb_per_s=3:4:0.5")
    assert r.code == 0 and warnings(r.stderr) == []


def _slips(stderr: str) -> list[str]:
    """The warnings beside the one the 10T month's plan gives (its batch beyond its recipe's)."""
    return [w for w in warnings(stderr) if "beyond the recipe's" not in w]


@pytest.mark.parametrize(
    ("item", "needle"),
    [
        # 120 is 1,000x the top of 0.06-0.12 USD/kWh; 120 USD/MWh is 0.12, the nearest the middle
        (
            "economics.electricity_usd_per_kwh=120",
            "economics.electricity_usd_per_kwh = 120 is 1,000x the top of its sourced range (0.06 to "
            "0.12): is it in USD/MWh? the field is in USD/kWh",
        ),
        (
            "economics.cost_of_capital=8",
            "= 8 is 57x the top of its sourced range (0.06 to 0.14): is it in percent",
        ),
        (
            "economics.opex_fraction_of_capex_per_year=6",
            "is it in percent? the field is in fraction of capex",
        ),
        # a pricing review: 60 (months) is 10x the top of 4-6 years, inside the band, and took
        # Rubin's owning cost from $5.04 to $2.67 a GPU-hour silently; 36 and 48 could never warn
        # an energy review: a PUE of 13 (for 1.3) is inside the 10x band over 1.1-1.58 and took
        # every energy figure 10x silently; ten times a sourced value is a slipped decimal point
        (
            "economics.pue=13",
            "= 13 is past the top of its sourced range (1.1 to 1.58): is it 1.3, a decimal point slipped?",
        ),
        (
            "economics.depreciation_years=36",
            "= 36 is over 10 years, past the top of its sourced range (4 to 6): is it in months? the "
            "field is in years",
        ),
    ],
)
def test_an_economics_value_far_outside_its_sourced_range_warns(item, needle):
    # a user review: `--set economics.electricity_usd_per_kwh=120 --pricing tco` took Rubin's owning
    # cost from $5.04 to $503 a GPU-hour without a word, where a price slip warned
    r = run_cli(
        "compare",
        "vera-rubin",
        "--workload",
        "pretrain-10t-moe",
        "--pricing",
        "tco",
        "-f",
        "json",
        "--set",
        item,
    )
    assert r.code == 0, r.stderr
    [line] = _slips(r.stderr)
    assert line.startswith("ipd: warning: --set economics.") and needle in line, line
    r = run_cli("compare", "vera-rubin", "--workload", "pretrain-10t-moe", "--pricing", "tco", "-f", "json",
                "--set", "economics.electricity_usd_per_kwh=0.2")  # fmt: skip
    assert _slips(r.stderr) == []  # above the range, within the band: a dear site, not a slip
    r = run_cli("compare", "vera-rubin", "--workload", "pretrain-10t-moe", "--pricing", "tco", "-f", "json",
                "--set", "economics.depreciation_years=8")  # fmt: skip
    assert _slips(r.stderr) == []  # past the range, not like months
    r = run_cli("compare", "vera-rubin", "--workload", "pretrain-10t-moe", "--pricing", "tco", "-f", "json",
                "--set", "economics.pue=2.5")  # fmt: skip
    assert _slips(r.stderr) == []  # a poor site, not a tenfold slip (0.25 is below the range)


def test_an_economics_sweep_axis_far_outside_its_sourced_range_warns():
    r = run_cli(
        "sweep", "--vary", "hardware=h100", "--vary", "economics.electricity_usd_per_kwh=50,150",
        "--pricing", "tco", "--workload", "pretrain-10t-moe", "--metrics", "pretraining.cost_usd",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    slips = [line for line in warnings(r.stderr) if "sourced range" in line]
    assert [line.split(" is ")[0] for line in slips] == [
        "ipd: warning: --vary economics.electricity_usd_per_kwh = 50",
        "ipd: warning: --vary economics.electricity_usd_per_kwh = 150",
    ]


def test_a_system_powered_below_its_gpus_tdp_warns():
    # a user review: a 72-GPU rack of 1,100 W GPUs at 20 kW was accepted silently
    r = run_cli(*SHOW[:2], "gb200", "-f", "json", "--set", "systems.gb200-nvl72.power_kw=20")
    assert r.code == 0, r.stderr
    tdp = load().accelerators["gb200"].tdp_w.value
    floor = 72 * tdp / 1000  # 72 x 1,200 W = 86.4 kW
    assert (
        "with --set systems.gb200-nvl72.power_kw=20: systems.gb200-nvl72.power_kw = 20 is below its "
        f"accelerators' TDP alone (72 x {tdp:g} W = "
        f"{floor:g} kW)"
    ) in r.stderr
    r = run_cli(*SHOW[:2], "gb200", "-f", "json", "--set", f"systems.gb200-nvl72.power_kw={floor * 1.4}")
    assert "TDP alone" not in r.stderr


def test_a_sweep_that_fails_still_names_the_slip_in_its_axis():
    # a user review: a sweep that could not run at any point dropped the axis's unit-slip warning
    # (an 8B model on one GPU: the 10T on 8 took 12 s once the axis was searched where the run
    # cannot fit at the catalog's HBM)
    r = run_cli(
        "sweep", "--vary", "hardware=h100", "--vary", "accelerators.h100-sxm.hbm_gib=1,2",
        "--workload", "pretrain-10t-moe", "--set", "workload.model=llama-3.1-8b", "--set", "workload.gpus=1",
        "--set", "workload.deadline_days=null",
    )  # fmt: skip
    assert r.code == 1 and "cannot run at any point of the sweep" in r.stderr
    assert "--vary accelerators.h100-sxm.hbm_gib = 1 is 1/32 of the smallest built-in value" in r.stderr


def test_power_below_tdp_warns_from_an_accelerator_set_and_a_sweep_axis():
    # a code review: a TDP --set named a power --set never given; a power axis did not warn
    r = run_cli(*SHOW[:2], "gb200", "-f", "json", "--set", "accelerators.gb200.tdp_w=2000")
    assert "with --set accelerators.gb200.tdp_w=2000: systems.gb200-nvl72.power_kw = " in r.stderr
    s = run_cli(
        "sweep", "--vary", "hardware=gb200", "--vary", "systems.gb200-nvl72.power_kw=10,30",
        "--workload", "pretrain-10t-moe",
    )  # fmt: skip
    assert (
        s.code == 0
        and "at --vary systems.gb200-nvl72.power_kw=10: systems.gb200-nvl72.power_kw = 10" in s.stderr
    )


def test_power_below_tdp_names_only_the_set_that_touches_it(tmp_path):
    # a code review: a capex --set repeated a user file's power warning, and a TDP warning named
    # an unrelated system's --set
    r = run_cli(
        *SHOW[:2], "h100", "-f", "json", "--set", "accelerators.h100-sxm.tdp_w=2000",
        "--set", "systems.h200.power_kw=20", "--set", "systems.h100-sxm.capex_usd=300000",
    )  # fmt: skip
    [line] = [ln for ln in warnings(r.stderr) if "TDP alone" in ln]
    assert line.startswith(
        "ipd: warning: with --set accelerators.h100-sxm.tdp_w=2000: systems.h100-sxm.power_kw"
    )
    assert "systems.h200" not in line and "capex" not in line


def test_a_gpus_price_typed_into_a_systems_capex_is_warned():
    # a procurement review: a per-GPU price in the per-rack field ($110,000 for Rubin's 72-GPU rack,
    # $1,528 a GPU) read $0.40 a GPU-hour with no word; the span of whole systems let it through.
    # The built-in per-GPU span: A100's $149,000 / 8 = $18,625 to Rubin Ultra's $23.5M / 144
    cat = load()
    per_gpu = {n: s.capex_usd.value / s.accelerators for n, s in cat.systems.items()}
    lo, hi = min(per_gpu.values()), max(per_gpu.values())
    assert (lo, round(hi)) == (18_625, 163_194)
    r = run_cli("compare", "vera-rubin", "--set", "systems.vera-rubin.capex_usd=110000", "-f", "json")
    assert r.code == 0, r.stderr
    assert (
        "ipd: warning: --set systems.vera-rubin-nvl72.capex_usd = 110000 is $1,528 a GPU, 1/12 of the "
        "smallest built-in (built-in span $18,625 to $163,194 a GPU): is it a GPU's price? the field is "
        "the whole system's (72 GPUs)"
    ) in warnings(r.stderr)
    # a real rack price (10x lower bound: $1,863 a GPU) says nothing
    quiet = run_cli("compare", "vera-rubin", "--set", "systems.vera-rubin.capex_usd=7e6", "-f", "json")
    assert not [w for w in warnings(quiet.stderr) if "a GPU's price" in w]


def test_a_user_files_system_below_its_gpus_tdp_names_the_file(tmp_path):
    # a fresh-eyes review: a user file's unit-slip warnings named the file, its power warning did not
    body = copy.deepcopy(layers.load_raw([]).sections["systems"]["h100-sxm"])
    body["power_kw"] = {"value": 1.3}  # 8 x 700 W alone is 5.6 kW
    body["aliases"] = []
    path = write(tmp_path / "hw.yaml", yaml.safe_dump({"systems": {"my-node": body}}))
    r = run_cli("hardware", "show", "my-node", "--catalog", str(tmp_path), "-f", "json")
    assert r.code == 0, r.stderr
    tdp = load().accelerators["h100-sxm"].tdp_w.value
    assert warnings(r.stderr) == [
        f"ipd: warning: {path}: systems.my-node.power_kw = 1.3 is below its accelerators' TDP alone "
        f"(8 x {tdp:g} W = {8 * tdp / 1000:g} kW): is it per GPU, or in another unit?"
    ]
    # once with a --set that touches the system and leaves the line as it was (a code review: the
    # file's name made the "said already" check miss, and the line came twice)
    again = run_cli(
        "hardware", "show", "my-node", "--catalog", str(tmp_path), "--set", "systems.my-node.power_kw=1.3"
    )
    assert [w for w in warnings(again.stderr) if "TDP alone" in w] == warnings(r.stderr)


@pytest.mark.parametrize(
    ("item", "said"),
    [
        ("economics.utilisation.value=0.5", "--set economics.utilisation: not an input"),
        ("systems.h100.capex_usd.value=1e5", "--set systems.h100-sxm.capex_usd: not an input"),
    ],
)
def test_an_unread_set_is_said_under_any_spelling_of_its_value(item, said):
    # a code review: `X.value` of an owning cost under rental prices changed nothing without a word
    r = run_cli("serve", "--hardware", "h100", "--model", "llama-3.1-8b", "--set", item, "-f", "json")
    assert r.code == 0 and said in r.stderr


def test_a_rental_price_the_estimate_does_not_read_is_warned():
    # a scripting review: `--pricing tco --set systems.vera-rubin.prices.reserved=3` gave the same
    # answer without a word (the owning-cost case was warned)
    tco = run_cli(
        "compare",
        "vera-rubin",
        "--pricing",
        "tco",
        "--set",
        "systems.vera-rubin.prices.reserved=3",
        "-f",
        "json",
    )
    assert tco.code == 0
    assert (
        "--set systems.vera-rubin-nvl72.prices.reserved: not an input of this estimate, so it changed "
        "nothing (a rental price point: read by --pricing rental:reserved on vera-rubin-nvl72)" in tco.stderr
    )
    other = run_cli("compare", "vera-rubin", "--set", "systems.h100-sxm.prices.reserved=2", "-f", "json")
    assert "--set systems.h100-sxm.prices.reserved: not an input" in other.stderr
    read = run_cli("compare", "vera-rubin", "--set", "systems.vera-rubin.prices.reserved=9", "-f", "json")
    assert "not an input" not in read.stderr  # read: priced at it
    # a system that runs no block reads no price: its price was not passed over (a code review)
    idle = run_cli("compare", "v100", "h100", "--set", "systems.v100.prices.reserved=1", "-f", "json")
    assert "not an input" not in idle.stderr


@pytest.mark.parametrize(
    "extra",
    [
        ("--vary", "systems.vera-rubin.prices.reserved=8,9"),
        ("--set", "systems.vera-rubin.prices.reserved=8"),
        ("--vary", "systems.vera-rubin.capex_usd=7e6,8e6"),
    ],
)
def test_a_sweep_refuses_a_price_input_beside_a_price_axis(extra):
    # a scripting review: a rental-price axis of 8 and 9 beside a price_usd_per_gpu_hour axis gave
    # identical rows, exit 0: the price axis replaces every system's price
    r = run_cli(
        "sweep", "--vary", "hardware=vera-rubin", "--vary", "price_usd_per_gpu_hour=4,5", *extra, "-f", "csv"
    )
    assert r.code == 2 and r.stdout == ""
    assert (
        "not read where --vary price_usd_per_gpu_hour gives every system's price; drop one of them"
        in r.stderr
    )


def test_an_expert_width_its_parameter_counts_do_not_give_is_warned(tmp_path):
    # a capacity planner's review: moe_ffn_hidden_size 64 to 65,536 left serving unchanged and
    # unsaid (the counts set the weights, the width only the GEMMs' shape). DeepSeek-V3: 671B total,
    # 37B active, 8 of 256 experts on 58 routed layers, hidden 7,168, SwiGLU: (671e9 - 37e9) /
    # (1 - 8/256) / (58 x 256) / (3 x 7,168) = 2,050, its published 2,048 (no warning); 30 routed
    # layers give 3,963, so 2,048 is 0.517x of it
    routed = (671e9 - 37e9) / (1 - 8 / 256)
    assert routed / (58 * 256) / (3 * 7168) == pytest.approx(2050, abs=1)
    quiet = run_cli("models", "show", "deepseek-v3", "--set", "models.deepseek-v3.moe_ffn_hidden_size=2500")
    assert quiet.code == 0 and "moe_ffn_hidden_size" not in quiet.stderr  # 1.22x: inside the band
    r = run_cli("models", "show", "deepseek-v3", "--set", "models.deepseek-v3.moe_layers=30")
    assert r.code == 0
    [line] = [ln for ln in warnings(r.stderr) if "moe_ffn_hidden_size" in ln]
    implied = routed / (30 * 256) / (3 * 7168)
    assert line.startswith(
        "ipd: warning: with --set models.deepseek-v3.moe_layers=30: models.deepseek-v3.moe_ffn_hidden_size "
        f"= 2,048 is {2048 / implied:.3g}x the width its parameter counts give a routed expert "
        f"({implied:,.0f}:"
    )
    # a user file's model: named by its file
    body = copy.deepcopy(layers.load_raw([]).sections["models"]["deepseek-v3"])
    body["moe_ffn_hidden_size"] = 65536
    body["aliases"] = []
    path = write(tmp_path / "models.yaml", yaml.safe_dump({"models": {"my-moe": body}}))
    mine = run_cli("models", "show", "my-moe", "--catalog", str(tmp_path))
    assert mine.code == 0, mine.stderr
    assert any(
        w.startswith(f"ipd: warning: {path}: models.my-moe.moe_ffn_hidden_size = 65,536 is 32x")
        for w in warnings(mine.stderr)
    )
