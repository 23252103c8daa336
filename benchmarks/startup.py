"""Startup cost of `ipd compare vera-rubin blackwell --format json` against importing its dependencies.

Prints the median wall time of each over N runs (interleaved, so machine noise hits both)
and their ratio. Target (issue 2): ratio <= 1.5.

    python benchmarks/startup.py [runs]
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    ipd = shutil.which("ipd") or str(__import__("pathlib").Path(sys.executable).with_name("ipd"))
    baseline = [sys.executable, "-c", "import typer, pydantic, yaml"]
    command = [ipd, "compare", "vera-rubin", "blackwell", "--format", "json"]
    base_t, ipd_t = [], []
    for _ in range(runs):
        base_t.append(timed(baseline))
        ipd_t.append(timed(command))
    b, i = statistics.median(base_t), statistics.median(ipd_t)
    print(f"import typer, pydantic, yaml : median {b * 1000:7.1f} ms over {runs} runs")
    print(f"ipd compare ... --format json: median {i * 1000:7.1f} ms over {runs} runs")
    print(f"ratio                        : {i / b:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
