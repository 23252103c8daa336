"""RL weight sync as a transfer schedule, the step by mode, the trainer's memory bound and RL energy:
transfers and bounds computed by hand."""

from __future__ import annotations

import dataclasses

import pytest
from helpers import run_cli

from ipd_cli.api import compare, rl
from ipd_cli.engine.inputs import Inputs
from ipd_cli.engine.rl import Links, SyncPlan, sync_links, weight_sync
from ipd_cli.engine.rl.generation import Environment, Generation
from ipd_cli.engine.rl.step import Step, SyncPhase, step
from ipd_cli.engine.rl.sync import WeightSync
from ipd_cli.engine.rl.trainer import Trainer
from ipd_cli.errors import InfeasibleError, InputError

# 8-GPU nodes, each GPU with a 400 Gb/s NIC (50 GB/s) and 450 GB/s of NVLink per direction
NODE = Links(nic=50e9, scale_up=450e9, host=55e9, hbm=3.35e12, domain=8, node=8)
KNOBS = [
    "rl.sync_link_efficiency.rdma-p2p=0.5",
    "rl.sync_link_efficiency.nccl-broadcast=0.5",
    "rl.sync_link_efficiency.nccl-reshard=0.5",
    "rl.sync_fixed_s=0.25",
    "rl.sync_stacks.nemo-rl.tensor_us=100",
    "rl.sync_stacks.slime.replica_tensor_us=50",
    "rl.sync_stacks.slime.ipc_gb_per_s=20",
    "rl.sync_stacks.slime.colocated_overhead_s=10",
    "rl.sync_stacks.verl.tensor_us=200",
    "rl.sync_stacks.verl-per-tensor.tensor_us=1000",
    "rl.sync_link_efficiency.colocated=0.25",
]


@pytest.fixture(scope="module")
def inp(catalog):
    return Inputs(catalog.with_overrides(KNOBS))


def _p2p(trainer_gpus: int, inference_gpus: int, **kw) -> SyncPlan:
    # a 1e12-parameter model in BF16 (2 TB), rollout instances of 16 GPUs that each hold one copy
    return SyncPlan(
        transport="rdma-p2p",
        model_bytes=2e12,
        instance_bytes=2e12,
        tensors=50_000,
        trainer_gpus=trainer_gpus,
        inference_gpus=inference_gpus,
        instance_gpus=16,
        **kw,
    )


def test_sender_limited_transfer_by_hand(inp):
    # 32 trainer GPUs push 256 / 16 = 16 replicas: each sender sends 16 x 2 TB / 32 = 1 TB,
    # each receiver takes 2 TB / 16 = 125 GB. Every byte crosses nodes (8-GPU domains, one role each).
    # sender NIC: 1e12 / 50e9 = 20 s; receiver NIC: 125e9 / 50e9 = 2.5 s -> the senders bound it.
    # time = 0.25 fixed + 20 / 0.5 efficiency = 40.25 s; no engine loader (receivers are passive)
    ws = weight_sync(inp, NODE, _p2p(32, 256))
    assert ws.bound == "sender NIC"
    assert ws.bytes_per_sender == pytest.approx(1e12) and ws.bytes_per_receiver == pytest.approx(125e9)
    assert ws.bytes_moved == pytest.approx(16 * 2e12)
    assert ws.terms["receiver NIC"] == pytest.approx(2.5 / 0.5)
    assert ws.seconds == pytest.approx(0.25 + 20 / 0.5)
    assert ws.load_s == 0


def test_receiver_limited_transfer_by_hand(inp):
    # 256 trainer GPUs push 32 / 16 = 2 replicas: each sender sends 2 x 2 TB / 256 = 15.6 GB
    # (0.3125 s), each receiver takes 125 GB (2.5 s) -> the receivers bound it: 0.25 + 2.5 / 0.5 = 5.25 s
    ws = weight_sync(inp, NODE, _p2p(256, 32))
    assert ws.bound == "receiver NIC"
    assert ws.terms["sender NIC"] == pytest.approx(2 * 2e12 / 256 / 50e9 / 0.5)
    assert ws.seconds == pytest.approx(0.25 + 2.5 / 0.5)


