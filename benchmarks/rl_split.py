"""Speed of the RL split search (how many GPUs generate, how many train): the part of an RL step
estimate the test suite and `ipd compare` run most.

Timings, each the median of N runs (default 7) in one process after a warm-up run (what the
process keeps between estimates, as the trainer's plan tables, is kept in either):

* per system, one whole ``api.rl`` of the SWE-agent workload (``rl-swe-agent``, the default split
  search) from a fresh set-up: the serving grid, every generation pool's soonest rollout
  configuration and concurrency (``generation.fastest``), the trainer on the rest, the weight
  update, the step; with the steps the search evaluated (``evaluate`` calls, one per pool tried)
  and the split chosen;
* ``api.compare`` of vera-rubin and blackwell on the default scenario (its post-training stage
  runs a split search on each).

Runs against whichever ``ipd_cli`` the interpreter imports, so two checkouts compare by running
it with each one's environment (from a directory outside both).

    python benchmarks/rl_split.py [runs]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

from ipd_cli import api
from ipd_cli.engine.results import RlResult
from ipd_cli.engine.rl import estimate

SYSTEMS = ("vera-rubin", "gb200", "h100", "mi355x")
COMPARED = ["vera-rubin", "blackwell"]


def _median(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm-up: imports, first numpy calls, the process's plan tables
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _counted(fn: Callable[[], RlResult]) -> tuple[RlResult, int]:
    """``fn()`` and how many steps (``estimate.evaluate``) it evaluated."""
    calls = 0
    evaluate = estimate.evaluate

    def counting(*args, **kw):
        nonlocal calls
        calls += 1
        return evaluate(*args, **kw)

    estimate.evaluate = counting
    try:
        return fn(), calls
    finally:
        estimate.evaluate = evaluate


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    cat = api.load()
    total = 0.0
    for hw in SYSTEMS:
        median = _median(lambda hw=hw: api.rl(cat, hw), runs)
        total += median
        result, calls = _counted(lambda hw=hw: api.rl(cat, hw))
        split = f"{result.rl.gen_gpus} + {result.rl.train_gpus} GPUs"
        print(f"{hw:<11} {median * 1e3:8.1f} ms  {calls:4d} steps evaluated  split {split}")
    print(f"{'all':<11} {total * 1e3:8.1f} ms (medians of {runs})")
    median = _median(lambda: api.compare(cat, COMPARED), runs)
    print(f"{'compare':<11} {median * 1e3:8.1f} ms ({' vs '.join(COMPARED)}, median of {runs})")


if __name__ == "__main__":
    main()
