"""Receiving: claim visible messages in one optimistic transaction, issuing new receipt handles.

A claim is one UPDATE of the candidates still as they were read, pruned to literal shards; its
count says whether every claim won, else the handles the table then holds say which did. On a FIFO
queue the UPDATE fails whole if any claimed row changed, so that no group is ever half-claimed
(see fifo.py).
"""

from __future__ import annotations

import random
import time
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..attributes import QueueAttributes
from ..clock import from_micros
from ..limits import DEEP_SHARD_ROWS, DEPTH_CHECK_SECONDS
from ..model import Message
from ..rules import handles
from ..store.dml import Merge, in_list
from ..store.registry import QueueRecord
from . import fifo
from .conditions import claimable
from .context import QueueContext
from .inflight import gauge

_COLLECTED_NAMES = ("shard", "message_id", "body", "attributes", "group_id", "deduplication_id",
                    "sequence_number", "receive_count", "attribute_types")  # fmt: skip


def claim(
    ctx: QueueContext, record: QueueRecord, max_messages: int, visibility_timeout: int | None
) -> list[Message]:
    """One claim transaction (retried on conflicts) within the queue's in-flight limit."""
    attrs = record.attributes
    in_flight = gauge(record.location, attrs.fifo)

    def attempt() -> list[Message]:
        now = ctx.now()
        granted = in_flight.reserve(
            max_messages, lambda: count_in_flight(ctx, record, now), f"queue {record.name!r}"
        )
        won: list[str] = []
        try:
            found = candidates(ctx, record, now, granted)
            if not found:
                return []
            token = handles.new_token()
            claims = {
                row.message_id: (
                    row,
                    handles.issue(record.secret, token, row.shard, row.message_id),
                )
                for row in found
            }
            timeout = attrs.visibility_timeout if visibility_timeout is None else visibility_timeout
            began = ctx.now()
            values = claim_values(now, ctx.handouts.until(record.location, began, timeout))
            won = _claim_rows(ctx, record, token, found, now, values)
            ctx.handouts.took(record.location, began, ctx.now())
        finally:
            in_flight.settle(granted, len(won))
        messages = [message_of(claims[i][0], claims[i][1], now) for i in won]
        if attrs.fifo:  # each group's messages in order
            messages.sort(key=lambda m: m.sequence_number or 0)
        else:  # oldest first (ids sort by send time)
            messages.sort(key=lambda m: m.message_id)
        return messages

    return ctx.storage.transact(record.location, attempt, f"receiving from {record.name!r}")


def count_in_flight(ctx: QueueContext, record: QueueRecord, now: datetime) -> int:
    return (
        ctx.storage.read(record.location)
        .where(F.col("receipt_handle").isNotNull() & (F.col("visible_at") > F.lit(now)))
        .count()
    )


def candidates(ctx: QueueContext, record: QueueRecord, now: datetime, wanted: int) -> list[Any]:
    """Visible messages to try, oldest first, preferring one random shard so receivers rarely
    collide (callers of one broker share rounds and never do).

    On a deep queue (one shard held DEEP_SHARD_ROWS more than wanted at the last look of this
    process) only that shard is read, and the read stops at the rows it needs (roughly its
    oldest: files are read in the order they were written): ~0.3 s on a 300,000-message backlog
    against ~0.7-1 s for every visible row. Otherwise one query takes the queue's oldest visible
    rows, which is cheap on a shallow queue.
    """
    attrs = record.attributes
    if attrs.fifo:  # group prefixes, groups in an order of this receive's own
        salt = handles.new_token()
        deliverable = fifo.deliverable(ctx.read(record), now, attrs, salt)
        return deliverable.select(*_collected_columns()).limit(wanted).collect()
    visible = ctx.read(record).where(claimable(now, attrs)).select(*_collected_columns())
    first = random.randrange(attrs.shards)
    in_first = visible.where(F.col("shard") == first)
    if is_deep(record.location):  # the first rows of one shard: its files in write order
        found = in_first.limit(wanted).collect()
        if len(found) < wanted:
            mark_deep(record.location, False)
            others = visible.where(F.col("shard") != first).limit(wanted - len(found)).collect()
            found += others
    else:  # the oldest of the queue; a full answer asks whether one shard would have done
        found = visible.orderBy("message_id").limit(wanted).collect()
        if len(found) == wanted and depth_due(record.location):
            deep = wanted + DEEP_SHARD_ROWS
            mark_deep(record.location, in_first.limit(deep).count() == deep)
    return sorted(found, key=lambda row: row.message_id)  # ids sort by send time: oldest first


# Per queue table: whether this process's last candidate read found enough in one shard, and
# when a shallow read last asked (at most every DEPTH_CHECK_SECONDS: the question costs a job).
_deep: dict[str, bool] = {}
_depth_asked: dict[str, float] = {}


