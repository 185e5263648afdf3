"""The endpoint's memory of which queues exist, so a lookup (GetQueueUrl, and the first step of
every action) costs a dictionary read instead of a registry and table check.

A queue found is trusted for `ttl` seconds, then asked about again. The endpoint's own
CreateQueue and DeleteQueue update the memory at once; a queue another process deletes is
forgotten when its entry runs out (and at once when an action on it finds it gone), so it is
served from memory for at most `ttl` seconds, the same window in which the broker's own registry
cache still shows it. A name no queue has is never remembered: a queue created elsewhere is
found on its first lookup.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

Found = TypeVar("Found")


class Lookups(Generic[Found]):
    """name -> what `fetch` found for it, kept for `ttl` seconds (`now` is a monotonic clock)."""

    def __init__(
        self,
        fetch: Callable[[str], Found | None],
        ttl: float,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._ttl = ttl
        self._now = now
        self._lock = threading.Lock()
        self._found: dict[str, tuple[Found, float]] = {}
        self._forgotten = 0  # how many times anything was forgotten: a fetch from before is stale

    def get(self, name: str) -> Found | None:
        """What `name` names: from memory while fresh, else fetched (and remembered if found)."""
        with self._lock:
            entry = self._found.get(name)
            if entry is not None and self._now() < entry[1]:
                return entry[0]
            forgotten = self._forgotten
        found = self._fetch(name)  # outside the lock: one slow lookup does not stall the others
        with self._lock:
            if found is None:
                self._found.pop(name, None)
            elif forgotten == self._forgotten:  # no delete came while fetching: still true
                self._found[name] = (found, self._now() + self._ttl)
        return found

    def remember(self, name: str, found: Found) -> None:
        with self._lock:
            self._found[name] = (found, self._now() + self._ttl)

    def forget(self, name: str | None = None) -> None:
        """Drops `name` (every name when None: something named is gone, but which is unknown)."""
        with self._lock:
            self._forgotten += 1
            if name is None:
                self._found.clear()
            else:
                self._found.pop(name, None)