def test_gb200_replicas_of_the_10t_model_leave_the_trainer_nics(catalog, inp):
    # Issue 15: six 64-GPU replicas of the 10T model (20 TB each in BF16) fed by 128 trainer GPUs.
    # 512 GPUs in NVL72 racks of 4-GPU trays, both roles in every rack: a share 72 / 512 of a
    # receiver's bytes come from its own rack (NVLink), the rest over NICs: 1 - 72/512 = 0.859375.
    # each sender: 6 x 20e12 / 128 = 937.5 GB; over its NIC 0.859375 x 937.5e9 / 50e9 = 16.11 s
    links = sync_links(Inputs(catalog), "gb200-nvl72", "gb200", 72)
    assert (links.domain, links.node, links.nic) == (72, 4, 50e9)
    plan = SyncPlan("rdma-p2p", 20e12, 20e12, 1, trainer_gpus=128, inference_gpus=384, instance_gpus=64)
    ws = weight_sync(inp, links, plan)
    assert ws.bound == "sender NIC"
    assert ws.terms["sender NIC"] == pytest.approx(0.859375 * 937.5e9 / 50e9 / 0.5)
    assert ws.seconds == pytest.approx(0.25 + 0.859375 * 937.5e9 / 50e9 / 0.5)
    # what each receiver ingests alone would say 0.859375 x 20e12 / 64 / 50e9 / 0.5 = 10.7 s: 3x less
    assert ws.terms["receiver NIC"] == pytest.approx(0.859375 * 20e12 / 64 / 50e9 / 0.5)


def _broadcast(**kw) -> SyncPlan:
    # a 1e12-parameter model in BF16 (2 TB, 50,000 tensors) broadcast from 256 trainer GPUs to 32
    return SyncPlan(
        "nccl-broadcast", 2e12, 2e12, 50_000, trainer_gpus=256, inference_gpus=32, instance_gpus=16, **kw
    )


def test_broadcast_delivers_the_full_model_to_every_receiver(inp):
    # one sender (the catalog default) gathers 2 TB from the 256 trainer GPUs: 8 / 256 of it over
    # NVLink, 248 / 256 over its NIC: 0.96875 x 2e12 / 50e9 = 38.75 s, at 0.5: 77.5 s. It pushes the
    # 2 TB through its NIC: 40 s, at 0.5: 80 s; each receiving node takes one copy over its 8 NICs
    # (5 s) and fans it out over NVLink (4.4 s). NeMo RL (pipelined, the engine's loader): 50,000
    # tensors x 100 us = 5 s beside the wire: 0.25 + max(77.5 + 5, 80) = 82.75 s
    ws = weight_sync(inp, NODE, _broadcast())
    assert ws.bytes_per_receiver == pytest.approx(2e12) and ws.bytes_moved == pytest.approx(32 * 2e12)
    assert ws.terms["node NICs (one copy per node)"] == pytest.approx(2e12 / (8 * 50e9) / 0.5)
    assert ws.terms["gather on the senders"] == pytest.approx(0.96875 * 2e12 / 50e9 / 0.5)
    assert ws.terms["per-tensor software"] == pytest.approx(5.0)
    # the gather and the loads behind it (82.5 s) outlast the sender's NIC (80 s): they bound it
    assert ws.bound == "gather on the senders + per-tensor software" and ws.stack == "nemo-rl"
    assert ws.seconds == pytest.approx(0.25 + 77.5 + 5.0)
    assert ws.transfer_s == pytest.approx(80.0) and ws.load_s == pytest.approx(2.5)
    # a trainer sharded inside one node gathers over NVLink: 2e12 / 450e9 / 0.5 = 8.9 s, under the wire
    local = weight_sync(inp, NODE, _broadcast(shard_group_gpus=8))
    assert local.terms["gather on the senders"] == pytest.approx(2e12 / 450e9 / 0.5)
    assert local.seconds == pytest.approx(0.25 + 80.0) and local.bound == "sender NIC"


def test_pipeline_stages_taking_turns_on_one_lock(inp):
    # slime/Miles: each of 4 pipeline stages gathers its 0.5 TB (BF16) over an EP group of 16 GPUs
    # (half on the other node: 0.5 x 0.5e12 / 50e9 = 5 s, at 0.5: 10 s), then broadcasts it, one
    # stage at a time: the whole 2 TB through one NIC, 80 s; SGLang's loads ride inside the turns
    # (slime's tensor_us is 0). Turns in a row: 80 s; one stage's chain: 10 + 80 / 4 = 30 s -> 80.25 s
    ws = weight_sync(inp, NODE, _broadcast(stack="slime", trainer_stages=4, gather_gpus=16, senders=8))
    assert ws.bytes_per_sender == pytest.approx(2e12)  # one broadcaster at a time, whatever `senders`
    assert ws.terms["gather on the senders"] == pytest.approx(10.0)
    assert ws.seconds == pytest.approx(0.25 + 80.0) and ws.load_s == 0
    # a single stage gathers all 2 TB (0.5 x 2e12 / 50e9 / 0.5 = 40 s) with no other stage to
    # broadcast meanwhile: its chain, 40 + 80 = 120 s, sets the time
    one = weight_sync(inp, NODE, _broadcast(stack="slime", trainer_stages=1, gather_gpus=16))
    assert one.seconds == pytest.approx(0.25 + 40.0 + 80.0)


