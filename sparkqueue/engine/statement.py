"""The one statement a shared round commits on a standard queue (see together.py).

A round retires messages (deletes whose handles still hold), moves the visibility of others (the
changes whose handles still hold), and claims candidates still as they were read, each with its
own caller's visibility timeout. Done one after the other that would be a commit each, every one
rebuilding the table's state and planning its own jobs; here one statement carries them all:
- small rounds: one UPDATE on literal shards and ids. Retired messages become tombstones (the
  emptied row in the tombstone shard, as FIFO deletes leave; the redrive job drops them). An
  UPDATE cannot delete, but it costs less than a MERGE (no source DataFrame to materialize);
- larger rounds: one MERGE whose source lists every row with what it becomes (retired rows are
  deleted): there the join beats the UPDATE's long literal lists (docs/performance.md, "The worker
  loop: small batches by UPDATE").
The statement's counts settle every part, so nothing is read back unless a handle was superseded
or another receiver won a candidate first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from ..clock import to_micros
from ..limits import EXCHANGE_UPDATE_MAX_ROWS
from ..rules import handles
from ..rules.handles import HandleRef
from ..store.counts import Counts
from ..store.dml import in_list
from ..store.registry import QueueRecord
from .claim import claim_values, keyed_merge, still_claimable
from .conditions import claimable
from .context import QueueContext
from .fifo import tombstone_values
from .visibility import extension, new_times, within_ceiling

_RETIRE, _CHANGE, _CLAIM = "retire", "change", "claim"
_SOURCE = (
    "op string, shard int, message_id string, receipt_handle string, expected_count int,"
    " visible_us long"
)


@dataclass(frozen=True)
class RoundChanges:
    """What one attempt of a round writes, and the `now` it was planned at."""

    ctx: QueueContext
    record: QueueRecord
    now: datetime
    retire: list[HandleRef]
    changes: list[tuple[HandleRef, int]]
    found: list[Any]  # candidates as read
    issued: dict[str, str]  # candidate id -> the handle it gets
    claimed_until: dict[str, datetime]  # candidate id -> its visible_at once claimed
    token: str  # the token the issued handles were made with

    @property
    def rows(self) -> int:
        return len(self.retire) + len(self.changes) + len(self.found)

    def commit(self) -> bool:
        """Runs the round's statement; whether its counts say every row was done."""
        if not self.rows:
            return True
        # A MERGE fails when two source rows meet one target row; an UPDATE takes the first kind.
        ids = [ref.message_id for ref in self.retire] + [ref.message_id for ref, _ in self.changes]
        small = self.rows <= EXCHANGE_UPDATE_MAX_ROWS or len(set(ids)) < len(ids)
        counts = self._by_update() if small else self._by_merge()
        return counts.all_of(self.rows)

    def _by_update(self) -> Counts:
        kinds: list[tuple[Column, dict[str, Column]]] = []
        if self.retire:
            retiring = in_list("message_id", [ref.message_id for ref in self.retire]) & in_list(
                "receipt_handle", [ref.handle for ref in self.retire]
            )
            kinds.append((retiring, tombstone_values()))
        if self.changes:
            extending, extended, _ = extension(self.changes, self.now)
            kinds.append((extending, extended))
        if self.found:
            claiming = in_list("message_id", list(self.issued)) & still_claimable(
                self.found, self.now, self.record.attributes
            )
            visible_at = _by_message(self.claimed_until)
            kinds.append((claiming, self._claim_values(visible_at)))
        return self.ctx.storage.change(
            self.record.location,
            in_list("shard", self._shards()) & reduce(Column.__or__, [rows for rows, _ in kinds]),
            ("shard", "message_id"),
            by_kind(kinds),
        )

    def _by_merge(self) -> Counts:
        now = self.now
        source = self.ctx.storage.spark.createDataFrame(self._rows(), _SOURCE)
        t = self.ctx.storage.target_prefix(self.record.location)
        op = F.col("s.op")
        held = F.col(f"{t}receipt_handle") == F.col("s.receipt_handle")
        until = F.timestamp_micros(F.col("s.visible_us"))
        as_read = F.col(f"{t}receive_count") == F.col("s.expected_count")
        claim = {**self._claim_values(until), "receipt_handle": F.col("s.receipt_handle")}
        return (
            keyed_merge(self.ctx, self.record, source, sorted(set(self._shards())))
            .delete((op == _RETIRE) & held)
            .update(
                {"visible_at": until},
                (op == _CHANGE)
                & held
                & (F.col(f"{t}visible_at") > F.lit(now))
                & within_ceiling(until, F.col(f"{t}handle_issued_at")),
            )
            .update(claim, (op == _CLAIM) & claimable(now, self.record.attributes, t) & as_read)
            .execute()
        )

    def _rows(self) -> list[tuple[Any, ...]]:
        """The MERGE's source: each row, what is done to it, and the handle it must (or will)
        hold; a change's and a claim's new visible_at as exact epoch microseconds."""
        until = new_times(self.changes, self.now)
        rows: list[tuple[Any, ...]] = [
            (_RETIRE, ref.shard, ref.message_id, ref.handle, None, None) for ref in self.retire
        ]
        rows += [
            (_CHANGE, ref.shard, ref.message_id, ref.handle, None, to_micros(until[ref.handle]))
            for ref, _ in self.changes
        ]
        rows += [
            (
                _CLAIM,
                row.shard,
                row.message_id,
                self.issued[row.message_id],
                row.receive_count,
                to_micros(self.claimed_until[row.message_id]),
            )
            for row in self.found
        ]
        return rows

    def _shards(self) -> list[int]:
        return (
            [ref.shard for ref in self.retire]
            + [ref.shard for ref, _ in self.changes]
            + [row.shard for row in self.found]
        )

    def _claim_values(self, visible_at: Column) -> dict[str, Column]:
        """What a claimed row is set to: its new handle and visible_at, one more receive."""
        return {
            **claim_values(self.now, self.now),
            "visible_at": visible_at,
            "receipt_handle": handles.issue_column(
                self.record.secret, self.token, F.col("shard"), F.col("message_id")
            ),
        }


def _by_message(until: dict[str, datetime]) -> Column:
    """Each claimed row's visible_at by its id: one literal when every caller gave the same."""
    by_time: dict[datetime, list[str]] = {}
    for message_id, at in until.items():
        by_time.setdefault(at, []).append(message_id)
    times = iter(by_time.items())
    at, _ = next(times)
    chosen = F.lit(at)
    for at, ids in times:
        chosen = F.when(in_list("message_id", ids), F.lit(at)).otherwise(chosen)
    return chosen


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
