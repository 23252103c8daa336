"""Shared fixtures: a hermetic environment and the built-in catalog."""

from __future__ import annotations

import os

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
    monkeypatch.setenv("IPD_CACHE_DIR", str(_cache_dir))


@pytest.fixture(scope="session")
def catalog():
    return load()
