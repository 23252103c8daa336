"""The built-in catalog and user catalogs: loading, sources, overrides, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import builtin_yaml, run_cli, write

from ipd_cli import load
from ipd_cli.catalog.loader import load_catalog
from ipd_cli.catalog.yamlio import read_yaml
from ipd_cli.errors import InputError

REQUIRED_SYSTEMS = {
    "h100-sxm",
    "h200",
    "b200",
    "gb200-nvl72",
    "b300",
    "gb300-nvl72",
    "vera-rubin-nvl72",
    "rubin-ultra",
    "mi300x",
    "mi355x",
}
REQUIRED_MODELS = {
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "llama-2-70b",
    "deepseek-v3",
    "kimi-k2",
    "qwen3-235b-a22b",
    "qwen3-30b-a3b",
    "gpt-oss-120b",
    "nemotron-3-ultra",
    "moe-10t",
}


def test_builtin_catalog_has_what_the_issue_lists(catalog):
    assert REQUIRED_SYSTEMS <= set(catalog.systems)
    assert REQUIRED_MODELS <= set(catalog.models)
    assert "pretrain-10t-moe" in catalog.workloads
    assert catalog.canonical("systems", "vera-rubin") == "vera-rubin-nvl72"
    assert catalog.canonical("systems", "blackwell") == "gb200-nvl72"
    assert catalog.canonical("systems", "blackwell-ultra") == "gb300-nvl72"
    assert catalog.canonical("systems", "hopper") == "h100-sxm"
    assert catalog.canonical("models", "deepseek-r1") == "deepseek-v3"


def test_rubin_dense_and_vendor_figures_are_apart(catalog):
    # NVIDIA CES 2026 blog, Table 2: 35 PF NVFP4 "dense compute", 50 PF "Transformer Engine compute"
    rubin = catalog.accelerator_of(catalog.system("vera-rubin"))
    assert rubin.fp4_dense_tflops.value == 35_000
    assert rubin.fp4_vendor_effective_tflops.value == 50_000
    assert catalog.system("rubin-ultra").unstable and catalog.system("rubin-ultra").status == "roadmap"
    # nor may a dense range reach a vendor "effective" figure: Rubin Ultra's dense FP4 range topped
    # out at 100 PF, the GTC-2025 plan's TE figure (100 PF x 35/50 = 70 PF dense; a catalog audit)
    both = [a for a in catalog.accelerators.values() if a.fp4_dense_tflops and a.fp4_vendor_effective_tflops]
    assert len(both) >= 2
    for a in both:
        dense, effective = a.fp4_dense_tflops, a.fp4_vendor_effective_tflops.value
        assert max((dense.value, *(dense.range or ()))) < effective


@pytest.mark.parametrize(
    ("system", "c2c_gb_per_s"), [("gb200-nvl72", 900), ("gb300-nvl72", 900), ("vera-rubin", 1800)]
)
def test_an_nvlink_c2c_host_link_is_per_gpu_and_direction(catalog, system, c2c_gb_per_s):
    # hardware.md Table 1 (NVIDIA's Vera Rubin blog): NVLink-C2C 900 GB/s per Grace, 1.8 TB/s per
    # Vera, both directions summed as NVLink figures are quoted; one CPU per two GPUs. The field
    # is declared per GPU and direction: a units review found the per-GPU bidirectional share
    # (450, 900) there, which doubled the host link activation offload rides on
    s = catalog.system(system)
    assert s.accelerators / s.host_cpus == 2
    assert s.host_link_gb_per_s.value == c2c_gb_per_s / 2 / (s.accelerators / s.host_cpus)


def test_every_value_has_a_dated_source(catalog):
    for name, source in catalog.sources.items():
        assert source.date, name
    for s in catalog.systems.values():
        for p in s.prices:
            assert p.usd_per_gpu_hour.source in catalog.sources


def _sourced_values(node, path=""):
    """Every sourced value (``value`` with a ``source``) under ``node``, with its dotted path."""
    from pydantic import BaseModel

    if isinstance(node, BaseModel):
        if "source" in type(node).model_fields and "value" in type(node).model_fields:
            yield path, node
            return
        for name in type(node).model_fields:
            yield from _sourced_values(getattr(node, name), f"{path}.{name}")
    elif isinstance(node, dict):
        for key, v in node.items():
            yield from _sourced_values(v, f"{path}.{key}")
    elif isinstance(node, list | tuple):
        for i, v in enumerate(node):
            yield from _sourced_values(v, f"{path}[{i}]")


def test_every_fitted_value_is_flagged_as_an_estimate(catalog):
    # values `ipd calibrate` fits are our own arithmetic, which the README says `estimate: true`
    # marks: a magic-constant audit found 19 of 41 unflagged (the fp4 recipe share, the training
    # shares, the RL sync efficiencies), so they reached comparisons as sourced facts
    sections = ("accelerators", "systems", "models", "economics", "efficiency", "serving", "rl")
    fitted = [
        (f"{section}{path}", v)
        for section in sections
        for path, v in _sourced_values(getattr(catalog, section))
        if v.source == "ipd-calibration"
    ]
    assert len(fitted) >= 41
    assert [path for path, v in fitted if not v.estimate] == []


def test_user_catalog_overrides_builtin_and_show_names_the_file(tmp_path):
    write(
        tmp_path / "mine.yaml",
        "sources:\n  me: {title: my quote, date: 2026-11-01}\n"
        "economics:\n  electricity_usd_per_kwh: {value: 0.2, source: me}\n",
    )
    cat = load_catalog([tmp_path])
    assert cat.economics.electricity_usd_per_kwh.value == 0.2
    assert cat.economics.pue.value == load().economics.pue.value  # other fields kept
    r = run_cli("hardware", "show", "hopper", "--format", "json")
    assert r.code == 0 and r.json()["origin"].endswith("hardware.yaml")


def test_ipd_catalog_env_variable(tmp_path):
    base = load().systems["h100-sxm"].model_dump(mode="json", exclude_none=True)
    base["description"] = "my H100 cluster"
    import yaml

    write(tmp_path / "hw.yaml", yaml.safe_dump({"systems": {"h100-sxm": base}}))
    r = run_cli("hardware", "show", "h100-sxm", "--format", "json", env={"IPD_CATALOG": str(tmp_path)})
    assert r.code == 0, r.stderr
    assert r.json()["entry"]["description"] == "my H100 cluster"
    assert r.json()["origin"] == str(tmp_path / "hw.yaml")


def test_unknown_field_names_file_and_field(tmp_path):
    write(tmp_path / "bad.yaml", "economics:\n  pue: {value: 1.2, source: uptime-2024, colour: red}\n")
    with pytest.raises(InputError, match=r"bad.yaml: economics.pue.colour: unknown field"):
        load_catalog([tmp_path])


def test_duplicate_names_in_one_layer(tmp_path):
    write(tmp_path / "a.yaml", "sources:\n  x: {title: t, date: 2026}\n")
    write(tmp_path / "b.yaml", "sources:\n  x: {title: u, date: 2026, url: 'https://x.example'}\n")
    with pytest.raises(
        InputError, match=r"sources.x is also defined in .*a.yaml with a different title, url; keep one"
    ):
        load_catalog([tmp_path])


def test_a_source_defined_twice_the_same_is_one_source(tmp_path):
    # each workload file citing a source carries its entry: the same entry twice was "keep one"
    source = "sources:\n  mine: {title: my plan, date: 2026-12-01}\n"
    for name, model in (("pre-a", "kimi-k2"), ("pre-b", "llama-3.1-405b")):
        write(
            tmp_path / "workloads" / f"{name}.yaml",
            f"kind: pretrain\ndescription: d\nmodel: {model}\ntokens: 5.0e12\ndeadline_days: 60\n"
            f"precision: fp8\nsource: mine\n{source}",
        )
    cat = load_catalog([tmp_path])
    assert cat.sources["mine"].title == "my plan" and cat.workloads["pre-b"].source == "mine"


def test_yaml_errors_are_one_line_with_position(tmp_path):
    p = write(tmp_path / "broken.yaml", "a: [1, 2\n")
    with pytest.raises(InputError, match=r"broken.yaml: invalid YAML \(line \d+, column \d+\)"):
        read_yaml(p)
    p = write(tmp_path / "dup.yaml", "a: 1\na: 2\n")
    with pytest.raises(InputError, match="duplicate key 'a'"):
        read_yaml(p)
    p = write(tmp_path / "evil.yaml", "a: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(InputError, match="invalid YAML"):
        read_yaml(p)


def test_negative_spec_and_bad_fraction_rejected(tmp_path):
    write(tmp_path / "e.yaml", "efficiency:\n  hbm_usable_fraction: {value: 1.5, source: ipd-estimate}\n")
    with pytest.raises(InputError, match="hbm_usable_fraction must be a fraction"):
        load_catalog([tmp_path])


def test_unknown_source_reference(tmp_path):
    write(tmp_path / "e.yaml", "economics:\n  pue: {value: 1.2, source: nowhere}\n")
    with pytest.raises(InputError, match="unknown source id 'nowhere'"):
        load_catalog([tmp_path])


def test_missing_catalog_dir_is_a_usage_error(tmp_path):
    r = run_cli("hardware", "list", "--catalog", str(tmp_path / "nope"))
    assert r.code == 2
    assert "catalog directory not found" in r.stderr and "Traceback" not in r.stderr


def test_cache_sees_an_edit_at_once(tmp_path):
    import os

    f = write(
        tmp_path / "e.yaml",
        "sources:\n  s: {title: t, date: 2026}\neconomics:\n  pue: {value: 1.2, source: s}\n",
    )
    assert load_catalog([tmp_path]).economics.pue.value == 1.2
    assert load_catalog([tmp_path]).economics.pue.value == 1.2  # served from the cache
    f.write_text(f.read_text().replace("1.2", "1.4"))
    os.utime(f, ns=(f.stat().st_mtime_ns + 10**9, f.stat().st_mtime_ns + 10**9))
    assert load_catalog([tmp_path]).economics.pue.value == 1.4


def test_a_file_edited_while_a_load_reads_it_is_not_cached_under_the_old_content(tmp_path, monkeypatch):
    # the key is made of the files before they are parsed; a script that rewrites a catalog file
    # while a run reads it stored the new content's catalog under the old content's key, and every
    # later command with the old file printed the new values
    from ipd_cli.catalog import layers, loader

    monkeypatch.setenv("IPD_CACHE_DIR", str(tmp_path / "cache"))
    user = tmp_path / "user"
    user.mkdir()
    f = write(user / "e.yaml", "economics:\n  pue: {value: 1.2, source: uptime-2024}\n")
    read = layers.load_raw

    def edited_before_read(extra_dirs=None):  # after the key was made of 1.2
        f.write_text(f.read_text().replace("1.2", "1.5"))
        return read(extra_dirs)

    monkeypatch.setattr(loader, "load_raw", edited_before_read)
    assert load_catalog([user]).economics.pue.value == 1.5  # what was read
    monkeypatch.setattr(loader, "load_raw", read)
    f.write_text(f.read_text().replace("1.5", "1.2"))
    assert load_catalog([user]).economics.pue.value == 1.2  # was 1.5: the entry stored under 1.2's key
    f.write_text(f.read_text().replace("1.2", "1.5"))
    assert load_catalog([user]).economics.pue.value == 1.5


def test_cache_off_and_corrupt_cache_are_harmless(tmp_path, monkeypatch):
    from ipd_cli.catalog import cache
    from ipd_cli.catalog.layers import catalog_dirs

    monkeypatch.setenv("IPD_CACHE_DIR", str(tmp_path))
    write(tmp_path / cache.entry_name(catalog_dirs()), "not a cache entry")
    assert load_catalog().systems
    monkeypatch.setenv("IPD_CACHE_DIR", "off")
    assert load_catalog().systems


# --- `ipd hardware list` from the listing the cache stores (issue 16) ---------------------------


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("IPD_CACHE_DIR", str(d))
    return d


def _no_typer_app(monkeypatch):
    """Make the full path fail, so that a passing command proves it was served from the cache."""
    from ipd_cli import cli

    def fail():
        raise AssertionError("the full path was taken")

    monkeypatch.setattr(cli, "_command", fail)


@pytest.mark.parametrize(
    ("what", "needle"),
    [("hardware", "vera-rubin-nvl72"), ("models", "deepseek-v3"), ("workloads", "rl-swe-agent")],
)
@pytest.mark.parametrize(
    "args",
    [
        (),
        ("-f", "json"),
        ("--format", "csv"),
        ("--format=yaml",),
        ("-f", "markdown"),
        ("-f", "table"),
        ("-f", "auto"),
        ("-f", "JSON"),  # a format in any case, as the full path folds it (the input review)
        ("--format=Yaml",),
    ],
)
def test_a_list_from_the_cache_equals_the_full_path(fresh_cache, monkeypatch, what, needle, args):
    full = run_cli(what, "list", *args, env={"IPD_CACHE_DIR": "off"})  # YAML, validated
    assert full.code == 0 and needle in full.stdout, full.stderr
    assert run_cli(what, "list", *args) == full  # the full path, which fills the cache
    _no_typer_app(monkeypatch)
    assert run_cli(what, "list", *args) == full  # served from the stored listing


def test_hardware_list_takes_the_full_path_for_arguments_it_does_not_name(fresh_cache, tmp_path):
    from ipd_cli import cli

    assert run_cli("hardware", "list").code == 0  # fills the cache
    user = write(tmp_path / "mine" / "e.yaml", "economics: {}\n").parent
    for args in [
        ["hardware", "list", "--catalog", str(user)],
        ["hardware", "list", "--set", "economics.pue=1.2"],
        ["hardware", "list", "-f", "nope"],
        ["hardware", "list", "-fjson"],
        ["hardware", "list", "--help"],
        ["hardware", "list", "-f"],
        ["hardware", "show", "h100-sxm"],
        ["models", "list", "--set", "economics.pue=1.2"],
        ["workloads", "list", "extra"],
        ["hardware"],
        [],
        ["--version", "hardware", "list"],
    ]:
        assert cli._listed_from_cache(args) is False, args
    # a missing IPD_CATALOG directory is reported as without the cache
    r = run_cli("hardware", "list", env={"IPD_CATALOG": str(tmp_path / "nope")})
    assert r.code == 2 and "catalog directory not found" in r.stderr and len(r.stderr.splitlines()) == 1
    # a format the command refuses: the same check, the same line, from the cache or without it
    r = run_cli("hardware", "list", "-f", "XLSX")
    assert r == run_cli("hardware", "list", "-f", "XLSX", env={"IPD_CACHE_DIR": "off"})
    # why, with the value as typed: it said "unknown format 'xlsx'" (the input review's leftovers)
    listing = "choose one of: auto, table, json, csv, yaml, markdown\n"
    assert (
        r.code == 2
        and r.stdout == ""
        and r.stderr
        == (
            "ipd: error: --format XLSX: xlsx is a binary format, and this command prints to stdout only "
            f"(it has no -o); {listing}"
        )
    )
    for args in (
        ["models", "list", "--format=Xlsx"],
        ["workloads", "show", "pretrain-10t-moe", "-f", "xlsX"],
    ):
        r = run_cli(*args)
        assert r.code == 2 and r.stderr.startswith(f"ipd: error: --format {args[-1].split('=')[-1]}: xlsx is")
    r = run_cli("hardware", "list", "-f", "XLS")
    assert r == run_cli("hardware", "list", "-f", "XLS", env={"IPD_CACHE_DIR": "off"})
    assert r.code == 2 and r.stderr == f"ipd: error: unknown format 'XLS'; {listing}"


def test_a_bad_catalog_file_fails_on_hardware_list_after_the_cache_served_it(
    fresh_cache, tmp_path, monkeypatch
):
    user = tmp_path / "mine"
    f = write(
        user / "e.yaml", "sources:\n  s: {title: t, date: 2026}\neconomics:\n  pue: {value: 1.2, source: s}\n"
    )
    env = {"IPD_CATALOG": str(user)}
    ok = run_cli("hardware", "list", env=env)
    assert ok.code == 0
    with monkeypatch.context() as m:
        _no_typer_app(m)
        assert run_cli("hardware", "list", env=env) == ok  # from the cache
    f.write_text(f.read_text().replace("1.2", "-1.2"))  # an edit that fails validation
    r = run_cli("hardware", "list", env=env)
    off = run_cli("hardware", "list", env={**env, "IPD_CACHE_DIR": "off"})
    assert r == off and r.code == 2 and r.stdout == ""
    assert r.stderr.startswith("ipd: error: ") and len(r.stderr.splitlines()) == 1
    assert "pue" in r.stderr and "Traceback" not in r.stderr


def test_a_tampered_or_unstored_listing_is_a_miss(fresh_cache, monkeypatch):
    from ipd_cli.catalog import cache
    from ipd_cli.catalog.dirs import catalog_dirs
    from ipd_cli.engine.result_base import Listing

    full = run_cli("hardware", "list", "-f", "csv")
    entry = fresh_cache / cache.entry_name(catalog_dirs())
    assert cache.stored_listing("hardware") is not None
    text = entry.read_bytes()
    header, listings, body = text.split(b"\n", 2)
    assert b'"hbm_gib": 80.0' in listings
    entry.write_bytes(b"\n".join([header, listings.replace(b'"hbm_gib": 80.0', b'"hbm_gib": 81.0', 1), body]))
    assert cache.stored_listing("hardware") is None  # its checksum no longer matches
    assert run_cli("hardware", "list", "-f", "csv") == full  # the validated catalog, not the line
    # a listing whose JSON dump would not be its Python one (NaN becomes null) is not stored
    monkeypatch.setattr(
        "ipd_cli.listing.list_hardware",
        lambda cat: Listing(kind="hardware", items=[{"hbm_gib": float("nan")}]),
    )
    entry.unlink()
    load_catalog()  # rewrites the entry
    assert entry.exists() and cache.read(catalog_dirs(), cache.fingerprint(catalog_dirs())) is not None
    assert cache.stored_listing("hardware") is None


def test_a_user_catalogs_cache_key_holds_the_date_its_unsourced_values_cite(tmp_path, monkeypatch):
    # a fresh-eyes review: a user file's value with no source cites `user` dated today, and a cached
    # catalog kept the day it was written; the built-in catalog's key does not move with the date
    import datetime as dt

    from ipd_cli.catalog import cache
    from ipd_cli.catalog.dirs import catalog_dirs

    write(tmp_path / "econ.yaml", "economics:\n  pue: {value: 1.2}\n")
    user, builtin = catalog_dirs([tmp_path]), catalog_dirs()
    assert len(user) == len(builtin) + 1
    keys = (cache.fingerprint(user), cache.fingerprint(builtin))

    class Later(dt.date):
        @classmethod
        def today(cls):
            return cls(2099, 1, 1)

    monkeypatch.setattr(dt, "date", Later)
    assert cache.fingerprint(user) != keys[0]
    assert cache.fingerprint(builtin) == keys[1]


def test_the_cache_key_covers_the_code_the_listing_comes_from(fresh_cache, tmp_path, monkeypatch):
    from ipd_cli.catalog import cache
    from ipd_cli.catalog.dirs import catalog_dirs

    code = write(tmp_path / "listing.py", "A = 1\n")
    monkeypatch.setattr(cache, "_LISTING_CODE", (code,))
    before = cache.fingerprint(catalog_dirs())
    code.write_text("A = 2\n")
    assert cache.fingerprint(catalog_dirs()) != before


def test_hbm_capacity_is_read_in_binary_units():
    # an "80 GB" H100 reports 81,559 MiB (source X2): the catalog's 80 is GiB, 80 x 2^30 bytes;
    # the listing gives it as the catalog has it and in decimal GB (85.9), and the engine reads bytes
    cat = load_catalog()
    assert cat.accelerators["h100-sxm"].hbm_gib.value == 80
    h100 = next(
        i for i in run_cli("hardware", "list", "-f", "json").json()["items"] if i["name"] == "h100-sxm"
    )
    assert (h100["hbm_gib"], h100["hbm_gb"]) == (80.0, 85.9)
    from ipd_cli.engine.inputs import Inputs

    assert Inputs(cat).read("accelerators.h100-sxm.hbm_gib", "HBM") == 80 * 2**30
    r = run_cli("train", "--hardware", "h100", "--model", "llama-3.1-8b", "--tokens", "1e12",
                "--set", "accelerators.h100-sxm.hbm_gb=90")  # fmt: skip
    assert r.code == 2 and "unknown field; did you mean 'hbm_gib'?" in r.stderr


def test_a_process_decodes_an_unchanged_cache_entry_once(fresh_cache):
    # the decoded catalog is kept with the bytes it came from: the same entry gives the same
    # (frozen) entries back, in tables of the load's own; an entry whose bytes differ is decoded
    # again, and a broken one is a miss
    from ipd_cli.catalog import cache
    from ipd_cli.catalog.dirs import catalog_dirs

    load_catalog()  # built from the files and stored
    first = load_catalog()  # decoded from the entry
    again = load_catalog()
    assert again == first and again is not first and again.systems is not first.systems
    assert all(again.systems[n] is s for n, s in first.systems.items())  # not decoded again
    entry = fresh_cache / cache.entry_name(catalog_dirs())
    text = entry.read_bytes()
    entry.write_bytes(text.replace(b'"hbm_gib":{"value":80.0', b'"hbm_gib":{"value":80.5', 1))
    assert text != entry.read_bytes()
    key = cache.fingerprint(catalog_dirs())
    changed = cache.read(catalog_dirs(), key)
    assert changed is not None and changed is not first
    moved = {
        n for n, a in changed.accelerators.items() if a.hbm_gib.value != first.accelerators[n].hbm_gib.value
    }
    assert len(moved) == 1 and changed.accelerators[moved.pop()].hbm_gib.value == 80.5
    entry.write_bytes(text[:-50])
    assert cache.read(catalog_dirs(), key) is None
    assert load_catalog() == first  # rebuilt from the files


def _fields_set_differences(a, b, path=""):
    """Where two loads' entries differ in which fields their files set (a default is not set)."""
    from pydantic import BaseModel

    if isinstance(a, BaseModel):
        out = [path] if a.model_fields_set != b.model_fields_set else []
        for name in type(a).model_fields:
            out += _fields_set_differences(getattr(a, name), getattr(b, name), f"{path}.{name}")
        return out
    if isinstance(a, dict):
        return [d for k in a for d in _fields_set_differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list | tuple):
        return [d for u, v in zip(a, b, strict=True) for d in _fields_set_differences(u, v, path)]
    return []


