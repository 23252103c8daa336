"""--set PATH=VALUE on catalog and workload fields."""

from __future__ import annotations

import re

import pytest
from helpers import run_cli

from ipd_cli import compare, load, train
from ipd_cli.errors import InputError


def test_set_price_scales_cost_linearly():
    base = train(load(), "hopper", "llama-3.1-8b", 1e12, gpus=64)
    price = base.pretraining.price_usd_per_gpu_hour
    cat = load(sets=[f"systems.hopper.prices.reserved={price * 2}"])
    doubled = train(cat, "hopper", "llama-3.1-8b", 1e12, gpus=64)
    assert doubled.pretraining.cost_usd == pytest.approx(2 * base.pretraining.cost_usd)
    assert doubled.overrides == [f"systems.hopper.prices.reserved={price * 2}"]
    used = [a for a in doubled.assumptions if a.name.startswith("rental price")]
    assert used[0].source == "cli-set" and used[0].value == price * 2


def test_set_workload_and_model_fields_reach_the_engine():
    base = compare(load(), ["vera-rubin"], "pretrain-10t-moe").systems[0].pretraining
    cat = load(sets=["workload.tokens=2e14", "models.moe-10t.active_params=1e12"])
    r = compare(cat, ["vera-rubin"], "pretrain-10t-moe")
    assert r.workload.tokens == 2e14
    p = r.systems[0].pretraining
    assert p.training_flops > 3.9 * base.training_flops  # 2x tokens x ~2x FLOPs per token
    # the plan changes with the model: the extra active parameters are dense GEMMs that run at a
    # better efficiency than the all-to-all-bound experts, so GPUs grow less than the FLOPs
    assert p.gpus > 1.5 * base.gpus


def test_set_reaches_the_plan_search():
    # halving the GEMM share every plan sustains lengthens the run and lowers the achieved MFU
    cat = load()
    share = cat.efficiency.training_share.value
    a = train(cat, "hopper", "llama-3.1-8b", 1e12, gpus=64).pretraining
    b = train(load(sets=[f"efficiency.training_share={share / 2}"]), "hopper", "llama-3.1-8b", 1e12, gpus=64)
    assert b.pretraining.wall_days > 1.3 * a.wall_days
    assert b.pretraining.mfu < a.mfu
    assert any(x.path == "efficiency.training_share" and x.source == "cli-set" for x in b.assumptions)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("systems.vera-rubin.powr_kw=3", "did you mean 'power_kw'"),
        ("economics.pue=abc", "economics.pue.value: must be a number, not text"),
        ("economics.pue=0.5", "pue must be >= 1"),
        ("workload.tokenz=1", "did you mean 'tokens'"),
        ("workload.tokens=-5", "tokens: Input should be greater than 0"),
        ("efficiency.training_share=1.5", "training_share must be a fraction"),
        ("systems.hopper.prices.spotty=1", "no price labelled 'spotty'"),
        ("hardwre.x.y=1", "unknown section 'hardwre'"),
        ("economics.pue", "expected PATH=VALUE"),
        ("systems.nope.power_kw=1", "unknown system 'nope'"),
    ],
)
def test_bad_set_is_a_one_line_usage_error(item, message):
    r = run_cli("compare", "vera-rubin", "--workload", "pretrain-10t-moe", "--set", item, "--format", "json")
    assert r.code == 2, r.stdout
    assert message in r.stderr
    assert r.stderr.count("\n") == 1 and r.stdout == ""


def test_set_origin_is_named_in_errors():
    # the library names its parameter (`sets`); the CLI shows it as --set
    with pytest.raises(InputError, match=r"`sets` economics.pue=abc"):
        load(sets=["economics.pue=abc"])
    assert run_cli("compare", "blackwell", "--set", "economics.pue=abc").stderr.startswith(
        "ipd: error: --set economics.pue=abc: "
    )


def test_a_stack_flag_is_set_or_turned_off_like_any_sourced_value(catalog):
    # two-batch overlap is a yes/no property of a stack profile: --set turns SGLang's off, or
    # gives TensorRT-LLM's (which has none) one, pointing the source at the command line
    off = catalog.with_overrides(["serving.stacks.sglang.profiles.hopper.two_batch_overlap.value=false"])
    flag = off.serving.stacks["sglang"].profiles["hopper"].two_batch_overlap
    assert flag is not None and flag.value is False and flag.source == "cli-set"
    on = catalog.with_overrides(["serving.stacks.trtllm.profiles.hopper.two_batch_overlap=true"])
    flag = on.serving.stacks["trtllm"].profiles["hopper"].two_batch_overlap
    assert flag is not None and flag.value is True and flag.source == "cli-set"
    with pytest.raises(InputError, match=r"must be true or false \(got 'maybe'\)"):
        catalog.with_overrides(["serving.stacks.sglang.profiles.hopper.two_batch_overlap=maybe"])


