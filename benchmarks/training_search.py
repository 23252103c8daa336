"""Speed of the pre-training plan search (issue 12 targets: >= 100,000 plans/s on one core; GPT-3
175B on 1,024 H100 at a global batch of 1,536 x 2,048 tokens, its whole plan space, in under 10 s).

Runs in-process on one core (numpy's element-wise kernels are single-threaded) and prints the
median of N runs (default 7) of:

* the whole GPT-3 grid evaluated exhaustively (no pruning): plans, seconds, plans/s, the best plan;
* the same search with branch and bound (what `ipd train` runs): seconds, plans evaluated;
* the 10T MoE deadline search of `ipd compare vera-rubin blackwell --workload pretrain-10t-moe`
  (whole systems: the fewest GPUs whose best plan meets 30 days, then the fastest plan there);
* the RL trainer's plan table of the 10T SWE-agent step (512 sequences of 36,000 tokens): the best
  plan on every trainer size up to 2,048 GPUs from one branch-and-bound search, which the
  `--split auto` search then looks up (Rubin and GB200).

A plan here is one (tp, cp, pp, vp, ep, mbs, rank order, dp, micro-batches) row; for each, the
search prices every recompute policy (none, selective, full, offload) and picks the least sharding
(ZeRO 0-2, FSDP) that fits, so each row stands for 16 combinations of those two.

    python benchmarks/training_search.py [runs]
"""

from __future__ import annotations

import statistics
import sys
import time

from ipd_cli import load
from ipd_cli.engine import pretraining as pt
from ipd_cli.engine import trainplan as tpn
from ipd_cli.engine.inputs import Inputs
from ipd_cli.engine.trace import Trace


def gpt3_inputs(cat):
    inp = Inputs(cat)
    x = {
        **tpn.model_inputs(inp, cat, "gpt-3-175b"),
        **tpn.hardware_inputs(inp, cat, "h100-sxm", "bf16"),
        **tpn.step_inputs(inp, "bf16"),
        "seq": 2048,
        "tokens": 3e11,
    }
    return tpn.derive({**x, "pins": {}})  # as `ipd train` derives it (no pinned recompute module set)


def timed(fn, runs: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(runs):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    cat = load()
    pins = {"gbs": 1536}

    def whole_grid():
        from ipd_cli.engine import trainstep as ts

        x = gpt3_inputs(cat)
        P = tpn.micro_grid(x, 1024, pins)
        M = tpn.expand(P, x, 1024, pins)
        out = tpn.evaluate(M, tpn.index_terms(ts.micro_terms(P, x), M["row"]), x, pins)
        return len(M["dp"]), int((out["memory_bytes"] <= x["hbm_cap"]).sum())

    seconds, (n, fit) = timed(whole_grid, runs)
    print(
        f"GPT-3 175B, 1,024 H100, GBS 1,536 x 2,048, the whole grid: {n:,} plans ({fit:,} fit) "
        f"in {seconds:.3f} s"
    )
    print(f"  {n / seconds:,.0f} plans/s ({16 * n / seconds:,.0f} recompute x sharding combinations/s)")

    def exhaustive():
        x = gpt3_inputs(cat)
        return tpn.search_fixed(x, 1024, pins, exhaustive=True)

    def pruned():
        x = gpt3_inputs(cat)
        return tpn.search_fixed(x, 1024, pins)

    seconds, s = timed(exhaustive, runs)
    b = tpn.best_row(s)
    print(f"  search without pruning (memory floor applied first): {len(s):,} plans in {seconds:.3f} s")
    print(f"  best: {tpn.plan_name(tpn.plan_of(s, b))}, {s.out['step_s'][b]:.2f} s per step")
    calculon = tpn.parse_plan("tp=4,pp=4,vp=12,dp=64,mbs=3,gbs=1536,recompute=selective")
    c = tpn.search_fixed(gpt3_inputs(cat), 1024, calculon)
    i = tpn.best_row(c)
    print(f"  Calculon's plan: {tpn.plan_name(tpn.plan_of(c, i))}, {c.out['step_s'][i]:.2f} s per step")
    seconds, s = timed(pruned, runs)
    print(f"  branch and bound: {seconds:.3f} s, {len(s):,} plans evaluated")

    def deadline():
        pt._CACHE.clear()
        # each run builds the micro grid (and its placed domains), as a fresh process does
        getattr(tpn, "_GRIDS", {}).clear()
        getattr(tpn, "_PLACED", {}).clear()
        from ipd_cli import compare

        return compare(cat, ["vera-rubin", "blackwell"], "pretrain-10t-moe")

    seconds, r = timed(deadline, max(3, runs // 2))
    gpus = [s.pretraining.gpus for s in r.systems]
    evaluated = [s.pretraining.plans_evaluated for s in r.systems]
    print(
        f"10T MoE, 100T tokens in 30 days, Rubin and GB200 (deadline mode): {seconds:.2f} s, GPUs {gpus}, "
        f"plans evaluated {evaluated}"
    )

    def trainer_sizes(hardware):
        def run():
            getattr(tpn, "_GRIDS", {}).clear()
            getattr(tpn, "_PLACED", {}).clear()
            x, _ = pt.pretraining_inputs(
                cat, hardware, "moe-10t", 512 * 36000.0, gpus=2048, deadline_days=None, precision="bf16",
                mfu=None, sequence_length=36000, pricing="rental", origin="benchmark",
                trace=Trace(cat.sources, record=False),
            )  # fmt: skip
            pins = {"gbs": 512}
            return tpn.search_sizes(tpn.derive({**x, "pins": pins}), 2048, pins)

        return run

    for hardware in ("vera-rubin", "gb200-nvl72"):
        seconds, table = timed(trainer_sizes(hardware), runs)
        print(
            f"RL trainer plans, 10T MoE SWE step on {hardware}, every size to 2,048 GPUs: {seconds:.2f} s, "
            f"{len(table.s):,} plans evaluated, smallest trainer {table.min_gpus:,} GPUs"
        )


if __name__ == "__main__":
    main()
