"""Deleting messages: received ones by receipt handle, one or a batch (a whole DataFrame of them:
frames/acknowledge_df.py), and any that meet a rule (a purge, retention: `retire_where`).

Only a row that still holds the given handle is deleted (FIFO: turned into a deduplication
tombstone); a handle superseded by a later receive or a release deletes nothing.
"""

from __future__ import annotations

from ...rules.expr import Expr, col
from ...rules.handles import HandleRef
from ...store.registry import QueueRecord
from ...store.statements import Tables
from ..conditions import id_range, retire
from ..context import QueueContext
from ..fifo import operations as fifo_ops


def retire_where(
    ctx: QueueContext, tables: Tables, record: QueueRecord, rule: Expr, what: str
) -> int:
    """Lets go of every message meeting `rule`, as its own transaction through `tables`; how
    many. A standard queue deletes them; a FIFO queue leaves tombstones of its accepted sends
    and never of a duplicate (fifo_ops.retire says why)."""
    if record.attributes.fifo:
        return fifo_ops.retire(ctx, record, rule, what)
    return tables.change_where(record.location, rule, what)


def delete_refs(ctx: QueueContext, record: QueueRecord, refs: list[HandleRef]) -> set[str]:
    """Deletes the rows that still hold these handles (a DELETE on literal shards, ids and
    handles: no join); returns the ids still present, whose handles were superseded. When the
    commit says it took every one, nothing is read back."""
    shards = [ref.shard for ref in refs]
    ids = [ref.message_id for ref in refs]
    rows = (
        col("shard").isin(shards)
        & id_range(ids)
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


def stale_beside(ctx: QueueContext, record: QueueRecord, refs: dict[str, HandleRef]) -> list[str]:
    """Of several handles a batch gives for one message, those that are not the one the message
    holds now, when it holds one of them (`delete` of such a handle alone would be refused).
    Read only when a batch names a message twice; a message gone, or holding none of them,
    leaves every handle to the delete itself."""
    by_message: dict[str, list[str]] = {}
    for handle, ref in refs.items():
        by_message.setdefault(ref.message_id, []).append(handle)
    repeated = {message_id: found for message_id, found in by_message.items() if len(found) > 1}
    if not repeated:
        return []
    shards = [refs[handle].shard for found in repeated.values() for handle in found]
    rows = ctx.tables_for(record).select(
        record.location,
        ["message_id", "receipt_handle"],
        col("shard").isin(shards) & col("message_id").isin(list(repeated)),
    )
    held = {row.receipt_handle for row in rows}
    return [
        handle
        for found in repeated.values()
        if not held.isdisjoint(found)
        for handle in found
        if handle not in held
    ]