def test_p2p_through_a_cpu_engine_replica(inp):
    # Miles P2P: 64 trainer GPUs in 4 stages (16 senders a stage), instances of 32 GPUs -> each
    # sender fills 32 / 16 = 2 distinct engine ranks. Per rank and stage: 2e12 / 32 / 4 = 15.6 GB
    # copied to host (55 GB/s: 0.284 s) and 50,000 / 4 tensors x 50 us = 0.625 s -> 2 x 0.909 s.
    # It first gathers its stage (0.5 TB, EP 16 over 2 nodes: 5 s, at 0.5 -> 10 s); then it writes
    # 2 replicas x 2 TB / 64 = 62.5 GB (1.25 s, at 0.5 -> 2.5 s). In series: 0.25 + 10 + 1.818 + 2.5
    plan = SyncPlan(
        "rdma-p2p", 2e12, 2e12, 50_000, trainer_gpus=64, inference_gpus=64, instance_gpus=32,
        stack="slime", trainer_stages=4, gather_gpus=16,
    )  # fmt: skip
    ws = weight_sync(inp, NODE, plan)
    replica = 2 * (50_000 / 4 * 50e-6 + 2e12 / 32 / 4 / 55e9)
    assert ws.terms["CPU replica load"] == pytest.approx(replica)
    assert ws.bytes_per_sender == pytest.approx(62.5e9) and ws.terms["sender NIC"] == pytest.approx(2.5)
    assert ws.seconds == pytest.approx(0.25 + 10.0 + replica + 2.5)


def test_colocated_hand_off_and_update_overhead(inp):
    # slime colocated: every GPU gathers the 2 TB over NVLink (4.44 s, at the 0.25 gather
    # efficiency 17.8 s), hands it to its engine at 20 GB/s (100 s); its update timer adds 10 s
    plan = SyncPlan(
        "colocated", 2e12, 2e12, 50_000, trainer_gpus=64, inference_gpus=64, instance_gpus=16,
        colocated=True, stack="slime",
    )  # fmt: skip
    ws = weight_sync(inp, NODE, plan)
    assert ws.terms["IPC hand-off and engine load"] == pytest.approx(100.0)
    assert ws.seconds == pytest.approx(0.25 + 10 + 2e12 / 450e9 / 0.25 + 100.0)
    # a measurement of the transfer alone (scope: transfer) leaves the timer's overhead out
    bare = weight_sync(inp, NODE, SyncPlan(**{**plan.__dict__, "overhead": False}))
    assert ws.seconds - bare.seconds == pytest.approx(10.0)
    # a stack with no measured colocated path is refused, naming the value to set
    with pytest.raises(InputError, match="rl.sync_stacks.perplexity.ipc_gb_per_s"):
        weight_sync(inp, NODE, SyncPlan(**{**plan.__dict__, "stack": "perplexity"}))


def test_trainer_side_tensor_work_is_paid_whether_receivers_load(inp):
    # verl: the trainer generates every tensor (200 us x 50,000 = 10 s) beside the wire (80 s)
    # and the gather (77.5 s): 0.25 + max(77.5 + 10, 80) = 87.75 s, even when receivers only receive
    ws = weight_sync(inp, NODE, _broadcast(stack="verl", engine_load=False))
    assert ws.seconds == pytest.approx(0.25 + 77.5 + 10.0)
    # verl's original sync, a broadcast and a load per tensor (1 ms), runs in series: 77.5 + 80 + 50
    pt = weight_sync(inp, NODE, _broadcast(stack="verl-per-tensor"))
    assert pt.seconds == pytest.approx(0.25 + 77.5 + 80.0 + 50.0)


