"""tests/turnoutd: system tests of the real turnoutd (see harness.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_configure(config):
    config.addinivalue_line("markers", "system: needs root and real peer software")
