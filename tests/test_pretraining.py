"""Pre-training estimates through the catalog, against hand calculations."""

from __future__ import annotations

import pytest
from helpers import write

from ipd_cli import compare, train
from ipd_cli.catalog.loader import load_catalog
from ipd_cli.errors import InfeasibleError


def test_llama_405b_on_h100_by_hand(catalog):
    # Llama 3.1 405B (catalog: 126 layers, 128 heads x 128, active params P), 15.6e12 tokens,
    # 16,384 H100 (989 TF dense BF16), MFU 0.40 measured at 16,384 GPUs -> scale efficiency 1.
    m = catalog.model("llama-3.1-405b")
    fpt = 6 * m.active_params + 6 * 126 * 8192 * 16384
    gpu_hours = 15.6e12 * fpt / (989e12 * 0.40) / 3600  # ~2.78e7 (Meta disclosed 30.84M)
    r = train(catalog, "hopper", "llama-3.1-405b", 15.6e12, gpus=16384, precision="bf16", mfu=0.40)
    p = r.pretraining
    assert p.gpu_hours == pytest.approx(gpu_hours, rel=1e-9)
    assert 2.7e7 < p.gpu_hours < 2.9e7
    assert p.wall_days == pytest.approx(gpu_hours / 16384 / 24, rel=1e-9)
    assert p.scale_efficiency == 1.0 and p.moe_comm_exposed_fraction == 0.0
    price = p.price_usd_per_gpu_hour
    assert p.cost_usd == pytest.approx(gpu_hours * price)
    # energy = GPU-h x (node kW / 8) x PUE / 1000
    kw = catalog.system("h100-sxm").power_kw.value / 8
    assert p.energy_mwh == pytest.approx(gpu_hours * kw * catalog.economics.pue.value / 1000)


def test_deadline_mode_meets_the_deadline_with_whole_systems(catalog):
    r = train(catalog, "gb200-nvl72", "llama-3.1-70b", 15e12, deadline_days=20, precision="fp8")
    p = r.pretraining
    assert p.wall_days <= 20
    assert p.gpus % 72 == 0 and p.systems == p.gpus // 72
    # one rack fewer would miss the deadline
    smaller = train(catalog, "gb200-nvl72", "llama-3.1-70b", 15e12, gpus=p.gpus - 72, precision="fp8")
    assert smaller.pretraining.wall_days > 20


def test_hopper_has_no_fp4_and_falls_back_to_fp8(catalog):
    r = train(catalog, "hopper", "llama-3.1-8b", 1e12, gpus=64, precision="fp4")
    assert r.pretraining.precision == "fp8"
    assert any(a.name == "precision" and "no dense fp4" in (a.note or "") for a in r.assumptions)


def test_too_few_gpus_for_memory_is_infeasible(catalog):
    with pytest.raises(InfeasibleError, match="needs at least"):
        train(catalog, "hopper", "llama-3.1-405b", 1e12, gpus=8)


def test_rubin_gpu_ratio_comes_from_the_specs(catalog, tmp_path):
    base = compare(catalog, ["vera-rubin", "blackwell"], "pretrain-10t-moe")
    rubin, gb200 = (s.pretraining for s in base.systems)
    ratio = gb200.gpus / rubin.gpus
    # dense FP4 35 vs 10 PF gives 3.5x before scale and all-to-all effects; the model must land near it
    assert 2.5 < ratio < 4.5
    # a user catalog that halves Rubin's dense FP4 roughly doubles Rubin's GPU count
    acc = catalog.accelerators[catalog.system("vera-rubin").accelerator].model_dump(
        mode="json", exclude_none=True
    )
    acc["fp4_dense_tflops"]["value"] = 17_500
    import yaml

    write(
        tmp_path / "slow-rubin.yaml",
        yaml.safe_dump({"accelerators": {catalog.system("vera-rubin").accelerator: acc}}),
    )
    slower = compare(load_catalog([tmp_path]), ["vera-rubin", "blackwell"], "pretrain-10t-moe")
    new_ratio = slower.systems[1].pretraining.gpus / slower.systems[0].pretraining.gpus
    assert new_ratio < ratio * 0.7


def test_identical_systems_compare_at_ratio_one(catalog):
    r = compare(catalog, ["gb300-nvl72", "blackwell-ultra"], "pretrain-10t-moe")
    a, b = (s.pretraining for s in r.systems)
    assert a == b


def test_faster_scale_up_link_lowers_exposed_moe_comm(catalog, tmp_path):
    import yaml

    name = catalog.system("blackwell").accelerator
    acc = catalog.accelerators[name].model_dump(mode="json", exclude_none=True)
    acc["scale_up_gb_per_s_bidir"]["value"] *= 2
    write(tmp_path / "fast.yaml", yaml.safe_dump({"accelerators": {name: acc}}))
    before = compare(catalog, ["blackwell"], "pretrain-10t-moe").systems[0].pretraining
    after = compare(load_catalog([tmp_path]), ["blackwell"], "pretrain-10t-moe").systems[0].pretraining
    assert after.moe_comm_exposed_fraction < before.moe_comm_exposed_fraction
    assert after.gpus <= before.gpus
