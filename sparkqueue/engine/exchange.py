"""The worker loop's step on a standard queue: delete the batch just finished and claim the next,
in one commit.

Done one after the other, a loop pays two commits per batch (a DELETE, then a claim's UPDATE),
each rebuilding the table's state and planning its own jobs. Here one MERGE carries both: its
source lists the finished messages with the handles they were received with (deleted where the
table still holds those handles) and the next candidates with the handles they will get (claimed
where they are still as read). Its counts settle both halves, so nothing is read back unless a
handle was superseded or another receiver won a candidate first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from pyspark.sql import functions as F

from ..model import Message
from ..rules import handles
from ..rules.handles import HandleRef
from ..store.dml import in_list, target_prefix
from ..store.registry import QueueRecord
from .acknowledge import present
from .claim import candidates, claim_values, count_in_flight, keyed_merge, message_of
from .conditions import claimable
from .context import QueueContext
from .inflight import gauge

_ACK, _CLAIM = "ack", "claim"
_SOURCE = "op string, shard int, message_id string, receipt_handle string, expected_count int"


@dataclass(frozen=True)
class Turn:
    """What one exchange did: the next batch, and which finished messages were not deleted."""

    claimed: list[Message]
    superseded: set[str]  # ids of finished messages whose handle a later receive replaced


def exchange(
    ctx: QueueContext,
    record: QueueRecord,
    finished: list[HandleRef],
    wanted: int,
    visibility_timeout: int | None,
) -> Turn:
    """Deletes `finished` (where their handles still hold) and claims up to `wanted` messages, in
    one transaction retried on conflicts. Standard queues only: a FIFO claim must fail whole."""
    attrs = record.attributes
    if attrs.fifo:
        raise ValueError("exchange is for standard queues; FIFO claims take whole groups")
    seconds = attrs.visibility_timeout if visibility_timeout is None else visibility_timeout
    in_flight = gauge(record.location, attrs.fifo)
    finished = list({ref.message_id: ref for ref in finished}.values())
    acked = {ref.message_id for ref in finished}
    t = target_prefix(record.location)

    def attempt() -> Turn:
        now = ctx.now()
        granted = in_flight.reserve(
            wanted, lambda: count_in_flight(ctx, record, now), f"queue {record.name!r}"
        )
        won: list[str] = []
        try:
            # A finished message whose timeout ran out is visible again: deleted, not claimed.
            found = [
                row for row in candidates(ctx, record, now, granted) if row.message_id not in acked
            ]
            if not found and not finished:
                return Turn([], set())
            token = handles.new_token()
            issued = {
                row.message_id: handles.issue(record.secret, token, row.shard, row.message_id)
                for row in found
            }
            rows = [(_ACK, ref.shard, ref.message_id, ref.handle, None) for ref in finished]
            rows += [
                (_CLAIM, row.shard, row.message_id, issued[row.message_id], row.receive_count)
                for row in found
            ]
            source = ctx.storage.spark.createDataFrame(rows, _SOURCE)
            shards = sorted({row[1] for row in rows})
            op = F.col("s.op")
            still_held = F.col(f"{t}receipt_handle") == F.col("s.receipt_handle")
            as_read = F.col(f"{t}receive_count") == F.col("s.expected_count")
            values = claim_values(now, now + timedelta(seconds=seconds))
            counts = (
                keyed_merge(ctx, record, source, shards)
                .delete((op == _ACK) & still_held)
                .update(
                    {**values, "receipt_handle": F.col("s.receipt_handle")},
                    (op == _CLAIM) & claimable(now, attrs, t) & as_read,
                )
                .execute()
            )
            won = list(issued) if counts.known and counts.updated == len(found) else []
            if found and not won:
                won = _holding(ctx, record, issued)
            superseded: set[str] = set()
            if finished and not (counts.known and counts.deleted == len(finished)):
                ids = [ref.message_id for ref in finished]
                superseded = present(ctx, record, [ref.shard for ref in finished], ids)
        finally:
            in_flight.settle(granted, len(won))
        by_id = {row.message_id: row for row in found}
        return Turn([message_of(by_id[i], issued[i], now) for i in won], superseded)

    return ctx.storage.transact(record.location, attempt, f"exchanging on {record.name!r}")


def _holding(ctx: QueueContext, record: QueueRecord, issued: dict[str, str]) -> list[str]:
    """Which candidates now hold the handles this claim issued (the claims that won)."""
    rows = (
        ctx.read(record)
        .where(
            in_list("message_id", list(issued))
            & F.col("receipt_handle").isin(list(issued.values()))
        )
        .select("message_id")
        .collect()
    )
    return [row.message_id for row in rows]