def test_the_cache_keeps_which_fields_a_file_left_out(fresh_cache, monkeypatch):
    # a scenario number its file leaves out is listed as ipd's default (lifecycle.DEFAULTED): the
    # cache stored every default as if the file gave it, so a load from the cache said otherwise
    # (first difference: sources.ipd-estimate's url)
    monkeypatch.setenv("IPD_CACHE_DIR", "off")
    files = load_catalog()
    monkeypatch.setenv("IPD_CACHE_DIR", str(fresh_cache))
    load_catalog()  # built from the files and stored
    cached = load_catalog()
    assert cached == files
    sections = ("sources", "accelerators", "cpus", "systems", "models", "workloads", "economics")
    sections += ("efficiency", "serving", "rl")
    differ = [d for s in sections for d in _fields_set_differences(getattr(files, s), getattr(cached, s), s)]
    assert differ == []
    assert "url" not in files.sources["ipd-estimate"].model_fields_set


def test_the_stored_listing_path_imports_no_engine(fresh_cache):
    # `ipd hardware list` prints the listing the cache stores; the warning for unread overrides
    # imported the engine (pydantic schemas, ~80 ms) on that path too, and its start-up went
    # 0.66x -> 1.5x the import floor (benchmarks/startup.py)
    import subprocess
    import sys

    code = (
        "import sys\nfrom ipd_cli.cli import main\n"
        "try:\n    main(['hardware', 'list', '-f', 'json'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('ipd_cli.engine')), file=sys.stderr)\n"
    )
    for _ in range(2):  # the first run fills the cache
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stderr.strip().splitlines()[-1] == "[]", r.stderr


