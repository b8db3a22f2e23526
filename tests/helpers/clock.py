"""A clock a test moves by hand, injected where the code would read ``time.time``."""

from __future__ import annotations

import time


class FakeClock:
    """UNIX epoch seconds that stand still until ``advance``: no real-time window in a test."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward."""
        self.now += seconds