def test_set_reaches_a_field_the_scenario_leaves_out():
    # `post_training` is optional in a scenario: its fields were unknown to --set unless the file
    # set them (a yearly RL budget on frontier-agentic, which runs a number of refreshes)
    from ipd_cli.catalog.workloads import resolve_workload

    cat = load(sets=["workload.post_training.budget_usd_per_year=2e8"])
    _, scenario, origin = resolve_workload(cat, "frontier-agentic")
    assert scenario.post_training.budget_usd_per_year == 2e8 and origin.endswith("+ --set")


def test_serve_names_the_overrides_it_applied():
    # train, rl and compare listed their --set items; serve (a point or the frontier) did not
    item = "economics.pue=1.5"
    base = ["serve", "--hardware", "h100", "--model", "llama-3.1-8b", "-f", "json"]
    point = run_cli(*base, "--set", item)
    curve = run_cli(*base, "--curve", "--set", item)
    assert point.code == 0 and curve.code == 0, point.stderr + curve.stderr
    assert point.json()["overrides"] == [item] and curve.json()["overrides"] == [item]
    assert run_cli(*base).json()["overrides"] == []


def test_a_profiles_moe_share_is_set_per_precision(catalog):
    # a stack profile holds its MoE share per weight precision (the one it was fitted at): --set
    # replaces that one, gives the profile a precision it lacks (or a share where it has none), and
    # a single number for the whole table is refused naming the form to use
    profiles = "serving.stacks.sglang.profiles"
    cat = catalog.with_overrides(
        [f"{profiles}.cdna4.moe_compute_share.fp4=0.1", f"{profiles}.cdna4.moe_compute_share.bf16=0.3"]
    )
    share = cat.serving.stacks["sglang"].profiles["cdna4"].moe_compute_share
    fp8 = catalog.serving.stacks["sglang"].profiles["cdna4"].moe_compute_share["fp8"].value
    assert share is not None
    assert {p: s.value for p, s in share.items()} == {"fp4": 0.1, "fp8": fp8, "bf16": 0.3}
    assert share["bf16"].source == share["fp4"].source == "cli-set"
    cat = catalog.with_overrides(["serving.stacks.vllm.profiles.cdna3.moe_compute_share.fp8=0.3"])
    share = cat.serving.stacks["vllm"].profiles["cdna3"].moe_compute_share
    assert share is not None and share["fp8"].value == 0.3
    with pytest.raises(InputError, match=r"moe_compute_share: one value per key; name one, e\.g\. .*\.fp4="):
        catalog.with_overrides([f"{profiles}.cdna4.moe_compute_share=0.3"])


def test_a_profiles_expert_streaming_is_set_per_precision(catalog):
    # the grouped GEMM's HBM efficiency is held per weight precision as the MoE share is: --set
    # replaces the measured one, adds a precision the profile lacks, and a single number is refused
    profiles = "serving.stacks.sglang.profiles"
    cat = catalog.with_overrides(
        [
            f"{profiles}.cdna4.grouped_gemm_hbm_efficiency.fp4=0.8",
            f"{profiles}.cdna4.grouped_gemm_hbm_efficiency.fp8=0.6",
        ]
    )
    eff = cat.serving.stacks["sglang"].profiles["cdna4"].grouped_gemm_hbm_efficiency
    assert eff is not None and {p: s.value for p, s in eff.items()} == {"fp4": 0.8, "fp8": 0.6}
    assert eff["fp8"].source == eff["fp4"].source == "cli-set"
    cat = catalog.with_overrides(["serving.stacks.vllm.profiles.cdna4.grouped_gemm_hbm_efficiency.bf16=0.7"])
    eff = cat.serving.stacks["vllm"].profiles["cdna4"].grouped_gemm_hbm_efficiency
    assert eff is not None and eff["bf16"].value == 0.7
    match = r"grouped_gemm_hbm_efficiency: one value per key; name one, e\.g\. .*\.fp4="
    with pytest.raises(InputError, match=match):
        catalog.with_overrides([f"{profiles}.cdna4.grouped_gemm_hbm_efficiency=0.8"])


