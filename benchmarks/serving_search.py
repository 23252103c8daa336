"""Speed of the serving deployment search (issue 11 target: a full DeepSeek-R1 frontier on GB200 NVL72
in well under 100 ms in-process, at least 100,000 configurations per second).

Three timings, each the median of ``runs`` (default 9) in one process after a warm-up call (and
a last line with the process CPU time of each, the median too: on a shared machine the wall time
also counts the other processes' turns):

* the search alone: read the catalog inputs, enumerate and evaluate every configuration
  (instance size x layout x EPLB x KV precision x batch per rank x aggregated/disaggregated),
  mask what cannot run, keep the Pareto frontier; configurations per second = its grid size /
  this time;
* the whole ``estimate_serving_curve`` call (the frontier's layouts evaluated again on the finer
  batch ladder, the frontier as result models, named);
* one ``estimate_serving`` at a 50 tokens/s/user target (the search plus the largest batch
  that meets the target for every layout).

    python benchmarks/serving_search.py [runs] [--system gb200-nvl72] [--model deepseek-r1]
"""

from __future__ import annotations

import statistics
import sys
import time


def _arg(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


CPU: list[float] = []  # each timing's median process CPU time, in the order taken


def _median(fn, runs: int) -> tuple[float, object]:
    fn()  # warm-up: imports, first numpy calls
    times, cpu, out = [], [], None
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    CPU.append(statistics.median(cpu))
    return statistics.median(times), out


def main() -> None:
    from ipd_cli import load
    from ipd_cli.engine.serving import estimate_serving, estimate_serving_curve
    from ipd_cli.engine.serving.context import context
    from ipd_cli.engine.serving.estimate import Shape, frontier, search
    from ipd_cli.engine.serving.grid import Pins

    runs = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 9
    system, model = _arg("--system", "gb200-nvl72"), _arg("--model", "deepseek-r1")
    cat = load()

    def grid():
        g = search(context(cat, system, model), Shape(), Pins())
        return g, frontier(g)

    t_search, (g, front) = _median(grid, runs)
    t_curve, curve = _median(lambda: estimate_serving_curve(cat, system, model), runs)
    t_target, point = _median(lambda: estimate_serving(cat, system, model, tokens_per_user_s=50), runs)
    print(f"{model} on {system} ({curve.precision}), median of {runs} runs")
    rate = len(g) / t_search
    searched = f"{len(g):,} configurations in {t_search * 1e3:.1f} ms"
    print(f"  search + frontier: {searched} = {rate:,.0f} configurations/s")
    refined = f"{len(curve.serving)} once refined between the ladder's rungs"
    print(f"  frontier: {len(front)} points ({refined}); estimate_serving_curve {t_curve * 1e3:.1f} ms")
    print(f"  estimate_serving at 50 tok/s/user: {t_target * 1e3:.1f} ms -> {point.serving.configuration}")
    searched_cpu, curve_cpu, target_cpu = (f"{c * 1e3:.1f} ms" for c in CPU)
    print(f"  CPU time: search + frontier {searched_cpu}, curve {curve_cpu}, at 50 tok/s/user {target_cpu}")


if __name__ == "__main__":
    main()