def test_a_user_table_keyed_by_name_adds_its_keys_and_keeps_the_others(tmp_path):
    # a user review: a file adding b200 to training_share_by_accelerator dropped GB200's own 0.632
    # (the 10T GB200 month 124,416 -> 110,592 GPUs, silently), and one placing GPUs in the
    # blackwell serving family dropped the other families (refused, blaming a built-in stack)
    builtin = load()
    write(
        tmp_path / "eff.yaml",
        "efficiency:\n  training_share_by_accelerator:\n    b200: {value: 0.7, source: ipd-calibration}\n"
        "serving:\n  families:\n    blackwell:\n      accelerators: [b200]\n"
        "      default_stack: {value: trtllm, source: trtllm-perf-overview}\n",
    )
    cat = load_catalog([tmp_path])
    shares = cat.efficiency.training_share_by_accelerator
    assert shares["b200"].value == 0.7
    assert {k: v for k, v in shares.items() if k != "b200"} == {
        k: v for k, v in builtin.efficiency.training_share_by_accelerator.items() if k != "b200"
    }
    assert set(cat.serving.families) == set(builtin.serving.families)
    assert cat.origins[("efficiency", "training_share_by_accelerator.b200")] == str(tmp_path / "eff.yaml")
    assert cat.origins[("efficiency", "training_share_by_accelerator.gb200")] == "builtin:efficiency.yaml"
    r = run_cli(
        "explain", "gb200", "--workload", "pretrain-10t-moe", "--catalog", str(tmp_path), "-f", "json"
    )
    kept = next(i for i in r.json()["items"] if i["metric"] == "input: GEMM share kept in training")
    assert kept["value"] == builtin.efficiency.training_share_by_accelerator["gb200"].value
    assert kept["origin"] == "builtin:efficiency.yaml"


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (
            "efficiency:\n  training_share_by_accelerator:\n"
            "    b2OO: {value: 0.5, source: ipd-calibration}\n",
            "efficiency.training_share_by_accelerator: 'b2OO'",
        ),
        (
            "efficiency:\n  training_gemm_max_share_by_accelerator:\n"
            "    b2OO: {fp8: {value: 0.5, source: ipd-calibration}}\n",
            "efficiency.training_gemm_max_share_by_accelerator: 'b2OO'",
        ),
        (
            "serving:\n  families:\n    hopper:\n      accelerators: [h100-sxm, h200, h800, h20, x999]\n"
            "      default_stack: {value: trtllm, source: trtllm-perf-overview}\n",
            "serving.families.hopper.accelerators: 'x999'",
        ),
    ],
)
def test_a_table_key_that_names_no_accelerator_is_refused(tmp_path, body, where):
    # a fresh-eyes review: `x2OO` for `x200` in a user's training_share_by_accelerator was accepted
    # and never read (the answer 30 % off, without a word), as was a family listing no accelerator
    path = write(tmp_path / "eff.yaml", body)
    r = run_cli("hardware", "list", "--catalog", str(tmp_path), "-f", "csv")
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.startswith(f"ipd: error: unknown accelerator in {path}: {where}; choose one of: a100-sxm")
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_user_file_cannot_retitle_a_catalog_source(tmp_path):
    # a user review: `sources: {N3: {title: My fake datasheet}}` re-cited GB200's built-in specs
    write(tmp_path / "src.yaml", 'sources:\n  N3: {title: "My fake datasheet", date: 2026-11-01}\n')
    r = run_cli("hardware", "show", "gb200", "--catalog", str(tmp_path), "-f", "json")
    assert r.code == 2 and "sources.N3 is already defined in builtin:hardware.yaml" in r.stderr
    scenario = tmp_path / "s.yaml"
    body = read_yaml(Path(__file__).resolve().parents[1] / "configs" / "workloads" / "frontier-agentic.yaml")
    body["sources"] = {"N1": {"title": "mine", "date": "2026-11-01"}}
    write(scenario, yaml.safe_dump(body))
    r = run_cli("compare", "gb200", "--workload", str(scenario), "-f", "json")
    assert r.code == 2 and "sources.N1 is already a catalog source" in r.stderr


