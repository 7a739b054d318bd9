"""Where this checkout's Rust binaries are: ``target/<profile>/``.

The profile is ``$TURNOUT_PROFILE``, default ``release`` (what ``make
build`` and ``scripts/setup.sh`` build, what the benches run). ``make
test`` sets ``test-release``: the tests' build (Cargo.toml: release
without LTO), so that the binaries its Python system tests run and the
Rust tests share one compilation (docs/testing.md).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["BIN_DIR", "PROFILE", "REPO", "built", "find"]

REPO = Path(__file__).resolve().parents[3]
#: The cargo profile whose binaries the workbench and the tests run.
PROFILE = os.environ.get("TURNOUT_PROFILE") or "release"
#: Its output directory (cargo's `dev` profile writes to target/debug).
BIN_DIR = REPO / "target" / ("debug" if PROFILE == "dev" else PROFILE)


def built(name: str) -> Path:
    """The path of binary `name` of this checkout's build (it may not exist)."""
    return BIN_DIR / name


def find(name: str) -> str | None:
    """Binary `name`: this checkout's build, else on PATH, else None."""
    b = built(name)
    return str(b) if b.exists() else shutil.which(name)
