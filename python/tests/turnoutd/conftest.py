"""python/tests/turnoutd: system tests of the real turnoutd (see harness.py),
a tree of its own that `make test` runs apart from the rest of python/tests
(docs/testing.md, "Where tests live")."""

import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_configure(config):
    config.addinivalue_line("markers", "system: needs root and real peer software")
    config.addinivalue_line(
        "markers",
        "serial: measures (a loss bound at a set rate, timing) or loads the machine itself: "
        "`make test` runs it alone, after the others (docs/testing.md)",
    )
    # Started in the background without job control, pytest inherits SIGINT
    # ignored, and so would every command a test stops with Ctrl-C: the
    # default action back, so SIGINT reaches them.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