@pytest.mark.parametrize("kv_heads", [128, 7])
def test_kv_heads_must_divide_the_attention_heads(kv_heads):
    # a user review: kv_heads 128 with 64 heads (serving 3,270 -> 1,192 tok/s/GPU) and 7 with 64 ran
    r = run_cli("models", "show", "llama-3.1-70b", "--set", f"models.llama-3.1-70b.kv_heads={kv_heads}")
    assert r.code == 2 and f"kv_heads {kv_heads} must divide attention_heads 64" in r.stderr


def test_a_two_level_table_merges_each_level_and_every_key_names_its_file(tmp_path):
    # a code review: b200's fp4 GEMM share alone dropped its measured bf16 (0.776) and fp8; a --set
    # of a key under a user catalog named the user file; a spec method added by a user file made
    # the built-in mtp's origin that file
    builtin = load()
    f = tmp_path / "e.yaml"
    write(
        f,
        "efficiency:\n  training_gemm_max_share_by_accelerator:\n"
        "    b200:\n      fp4: {value: 0.7, source: ipd-calibration}\n"
        "  training_share_by_accelerator:\n    b200: {value: 0.7, source: ipd-calibration}\n"
        "serving:\n  speculative_methods:\n    medusa:\n"
        "      description: heads\n      draft: eagle\n      draft_layers: 1\n      source: eagle3-paper\n"
        "      models: [llama-3.1-8b]\n      tokens_per_step: {1: {value: 1.5, source: eagle3-paper}}\n"
        "      draft_shape_rule: {kv_heads_over_latent: {value: 8, source: eagle3-paper},\n"
        "                         ffn_hidden_per_hidden: {value: 4, source: eagle3-paper}}\n",
    )
    cat = load_catalog([tmp_path])
    b200 = cat.efficiency.training_gemm_max_share_by_accelerator["b200"]
    assert (
        b200["fp4"].value == 0.7
        and b200["bf16"] == builtin.efficiency.training_gemm_max_share_by_accelerator["b200"]["bf16"]
    )
    assert cat.origin_of("efficiency", "training_gemm_max_share_by_accelerator", "b200", "fp4") == str(f)
    assert (
        cat.origin_of("efficiency", "training_gemm_max_share_by_accelerator", "b200", "bf16")
        == "builtin:efficiency.yaml"
    )
    assert cat.origin_of("serving", "speculative_methods", "mtp") == "builtin:serving-stacks.yaml"
    assert cat.origin_of("serving", "speculative_methods", "medusa") == str(f)
    r = run_cli(
        "explain", "b200", "--workload", "pretrain-10t-moe", "-f", "json",
        "--set", "efficiency.training_share_by_accelerator.b200=0.45", env={"IPD_CATALOG": str(tmp_path)},
    )  # fmt: skip
    assert r.code == 0, r.stderr
    kept = next(i for i in r.json()["items"] if i["metric"] == "input: GEMM share kept in training")
    assert (kept["value"], kept["origin"]) == (
        0.45,
        "--set efficiency.training_share_by_accelerator.b200=0.45",
    )


