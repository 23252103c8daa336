"""RL post-training step: phases by hand, and the regimes the literature reports."""

from __future__ import annotations

import pytest
from helpers import run_cli

from ipd_cli import load
from ipd_cli.api import rl
from ipd_cli.engine.pretraining import best_training_plan
from ipd_cli.engine.rl.generation import wanted_per_replica
from ipd_cli.errors import InfeasibleError, InputError


def test_training_and_logprob_phases_by_hand(catalog):
    # llama-3.1-8b, 64 prompts x 8 = 512 samples, E[L] = 256 + 0 + 1000 = 1256 tokens, colocated on 64 H100.
    # The trainer runs the plan search's fastest plan for a global batch of 512 sequences of 1256
    # tokens: training = epochs x its step / the RL share + the fixed time; log-probs = passes x its
    # forward-only pass / the share. A step's own fixed time (efficiency.training_step_overhead_ms)
    # is the framework's, paid once a step and not scaled by the share (a review).
    wl = "workload"
    sets = [
        f"{wl}.model=llama-3.1-8b",
        f"{wl}.prompts_per_step=64",
        f"{wl}.group_size=8",
        f"{wl}.prompt_tokens=256",
        f"{wl}.mean_response_tokens=1000",
        f"{wl}.max_response_tokens=4000",
        f"{wl}.mode=colocated",
        f"{wl}.gpus=64",
        f"{wl}.pin_gpus=true",  # all 64 (a cap alone: the cheapest pool within it, 8)
    ]
    cat = load(sets=sets)
    r = rl(cat, "hopper", "rl-math-reasoning").rl
    t = r.trainer
    share, fixed = cat.rl.trainer_efficiency["dense"].value, cat.rl.step_fixed_s.value
    assert t.global_batch == 512 and t.parallelism.global_batch == 512 and t.sequence_tokens == 1256
    assert t.gpus_used <= 64 and t.memory_bytes_per_gpu <= 80e9 * 0.9
    w = cat.workload("rl-math-reasoning")
    assert r.phases.training_s == pytest.approx(w.ppo_epochs * t.training_pass_s + fixed)
    assert r.phases.logprob_s == pytest.approx(w.logprob_passes * t.forward_pass_s)
    # the same plan search through the pre-training API: one optimizer step of 512 x 1256 tokens
    plan = best_training_plan(cat, "h100-sxm", "llama-3.1-8b", 64, 512 * 1256, 1256)
    assert plan["plan"] == t.plan
    step_fixed = cat.efficiency.training_step_overhead_ms.value * 1e-3
    assert t.training_pass_s == pytest.approx((plan["step_s"] - step_fixed) / share + step_fixed)
    assert t.forward_pass_s == pytest.approx(plan["forward_s"] / share)
    # a forward-only pass is about a third of forward + backward (plus the pipeline fill and drain)
    assert 0.25 < plan["forward_s"] / plan["step_s"] < 0.5
    # MFU, an output: 6 x 8.03e9 + 3 x (2 x 32 layers x 1256 x 4096) FLOPs per token, by hand
    fpt = 6 * cat.model("llama-3.1-8b").active_params + 3 * 2 * 32 * 1256 * 4096
    assert t.mfu == pytest.approx(fpt * 512 * 1256 / (t.training_pass_s * t.gpus_used * 989e12), rel=1e-6)
    # colocated: every phase in series, nothing hidden
    assert r.step_seconds == pytest.approx(sum(r.phases.model_dump().values()))
    assert r.hidden_by_overlap_s == pytest.approx(0, abs=1e-9)
    assert r.gpus == 64 and r.samples_per_s == pytest.approx(512 / r.step_seconds)
    assert r.usd_per_step == pytest.approx(64 * r.step_seconds / 3600 * r.price_usd_per_gpu_hour)


def test_weight_sync_of_a_1t_model_over_400g_nics_takes_seconds(catalog):
    # Kimi K2 (1.04e12 params) BF16 on the wire, disaggregated on 512 H100 with NCCL reshard: each
    # receiving GPU takes its shard of its instance over its own 400 Gb/s NIC (50 GB/s), so seconds;
    # the phase is the schedule's time, and the JSON says what moved and what bound it.
    r = rl(
        catalog, "hopper", "rl-math-reasoning", model="kimi-k2", mode="disaggregated", gpus=512,
        transport="nccl-reshard",
    ).rl  # fmt: skip
    ws = r.weight_sync
    assert 1 < r.phases.weight_sync_s < 60
    assert ws.transport == "nccl-reshard" and ws.bound in ws.terms_s
    assert r.phases.weight_sync_s == pytest.approx(ws.fixed_s + ws.transfer_s + ws.load_s)
    # every receiver's bytes; the fullest receiver's (expert parallelism that does not divide the
    # routed experts leaves one GPU more of them) bind the time
    assert ws.bytes_moved <= ws.bytes_per_receiver * r.gen_gpus * (1 + 1e-12)
    # disaggregated, in series: the whole update is on the critical path
    assert ws.exposed_s == pytest.approx(r.phases.weight_sync_s) and ws.hidden_s == pytest.approx(0)


def test_naive_broadcast_of_a_1t_model_takes_over_a_minute(catalog):
    # the frameworks' default (rank 0 broadcasts every full tensor): 2.08 TB BF16 through one
    # 50 GB/s NIC takes 41.6 s at line rate; beside it (NeMo RL's pipelined stack) the sender gathers
    # the same bytes into its NIC and vLLM loads 70,884 tensors, so the update runs over a minute
    r = rl(catalog, "hopper", "rl-math-reasoning", model="kimi-k2", mode="disaggregated", gpus=512).rl
    assert r.weight_sync.transport == "nccl-broadcast"
    assert r.weight_sync.bytes_per_receiver == pytest.approx(catalog.model("kimi-k2").total_params * 2)
    terms = r.weight_sync.terms_s
    assert terms["sender NIC"] > 41.6 and r.phases.weight_sync_s > 60
    chain = terms["gather on the senders"] + terms["per-tensor software"]
    assert r.phases.weight_sync_s == pytest.approx(0.25 + max(chain, terms["sender NIC"]))
    # the chain (60.9 s) outlasts the wire (49.3 s): it is what bounds the update, not the largest
    # single term (the sender NIC, which `bound` named while the chain set the time; a user review)
    assert chain > terms["sender NIC"] == max(terms.values())
    assert r.weight_sync.bound == "gather on the senders + per-tensor software"


def test_colocated_sync_has_a_latency_floor(catalog):
    # doubling the GPUs of a colocated synchronous SWE-agent step shortens it far less than 2x; at
    # 1,024 GPUs the longest trajectory sets the generation time (at 512 the drained bulk and the
    # longest trajectory are within 2 %, so either may bind)
    a = rl(catalog, "gb200-nvl72", "rl-swe-agent", mode="colocated", gpus=512).rl
    b = rl(catalog, "gb200-nvl72", "rl-swe-agent", mode="colocated", gpus=1024).rl
    assert b.step_seconds < a.step_seconds
    assert a.step_seconds / b.step_seconds < 1.5
    assert b.latency_bound


def test_async_beats_colocated_sync_with_a_long_tail(catalog):
    sync = rl(catalog, "hopper", "rl-math-reasoning", mode="colocated", gpus=256).rl
    asynchronous = rl(catalog, "hopper", "rl-math-reasoning", mode="async", gpus=256).rl
    assert asynchronous.step_seconds < sync.step_seconds
    assert asynchronous.mean_staleness_steps is not None and sync.mean_staleness_steps == 0


def _step_at_concurrency(cat, gen_gpus: int, train_gpus: int):
    """Seconds of the rl-swe-agent async step on GB200 with the searched rollout configuration run
    at a given concurrency per replica (the rest as evaluate() chooses)."""
    from dataclasses import replace

    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl.estimate import _outcome, evaluate, setup

    _, w, origin = resolve_workload(cat, "rl-swe-agent", {})
    w = w.model_copy(update={"mode": "async"})
    s = setup(sv.serving_context(cat, "gb200-nvl72", w.model), w, "rental", origin)
    best = evaluate(s, gen_gpus, train_gpus, quiet=True)

    def at(b: int) -> float:
        r = replace(best.rollouts, concurrency=b)
        return _outcome(s, r, "async", gen_gpus, train_gpus, best.trainer, True, sync=best.sync).step.seconds

    return at


def test_async_keeps_the_staleness_bound(catalog):
    # AReaL's rule: at most eta + 1 batches outstanding, the one training included, so at most eta
    # batches generate at once and the mean staleness is at most eta; eta = 0 cannot generate ahead
    # of the update and runs as disaggregated (a user review: it ran 4-5x faster than one-step-off,
    # with a mean staleness of eta + 1)
    split = dict(gen_gpus=144, train_gpus=368)

    def run(eta: int):
        cat = catalog.with_overrides([f"workload.staleness_bound={eta}"])
        return rl(cat, "gb200-nvl72", "rl-swe-agent", mode="async", **split).rl

    runs = {eta: run(eta) for eta in (0, 1, 2, 4)}
    sync = rl(catalog, "gb200-nvl72", "rl-swe-agent", mode="disaggregated", **split).rl
    assert runs[0].step_seconds == sync.step_seconds and runs[0].mean_staleness_steps == 0
    assert runs[0].longest_trajectory_policy_versions is None
    rollouts = 16 * 32  # the workload's prompts x group size, all generated each step
    # 4,096 in flight on 6 replicas: at most 682 each (4,092), not 683 (4,098: a mean staleness of
    # 8.004); DEP16 pinned (18 GPUs paid each), whose generation is the soonest: the step's
    # shortest is one 72-GPU replica, whose update is faster
    eight = catalog.with_overrides(["workload.staleness_bound=8", "workload.generation_layout=dep16"])
    runs[8] = rl(eight, "gb200-nvl72", "rl-swe-agent", mode="async", gen_gpus=108, train_gpus=404).rl
    assert wanted_per_replica(8 * rollouts, 6, asynchronous=True) == 682
    # the trainer sets this step: of the concurrencies up to 682 that give it, the fewest (a review:
    # the most the bound allowed, staler rollouts for nothing); one fewer lengthens it
    at = _step_at_concurrency(eight, 108, 404)
    assert runs[8].replicas == 6 and runs[8].concurrency < 682
    assert at(runs[8].concurrency) == pytest.approx(at(682), rel=1e-12) == runs[8].step_seconds
    assert at(runs[8].concurrency - 1) > runs[8].step_seconds
    # every trajectory in flight counts against the bound, those in their sandbox's start (1 s) and
    # verification (120 s on Grace cores) after their GPU slot too (an RL review: the bound counted
    # GPU slots alone, so the verification changed nothing): by Little's law the mean staleness is
    # (on the GPUs + rate x 121 s) / rollouts, and the step at least (slot + 121 s) / eta
    # a slot holds its trajectory through its replica's prefills too (prefill_s a step, P): at a
    # step T the slots hold N slot / (T - P), the sandboxes N 121 / T; the sum within eta N
    after = 1.0 + 120.0
    for eta in (1, 2, 4, 8):
        r = runs[eta]
        assert r.replicas * r.concurrency <= eta * rollouts
        step = r.phases.generation_s / (1 + r.generation.async_waste_fraction)  # before the waste
        slot = r.generation.decode_and_tools_s * r.replicas * r.concurrency / rollouts  # one slot's time
        p = r.generation.prefill_s
        in_flight = rollouts * slot / (step - p) + rollouts * after / step
        assert in_flight <= eta * rollouts * (1 + 1e-9)  # the bound holds, verifying ones counted
        assert r.mean_staleness_steps == pytest.approx(in_flight / rollouts, rel=1e-9)
        assert r.mean_staleness_steps <= eta * (1 + 1e-9)
        assert r.staleness_bound == eta and r.longest_trajectory_policy_versions > 0
    assert runs[1].step_seconds < sync.step_seconds
    one_off = rl(catalog, "gb200-nvl72", "rl-swe-agent", mode="one-step-off", **split).rl
    assert one_off.mean_staleness_steps == 1 and one_off.longest_trajectory_policy_versions is None


def test_a_trajectory_beyond_the_staleness_bound_is_warned():
    r = run_cli("rl", "--hardware", "gb200", "--mode", "async", "-f", "json")
    rl_ = r.json()["rl"]
    assert rl_["longest_trajectory_policy_versions"] > rl_["staleness_bound"] == 1
    assert "spans" in r.stderr and "beyond the staleness bound of 1" in r.stderr


def test_a_run_pays_each_step_phi_over_goodput_times():
    # rl-loop.md 7.7: S_async = S_sync x phi(eta), the run inflated by 1 / goodput for restarts. The
    # math workload on 64 H100 one-step-off: 1,000 steps a refresh, 4 refreshes a year, phi set to 1.1
    sets = ["workload.model=llama-3.1-8b", "workload.gpus=64", "rl.staleness_steps_factor=1.1"]
    r = rl(load(sets=[*sets, "workload.mode=one-step-off"]), "hopper", "rl-math-reasoning").rl
    run = r.run
    assert (run.goodput, run.staleness_steps_factor, run.staleness_bound_measured) == (0.9, 1.1, 4)
    assert (run.steps_per_refresh, run.refreshes_per_year) == (1000, 4)
    assert run.usd_per_refresh == pytest.approx(1000 * r.usd_per_step * 1.1 / 0.9)
    assert run.gpu_hours_per_year == pytest.approx(4000 * r.gpu_hours_per_step * 1.1 / 0.9)
    assert run.wall_days_per_refresh == pytest.approx(1000 * r.step_seconds * 1.1 / 0.9 / 86400)
    assert run.energy_mwh_per_year == pytest.approx(4000 * r.energy_kwh_per_step * 1.1 / 0.9 / 1000)
    # a synchronous schedule is on-policy: phi is not read (1), the goodput still is
    colocated = rl(load(sets=[*sets, "workload.mode=colocated"]), "hopper", "rl-math-reasoning")
    run = colocated.rl.run
    assert (run.goodput, run.staleness_steps_factor, run.staleness_bound_measured) == (0.9, 1.0, None)
    assert run.usd_per_refresh == pytest.approx(1000 * colocated.rl.usd_per_step / 0.9)


def test_the_run_terms_refuse_what_no_run_can_be():
    # a code review: phi 0.5 halved the run's cost without a word, and a measured bound of 4.9 read 4
    for value, message in [
        ("rl.staleness_steps_factor=0.5", "staleness_steps_factor must be >= 1"),
        ("rl.staleness_bound_measured=4.9", "staleness_bound_measured must be a whole number >= 0, got 4.9"),
    ]:
        r = run_cli("rl", "--hardware", "gb200", "--set", value, "-f", "json")
        assert (r.code, r.stdout) == (2, "") and message in r.stderr, r.stderr


def test_a_run_pays_its_evaluations_and_checkpoints(catalog):
    # the math workload on 64 H100, colocated (a synchronous step), every generated rollout kept:
    # an evaluation of as many trajectories as a step generates (512 tasks x 16 attempts) is the
    # step's own generation and environment, the same batch on the same replicas; a blocking
    # checkpoint every 5 steps by hand from the catalog: (2 B weights + 12 B Adam state) x
    # 8.03e9 parameters at the storage's 0.244 GB/s for each of the run's 64 GPUs (its writers,
    # the trainer's GPUs, could write 2.5 GB/s each)
    sets = ["workload.model=llama-3.1-8b", "workload.gpus=64", "workload.pin_gpus=true",
            "workload.mode=colocated", "workload.keep_fraction=1", "workload.eval_interval_steps=10",
            "workload.eval_tasks=512", "workload.eval_attempts=16",
            "workload.checkpoint_interval_steps=5"]  # fmt: skip
    r = rl(load(sets=sets), "hopper", "rl-math-reasoning").rl
    run = r.run
    assert run.eval_trajectories == 512 * 16 == r.samples_per_s * r.step_seconds
    assert run.eval_s == pytest.approx(r.phases.generation_s + r.phases.environment_s, rel=1e-9)
    params = catalog.models["llama-3.1-8b"].total_params
    assert params == 8.03e9 and catalog.rl.storage_write_gb_per_s_per_gpu.value == 0.244
    assert r.gpus == 64 and r.trainer.gpus_used * 2.5 > 64 * 0.244
    assert run.checkpoint_bytes == (2 + 12) * 8.03e9
    assert run.checkpoint_write_s == pytest.approx(14 * 8.03e9 / (64 * 0.244e9), rel=1e-12)
    assert (run.checkpoint_exposed_s, run.checkpoint_staging_s) == (run.checkpoint_write_s, 0.0)
    assert run.periodic_s_per_step == pytest.approx(run.eval_s / 10 + run.checkpoint_write_s / 5)
    # each scheduled step: 1 / goodput x (1 + periodic / step) steps' worth of the run's GPUs
    periodic = 1 + run.periodic_s_per_step / r.step_seconds
    assert run.usd_per_refresh == pytest.approx(1000 * r.usd_per_step / 0.9 * periodic, rel=1e-12)
    assert run.wall_days_per_refresh == pytest.approx(1000 * r.step_seconds / 0.9 * periodic / 86400)


