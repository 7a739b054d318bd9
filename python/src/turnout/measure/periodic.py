"""A sampler's clock: call ``take`` now, then every ``every_s`` from a
daemon thread of its own, and once more at ``stop`` (so the last sample is
at least as late as the end of what it measures)."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["Periodic"]


class Periodic:
    def __init__(self, take: Callable[[], None], every_s: float, name: str) -> None:
        self.take = take
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Periodic:
        self.take()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.take()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.take()