def test_a_set_of_one_key_leaves_the_other_keys_origins():
    # a code review: --set ...training_share_by_accelerator.gb200 relabelled GB300's built-in 0.823,
    # and a --set of SGLang's description relabelled TensorRT-LLM's values and the default stack
    r = run_cli(
        "explain", "gb300", "--workload", "pretrain-10t-moe", "-f", "json",
        "--set", "efficiency.training_share_by_accelerator.gb200=0.45",
    )  # fmt: skip
    kept = next(i for i in r.json()["items"] if i["metric"] == "input: GEMM share kept in training")
    assert kept["origin"] == "builtin:efficiency.yaml"
    r = run_cli(
        "explain", "b200", "--workload", "open-model-agent", "-f", "json",
        "--set", "serving.stacks.sglang.description=x",
    )  # fmt: skip
    items = {i["metric"]: i for i in r.json()["items"]}
    assert items["input: serving stack"]["origin"] == "builtin:serving-stacks.yaml"
    assert items["input: per-step overhead per layer"]["origin"] == "builtin:serving-stacks.yaml"


def test_an_empty_entry_of_a_two_level_table_clears_it(tmp_path):
    write(tmp_path / "e.yaml", "efficiency:\n  training_gemm_max_share_by_accelerator: {b200: {}}\n")
    assert load_catalog([tmp_path]).efficiency.training_gemm_max_share_by_accelerator["b200"] == {}