def test_reshard_bulk_then_misc_path(inp):
    # NeMo RL nccl_reshard: the routed experts (1.9 TB a copy) go shard to shard: 16 replicas of
    # 16 GPUs fed by 256 trainer GPUs, 118.75 GB each way per GPU: 2.375 s, at 0.5: 4.75 s. After
    # it the misc path (0.1 TB: attention, embeddings, norms, router) is a packed broadcast from
    # one sender, 0.1e12 / 50e9 = 2 s, at the broadcast's 0.5: 4 s, and vLLM loads its 1,000
    # tensors at 100 us: 0.1 s. In series: 0.25 + 4.75 + 4 + 0.1 = 9.1 s
    plan = SyncPlan(
        "nccl-reshard", 2e12, 2e12, 50_000, trainer_gpus=256, inference_gpus=256, instance_gpus=16,
        bulk_bytes=1.9e12, misc_bytes=0.1e12, misc_tensors=1000,
    )  # fmt: skip
    ws = weight_sync(inp, NODE, plan)
    # each receiver takes its 118.75 GB of the bulk and the whole 0.1 TB misc broadcast (the misc
    # bytes were timed but not counted: bytes_moved read 0.94 of a copy per replica on Rubin)
    assert ws.bytes_per_receiver == pytest.approx(118.75e9 + 0.1e12)
    assert ws.bytes_moved == pytest.approx(256 * (118.75e9 + 0.1e12))
    assert ws.terms["receiver NIC"] == pytest.approx(4.75)
    assert ws.terms["misc path broadcast"] == pytest.approx(4.0)
    assert ws.terms["misc path engine loader"] == pytest.approx(0.1)
    assert ws.seconds == pytest.approx(0.25 + 4.75 + 4.0 + 0.1)
    # a review: the fullest receiver binds. Replicas whose expert parallelism leaves one GPU 1.125x
    # the mean share of the routed experts (DEP72 on 384: 6 of them where the mean is 5.33) take
    # 1.125 x 118.75 GB there: 5.34 s at 0.5; the bytes moved stay every receiver's
    full = weight_sync(inp, NODE, dataclasses.replace(plan, bulk_fullest_share=1.125 / 16))
    assert full.terms["receiver NIC"] == pytest.approx(1.125 * 4.75)
    assert full.bytes_per_receiver == pytest.approx(1.125 * 118.75e9 + 0.1e12)
    assert full.bytes_moved == pytest.approx(ws.bytes_moved)
    # EPLB: every GPU of a replica holds 1.25 / 16 of the bulk (its replica slots updated too)
    eplb = weight_sync(
        inp, NODE, dataclasses.replace(plan, bulk_fullest_share=1.25 / 16, bulk_mean_share=1.25 / 16)
    )
    assert eplb.bytes_moved == pytest.approx(256 * (1.25 * 118.75e9 + 0.1e12))
    # and the senders send every copy the replicas hold: 16 replicas x 1.9 TB x 1.25 / 256 senders
    # = 148.4 GB each (118.75 GB without EPLB), 2.97 s at 50 GB/s, 5.94 s at 0.5 (the receivers'
    # 1.25 x 4.75 = 5.94 s too)
    assert ws.bytes_per_sender == pytest.approx(118.75e9)
    assert eplb.bytes_per_sender == pytest.approx(16 * 1.9e12 * 1.25 / 256)
    assert eplb.terms["sender NIC"] == pytest.approx(1.25 * 4.75)


def test_gpus_an_instance_strands_and_a_trainer_leaves_idle_move_no_bytes(inp):
    # a review: a DEP64 replica paid as a 72-GPU rack (8 GPUs stranded) holds one copy of the
    # routed experts (1.9 TB) on its 64 GPUs, 29.69 GB each, and its 8 stranded GPUs none: the
    # update split it over the 72 paid (26.39 GB) and sent 72 / 64 = 1.125 copies. Two replicas
    # (144 GPUs paid, 128 holding) from 64 trainer GPUs: each sends 2 x 1.9 TB / 64 = 59.38 GB;
    # the bytes moved are the 128 holders' 29.69 GB each
    plan = SyncPlan(
        "nccl-reshard", 2e12, 2e12, 50_000, trainer_gpus=64, inference_gpus=144, instance_gpus=72,
        bulk_bytes=1.9e12, bulk_fullest_share=1 / 64, bulk_mean_share=1 / 64, holding_gpus=64,
    )  # fmt: skip
    ws = weight_sync(inp, NODE, plan)
    assert ws.bytes_per_receiver == pytest.approx(1.9e12 / 64)
    assert ws.bytes_per_sender == pytest.approx(2 * 1.9e12 / 64)
    assert ws.bytes_moved == pytest.approx(128 * 1.9e12 / 64)
    # an even split (no shares named) is over the holders too
    even = weight_sync(inp, NODE, dataclasses.replace(plan, bulk_fullest_share=None, bulk_mean_share=None))
    assert even.bytes_per_receiver == pytest.approx(1.9e12 / 64)
    # colocated checkpoint-engine: the 128 holders load the 2 TB model from pinned host memory,
    # 15.6 GB each over its 55 GB/s host link (0.284 s; 144 paid would say 0.253 s)
    ce = dataclasses.replace(plan, transport="checkpoint-engine", colocated=True, bulk_bytes=None)
    host = weight_sync(inp, NODE, ce).terms["host link (pinned host memory)"]
    eff = inp.read("rl.sync_link_efficiency.checkpoint-engine")
    assert host == pytest.approx(2e12 / 128 / 55e9 / eff)


