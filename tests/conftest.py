"""Shared fixtures: a hermetic environment and the built-in catalog."""

from __future__ import annotations

import pytest

from ipd_cli import load


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch):
    # a user's IPD_CATALOG or IPD_DEBUG must not leak into tests
    monkeypatch.delenv("IPD_CATALOG", raising=False)
    monkeypatch.delenv("IPD_DEBUG", raising=False)


@pytest.fixture(scope="session")
def catalog():
    return load()
