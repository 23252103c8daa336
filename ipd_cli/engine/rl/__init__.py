"""Continuous RL post-training: one step of rollouts, environment, log-probs, training and sync.

The closed form of the RL loop (NeMo RL, verl, slime, AReaL designs), in named phases:

* :mod:`.workload`: the request and the workload's numbers (N = prompts x group kept samples,
  N / keep generated, lengths, tools, sandboxes).
* :mod:`.generation`: rollouts on the serving deployment search's configurations
  (``rollout_candidates``), for each generation pool the configuration and concurrency with the
  shortest step (the soonest generation of each group that takes the same update):
  R = G_gen / g_inst replicas, each decoding b <= b_max sequences; bulk time by
  Little's law, plus the drain of the longest response at a tail concurrency in synchronous
  modes (or the longest trajectory's critical path); async keeps engines full and redoes a share
  of its work. The environment: sandboxes hold host cores for a whole trajectory; too few cores
  stretch generation, and that wait is environment time.
* :mod:`.trainer`: log-prob passes and training, N x E[L] tokens x forward FLOPs x (passes, or
  3 x epochs) at the RL trainer MFU plus a fixed step; and the memory bound (the fully sharded
  training state must fit the trainer's usable HBM; colocated, it waits in host memory).
* :mod:`.sync`: the weight update as a transfer schedule over NICs, the scale-up link and the
  host link, per transport.
* :mod:`.step`: the step by mode (colocated and disaggregated in series; one-step-off overlaps
  generation with training; async pauses engines for the update) and the split search.
* :mod:`.result`: cost, energy, a refresh cycle and a year.
"""

from .estimate import estimate_rl, estimate_weight_sync, sync_plan
from .step import split_gpus
from .sync import Links, SyncPlan, WeightSync, sync_links, weight_sync
from .trainer import TrainerMemory, check_trainer_memory, trainer_memory

__all__ = [
    "Links",
    "SyncPlan",
    "TrainerMemory",
    "WeightSync",
    "check_trainer_memory",
    "estimate_rl",
    "estimate_weight_sync",
    "split_gpus",
    "sync_links",
    "sync_plan",
    "trainer_memory",
    "weight_sync",
]
