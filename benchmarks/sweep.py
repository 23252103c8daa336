"""Speed of a 1,000,000-point sweep (issue 6 target: under 10 s on the 2-core machine).

Runs `ipd sweep` as a user would (a subprocess, CSV streamed to a file) over a 1000 x 1000 grid
(price and PUE) on one system, and also the engine alone (no output) for comparison. Prints
the median of a few runs and points per second.

    python benchmarks/sweep.py [runs] [--metrics all]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POINTS = "--vary", "price_usd_per_gpu_hour=1:10.99:0.01", "--vary", "economics.pue=1:1.999:0.001"


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 3
    metrics = sys.argv[sys.argv.index("--metrics") + 1] if "--metrics" in sys.argv else "headline"
    ipd = shutil.which("ipd") or str(Path(sys.executable).with_name("ipd"))
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "sweep.csv")
        cmd = [
            ipd,
            "sweep",
            "--vary",
            "hardware=vera-rubin",
            *POINTS,
            "--metrics",
            metrics,
            "-o",
            out,
            "--force",
        ]
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
            times.append(time.perf_counter() - t0)
        with open(out) as fh:
            rows = sum(1 for _ in fh) - 1
    med = statistics.median(times)
    print(
        f"ipd sweep, {rows:,} points, CSV to a file ({metrics} metrics): median {med:.2f} s over {runs} runs"
    )
    print(f"  {rows / med:,.0f} points/s (target: 1,000,000 points in < 10 s)")

    import ipd_cli
    from ipd_cli import api

    cat = ipd_cli.load()
    engine = []
    for _ in range(runs):
        t0 = time.perf_counter()
        chunks, total = api.sweep(cat, ["hardware=vera-rubin", *POINTS[1::2]], metrics="all")
        n = sum(len(c["hardware"]) for c in chunks)
        engine.append(time.perf_counter() - t0)
    print(
        f"engine only (all metrics, no output): median {statistics.median(engine):.2f} s, "
        f"{n / statistics.median(engine):,.0f} points/s"
    )


if __name__ == "__main__":
    main()
