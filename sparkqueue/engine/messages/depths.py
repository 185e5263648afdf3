"""Whether a queue is deep: a broker's memory, per queue table, of whether one shard held enough
for its last claim (then a receive reads that shard's first rows in file order, without sorting
them: messages/claim.py)."""

from __future__ import annotations

import threading
import time

from ...limits import DEPTH_CHECK_SECONDS


class ShardDepths:
    """Per queue table: whether the last candidate read found enough in one shard, and when a
    shallow read last asked (at most every DEPTH_CHECK_SECONDS: the question costs a read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deep: dict[str, bool] = {}
        self._asked: dict[str, float] = {}

    def is_deep(self, location: str) -> bool:
        """Whether one shard of this queue was enough for the last claim (then read it alone)."""
        return self._deep.get(location, False)

    def mark(self, location: str, deep: bool) -> None:
        self._deep[location] = deep

    def due(self, location: str) -> bool:
        """Whether a shallow read should ask again if one shard would do (and notes that it
        does)."""
        now = time.monotonic()
        with self._lock:
            if now - self._asked.get(location, -DEPTH_CHECK_SECONDS) < DEPTH_CHECK_SECONDS:
                return False
            self._asked[location] = now
            return True
