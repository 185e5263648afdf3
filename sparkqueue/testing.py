"""Helpers for tests that must control time instead of sleeping through visibility timeouts."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

__all__ = ["FakeClock"]


class FakeClock:
    """A broker clock that only moves when told to; safe to share between threads."""

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2026, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("FakeClock needs an aware start datetime")
        self._now = start.astimezone(UTC)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        """Moves time forward and returns the new instant."""
        if seconds < 0:
            raise ValueError("a FakeClock only moves forward")
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now
