"""Shared fixtures: a hermetic environment and the built-in catalog."""

from __future__ import annotations

import os
from collections import OrderedDict

import helpers
import pytest

from ipd_cli import load


@pytest.fixture(scope="session")
def _cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("ipd-cache")


@pytest.fixture(scope="session", autouse=True)
def _shared_runs(tmp_path_factory):
    """The directory the session's workers share (pytest-xdist gives each worker a basetemp under
    one session directory), where run_cli_once keeps its runs."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    helpers.SHARED = shared / "ipd-shared-runs"
    helpers.SHARED.mkdir(exist_ok=True)


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch, _cache_dir):
    # a user's IPD_CATALOG, IPD_DEBUG or catalog cache must not leak into tests
    monkeypatch.delenv("IPD_CATALOG", raising=False)
    monkeypatch.delenv("IPD_DEBUG", raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)  # a table to a pipe is as wide as it needs
    monkeypatch.setenv("IPD_CACHE_DIR", str(_cache_dir))


@pytest.fixture(scope="session")
def catalog():
    return load()


# The deployment grids the session's tests evaluated, kept as `ipd calibrate` keeps them
# (grid.memoized(): a grid is a pure function of its physics, pins and target, never changed after
# evaluation; at most grid.MEMO_GRIDS, the least recently used go first). The README, the --help
# examples and many tests price the same systems and models again (`compare vera-rubin blackwell`
# alone a dozen times); each worker evaluates such a grid once. A test that checks what is
# evaluated, or that two evaluations agree, is marked `fresh_grids` and runs without it.
_GRIDS: OrderedDict = OrderedDict()


@pytest.fixture(autouse=True)
def _shared_grids(request):
    from ipd_cli.engine.serving import grid

    fresh = request.node.get_closest_marker("fresh_grids") is not None
    token = grid._MEMO.set(None if fresh else _GRIDS)
    yield
    grid._MEMO.reset(token)
