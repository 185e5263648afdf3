"""Spare candidates: the claimable rows a receive's read found beyond what it wanted, kept by the
broker for its next receives of the same queue, which then claim at once without a read.

A spare is only a hint, never claimed ahead. The claim's statement names each row as it was read
(`as_read`: no receive since) and claimable now, and the commit's conflict check decides between
claimers, as for rows read a moment earlier: a spare that another broker took or deleted
meanwhile is simply not claimed. A claim that misses some spares drops the rest (someone else is
working there), and a caller whose claim of spares got nothing claims again from a read of the
table (messages/claim.py, rounds/standard.py): no receive comes back empty because of them.

What spares cannot see is a row that became claimable after their read and is older than them:
a visibility timeout or a delay that ran out, another broker's release or visibility change,
this broker's bulk releases and moves. Such a row waits at most SPARE_SECONDS (by the queue's
clock), as the spares age out. Only two things make a row claimable at once, and this broker
drops its spares after either (rounds/operations.py): a visibility change to 0 and a receive with
no visibility timeout; a change to a second or more shows the row after the spares have aged
out. Order on a standard queue is best effort, as on SQS.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timedelta

from ...attributes import QueueAttributes
from ...limits import SPARE_BYTES, SPARE_FACTOR, SPARE_ROWS, SPARE_SECONDS
from ...store.statements import Row

_SPARE_AGE = timedelta(seconds=SPARE_SECONDS)


def spare_room(wanted: int, attrs: QueueAttributes) -> int:
    """How many rows a read for `wanted` asks for, spares included: up to SPARE_FACTOR times
    `wanted`, at most SPARE_ROWS and SPARE_BYTES of the queue's largest messages more; none more
    for a claim larger than SPARE_ROWS, whose spares could never serve another like it."""
    if wanted > SPARE_ROWS:
        return wanted
    extra = min(wanted * (SPARE_FACTOR - 1), SPARE_ROWS, SPARE_BYTES // attrs.max_message_bytes)
    return wanted + extra


class SpareCandidates:
    """Per queue table: the spares of the last read, oldest first, with when it was read; and
    the ids last handed out from them (to tell whether a claim's rows were spares)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[datetime, list[Row]]] = {}
        self._handed: dict[str, frozenset[str]] = {}

    def take(self, location: str, wanted: int, now: datetime) -> list[Row]:
        """The `wanted` oldest spares; none when there are fewer or they were read too long ago
        (then the queue's spares are dropped: the read to come keeps its own)."""
        with self._lock:
            read_at, rows = self._kept.pop(location, (now, []))
            if len(rows) < wanted or not _recent(read_at, now):
                return []
            taken, rest = rows[:wanted], rows[wanted:]
            if rest:
                self._kept[location] = (read_at, rest)
            self._handed[location] = frozenset(row["message_id"] for row in taken)
            return taken

    def keep(self, location: str, rows: Sequence[Row], now: datetime) -> None:
        """The spares of a read at `now` (oldest first); other queues' stale spares go."""
        with self._lock:
            self._handed.pop(location, None)  # the claim to come is of read rows
            for other, (read_at, _) in list(self._kept.items()):
                if not _recent(read_at, now):
                    del self._kept[other]
            if rows:
                self._kept[location] = (now, list(rows))
            else:
                self._kept.pop(location, None)

    def settle(self, location: str, found: Sequence[Row], won: int) -> bool:
        """After a claim of `found`, `won` of them: whether they were spares and some went to
        someone else. Then the queue's other spares are dropped too."""
        with self._lock:
            handed = self._handed.pop(location, frozenset())
            missed = won < len(found) and all(row["message_id"] in handed for row in found)
            if missed:
                self._kept.pop(location, None)
            return missed

    def drop(self, location: str) -> None:
        """Rows may have become claimable that are older than the spares: read again."""
        with self._lock:
            self._kept.pop(location, None)
            self._handed.pop(location, None)


def _recent(read_at: datetime, now: datetime) -> bool:
    return read_at <= now < read_at + _SPARE_AGE