def test_a_read_yaml_copy_is_the_parsed_document_and_independent_of_the_cache(tmp_path):
    # read_yaml copies its cached parse with a plain dict/list copier (copy.deepcopy was ~4x slower):
    # the same values, sets and dates kept, aliases expanded into copies, nothing shared with the cache
    import datetime

    from ipd_cli.catalog.yamlio import read_yaml

    text = "a: &x {k: [1, 2]}\nb: *x\nc: !!set {p, q}\nd: 2026-12-02\ne: !!binary aGk=\n"
    first = read_yaml(tmp_path / "f.yaml", text)
    assert first == {
        "a": {"k": [1, 2]},
        "b": {"k": [1, 2]},
        "c": {"p", "q"},
        "d": datetime.date(2026, 12, 2),
        "e": b"hi",
    }
    first["a"]["k"].append(3)
    first["c"].add("r")
    second = read_yaml(tmp_path / "f.yaml", text)
    assert second["a"]["k"] == [1, 2] and second["b"]["k"] == [1, 2] and second["c"] == {"p", "q"}
    assert second["a"] is not second["b"]


def test_set_values_do_not_push_a_parsed_file_out_of_the_cache(tmp_path, monkeypatch):
    # read_yaml keeps the last 64 documents it parsed; a --set value (keep=False) is not kept, so
    # calibrate's ~1,000 trial values no longer pushed the validation cases out (~180 ms to parse
    # them again at the next `ipd validate` of the process); a value still parses as before
    from ipd_cli.catalog import yamlio
    from ipd_cli.catalog.overrides import parse

    monkeypatch.setattr(yamlio, "_PARSED", {})
    text = "a: {k: [1, 2]}\n"
    yamlio.read_yaml(tmp_path / "f.yaml", text)
    values = parse([f"economics.pue={1 + i / 1000}" for i in range(2 * yamlio._PARSED_MAX)])
    assert [o.value for o in values[:2]] == [1.0, 1.001]
    assert list(yamlio._PARSED) == [text]


def _ranged(node, path):
    """(dotted path, low, high) of every sourced value with a range under ``node`` (a dump)."""
    if isinstance(node, dict):
        if "value" in node and node.get("range"):
            yield path, node["range"][0], node["range"][1]
        for k, v in node.items():
            if k not in ("value", "range"):
                yield from _ranged(v, f"{path}.{k}")


@pytest.mark.parametrize("section", ["efficiency", "rl", "serving", "economics"])
def test_every_end_of_a_range_is_a_value_the_catalog_accepts(catalog, section):
    # `ipd sweep --samples` draws each ranged input between its ends: every draw must be a value
    # the catalog's own checks accept (a sampling review: training_bytes_per_param ran [12, 18]
    # while weight + optimizer bytes are 14, so a sixth of the draws priced a refused state)
    from ipd_cli.errors import InputError

    dump = getattr(catalog, section).model_dump(mode="python")
    ranged = list(_ranged(dump, section))
    assert ranged
    refused = []
    for path, low, high in ranged:
        for end in (low, high):
            try:
                catalog.with_overrides([f"{path}={end!r}"])
            except InputError as e:
                refused.append(f"{path}={end!r}: {e}")
    assert not refused, refused