def test_a_sourced_choice_of_text_can_be_set(catalog):
    # `--set rl.default_sync_stack=verl` was refused ("estimate: unknown field"): the override
    # gave every sourced value an estimate flag, which a sourced choice of text does not have
    cat = catalog.with_overrides(["rl.default_sync_stack=verl"])
    assert cat.rl.default_sync_stack.value == "verl" and cat.rl.default_sync_stack.source == "cli-set"


def test_a_scenario_stage_path_on_a_plain_workload_names_the_direct_field():
    # `workload.pretraining.tokens` on a pretrain workload suggested 'precision' (a contract review)
    from helpers import run_cli

    r = run_cli("compare", "h100", "--workload", "pretrain-10t-moe", "--set", "workload.pretraining.tokens=5")
    assert r.code == 2
    assert r.stderr == (
        "ipd: error: --set workload.pretraining: 'pretraining' is a scenario's stage; this pretrain "
        "workload's fields are set directly: workload.tokens\n"
    )


def test_a_scenario_stage_path_of_another_stage_says_what_the_workload_is():
    # it offered `workload.tasks_per_day`, a field no pretrain workload has (a code review)
    from helpers import run_cli

    r = run_cli(
        "compare", "h100", "--workload", "pretrain-10t-moe", "--set", "workload.serving.tasks_per_day=5"
    )
    assert r.code == 2 and r.stderr == (
        "ipd: error: --set workload.serving: 'serving' is a scenario's stage, and this is a pretrain "
        "workload (a scenario file says `kind: scenario`)\n"
    )


def test_a_set_of_a_reference_figure_says_it_changed_nothing():
    # a magic-constant audit: `--set accelerators.rubin.tdp_w=3000` changed no figure and said
    # nothing (energy reads a system's power_kw; the physics reads dense peaks, not the sparse or
    # the vendor's "effective" ones)
    args = ("serve", "--hardware", "h100", "--model", "llama-3.1-8b", "-f", "json")
    base = run_cli(*args)
    for path, value in (("tdp_w", 800), ("fp8_sparse_tflops.value", 4000)):
        r = run_cli(*args, "--set", f"accelerators.h100-sxm.{path}={value}")
        assert r.code == 0, r.stderr
        assert r.json()["serving"] == base.json()["serving"]
        assert r.stderr.startswith(  # the value's path, however spelt (`X.value` as `X`)
            f"ipd: warning: --set accelerators.h100-sxm.{path.removesuffix('.value')}: read by no estimate, "
            "so it changed nothing "
            "(a reference figure: "
        ), r.stderr
    dense = run_cli(*args, "--set", "accelerators.h100-sxm.fp8_dense_tflops=1500")
    assert "read by no estimate" not in dense.stderr


def test_a_set_relabels_only_the_field_it_sets(catalog):
    # a cross-command review: origins were kept per entry, so after a --set of GB200's price every
    # field of the system read "builtin:hardware.yaml + --set ...prices.reserved=3.3", its power
    # too; names with dots (llama-3.1-70b) and aliases (gb200) name the entry as --set takes them
    from ipd_cli.engine.inputs import resolve

    cat = catalog.with_overrides(
        ["systems.gb200.prices.reserved=3.3", "models.llama-3.1-70b.layers=81", "systems.gb200.power_kw=130"]
    )
    price = resolve(cat, "systems.gb200-nvl72.prices.reserved").origin
    assert price == "builtin:hardware.yaml + --set systems.gb200.prices.reserved=3.3"
    power = resolve(cat, "systems.gb200-nvl72.power_kw").origin
    assert power == "builtin:hardware.yaml + --set systems.gb200.power_kw=130"
    assert resolve(cat, "systems.gb200-nvl72.host_memory_gb").origin == "builtin:hardware.yaml"
    layers = resolve(cat, "models.llama-3.1-70b.layers").origin
    assert layers.endswith("+ --set models.llama-3.1-70b.layers=81")
    assert resolve(cat, "models.llama-3.1-70b.hidden_size").origin == "builtin:models.yaml"
    # a whole set above the field read, or a part of it, still names the --set
    part = catalog.with_overrides(["systems.gb200.prices.reserved.usd_per_gpu_hour=3.2"])
    assert "--set" in resolve(part, "systems.gb200-nvl72.prices.reserved").origin