def depth_due(location: str) -> bool:
    """Whether a shallow read should ask again if one shard would do (and notes that it does)."""
    now = time.monotonic()
    if now - _depth_asked.get(location, -DEPTH_CHECK_SECONDS) < DEPTH_CHECK_SECONDS:
        return False
    _depth_asked[location] = now
    return True


def is_deep(location: str) -> bool:
    """Whether one shard of this queue was enough for the last claim (then read it alone)."""
    return _deep.get(location, False)


def mark_deep(location: str, deep: bool) -> None:
    _deep[location] = deep


def _claim_rows(
    ctx: QueueContext,
    record: QueueRecord,
    token: str,
    found: list[Any],
    now: datetime,
    values: dict[str, Column],
) -> list[str]:
    """One UPDATE of the candidates on literal shards and ids (a one-row UPDATE is about half a
    one-row MERGE here). A standard queue skips candidates claimed meanwhile; a FIFO queue fails
    the whole UPDATE if any changed, so that no group is ever half-claimed (see fifo.py). When it
    updated every candidate they are all ours; otherwise the handles the table then holds say
    which claims won."""
    shards = [row.shard for row in found]
    ids = [row.message_id for row in found]
    unchanged = still_claimable(found, now, record.attributes)
    rows = in_list("shard", shards) & in_list("message_id", ids)
    handle = handles.issue_column(record.secret, token, F.col("shard"), F.col("message_id"))
    if record.attributes.fifo:
        new_handle = fifo.unless_stale(unchanged, handle)
    else:
        rows, new_handle = rows & unchanged, handle
    counts = ctx.storage.change(
        record.location, rows, ("shard", "message_id"), {**values, "receipt_handle": new_handle}
    )
    if counts.all_of(len(ids)):
        return ids
    mine = ctx.read(record).where(
        in_list("shard", shards) & in_list("message_id", ids) & (F.col("receipt_handle") == handle)
    )
    return [row.message_id for row in mine.select("message_id").collect()]


def still_claimable(found: list[Any], now: datetime, attrs: QueueAttributes) -> Column:
    """Candidates still as they were read (no receive since) and still claimable now."""
    as_read = F.concat_ws(":", "message_id", F.col("receive_count").cast("string")).isin(
        [f"{row.message_id}:{row.receive_count}" for row in found]
    )
    return as_read & claimable(now, attrs)


def keyed_merge(
    ctx: QueueContext,
    record: QueueRecord,
    source: DataFrame,
    shards: list[int],
    extra: Column | None = None,
) -> Merge:
    """A MERGE keyed by message id and pruned to literal shards, so it conflicts only there."""
    t = ctx.storage.target_prefix(record.location)
    condition = in_list(f"{t}shard", shards) & (F.col(f"{t}message_id") == F.col("s.message_id"))
    if extra is not None:
        condition = condition & extra
    return ctx.storage.merge(record.location, source, condition)


def claim_update(
    merge: Merge, now: datetime, attrs: QueueAttributes, values: dict[str, Column]
) -> Merge:
    """Standard queues skip rows claimed meanwhile; FIFO fails the whole MERGE, so that no group
    is ever half-claimed (see fifo.py)."""
    t = merge.table.prefix
    unchanged = claimable(now, attrs, t) & (F.col(f"{t}receive_count") == F.col("s.expected_count"))
    if not attrs.fifo:
        return merge.update(values, unchanged)
    guarded = {**values, "receipt_handle": fifo.unless_stale(unchanged, values["receipt_handle"])}
    return merge.update(guarded)


def claim_values(now: datetime, visible_at: datetime) -> dict[str, Column]:
    """What a claim writes besides the new handle (columns unqualified: UPDATE and FIFO MERGE
    both resolve them against the target)."""
    return {
        "visible_at": F.lit(visible_at),
        "receive_count": F.col("receive_count") + 1,
        "first_received_at": F.coalesce(F.col("first_received_at"), F.lit(now)),
        "handle_issued_at": F.lit(now),
    }


def _collected_columns() -> list[str | Column]:
    """What the driver fetches of a candidate: timestamps as exact epoch microseconds."""
    return [
        *_COLLECTED_NAMES,
        F.unix_micros("sent_at").alias("sent_at_us"),
        F.unix_micros("first_received_at").alias("first_received_at_us"),
    ]


def message_of(row: Any, receipt_handle: str, now: datetime) -> Message:
    return Message(
        message_id=row.message_id,
        body=row.body,
        attributes=dict(row.attributes or {}),
        receipt_handle=receipt_handle,
        receive_count=row.receive_count + 1,
        sent_at=from_micros(row.sent_at_us),  # type: ignore[arg-type]
        first_received_at=from_micros(row.first_received_at_us) or now,
        group_id=row.group_id,
        deduplication_id=row.deduplication_id,
        sequence_number=row.sequence_number,
        attribute_types=dict(row.attribute_types or {}),
    )
