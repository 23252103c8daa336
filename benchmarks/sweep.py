"""Speed of a 1,000,000-point sweep (issue 16 target: CSV to a file within 2x the engine's own time).

The sweep: price (1,000 values) x PUE (1,000 values) on Vera Rubin with the frontier-agentic
scenario, headline metrics (intelligence per dollar, pre-training, RL, serving). Each run is a
fresh process (no plan search remembered from a run before), timed from the loaded catalog:

* engine: ``ipd_cli.sweep(...)`` (the checks and the searches, once per system: price and PUE
  re-price the chosen configurations) and every chunk of rows, nothing written;
* CSV: the same, written as CSV to a new file (``ipd sweep -o FILE`` does exactly this), plus
  ``ipd sweep -o FILE`` itself as a user runs it (start-up and catalog load included).

Prints the medians over the runs (at least 7 for the README) and the ratio CSV / engine, and the
engine's time for a sweep whose rows move the serving traffic (1,000 values of
``workload.serving.tasks_per_day``: each row's deployment sized for its traffic, every distinct
traffic of the physics point at once).

    python benchmarks/sweep.py [runs]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

AXES = [
    "hardware=vera-rubin",
    "price_usd_per_gpu_hour=1:10.99:0.01",
    "economics.pue=1:1.999:0.001",
]
TRAFFIC = ["hardware=vera-rubin", "workload.serving.tasks_per_day=1000:1000000:1000"]
CHILD = """
import json, sys, time
from pathlib import Path
import ipd_cli
from ipd_cli.output import stream_rows
from ipd_cli.render import OutputContext
axes, out = json.loads(sys.argv[1]), sys.argv[2]
cat = ipd_cli.load()
t0 = time.perf_counter()
chunks, total = ipd_cli.sweep(cat, axes)
t1 = time.perf_counter()
if out == "-":
    rows = sum(len(c["hardware"]) for c in chunks)
else:
    rows = stream_rows(chunks, "csv", OutputContext(), Path(out))
t2 = time.perf_counter()
print(json.dumps({"search": t1 - t0, "rows": t2 - t1, "total": t2 - t0, "n": rows}))
"""


def child(out: str, axes: list[str] = AXES) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(axes), out], check=True, capture_output=True, text=True
    )
    return json.loads(r.stdout)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 7
    ipd = shutil.which("ipd") or str(Path(sys.executable).with_name("ipd"))
    engine, csv, cli, traffic = [], [], [], []
    with tempfile.TemporaryDirectory() as d:
        for i in range(runs):  # interleaved: the machine's load falls on both alike
            engine.append(child("-"))
            out = os.path.join(d, f"sweep-{i}.csv")
            csv.append(child(out))
            size = os.path.getsize(out)
            os.unlink(out)
            out = os.path.join(d, f"cli-{i}.csv")
            t0 = time.perf_counter()
            subprocess.run([ipd, "sweep", *(f"--vary={a}" for a in AXES), "-o", out], check=True)
            cli.append(time.perf_counter() - t0)
            os.unlink(out)
            traffic.append(child("-", TRAFFIC))

    def med(xs: list[dict], key: str) -> float:
        return statistics.median(x[key] for x in xs)

    n = engine[0]["n"]
    e, c, u = med(engine, "total"), med(csv, "total"), statistics.median(cli)
    searches, rows, written = med(engine, "search"), med(engine, "rows"), med(csv, "rows")
    print(f"1,000,000-point sweep (price x PUE, Vera Rubin, frontier-agentic, headline metrics), {n:,} rows")
    print(f"medians of {runs} runs, each a fresh process, from the loaded catalog:")
    print(f"  engine: {e:.2f} s (checks and searches {searches:.2f} s, rows {rows:.2f} s)")
    print(f"  CSV to a file ({size / 1e6:.0f} MB): {c:.2f} s (rows formatted and written {written:.2f} s)")
    print(f"  ratio CSV / engine: {c / e:.2f} (target <= 2)")
    print(f"  ipd sweep -o FILE, start-up included: {u:.2f} s, {n / u:,.0f} points/s")
    t, ts, tr = med(traffic, "total"), med(traffic, "search"), med(traffic, "rows")
    print("traffic sweep (1,000 values of workload.serving.tasks_per_day, Vera Rubin, each row sized for its")
    print(f"traffic): engine {t:.2f} s (checks and searches {ts:.2f} s, rows {tr:.2f} s)")


if __name__ == "__main__":
    main()
