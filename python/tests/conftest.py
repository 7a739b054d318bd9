"""Shared fixtures: root detection, a private state dir."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _private_state_dir(tmp_path, monkeypatch):
    """Each test gets its own testbed state dir, so tests never clean up each
    other's (or a real run's) objects."""
    monkeypatch.setenv("TURNOUT_STATE_DIR", str(tmp_path / "state"))


needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root (network namespaces, veths)"
)