def test_an_eagle_method_needs_the_draft_rule_and_its_shapes_name_catalog_models(tmp_path):
    # an EAGLE draft's layer is its own shape: a method without the rule for unpublished drafts
    # has nothing to size them with, and a shape for a model the catalog lacks is a typo
    method = (
        "serving:\n  speculative_methods:\n    medusa:\n"
        "      description: heads\n      draft: eagle\n      source: eagle3-paper\n"
        "      tokens_per_step: {1: {value: 1.5, source: eagle3-paper}}\n"
    )
    rule = (
        "      draft_shape_rule: {kv_heads_over_latent: {value: 8, source: eagle3-paper},\n"
        "                         ffn_hidden_per_hidden: {value: 4, source: eagle3-paper}}\n"
    )
    f = tmp_path / "e.yaml"
    write(f, method)
    r = run_cli("hardware", "list", env={"IPD_CATALOG": str(tmp_path)})
    assert r.code == 2 and "draft_shape_rule: an EAGLE method needs the draft layer" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    shape = "{ffn_hidden_size: 14336, attention_heads: 32, kv_heads: 8, head_dim: 128, source: eagle3-paper}"
    write(f, method + rule + f"      draft_shapes:\n        llama-3.1-8bb: {shape}\n")
    r = run_cli("hardware", "list", env={"IPD_CATALOG": str(tmp_path)})
    assert (
        r.code == 2
        and "unknown model in " in r.stderr
        and "e.yaml: serving.speculative_methods.medusa.draft_shapes" in r.stderr
    )
    assert "'llama-3.1-8bb'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    write(f, method + rule + f"      draft_shapes:\n        llama-3.1-8b: {shape}\n")
    assert run_cli("hardware", "list", env={"IPD_CATALOG": str(tmp_path)}).code == 0


def _input_error(r, text: str) -> None:
    """``r`` failed on its input: exit 2, nothing on stdout, the one line ``ipd: error: TEXT``."""
    assert (r.code, r.stdout, r.stderr) == (2, "", f"ipd: error: {text}\n")


def _builtin_hardware() -> dict:
    """The built-in hardware file as raw YAML data, to copy an entry from."""
    return builtin_yaml("hardware.yaml")


def test_a_user_system_without_capex_is_told_what_capex_is_for(tmp_path):
    # a fresh-eyes review: an analyst with a rental quote alone got a bare "Field required"
    body = _builtin_hardware()
    system = body["systems"]["h100-sxm"]
    system.pop("capex_usd")
    system["aliases"] = []
    path = write(tmp_path / "hw.yaml", yaml.safe_dump({"systems": {"my-node": system}}))
    r = run_cli("serve", "--hardware", "my-node", "--model", "llama-3.1-8b", "--catalog", str(tmp_path))
    _input_error(
        r,
        f"{path}: systems.my-node.capex_usd: Field required (the system's purchase price, which owning "
        "costs read, --pricing tco; rental prices do not: with no quote, give your best figure marked "
        "`estimate: true`)",
    )


def test_a_catalog_directory_that_holds_no_catalog_file_is_warned(tmp_path):
    # a fresh-eyes review: a file in mycat/hardware/ (not read) or named hw.YAML was skipped without
    # a word, and the run said only "unknown hardware"
    d = tmp_path / "mycat"
    write(d / "hardware" / "hw.yaml", "economics:\n  pue: {value: 1.2}\n")
    write(d / "hw.YAML", "economics:\n  pue: {value: 1.2}\n")
    r = run_cli("hardware", "list", "--catalog", str(d), "-f", "csv")
    assert r.code == 0 and r.stdout
    assert r.stderr == (
        f"ipd: warning: {d}: no *.yaml or *.yml file in it or in its workloads/ (other subdirectories "
        "are not read, the extension is lower case): nothing of the catalog comes from it\n"
    )
    # from IPD_CATALOG, and from the listings' cache too (a code review: a warm cache printed the
    # stored listing without it)
    for _ in range(2):
        r = run_cli("hardware", "list", "-f", "csv", env={"IPD_CATALOG": str(d)})
        assert r.code == 0 and r.stderr.startswith(f"ipd: warning: {d}: no *.yaml or *.yml file")
    write(d / "workloads" / "w.yaml", "model: llama-3.1-8b\ntokens: 1.0e12\ngpus: 64\n")
    assert "nothing of the catalog" not in run_cli("hardware", "list", "--catalog", str(d)).stderr


def test_a_new_family_whose_stack_has_no_profile_for_it_is_told_the_fix(tmp_path):
    # a fresh-eyes review: "'trtllm' has no profile for mine", with nothing to do about it
    body = _builtin_hardware()
    accelerator = body["accelerators"]["h100-sxm"]
    write(
        tmp_path / "fam.yaml",
        yaml.safe_dump({"accelerators": {"my-gpu": accelerator}})
        + "serving:\n  families:\n    mine: {accelerators: [my-gpu], default_stack: {value: trtllm}}\n",
    )
    r = run_cli("hardware", "list", "--catalog", str(tmp_path), "-f", "csv")
    assert r.code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert (
        "families.mine.default_stack: 'trtllm' has no profile for mine; list its accelerators in an "
        "existing family instead, or give the stack a profile for it (`profiles: {mine: {borrow: "
        "FAMILY}}` in a copy of the whole `stacks.trtllm` entry)"
    ) in r.stderr


def test_workloads_show_of_a_file_says_it_takes_names(tmp_path):
    # a fresh-eyes review: `ipd workloads show sc1.yaml` said only "unknown workload 'sc1.yaml'"
    path = write(tmp_path / "sc1.yaml", "model: llama-3.1-8b\ntokens: 1.0e12\ngpus: 64\n")
    _input_error(
        run_cli("workloads", "show", str(path)),
        f"unknown workload '{path}': a listing shows catalog workloads by name; compare, rl and sweep "
        "take a workload file as their workload, and a file in a catalog directory's workloads/ "
        "(--catalog) is listed by its name, 'sc1'",
    )


def test_a_tab_that_indents_a_catalog_file_is_named(tmp_path):
    # a fresh-eyes review: PyYAML's "found character that cannot start any token" alone
    path = write(tmp_path / "x.yaml", "economics:\n\tpue: {value: 1.2}\n")
    r = run_cli("hardware", "list", "--catalog", str(tmp_path), "-f", "csv")
    assert r.code == 2 and r.stderr == (
        f"ipd: error: {path}: invalid YAML (line 2, column 1): found character that cannot start any "
        "token; a tab: YAML indents with spaces\n"
    )


