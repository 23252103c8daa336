"""Shared fixtures: a hermetic environment and the built-in catalog."""

from __future__ import annotations

import pytest

from ipd_cli import load


@pytest.fixture(scope="session")
def _cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("ipd-cache")


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch, _cache_dir):
    # a user's IPD_CATALOG, IPD_DEBUG or catalog cache must not leak into tests
    monkeypatch.delenv("IPD_CATALOG", raising=False)
    monkeypatch.delenv("IPD_DEBUG", raising=False)
    monkeypatch.setenv("IPD_CACHE_DIR", str(_cache_dir))


@pytest.fixture(scope="session")
def catalog():
    return load()
