"""Shared fixtures: root (through turnout.testpeers), a private state dir;
every test that needs root is a system test."""

from __future__ import annotations

import signal

import pytest

from turnout import testpeers


def pytest_configure(config: pytest.Config) -> None:
    """Started in the background without job control (`cmd &` in a script),
    pytest inherits SIGINT ignored, and so would every command a test stops
    with Ctrl-C (`turnout ctl stats --watch`, a campaign): they would never
    see it. The default action back, so SIGINT reaches them."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # SIGTERM (a timeout's kill, `kill` of the run's process group) ends the
    # run as Ctrl-C does: the test's `finally` and context managers, then
    # every fixture's teardown, run before pytest exits. Its default action
    # ended the process at once and left what the running test had made
    # (the remote tests' namespaces, sshds, hugepages) behind.
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _term_as_interrupt)


def _term_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


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