def test_an_async_checkpoint_exposes_its_staging_and_bad_periodic_inputs_are_refused():
    # Megatron-LM's async save: the step waits for the copy to host memory (H100: PCIe, 55 GB/s
    # per GPU, rl.default_host_link_gb_per_s), the 7.2 s write runs behind 5 steps of 712 s
    args = ("rl", "--hardware", "hopper", "--workload", "rl-math-reasoning", "--model", "llama-3.1-8b")
    args += ("--mode", "colocated", "--gpus", "64", "-f", "json")
    sets = ("--set", "workload.checkpoint_interval_steps=5", "--set", "workload.checkpoint_async=true")
    r = run_cli(*args, *sets)
    assert r.code == 0, r.stderr
    out = r.json()["rl"]
    run, writers = out["run"], out["trainer"]["gpus_used"]
    assert run["checkpoint_async"] is True and run["eval_s"] == 0 and run["eval_interval_steps"] is None
    assert run["checkpoint_staging_s"] == pytest.approx(14 * 8.03e9 / writers / 55e9, rel=1e-12)
    assert run["checkpoint_write_s"] < 5 * out["step_seconds"]  # hidden behind the steps
    assert run["checkpoint_exposed_s"] == run["checkpoint_staging_s"] == 5 * run["periodic_s_per_step"]
    # a bad value is one line naming the field, exit 2
    for bad, words in (
        ("workload.eval_interval_steps=0", "workload.eval_interval_steps: Input should be greater than 0"),
        ("workload.checkpoint_async=maybe", "workload.checkpoint_async: must be true or false"),
        ("rl.storage_write_gb_per_s_per_gpu=0", "storage_write_gb_per_s_per_gpu must be > 0"),
    ):
        r = run_cli(*args, "--set", bad)
        assert (r.code, r.stdout) == (2, "") and len(r.stderr.splitlines()) == 1 and words in r.stderr, (
            r.stderr
        )


def test_an_async_bound_beyond_the_measured_one_is_warned():
    # AReaL measured decoupled PPO at staleness 1, 2 and 4 (rl.staleness_bound_measured 4)
    args = ("rl", "--hardware", "hopper", "--workload", "rl-math-reasoning", "--model", "llama-3.1-8b")
    args += ("--mode", "async", "--gpus", "64")
    at = {b: run_cli(*args, "--set", f"workload.staleness_bound={b}", "-f", "json") for b in (4, 5)}
    assert all(r.code == 0 for r in at.values()), at[5].stderr
    assert "beyond the largest bound" not in at[4].stderr
    assert (
        "the RL staleness bound of 5 is beyond the largest bound the steps an off-policy run needs were "
        "measured at (4, rl.staleness_bound_measured): rl.run counts 1.00 steps per synchronous step"
    ) in " ".join(at[5].stderr.split())


def test_too_few_host_cores_leave_gpus_waiting(catalog):
    ok = rl(catalog, "gb200-nvl72", "rl-swe-agent", mode="colocated", gpus=512).rl
    assert not ok.env_bound
    # 128 cores per sandbox x 512 live sandboxes = 65,536 cores > 36 x 512 = 18,432 Grace cores
    cat = catalog.with_overrides(["workload.sandbox_cores=128"])
    starved = rl(cat, "gb200-nvl72", "rl-swe-agent", mode="colocated", gpus=512).rl
    assert starved.env_bound
    assert starved.phases.environment_s > ok.phases.environment_s
    # the rollout choice weighs the sandboxes: fewer sequences a replica (19, not the 71 the KV
    # limit and the rollouts allow) decode each faster and hold a core less long; at 71 the live
    # sandboxes wanted 63,616 cores of 18,432 and the step took 1,339.3 s, now 1,302.0 s
    assert starved.concurrency < ok.concurrency
    assert starved.cpu_cores_needed == 128 * starved.replicas * starved.concurrency


def test_faster_host_cpu_shortens_verification(catalog):
    base = rl(catalog, "gb200-nvl72", "rl-swe-agent", mode="colocated", gpus=512).rl
    cat = catalog.with_overrides(["cpus.grace.relative_core_throughput=2"])
    fast = rl(cat, "gb200-nvl72", "rl-swe-agent", mode="colocated", gpus=512).rl
    verify = catalog.workload("rl-swe-agent").verify_s
    assert base.phases.environment_s - fast.phases.environment_s == pytest.approx(verify / 2)


def test_auto_split_is_the_best_split(catalog):
    best = rl(catalog, "hopper", "rl-math-reasoning", mode="one-step-off", gpus=128).rl
    assert best.gen_gpus + best.train_gpus == 128 and best.gen_gpus % best.instance_gpus == 0
    need = best.trainer_memory.min_train_gpus
    assert best.train_gpus >= need
    for gen in (best.gen_gpus - best.instance_gpus, best.gen_gpus + best.instance_gpus):
        if 0 < gen < 128 and 128 - gen >= need:
            other = rl(
                catalog,
                "hopper",
                "rl-math-reasoning",
                mode="one-step-off",
                gen_gpus=gen,
                train_gpus=128 - gen,
            )
            assert other.rl.step_seconds >= best.step_seconds


def test_bad_requests(catalog):
    with pytest.raises(InputError, match="unknown transport"):
        rl(catalog, "hopper", "rl-math-reasoning", transport="carrier-pigeon")
    with pytest.raises(InputError, match="does not work in mode colocated"):
        rl(catalog, "hopper", "rl-math-reasoning", mode="colocated", transport="rdma-p2p")
    with pytest.raises(InputError, match="give both"):
        rl(catalog, "hopper", "rl-math-reasoning", mode="disaggregated", gen_gpus=8)
    with pytest.raises(InputError, match="RL workload"):
        rl(catalog, "hopper", "pretrain-10t-moe")
    with pytest.raises(InfeasibleError, match="generation GPUs hold none"):
        rl(catalog, "hopper", "rl-math-reasoning", mode="disaggregated", gen_gpus=2, train_gpus=64)


def test_rl_cli_done_check():
    r = run_cli(
        "rl",
        "--hardware",
        "vera-rubin",
        "--model",
        "nemotron-3-ultra",
        "--workload",
        "rl-swe-agent",
        "--mode",
        "async",
        "--format",
        "json",
    )
    assert r.code == 0, r.stderr
    d = r.json()["rl"]
    assert set(d["phases"]) == {"generation_s", "environment_s", "logprob_s", "training_s", "weight_sync_s"}
    for key in ("step_seconds", "usd_per_step", "gpu_hours_per_step", "samples_per_s"):
        assert d[key] > 0
    t = run_cli(
        "rl", "--hardware", "vera-rubin", "--workload", "rl-swe-agent", "--mode", "async", "-f", "table"
    )
    assert "rl.phases" in t.stdout and "generation_s" in t.stdout


def test_a_published_rollout_layout_pins_the_replicas_and_never_beats_the_search():
    # NeMo RL publishes its vLLM layout (Qwen3-235B on 64 GB200: TP8): the workload field
    # generation_layout keeps the rollout search to that layout; the search's own choice (free)
    # generates the step at least as soon, since the pinned layout is one of its candidates
    base = ["rl", "--hardware", "gb200", "--model", "qwen3-235b-a22b", "--gpus", "64", "--mode", "colocated"]

    def run(*extra):
        r = run_cli(*base, *extra, "-f", "json")
        assert r.code == 0, r.stderr
        d = r.json()["rl"]
        replica = next(a for a in r.json()["assumptions"] if a["name"] == "rollout replica")
        return d, replica

    pinned, replica = run("--set", "workload.generation_layout=tp8")
    assert replica["value"] == "TP8" and "generation_layout tp8" in replica["note"]
    assert pinned["instance_gpus"] == 8
    free, free_replica = run()
    assert free_replica["value"] != "TP8"
    assert free["phases"]["generation_s"] <= pinned["phases"]["generation_s"]
    bad = run_cli(*base, "--set", "workload.generation_layout=xx")
    assert bad.code == 2 and "generation_layout 'xx': unknown layout 'xx'; write a family" in bad.stderr
    zero = run_cli(*base, "--set", "workload.generation_layout=dep0")
    assert zero.code == 2 and "generation_layout 'dep0': layout needs whole numbers >= 1" in zero.stderr
    none = run_cli(*base, "--set", "workload.generation_layout=tp3")
    assert none.code == 1 and "no tp3 rollout replica of qwen3-235b-a22b fits on gb200-nvl72" in none.stderr


def test_a_published_training_plan_pins_the_trainers_degrees():
    # NeMo RL's Qwen3-235B on 128 H100 trains with Megatron TP2 CP2 EP16 PP8: the workload field
    # training_plan pins those degrees and the search fills in the rest (micro-batch, recompute,
    # interleaving); the free search is at least as fast
    base = ["rl", "--hardware", "h100", "--model", "qwen3-235b-a22b", "--gpus", "128", "--mode", "colocated"]
    r = run_cli(*base, "--set", "workload.training_plan=tp=2,cp=2,ep=16,pp=8", "-f", "json")
    assert r.code == 0, r.stderr
    pinned = r.json()["rl"]["trainer"]
    p = pinned["parallelism"]
    assert (p["tp"], p["cp"], p["ep"], p["pp"]) == (2, 2, 16, 8) and pinned["plan"].startswith("TP2 PP8")
    free = run_cli(*base, "-f", "json").json()["rl"]["trainer"]
    assert free["training_pass_s"] <= pinned["training_pass_s"]
    bad = run_cli(*base, "--set", "workload.training_plan=tq=2")
    assert bad.code == 2 and "training_plan 'tq=2'" in bad.stderr and "KEY=VALUE" in bad.stderr
    # an FP8 recipe pinned on a BF16 trainer is refused, naming the field that sets the precision;
    # MXFP8 on H100 too (no microscaling tensor cores); at fp8 the trainer's GEMMs run at the pinned
    # recipe's share (blockwise's set to 0.9 here: slower than tensorwise's 1.0). Blockwise gathers
    # its weights in BF16 (efficiency.training_fp8_param_gather_bytes: 2 B, tensorwise 1 B), keeps
    # a cached FP8 copy beside its BF16 weights (efficiency.training_weight_cache_bytes: 2 B, none for
    # tensorwise's FP8 parameters), casts without an amax pass or a transpose (training_cast_bytes:
    # 4.0625 B a value, current scaling's 5 and Hopper's transpose 1), has no userbuffers and gathers
    # its sequence shards at its own widths, with no amax all-reduces: without those differences the
    # two trainers are the same
    bad = run_cli(*base, "--set", "workload.training_plan=fp8_recipe=mxfp8")
    need = "the run trains at bf16; an FP8 recipe applies to training_precision fp8"
    assert bad.code == 2 and need in bad.stderr
    fp8 = [*base, "--set", "workload.training_precision=fp8", "-f", "json"]
    mx = run_cli(*fp8, "--set", "workload.training_plan=fp8_recipe=mxfp8")
    assert mx.code == 2 and "h100-sxm has no microscaling (MX) tensor cores" in mx.stderr
    cs = run_cli(*fp8).json()["rl"]["trainer"]
    block = ["--set", "workload.training_plan=fp8_recipe=blockwise"]
    share = ["--set", "efficiency.training_fp8_recipe_share.blockwise=0.9"]
    wide = run_cli(*fp8, *block).json()["rl"]["trainer"]["training_pass_s"]
    assert wide != cs["training_pass_s"]
    narrow = [
        "--set", "efficiency.training_fp8_param_gather_bytes.blockwise=1",
        "--set", "efficiency.training_weight_cache_bytes.blockwise=0",
        "--set", "efficiency.training_cast_bytes.blockwise=6",
        "--set", "efficiency.training_tp_userbuffers.blockwise=1",
        "--set", "efficiency.training_sp_gather_bytes.blockwise=1",
        "--set", "efficiency.training_sp_grad_gather_bytes.blockwise=1",
        "--set", "efficiency.training_amax_reductions.blockwise=1",
    ]  # fmt: skip
    assert run_cli(*fp8, *block, *narrow).json()["rl"]["trainer"]["training_pass_s"] == cs["training_pass_s"]
    slow = run_cli(*fp8, *block, *share).json()["rl"]["trainer"]
    assert slow["training_pass_s"] > cs["training_pass_s"]
    # the trainer names its recipe (tensorwise unless pinned; null at BF16)
    assert (cs["fp8_recipe"], slow["fp8_recipe"], free["fp8_recipe"]) == ("tensorwise", "blockwise", None)
    # a pipeline deeper than the model's 94 layers: no trainer of any size runs it, and the error
    # names the pin (it had been dropped, the search running PP1)
    deep = run_cli(*base, "--set", "workload.training_plan=pp=1000")
    assert deep.code == 1 and "with the workload's training_plan 'pp=1000'" in deep.stderr


def _frontier_setup(cat, hardware):
    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl.estimate import setup
    from ipd_cli.engine.rl.workload import resolve_request

    _, w, origin = resolve_workload(cat, "rl-swe-agent-10t", {})
    w = resolve_request(w, None)
    return setup(sv.serving_context(cat, hardware, w.model), w, "rental", origin)