def test_trainer_gpus_its_plan_leaves_idle_send_no_update():
    # GB200's SWE trainer runs TP2 CP4 EP64 FSDP on 64 GPUs given 72 to 88 (TP1 PP9 EP8 CP8 on 72
    # until an offloading plan on NVLink-C2C sent only the layers that must go, 2026-12-05): the
    # GPUs its plan leaves idle hold no weights, so they neither send nor shorten the update
    # (senders counted the GPUs given: 88 cut the sender NIC term by 72 / 88, a split search's
    # free lunch)
    def sync(train: int) -> dict:
        args = ("--workload", "rl-swe-agent", "--gen-gpus", "432", "--train-gpus", f"{train}")
        r = run_cli("rl", "--hardware", "gb200", *args, "-f", "json")
        assert r.code == 0, r.stderr
        return r.json()["rl"]

    used, idle = sync(72), sync(88)
    assert used["trainer"]["gpus_used"] == idle["trainer"]["gpus_used"] == 64
    assert idle["weight_sync"] == used["weight_sync"]


def test_fp8_scales_ride_the_misc_path(catalog):
    # Qwen3-30B-A3B (48 layers, 128 experts, QK-Norm): 48 x (q, k, v, o, q and k norms, 2 norms,
    # router) + embedding, head, final norm = 435 misc tensors in BF16; in FP8 every one of its
    # 48 x (8 + 1 + 3 x 128) + 3 = 18,867 weight tensors adds a _scale_inv sibling (482 and 18,914
    # when a dense MLP sat beside the experts and the QK norms were not counted)
    from ipd_cli.engine.rl import estimate_weight_sync

    kw = dict(transport="nccl-reshard", trainer_gpus=16, inference_gpus=16, instance_gpus=2, instance_tp=2)
    bf16 = estimate_weight_sync(catalog, "h100-sxm", "qwen3-30b-a3b", **kw)
    fp8 = estimate_weight_sync(catalog, "h100-sxm", "qwen3-30b-a3b", wire="fp8", training="fp8", **kw)
    per_tensor = catalog.rl.sync_stacks["nemo-rl"].tensor_us.value * 1e-6
    assert bf16.terms["misc path engine loader"] == pytest.approx(435 * per_tensor)
    assert fp8.terms["misc path engine loader"] == pytest.approx((435 + 18_867) * per_tensor)


def test_unknown_stack_is_an_input_error(inp):
    with pytest.raises(InputError, match="unknown weight-sync stack 'openrlhf'"):
        weight_sync(inp, NODE, _broadcast(stack="openrlhf"))


def test_more_link_bandwidth_never_slows_an_update(inp):
    for plan in (_p2p(32, 256), _p2p(256, 32)):
        base = weight_sync(inp, NODE, plan).seconds
        for faster in (
            Links(**{**NODE.__dict__, "nic": 100e9}),
            Links(**{**NODE.__dict__, "scale_up": 900e9}),
        ):
            assert weight_sync(inp, faster, plan).seconds <= base


def _phases(gen_s: float, transfer_s: float, load_s: float) -> tuple:
    gen = Generation(gen_s, 1, 1, 1, 1.0, 1.0, False, None, 0.0, 1.0, gen_s, 0.0, 0.0, 0.0, 1.0)
    env = Environment(0.0, 0.0, 1.0, False)
    tr = Trainer(logprob_s=10.0, training_s=50.0)
    sync = WeightSync("rdma-p2p", 1.0, 1.0, 1.0, {}, "sender NIC", transfer_s, load_s, 0.0)
    return gen, env, tr, SyncPhase(sync)


def test_what_each_mode_exposes_by_hand():
    # generation 100 s, training 10 + 50 s, update 8 s of transfer + 2 s of engine loading
    gen, env, tr, sync = _phases(100.0, 8.0, 2.0)
    assert step("disaggregated", gen, env, tr, sync) == Step(100 + 60 + 10, 10)
    assert step("one-step-off", gen, env, tr, sync) == Step(max(100, 60) + 10, 10)
    # async: engines pause for the whole update (100 + 10), the trainer drives only the transfer (60 + 8)
    assert step("async", gen, env, tr, sync) == Step(110, 10)
    # a trainer-bound async step: max(40 + 10, 60 + 8) = 68; 8 s exposed, the 2 s of loading hidden
    gen, env, tr, sync = _phases(40.0, 8.0, 2.0)
    assert step("async", gen, env, tr, sync) == Step(68, 8)


def test_rl_result_says_what_is_exposed(catalog):
    r = rl(catalog, "vera-rubin", "rl-swe-agent", mode="async").rl
    ws = r.weight_sync
    assert ws.exposed_s + ws.hidden_s == pytest.approx(r.phases.weight_sync_s)
    assert 0 <= ws.exposed_s <= r.phases.weight_sync_s


