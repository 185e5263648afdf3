"""How many messages a queue has in flight, approximately, for SQS's in-flight limit.

One gauge per queue table and broker (`QueueContext.in_flight`), shared by every thread and every
`Queue` object, so callers reserve room under one lock and cannot overshoot the limit together. Other processes are seen at
each recount (SQS's own figure is approximate too): every 30 s, and on every receive once the
estimate is within 80% of the limit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ...errors import OverLimit
from ...limits import IN_FLIGHT_LIMITS, IN_FLIGHT_RECOUNT_SECONDS, IN_FLIGHT_RECOUNT_SHARE


class InFlightGauge:
    """An estimate of one queue's in-flight messages plus the claims under way in this process."""

    def __init__(
        self, limit: int, *, fifo: bool = False, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self._fifo = fifo  # at the limit: no room (FIFO), or OverLimit (standard), as in SQS
        self._clock = clock
        self._lock = threading.Lock()
        self._counted: int | None = None  # in flight at the last recount, plus claims since
        self._counted_at = 0.0
        self._reserved = 0  # room granted to claims that have not settled yet

    def reserve(self, wanted: int, recount: Callable[[], int], queue: str = "the queue") -> int:
        """Grants room for up to `wanted` claims: at least one, or at the limit none on a FIFO
        queue and OverLimit on a standard one. The caller must `settle` the grant whether or not
        its claim commits."""
        with self._lock:
            stale = (
                self._counted is None
                or self._clock() - self._counted_at > IN_FLIGHT_RECOUNT_SECONDS
                or self._counted + self._reserved + wanted > self.limit * IN_FLIGHT_RECOUNT_SHARE
            )
            if stale:
                self._counted = recount()
                self._counted_at = self._clock()
            assert self._counted is not None
            room = self.limit - self._counted - self._reserved
            if room <= 0 and self._fifo:
                return 0
            if room <= 0:
                raise OverLimit(
                    f"{queue} has {self.limit} messages in flight, the most allowed; delete or"
                    " release some (change_visibility to 0) before receiving more"
                )
            granted = min(wanted, room)
            self._reserved += granted
            return granted

    def settle(self, granted: int, claimed: int) -> None:
        """Turns a grant into the claims it made (deletes are seen at the next recount)."""
        with self._lock:
            self._reserved -= granted
            if self._counted is not None:
                self._counted += claimed


class InFlightGauges:
    """A broker's gauges, one per queue table, shared by every thread and `Queue` object."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_table: dict[str, InFlightGauge] = {}

    def of(self, location: str, fifo: bool) -> InFlightGauge:
        """The gauge of the queue table at `location`."""
        with self._lock:
            found = self._by_table.get(location)
            if found is None:
                found = self._by_table[location] = InFlightGauge(IN_FLIGHT_LIMITS[fifo], fifo=fifo)
            return found
