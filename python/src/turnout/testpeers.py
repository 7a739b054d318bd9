"""The one place where a Python system test decides what a missing peer
means (docs/testing.md; the Rust side is crates/testpeers).

By default a missing peer *skips* the test with the reason. With
``TURNOUT_REQUIRE_PEERS=1`` (set by ``make test``, hence by CI) a peer that
``scripts/setup.sh`` installs (root and namespaces, dpdk-testpmd, Open
vSwitch, Chromium, MLRsearch, the release binaries) *fails* the test: a CI
machine where the setup did not produce it must not go green. Peers the
setup does not provide pass ``installed_by_setup=False`` and always skip.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_ENV = "TURNOUT_REQUIRE_PEERS"


def required() -> bool:
    """Whether missing peers that the setup installs fail the test."""
    return os.environ.get(REQUIRE_ENV) == "1"


def need(ok: object, why: str, *, installed_by_setup: bool = True) -> None:
    """Returns when ``ok`` is truthy; otherwise skips the calling test with
    ``why`` or, when peers are required and the setup installs this one,
    fails it."""
    if ok:
        return
    if installed_by_setup and required():
        pytest.fail(f"{REQUIRE_ENV}=1 and a peer the setup installs is missing: {why}")
    pytest.skip(why)


def need_root() -> None:
    """Root (network namespaces, veths, raw sockets)."""
    need(os.geteuid() == 0, "needs root (network namespaces, veths)")
