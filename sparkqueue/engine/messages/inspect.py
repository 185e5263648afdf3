"""Looking at a queue without receiving: its depth (stats), its visible messages (peek), and purge."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ...clock import to_micros
from ...model import PEEK_FIELDS, QueueStats
from ...rules.deduplication import as_given
from ...rules.expr import col, micros, null, when
from ...rules.fairness import judge, tenant_counts
from ...store.registry import QueueRecord
from ...store.statements import Row
from ..conditions import alive, awaiting_dead_letter, claimable, due, is_message
from ..context import QueueContext
from ..fifo import operations as fifo_ops
from .acknowledge import retire_where


def stats(ctx: QueueContext, record: QueueRecord) -> QueueStats:
    """One scan: visible, in flight, delayed, awaiting the dead-letter queue, oldest age; on a
    standard queue each tenant's apart (grouped), to tell the noisy tenants from the quiet."""
    attrs = record.attributes
    now = ctx.now()
    living = alive(now, attrs)
    visible = due(now)
    waiting = awaiting_dead_letter(attrs)
    held = col("receipt_handle").is_not_null()
    counts = {
        "visible": living & visible & ~waiting,
        "in_flight": living & ~visible & held,
        "delayed": living & ~visible & ~held,
        "awaiting": living & visible & waiting,
    }
    oldest: Any = {"oldest_us": when([(living, micros(col("sent_at")))], null("long"))}
    if attrs.fifo:  # without never-delivered duplicates; FIFO queues have no tenants
        row = fifo_ops.counted(ctx, record, counts, oldest)
        noisy: tuple[str, ...] = ()
        quiet = row
    else:
        groups = ctx.tables.aggregate_by(record.location, "group_id", counts, oldest)
        noisy, _ = judge(*tenant_counts(groups), *ctx.tenants.last(record.location))
        row = _summed(list(groups.values()))
        quiet = _summed([found for group, found in groups.items() if group not in noisy])
    return QueueStats(
        visible=row["visible"],
        in_flight=row["in_flight"],
        delayed=row["delayed"],
        oldest_age_seconds=_age(now, row["oldest_us"]),
        awaiting_dead_letter=row["awaiting"],
        noisy_groups=len(noisy),
        quiet_visible=quiet["visible"],
        quiet_in_flight=quiet["in_flight"],
        quiet_delayed=quiet["delayed"],
        quiet_oldest_age_seconds=_age(now, quiet["oldest_us"]),
    )


def _summed(groups: list[Row]) -> dict[str, Any]:
    """Several groups' counts as one: counts added, the least of the oldest."""
    total: dict[str, Any] = {name: 0 for name in ("visible", "in_flight", "delayed", "awaiting")}
    for found in groups:
        for name in total:
            total[name] += found[name]
    total["oldest_us"] = min(
        (found["oldest_us"] for found in groups if found["oldest_us"] is not None), default=None
    )
    return total


def _age(now: datetime, oldest_us: int | None) -> float:
    return max(0.0, (to_micros(now) - oldest_us) / 1e6) if oldest_us is not None else 0.0


def peek(
    ctx: QueueContext, record: QueueRecord, max_messages: int, *, newest: bool = False
) -> list[Row]:
    """Visible messages, oldest first (or, on a standard queue, newest first), read without
    claiming them; on a FIFO queue without never-delivered duplicates."""
    visible = claimable(ctx.now(), record.attributes)
    tables = ctx.tables_for(record)  # says so when the broker cannot serve the queue
    if record.attributes.fifo:
        return fifo_ops.peek(ctx, record, visible, as_given(PEEK_FIELDS), max_messages)
    return tables.select(
        record.location,
        as_given(PEEK_FIELDS),
        visible,
        order_by=["sent_at", "message_id"],
        limit=max_messages,
        descending=newest,
    )


def purge(ctx: QueueContext, record: QueueRecord) -> int:
    """Deletes every message, in flight or not; returns how many (a FIFO queue's never-delivered
    duplicates, which no receiver ever sees, are not counted). A FIFO queue's messages leave
    tombstones, as every FIFO delete does, so their deduplication ids count for the rest of
    their window."""
    tables = ctx.tables_for(record)
    purged = retire_where(ctx, tables, record, is_message(), f"purging {record.name!r}")
    if record.attributes.fifo:
        fifo_ops.drop_duplicates(ctx, record, tables)
    return purged
