"""Continuous RL post-training: one step of rollouts, environment, log-probs, training and sync.

The closed form of rl-loop.md §7 (symbols there), with the decode model of
:mod:`ipd_cli.engine.serving` for generation:

* Generation on G_gen GPUs: R = G_gen / g_inst inference instances (the smallest
  instance that holds the model), each decoding at most b_max sequences (KV limit).
  Bulk time = prefill + N_gen x mean tokens / (R x b x v(b)). Synchronous modes also
  drain the long tail: the longest response finishes at a small concurrency b_tail,
  and the step waits for it: T_gen = max(bulk + (max - mean) / v(b_tail), T_crit),
  T_crit = max tokens / v(b_tail) + max turns x tool latency. Async generation keeps
  the engines full at b_max, with no drain, and redoes a share omega of its work.
* Environment: sandboxes hold cores for a whole trajectory. Start and final
  verification of the last trajectory are exposed in sync modes (verification time
  scales with the host CPU's per-core speed); too few host cores stretch generation to
  N_gen x cores x trajectory time / cores available, and that wait is environment time.
* Log-probs and training: N x E[L] tokens x forward FLOPs x (passes, or 3 x epochs)
  at the RL trainer MFU (dense or MoE) and the training precision's dense peak, plus
  a fixed per-step overhead.
* Weight sync: total parameters x wire bytes / instance GPUs over the NIC
  (disaggregated) or half the scale-up link (colocated), at a link efficiency, plus a
  fixed latency; colocated also offloads and reloads training state over the host link
  and wakes the inference engine.

Modes: colocated = all in series on G GPUs; disaggregated = in series on G_gen + G_tr;
one-step-off = max(generation + environment, log-probs + training) + sync;
async = max(async generation, log-probs + training + sync).
"""

from __future__ import annotations

import math
from typing import Any

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.schema import RL_MODES, RlWorkload
from ipd_cli.errors import InfeasibleError, InputError

from . import formulas as f
from . import serving as sv
from .inputs import Inputs
from .pretraining import MAX_GPUS, supported_precision
from .pricing import kw_per_gpu, pue, usd_per_gpu_hour
from .results import Rl, RlPhases, RlResult, RlRun
from .trace import Trace

CLI = "command line"


def _w(trace: Trace, w: RlWorkload, field: str, unit: str, origin: str) -> Any:
    return trace.given(field.replace("_", " "), getattr(w, field), unit, origin, path=f"workload.{field}")


MAX_SPLITS = 400


def _split_candidates(total: int, instance_gpus: int) -> list[int]:
    """Generation sizes to try: every whole number of instances, or a geometric grid of them
    when there are more than MAX_SPLITS (the step time is smooth in the split)."""
    count = (total - 1) // instance_gpus
    if count <= MAX_SPLITS:
        return [k * instance_gpus for k in range(1, count + 1)]
    ratio = count ** (1 / (MAX_SPLITS - 1))
    ks = sorted({max(1, min(count, round(ratio**i))) for i in range(MAX_SPLITS)})
    return [k * instance_gpus for k in ks]


def split_gpus(total: int, instance_gpus: int, balance) -> tuple[int, int]:
    """The generation/training split of ``total`` GPUs (generation in whole instances)
    with the shortest step, given ``balance(gen, train) -> step seconds``."""
    best: tuple[float, int, int] | None = None
    for gen in _split_candidates(total, instance_gpus):
        step = balance(gen, total - gen)
        if best is None or step < best[0]:
            best = (step, gen, total - gen)
    if best is None:
        raise InfeasibleError(
            f"{total} GPUs cannot be split into generation (instances of {instance_gpus}) and training; "
            f"give at least {instance_gpus + 1} GPUs or use `mode` colocated"
        )
    return best[1], best[2]


