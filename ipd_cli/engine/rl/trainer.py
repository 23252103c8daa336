"""The trainer: log-prob passes and training (FLOPs at the RL trainer MFU), and whether it
can hold the training state at all (a simple memory bound; a plan search will replace it)."""

from __future__ import annotations

from dataclasses import dataclass

from ipd_cli.catalog.schema import Model, RlWorkload
from ipd_cli.engine import formulas as f
from ipd_cli.engine.inputs import Inputs
from ipd_cli.engine.pretraining import supported_precision
from ipd_cli.errors import InfeasibleError

from .workload import RlNumbers


@dataclass(frozen=True)
class TrainerRates:
    tokens: float  # trained tokens per step: N x E[L]
    fwd_flops_per_token: float
    peak_flops: float  # per GPU, dense, at the training precision
    mfu: float
    fixed_s: float


def trainer_rates(inp: Inputs, accelerator: str, arch: Model, w: RlWorkload, nums: RlNumbers) -> TrainerRates:
    acc = inp.cat.accelerators[accelerator]
    precision = supported_precision(acc, w.training_precision)
    attention = f.attention_flops_per_token_fwd(
        arch.kv_layers, nums.mean_length, arch.attention_heads * arch.head_dim
    )
    return TrainerRates(
        tokens=nums.samples * nums.mean_length,
        fwd_flops_per_token=2 * arch.active_params + attention,
        peak_flops=inp.read(
            f"accelerators.{accelerator}.{precision}_dense_tflops", f"{precision} dense peak (training)"
        ),
        mfu=inp.read(f"rl.training_mfu.{'moe' if arch.is_moe else 'dense'}", "RL trainer MFU"),
        fixed_s=inp.read("rl.step_fixed_s", "fixed step overhead"),
    )


@dataclass(frozen=True)
class Trainer:
    logprob_s: float
    training_s: float


def trainer(r: TrainerRates, w: RlWorkload, train_gpus: int) -> Trainer:
    """N x E[L] tokens x forward FLOPs x (passes, or 3 x epochs) at the trainer MFU, plus a fixed step."""
    work = r.tokens * r.fwd_flops_per_token / (train_gpus * r.peak_flops * r.mfu)
    return Trainer(logprob_s=work * w.logprob_passes, training_s=work * 3 * w.ppo_epochs + r.fixed_s)


@dataclass(frozen=True)
class TrainerMemory:
    """Training state (weights, gradients, optimizer, fully sharded) against usable HBM, and in
    colocated mode where that state waits while rollouts run (host memory)."""

    state_bytes: float
    usable_hbm_per_gpu: float
    min_gpus: int
    offload_bytes: float | None = None  # colocated: moved to host memory during rollouts
    host_per_gpu: float | None = None
    min_gpus_for_host: int | None = None


def trainer_memory(inp: Inputs, system: str, accelerator: str, arch: Model, colocated: bool) -> TrainerMemory:
    """The fewest trainer GPUs that hold the fully sharded training state (and, colocated, the
    fewest whose host memory holds it while rollouts run)."""
    state = (
        inp.read("efficiency.training_bytes_per_param", "training state per parameter") * arch.total_params
    )
    usable = inp.read(f"accelerators.{accelerator}.hbm_gb", "HBM per GPU")
    usable *= inp.read("efficiency.hbm_usable_fraction", "usable HBM share (training)")
    mem = TrainerMemory(
        state_bytes=state, usable_hbm_per_gpu=usable, min_gpus=f.min_gpus_for_bytes(state, usable)
    )
    if not colocated or not inp.has(f"systems.{system}.host_memory_gb"):
        return mem
    offload = inp.read("rl.offload_bytes_per_param", "offload bytes per parameter") * arch.total_params
    host = inp.read(f"systems.{system}.host_memory_gb", "host memory") / inp.cat.systems[system].accelerators
    return TrainerMemory(
        state_bytes=state,
        usable_hbm_per_gpu=usable,
        min_gpus=mem.min_gpus,
        offload_bytes=offload,
        host_per_gpu=host,
        min_gpus_for_host=f.min_gpus_for_bytes(offload, host),
    )


def check_trainer_memory(mem: TrainerMemory, gpus: int, param: str, what: str) -> None:
    """InfeasibleError when ``gpus`` trainer GPUs cannot hold the state (``param``: the parameter
    to raise), naming the smallest trainer that can."""
    if gpus < mem.min_gpus:
        raise InfeasibleError(
            f"{gpus} training GPUs cannot hold the training state of {what}: {mem.state_bytes / 1e12:.3g} TB "
            f"fully sharded over {mem.usable_hbm_per_gpu / 1e9:.0f} GB of usable HBM per GPU needs at least "
            f"{mem.min_gpus}; give `{param}` >= {mem.min_gpus}"
        )
    if mem.min_gpus_for_host is not None and gpus < mem.min_gpus_for_host:
        raise InfeasibleError(
            f"{gpus} colocated GPUs cannot park the training state of {what} in host memory while rollouts "
            f"run: {mem.offload_bytes / 1e12:.3g} TB over {mem.host_per_gpu / 1e9:.0f} GB of host memory per "
            f"GPU needs at least {mem.min_gpus_for_host}; give `{param}` >= {mem.min_gpus_for_host}"
        )
