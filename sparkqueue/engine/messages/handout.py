"""When claimed messages become visible again: their timeout runs from when they are handed out.

SQS: "the visibility timeout begins when Amazon SQS returns a message". A receive here reads its
candidates, then commits one statement and only then returns; the statement writes `visible_at`
before its own end is known. So the timeout counts from a clock reading taken just before the
statement (the candidate read does not count against it), plus what this broker's last claim
statement on the queue took, on the broker's clock. A FakeClock stands still during a statement,
so tests that drive time see exactly the timeout they ask for.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from ...limits import HANDOUT_ALLOWANCE_MAX_SECONDS


class Handouts:
    """A broker's measure, per queue table, of how long its claim statements take."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[str, float] = {}

    def until(self, location: str, began: datetime, seconds: int) -> datetime:
        """When messages a statement starting at `began` claims for `seconds` are visible again
        (a timeout of 0 leaves them visible at once, as SQS)."""
        with self._lock:
            allowance = self._seconds.get(location, 0.0) if seconds else 0.0
        return began + timedelta(seconds=seconds + allowance)

    def took(self, location: str, began: datetime, ended: datetime) -> None:
        """Records a claim statement's duration (bounded: one slow commit must not hide a
        queue's messages for long)."""
        spent = min(max((ended - began).total_seconds(), 0.0), HANDOUT_ALLOWANCE_MAX_SECONDS)
        with self._lock:
            self._seconds[location] = spent
