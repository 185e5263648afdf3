"""Deleting received messages by receipt handle, one or a batch (a whole DataFrame of them:
acknowledge_df.py).

Only a row that still holds the given handle is deleted (FIFO: turned into a deduplication
tombstone); a handle superseded by a later receive or a release deletes nothing.
"""

from __future__ import annotations

from ..rules.expr import col
from ..rules.handles import HandleRef
from ..store.registry import QueueRecord
from .conditions import retire
from .context import QueueContext


def delete_refs(ctx: QueueContext, record: QueueRecord, refs: list[HandleRef]) -> set[str]:
    """Deletes the rows that still hold these handles (a DELETE on literal shards, ids and
    handles: no join); returns the ids still present, whose handles were superseded. When the
    commit says it took every one, nothing is read back."""
    shards = [ref.shard for ref in refs]
    ids = [ref.message_id for ref in refs]
    rows = (
        col("shard").isin(shards)
        & col("message_id").isin(ids)
        & col("receipt_handle").isin([ref.handle for ref in refs])
    )
    tables = ctx.tables_for(record)
    counts = tables.transact(
        record.location,
        lambda: tables.change(record.location, rows, retire(record.attributes)),
        f"deleting from {record.name!r}",
    )
    if counts.all_of(len(set(ids))):
        return set()
    return present(ctx, record, shards, ids)


def present(ctx: QueueContext, record: QueueRecord, shards: list[int], ids: list[str]) -> set[str]:
    """Which of these messages are still in the queue (not deleted, not moved)."""
    rows = ctx.tables_for(record).select(
        record.location, ["message_id"], col("shard").isin(shards) & col("message_id").isin(ids)
    )
    return {row.message_id for row in rows}