def test_the_longest_trajectory_decodes_at_the_bulks_speed_while_the_engine_is_full(catalog):
    # an RL review: the longest trajectory decoded its whole response at the tail concurrency's
    # speed, though the engine stays full around it for its first mean-length tokens (the drain
    # term already read them so); async engines stay full for all of it
    import numpy as np

    from ipd_cli.engine.rl.generation import generation

    s = _frontier_setup(catalog, "vera-rubin")
    r, n, gg = s.rollouts, s.nums, 1008
    r = r.on(n, gg, False)
    sync = generation(r, n, gg, False, "")
    v, vt = sync.decode_tokens_per_s_per_user, sync.tail_decode_tokens_per_s_per_user
    assert vt > v  # fewer sequences decode faster
    tools = n.max_turns * n.tool_s
    own = n.mean_response_tokens / v + (n.max_response_tokens - n.mean_response_tokens) / vt + tools
    assert sync.critical_s == pytest.approx(own, rel=1e-12)
    assert sync.longest_trajectory_s == pytest.approx(sync.queued_start_s + own, rel=1e-12)
    assert sync.drain_s == pytest.approx((n.max_response_tokens - n.mean_response_tokens) / vt, rel=1e-12)
    # the tail concurrency is the drain's mean, not rounded (rounded down, each multiple of 1/8 was
    # a step up the concurrency search sat one below: 31 sequences where 32 were one wave): the
    # long eighth of a replica's rollouts, ceil(512 / 14) = 37 / 8 = 4.625, not of its 28 slots
    # (28 / 8 = 3.5 drained faster with fewer slots, which the search rode: an RL review); 29 slots
    # since rollouts (aggregated engines) take an aggregated instance's floor, B200's 100 us, not
    # the 71.0 of GB300's decode pools
    assert sync.replicas == 14 and sync.concurrency == 29
    assert sync.tail_concurrency == 37 / 8 == max(1.0, min(29, -(-512 // 14) * r.tail_fraction))
    from dataclasses import replace

    # fewer slots no longer drain faster: 24 or all 37 a replica, the same drain
    waves = [generation(replace(r, concurrency=b), n, gg, False, "") for b in (24, 37)]
    assert [g.concurrency for g in waves] == [24, 37] and waves[0].drain_s == waves[1].drain_s
    tail = r.candidates.step_s(np.array([sync.tail_concurrency]), np.array([r.choice]))[0]
    assert vt == pytest.approx(r.candidates.speculative[r.choice] / tail, rel=1e-12)
    asy = generation(r.on(n, gg, True), n, gg, True, "")
    v = asy.decode_tokens_per_s_per_user
    # async: the longest trajectory is in flight until its verification ends (sandbox start and test
    # run after its last token: the staleness it spans)
    after = n.boot_s + n.verify_s / s.host.core_speed  # Vera's cores: 1.64x a Grace core
    assert s.host.core_speed == catalog.cpus["vera"].relative_core_throughput.value
    # and its slot waits through the replica's prefills (P of a step T): (own) x T / (T - P)
    t = asy.seconds / (1 + r.async_waste)
    own = (n.max_response_tokens / v + tools) * t / (t - asy.prefill_s)
    assert asy.critical_s == pytest.approx(own + after, rel=1e-12)


def test_rollout_choice_is_the_fastest_configuration_and_concurrency(catalog):
    # Brute force by hand over every rollout configuration and every concurrency 1..min(KV limit,
    # rollouts per replica), with the scalar decode speed and generation()'s own formula on 1008
    # generation GPUs (Rubin's 10T SWE step, one-step-off): the choice must be the minimum.
    import math

    import numpy as np

    from ipd_cli.engine.rl.generation import generation

    s = _frontier_setup(catalog, "vera-rubin")
    r, n, gg = s.rollouts, s.nums, 1008
    c = r.candidates
    shortest = math.inf
    for k in range(c.gpus.size):
        replicas = gg // int(c.gpus[k])
        if replicas < 1:
            continue
        inst = c.deployment(k)
        per_replica = math.ceil(n.generated / replicas)
        cap = max(1, min(int(c.max_batch[k]), per_replica))
        b = np.arange(1.0, cap + 1)  # every concurrency at once
        # the drain's mean concurrency, not rounded: the long eighth of a replica's rollouts, as
        # many as its b slots hold
        bt = np.maximum(1.0, np.minimum(b, per_replica * r.tail_fraction))
        v, vt = inst.decode_speed(b), inst.decode_speed(bt)
        bulk = n.generated * (n.mean_response_tokens / v + n.turns * n.tool_s) / (replicas * b)
        bulk += n.generated * inst.prefill_s / replicas
        drained = bulk + (n.max_response_tokens - n.mean_response_tokens) / vt
        queued = np.maximum(0, n.generated - replicas * b)  # the longest may start in the queue
        slot = n.mean_response_tokens / v + n.turns * n.tool_s
        wait = queued / n.generated * (queued + 1) / 2 * slot / (replicas * b)
        # the longest: its mean-length tokens at the full engine's speed, the rest at the tail's
        rest = (n.max_response_tokens - n.mean_response_tokens) / vt
        longest = wait + n.mean_response_tokens / v + rest + n.max_turns * n.tool_s
        shortest = min(shortest, np.maximum(drained, longest).min())
    chosen = r.on(n, gg, False)
    assert generation(chosen, n, gg, False, "").seconds == pytest.approx(shortest, rel=1e-9)
    # the densest replica at full concurrency (the choice before) generates no sooner
    assert generation(r, n, gg, False, "").seconds >= shortest
    # here a lower concurrency than the rollouts fill decodes each sequence faster and wins
    assert chosen.concurrency < math.ceil(n.generated / (gg // chosen.gpus))


@pytest.mark.parametrize(("hardware", "accelerator"), [("vera-rubin", "rubin"), ("gb200-nvl72", "gb200")])
def test_more_hbm_never_lengthens_the_frontier_rl_step(hardware, accelerator):
    # More HBM per GPU only adds KV capacity (more sequences a replica may hold, more layouts that
    # fit); an operator can always run the configuration and concurrency it ran before, so the
    # step (split searched) must never get longer. Read in GiB (+7 %), Rubin's step once went
    # 855 -> 895 s when the replica was chosen by tokens/s per GPU at its KV limit. On the pinned
    # pool (the workload's 2,048, split searched); under the cap the pool search weighs cost, so
    # there the run's cost per scheduled step must never rise instead.
    base = load().accelerators[accelerator].hbm_gib.value
    steps, costs = [], []
    for factor in (0.9, 1.0, 1.07, 1.3, 2.0):
        cat = load(sets=[f"accelerators.{accelerator}.hbm_gib={base * factor}"])
        steps.append(rl(cat, hardware, "rl-swe-agent-10t", gpus=2048).rl.step_seconds)
        costs.append(rl(cat, hardware, "rl-swe-agent-10t").rl.run.usd_per_refresh)
    assert all(b <= a * (1 + 1e-12) for a, b in zip(steps, steps[1:], strict=False)), steps
    assert all(b <= a * (1 + 1e-9) for a, b in zip(costs, costs[1:], strict=False)), costs


def test_more_hbm_never_makes_a_grown_rl_step_dearer():
    # 2,048 GB200 cannot hold the 10T SWE step's trainer (2,048) plus a rollout replica, so the run
    # grows (grow_gpus_to_fit). It grew to the trainer plus one replica of the densest candidate,
    # whose size moved with the HBM: 155 -> 155.5 GiB went 288 -> 216 generation GPUs, the step
    # 2,035 -> 2,374 s and $5,349 -> $6,047 (likewise at 157.5 -> 158 and 160.5 -> 161 GiB). Then
    # the pool was whichever one-replica size made the step shortest; now the pool of whole
    # replicas of any candidate with the least cost per step: more HBM only adds candidates, so
    # the cost per step never rises across those jumps (the step may, where fewer GPUs pay off).
    runs = []
    for hbm in (155, 155.5, 157.5, 158, 160.5, 161):
        runs.append(rl(load(sets=[f"accelerators.gb200.hbm_gib={hbm}"]), "blackwell", "rl-swe-agent-10t").rl)
    for r in runs:
        assert r.gpus_requested == 2048 and r.gpus == r.gen_gpus + r.train_gpus
        assert r.train_gpus == r.trainer_memory.min_train_gpus == 2048 >= r.gen_gpus
    usd = [r.usd_per_step for r in runs]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(usd, usd[1:], strict=False)), usd
    assert runs[0].step_seconds < 2035  # the first rule's 288-GPU pool


def test_a_grown_split_is_the_pool_with_the_least_cost_per_step():
    from ipd_cli.engine.rl.step import GROWN_REPLICAS, grown_split

    # replicas of 64 and 100 GPUs, and on 72-GPU systems the whole systems that hold them (72,
    # 144), in 1, 2, 3, 4, 6, 8, 12 ... of them up to the trainer's 1,000 GPUs; a step of 2,000 / g
    # + 5 s. Cost per step (g + 1,000) x step by hand: 600 (6 x 100) 13,333; 576 (8 x 72, 4 x
    # 144) 13,352; 512 (8 x 64) 13,406; 768 (12 x 64) 13,444: 600 wins
    def balance(gen, train):
        assert train == 1000
        return 2000 / gen + 5

    assert GROWN_REPLICAS[:6] == (1, 2, 3, 4, 6, 8)
    assert grown_split([100, 64], 1000, balance, grain=72) == (600, 1000)
    cost = {g: (g + 1000) * balance(g, 1000) for g in (600, 576, 512, 768)}
    assert min(cost, key=cost.get) == 600 and round(cost[600]) == 13333 and round(cost[576]) == 13352
    # a step that does not shrink with more GPUs: one replica, the fewest GPUs
    assert grown_split([100, 64], 1000, lambda g, t: 7.0) == (64, 1000)


def test_a_grown_rl_run_says_what_it_runs_on():
    # the warning's parts add up to the GPUs it names: 2,048 training + 972 generating = 3,020
    # (it said "2,336 GPUs ... training state (2,048) and one generation instance (144)", the run
    # 2 x 144; 3,200 with 16 replicas until stages that do not divide the rack were offered; 3,056
    # with 14 x 72 until expert parallelism placed whole experts; 6 x 162 until the longest
    # trajectory decoded its mean-length part at the full engine's speed)
    r = run_cli(
        "rl", "--hardware", "blackwell", "--workload", "rl-swe-agent-10t",
        "--set", "accelerators.gb200.hbm_gib=155", "-f", "json",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    assert (
        "gb200-nvl72: RL post-training runs on 3,020 GPUs, not the 2,048 asked for: 2,048 training "
        "(the fewest that hold the training state) + 972 generating (3 x 324-GPU replicas: of the "
        "pools of whole rollout replicas up to the trainer's size, the one with the least cost per step)"
    ) in " ".join(r.stderr.split())


def test_a_request_run_as_asked_names_the_larger_run_that_costs_less_a_step():
    # a physics audit: B300's 10T SWE step on `gpus` 1,151 (too few to split: grown to the trainer's
    # 1,024 + 8 x 64) ran 1,599 s, on 1,152 (1,024 + one 128-GPU replica: runs as asked, as the
    # README says) 2,770 s at 30 % more a step, and nothing named the larger request that gives the
    # cheaper step. The grown run's cost is the 1,151 run's; a request of its size names nothing.
    # Since a decode stage spans at most the stack's published domains (one 8-GPU B300 node) the
    # 128-GPU replica is gone: 1,216 (1,024 + 192) runs as asked, 1,215 grows
    cat = load()
    grown = rl(cat, "b300", "rl-swe-agent-10t", gpus=1215).rl
    asked = rl(cat, "b300", "rl-swe-agent-10t", gpus=1216).rl
    assert grown.gpus_requested == 1215 and grown.gpus > 1216 and grown.cheaper_grown_gpus is None
    assert asked.gpus == 1216 and asked.gpus_requested is None
    assert asked.cheaper_grown_gpus == grown.gpus
    assert asked.cheaper_grown_usd_per_step == pytest.approx(grown.usd_per_step, rel=1e-12)
    assert asked.cheaper_grown_usd_per_step < asked.usd_per_step
    same = rl(cat, "b300", "rl-swe-agent-10t", gpus=grown.gpus).rl
    assert same.cheaper_grown_gpus is None and same.usd_per_step == pytest.approx(grown.usd_per_step)
    r = run_cli("rl", "--hardware", "b300", "--workload", "rl-swe-agent-10t", "--gpus", "1216", "-f", "json")
    assert (
        f"b300: RL post-training runs on the 1,216 GPUs asked for, at ${asked.usd_per_step:,.0f} a step; "
        f"{grown.gpus:,} GPUs (the trainer's fewest plus the generation pool a smaller request grows to) "
        f"would cost ${grown.usd_per_step:,.0f}: ask for them to get that step"
    ) in r.stderr


def test_pinned_pools_are_not_a_grown_run():
    # --gen-gpus 432 --train-gpus 100 (532 GPUs, past the workload's 512) reported gpus_requested
    # 512 and warned "100 training (the fewest that hold the training state) + 432 generating (...
    # the one with the shortest step)": both pools were given, and 64 trainer GPUs hold the state
    for gen, train in ((432, 100), (144, 100)):
        args = ("--gen-gpus", f"{gen}", "--train-gpus", f"{train}", "-f", "json")
        r = run_cli("rl", "--hardware", "gb200", *args)
        assert r.code == 0, r.stderr
        rl_ = r.json()["rl"]
        assert (rl_["gpus"], rl_["gen_gpus"], rl_["train_gpus"]) == (gen + train, gen, train)
        assert rl_["gpus_requested"] is None and "RL post-training runs on" not in r.stderr


def test_idle_trainer_warning_at_a_quarter_more_gpus_than_used():
    # the CHANGELOG's "a trainer given a quarter or more GPUs than its plan uses": 80 given for a
    # plan of 64 was that (16 = 64 / 4) and printed nothing (the code warned below 75 % used).
    # (The plan was 72 GPUs from GB200's host-link fix until BF16 all-to-all was charged 2 bytes a
    # value: 64 again; 72 since the 1F1B expert overlap pays for the chunks it cannot pair; 64
    # again, TP2 CP4 EP64 FSDP, since an offloading plan on NVLink-C2C sends only the layers that
    # must go: 80 given for 64 is a quarter more.)
    def trainer(train: int) -> tuple[int, str]:
        args = ("--gen-gpus", "144", "--train-gpus", f"{train}", "-f", "json")
        r = run_cli("rl", "--hardware", "gb200", *args)
        assert r.code == 0, r.stderr
        return r.json()["rl"]["trainer"]["gpus_used"], r.stderr

    used, err = trainer(80)
    assert used == 64 and "the RL trainer's plan uses 64 of its 80 GPUs; the rest are idle" in err
    # and the cluster that would run it: 144 generating + 64 training (a warning audit: no figure)
    assert "(as many as it uses, 208 GPUs in all with the 144 generating, would run" in err
    used, err = trainer(79)  # 15 idle: less than a quarter of 64
    assert used == 64 and "the rest are idle" not in err


@pytest.mark.parametrize(("gen_gpus", "asynchronous"), [(72, True), (144, False), (504, False)])
def test_rollout_search_is_exact_where_concurrencies_run_into_the_hundreds(catalog, gen_gpus, asynchronous):
    # fastest() evaluates only the runs of concurrencies its ladder of decode steps cannot rule
    # out. On few generation GPUs (async: the staleness bound's rollouts in flight too) the caps
    # reach the KV limits, hundreds of sequences: brute force over every candidate and
    # every concurrency 1..cap, written out with generation()'s formula, gives the same minimum.
    import numpy as np

    from ipd_cli.engine.rl.generation import generation
    from ipd_cli.engine.serving.rollout import EXACT_BATCHES

    s = _frontier_setup(catalog, "vera-rubin")
    r, n = s.rollouts, s.nums
    c = r.candidates
    replicas = gen_gpus // c.gpus
    idx = np.flatnonzero(replicas >= 1)
    in_flight = n.generated * (r.staleness_bound if asynchronous else 1)  # eta batches generate
    per_replica = np.floor(in_flight / replicas[idx]) if asynchronous else np.ceil(in_flight / replicas[idx])
    cap = np.maximum(1, np.minimum(np.maximum(1, c.max_batch[idx]), per_replica))
    cap = cap.astype(int)
    assert cap.max() >= 8 * EXACT_BATCHES  # the ladder's geometric rungs are in play
    k = np.repeat(idx, cap)
    b = np.concatenate([np.arange(1.0, m + 1) for m in cap])
    rep = gen_gpus // c.gpus[k]
    v = c.speculative[k] / c.step_s(b, k)
    # the tail: the long eighth of a replica's rollouts, as many as its b slots hold, not rounded
    wanted = np.repeat(per_replica, cap)
    vt = c.speculative[k] / c.step_s(np.maximum(1.0, np.minimum(b, wanted * r.tail_fraction)), k)
    bulk = n.generated * (n.mean_response_tokens / v + n.turns * n.tool_s) / (rep * b)
    bulk = bulk + n.generated * c.prefill_s[k] / rep
    if asynchronous:  # at least the staleness window: every trajectory in flight, verifying ones too
        slot = n.mean_response_tokens / v + n.turns * n.tool_s
        window = (slot + r.after_s) / r.staleness_bound + n.generated * c.prefill_s[k] / rep
        seconds = np.maximum(bulk, window) * (1 + r.async_waste)
    else:
        drained = bulk + (n.max_response_tokens - n.mean_response_tokens) / vt
        queued = np.maximum(0, n.generated - rep * b)  # the longest may wait for a slot
        wait = (
            queued
            / n.generated
            * (queued + 1)
            / 2
            * (n.mean_response_tokens / v + n.turns * n.tool_s)
            / (rep * b)
        )
        rest = (n.max_response_tokens - n.mean_response_tokens) / vt  # the longest's beyond the mean
        longest = wait + n.mean_response_tokens / v + rest + n.max_turns * n.tool_s
        seconds = np.maximum(drained, longest)
    chosen = r.on(n, gen_gpus, asynchronous)
    assert generation(chosen, n, gen_gpus, asynchronous, "").seconds == pytest.approx(
        seconds.min(), rel=1e-12
    )


@pytest.mark.parametrize("recent", [4096, 2])
def test_the_kept_decode_steps_are_the_computed_ones(catalog, recent, monkeypatch):
    # RolloutCandidates.step_at keeps the (candidate, batch) steps RL's split search asks for again
    # and again: asked in any order, repeated, mixed with new pairs, it gives exactly step_s's
    # values (the same element-wise arithmetic); a batch in 1,024ths (an RL tail concurrency, a
    # batch x 1/8) is kept too, one that is not is computed, not kept. New pairs wait in a small
    # table until it holds more than RECENT_STEPS (2: merged into the large one on most calls)
    from dataclasses import replace

    import numpy as np

    from ipd_cli.engine.serving import rollout

    monkeypatch.setattr(rollout, "RECENT_STEPS", recent)
    c = replace(_frontier_setup(catalog, "vera-rubin").rollouts.candidates, _tables={})  # none kept yet

    def kept_steps():
        return sum(len(c._tables.get(t, ((),))[0]) for t in ("steps at", "steps at, recent"))

    k = np.array([3, 0, 3, c.gpus.size - 1, 0, 5])
    b = np.array([7.0, 1.0, 7.0, 300.0, 64.0, 2.0])
    assert np.array_equal(c.step_at(b, k), c.step_s(b, k))
    kept = kept_steps()
    assert kept == 5  # (3, 7) asked twice, kept once
    k2, b2 = np.array([5, 1, 3]), np.array([2.0, 9.0, 7.0])  # two kept, one new
    assert np.array_equal(c.step_at(b2, k2), c.step_s(b2, k2))
    assert kept_steps() == kept + 1
    half = np.array([2.5])
    assert np.array_equal(c.step_at(half, np.array([1])), c.step_s(half, np.array([1])))
    assert kept_steps() == kept + 2
    third = np.array([2.0 / 3.0])
    assert np.array_equal(c.step_at(third, np.array([1])), c.step_s(third, np.array([1])))
    assert kept_steps() == kept + 2
    # many calls, each part kept (in either table) and part new: 40 calls of 24 pairs drawn from
    # 8 candidates x 60 batches (480 pairs), in any order
    rng = np.random.default_rng(0)
    asked = set(zip(k.tolist(), b.tolist(), strict=True)) | set(zip(k2.tolist(), b2.tolist(), strict=True))
    asked.add((1, 2.5))
    for _ in range(40):
        kk = rng.integers(0, min(8, c.gpus.size), 24)
        bb = rng.integers(1, 61, 24) / 8.0
        assert np.array_equal(c.step_at(bb, kk), c.step_s(bb, kk))
        asked |= set(zip(kk.tolist(), bb.tolist(), strict=True))
        assert kept_steps() == len(asked)
    keys = np.concatenate([c._tables[t][0] for t in ("steps at", "steps at, recent") if t in c._tables])
    assert np.unique(keys).size == keys.size  # each pair kept once
    for table in ("steps at", "steps at, recent"):  # each sorted, for searchsorted
        assert np.all(np.diff(c._tables.get(table, (np.zeros(1),))[0]) > 0)
    assert ("steps at" in c._tables) == (recent == 2)  # 4096: every pair still in the small table


@pytest.mark.parametrize("hardware", ["gb200", "h100"])
def test_the_kept_row_bounds_change_no_choice(catalog, hardware, monkeypatch):
    # fastest() keeps each candidate's bounds by its replica count across a split search's pools
    # (generation.RowBounds): the split, every pool's configuration, concurrency and seconds and
    # every group's floor are the same, to the bit, as with nothing kept (kept, fastest_many
    # makes pools ahead, some of which the split search then skips by their floors: every pool
    # made with nothing kept, each one the search asked for, is compared)
    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl import generation
    from ipd_cli.engine.rl.estimate import choose_split, setup
    from ipd_cli.engine.rl.workload import resolve_request

    def searched(keep: bool):
        _, w, origin = resolve_workload(catalog, "rl-swe-agent", {})
        w = resolve_request(w, "auto")
        s = setup(sv.serving_context(catalog, hardware, w.model), w, "rental", origin, "auto")
        with monkeypatch.context() as m:
            if not keep:
                m.setattr(generation, "_row_bounds", lambda *_: None)
            split = choose_split(s, "auto", origin)
        assert any(s.rollouts.bounds.values()) == keep
        return split, s.rollouts.chosen, s.rollouts.floors

    (split, chosen, floors), (split_alone, chosen_alone, floors_alone) = searched(True), searched(False)
    assert split == split_alone
    assert len(chosen_alone) >= 8 and floors_alone  # (a subset check passes on an empty search)
    assert {k: chosen[k] for k in chosen_alone} == chosen_alone
    assert {k: floors[k] for k in floors_alone} == floors_alone


@pytest.mark.parametrize(("hardware", "mode"), [("mi355x", None), ("vera-rubin", "async")])
def test_many_pools_at_once_make_each_pools_choice(catalog, hardware, mode):
    # fastest_many() makes a split search's pools at once (Rollouts.ahead): each pool's
    # configuration, concurrency and seconds and every group's floor are fastest()'s, to the bit,
    # pools whose rows are shared or not, a sandbox load or not, among all groups or one
    from dataclasses import replace

    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl import generation
    from ipd_cli.engine.rl.estimate import setup
    from ipd_cli.engine.rl.step import schedule
    from ipd_cli.engine.rl.workload import resolve_request

    _, w, origin = resolve_workload(catalog, "rl-swe-agent", {})
    w = resolve_request(w, "auto", mode=mode, gpus=2000)
    s = setup(sv.serving_context(catalog, hardware, w.model), w, "rental", origin, "auto")
    asynchronous = schedule(w.mode, w.staleness_bound) == "async"
    load = generation.sandbox_load(s.nums, s.host, 2000)
    sizes = list(range(int(s.rollouts.candidates.gpus.min()), 1900, 53))
    one, many = (replace(s.rollouts, chosen={}, floors={}, bounds={}) for _ in range(2))
    each = [generation.fastest(one, s.nums, g, asynchronous, None, load) for g in sizes]
    at_once = generation.fastest_many(many, s.nums, sizes[:20], asynchronous, load)
    at_once += generation.fastest_many(many, s.nums, sizes[20:], asynchronous, load)
    assert repr(at_once) == repr(each)
    # each pool's floors by (floor, group), Rollouts.alternatives' order (which no longer sorts
    # them): the list of the other groups is the (floor, group) pairs sorted as tuples
    assert all(list(f.items()) == sorted(f.items(), key=lambda gt: (gt[1], gt[0])) for _, f in each)
    fresh = replace(s.rollouts, chosen={}, floors={}, bounds={}, alternative={})
    fresh.ahead(s.nums, sizes[::2], asynchronous, load, guess=False)  # (fastest_many's), then fastest's
    for g in sizes:
        alternatives = fresh.alternatives(s.nums, g, asynchronous, load)
        own = fresh.candidates.sync_groups()[fresh.chosen[(g, asynchronous, None, load)][0]]
        floors = fresh.floors[(g, asynchronous, load)].items()
        assert alternatives == [(a, t) for t, a in sorted((t, a) for a, t in floors if a != own)]
        first = fresh.first_alternative(s.nums, g, asynchronous, load)  # (Rollouts.ahead's guess)
        assert len(alternatives) > 1 and first == alternatives[0][0]
    # and among one group on each pool (Rollouts.ahead: each pool's next group), with no floors
    pool, floors = sizes[len(sizes) // 2], each[len(sizes) // 2][1]
    among = [max(floors) for _, floors in each]
    each = [
        generation.fastest(one, s.nums, g, asynchronous, a, load) for g, a in zip(sizes, among, strict=True)
    ]
    at_once = generation.fastest_many(many, s.nums, sizes, asynchronous, load, among)
    assert repr(at_once) == repr(each)
    # and one pool once per group (Rollouts.guess: a step's next groups on its pool), lowest floor first
    groups = sorted(floors, key=floors.get)[:12]
    each = [generation.fastest(one, s.nums, pool, asynchronous, a, load) for a in groups]
    at_once = generation.fastest_many(many, s.nums, [pool] * len(groups), asynchronous, load, groups)
    assert len(groups) > 1 and repr(at_once) == repr(each)


def test_a_pool_or_group_with_no_replica_leaves_the_others_made_at_once(catalog, monkeypatch):
    # Rollouts.ahead and guess leave a pool, or a group, that holds no replica to fastest (its
    # answer at once, no replica): among the others it made fastest_many give up on all of them,
    # then made one by one (512 fastest() calls in one test, 2,550 in another)
    from dataclasses import replace

    from ipd_cli.engine.rl import generation

    s = _frontier_setup(catalog, "vera-rubin")
    c = s.rollouts.candidates
    calls: list[tuple[int, int | None]] = []
    fastest = generation.fastest

    def counted(r, nums, gen_gpus, asynchronous, group=None, load=generation.NO_LOAD):
        calls.append((gen_gpus, group))
        return fastest(r, nums, gen_gpus, asynchronous, group, load)

    monkeypatch.setattr(generation, "fastest", counted)
    least = int(c.gpus.min())
    sizes = [least - 1, *range(least, least + 20 * 8, 8)]
    soonest = replace(s.rollouts, chosen={}, floors={}, bounds={}).soonest(s.nums, sizes, False)
    assert calls == [(least - 1, None)] and soonest[0] == float("inf") and (soonest[1:] < float("inf")).all()
    # a pool that holds every group's replicas but the largest's: those it holds made at once
    pool = int(max(c.gpus[c.gpus < c.gpus.max()]))
    groups = sorted(set(c.sync_groups().tolist()))
    fits = set(c.sync_groups()[c.gpus <= pool].tolist())
    assert 1 < len(fits) < len(groups)
    r, calls[:] = replace(s.rollouts, chosen={}, floors={}, bounds={}, guessed={}), []
    r.guess(s.nums, pool, False, groups)
    made = [r.in_group(s.nums, pool, False, g)[1] for g in groups]
    assert calls == [(pool, g) for g in groups if g not in fits]
    assert all((t < float("inf")) == (g in fits) for g, t in zip(groups, made, strict=True))


@pytest.mark.parametrize(("hardware", "mode"), [("mi355x", None), ("vera-rubin", "async")])
def test_pools_each_with_its_own_load_at_once_make_each_pools_choice(catalog, hardware, mode):
    # fastest_many() with a sandbox load per pool (a grown split's pools, each beside the trainer:
    # Rollouts.ahead with a load each) makes fastest()'s choice and floors on each pool under its own
    # load, to the bit; the rows it keeps (by load) answer fastest() on those pools as its own do.
    # The pools' loads straddle the rollouts at 8 cores a sandbox (a synchronous step's sandboxes cap
    # its slots only where the cores hold fewer than every rollout), so both ways are taken
    from dataclasses import replace

    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl import generation
    from ipd_cli.engine.rl.estimate import setup
    from ipd_cli.engine.rl.step import schedule
    from ipd_cli.engine.rl.workload import resolve_request

    cat = catalog.with_overrides(["workload.sandbox_cores=8"])
    _, w, origin = resolve_workload(cat, "rl-swe-agent", {})
    w = resolve_request(w, "auto", mode=mode, gpus=2000)
    s = setup(sv.serving_context(cat, hardware, w.model), w, "rental", origin, "auto")
    asynchronous = schedule(w.mode, w.staleness_bound) == "async"
    sizes = list(range(int(s.rollouts.candidates.gpus.min()), 1900, 53))
    loads = [generation.sandbox_load(s.nums, s.host, g + 64) for g in sizes]
    assert len(set(loads)) == len(sizes)
    assert min(x[2] for x in loads) < s.nums.generated < max(x[2] for x in loads)
    one, many = (replace(s.rollouts, chosen={}, floors={}, bounds={}) for _ in range(2))
    each = [
        generation.fastest(one, s.nums, g, asynchronous, None, x) for g, x in zip(sizes, loads, strict=True)
    ]
    at_once = generation.fastest_many(many, s.nums, sizes[:20], asynchronous, loads[:20])
    at_once += generation.fastest_many(many, s.nums, sizes[20:], asynchronous, loads[20:])
    assert repr(at_once) == repr(each)
    kept = [
        generation.fastest(many, s.nums, g, asynchronous, None, x) for g, x in zip(sizes, loads, strict=True)
    ]
    assert repr(kept) == repr(each)
    # and among one group on each pool (Rollouts.ahead's guesses), with no floors
    among = [max(floors) for _, floors in each]
    each = [
        generation.fastest(one, s.nums, g, asynchronous, a, x)
        for g, a, x in zip(sizes, among, loads, strict=True)
    ]
    at_once = generation.fastest_many(many, s.nums, sizes, asynchronous, loads, among)
    assert repr(at_once) == repr(each)
    # loads with a sandbox share and without mix no terms: none made at once (pool by pool)
    assert (
        generation.fastest_many(many, s.nums, sizes[:2], asynchronous, [loads[0], generation.NO_LOAD]) is None
    )


@pytest.mark.parametrize(
    ("hardware", "workload", "mode"),
    [
        ("mi355x", "rl-swe-agent", None),
        ("vera-rubin", "rl-swe-agent", "async"),
        ("b200", "rl-math-reasoning", "disaggregated"),
    ],
)
def test_run_bounds_on_the_rungs_through_each_cap_are_the_whole_tables(catalog, hardware, workload, mode):
    # _run_bounds (fastest's and fastest_many's bounds over runs) makes a large table in blocks of
    # rows by cap, each on the rungs through its largest cap: each cell is the number the whole
    # row-by-rung table made (_seconds on every cell, then inf past the cap), to the bit, on a pool
    # whose rows' caps differ (some cells past, some not)
    import numpy as np

    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl import generation as gn
    from ipd_cli.engine.rl.estimate import setup
    from ipd_cli.engine.rl.step import schedule
    from ipd_cli.engine.rl.workload import resolve_request

    _, w, origin = resolve_workload(catalog, workload, {})
    w = resolve_request(w, "auto", mode=mode, gpus=2000)
    s = setup(sv.serving_context(catalog, hardware, w.model), w, "rental", origin, "auto")
    r, nums = s.rollouts, s.nums
    asynchronous = schedule(w.mode, w.staleness_bound) == "async"
    load = gn.sandbox_load(nums, s.host, 2000)
    c = r.candidates
    ladder, table = c.table()
    ok = np.flatnonzero(c.gpus <= 512)  # as fastest's rows on a pool of 512 GPUs
    in_flight = nums.generated * gn.in_flight_batches(r.staleness_bound, asynchronous)
    replicas = gn.active_replicas(512 // c.gpus[ok], in_flight, asynchronous)
    per_replica = gn.wanted_per_replica(in_flight, replicas, asynchronous)
    cap = np.maximum(1, np.minimum(np.maximum(1, c.max_batch[ok]), per_replica))
    cap = np.maximum(1, np.minimum(cap, gn.sandbox_cap(nums, load, replicas, asynchronous)))
    rungs = int(np.searchsorted(ladder, cap.max(), "left")) + 1
    ladder = ladder[:rungs]
    run_end = np.append(ladder[1:] - 1, cap.max())
    top, given = cap[:, None], per_replica[:, None]
    per = dict(
        replicas=replicas[:, None], prefill_s=c.prefill_s[ok][:, None], speculative=c.speculative[ok][:, None]
    )
    # the whole table, as fastest's bounds were made before
    steps = table[ok, :rungs]
    below = np.searchsorted(ladder, gn._tail(r, ladder[None, :], given), "right") - 1
    at = per | dict(
        step_s=steps, tail_step_s=np.take_along_axis(steps, below, axis=1), b=np.minimum(run_end, top)
    )
    whole = np.where(ladder <= top, gn._seconds(r, nums, asynchronous, at, load), np.inf)
    # the pool's rows (a table made in blocks by cap) and its first 100 (made at once)
    assert ok.size * ladder.size >= gn.RUN_BOUND_CELLS > 100 * ladder.size
    for rows in (np.arange(ok.size), np.arange(100)):
        sub = {k: v[rows] for k, v in per.items()}
        made = gn._run_bounds(
            r, nums, asynchronous, load, ladder, run_end, table, ok[rows], top[rows], given[rows], sub
        )
        assert made.shape == whole[rows].shape and made.tobytes() == whole[rows].tobytes()
    past = ladder > top
    assert past.any() and (~past).any() and np.isfinite(made[~past[rows]]).any()
    # the tail's rung, one search a row (_tail_steps), is each cell's search's, on cells whose tail
    # share stops below their rung (min(j, k) takes k there) and cells past rung 0 where it does not
    tail_steps = gn._tail_steps(r, steps, ladder, given)
    assert tail_steps.tobytes() == np.take_along_axis(steps, below, axis=1).tobytes()
    rung = np.arange(ladder.size)
    assert (below < rung).any() and (below[:, 1:] == rung[1:]).any()


def test_exact_inputs_ask_each_rows_tail_once_and_are_the_steps_arithmetic(catalog):
    # _at asks step_at for a row's tail past its tail share once per run (the tail is the same
    # there); its steps and tail steps are still step_s's arithmetic on every element, to the bit:
    # on a GB200 SWE pool's rows at every concurrency to their cap, tails both at b (b below the
    # share) and past it
    import numpy as np

    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl import generation as gn
    from ipd_cli.engine.rl.estimate import setup
    from ipd_cli.engine.rl.workload import resolve_request

    _, w, origin = resolve_workload(catalog, "rl-swe-agent", {})
    w = resolve_request(w, None)
    s = setup(sv.serving_context(catalog, "gb200", w.model), w, "rental", origin)
    r, nums = s.rollouts, s.nums
    c = r.candidates
    ok = np.flatnonzero(c.gpus <= 512)[::7]
    replicas = gn.active_replicas(512 // c.gpus[ok], nums.generated, False)
    wanted = gn.wanted_per_replica(nums.generated, replicas, False)
    cap = np.maximum(1, np.minimum(np.maximum(1, c.max_batch[ok]), wanted)).astype(int)
    row = np.repeat(np.arange(ok.size), cap)
    b = (np.arange(row.size) - np.repeat(np.cumsum(cap) - cap, cap) + 1).astype(float)
    at = gn._at(r, ok[row], b, replicas[row], wanted[row])
    tail = gn._tail(r, b, wanted[row])
    assert (tail == b).any() and (tail != b).any()
    assert at["step_s"].tobytes() == c.step_s(b, ok[row]).tobytes()
    assert at["tail_step_s"].tobytes() == c.step_s(tail, ok[row]).tobytes()


def test_a_setups_trainer_is_kept_by_size(catalog):
    # evaluate's trainer (estimate._trainer) is trainer() on the size, kept in the setup's memo: a
    # second ask is the same object, and sizes are kept apart
    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl.estimate import _trainer, setup
    from ipd_cli.engine.rl.trainer import trainer
    from ipd_cli.engine.rl.workload import resolve_request

    _, w, origin = resolve_workload(catalog, "rl-swe-agent", {})
    w = resolve_request(w, None)
    s = setup(sv.serving_context(catalog, "gb200", w.model), w, "rental", origin)
    first, wider = _trainer(s, 64), _trainer(s, 128)
    assert first == trainer(s.rates, s.w, 64) and wider == trainer(s.rates, s.w, 128) and first != wider
    assert _trainer(s, 64) is first


def test_a_trainer_kept_by_plan_row_is_the_one_worked_out_for_its_size(catalog):
    # trainer() keeps what it makes of a size table's plan row (rates.rows) and reads it for every
    # size that runs that row: asked up through the sizes (and past the rates' cap, a table of its
    # own), each trainer is the one worked out afresh (fresh rates, nothing kept, asked down), with
    # the size its own and its plan's dicts its own; one entry per (table, row)
    from dataclasses import replace

    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl.estimate import setup
    from ipd_cli.engine.rl.trainer import plans_by_size, trainer
    from ipd_cli.engine.rl.workload import resolve_request

    _, w, origin = resolve_workload(catalog, "rl-swe-agent", {})
    w = resolve_request(w, None)
    s = setup(sv.serving_context(catalog, "gb200", w.model), w, "rental", origin)
    r, lo = s.rates, s.memory.min_gpus
    sizes = [*range(lo, lo + 40), r.cap - 1, r.cap, r.cap + 8, r.cap + 9]
    kept = [trainer(r, w, n) for n in sizes]
    fresh = replace(r, forward_s={}, rows={})
    assert kept == [trainer(fresh, w, n) for n in reversed(sizes)][::-1]
    assert [t.plan.gpus for t in kept] == sizes
    assert trainer(r, w, lo).plan.out is not kept[0].plan.out
    rows = {(id(plans_by_size(r, n)), plans_by_size(r, n).best(n)) for n in sizes}
    assert len(rows) > 2 and r.rows.keys() >= rows


def test_a_deployments_kept_decode_speeds_are_the_ones_worked_out(catalog):
    # Deployment.decode_speed keeps an int batch's speed and a float's (RL's tail concurrencies,
    # kept with the deployment for every setup on its grid) apart: asked twice, each is exactly the
    # one worked out for that batch as given (an int and a float of one value: each its own), and a
    # numpy float or an array is worked out, not kept
    import numpy as np

    inst = _frontier_setup(catalog, "vera-rubin").rollouts.inst
    inst._speeds.clear()
    inst._float_speeds.clear()
    batches = [7, 7.0, 7.5, 64, 64.0, 3.25, 1, 1.0]
    for batch in [*batches, *batches]:
        assert inst.decode_speed(batch) == inst._speed(batch)
    assert sorted(inst._speeds) == [1, 7, 64] and all(type(b) is int for b in inst._speeds)
    assert sorted(inst._float_speeds) == [1.0, 3.25, 7.0, 7.5, 64.0]
    assert all(type(b) is float for b in inst._float_speeds)
    assert inst.decode_speed(np.float64(9.0)) == inst._speed(9.0) and 9.0 not in inst._float_speeds
    assert np.array_equal(inst.decode_speed(np.array([2.0, 9.0])), inst._speed(np.array([2.0, 9.0])))


def test_pick_each_is_the_lexsort_of_each_pools_concurrencies():
    # _pick_each (fastest_many's pick) lexsorts only each pool's ties at its least seconds: pool 0's
    # least is 2.0, held by rows 1 and 2 (-0.0 == 0.0 would tie too), of which row 2 has fewer GPUs;
    # pool 1's least, 1.0, rows 4 and 5 on 4 GPUs, row 5 at the larger concurrency b = 8; pool 2's
    # seconds are all NaN: lexsorted whole, the fewest GPUs first (row 7)
    import numpy as np

    from ipd_cli.engine.rl import generation as gn

    seconds = np.array([3.0, 2.0, 2.0, 5.0, 1.0, 1.0, np.nan, np.nan])
    pool = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    k = np.array([0, 1, 2, 3, 4, 5, 6, 7])
    b = np.array([1.0, 4.0, 2.0, 1.0, 2.0, 8.0, 1.0, 1.0])
    gpus = np.array([1, 8, 4, 1, 4, 4, 8, 2])
    assert gn._pick_each(seconds, pool, k, b, gpus).tolist() == [2, 5, 7]
    order = np.lexsort((k, -b, gpus, seconds, pool))  # what fastest_many lexsorted before
    assert order[np.concatenate(([True], pool[order][1:] != pool[order][:-1]))].tolist() == [2, 5, 7]


def test_a_steps_other_groups_made_at_once_are_those_asked_one_by_one(catalog, monkeypatch):
    # evaluate() makes the groups a step may still ask for on its pool at once (Rollouts.guess);
    # with the guesses switched off every pool's step, configuration and concurrency are the same
    from dataclasses import replace

    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl import generation
    from ipd_cli.engine.rl.estimate import evaluate, setup
    from ipd_cli.engine.rl.workload import resolve_request

    _, w, origin = resolve_workload(catalog, "rl-swe-agent", {})
    w = resolve_request(w, None)
    s = setup(sv.serving_context(catalog, "gb200-nvl72", w.model), w, "rental", origin)
    made = []

    def steps(rollouts):
        t = replace(s, rollouts=rollouts)
        outs = [evaluate(t, g, 432, quiet=True) for g in (72, 80, 108, 144, 216, 288)]
        return [(o.step, o.rollouts.choice, o.rollouts.concurrency) for o in outs]

    fresh = {"chosen": {}, "floors": {}, "bounds": {}, "guessed": {}, "members": {}, "alternative": {}}
    guess = generation.Rollouts.guess
    monkeypatch.setattr(generation.Rollouts, "guess", lambda r, *a: made.append(guess(r, *a) or a))
    at_once = steps(replace(s.rollouts, **fresh))
    monkeypatch.setattr(generation.Rollouts, "guess", lambda *_: None)
    assert made and steps(replace(s.rollouts, **{k: {} for k in fresh})) == at_once


def test_kept_rows_read_their_first_columns_as_the_whole_rows_cut():
    # KeptRows.get(key, make, columns) reads the first columns of each row (fastest's bounds over a
    # call's rungs, where a row is kept on a longer ladder): the rows made, each under its key, kept
    # rows and new ones at once, and across stores (_kept_each: a sandbox load each)
    import numpy as np

    from ipd_cli.engine.rl import generation as g

    rows = np.arange(40.0).reshape(8, 5)  # row i is key[i]'s: 5 of a store's 6 columns (the 6th inf)
    key = np.array([7, 3, 11, 5, 2, 13, 17, 1], np.int64)
    store = g._kept_rows(6)
    assert np.array_equal(store.get(key[:5], lambda i: rows[:5][i], 3), rows[:5, :3])
    assert np.array_equal(store.get(key[2:], lambda i: rows[2:][i], 4), rows[2:, :4])  # 3 kept, 3 new
    whole = store.get(key[::-1], lambda i: rows[::-1][i])
    assert np.array_equal(whole[:, :5], rows[::-1]) and np.isinf(whole[:, 5]).all()
    stores, which = [g._kept_rows(6), g._kept_rows(6)], np.array([0, 1, 0, 1, 1, 0, 0, 1])
    made = []
    got = g._kept_each(stores, which, key, lambda i: made.append(i) or rows[i], 2)
    assert np.array_equal(got, rows[:, :2]) and [i.tolist() for i in made] == [[0, 2, 5, 6, 1, 3, 4, 7]]
    got = g._kept_each(stores, which, key, lambda i: made.append(i) or rows[i])  # all kept: none made
    assert np.array_equal(got[:, :5], rows) and len(made) == 1


def test_decode_step_never_shortens_with_more_sequences(catalog):
    # The premise of fastest()'s bounds: at every rollout candidate a decode step is non-decreasing
    # in the batch (more KV, more activations, more experts touched, more host work per step);
    # checked at every batch up to 512 (the caps of the exactness test above).
    import numpy as np

    c = _frontier_setup(catalog, "vera-rubin").rollouts.candidates
    top = 512
    steps = c.step_s(np.tile(np.arange(1.0, top + 1), c.gpus.size), np.repeat(np.arange(c.gpus.size), top))
    assert (np.diff(steps.reshape(c.gpus.size, top), axis=1) >= 0).all()


@pytest.mark.parametrize("hardware", ["vera-rubin", "gb200", "mi355x"])
def test_every_ladder_of_decode_steps_is_non_decreasing(catalog, hardware):
    # fastest() reads a candidate's first rung as its shortest step at any batch (its row floor)
    # and each rung as a bound up to the next: exact only where every row of the ladder is
    # non-decreasing up to the largest KV limit (a code review: the test above stops at 512;
    # Rubin's ladder for the 10T SWE step reaches 488,592 sequences)
    import numpy as np

    ladder, steps = _frontier_setup(catalog, hardware).rollouts.candidates.table()
    assert ladder[-1] > 512 and np.isfinite(steps).all()
    assert (np.diff(steps, axis=1) >= 0).all()


@pytest.mark.parametrize(
    ("hardware", "accelerator", "factors"),
    [("vera-rubin", "rubin", (0.8, 1.0, 1.25)), ("gb200-nvl72", "gb200", (1.0, 1.1, 1.2))],
)
def test_more_hbm_bandwidth_never_lengthens_the_frontier_rl_step(hardware, accelerator, factors):
    # Faster HBM shortens every decode step and every training step; no choice gets worse. GB200
    # at 1.1x -> 1.2x: the densest replica becomes a 288-GPU TP4 PP72, whose multiples alone
    # missed the 1,008-GPU pool (1,039 -> 1,049 s) before the split also tried whole systems.
    base = load().accelerators[accelerator].hbm_tb_per_s.value
    steps = []
    for factor in factors:
        cat = load(sets=[f"accelerators.{accelerator}.hbm_tb_per_s={base * factor}"])
        steps.append(rl(cat, hardware, "rl-swe-agent-10t", gpus=2048).rl.step_seconds)  # pinned
    assert all(b <= a * (1 + 1e-12) for a, b in zip(steps, steps[1:], strict=False)), steps


@pytest.mark.parametrize(
    ("hardware", "accelerator", "field", "base", "workload", "mode", "gpus"),
    [
        ("h100-sxm", "h100-sxm", "scale_up_gb_per_s_bidir", 900, "rl-math-reasoning", "colocated", 64),
        ("gb200-nvl72", "gb200", "scale_out_gbit_per_s", 800, "rl-swe-agent", "disaggregated", 256),
    ],
)
def test_a_faster_network_never_lengthens_the_trainer(
    hardware, accelerator, field, base, workload, mode, gpus
):
    # The log-prob passes run on the training plan, so the plan is ranked by both. Ranked by the
    # training pass alone, doubled NVLink on H100 picked a plan whose forward was slower: the
    # trainer (training + log-prob pass) went 1,646.2 -> 1,651.6 s; doubled NICs on GB200 222.3 ->
    # 222.9 s. An operator can always keep the plan it ran before.
    times = []
    for factor in (1, 2):
        cat = load(sets=[f"accelerators.{accelerator}.{field}={base * factor}"])
        t = rl(cat, hardware, workload, mode=mode, gpus=gpus).rl.trainer
        times.append(t.training_pass_s + t.forward_pass_s)
    assert times[1] <= times[0] * (1 + 1e-12), times


def test_split_candidates_are_whole_replicas_of_every_size_and_whole_systems():
    from ipd_cli.engine.rl.step import _split_candidates

    # 2,048 GPUs, 600 kept for training (generation 288 .. 1,448): replicas of 288 -> 288 .. 1,440
    # (5 of them); NVL72 systems -> every multiple of 72 from 288 to 1,440 (17 in all)
    assert _split_candidates(288, 1448, [288, 72]) == (list(range(288, 1441, 72)), True)
    # the review's NVL72 case, 128 GPUs with 32 training (generation 4 .. 96): replicas of 4, 18
    # and 72 GPUs -> the multiples of 4, plus 18, 54, 90 (36 and 72 are multiples of 4). Before,
    # only the densest replica's (72) and the systems' multiples (72) were offered: 72 alone.
    fours = list(range(4, 97, 4))
    assert _split_candidates(4, 96, [4, 18, 72, 72]) == (sorted([*fours, 18, 54, 90]), True)
    # HGX (8 GPUs a system) with 16-GPU replicas: the systems' sizes add the odd multiples of 8
    assert _split_candidates(16, 44, [16, 8]) == ([16, 24, 32, 40], True)
    assert _split_candidates(48, 44, [48, 8]) == ([], True)  # no replica fits beside the trainer
    # more sizes than points: from 100 to 1,000 in 4 geometric steps (ratio 10^(1/3): 100, 215.4,
    # 464.2, 1,000), the first multiple of 7 at or above each (105, 217, 469; 1,001 is past the
    # end) and the last at or below 1,000 (994)
    assert _split_candidates(100, 1000, [7], points=4) == ([105, 217, 469, 994], False)


def test_a_long_split_search_zooms_in_on_the_shortest_step():
    from ipd_cli.engine.rl.step import split_gpus

    # 100,000 GPUs, replicas of 3 and 8 GPUs, 10 training: ~41,700 sizes, too many to try each,
    # so the search narrows coarse to fine. Step seconds |gen - 40,001|: the sizes nearest are
    # 40,002 (3 x 13,334) and 40,000 (8 x 5,000), both 1 s from it: the fewer GPUs win.
    seen = []

    def balance(gen, train):
        seen.append(gen)
        assert gen + train == 100_000 and train >= 10 and (gen % 3 == 0 or gen % 8 == 0)
        return abs(gen - 40_001)

    assert split_gpus(100_000, [3, 8], balance, min_train=10) == (40_000, 60_000)
    assert len(seen) < 600  # ZOOM_STARTS windows of coarse to fine, then one descent


@pytest.mark.parametrize(
    ("hardware", "workload", "mode", "gpus"),
    [
        ("gb200", "rl-math-reasoning", "one-step-off", 128),
        ("gb200", "rl-math-reasoning", "async", 128),
        ("gb200", "rl-math-reasoning", "disaggregated", 128),
        ("vera-rubin", "rl-math-reasoning", "one-step-off", 96),
        ("h100", "rl-math-reasoning", "async", 96),
        ("gb200", "rl-math-reasoning", "one-step-off", 256),
    ],
)
def test_the_searched_split_is_the_brute_force_shortest_step(
    catalog, monkeypatch, hardware, workload, mode, gpus
):
    # a review: on NVL72 racks the search offered generation pools only in multiples of the
    # densest replica (72 GPUs) and of racks (72), so 128 GB200 one-step-off ran 72 + 56 at
    # 1,044.7 s, where 36 + 92 (replicas of 36 and 4 GPUs) take 585.9 s. Brute force over every
    # generation size, one GPU apart, on the step function the search itself minimises.
    import ipd_cli.engine.rl.estimate as est

    found = {}

    def spy(total, pools, balance, min_train=1, grain=None):
        found.update(balance=balance, min_train=max(1, min_train))
        return split(total, pools, balance, min_train, grain)

    split = est.split_gpus
    monkeypatch.setattr(est, "split_gpus", spy)
    r = rl(catalog, hardware, workload, mode=mode, gpus=gpus, split="auto").rl
    balance = found["balance"]
    sizes = range(1, gpus - found["min_train"] + 1)
    # every size's pool at once (Rollouts.ahead: fastest()'s answers to the bit,
    # test_many_pools_at_once_make_each_pools_choice), read by balance below
    balance.ahead_each([(g, gpus - g) for g in sizes])
    brute = []
    for g in sizes:
        try:
            brute.append(balance(g, gpus - g))
        except InfeasibleError:  # no replica fits in g GPUs
            pass
    assert r.step_seconds == pytest.approx(min(brute), rel=1e-9)
    assert r.step_seconds == pytest.approx(balance(r.gen_gpus, r.train_gpus), rel=1e-12)


def test_the_review_split_runs_as_fast_as_the_pools_given(catalog):
    # the review's figures: auto picked 72 + 56 (1,044.7 s, $150/step); 36 + 92 given runs 585.9 s
    # (598.1 s since GB200's host link reads 225 GB/s a direction, not its 450 both ways summed;
    # 603.6 s since the BF16 trainer's expert all-to-all sends 2 bytes a value, not 1.5; 601.3 s
    # since the trainer's fixed time per step was refit 27.4 -> 25.1 s; 32 + 96 at 618.9 s since
    # the trainer's 1F1B expert overlap pays for the chunks it cannot pair and the longest
    # trajectory decodes its mean-length part at the full engine's speed, 36 + 92 then 626.0 s;
    # 619.0 s since the tail concurrency is not rounded; 623.3 s since it is the long eighth of a
    # replica's rollouts, not of its slots; 36 + 92 at 620.4 s since an offloading trainer on
    # NVLink-C2C sends only the layers that must go: TP1 DP64 EP64 offloading on 92; 32 + 96 at
    # 571.7 s while GB200's rollouts read its 2026 decode pools' floor, 73.8 us a layer, and 36 +
    # 92 at 620.4 s again since rollouts, aggregated engines, read an aggregated instance's, 100;
    # 621.4 s since each fused-attention call pays its fixed cost, 2026-12-06)
    # (the review's workload: every generated group trained, before DAPO's dynamic sampling)
    cat = catalog.with_overrides(["workload.keep_fraction=1"])
    auto = rl(cat, "gb200", "rl-math-reasoning", mode="one-step-off", gpus=128, split="auto").rl
    given = rl(cat, "gb200", "rl-math-reasoning", mode="one-step-off", gen_gpus=36, train_gpus=92).rl
    assert (auto.gen_gpus, auto.train_gpus) == (36, 92)
    assert (given.gpus, given.gpus_per_system, given.systems) == (128, 72, 2)  # 128 / 72 = 1.8 racks
    assert auto.step_seconds == pytest.approx(given.step_seconds, rel=1e-12)
    assert round(auto.step_seconds, 1) == 621.4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--gpus", "512", "--gen-gpus", "100", "--train-gpus", "100"],
            "give --gpus (the split is then chosen)",
        ),
        (["--split", "auto", "--gen-gpus", "432", "--train-gpus", "80"], "--split auto chooses --gen-gpus"),
        (
            ["--mode", "colocated", "--gen-gpus", "256", "--train-gpus", "256"],
            "colocated mode runs generation",
        ),
        (["--mode", "bogus"], "--mode 'bogus' is unknown; choose one of: colocated"),
        (["--mode", "colocated", "--split", "auto"], "--split auto chooses a disaggregated split"),
    ],
)
def test_conflicting_rl_options_are_usage_errors(args, message):
    # each of these ran before, one of the two options silently ignored (--gpus 512 ran on 200 GPUs);
    # an unknown --mode was blamed on the workload file it was merged into
    r = run_cli("rl", "--hardware", "gb200", *args)
    assert r.code == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.startswith("ipd: error: ") and message in r.stderr and "rl-swe-agent.yaml" not in r.stderr


def test_idle_trainer_gpus_are_a_warning():
    # 40,000 GB200 for the 10T SWE step: the fastest split gives generation 18,432 GPUs, the
    # trainer's plan uses 16,384 of the 21,568 it is given; the rest are paid for nothing, and
    # stderr says so (32,768 leave 40 idle now that idle trainer GPUs no longer speed the update)
    r = run_cli(
        "rl", "--hardware", "gb200", "--workload", "rl-swe-agent-10t", "--gpus", "40000", "--split", "auto"
    )
    assert r.code == 0, r.stderr
    rl_ = r.json()["rl"]
    used, given = rl_["trainer"]["gpus_used"], rl_["train_gpus"]
    assert used < given and f"plan uses {used:,} of its {given:,} GPUs" in r.stderr


def test_a_trainer_plan_with_moe_pins_on_a_dense_model_is_refused():
    # the pre-training check covers the RL trainer's published plan too (ep=2 read as 'no trainer
    # of up to 100,000,000 GPUs'; dispatcher=deepep was kept)
    for pin in ("ep=2", "dispatcher=deepep"):
        r = run_cli(
            "rl", "--hardware", "h100", "--workload", "rl-math-reasoning", "--model", "llama-3.1-70b",
            "--set", f"workload.training_plan={pin}",
        )  # fmt: skip
        assert r.code == 2 and "llama-3.1-70b is dense" in r.stderr, r.stderr


def test_a_grown_runs_pool_that_fits_the_gpus_given_takes_them_all(monkeypatch):
    # a review: where the shortest-step pool of a run grown to fit (grown_split) fits the GPUs the
    # workload gives, the run silently used fewer (trainer + that pool) with no warning. GB200 at
    # 155 GiB, the 10T SWE step on 2,200 GPUs: trainer 2,048 (the fewest that hold the state); a
    # 72-GPU pool fits, so generation takes the other 152 GPUs and nothing was grown
    import ipd_cli.engine.rl.estimate as est

    monkeypatch.setattr(est, "grown_split", lambda pools, min_train, *a, **k: (72, min_train))
    cat = load(sets=["accelerators.gb200.hbm_gib=155"])
    r = rl(cat, "gb200-nvl72", "rl-swe-agent-10t", gpus=2200).rl
    assert (r.gpus, r.train_gpus, r.gen_gpus, r.gpus_requested) == (2200, 2048, 152, None)


def test_the_longest_trajectory_must_fit_the_context():
    # the rollout engine checks the mean response; the longest is what the KV cache must admit and
    # the critical path decodes (a user review: 512 + 30,000 tokens ran on Llama 2's 4,096)
    r = run_cli(
        "rl", "--hardware", "h100", "--model", "llama-2-7b", "--workload", "rl-math-reasoning",
        "--set", "workload.mean_response_tokens=3000", "--set", "workload.max_response_tokens=30000",
    )  # fmt: skip
    assert r.code == 2 and r.stdout == ""
    assert "longest trajectory is 30,512" in r.stderr and "workload.max_response_tokens" in r.stderr
    fits = run_cli(
        "rl", "--hardware", "h100", "--model", "llama-2-7b", "--workload", "rl-math-reasoning",
        "--set", "workload.mean_response_tokens=3000", "--set", "workload.max_response_tokens=3584",
    )  # fmt: skip
    assert fits.code == 0  # 512 + 3,584 = 4,096: exactly the context


def test_a_searched_split_is_credited_to_the_search(catalog):
    searched = rl(catalog, "gb200-nvl72", "rl-swe-agent", gpus=512).assumptions
    capped = rl(catalog, "gb200-nvl72", "rl-swe-agent").assumptions  # the workload's gpus: a cap
    given = rl(catalog, "gb200-nvl72", "rl-swe-agent", gen_gpus=432, train_gpus=80).assumptions
    origin = {a.name: a.origin for a in searched}
    assert origin["generation GPUs"] == origin["training GPUs"] == "split search"
    rows = {a.name: a for a in capped}
    assert rows["generation GPUs"].origin == rows["training GPUs"].origin == "pool search"
    assert "least cost per step" in rows["training GPUs"].note and "512" in rows["training GPUs"].note
    assert {a.name: a.origin for a in given}["generation GPUs"] not in ("split search", "pool search")


def test_the_longest_trajectory_may_wait_for_a_slot(catalog):
    # 512 rollouts on 330 slots (6 replicas x 55): 182 queue, and the longest is as likely as any
    # to be one of them; they start as slots free up, 330 per 185 s slot time: expected start
    # 182 / 512 x 183 / 2 x 185 / 330 = 18.2 s (a user review: the critical path had it start at 0,
    # so an under-filled wave cost nothing)
    from dataclasses import replace

    from ipd_cli.engine.rl.generation import generation, queued_start_s

    assert queued_start_s(512, 330, 185.0) == pytest.approx(182 / 512 * 183 / 2 * 185 / 330)
    assert queued_start_s(512, 512, 185.0) == 0 and queued_start_s(512, 600, 185.0) == 0
    s = _frontier_setup(catalog, "vera-rubin")
    r, n = s.rollouts.on(s.nums, 1008, False), s.nums
    for b in (4, 16, 32):  # fewer slots than rollouts (replicas x b < 512)
        g = generation(replace(r, concurrency=b), n, 1008, False, "")
        slot = n.mean_response_tokens / g.decode_tokens_per_s_per_user + n.turns * n.tool_s
        wait = queued_start_s(n.generated, g.replicas * b, slot)
        assert wait > 0 and g.seconds >= wait + g.critical_s - 1e-9


def test_async_never_runs_more_replicas_than_its_bound_has_rollouts(catalog):
    # 2 rollouts a step at a bound of 1 on 144 two-GPU replicas: each replica ran one sequence,
    # 144 in flight, a mean staleness of 72 (a user review); now 2 replicas generate, the rest idle
    cat = catalog.with_overrides(
        [
            "workload.prompts_per_step=1",
            "workload.group_size=2",
            "workload.staleness_bound=1",
            "workload.keep_fraction=1",
        ]
    )
    r = rl(cat, "gb200-nvl72", "rl-math-reasoning", mode="async", gen_gpus=288, train_gpus=128).rl
    assert r.replicas * r.concurrency <= 2 and r.mean_staleness_steps <= 1


def test_the_split_search_walks_down_the_sawtooth_from_the_zooms_best():
    # the step over the generation pool is a sawtooth: it drops where the pool holds one more
    # replica, then rises as the trainer shrinks. A code review found the coarse-to-fine search
    # stopping on a tooth (1,836 GPUs at 194.13 s where 2,016 gave 193.88 s); from the zoom's best
    # the search steps to the next or previous whole size of any unit while that is shorter
    from ipd_cli.engine.rl.step import _descend

    def step_s(g):  # teeth at multiples of 36 and of 288, deepest at 2,016 = 7 x 288
        return (g - 2016) ** 2 / 1e4 + (0 if g % 288 == 0 else 1 if g % 36 == 0 else 5)

    assert _descend(1836, 4, 2900, [4, 36, 288], step_s) == 2016
    assert _descend(2016, 4, 2900, [4, 36, 288], step_s) == 2016  # already the shortest
    # 2,016 beyond the range: 1,980 = 55 x 36 (0.13 + 1) beats 1,728 = 6 x 288 (8.29) and 1,944 (1.52)
    assert _descend(1836, 4, 2000, [4, 36, 288], step_s) == 1980


def test_idle_async_generation_gpus_are_warned():
    sets = ["workload.prompts_per_step=1", "workload.group_size=2", "workload.staleness_bound=1"]
    r = run_cli("rl", "--hardware", "gb200-nvl72", "--workload", "rl-math-reasoning", "--mode", "async",
                "--gen-gpus", "288", "--train-gpus", "128", *(a for s in sets for a in ("--set", s)),
                "-f", "json")  # fmt: skip
    rl_ = r.json()["rl"]
    active = rl_["replicas"] * rl_["instance_gpus"]
    assert active < 288 and f"{active:,} of its 288 GPUs" in r.stderr and "idle but paid" in r.stderr


def test_the_split_search_zooms_in_around_more_than_the_best_coarse_size():
    # two basins: the coarse level's best sizes lie near 2,000 (0.5 s), but the shortest step is a
    # dip at 30,300 (0.1 s) on a plateau the coarse level saw at 0.55 s; one zoom, around the best
    # coarse size only, stopped at 0.5 (a code review: Vera Rubin's 4,000-GPU async step, 1.2 %)
    from ipd_cli.engine.rl.step import split_gpus

    def balance(gen, train):
        if abs(gen - 2000) < 300:
            return 0.5
        if abs(gen - 30_300) < 4000:
            return 0.1 if abs(gen - 30_300) < 200 else 0.55 + abs(gen - 30_300) / 1e6
        return 1.0

    gen, _ = split_gpus(100_000, [1], balance, min_train=10)
    assert abs(gen - 30_300) < 200


@pytest.mark.parametrize(
    ("hardware", "gen_gpus", "train_gpus"),
    [("gb200-nvl72", 80, 432), ("h100-sxm", 128, 384), ("mi300x", 8, 64), ("mi300x", 24, 64)],
)
def test_a_looser_staleness_bound_never_lengthens_an_async_step(catalog, hardware, gen_gpus, train_gpus):
    # More rollouts in flight can only widen the choices (a run may keep fewer in flight). On 80 +
    # 432 GB200 GPUs the soonest generation at a bound of 8 ran on ten 8-GPU replicas (68.2 s
    # against 100.2 s on one 72-GPU replica at 4), but an async step hides its generation behind
    # training and waits on the update, 6.0 s into ten small replicas against 2.5 s into one:
    # 119.0 -> 122.5 s. The rollout replica is now chosen by the step, not the generation.
    def step(eta):
        cat = catalog.with_overrides([f"workload.staleness_bound={eta}"])
        r = rl(cat, hardware, "rl-swe-agent", mode="async", gen_gpus=gen_gpus, train_gpus=train_gpus).rl
        return r.step_seconds

    steps = [step(eta) for eta in (1, 2, 4, 8, 16)]
    assert all(later <= earlier * (1 + 1e-12) for earlier, later in zip(steps, steps[1:], strict=False))


@pytest.mark.parametrize("mode", ["async", "one-step-off", "disaggregated"])
def test_the_rollout_replica_is_the_one_with_the_shortest_step(catalog, mode):
    # evaluate() skips the groups of configurations whose generation floor, or floor plus their own
    # update, cannot beat the best step found; brute force over every group's soonest generation
    # (its full step: generation, environment, update) finds no shorter step on any pool size.
    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl.estimate import _outcome, evaluate, setup
    from ipd_cli.engine.rl.step import schedule
    from ipd_cli.engine.rl.trainer import trainer
    from ipd_cli.engine.rl.workload import resolve_request

    cat = catalog.with_overrides(["workload.staleness_bound=8"])
    _, w, origin = resolve_workload(cat, "rl-swe-agent", {})
    w = resolve_request(w, None, mode=mode)
    s = setup(sv.serving_context(cat, "gb200-nvl72", w.model), w, "rental", origin)
    sched = schedule(w.mode, w.staleness_bound)
    groups = sorted(set(s.rollouts.candidates.sync_groups().tolist()))
    picked_other = False
    for gen_gpus in (72, 80, 108, 144, 216):
        tr = trainer(s.rates, w, 432)
        found = evaluate(s, gen_gpus, 432, quiet=True)
        # every group's soonest on the pool at once (Rollouts.guess: fastest()'s, to the bit,
        # test_many_pools_at_once_make_each_pools_choice), read by in_group below
        s.rollouts.guess(s.nums, gen_gpus, sched == "async", groups)
        steps = []
        for g in groups:
            r, t = s.rollouts.in_group(s.nums, gen_gpus, sched == "async", g)
            if t < float("inf"):
                steps.append(_outcome(s, r, sched, gen_gpus, 432, tr, quiet=True).step.seconds)
        assert found.step.seconds == pytest.approx(min(steps), rel=1e-12)
        picked_other |= found.rollouts.choice != s.rollouts.on(s.nums, gen_gpus, sched == "async").choice
    assert picked_other or mode != "async"  # async at 80 GPUs: not the soonest generation's replica


def test_a_rollouts_copy_with_another_choice_is_the_one_replace_makes(catalog):
    # Rollouts.with_choice (in_group's and member's copies) copies the fields as they are, not
    # through replace(): the same object, each field the same one (the kept tables shared), as long
    # as no field is init=False and the class has no __post_init__ (replace would then differ)
    from dataclasses import fields, replace

    from ipd_cli.engine.rl.generation import Rollouts

    r = _frontier_setup(catalog, "vera-rubin").rollouts
    assert all(f.init for f in fields(Rollouts)) and not hasattr(Rollouts, "__post_init__")
    for choice, concurrency in [(0, None), (1, 7), (r.candidates.gpus.size - 1, 1)]:
        copy, made = r.with_choice(choice, concurrency), replace(r, choice=choice, concurrency=concurrency)
        assert type(copy) is Rollouts and copy == made and copy is not r
        assert (copy.choice, copy.concurrency) == (choice, concurrency)
        assert all(getattr(copy, f.name) is getattr(made, f.name) for f in fields(Rollouts)
                   if f.name not in ("choice", "concurrency"))  # fmt: skip
        assert copy.__dict__.keys() == made.__dict__.keys()
    assert (r.choice, r.concurrency) == (r.candidates.densest(), None)  # the original unchanged


@pytest.mark.parametrize("gen_gpus", [8, 24])
def test_the_rollout_choice_weighs_the_sandboxes_bound(catalog, gen_gpus):
    # a code review: on MI300X (rl-swe-agent async, 64 training GPUs, bound 4) the soonest generation
    # (DEP8 at 2,048 sequences, 1,110.7 s) decodes each sequence so slowly that the sandboxes, held
    # for each trajectory, stall the step 169.7 s more (1,287.1 s) where 1,536 sequences give
    # 1,158.6 s; a looser bound then lengthened the step. The choice now minimises max(generation,
    # sandboxes' bound), with no more sequences in flight than the host cores hold a sandbox for:
    # brute force over every candidate and concurrency, by hand, gives it.
    import numpy as np

    from ipd_cli.catalog.workloads import resolve_workload
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl.estimate import setup
    from ipd_cli.engine.rl.generation import sandbox_load

    cat = catalog.with_overrides(["workload.staleness_bound=4"])
    _, w, origin = resolve_workload(cat, "rl-swe-agent", {})
    w = w.model_copy(update={"mode": "async"})
    s = setup(sv.serving_context(cat, "mi300x", w.model), w, "rental", origin)
    r, n, c = s.rollouts, s.nums, s.rollouts.candidates
    host = s.host
    a = n.generated * n.sandbox_cores / (host.cores_per_gpu * (gen_gpus + 64))
    fixed = n.turns * n.tool_s + n.boot_s + n.verify_s / host.core_speed
    cores = host.cores_per_gpu * (gen_gpus + 64) / n.sandbox_cores  # sandboxes the host holds at once
    assert sandbox_load(n, host, gen_gpus + 64) == pytest.approx((a, fixed, cores), rel=1e-12) and a > 0
    idx = np.flatnonzero(gen_gpus // c.gpus >= 1)
    rep = np.minimum(gen_gpus // c.gpus[idx], 4 * n.generated)  # active replicas
    cap = np.minimum(np.maximum(1, c.max_batch[idx]), np.floor(4 * n.generated / rep))
    cap = np.maximum(1, np.minimum(cap, np.floor(cores / rep))).astype(int)  # one sandbox per sequence
    k = np.repeat(idx, cap)
    b = np.concatenate([np.arange(1.0, m + 1) for m in cap])
    rk = np.repeat(rep, cap)
    v = c.speculative[k] / c.step_s(b, k)
    slot = n.mean_response_tokens / v + n.turns * n.tool_s
    bulk = n.generated * slot / (rk * b)
    prefill = n.generated * c.prefill_s[k] / rk
    # the window: every trajectory in flight, in its sandbox's start and verification too, within
    # the bound's 4 N or the sandboxes the host holds, whichever is fewer (Little's law)
    after = n.boot_s + n.verify_s / host.core_speed
    window = n.generated * (slot + after) / min(4 * n.generated, cores) + prefill
    gen = np.maximum(bulk + prefill, window) * (1 + r.async_waste)
    seconds = np.maximum(gen, a * (n.mean_response_tokens / v + fixed))
    _, found = r.in_group(n, gen_gpus, True, None, (a, fixed, cores))
    assert found == pytest.approx(seconds.min(), rel=1e-12)
    # here the host cores bind: the concurrency the KV cache and the bound allow would run more
    # trajectories than there are cores for their sandboxes (a review: 2,048 on 1,024 cores)
    wanted = np.maximum(1, np.minimum(np.maximum(1, c.max_batch[idx]), np.floor(4 * n.generated / rep)))
    assert (wanted * rep > cores).any() and (cap * rep <= max(cores, rep.max())).all()


def test_generation_gpus_no_replica_holds_are_warned():
    # a user review: 100 generation GPUs of 72-GPU replicas left 28 idle without a word, while 16
    # idle trainer GPUs were warned
    r = run_cli(
        "rl", "--hardware", "gb200", "--workload", "rl-swe-agent", "--mode", "disaggregated",
        "--gen-gpus", "100", "--train-gpus", "80", "-f", "json",
    )  # fmt: skip
    rl_ = r.json()["rl"]
    active = rl_["replicas"] * rl_["instance_gpus"]
    assert 4 * (100 - active) >= active
    assert rl_["replicas"] == 1  # one 72-GPU replica in 100 GPUs
    assert (
        f"{100 - active} of the 100 RL generation GPUs hold no replica (1 replica of "
        f"{rl_['instance_gpus']} GPUs fits)" in r.stderr
    )


def test_a_trajectory_just_beyond_the_bound_is_printed_beyond_it():
    # a user review: "spans 1.0 policy updates, beyond the staleness bound of 1" (1.028, an H100
    # async step on 256 GPUs, since 0.989): as many digits as show it beyond
    from ipd_cli.render.views import _rl_lines

    [line] = _rl_lines("h", {"longest_trajectory_policy_versions": 1.028, "staleness_bound": 1})
    assert "spans 1.03 policy updates, beyond the staleness bound of 1" in line  # (no time in flight given)
    # (312 GPUs until async engines, staying full, ran the longest trajectory at the bulk's speed)
    # (every generated group trained, as before DAPO's dynamic sampling: 1/3 of them runs 0.73)
    args = (
        "rl",
        "--hardware",
        "h100",
        "--workload",
        "rl-math-reasoning",
        "--mode",
        "async",
        "--set",
        "workload.keep_fraction=1",
    )
    r = run_cli(*args, "--gpus", "192", "-f", "json")
    versions = r.json()["rl"]["longest_trajectory_policy_versions"]
    assert 1.05 < versions < 1.15  # one digit shows it beyond: 1.1
    assert f"spans {versions:.1f} policy updates (in flight " in r.stderr
    assert "s step), beyond the staleness bound of 1" in r.stderr


def test_a_trajectory_a_rounding_past_the_bound_does_not_break_the_warning():
    # a code review: 2.0000000000000004 against a bound of 2 raised StopIteration finding its digits
    from ipd_cli.render.views import _rl_lines

    [line] = _rl_lines("h", {"longest_trajectory_policy_versions": 2.0000000000000004, "staleness_bound": 2})
    assert "spans 2.000000000000000 policy updates, beyond the staleness bound of 2" in line


@pytest.mark.parametrize(("hardware", "gpus", "eta"), [("mi300x", 128, 4), ("h100", 512, 16)])
def test_no_more_trajectories_in_flight_than_host_cores_for_their_sandboxes(hardware, gpus, eta):
    # an RL engineer's review: async at a loose bound ran 2,048 trajectories on MI300X's 1,024 host
    # cores (8,192 on H100's 7,168), one sandbox core each, with env_bound false and no word
    args = ("rl", "--hardware", hardware, "--workload", "rl-swe-agent", "--mode", "async")
    r = run_cli(*args, "--gpus", str(gpus), "--set", f"workload.staleness_bound={eta}", "-f", "json")
    assert r.code == 0, r.stderr
    out = r.json()["rl"]
    # one core per sandbox, those of the trajectories verifying after their GPU slot too (the mean
    # staleness counts every trajectory in flight: cores = rollouts x staleness)
    assert out["replicas"] * out["concurrency"] <= out["cpu_cores_needed"] <= out["cpu_cores_available"]
    generated = 16 * 32  # the workload's prompts x group size
    assert out["cpu_cores_needed"] == pytest.approx(generated * out["mean_staleness_steps"], rel=1e-12)


def test_a_staleness_bound_set_outside_async_is_warned():
    # an RL engineer's review: --set workload.staleness_bound=4 on a one-step-off step ran as if
    # never given, without a word
    r = run_cli(
        "rl", "--hardware", "gb200", "--workload", "rl-swe-agent", "--mode", "one-step-off",
        "--set", "workload.staleness_bound=4", "-f", "json",
    )  # fmt: skip
    assert r.code == 0 and r.json()["rl"]["staleness_bound"] is None
    assert (
        "--set workload.staleness_bound=4: the staleness bound applies to async RL only; the "
        "one-step-off step ignores it (--set workload.mode=async)" in r.stderr
    )
    r = run_cli("compare", "gb200", "--set", "workload.post_training.staleness_bound=4", "-f", "json")
    assert "ignores it (--set workload.post_training.mode=async)" in r.stderr
    async_ = run_cli(
        "rl", "--hardware", "gb200", "--workload", "rl-swe-agent", "--mode", "async",
        "--set", "workload.staleness_bound=4", "-f", "json",
    )  # fmt: skip
    assert "applies to async RL only" not in async_.stderr


def test_idle_generation_gpus_are_warned_with_their_reason():
    # 28 of 64 colocated GPUs held no 36-GPU replica: idle through the rollouts, said nowhere. The
    # rollouts now run on two 24-GPU replicas (the rack's divisors are searched): 16 idle
    args = ("rl", "--hardware", "gb200", "--workload", "rl-swe-agent", "--mode", "colocated", "--gpus", "64")
    r = run_cli(*args, "-f", "json")
    needle = (
        "16 of the 64 RL generation GPUs hold no replica (2 replicas of 24 GPUs fit) and are idle while the "
    )
    needle += "rollouts run"
    assert r.code == 0 and needle in r.stderr, r.stderr
    # an async pool of 48 GPUs holding one 36-GPU replica: no second fits, and the staleness bound
    # was blamed (GB200 rl-swe-agent async on 144 GPUs ran it before the trainer's memory was the
    # busiest stage's); a pool whose bound leaves a replica idle is told so, once each
    from ipd_cli.render.views import _idle_generation_lines

    lines = _idle_generation_lines("h", {"mode": "async", "gen_gpus": 48, "instance_gpus": 36, "replicas": 1})
    assert lines == [
        "h: 12 of the 48 RL generation GPUs hold no replica (1 replica of 36 GPUs fits) and are idle but paid"
    ]
    lines = _idle_generation_lines("h", {"mode": "async", "gen_gpus": 84, "instance_gpus": 8, "replicas": 1})
    assert len(lines) == 1 and "the staleness bound lets no more rollouts be in flight" in lines[0]


def test_a_synchronous_step_whose_cores_hold_every_rollout_is_not_capped():
    # a code review: the host-core cap limited a synchronous step's slots (48 replicas x 11 = 528)
    # though only its 512 rollouts are ever in flight, and 512 x 10.5 cores fit the 5,376 there
    # (the search took 11 a replica, one wave; since the longest trajectory decodes its mean-length
    # part at the full engine's speed it took 9, 8 since the tail concurrency is not rounded, and 9
    # again since the tail is the long eighth of its 11 rollouts, not of its slots: 432 slots, the
    # rest queued, the same with one core a sandbox, where no cap can bind)
    args = ("rl", "--hardware", "h100", "--workload", "rl-swe-agent", "--mode", "colocated", "--gpus", "384")
    r = run_cli(*args, "--set", "workload.sandbox_cores=10.5", "-f", "json")
    out = r.json()["rl"]
    assert out["cpu_cores_available"] == 5376 and out["cpu_cores_needed"] == 48 * 9 * 10.5
    assert (out["replicas"], out["concurrency"]) == (48, 9)
    free = run_cli(*args, "--set", "workload.sandbox_cores=1", "-f", "json").json()["rl"]
    assert (free["replicas"], free["concurrency"], free["step_seconds"]) == (48, 9, out["step_seconds"])


def test_the_split_searchs_floor_under_a_reshard_update_is_never_above_the_update(monkeypatch):
    # the RL split search skips pricing an nccl-reshard update where a floor (fixed latency, the
    # receivers' wire bounds or the quantisation, the misc path) cannot shorten the step; the floor
    # must be at most the update it stands for, in total and in the senders' busy time
    from ipd_cli.engine.rl import estimate as e

    seen = {"floors": 0}
    floor_of = e._sync_floor

    def checked(s, r, holding, replicas):
        floor = floor_of(s, r, holding, replicas)
        if floor is not None:
            real = e._sync(s, r, holding, replicas, quiet=True)
            assert floor.seconds <= real.seconds and floor.sync.seconds <= real.sync.seconds
            assert floor.sender_busy_s <= real.sender_busy_s
            seen["floors"] += 1
        return floor

    monkeypatch.setattr(e, "_sync_floor", checked)
    cat = load()
    rl(cat, "gb200-nvl72", "rl-swe-agent", mode="async")
    rl(cat, "h100-sxm", "rl-swe-agent", mode="disaggregated")
    assert seen["floors"] > 100  # the floors were taken


def test_the_test_sessions_rl_memo_keys_every_input(catalog):
    # the suite keeps estimate_rl's results by a digest of every input (engine.rl.estimate.MEMO):
    # the same inputs give the same key, an override or a keyword another
    from ipd_cli.engine.rl.estimate import content_key

    w = catalog.workload("rl-swe-agent")
    kw = {"mode": "async", "pricing": "rental"}
    key = content_key(catalog, "gb200-nvl72", w, kw)
    assert content_key(catalog, "gb200-nvl72", w, dict(kw)) == key
    assert content_key(catalog, "gb300-nvl72", w, kw) != key
    assert content_key(catalog, "gb200-nvl72", w, {**kw, "pricing": "tco"}) != key
    for change in ("rl.sync_fixed_s=1.5", "economics.electricity_usd_per_kwh=0.2",
                   "systems.gb200-nvl72.scale_up_domain=36"):  # fmt: skip
        assert content_key(catalog.with_overrides([change]), "gb200-nvl72", w, kw) != key, change
    assert content_key(catalog, "gb200-nvl72", w, kw) == key  # the catalog itself unchanged


def test_a_kept_rl_result_is_the_callers_own_copy(catalog):
    # MEMO keeps a result pickled: each hit is a fresh copy equal to the computed one, which a
    # caller may change without changing the next hit's
    from collections import OrderedDict

    from ipd_cli.engine.rl import estimate

    token = estimate.MEMO.set(OrderedDict())
    try:
        kw = dict(mode="one-step-off", gen_gpus=64, train_gpus=64)
        computed = rl(catalog, "b200", "rl-math-reasoning", **kw)
        text = computed.model_dump_json()
        computed.assumptions.clear()  # (the models are frozen; their lists are not)
        hit = rl(catalog, "b200", "rl-math-reasoning", **kw)
        assert hit.model_dump_json() == text and len(estimate.MEMO.get()) == 1
        assert hit is not computed and hit.assumptions
        hit.assumptions.clear()
        assert rl(catalog, "b200", "rl-math-reasoning", **kw).model_dump_json() == text
    finally:
        estimate.MEMO.reset(token)


def test_an_rl_workload_names_the_serving_stack_its_rollouts_run(catalog):
    # `generation_stack` sets the rollouts' serving stack (default: the family's, TensorRT-LLM).
    # Rollout engines are aggregated (prompts and decode in one engine), so they read an aggregated
    # instance's floor: TensorRT-LLM's on GB200 is B200's (100 us a layer, borrowed; its decode
    # pools' 2026 fit is read too, for the search's disaggregated rows, and not used), SGLang's its
    # own GB200 fit (79.6): SGLang's rollouts generate sooner
    kw = dict(mode="one-step-off", gen_gpus=64, train_gpus=64)
    trt = rl(catalog, "gb200", "rl-math-reasoning", **kw)
    sgl = rl(catalog.with_overrides(["workload.generation_stack=sglang"]), "gb200", "rl-math-reasoning", **kw)

    def floor(r):
        return next(a for a in r.assumptions if a.name == "per-step overhead per layer")

    assert floor(trt).path == "serving.stacks.trtllm.profiles.blackwell.step_overhead_us_per_layer"
    assert floor(sgl).path == "serving.stacks.sglang.profiles.grace-blackwell.step_overhead_us_per_layer"
    assert (floor(trt).value, floor(sgl).value) == (100, 79.6)
    assert sgl.rl.phases.generation_s < trt.rl.phases.generation_s
    r = run_cli("rl", "--hardware", "gb200", "--set", "workload.generation_stack=vlm")
    assert r.code == 2 and "generation_stack 'vlm'; did you mean 'vllm'" in r.stderr, r.stderr


@pytest.mark.parametrize("mode", ["one-step-off", "disaggregated"])
def test_generation_gpus_that_hold_no_replica_take_no_weight_update(mode):
    # an audit: beside one 72-GPU replica, 68 more generation GPUs (no second replica fits) took
    # part in the update as receivers: 2.44 -> 2.48 s. Only GPUs that hold weights take it
    cat = load()
    one = rl(cat, "gb200", "rl-swe-agent", mode=mode, gen_gpus=72, train_gpus=80).rl
    more = rl(cat, "gb200", "rl-swe-agent", mode=mode, gen_gpus=140, train_gpus=80).rl
    assert one.replicas == more.replicas == 1 and one.instance_gpus == more.instance_gpus == 72
    assert more.phases.weight_sync_s == one.phases.weight_sync_s


def test_sandboxes_the_host_cores_cap_are_flagged_and_warned():
    # an RL review: Qwen3-30B-A3B SWE RL on 16 H100 (2 nodes x 112 cores = 224 sandboxes of one core
    # for 512 trajectories) ran its replicas at the cores' 56 sequences, and the longer generation
    # showed with env_bound false, the cores needed equal to those available and no word
    args = ("rl", "--hardware", "h100", "--workload", "rl-swe-agent", "--model", "qwen3-30b-a3b",
            "--mode", "colocated", "--gpus", "16", "-f", "json")  # fmt: skip
    capped = run_cli(*args)
    out = capped.json()["rl"]
    assert out["cpu_cores_available"] == 224 and out["sandbox_cores_bind"]
    assert out["replicas"] * out["concurrency"] <= 224 < 512
    assert "the host's 224 cores cap the trajectories in flight" in capped.stderr
    ample = run_cli(*args, "--set", "cpus.xeon-8480c.cores=1000", "--set", "cpus.xeon-8480c.threads=2000")
    free = ample.json()["rl"]
    assert not free["sandbox_cores_bind"] and "cores cap" not in ample.stderr
    assert free["step_seconds"] < out["step_seconds"]  # the CPUs cost the capped step time


def test_async_sandboxes_in_verification_stay_within_the_host_cores():
    # a code review: async at 48 cores a CPU (192 on 16 H100) gave the GPU slots every core, so with
    # the trajectories verifying it needed 201.3 of 192 cores, unflagged; the window now holds the
    # trajectories in flight, verifying ones included, to the sandboxes the host holds
    r = run_cli("rl", "--hardware", "h100", "--workload", "rl-swe-agent", "--model", "qwen3-30b-a3b",
                "--mode", "async", "--gpus", "16", "--set", "cpus.xeon-8480c.cores=48", "--set",
                "cpus.xeon-8480c.threads=96", "-f", "json")  # fmt: skip
    out = r.json()["rl"]
    assert out["cpu_cores_available"] == 192
    assert out["cpu_cores_needed"] <= 192 * (1 + 1e-9) and out["sandbox_cores_bind"]
    assert "the host's 192 cores cap the trajectories in flight" in r.stderr


def test_whole_trajectories_keep_the_longest_within_the_staleness_bound():
    # an RL review: async at bound 4 ran GB200's SWE step 7.6x faster than colocated (measured
    # band 1.5-5.5x), its longest trajectory spanning 7-8 policy updates as a mixed-version
    # rollout; `partial_rollouts: false` holds every trajectory, verification included, within
    # the bound: the step is at least that time in flight / 4
    args = ("rl", "--hardware", "gb200", "--workload", "rl-swe-agent", "--mode", "async",
            "--set", "workload.staleness_bound=4", "-f", "json")  # fmt: skip
    mixed = run_cli(*args)
    whole = run_cli(*args, "--set", "workload.partial_rollouts=false")
    m, w = mixed.json()["rl"], whole.json()["rl"]
    assert m["longest_trajectory_policy_versions"] > 4 and "beyond the staleness bound" in mixed.stderr
    assert w["longest_trajectory_policy_versions"] <= 4 and "beyond the staleness bound" not in whole.stderr
    g = w["generation"]
    speed = w["decode_tokens_per_s_per_user"]
    in_flight = 32768 / speed + 100 * 2.0 + 1.0 + 120.0  # max response, 100 turns x 2 s, start, tests
    assert w["phases"]["generation_s"] >= in_flight / 4 * (1 + g["async_waste_fraction"]) * (1 - 1e-9)
    assert w["step_seconds"] > m["step_seconds"]
    colocated = run_cli("rl", "--hardware", "gb200", "--workload", "rl-swe-agent", "--mode", "colocated",
                        "-f", "json").json()["rl"]  # fmt: skip
    assert 1.5 <= colocated["step_seconds"] / w["step_seconds"] <= 5.5  # the measured band


def test_async_cores_flag_asks_whether_more_sandboxes_would_shorten_the_step():
    # a second code review: from the chosen point alone the flag missed MI300X's 10T step, which
    # one core per EPYC slows 926.8 -> 1,130.1 s (the search had balanced the bulk against the
    # cores' window), and flagged GB200's whole-trajectory floor, the same 861.9 s on 1 or 72 cores
    def cpu(name: str, cores: int) -> tuple[str, ...]:
        return ("--set", f"cpus.{name}.cores={cores}", "--set", f"cpus.{name}.threads={2 * cores}")

    mi = ("rl", "--hardware", "mi300x", "--workload", "rl-swe-agent-10t", "--mode", "async",
          "--set", "workload.staleness_bound=4", "--gpus", "2048", "-f", "json")  # fmt: skip
    ample = run_cli(*mi).json()["rl"]
    starved = run_cli(*mi, *cpu("epyc-9374f", 1))
    s = starved.json()["rl"]
    assert s["step_seconds"] > ample["step_seconds"]
    assert s["sandbox_cores_bind"] and not ample["sandbox_cores_bind"]
    assert "cores cap the trajectories in flight" in starved.stderr
    gb = ("rl", "--hardware", "gb200", "--workload", "rl-swe-agent", "--mode", "async", "--set",
          "workload.partial_rollouts=false", "--gpus", "512", "-f", "json")  # fmt: skip
    plenty = run_cli(*gb).json()["rl"]
    one = run_cli(*gb, *cpu("grace", 1))
    assert one.json()["rl"]["step_seconds"] == plenty["step_seconds"]  # the floor sets it, not the cores
    assert not one.json()["rl"]["sandbox_cores_bind"] and "cores cap" not in one.stderr


def test_rl_a_misspelt_generation_stack_with_a_release_is_named_as_the_stack():
    """A release on a stack that does not exist is refused for the stack (with its near match), as
    the same run without the release is, not as a release that stack lacks."""
    base = ("rl", "--hardware", "b200", "--set", "workload.generation_stack=trtlm", "-f", "json")
    for extra in ((), ("--stack-release", "1.1.0rc2")):
        r = run_cli(*base, *extra)
        assert r.code == 2 and r.stdout == "", r.stderr
        assert "unknown generation_stack 'trtlm'; did you mean 'trtllm'?" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_rl_generation_takes_a_stack_release_and_its_prompt_stall_by_hand():
    """Qwen3-235B rollouts at FP4 on B200 under TensorRT-LLM 1.1.0rc2 (ipd rl --stack-release, the
    workload's generation_stack_release): each prompt on a replica takes max(its own ~2.8 ms, the
    release's 42.1 ms stall), so the prompts' share of generation is rollouts x 0.0421 / replicas
    and the step grows by (0.0421 - the prompt's own) x rollouts / replicas, the configuration kept.
    The release also holds its own FP4 floor per layer (87 us against the stack's 100), so the run
    without it pins the stack's floor at 87 to leave the stall alone between them."""
    base = (
        "rl",
        "--hardware",
        "b200",
        "--workload",
        "rl-math-reasoning",
        "--set",
        "workload.inference_precision=fp4",
        "--gpus",
        "128",  # the same GPUs for both (the pool search may take another pool for each)
    )
    floor_87 = ("--set", "serving.stacks.trtllm.profiles.blackwell.step_overhead_us_per_layer=87")
    plain, rc2 = (
        run_cli(*base, *extra, "-f", "json") for extra in (floor_87, ("--stack-release", "1.1.0rc2"))
    )
    assert plain.code == rc2.code == 0, (plain.stderr, rc2.stderr)
    p, r = plain.json()["rl"], rc2.json()["rl"]
    assert (r["replicas"], r["instance_gpus"], r["concurrency"]) == (
        p["replicas"],
        p["instance_gpus"],
        p["concurrency"],
    )
    own = p["generation"]["prompt_prefill_s"]
    assert own < 0.0421 and r["generation"]["prompt_prefill_s"] == pytest.approx(0.0421)
    rollouts, replicas = r["generation"]["rollouts"], r["replicas"]
    assert r["generation"]["prefill_s"] == pytest.approx(rollouts * 0.0421 / replicas, rel=1e-12)
    grown = (0.0421 - own) * rollouts / replicas  # ~60.3 s
    assert r["phases"]["generation_s"] - p["phases"]["generation_s"] == pytest.approx(grown, rel=1e-9)
    assert r["step_seconds"] - p["step_seconds"] == pytest.approx(grown, rel=1e-9)
    stall = [a for a in rc2.json()["assumptions"] if a["name"].startswith("prompt stall")]
    assert [(a["value"], a["unit"], a["source"]) for a in stall] == [(42.1, "ms", "inferencex-trt-1.1-stall")]
    assert not [a for a in plain.json()["assumptions"] if a["name"].startswith("prompt stall")]


def test_an_rl_release_is_checked_against_the_rollout_stack_first():
    held = "releases measured apart: 1.1.0rc2 (leave it out for the stack's profile)"
    for args, line in (
        (
            ("rl", "--hardware", "mi355x", "--stack-release", "1.1.0rc2"),
            "ipd: error: unknown --stack-release '1.1.0rc2' for sglang (the serving stack of mi355x); "
            "releases measured apart: 0.5.7-mori-0122 (leave it out for the stack's profile)",
        ),
        (
            (
                "rl",
                "--hardware",
                "b200",
                "--set",
                "workload.generation_stack=vllm",
                "--stack-release",
                "1.1.0rc2",
            ),
            "ipd: error: unknown --stack-release '1.1.0rc2' for vllm (the serving stack of b200); "
            "releases measured apart: none (leave it out for the stack's profile)",
        ),
        (
            ("compare", "b200", "--workload", "pretrain-10t-moe", "--stack-release", "1.1.0rc2"),
            "ipd: error: --stack-release picks the release a scenario's serving or an RL workload's "
            "rollouts run; 'pretrain-10t-moe' (kind pretrain) serves nothing: give a scenario or an RL "
            "workload (ipd workloads list)",
        ),
        (
            # the workload's own field (InferenceX's later release, not held), named as the field
            ("rl", "--hardware", "b200", "--set", "workload.generation_stack_release=1.2.0rc6"),
            f"ipd: error: unknown generation_stack_release '1.2.0rc6' for trtllm (the serving stack of "
            f"b200); {held}",
        ),
    ):
        r = run_cli(*args, "-f", "json")
        assert (r.code, r.stdout, r.stderr.splitlines()) == (2, "", [line]), (args, r.stderr)


def test_an_rl_estimate_imports_no_numpy_ma():
    # the rollout engine's kept rows grouped their loads with np.unique, which imports numpy.ma
    # (~10-15 ms, nothing else of it used): the first import of it on compare's path, now by
    # search.distinct (the same sorted values)
    import subprocess
    import sys

    code = (
        "import sys\nfrom ipd_cli import api\n"
        "api.rl(api.load(), 'vera-rubin')\n"
        "print('numpy.ma' in sys.modules, file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stderr.strip().splitlines()[-1] == "False", r.stderr


def test_an_async_steps_policy_versions_come_from_a_printed_time_in_flight():
    # an RL review: "spans 2.9 policy updates" could not be recomputed from the printed fields (914.9 s
    # of longest trajectory over a 434.2 s step is 2.11): the time in flight is a field now, the
    # trajectory stretched by its replica's prefills plus its sandbox's start and verification
    r = run_cli("rl", "--hardware", "vera-rubin", "--mode", "async", "-f", "json")
    assert r.code == 0, r.stderr
    rl = r.json()["rl"]
    g, flight = rl["generation"], rl["longest_trajectory_in_flight_s"]
    assert rl["longest_trajectory_policy_versions"] == pytest.approx(flight / rl["step_seconds"], rel=1e-12)
    stretched = (
        g["longest_trajectory_s"] * (g["decode_and_tools_s"] + g["prefill_s"]) / g["decode_and_tools_s"]
    )
    assert stretched < flight < stretched + 600  # the sandbox's start and verification: minutes
    versions = rl["longest_trajectory_policy_versions"]
    assert f"spans {versions:.1f} policy updates (in flight {flight:,.4g} s" in r.stderr
    sync = run_cli("rl", "--hardware", "vera-rubin", "-f", "json").json()["rl"]
    assert (
        sync["longest_trajectory_in_flight_s"] is None and sync["longest_trajectory_policy_versions"] is None
    )
