"""Speed of the RL split search (how many GPUs generate, how many train): the part of an RL step
estimate after its set-up (the serving grid, the trainer's plan table), which the test suite and
`ipd compare ... --workload rl-*` run most.

For each system, the SWE-agent workload (`rl-swe-agent`, the default split search) is set up once;
then the median of N runs (default 7) of the whole split search, each from nothing kept: every
generation pool's soonest rollout configuration and concurrency (``generation.fastest``), the
trainer on the rest, the weight update, the step. Prints the seconds, the pools tried and the
split chosen.

    python benchmarks/rl_split.py [runs]
"""

from __future__ import annotations

import statistics
import sys
import time

from ipd_cli import load
from ipd_cli.catalog.workloads import resolve_workload
from ipd_cli.engine import serving as sv
from ipd_cli.engine.rl.estimate import choose_split, setup
from ipd_cli.engine.rl.workload import resolve_request

SYSTEMS = ("vera-rubin", "gb200", "h100", "mi355x")


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    cat = load()
    _, w, origin = resolve_workload(cat, "rl-swe-agent", {})
    w = resolve_request(w, "auto")
    total = 0.0
    for hw in SYSTEMS:
        s = setup(sv.serving_context(cat, hw, w.model), w, "rental", origin, "auto")
        times = []
        for _ in range(runs):
            s.rollouts.chosen.clear()  # nothing kept from the run before
            s.rollouts.floors.clear()
            s.rollouts.candidates._tables.pop("steps at", None)
            start = time.perf_counter()
            gen, train, _ = choose_split(s, "auto", origin)
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        total += median
        pools = len({k[0] for k in s.rollouts.chosen})
        print(f"{hw:<11} {median * 1e3:8.1f} ms  {pools:4d} pools tried  split {gen} + {train} GPUs")
    print(f"{'all':<11} {total * 1e3:8.1f} ms (medians of {runs})")


if __name__ == "__main__":
    main()