@pytest.mark.parametrize(
    ("system", "dimms", "dimm_gib"),
    [("h100", 32, 64), ("h200", 32, 64), ("b200", 32, 64), ("mi300x", 24, 64)],
)
def test_host_memory_reads_its_dimms_in_binary_units(catalog, system, dimms, dimm_gib):
    # a catalog audit: MI300X's 24 x 64 GB DIMMs were read as 1.5 TiB = 1,650 GB, the HGX nodes' 32
    # x 64 GB as a decimal 2,000 GB (2 TiB = 2,199 GB): one unit for the same DIMMs
    gb = dimms * dimm_gib * 2**30 / 1e9
    assert catalog.system(system).host_memory_gb.value == pytest.approx(gb, abs=1.0)


def test_every_built_in_system_cites_a_source_for_its_shape(catalog):
    # a catalog audit: the GPUs of a rack, its scale-up domain and its host CPUs were bare counts,
    # and explain printed "source -" for the 72-GPU domain on the headline path
    from ipd_cli.api import explain

    main = [n for n, s in catalog.systems.items() if catalog.origin("systems", n).startswith("builtin:")]
    assert len(main) >= 16  # the legacy systems too
    assert all(catalog.system(n).source in catalog.sources for n in main), [
        n for n in main if catalog.system(n).source not in catalog.sources
    ]
    rows = {(i["hardware"], i["metric"]): i for i in explain(catalog, ["vera-rubin", "blackwell"]).items}
    for hw, src in (("vera-rubin-nvl72", "N1"), ("gb200-nvl72", "N3")):
        for name in ("input: scale-up domain", "input: GPUs per system (node or rack)"):
            assert rows[(hw, name)]["value"] == 72 and rows[(hw, name)]["source"] == src, (hw, name)


def test_a_system_count_cites_its_own_source_while_it_keeps_that_value(catalog):
    # a provenance review: GB200's 4 GPUs a tray came from another source than the rack's shape
    from ipd_cli.engine.inputs import resolve

    r = resolve(catalog, "systems.gb200-nvl72.gpus_per_node")
    assert (r.value, r.source) == (4, "DPS1")
    assert resolve(catalog, "systems.gb200-nvl72.accelerators").source == "N3"
    edited = catalog.with_overrides(["systems.gb200-nvl72.gpus_per_node=8"])
    assert resolve(edited, "systems.gb200-nvl72.gpus_per_node").source == "N3"
    from pydantic import ValidationError

    from ipd_cli.catalog.schema import System

    body = catalog.system("gb200-nvl72").model_dump(exclude_defaults=True)
    with pytest.raises(ValidationError, match="'power_kw' is not a plain count"):
        System.model_validate({**body, "field_sources": {"power_kw": {"source": "N3"}}})


def test_every_built_in_count_source_cites_the_value_the_count_has(catalog):
    # a code review: a cited value that disagrees with the count drops the citation silently (as it
    # must after a --set); the built-in catalog's entries all hold their count's value
    cited = [
        (name, key, entry.value, getattr(system, key))
        for name, system in catalog.systems.items()
        for key, entry in system.field_sources.items()
    ]
    assert cited and [c for c in cited if c[2] != c[3]] == []


def test_an_accelerators_borrowed_fp4_share_keeps_its_fp8_shares_ratio():
    # an AMD buyer's audit: MI355X took B200's NVFP4 share (0.736) beside CDNA 3's FP8 share
    # (0.549), so FP4 sped its GEMMs 1.79x over FP8 where B200's speed up 1.29x; derived as MI300X's
    # FP8 is, B200's FP4 share x MI355X's FP8 share / B200's. MI355X's FP8 share is now its own
    # (hipBLASLt 3,130 of 5,030 TFLOP/s at 8192^3, AMD's ROCm blog): 0.736 x 0.622 / 0.763 = 0.600
    e = load().efficiency
    mi355x, b200 = (
        e.training_gemm_max_share_by_accelerator["mi355x"],
        e.training_gemm_max_share_by_accelerator["b200"],
    )
    fp4_b200 = e.training_gemm["fp4"].max_share.value
    assert fp4_b200 == 0.736 and (mi355x["fp8"].value, b200["fp8"].value) == (0.622, 0.763)
    assert mi355x["fp4"].value == pytest.approx(0.736 * 0.622 / 0.763, abs=5e-4)
    assert mi355x["fp4"].value / mi355x["fp8"].value == pytest.approx(fp4_b200 / b200["fp8"].value, rel=1e-3)


def test_a_user_layer_leaves_the_built_in_layer_the_next_load_takes_as_it_was(tmp_path, monkeypatch):
    # a process keeps the built-in layer as merged and the entries validated from it
    # (layers._builtin_layer, catalog.build): a user layer that merges into a two-level table,
    # replaces a merged section's value and gets `source: user` filled in must change none of it
    monkeypatch.setenv("IPD_CACHE_DIR", "off")  # every load merges and validates
    before = load_catalog()
    shares = "efficiency:\n  training_gemm_max_share_by_accelerator:\n    b200:\n      fp4: {value: 0.7}\n"
    write(tmp_path / "e.yaml", shares + "economics:\n  pue: {value: 1.9, source: uptime-2024}\n")
    user = load_catalog([tmp_path])
    fp4 = user.efficiency.training_gemm_max_share_by_accelerator["b200"]["fp4"]
    assert (fp4.value, fp4.source, user.economics.pue.value) == (0.7, "user", 1.9)  # the user layer's
    after = load_catalog()
    assert after.efficiency.model_dump() == before.efficiency.model_dump()
    assert after.economics.model_dump() == before.economics.model_dump()
    assert after.origins == before.origins and "user" not in after.sources
    assert {n: s.model_dump() for n, s in after.systems.items()} == {
        n: s.model_dump() for n, s in before.systems.items()
    }