def estimate_rl(
    cat: Catalog,
    hardware: str,
    workload: RlWorkload,
    *,
    workload_name: str = "",
    model: str | None = None,
    mode: str | None = None,
    gpus: int | None = None,
    gen_gpus: int | None = None,
    train_gpus: int | None = None,
    split: str | None = None,
    pricing: str = "rental",
    origin: str = CLI,
) -> RlResult:
    """One RL step of ``workload`` on ``hardware``; command-line values override the workload's."""
    updates: dict[str, Any] = {k: v for k, v in (("model", model), ("mode", mode)) if v is not None}
    if gpus is not None:
        updates.update(gpus=gpus, gen_gpus=None, train_gpus=None)
    if gen_gpus is not None or train_gpus is not None:
        updates.update(gen_gpus=gen_gpus, train_gpus=train_gpus)
    for flag, v in (("`gpus`", gpus), ("`gen_gpus`", gen_gpus), ("`train_gpus`", train_gpus)):
        if v is not None and v <= 0:
            raise InputError(f"{flag} must be > 0, got {v}")
    w = workload.model_copy(update=updates)
    for flag, v in (("`gpus`", w.gpus), ("`gen_gpus`", w.gen_gpus), ("`train_gpus`", w.train_gpus)):
        if v is not None and v > MAX_GPUS:  # as for pre-training: a bigger cluster means a broken input
            raise InputError(f"{flag} {v:.3g} is more than {MAX_GPUS:,} GPUs; give a cluster that can exist")
    if w.mode not in RL_MODES:
        raise InputError(f"unknown mode '{w.mode}'; choose one of: {', '.join(RL_MODES)}")
    if (w.gen_gpus is None) != (w.train_gpus is None):
        raise InputError("give both `gen_gpus` and `train_gpus`, or `gpus` with `split` auto")
    if split not in (None, "auto"):
        raise InputError(f"`split` {split}: only 'auto' is supported; or give `gen_gpus` and `train_gpus`")
    ctx = sv.serving_context(cat, hardware, w.model, origin)
    trace = ctx.trace
    inp = Inputs(cat, trace)
    name, system, acc, arch = ctx.name, ctx.system, ctx.acc, ctx.model
    mname = ctx.mname
    sorigin = cat.origin("systems", name)

    # --- workload numbers ---------------------------------------------------------------------
    P = _w(trace, w, "prompts_per_step", "prompts", origin)
    n = _w(trace, w, "group_size", "samples per prompt", origin)
    keep = _w(trace, w, "keep_fraction", "fraction", origin)
    lp = _w(trace, w, "prompt_tokens", "tokens", origin)
    lo = _w(trace, w, "observation_tokens", "tokens", origin)
    lg = _w(trace, w, "mean_response_tokens", "tokens", origin)
    lg_max = _w(trace, w, "max_response_tokens", "tokens", origin)
    k_max = _w(trace, w, "max_turns", "turns", origin)
    tool_s = _w(trace, w, "tool_latency_s", "s", origin)
    boot_s = _w(trace, w, "sandbox_boot_s", "s", origin)
    verify_s = _w(trace, w, "verify_s", "s on a reference core", origin)
    c_sb = _w(trace, w, "sandbox_cores", "cores", origin)
    N = P * n
    N_gen = N / keep
    mean_len = lp + lo + lg  # E[L]

    # --- generation instance (serving model), sized for the mean trajectory ------------------
    inst = sv.serving_instance(
        ctx,
        input_tokens=int(lp + lo),
        output_tokens=int(round(lg)),
        precision=w.inference_precision,
        kv_precision=None,
        instance_gpus=None,
        speculative=w.speculative,
        pricing=pricing,
        instance_note="smallest instance that holds the model and one mean trajectory",
    )
    g_inst = inst.gpus
    b_max = max(1, inst.max_batch)
    tail_frac = inp.read("rl.tail_concurrency_fraction", "tail concurrency share")
    waste = inp.read("rl.async_waste_fraction", "async waste")

    # --- training side --------------------------------------------------------------------------
    tprec = supported_precision(acc, w.training_precision)
    apath = f"accelerators.{system.accelerator}"
    peak_tr = inp.read(f"{apath}.{tprec}_dense_tflops", f"{tprec} dense peak (training)")
    mfu = inp.read(f"rl.training_mfu.{'moe' if arch.is_moe else 'dense'}", "RL trainer MFU")
    fwd_flops_per_token = 2 * arch.active_params + f.attention_flops_per_token_fwd(
        arch.kv_layers, mean_len, arch.attention_heads * arch.head_dim
    )
    tokens_train = N * mean_len
    step_fixed = inp.read("rl.step_fixed_s", "fixed step overhead")

    # --- sync and switching -------------------------------------------------------------------
    sync_bytes = inp.read(
        f"serving.bytes_per_weight.{w.sync_precision}", f"wire bytes per weight ({w.sync_precision})"
    )
    sync_eff = inp.read("rl.sync_link_efficiency", "weight-sync link efficiency")
    sync_fixed = inp.read("rl.sync_fixed_s", "weight-sync fixed latency")
    nic = inp.read(f"{apath}.scale_out_gbit_per_s", "scale-out NIC")
    nvl = inp.read(f"{apath}.scale_up_gb_per_s_bidir", "scale-up bandwidth (bidirectional)") / 2
    if system.host_link_gb_per_s is not None:
        host_link = inp.read(f"systems.{name}.host_link_gb_per_s", "host link")
    else:
        host_link = inp.read("rl.default_host_link_gb_per_s", "host link (PCIe default)")

    # --- host CPU -------------------------------------------------------------------------------
    cpu = cat.cpus[system.host_cpu]
    cores_per_gpu = system.host_cpus * cpu.cores / system.accelerators
    trace.given(
        "host cores per GPU",
        cores_per_gpu,
        "cores",
        sorigin,
        note=f"{system.host_cpus} x {cpu.cores}-core {system.host_cpu} per {system.accelerators} GPUs",
    )
    core_speed = 1.0
    if cpu.relative_core_throughput is not None:
        core_speed = inp.read(
            f"cpus.{system.host_cpu}.relative_core_throughput", "host core speed (Grace = 1)"
        )

    price, basis = usd_per_gpu_hour(inp, name, pricing)
    kw = kw_per_gpu(inp, name)
    p_ue = pue(inp)
    offload_bytes = inp.read("rl.offload_bytes_per_param", "offload bytes per parameter")
    engine_switch_s = inp.read("rl.engine_switch_s", "engine switch")

    def generation(gen_gpus: int, total_gpus: int, asynchronous: bool) -> dict[str, float]:
        replicas = gen_gpus // g_inst
        if replicas < 1:
            raise InfeasibleError(
                f"{mname} needs {g_inst}-GPU inference instances on {name}; "
                f"{gen_gpus} generation GPUs hold none"
            )
        # sync: one wave of the step's rollouts; async: in flight up to the staleness bound
        wanted = math.ceil(N_gen * ((w.staleness_bound + 1) if asynchronous else 1) / replicas)
        b_s = max(1, min(b_max, wanted))
        b_tail = max(1, int(b_s * tail_frac))
        v_bulk, v_tail = sv.decode_speed(inst, b_s), sv.decode_speed(inst, b_tail)
        prefill = N_gen * inst.prefill_s / replicas  # prefills share the instance with decode
        # Little's law: each of the b_s slots holds one trajectory for its decode time plus tool waits
        slot_s = lg / v_bulk + w.turns * tool_s
        bulk = N_gen * slot_s / (replicas * b_s) + prefill
        tools = k_max * tool_s
        crit = lg_max / v_tail + tools
        if asynchronous:
            t_gen = bulk * (1 + waste)
            latency_bound = False
            live = replicas * b_s
        else:
            drained = bulk + (lg_max - lg) / v_tail
            t_gen = max(drained, crit)
            latency_bound = crit > drained
            live = min(N_gen, replicas * b_s)
        cores_needed = c_sb * live
        cores_avail = cores_per_gpu * total_gpus
        traj_s = lg / v_bulk + w.turns * tool_s + boot_s + verify_s / core_speed
        env_bound_s = N_gen * c_sb * traj_s / cores_avail if c_sb > 0 else 0.0
        stall = max(0.0, env_bound_s - t_gen)
        exposed_env = stall + (0.0 if asynchronous else boot_s + verify_s / core_speed)
        return {
            "generation_s": t_gen,
            "environment_s": exposed_env,
            "replicas": replicas,
            "b_s": b_s,
            "b_tail": b_tail,
            "v_bulk": v_bulk,
            "latency_bound": latency_bound,
            "cores_needed": cores_needed,
            "cores_avail": cores_avail,
            "env_bound": stall > 0,
            "staleness": replicas * b_s / N_gen if asynchronous else None,
        }

    def trainer(train_gpus: int) -> tuple[float, float]:
        rate = train_gpus * peak_tr * mfu
        logp = tokens_train * fwd_flops_per_token * w.logprob_passes / rate
        train = tokens_train * fwd_flops_per_token * 3 * w.ppo_epochs / rate + step_fixed
        return logp, train

    def sync(colocated: bool, total_gpus: int) -> float:
        # each GPU of each inference instance receives its shard of the weights, all in parallel
        per_gpu = arch.total_params * sync_bytes / g_inst
        if colocated:
            switch = 2 * offload_bytes * arch.total_params / total_gpus / host_link
            return f.transfer_seconds(per_gpu, nvl, sync_eff, sync_fixed) + switch + engine_switch_s
        return f.transfer_seconds(per_gpu, nic, sync_eff, sync_fixed)

    def step(gen_gpus: int, train_gpus: int, mode: str) -> tuple[float, dict, float, float, float]:
        colocated = mode == "colocated"
        total = gen_gpus if colocated else gen_gpus + train_gpus
        g = generation(gen_gpus, total, mode == "async")
        logp, train = trainer(train_gpus)
        t_sync = sync(colocated, total)
        if mode in ("colocated", "disaggregated"):
            t = g["generation_s"] + g["environment_s"] + logp + train + t_sync
        elif mode == "one-step-off":
            t = max(g["generation_s"] + g["environment_s"], logp + train) + t_sync
        else:
            t = max(g["generation_s"] + g["environment_s"], logp + train + t_sync)
        return t, g, logp, train, t_sync

    if w.mode == "colocated":
        total = w.gpus if w.gpus is not None else w.gen_gpus + w.train_gpus
        gg, tg = total, total
    elif w.gen_gpus is not None and split is None:
        gg, tg = w.gen_gpus, w.train_gpus
    else:
        total = w.gpus if w.gpus is not None else w.gen_gpus + w.train_gpus
        gg, tg = split_gpus(total, g_inst, lambda a, b: step(a, b, w.mode)[0])
    trace.given("generation GPUs", gg, "GPUs", origin, path="workload.gen_gpus")
    trace.given("training GPUs", tg, "GPUs", origin, path="workload.train_gpus")

    t, g, logp, train, t_sync = step(gg, tg, w.mode)
    billed = gg if w.mode == "colocated" else gg + tg
    phases = RlPhases(
        generation_s=g["generation_s"],
        environment_s=g["environment_s"],
        logprob_s=logp,
        training_s=train,
        weight_sync_s=t_sync,
    )
    gpu_hours = billed * t / f.SECONDS_PER_HOUR
    usd = gpu_hours * price
    energy_kwh = gpu_hours * kw * p_ue
    steps = w.steps_per_refresh
    per_year = steps * w.refreshes_per_year
    result = Rl(
        model=mname,
        workload=workload_name,
        mode=w.mode,
        step_seconds=t,
        usd_per_step=usd,
        gpu_hours_per_step=gpu_hours,
        samples_per_s=N / t,
        phases=phases,
        hidden_by_overlap_s=sum(phases.model_dump().values()) - t,
        usd_per_1k_samples=usd / N * 1000,
        usd_per_million_generated_tokens=usd / (N_gen * lg / 1e6),
        rollouts_per_kwh=N_gen / energy_kwh,
        gpus=billed,
        gen_gpus=gg,
        train_gpus=tg,
        instance_gpus=g_inst,
        replicas=g["replicas"],
        concurrency=g["b_s"],
        max_concurrency=b_max,
        tail_concurrency=g["b_tail"],
        decode_tokens_per_s_per_user=g["v_bulk"],
        cpu_cores_needed=g["cores_needed"],
        cpu_cores_available=g["cores_avail"],
        env_bound=g["env_bound"],
        mean_staleness_steps=g["staleness"],
        latency_bound=g["latency_bound"],
        price_usd_per_gpu_hour=price,
        pricing=basis,
        run=RlRun(
            steps_per_refresh=steps,
            refreshes_per_year=w.refreshes_per_year,
            wall_days_per_refresh=steps * t / f.SECONDS_PER_DAY,
            gpu_hours_per_refresh=steps * gpu_hours,
            usd_per_refresh=steps * usd,
            gpu_hours_per_year=per_year * gpu_hours,
            usd_per_year=per_year * usd,
            energy_mwh_per_year=per_year * energy_kwh / 1000,
        ),
    )
    return RlResult(hardware=name, rl=result, assumptions=trace.items)