@pytest.mark.parametrize(
    ("item", "choices"),
    [
        ("models.deepseek-v3.checkpoint_wide.bf16.value=[lm_head]", "choose one of: fp4, fp8"),
        ("rl.trainer_efficiency.bogus=0.3", "choose one of: dense, moe"),
    ],
)
def test_an_unknown_key_of_a_keyed_table_is_an_input_error(item, choices):
    # a review (2026-12-03): a key a table does not hold (checkpoint_wide's precisions, the RL
    # trainer's model kinds) ended in "internal error: AttributeError" while looking for a field
    # the key might be reported as
    with pytest.raises(InputError, match=f"unknown field; {choices}"):
        load().with_overrides([item])


def test_a_path_set_twice_takes_the_last_value_and_says_so():
    # a new user's review: `--set economics.pue=1.2 --set economics.pue=1.4` ran at 1.4 without a
    # word (a YAML file's repeated key is refused); the last applies, as in a shell, and a warning
    # names both values. A workload path the same
    r = run_cli("compare", "vera-rubin", "--set", "economics.pue=1.2", "--set", "economics.pue=1.4",
                "--set", "workload.serving.tasks_per_day=1e6", "--set", "workload.serving.tasks_per_day=2e6",
                "-f", "json")  # fmt: skip
    assert r.code == 0, r.stderr
    assert "ipd: warning: --set economics.pue is given 2 times (1.2, 1.4): the last, 1.4, applies" in r.stderr
    assert (
        "--set workload.serving.tasks_per_day is given 2 times (1e6, 2e6): the last, 2e6, applies" in r.stderr
    )
    s = r.json()["systems"][0]
    assert s["intelligence_per_dollar"]["tasks_attempted"] == 2e6 * 365
    once = run_cli("compare", "vera-rubin", "--set", "economics.pue=1.4", "-f", "json")
    assert "given 2 times" not in once.stderr
    assert s["serving"]["kw_per_gpu"] == once.json()["systems"][0]["serving"]["kw_per_gpu"]
    mwh = s["intelligence_per_dollar"]["energy_breakdown_mwh"]["pretraining"]
    assert mwh == once.json()["systems"][0]["intelligence_per_dollar"]["energy_breakdown_mwh"]["pretraining"]


def test_a_library_user_gets_the_unread_set_warning_from_the_views():
    # a library review: `load(sets=["economics.electricity_usd_per_kwh=0.5"])` then a rental compare
    # changed nothing and said nothing; the CLI's line lives with the other warnings a library user
    # gets from ipd_cli.render.views.warnings
    from ipd_cli.render.views import warnings

    cat = load(sets=["economics.electricity_usd_per_kwh=0.5"])
    r = compare(cat, ["vera-rubin"])
    assert (
        r.systems[0].intelligence_per_dollar
        == compare(load(), ["vera-rubin"]).systems[0].intelligence_per_dollar
    )
    lines = warnings(r.model_dump(mode="json"), cat=cat)
    assert any(
        ln.startswith("--set economics.electricity_usd_per_kwh: not an input of this estimate")
        for ln in lines
    )
    tco = compare(cat, ["vera-rubin"], pricing="tco")
    assert not any("electricity" in ln for ln in warnings(tco.model_dump(mode="json"), cat=cat))


def _row(name, path, origin):
    from ipd_cli.engine.results import Assumption

    return Assumption(name=name, value=1, unit="", origin=origin, path=path)


