"""Long polling without a thread per waiting client spinning on Spark.

A receive that finds nothing and may wait parks on one condition. For each queue, one parked
receive at a time looks at the table, at most every `interval` seconds; the others sleep until it
has looked or until a send through this endpoint wakes them. So a hundred clients long-polling an
empty queue cost one read of its table per interval, and messages that arrive are found at once
(sent here) or within the interval (sent by Spark jobs or other endpoints). Receives that do run
together share the queue's group commits.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from ..limits import LONG_POLL_INTERVAL_SECONDS
from ..model import Message


@dataclass
class _Watch:
    probing: bool = False
    next_probe: float = 0.0


class LongPolls:
    def __init__(self, interval: float = LONG_POLL_INTERVAL_SECONDS) -> None:
        self._interval = interval
        self._changed = threading.Condition()
        self._watches: dict[str, _Watch] = defaultdict(_Watch)
        self._closed = False

    def close(self) -> None:
        """The endpoint closes: waiting receives answer at once with what they have (nothing)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def arrived(self, name: str) -> None:
        """Messages were sent to `name` through this endpoint: waiting receives look now."""
        with self._changed:
            self._watches[name].next_probe = 0.0
            self._changed.notify_all()

    def receive(
        self,
        name: str,
        take: Callable[[], list[Message]],
        wait_seconds: int,
        connected: Callable[[], bool] = lambda: True,
    ) -> list[Message]:
        """What `take` (a receive on the queue `name`) finds, as soon as it finds some, or none
        after `wait_seconds`, or none as soon as the client is gone (`connected`, asked before
        each look: nothing is claimed for a client no longer there to take it)."""
        deadline = time.monotonic() + wait_seconds
        messages = take()
        if messages or wait_seconds == 0:
            return messages
        self._postpone(name)
        while self._turn(name, deadline):
            gone = not connected()
            try:
                messages = [] if gone else take()
            finally:
                self._looked(name, found=bool(messages), looked=not gone)
            if messages or gone:
                return messages
        return []

    def _turn(self, name: str, deadline: float) -> bool:
        """Waits until this receive may look at the queue: True, or False once `deadline` passed
        or the endpoint closes."""
        with self._changed:
            watch = self._watches[name]
            while True:
                now = time.monotonic()
                if now >= deadline or self._closed:
                    return False
                if not watch.probing and now >= watch.next_probe:
                    watch.probing = True
                    return True
                until = deadline if watch.probing else min(deadline, watch.next_probe)
                self._changed.wait(until - now)

    def _postpone(self, name: str) -> None:
        """Somebody just found the queue empty: nobody needs to look for another interval."""
        with self._changed:
            watch = self._watches[name]
            watch.next_probe = max(watch.next_probe, time.monotonic() + self._interval)

    def _looked(self, name: str, *, found: bool, looked: bool = True) -> None:
        """A turn is over. A receive whose client left did not look: the next one may, at once."""
        with self._changed:
            watch = self._watches[name]
            watch.probing = False
            if looked:  # found some: there may be more, let the next one look at once
                watch.next_probe = time.monotonic() + (0.0 if found else self._interval)
            self._changed.notify_all()
