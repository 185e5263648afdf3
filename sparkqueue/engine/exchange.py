"""The worker loop's step on a standard queue: settle the batch just finished and claim the next,
in one commit.

Done one after the other, a loop pays two commits per batch (a DELETE, then a claim's UPDATE),
each rebuilding the table's state and planning its own jobs. Here one statement carries both:
- small batches: one UPDATE on literal shards and ids. The finished messages that still hold the
  handles they were received with become tombstones (the emptied row in the tombstone shard, as
  FIFO deletes leave; the redrive job drops them), and the next candidates still as read are
  claimed. An UPDATE cannot delete, but it costs less than a MERGE (no source DataFrame to
  materialize and join);
- larger batches: one MERGE whose source lists the finished messages with their handles (deleted
  where the table still holds them) and the candidates with the handles they will get (claimed
  where still as read): there the join beats the UPDATE's long literal lists.
The statement's counts settle both halves, so nothing is read back unless a handle was superseded
or another receiver won a candidate first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from ..limits import EXCHANGE_UPDATE_MAX_ROWS
from ..model import Message
from ..rules import handles
from ..rules.handles import HandleRef
from ..store.dml import in_list
from ..store.registry import QueueRecord
from .acknowledge import present
from .claim import (
    candidates,
    claim_values,
    count_in_flight,
    keyed_merge,
    message_of,
    still_claimable,
)
from .conditions import claimable
from .context import QueueContext
from .fifo import tombstone_values
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
    """Settles `finished` (where their handles still hold) and claims up to `wanted` messages, in
    one transaction retried on conflicts. Standard queues only: a FIFO claim must fail whole."""
    attrs = record.attributes
    if attrs.fifo:
        raise ValueError("exchange is for standard queues; FIFO claims take whole groups")
    seconds = attrs.visibility_timeout if visibility_timeout is None else visibility_timeout
    in_flight = gauge(record.location, attrs.fifo)
    finished = list({ref.message_id: ref for ref in finished}.values())
    acked = {ref.message_id for ref in finished}

    def attempt() -> Turn:
        now = ctx.now()
        granted = in_flight.reserve(
            wanted, lambda: count_in_flight(ctx, record, now), f"queue {record.name!r}"
        )
        won: list[str] = []
        try:
            # A finished message whose timeout ran out is visible again: finished, not claimed.
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
            claim = {
                **claim_values(now, now + timedelta(seconds=seconds)),
                "receipt_handle": handles.issue_column(
                    record.secret, token, F.col("shard"), F.col("message_id")
                ),
            }
            step = _Step(ctx, record, finished, found, issued, claim, now)
            small = len(finished) + len(found) <= EXCHANGE_UPDATE_MAX_ROWS
            settled = step.by_update() if small else step.by_merge()
            if settled:
                won, superseded = list(issued), set()
            else:  # someone else came first somewhere: the table says who holds what
                won = holding(ctx, record, issued) if found else []
                ids = [ref.message_id for ref in finished]
                shards_of_finished = [ref.shard for ref in finished]
                superseded = present(ctx, record, shards_of_finished, ids) if ids else set()
        finally:
            in_flight.settle(granted, len(won))
        by_id = {row.message_id: row for row in found}
        return Turn([message_of(by_id[i], issued[i], now) for i in won], superseded)

    return ctx.storage.transact(record.location, attempt, f"exchanging on {record.name!r}")


@dataclass(frozen=True)
class _Step:
    """One attempt's statement: the finished messages settled and the candidates claimed."""

    ctx: QueueContext
    record: QueueRecord
    finished: list[HandleRef]
    found: list[Any]
    issued: dict[str, str]  # candidate id -> the handle it gets
    claim: dict[str, Column]  # what a claimed row is set to
    now: datetime

    def by_update(self) -> bool:
        """Retires and claims in one UPDATE; whether its count says every row was done."""
        finished, found = self.finished, self.found
        retiring = in_list("message_id", [ref.message_id for ref in finished]) & in_list(
            "receipt_handle", [ref.handle for ref in finished]
        )
        claiming = in_list("message_id", list(self.issued)) & still_claimable(
            found, self.now, self.record.attributes
        )
        shards = [ref.shard for ref in finished] + [row.shard for row in found]
        counts = self.ctx.storage.change(
            self.record.location,
            in_list("shard", shards) & (retiring | claiming),
            ("shard", "message_id"),
            by_kind([(retiring, tombstone_values()), (claiming, self.claim)]),
        )
        return counts.all_of(len(finished) + len(found))

    def by_merge(self) -> bool:
        """Deletes and claims in one MERGE; whether its counts say every row was done."""
        rows = [(_ACK, ref.shard, ref.message_id, ref.handle, None) for ref in self.finished]
        rows += [
            (_CLAIM, row.shard, row.message_id, self.issued[row.message_id], row.receive_count)
            for row in self.found
        ]
        source = self.ctx.storage.spark.createDataFrame(rows, _SOURCE)
        t = self.ctx.storage.target_prefix(self.record.location)
        op = F.col("s.op")
        still_held = F.col(f"{t}receipt_handle") == F.col("s.receipt_handle")
        as_read = F.col(f"{t}receive_count") == F.col("s.expected_count")
        counts = (
            keyed_merge(self.ctx, self.record, source, sorted({row[1] for row in rows}))
            .delete((op == _ACK) & still_held)
            .update(
                {**self.claim, "receipt_handle": F.col("s.receipt_handle")},
                (op == _CLAIM) & claimable(self.now, self.record.attributes, t) & as_read,
            )
            .execute()
        )
        return (
            counts.known
            and counts.deleted == len(self.finished)
            and counts.updated == len(self.found)
        )


def by_kind(kinds: list[tuple[Column, dict[str, Column]]]) -> dict[str, Column]:
    """One UPDATE's values for several kinds of rows: each column as the first kind whose
    condition the row meets sets it, else unchanged."""
    values: dict[str, Column] = {}
    for name in dict.fromkeys(name for _, sets in kinds for name in sets):
        chosen: Column | None = None
        for condition, sets in kinds:
            value = sets.get(name, F.col(name))
            chosen = F.when(condition, value) if chosen is None else chosen.when(condition, value)
        assert chosen is not None
        values[name] = chosen.otherwise(F.col(name))
    return values


def holding(ctx: QueueContext, record: QueueRecord, issued: dict[str, str]) -> list[str]:
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
