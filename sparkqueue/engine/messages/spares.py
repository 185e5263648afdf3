"""Spare candidates: the claimable rows a receive's read found beyond what it wanted, kept by the
broker for its next receives of the same queue, which then claim at once without a read.

A spare is only a hint. The claim's statement names each row as it was read (`as_read`: no
receive since) and claimable now, and the commit's conflict check decides between claimers, as
for rows read a moment earlier: a spare that another broker took or deleted meanwhile is simply
not claimed. A claim that misses some spares drops the rest (someone else is working there), and
one that got none of them reads the table again at once (messages/claim.py), so a receive never
comes back empty because of them.

What spares cannot see is a row that became claimable after their read and is older than them:
in this broker, a visibility change or a claim with no visibility timeout drops them
(rounds/operations.py); elsewhere (another broker's release or visibility change) they are
outlived within SPARE_SECONDS, by the queue's clock. Order on a standard queue is best effort,
as on SQS.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timedelta

from ...limits import SPARE_BYTES, SPARE_FACTOR, SPARE_ROWS, SPARE_SECONDS
from ...store.statements import Row


def spare_room(wanted: int) -> int:
    """How many rows a read for `wanted` asks for, spares included: none for a claim larger
    than SPARE_ROWS, whose spares could never serve another like it."""
    if wanted > SPARE_ROWS:
        return wanted
    return wanted + min(wanted * (SPARE_FACTOR - 1), SPARE_ROWS)


class SpareCandidates:
    """Per queue table: the spares of the last read, oldest first, with when it was read; and
    the ids last handed out from them (to tell whether a claim's rows were spares)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[datetime, list[Row]]] = {}
        self._handed: dict[str, frozenset[str]] = {}

    def take(self, location: str, wanted: int, now: datetime) -> list[Row]:
        """The `wanted` oldest spares, when there are that many and they are recent; else none
        (and the stale ones go)."""
        with self._lock:
            read_at, rows = self._kept.get(location, (now, []))
            if len(rows) < wanted or not read_at <= now < read_at + timedelta(
                seconds=SPARE_SECONDS
            ):
                self._kept.pop(location, None)
                return []
            taken, rest = rows[:wanted], rows[wanted:]
            if rest:
                self._kept[location] = (read_at, rest)
            else:
                del self._kept[location]
            self._handed[location] = frozenset(row["message_id"] for row in taken)
            return taken

    def keep(self, location: str, rows: Sequence[Row], now: datetime) -> None:
        """The spares of a read at `now` (oldest first), up to SPARE_BYTES of bodies."""
        kept: list[Row] = []
        size = 0
        for row in rows:
            size += len(row["body"] or "")
            if size > SPARE_BYTES:
                break
            kept.append(row)
        with self._lock:
            self._handed.pop(location, None)  # the claim to come is of read rows
            if kept:
                self._kept[location] = (now, kept)
            else:
                self._kept.pop(location, None)

    def settle(self, location: str, found: Sequence[Row], won: int) -> bool:
        """After a claim of `found`, `won` of them: whether they were spares that all went to
        someone else (then read the table again). Spares some of which were missed are dropped."""
        with self._lock:
            handed = self._handed.pop(location, frozenset())
            spared = bool(found) and all(row["message_id"] in handed for row in found)
            if spared and won < len(found):
                self._kept.pop(location, None)
            return spared and not won

    def drop(self, location: str) -> None:
        """Rows may have become claimable that are older than the spares: read again."""
        with self._lock:
            self._kept.pop(location, None)
            self._handed.pop(location, None)
