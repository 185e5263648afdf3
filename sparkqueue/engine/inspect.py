"""Looking at a queue without receiving: its depth (stats), its visible messages (peek), and purge."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..clock import to_micros
from ..model import MESSAGE_FIELDS, QueueStats
from ..store.registry import QueueRecord
from . import fifo
from .conditions import alive, awaiting_dead_letter, claimable, due, is_message
from .context import QueueContext

PEEK_FIELDS = (*(name for name in MESSAGE_FIELDS if name != "receipt_handle"), "moved_from")


def _messages(ctx: QueueContext, record: QueueRecord) -> DataFrame:
    """The queue's messages as receivers see them (FIFO: without never-delivered duplicates)."""
    table = ctx.read(record)
    if record.attributes.fifo:
        table = fifo.with_duplicates_flagged(table).where(~F.col("duplicate"))
    return table


def stats(ctx: QueueContext, record: QueueRecord) -> QueueStats:
    """One scan: visible, in flight, delayed, awaiting the dead-letter queue, oldest age."""
    attrs = record.attributes
    now = ctx.now()
    living = alive(now, attrs)
    visible = due(now)
    waiting = awaiting_dead_letter(attrs)
    count = lambda condition: F.count(F.when(living & condition, 1))  # noqa: E731
    row = (
        _messages(ctx, record)
        .agg(
            count(visible & ~waiting).alias("visible"),
            count(~visible & F.col("receipt_handle").isNotNull()).alias("in_flight"),
            count(~visible & F.col("receipt_handle").isNull()).alias("delayed"),
            count(visible & waiting).alias("awaiting"),
            F.min(F.when(living, F.unix_micros("sent_at"))).alias("oldest_us"),
        )
        .first()
    )
    assert row is not None
    oldest = row["oldest_us"]
    age = max(0.0, (to_micros(now) - oldest) / 1e6) if oldest is not None else 0.0
    return QueueStats(
        visible=row["visible"],
        in_flight=row["in_flight"],
        delayed=row["delayed"],
        oldest_age_seconds=age,
        awaiting_dead_letter=row["awaiting"],
    )


def peek_df(ctx: QueueContext, record: QueueRecord, max_messages: int) -> DataFrame:
    """Visible messages, oldest first, read without claiming them."""
    return (
        _messages(ctx, record)
        .where(claimable(ctx.now(), record.attributes))
        .orderBy("sent_at", "message_id")
        .limit(max_messages)
        .select(*PEEK_FIELDS)
    )


def purge(ctx: QueueContext, record: QueueRecord) -> int:
    """Deletes every message, in flight or not; returns how many. A FIFO queue's messages leave
    tombstones, as every FIFO delete does, so their deduplication ids count for the rest of
    their window."""
    return ctx.storage.change_where(
        record.location,
        is_message(),
        f"purging {record.name!r}",
        values=fifo.retire(record.attributes),
    )