def test_a_trainer_that_cannot_hold_the_training_state_is_infeasible(catalog):
    # 10T parameters x 16 bytes = 160 TB; 186 GiB x 0.85 usable = 169.8 GB per GB200: no trainer under
    # 943 GPUs holds it even fully sharded. The plan search's smallest trainer for the SWE step (512
    # sequences of 4,000 + 24,000 + 8,000 = 36,000 tokens) is 1,024 GPUs (tp divides the heads, ep the
    # experts, dp x micro-batches x mbs is the 512 sequences), and the error names one it can run.
    with pytest.raises(
        InfeasibleError, match=r"smallest trainer that can is 1,024 GPUs \(TP.*give `train_gpus` >= 1024"
    ):
        rl(catalog, "blackwell", "rl-swe-agent", model="moe-10t", gen_gpus=384, train_gpus=128)
    ok = rl(catalog, "blackwell", "rl-swe-agent", model="moe-10t", gen_gpus=384, train_gpus=1024).rl
    assert ok.trainer.gpus_used <= 1024 and ok.trainer.memory_bytes_per_gpu <= 186 * 2**30 * 0.85
    with pytest.raises(InfeasibleError, match="give `train_gpus` >= 1024"):
        rl(catalog, "blackwell", "rl-swe-agent", model="moe-10t", gen_gpus=384, train_gpus=1023)
    # --split auto offers only splits whose trainer holds it: 1,024 + one rollout replica at least, of
    # any candidate size: the smallest is one rack, 72 GPUs. (It named 1,240: 1,024 + the replica with
    # the most tokens/s per GPU, three racks, 216 GPUs, the only size the split search tried.)
    with pytest.raises(InfeasibleError, match=r"replicas of 72 GPUs at least.*give `gpus` >= 1096"):
        rl(catalog, "blackwell", "rl-swe-agent", model="moe-10t", gpus=1000)
    r = rl(catalog, "blackwell", "rl-swe-agent", model="moe-10t", gpus=1096).rl
    assert (r.gen_gpus, r.train_gpus, r.instance_gpus) == (72, 1024, 72)
    r = rl(catalog, "blackwell", "rl-swe-agent-10t").rl
    assert r.train_gpus >= 1024 and r.trainer_memory.min_train_gpus == 1024
    assert r.trainer_memory.bytes_per_gpu == pytest.approx(160e12 / r.train_gpus)


def test_colocated_training_state_waits_in_host_memory(catalog):
    # colocated on 1,024 GB200: HBM holds the state (the smallest trainer); while rollouts run it waits
    # in host memory: 160 TB / 1,024 = 156.25 GB per GPU against 17,280 GB / 72 = 240 GB per GPU
    r = rl(catalog, "blackwell", "rl-swe-agent", model="moe-10t", mode="colocated", gpus=1024).rl
    m = r.trainer_memory
    assert m.location_during_rollouts == "host memory"
    assert m.host_bytes_per_gpu == pytest.approx(156.25e9) and m.host_capacity_bytes_per_gpu == pytest.approx(
        240e9
    )
    # with 1 TB of host memory per rack (13.9 GB per GPU) it needs 160e12 / 13.89e9 = 11,520 GPUs
    small = catalog.with_overrides(["systems.gb200-nvl72.host_memory_gb=1000"])
    with pytest.raises(InfeasibleError, match="host memory.*give `gpus` >= 11520"):
        rl(small, "blackwell", "rl-swe-agent", model="moe-10t", mode="colocated", gpus=1024)


def test_rl_energy_counts_every_generated_rollout(catalog):
    # keep 1 in 2 rollouts: energy per step is GPU-hours x kW per GPU x PUE whatever is kept, and
    # rollouts per kWh counts the generated ones (2 x the kept samples)
    half = catalog.with_overrides(["workload.keep_fraction=0.5"])
    r = rl(half, "vera-rubin", "rl-swe-agent").rl
    kw = catalog.system("vera-rubin").power_kw.value / 72
    assert r.energy_kwh_per_step == pytest.approx(r.gpu_hours_per_step * kw * catalog.economics.pue.value)
    kept = r.samples_per_s * r.step_seconds
    assert r.rollouts_per_kwh * r.energy_kwh_per_step == pytest.approx(2 * kept)


def test_lifecycle_rl_energy_does_not_shrink_with_the_keep_fraction(catalog):
    # the lifecycle once divided kept samples by rollouts per kWh: with keep 0.5 it reported half
    # the RL energy. Post-training MWh = energy per step x 1,200 steps a year / 1,000, over the 0.9
    # goodput a whole run keeps (efficiency.training_goodput; the 10T RL runs one-step-off: phi 1),
    # each step with its share of the evaluations and checkpoints (their GPUs draw power too).
    w = catalog.workloads["rl-swe-agent-10t"].model_copy(update={"keep_fraction": 0.5})
    half = dataclasses.replace(catalog, workloads={**catalog.workloads, "rl-swe-agent-10t": w})
    s = compare(half, ["vera-rubin"]).systems[0]
    energy = s.intelligence_per_dollar.energy_breakdown_mwh.post_training
    periodic = 1 + s.rl.run.periodic_s_per_step / s.rl.step_seconds
    assert energy == pytest.approx(s.rl.energy_kwh_per_step * 1200 / 1000 / 0.9 * periodic)


