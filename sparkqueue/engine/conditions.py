"""The row states of a queue table as Spark conditions, shared by receivers and the redrive job.

Each takes a column prefix ("" or Storage.target_prefix) so one rule serves reads and MERGEs.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pyspark.sql import Column
from pyspark.sql import functions as F

from ..attributes import QueueAttributes

MOVE_MARKER_PREFIX = "moving:"
# Tombstones live in this partition: emptied rows of deleted FIFO messages (their deduplication ids
# still count for a while) and of batches the worker loop finished; the redrive job drops them.
TOMBSTONE_SHARD = -1


def is_message(prefix: str = "") -> Column:
    """A message rather than a FIFO deduplication tombstone."""
    return F.col(f"{prefix}shard") != TOMBSTONE_SHARD


def _within_retention(now: datetime, attrs: QueueAttributes, prefix: str) -> Column:
    return F.col(f"{prefix}sent_at") > F.lit(now - timedelta(seconds=attrs.retention_seconds))


def alive(now: datetime, attrs: QueueAttributes, prefix: str = "") -> Column:
    """A message within the retention period, counted from the original send."""
    return is_message(prefix) & _within_retention(now, attrs, prefix)


def past_retention(now: datetime, attrs: QueueAttributes) -> Column:
    """Messages the redrive job removes: retention over and no move in progress."""
    return is_message() & ~_within_retention(now, attrs, "") & ~being_moved()


def spent_tombstone(now: datetime) -> Column:
    """A tombstone whose deduplication window (and grace, see fifo.py) has passed."""
    return (F.col("shard") == TOMBSTONE_SHARD) & due(now)


def due(now: datetime, prefix: str = "") -> Column:
    """Visible now: never hidden, delay over, or visibility timeout expired."""
    return F.col(f"{prefix}visible_at") <= F.lit(now)


def being_moved(prefix: str = "") -> Column:
    """Marked by a move that has not finished (see moves.py); never null."""
    return F.coalesce(F.col(f"{prefix}receipt_handle").startswith(MOVE_MARKER_PREFIX), F.lit(False))


def awaiting_dead_letter(attrs: QueueAttributes, prefix: str = "") -> Column:
    """Messages that used up their receives: only the redrive job may move them on."""
    if attrs.max_receive_count is None:
        return F.lit(False)
    return F.col(f"{prefix}receive_count") >= attrs.max_receive_count


def claimable(now: datetime, attrs: QueueAttributes, prefix: str = "") -> Column:
    """Visible now, within retention, not waiting for the dead-letter queue, not being moved."""
    return (
        due(now, prefix)
        & alive(now, attrs, prefix)
        & ~awaiting_dead_letter(attrs, prefix)
        & ~being_moved(prefix)
    )


def expired_in_flight(now: datetime, prefix: str = "") -> Column:
    """Received, and its visibility timeout has run out: its handle is void once released."""
    return F.col(f"{prefix}receipt_handle").isNotNull() & due(now, prefix) & ~being_moved(prefix)
