"""Speed of ``ipd calibrate`` and ``ipd validate``: the slowest commands the README and the --help
examples run (issue 16), each a loop of predictions over the validation cases.

Timings, each the median of N runs (default 3), every run in a fresh process (what a process
keeps between estimates, as the pre-training solutions and the trainer's plan tables, would
otherwise make the second run cheaper than a user's): CPU seconds (user + system) and wall
seconds of the command's own work, the catalog loaded and the modules imported before the clock
starts:

* ``validate.calibrate`` on the shipped catalog and cases (``ipd calibrate``), with the number of
  predictions it made (``validate.predictions`` calls; validate makes one per case);
* ``validate.validate`` of the checking split (``ipd validate``).

Runs against whichever ``ipd_cli`` the interpreter imports, so two checkouts compare by running
it with each one's environment (``PYTHONPATH=<tree>``); alternate them (A B B A), the host is
shared.

    python benchmarks/calibrate.py [runs]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

CHILD = """
import json, time
from ipd_cli import api
from ipd_cli import validate as val

what = {what!r}
cat = api.load()
calls = 0
predict = val.predictions

def counting(*args, **kw):
    global calls
    calls += 1
    return predict(*args, **kw)

val.predictions = counting
cpu, wall = time.process_time(), time.perf_counter()
if what == "calibrate":
    val.calibrate(cat)
else:
    val.validate(cat, "checking")
print(json.dumps({{"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall, "calls": calls}}))
"""


def _run(what: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(what=what)], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(runs: int = 3) -> None:
    for what in ("calibrate", "validate"):
        got = [_run(what) for _ in range(runs)]
        cpu = statistics.median(g["cpu"] for g in got)
        wall = statistics.median(g["wall"] for g in got)
        calls = int(statistics.median(g["calls"] for g in got))
        print(f"{what:9s}  cpu {cpu:6.2f} s  wall {wall:6.2f} s  predictions {calls:5d}  (median of {runs})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