def test_a_workloads_field_sources_cite_their_rows(catalog):
    # the workload-level source (N1) was on no row of explain (an explain audit): each workload
    # names the numbers a source gives, and a scenario's rows of the workloads its stages run
    # cite those workloads' sources (values read from configs/workloads/*.yaml)
    from ipd_cli.api import _cited
    from ipd_cli.catalog.workloads import resolve_workload

    _, w, origin = resolve_workload(catalog, "frontier-agentic")
    pre = catalog.origin("workloads", "pretrain-10t-moe")
    rl = catalog.origin("workloads", "rl-swe-agent-10t")
    rows = [
        _row("tokens", "workload.pretraining.tokens", pre),
        _row("deadline", "workload.pretraining.deadline_days", pre),
        _row("target speed per user", "workload.serving.tokens_per_user_s", origin),
        _row("prompts per step", "workload.post_training.prompts_per_step", rl),
        _row("sandbox boot s", "workload.post_training.sandbox_boot_s", rl),
        _row("tasks a day", "workload.serving.tasks_per_day", origin),  # a choice: no source
        # a path a nested workload cites, on a row from another file: not cited
        _row("prompts per step", "workload.post_training.prompts_per_step", "elsewhere.yaml"),
    ]
    got = [(a.source, a.note) for a in _cited(rows, catalog, w, origin)]
    assert got == [
        ("N1", "100 trillion tokens: NVIDIA's claim"),
        ("N1", "a one-month window: NVIDIA's claim, taken as 30 days"),
        ("N1", "the interactivity of NVIDIA's Vera Rubin claims"),
        ("nemo-gym-swe", None),
        (
            "podflare-bench",
            "E2B's create-to-first-exec p95 of a generic microVM, 811 ms, rounded up: "
            "not a SWE repository image",
        ),
        (None, None),
        (None, None),
    ]
    cited = _cited(rows, catalog, w, origin)
    assert cited[0].source_title == catalog.sources["N1"].title and cited[0].source_date == "2026-01-05"
    assert not cited[0].estimate and cited[4].estimate  # a generic microVM's start: an estimate
    # a value a parameter gives (`ipd rl --transport`, `--mode`) is not the file's source's
    assert (
        _cited(rows, catalog, w, origin, given=frozenset({"workload.pretraining.tokens"}))[0].source is None
    )
    # a --set value is the command line's, not the workload's source
    cat = load(sets=["workload.pretraining.tokens=5e13"])
    _, w, origin = resolve_workload(cat, "frontier-agentic")
    assert _cited(rows[:2], cat, w, origin)[0].source == "cli-set"
    assert _cited(rows[:2], cat, w, origin)[1].source == "N1"


def test_a_workload_files_own_sources_reach_its_rows(tmp_path):
    # a file's `sources:` entry had its id on the rows and no title; field_sources cite it
    f = tmp_path / "plan.yaml"
    f.write_text(
        'sources:\n  my-budget: {title: "the team\'s 2027 plan", date: 2026-11}\n'
        "kind: pretrain\nmodel: llama-3.1-8b\ntokens: 1.0e12\ngpus: 64\nsource: user\n"
        "field_sources:\n  tokens: {source: my-budget, note: a trillion tokens}\n"
    )
    r = run_cli("compare", "h100", "--workload", str(f), "-f", "json")
    assert r.code == 0, r.stderr
    (row,) = [a for a in r.json()["systems"][0]["assumptions"] if a["path"] == "workload.tokens"]
    assert (row["source"], row["source_title"], row["source_date"], row["note"]) == (
        "my-budget",
        "the team's 2027 plan",
        "2026-11",
        "a trillion tokens",
    )


def test_a_shown_workloads_citations_follow_its_values(tmp_path):
    # a review: a what-if file written by `ipd workloads show` kept NVIDIA's source on the 100
    # tokens/s its user wrote; each entry now carries the value it cites, and a set field none
    import yaml

    shown = run_cli("workloads", "show", "frontier-agentic", "-f", "yaml")
    assert shown.code == 0, shown.stderr
    doc = yaml.safe_load(shown.stdout)
    entry = doc["entry"]
    assert entry["field_sources"]["serving.tokens_per_user_s"]["value"] == 50
    rows = {}
    for name, speed in (("same.yaml", 50), ("edited.yaml", 100)):
        entry["serving"]["tokens_per_user_s"] = speed
        f = tmp_path / name
        f.write_text(yaml.safe_dump({**entry, "sources": doc["sources"]}))
        r = run_cli("compare", "blackwell", "--scenario", str(f), "-f", "json")
        assert r.code == 0, r.stderr
        (row,) = [
            a
            for a in r.json()["systems"][0]["assumptions"]
            if a["path"] == "workload.serving.tokens_per_user_s"
        ]
        rows[name] = (row["value"], row["source"])
    assert rows == {"same.yaml": (50, "N1"), "edited.yaml": (100, None)}
    r = run_cli(
        "workloads",
        "show",
        "frontier-agentic",
        "--set",
        "workload.serving.tokens_per_user_s=60",
        "-f",
        "yaml",
    )
    # the speed's citation goes with its value; the TTFT target's (not set) stays
    assert r.code == 0
    assert set(yaml.safe_load(r.stdout)["entry"]["field_sources"]) == {"serving.ttft_target_s"}


