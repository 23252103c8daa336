"""The installed `ipd` command, run as a user would: a subprocess from an empty directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

IPD = Path(sys.executable).with_name("ipd")


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


def test_every_package_of_the_source_tree_is_installed():
    # `pip install .` installs only the packages pyproject.toml lists: engine/serving was missing
    # (an editable install finds it anyway, so no other test noticed)
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(root).parts) for p in (root / "ipd_cli").rglob("__init__.py")}
    assert found <= listed, found - listed