def test_rl_cli_names_the_transport_and_refuses_an_infeasible_trainer():
    r = run_cli("rl", "--hardware", "vera-rubin", "--transport", "rdma-p2p", "--format", "json")
    assert r.code == 0, r.stderr
    ws = r.json()["rl"]["weight_sync"]
    assert ws["transport"] == "rdma-p2p" and ws["bytes_moved"] > 0 and ws["bound"]
    bad = run_cli("rl", "--hardware", "vera-rubin", "--transport", "pigeon")
    assert bad.code == 2 and "unknown transport" in bad.stderr
    r = run_cli(
        "rl", "--hardware", "blackwell", "--model", "moe-10t", "--gen-gpus", "384", "--train-gpus", "128"
    )
    assert r.code == 1 and "--train-gpus >= 1024" in r.stderr and r.stdout == ""


def test_rl_cli_takes_the_sync_stack_from_the_workload():
    # --set workload.sync_stack picks the framework; its per-tensor cost shows in the inputs with
    # its --set path, and a stack outside the catalog is a usage error
    r = run_cli("rl", "--hardware", "vera-rubin", "--set", "workload.sync_stack=verl", "--format", "json")
    assert r.code == 0, r.stderr
    rows = {a["name"]: a for a in r.json()["assumptions"]}
    assert (
        rows["weight-sync stack"]["value"] == "verl"
        and rows["weight-sync stack"]["path"] == "workload.sync_stack"
    )
    assert rows["per-tensor software (verl)"]["path"] == "rl.sync_stacks.verl.tensor_us"
    bad = run_cli("rl", "--hardware", "vera-rubin", "--set", "workload.sync_stack=pigeon")
    assert bad.code == 2 and "sync_stack" in bad.stderr


def test_sync_links_read_a_system_fabric_before_the_accelerator_nic(catalog):
    # Jean Zay declares its Omni-Path fabric (4 x 100 Gb/s per 8 GPUs); the DGX A100 node falls back
    # to the accelerator's one 200 Gb/s HDR NIC per GPU
    assert sync_links(Inputs(catalog), "a100-jean-zay", "a100-sxm", 8).nic == pytest.approx(50e9 / 8)
    assert sync_links(Inputs(catalog), "a100-sxm", "a100-sxm", 8).nic == pytest.approx(200e9 / 8)


@pytest.mark.parametrize(
    ("model", "tensors", "misc"),
    [
        # 32 x (q, k, v, o, 2 norms, gate, up, down) + embedding, head, final norm: the 291 entries
        # of Llama 3.1 8B's checkpoint index
        ("llama-3.1-8b", 32 * 9 + 3, 32 * 9 + 3),
        # MLA (q_a, its norm, q_b, kv_a, its norm, kv_b, o) + 2 norms on 61 layers, 3 dense FFNs,
        # 58 routers (weight and correction bias) with 257 experts (1 shared) of 3 matrices: the
        # 45,395 entries of its checkpoint index without the MTP layer; misc: all but 58 x 256 x 3
        ("deepseek-v3", 61 * 9 + 3 * 3 + 58 * (2 + 257 * 3) + 3, 61 * 9 + 3 * 3 + 58 * (2 + 3) + 3),
        # QK-Norm: 94 x (q, k, v, o, q and k norms, 2 norms) and 94 routers of 128 experts
        ("qwen3-235b-a22b", 94 * 8 + 94 * (1 + 128 * 3) + 3, 94 * 8 + 94 + 3),
        # experts of 2 matrices (no gate) on 48 of 108 layers, 512 routed and 1 shared
        # (each router a weight and an e_score_correction_bias, as DeepSeek-V3's)
        ("nemotron-3-ultra", 108 * 6 + 60 * 2 + 48 * (2 + 513 * 2) + 3, 108 * 6 + 60 * 2 + 48 * 4 + 3),
        # Qwen2.5: biases on q, k, v: 28 x (q, k, v, their biases, o, 2 norms, 3 FFN) + 3, the 339
        # entries of Qwen2.5-7B's checkpoint index (255 before)
        ("qwen2.5-math-7b", 28 * 12 + 3, 28 * 12 + 3),
        # gpt-oss: q, k, v, o with biases, sinks, 2 norms, router weight and bias, and each layer's
        # experts fused in gate_up_proj, down_proj and their biases: 36 x 17 + 3 (14,079 before)
        ("gpt-oss-120b", 36 * 17 + 3, 36 * 13 + 3),
    ],
)
def test_weight_tensors_count_the_architecture(catalog, model, tensors, misc):
    # experts were counted on every layer at 3 matrices, a dense MLP beside them: Nemotron 3 Ultra
    # 166,970 tensors, DeepSeek-V3 47,460
    from ipd_cli.engine import formulas as f
    from ipd_cli.engine.rl.estimate import weight_tensor_counts

    n, experts = weight_tensor_counts(catalog.model(model))
    assert n == tensors
    assert f.misc_tensors(n, experts, False) == misc