def test_a_field_a_parameter_gives_is_not_cited_nor_refused(tmp_path):
    # a review: `ipd rl --gpus 512` on a file citing its gen_gpus was refused ("not given by this
    # workload"), and `--mode async` on a file citing its mode kept the file's source
    f = tmp_path / "rl.yaml"
    f.write_text(
        "kind: rl\nmodel: qwen3-235b-a22b\nprompts_per_step: 64\ngroup_size: 8\nprompt_tokens: 512\n"
        "mean_response_tokens: 2000\nmax_response_tokens: 8192\nmode: colocated\ngen_gpus: 64\n"
        "train_gpus: 64\nsource: user\nfield_sources: {gen_gpus: {source: user}, mode: {source: user}}\n"
    )
    base = ("rl", "--hardware", "h100", "--workload", str(f), "-f", "json")
    r = run_cli(*base, "--gpus", "128")
    assert r.code == 0, r.stderr
    r = run_cli(*base, "--mode", "async")
    assert r.code == 0, r.stderr
    cites = {
        a["path"]: a["source"]
        for a in r.json()["assumptions"]
        if a["path"] in ("workload.mode", "workload.gen_gpus")
    }
    assert cites == {"workload.mode": None, "workload.gen_gpus": "user"}


@pytest.mark.parametrize(
    "field_sources, sources, message",
    [
        (
            "{tokenz: {source: user}}",
            "",
            r"field_sources: 'tokenz' is not a number or choice of this workload",
        ),
        (
            "{source: {source: user}}",
            "",
            r"field_sources: 'source' is not a number or choice of this workload",
        ),
        ("{deadline_days: {source: user}}", "", r"'deadline_days' is not given by this workload"),
        ("{tokens: {source: nope}}", "", r"field_sources.tokens.source: unknown source id 'nope'"),
        ("{}", "sources: {mine: {title: t}}\n", r"sources.mine.date: Field required"),
    ],
)
def test_bad_field_sources_are_one_line_input_errors(tmp_path, field_sources, sources, message):
    f = tmp_path / "w.yaml"
    f.write_text(
        f"{sources}kind: pretrain\nmodel: llama-3.1-8b\ntokens: 1.0e12\ngpus: 64\nsource: user\n"
        f"field_sources: {field_sources}\n"
    )
    r = run_cli("compare", "h100", "--workload", str(f), "-f", "json")
    assert r.code == 2 and r.stdout == ""
    assert re.search(message, r.stderr) and r.stderr.count("\n") == 1, r.stderr


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("systems.hopper.power_kw=9", "systems.h100-sxm.power_kw=11"),  # an alias and the name
        ("economics.pue=1.2", "economics.pue.value=1.4"),  # X and X.value
        ("systems.h100.prices.reserved=2", "systems.h100-sxm.prices.reserved.usd_per_gpu_hour=3"),
        ("systems.H100.prices.reserved=2", "systems.h100.prices.reserved=3"),  # in another case
    ],
)
def test_one_value_set_twice_under_two_spellings_is_warned(first, second):
    # a fresh-eyes review: the duplicate warning compared the typed paths, so two spellings of one
    # value ran at the last without a word
    cat = load().with_overrides([first, second])
    last = second.partition("=")[2]
    assert (
        f"`sets`: one value given 2 times, spelt differently ({first}, {second}): the last, {last}, applies"
        in (cat.warnings)
    )
    alone = load().with_overrides([second])
    assert not any("given 2 times" in w for w in alone.warnings)


def test_set_paths_read_system_and_model_names_in_any_case():
    # "names and aliases are read in any case" (README): `--set systems.H100...` was refused
    base = load()
    upper = base.with_overrides(["systems.H100.prices.reserved=2", "models.Llama-3.1-8B.layers=30"])
    lower = base.with_overrides(["systems.h100-sxm.prices.reserved=2", "models.llama-3.1-8b.layers=30"])
    assert upper.system("h100").prices == lower.system("h100").prices
    assert upper.model("llama-3.1-8b").layers == lower.model("llama-3.1-8b").layers == 30
    with pytest.raises(InputError, match="unknown accelerator 'H100-SXM'; did you mean 'h100-sxm'"):
        base.with_overrides(["accelerators.H100-SXM.hbm_gib=96"])  # accelerators: as spelt, as in files


