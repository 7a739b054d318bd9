"""Shared fixtures: root (through turnout.testpeers), a private state dir;
every test that needs root is a system test."""

from __future__ import annotations

import pytest

from turnout import testpeers


@pytest.fixture(autouse=True)
def _private_state_dir(tmp_path, monkeypatch):
    """Each test gets its own testbed state dir, so tests never clean up each
    other's (or a real run's) objects."""
    monkeypatch.setenv("TURNOUT_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture
def _root():
    testpeers.need_root()


#: Needs root: skips without it, fails under TURNOUT_REQUIRE_PEERS=1.
needs_root = pytest.mark.usefixtures("_root")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs root (`needs_root`) is a system test: it gets the
    `system` marker before `-m` selects (docs/testing.md)."""
    for item in items:
        if "_root" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.system)