def test_the_rl_table_shows_the_weight_sync_terms():
    # the table stopped at `rl.weight_sync` (transport ... hidden_s) while JSON and CSV carried its
    # terms: `bound` and `transfer_s` could not be matched to anything (a user review)
    r = run_cli(
        "rl", "--hardware", "h100", "--transport", "nccl-broadcast", "-f", "table", env={"COLUMNS": "150"}
    )
    assert r.code == 0, r.stderr
    section = r.stdout.split("rl.weight_sync.terms_s", 1)[1].split("└", 1)[0]
    for term in ("sender NIC", "gather on the senders", "per-tensor software", "fixed latency"):
        assert term in section, term
    assert "gather on the senders + per-tensor software" in r.stdout  # the bound: the chain is longer


def test_receivers_quantise_the_fullest_gpus_weights(catalog):
    # a review: an FP8 replica fed BF16 weights changes precision on every receiving GPU, and the
    # fullest one binds: its share of the dense copies and of the routed experts (DeepSeek-V3 on a
    # GB200 DEP72 EPLB replica: 5 slots of the 256 experts' weights, not 256 / 72 = 3.56), not the
    # instance's bytes over its paid GPUs; each weight is read in BF16 and written in FP8 (1 + 1 / 2
    # of its BF16 bytes)
    from ipd_cli.engine import serving as sv
    from ipd_cli.engine.rl.estimate import sync_plan
    from ipd_cli.engine.serving.context import weight_split

    ctx = sv.serving_context(catalog, "gb200-nvl72", "deepseek-v3")
    inst = sv.serving_instance(ctx, precision="fp8", instance_gpus=72)
    plan = sync_plan(
        ctx.inp, ctx.model, inst, transport="nccl-reshard", wire="bf16", training="bf16",
        trainer_gpus=64, inference_gpus=72, colocated=False,
    )  # fmt: skip
    dense, expert, _ = weight_split(ctx.model, 2.0)
    held = inst.experts_on_fullest_gpu
    assert (inst.configuration, held) == ("DEP72 EPLB", 5 / 256)
    fullest = dense * inst.dense_replicas / inst.instance_gpus + expert * held
    assert plan.quantize_bytes_per_gpu == pytest.approx(fullest * 1.5, rel=1e-12)


def test_an_updates_composition_rebuilds_its_transfer_and_load_from_its_terms():
    # an explain review: the weight-sync row listed its terms but not how they add up. nccl-reshard
    # (GB200, rl-swe-agent): the longest of the four link bounds or the quantisation, then the misc
    # path's broadcast; its engine loader after. checkpoint-engine (pipelined): the longest of the
    # link bounds and the quantisation, the per-tensor software beside it, its excess after
    links = ("receiver NIC", "receiver scale-up", "sender NIC", "sender scale-up")
    ws = run_cli("rl", "--hardware", "gb200", "--workload", "rl-swe-agent", "-f", "json").json()["rl"][
        "weight_sync"
    ]
    t = ws["terms_s"]
    assert ws["composition"].startswith("transfer_s = max(wire, quantisation) + misc path broadcast")
    wire = max(t[k] for k in links)
    assert ws["transfer_s"] == max(wire, t["quantisation"]) + t["misc path broadcast"]
    assert ws["load_s"] == t["misc path engine loader"]
    ws = run_cli(
        "rl", "--hardware", "gb200", "--workload", "rl-math-reasoning", "--transport", "checkpoint-engine",
        "-f", "json",
    ).json()["rl"]["weight_sync"]  # fmt: skip
    t = ws["terms_s"]
    assert ws["composition"].startswith("transfer_s = max(gather, wire, quantisation)")
    wire = max(v for k, v in t.items() if k not in ("per-tensor software", "quantisation", "fixed latency"))
    assert ws["transfer_s"] == max(wire, t["quantisation"])
    assert ws["load_s"] == pytest.approx(max(t["per-tensor software"], ws["transfer_s"]) - ws["transfer_s"])