def test_a_dense_models_active_and_total_parameters_change_together():
    # a fresh-eyes review: half of Llama 3.1 70B's active count made training 15 % faster and left
    # serving (which reads the total) as it was; a total three times the shapes tripled the served
    # weights alone. A dense model runs every parameter for every token: the two must agree, and an
    # entry's sets are validated together, so both can change
    base = load()
    m = "models.llama-3.1-70b"
    with pytest.raises(InputError, match=r"active_params 3\.5e\+10 must equal total_params 7\.06e\+10"):
        base.with_overrides([f"{m}.active_params=3.5e10"])
    with pytest.raises(InputError, match=r"a dense model \(experts 1\) runs every parameter"):
        base.with_overrides([f"{m}.total_params=3e11", f"{m}.active_params=7.06e10"])
    both = base.with_overrides([f"{m}.total_params=8e10", f"{m}.active_params=8e10"])
    assert (both.model("llama-3.1-70b").total_params, both.model("llama-3.1-70b").active_params) == (
        8e10,
        8e10,
    )
    # the total alone carries the active count (so a dense model's size can be a sweep axis; a code
    # review: it could not, the axes are crossed); an MoE's total alone does not
    alone = base.with_overrides([f"{m}.total_params=8e10"]).model("llama-3.1-70b")
    assert (alone.total_params, alone.active_params) == (8e10, 8e10)
    moe = base.with_overrides(["models.moe-10t.total_params=1.1e13"]).model("moe-10t")
    assert moe.active_params == base.model("moe-10t").active_params
    # training's FLOPs per token follow: 6 x active (+ attention, unchanged), so 6 x 0.94e10 more
    kw = dict(hardware="h100", model="llama-3.1-70b", tokens=1e12, gpus=256)
    before, after = train(base, **kw), train(both, **kw)
    grew = after.pretraining.flops_per_token - before.pretraining.flops_per_token
    assert grew == pytest.approx(6 * (8e10 - 7.06e10), rel=1e-9)
    r = run_cli("train", "--hardware", "h100", "--model", "llama-3.1-70b", "--tokens", "1e12",
                "--gpus", "256", "--set", f"{m}.active_params=3.5e10", "-f", "json")  # fmt: skip
    assert r.code == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert "change both, or give experts > 1" in r.stderr


def test_a_sliding_window_needs_layers_beyond_the_full_attention_ones():
    # gpt-oss-120b: 18 full-attention layers and 18 with the 128-token window; a window on a model
    # whose every layer keeps full attention names no layer, and says how to fix it
    with pytest.raises(InputError, match=r"sliding_window names the window of the layers beyond"):
        load(sets=["models.gpt-oss-120b.attention_layers=36"])
    assert load(sets=["models.gpt-oss-120b.sliding_window=256"]).model("gpt-oss-120b").sliding_window == 256


def test_an_expert_clamp_is_a_positive_limit():
    # gpt-oss-120b clamps its experts' gated input at 7 (config.json swiglu_limit); a limit of 0
    # would clamp every value to nothing and is refused, naming the field
    with pytest.raises(InputError, match=r"glu_clamp"):
        load(sets=["models.gpt-oss-120b.glu_clamp=0"])


def test_a_set_path_may_name_a_table_key_holding_dots():
    """A stack's release ('1.1.0rc2') is a key with dots: --set and the engine's reads join the
    keys the table holds, the rest are fields as before."""
    from ipd_cli.engine.inputs import resolve

    path = "serving.stacks.trtllm.releases.1.1.0rc2.profiles.blackwell.prompt_stall_ms.fp4"
    cat = load(sets=[f"{path}=40"])
    held = cat.serving.stacks["trtllm"].releases["1.1.0rc2"].profiles["blackwell"].prompt_stall_ms
    assert held is not None and held["fp4"].value == 40 and held["fp4"].source == "cli-set"
    r = resolve(cat, path)
    assert (r.value.value, r.unit, r.si) == (40, "ms", 1e-3)
    with pytest.raises(InputError, match=r"releases\.1: unknown field; choose one of: 1\.1\.0rc2"):
        load(sets=["serving.stacks.trtllm.releases.1.2.profiles.blackwell.prompt_stall_ms.fp4=40"])


