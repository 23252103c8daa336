"""Start-up cost of ipd commands against the import floor of their dependencies (issue 16).

Each command runs as a fresh process, N times, interleaved with the floors so that machine noise
hits every row alike; the cost is the child's CPU time (user + system), whose median is steadier
than wall time on a shared machine. Printed: the floors, each command, and its ratio to the
floor it is held to.

Floors (``python -c ...``):

* ``typer, pydantic, yaml``: the literal floor of issue 16 (``import pydantic`` alone does not
  load ``BaseModel``);
* ``+ BaseModel``: adds ``from pydantic import BaseModel``, for commands that must import it
  (every command that reads the validated catalog);
* ``+ numpy``: adds ``import numpy``, which the vectorised deployment and plan searches need
  (``compare`` runs both); numpy alone costs about as much as the literal floor.

A reference row runs a one-command Typer app (three options, no work): Typer 0.2x converts every
option with a pydantic TypeAdapter, a cost that ``import typer`` does not show. Another runs
``ipd hardware list --catalog EMPTY_DIR``: the full path (the Typer app, the catalog validated
from the cache), which ``hardware list`` with no other arguments skips by printing the listing
the cache stores.

Targets: ``compare vera-rubin blackwell -f json`` <= 1.5x, ``--help`` and ``hardware list``
<= 1.2x. Before measuring, the package's bytecode is compiled (as ``pip install`` does; an
environment with PYTHONDONTWRITEBYTECODE would otherwise compile ipd from source on every run)
and the catalog cache is filled in a private temporary directory. ``compare`` is measured twice:
computed (its stored output removed before each run: the searches run) and as the console
script's result cache prints it again (ipd_cli/resultcache.py).

    python benchmarks/startup.py [runs]       # default 15 runs of each
"""

from __future__ import annotations

import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLOOR = "import typer, pydantic, yaml"
FLOORS = {
    "typer, pydantic, yaml": FLOOR,
    "+ BaseModel": FLOOR + "; from pydantic import BaseModel",
    "+ BaseModel + numpy": FLOOR + "; from pydantic import BaseModel; import numpy",
}
# Not a floor, a reference: what Typer itself costs to run one command with three options (Typer
# 0.2x converts every option with a pydantic TypeAdapter), before any of ipd's own work.
TYPER_APP = """
from typing import Annotated
import typer, pydantic, yaml
app, sub = typer.Typer(), typer.Typer()
app.add_typer(sub, name="hardware")
@app.callback()
def root(): pass
@sub.command("list")
def hardware_list(
    fmt: Annotated[str, typer.Option("--format")] = "auto",
    catalog: Annotated[list[str] | None, typer.Option("--catalog")] = None,
    sets: Annotated[list[str] | None, typer.Option("--set")] = None,
): pass
@sub.command("show")
def hardware_show(name: str): pass
app(["hardware", "list"], standalone_mode=False)
"""
FULL_PATH = "ipd hardware list --catalog EMPTY"  # the full path, for reference
# compare computed: its stored output (ipd_cli/resultcache.py) removed before each run, so the
# plan and deployment searches run; the COMMANDS row after it prints the output it stored
COMPUTED = "ipd compare vera-rubin blackwell -f json (computed)"
# command, the floor it is held to, the target ratio
COMMANDS = [
    (["compare", "vera-rubin", "blackwell", "-f", "json"], "+ BaseModel", 1.5),
    (["--help"], "typer, pydantic, yaml", 1.2),
    (["hardware", "list"], "+ BaseModel", 1.2),
]


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds of the child, wall seconds) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    import ipd_cli

    compileall.compile_dir(Path(ipd_cli.__file__).parent, quiet=1)
    ipd = shutil.which("ipd") or str(Path(sys.executable).with_name("ipd"))
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "IPD_CACHE_DIR": cache}
        env.pop("IPD_CATALOG", None)
        jobs = {name: [sys.executable, "-c", code] for name, code in FLOORS.items()}
        jobs["a one-command Typer app (reference)"] = [sys.executable, "-c", TYPER_APP]
        jobs |= {"ipd " + " ".join(args): [ipd, *args] for args, _, _ in COMMANDS}
        empty = Path(cache) / "empty-catalog"
        empty.mkdir()
        jobs[FULL_PATH] = [ipd, "hardware", "list", "--catalog", str(empty)]
        jobs = {COMPUTED: [ipd, *COMMANDS[0][0]], **jobs}
        for cmd in jobs.values():  # warm: the catalog cache, the OS file cache
            run(cmd, env)
        cpu: dict[str, list[float]] = {name: [] for name in jobs}
        wall: dict[str, list[float]] = {name: [] for name in jobs}
        for _ in range(runs):
            for name, cmd in jobs.items():
                if name == COMPUTED:
                    for entry in Path(cache).glob("result-*.json"):
                        entry.unlink()
                c, w = run(cmd, env)
                cpu[name].append(c)
                wall[name].append(w)
    med = {name: statistics.median(v) for name, v in cpu.items()}
    print(f"CPU time (user + sys) of the child, median of {runs} runs; wall median in brackets\n")
    for name in jobs:
        print(f"{name:40s} {med[name] * 1000:7.1f} ms  ({statistics.median(wall[name]) * 1000:6.1f} ms)")
    print()
    reference = med["a one-command Typer app (reference)"] / med["+ BaseModel"]
    print(f"{'a one-command Typer app (reference)':40s} {reference:5.2f}x floor '+ BaseModel'")
    print(f"{FULL_PATH:40s} {med[FULL_PATH] / med['+ BaseModel']:5.2f}x floor '+ BaseModel'")
    numpy_floor = med["+ BaseModel + numpy"]
    literal = med["typer, pydantic, yaml"]
    for args, floor, target in COMMANDS:
        name = "ipd " + " ".join(args)
        ratio = med[name] / med[floor]
        verdict = "met" if ratio <= target else "NOT met"
        stored = " (its stored output)" if args[0] == "compare" else ""
        print(f"{name:40s} {ratio:5.2f}x floor '{floor}' (target <= {target}: {verdict}){stored}")
        if args[0] == "compare":
            computed = med[COMPUTED] / med[floor]
            verdict = "met" if computed <= target else "NOT met"
            print(f"{COMPUTED:40s} {computed:5.2f}x floor '{floor}' (target <= {target}: {verdict})")
            print(f"{'':40s} {med[COMPUTED] / literal:5.2f}x floor 'typer, pydantic, yaml'")
            print(f"{'':40s} {med[COMPUTED] / numpy_floor:5.2f}x floor '+ BaseModel + numpy'")


if __name__ == "__main__":
    main()
