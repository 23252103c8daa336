"""The installed `ipd` command, run as a user would: a subprocess from an empty directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

IPD = Path(sys.executable).with_name("ipd")


@pytest.mark.slow  # seconds: two processes, one of them the frontier comparison
@pytest.mark.skipif(not IPD.exists(), reason="the ipd console script is not installed in this environment")
def test_installed_ipd_runs_from_any_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("IPD_CATALOG", "IPD_DEBUG", "PYTHONPATH")}
    proc = subprocess.run(
        [str(IPD), "compare", "vera-rubin", "blackwell", "--format", "json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [s["hardware"] for s in data["systems"]] == ["vera-rubin-nvl72", "gb200-nvl72"]
    # piped stdout without --format gives JSON too (auto), and errors go to stderr only
    proc = subprocess.run(
        [str(IPD), "compare", "nope"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2 and proc.stdout == "" and "unknown hardware 'nope'" in proc.stderr


def test_python_dash_m(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "ipd_cli", "compare", "hopper", "--workload", "pretrain-10t-moe"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["systems"][0]["hardware"] == "h100-sxm"


def test_every_package_is_installed():
    """A folder of ipd_cli with an __init__.py that pyproject.toml does not list is left out of the
    wheel: `pip install .` would give an ipd that fails on the first command that imports it."""
    import tomllib

    root = Path(__file__).resolve().parent.parent
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(root).parts) for p in (root / "ipd_cli").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)