def test_a_copy_reads_what_its_sets_leave_alone_from_its_catalog_and_the_rest_afresh(catalog):
    # each copy's answer at every path is the one its own catalog gives, resolved afresh
    # (`_resolve`, no table), before and after the catalog it was made from read the path
    from ipd_cli.engine.inputs import _resolve, resolve

    stack = "serving.stacks.sglang.profiles.grace-blackwell.step_overhead_us_per_layer"
    paths = [
        stack,  # the field set
        "serving.stacks",  # the table holding it, whole
        "serving.stacks.trtllm.profiles.blackwell.step_overhead_us_per_layer",  # another stack
        "serving.decode_hbm_efficiency",  # the same section, a field no set touches
        "systems.hopper.power_kw",  # another section, an entry by its alias
        "efficiency.training_share_by_accelerator.a100-sxm",
        "systems.h100-sxm.host_link_gb_per_s",  # not set: a KeyError, every time
    ]

    def fresh(cat, path):
        try:
            return _resolve(cat, path)
        except KeyError as e:
            return e.args

    def read(cat, path):
        try:
            return resolve(cat, path)
        except KeyError as e:
            return e.args

    one = catalog.with_overrides([f"{stack}=7.5"])
    two = one.with_overrides(["efficiency.training_share_by_accelerator.a100-sxm=0.5"])
    read(catalog, paths[4])  # the catalog read one path before, the rest after its copies
    for cat in (two, one, catalog, two, one):  # (twice: each answer kept is the same)
        for path in paths:
            assert read(cat, path) == fresh(cat, path), path
    assert read(one, stack).value.value == read(two, stack).value.value == 7.5
    assert read(catalog, stack).value.value != 7.5
    assert read(two, paths[5]).value.value == 0.5 != read(one, paths[5]).value.value
    assert read(one, "serving.stacks").value["sglang"] is not read(catalog, "serving.stacks").value["sglang"]
    # what the sets leave alone is resolved once, on the catalog read from files
    assert read(two, paths[4]) is read(one, paths[4]) is read(catalog, paths[4])
    assert read(two, paths[2]) is read(one, paths[2])  # (resolved on the copy whose set touched its table)
    assert read(two, paths[2]) == read(catalog, paths[2])
    assert read(two, stack) is read(one, stack) is not read(catalog, stack)
    with pytest.raises(KeyError, match="host_link_gb_per_s: not set in the catalog"):
        resolve(two, paths[6])
    # a path first read on the last copy is kept by each catalog on the way, for their next copies
    three, hbm = two.with_overrides(["efficiency.tp_comm_overlap=0.5"]), "accelerators.h100-sxm.hbm_tb_per_s"
    assert read(three, hbm) == fresh(catalog, hbm)
    assert all(c.resolved[hbm] is read(three, hbm) for c in (two, one, catalog))


def test_a_long_chain_of_copies_keeps_few_catalogs_behind_it(catalog):
    # a loop of sets, each on the last copy: past INHERITED_DEPTH copies, one starts afresh (what
    # its catalog read, copied), so a chain keeps at most that many catalogs alive
    from ipd_cli.catalog.catalog import INHERITED_DEPTH
    from ipd_cli.engine.inputs import _resolve, resolve

    path, power = "systems.hopper.power_kw", "efficiency.training_share"
    cat = catalog
    for k in range(INHERITED_DEPTH + 2):
        resolve(cat, path)
        cat = cat.with_overrides([f"{power}={0.5 + k / 1000}"])
        assert cat.resolved.depth == (k + 1) % (INHERITED_DEPTH + 1)
    assert cat.resolved.parent.resolved.parent is None  # (depth 1: made from the one made afresh)
    assert resolve(cat, path) == _resolve(cat, path)
    assert (
        resolve(cat, power).value.value
        == 0.5 + (INHERITED_DEPTH + 1) / 1000
        == _resolve(cat, power).value.value
    )


def test_a_copy_takes_the_aliases_of_the_sections_its_sets_leave_alone(catalog):
    # the aliases a copy has are the ones built anew from its entries: taken from the catalog (a
    # copy of them) where no set touches the section, built anew where one does (the last set
    # replaces h100-sxm's five aliases with one)
    from ipd_cli.catalog.catalog import _aliases

    for sets in (
        ["efficiency.training_share=0.5"],
        ["systems.hopper.power_kw=11"],
        ["models.llama-3.1-8b.layers=30"],
        ["systems.hopper.aliases=[h100x]"],
    ):
        cat = catalog.with_overrides(sets)
        for section in ("systems", "models"):
            assert cat.aliases[section] == _aliases(cat, section)
            assert cat.aliases[section] is not catalog.aliases[section]
    assert cat.aliases["systems"]["h100x"] == "h100-sxm" and "hopper" not in cat.aliases["systems"]
