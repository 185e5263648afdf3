"""The FIFO parts of send, receive, peek, stats, moves and retiring, on either kind of FIFO table.

A table the native engine numbers (store/native_fifo.py) is served by delta-rs where the broker
has it: sends append in sequence, receives take group prefixes with one DataFusion query. A
row-tracking table (or any FIFO table on a broker without the native engine) is read by Spark
(fifo/spark.py). Either way every read goes through one `FifoSnapshot`: the table at one version, its
never-delivered duplicates judged on those very rows by rules/deduplication.py (in Python, for
both engines) and left out of everything it reads. The rules are the same expressions
(conditions.py) whichever engine renders them.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...model import SentMessage
from ...rules.deduplication import duplicates, sent_answers
from ...rules.expr import Expr, Field, col, null, when
from ...store.native_fifo import FULLEST
from ...store.registry import QueueRecord
from ...store.schema import MESSAGE_COLUMNS
from ...store.statements import Row, Tables
from ..conditions import alive, claimable, in_flight, is_message, not_duplicate, tombstone_values
from ..context import QueueContext

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ...store.native_tables import NativeTables


def send(ctx: QueueContext, record: QueueRecord, rows: list[dict[str, Any]]) -> list[SentMessage]:
    """Writes a FIFO send's rows in entry order, in one commit; returns what each answers (a
    duplicate: the id and sequence number of the message it repeats)."""
    if not ctx.sequenced(record):
        from ..frames.send_df import send_fifo_rows

        return send_fifo_rows(ctx, record, rows)
    from ...store.native_fifo import append_in_sequence, deduplication_history, home_shard

    native = ctx.native_writer(record)
    shards = record.attributes.shards
    placed = [{**row, "shard": home_shard(row["group_id"], shards)} for row in rows]
    what = f"sending to {record.name!r}"
    append_in_sequence(native, record.location, MESSAGE_COLUMNS, placed, what)
    ctx.appended(record)
    sent = {row["message_id"]: row["deduplication_id"] for row in rows}
    history = deduplication_history(native, record.location, sorted(set(sent.values())))
    answers = sent_answers(sent, history)
    return [answers[row["message_id"]] for row in rows]


class FifoSnapshot:
    """A FIFO table at one version, with its never-delivered duplicates judged on those very
    rows: every read of it leaves them out, so no operation filters them on its own."""

    def __init__(self, ctx: QueueContext, record: QueueRecord, *, in_spark: bool = False) -> None:
        """`in_spark`: read by Spark whatever the table (for DataFrame-scale work)."""
        self._record = record
        self._native = None if in_spark else reader(ctx, record)
        if self._native is not None:
            from ...store.native_fifo import deduplication_history

            self._at = self._native.open(record.location)
            history = deduplication_history(self._native, record.location, at=self._at)
            self.duplicates = duplicates(history)
        else:  # Spark reads either kind (the statements after it say who may write)
            from . import spark as spark_fifo

            self._frame = spark_fifo.pinned(ctx, record)
            self.duplicates = spark_fifo.duplicates_in(self._frame)
        self.kept = not_duplicate(self.duplicates)

    def prefixes(
        self,
        columns: Sequence[str],
        *,
        now: datetime,
        ok: Expr,
        order: str,
        limit: int,
        salt: str = "",
    ) -> list[Row]:
        """Up to `limit` rows a receive (`ok`: claimable) or a move may take: whole group
        prefixes of living messages, groups with a message in flight left out, in `order`."""
        if self._native is None:
            from ...store.spark_tables import collect_rows

            chosen = self.deliverable(now=now, ok=ok, order=order, salt=salt, limit=limit)
            return collect_rows(chosen, columns)
        from ...store.native_fifo import group_prefixes

        return group_prefixes(
            self._native,
            self._record.location,
            columns,
            living=alive(now, self._record.attributes) & self.kept,
            ok=ok,
            held=in_flight(now),
            order=order,
            limit=limit,
            salt=salt,
            at=self._at,
        )

    def deliverable(
        self, *, now: datetime, ok: Expr, order: str, salt: str = "", limit: int | None = None
    ) -> DataFrame:
        """`prefixes` as a Spark DataFrame, for claims and moves at DataFrame scale (a snapshot
        read `in_spark`)."""
        from .spark import deliverable

        assert self._native is None, "a DataFrame needs a snapshot read in Spark"
        living = alive(now, self._record.attributes) & self.kept
        return deliverable(
            self._frame,
            living=living,
            ok=ok,
            held=in_flight(now),
            order=order,
            salt=salt,
            limit=limit,
        )

    def aggregate(self, counts: dict[str, Expr], least: dict[str, Expr]) -> Row:
        """`Tables.aggregate` over the messages as receivers see them (`least` values are
        64-bit integers)."""
        kept = self.kept
        counts = {name: kept & condition for name, condition in counts.items()}
        least = {name: when([(kept, value)], null("long")) for name, value in least.items()}
        if self._native is None:
            from ...store.spark_tables import aggregate_frame

            return aggregate_frame(self._frame, counts, least)
        return self._native.aggregate(self._record.location, counts, least, at=self._at)

    def select(
        self, columns: Sequence[Field], where: Expr, *, order_by: Sequence[str], limit: int
    ) -> list[Row]:
        if self._native is None:
            from ...store.spark_exprs import to_column
            from ...store.spark_tables import collect_rows

            chosen = self._frame.where(to_column(where & self.kept)).orderBy(*order_by)
            return collect_rows(chosen.limit(limit), columns)
        return self._native.select(
            self._record.location,
            columns,
            where & self.kept,
            order_by=order_by,
            limit=limit,
            at=self._at,
        )

    def shards(self, where: Expr) -> list[int]:
        """The shards holding rows that meet `where` (the native engine's tables), so a change
        names them literally and conflicts only there."""
        assert self._native is not None, "Spark's changes are keyed by a pinned source"
        from ...store.native_fifo import shards_holding

        return shards_holding(self._native, self._record.location, where, at=self._at)

    def last_sequence(self) -> int | None:
        """The highest sequence number at this version (the native engine's tables): every row
        committed later has a higher one."""
        assert self._native is not None, "Spark's tables are bounded by a pinned source"
        from ...store.native_fifo import last_sequence

        return last_sequence(self._native, self._record.location, at=self._at)


def candidates(
    ctx: QueueContext, record: QueueRecord, now: datetime, wanted: int, columns: Sequence[str]
) -> list[Row]:
    """Up to `wanted` rows a FIFO receive may claim: whole group prefixes (see fifo/spark.py), as many
    of one group as it has first (as SQS), groups of one length in an order of this receive's
    own, so concurrent receivers start on different groups."""
    return FifoSnapshot(ctx, record).prefixes(
        columns,
        now=now,
        ok=claimable(now, record.attributes),
        order=FULLEST,
        limit=wanted,
        salt=secrets.token_hex(16),
    )


def counted(
    ctx: QueueContext, record: QueueRecord, counts: dict[str, Expr], least: dict[str, Expr]
) -> Row:
    """`Tables.aggregate` over a FIFO queue's messages as receivers see them."""
    return FifoSnapshot(ctx, record).aggregate(counts, least)


def peek(
    ctx: QueueContext, record: QueueRecord, where: Expr, columns: Sequence[Field], limit: int
) -> list[Row]:
    """Rows meeting `where`, duplicates left out, in send order."""
    return FifoSnapshot(ctx, record).select(
        columns, where, order_by=["sent_at", "message_id"], limit=limit
    )


def reader(ctx: QueueContext, record: QueueRecord) -> NativeTables | None:
    """The native engine where it reads (and writes) this FIFO queue: a table it numbers, on a
    broker that has it; None where Spark does."""
    if ctx.native is not None and ctx.sequenced(record):
        return ctx.native
    return None


def retire(ctx: QueueContext, record: QueueRecord, rule: Expr, what: str) -> int:
    """Lets go of the FIFO messages meeting `rule` (a purge, retention): each accepted one
    becomes a tombstone, which keeps its deduplication id counting for the rest of its window
    (TOMBSTONE_LIFETIME from its own send). A never-delivered duplicate is never made one: its
    tombstone would outlive its original's and then pass for the accepted send, making a later
    send a duplicate after it was acknowledged; duplicates go by `drop_duplicates` instead.
    Returns how many messages became tombstones.

    The duplicates are judged on one snapshot, and only rows of that snapshot change: natively
    by an UPDATE bounded by its highest sequence number (rows committed later number higher);
    in Spark by spark_fifo.retire's MERGE from that version."""
    native = reader(ctx, record)
    if native is None:
        from . import spark as spark_fifo

        return spark_fifo.retire(ctx, record, rule, tombstone_values(), what)
    location = record.location

    def attempt() -> int:
        snapshot = FifoSnapshot(ctx, record)
        last = snapshot.last_sequence()
        if last is None:
            return 0
        rows = rule & is_message() & (col("sequence_number") <= last) & snapshot.kept
        shards = snapshot.shards(rows)
        if not shards:
            return 0
        return native.change(location, col("shard").isin(shards) & rows, tombstone_values()).changed

    return native.transact(location, attempt, what)


def drop_duplicates(ctx: QueueContext, record: QueueRecord, tables: Tables) -> int:
    """Deletes the never-delivered duplicates of a FIFO table, judged on one snapshot, through
    `tables` (the redrive pass's); returns how many. A row judged a duplicate stays one: only
    rows committed later (numbered higher) could come before it, and none can."""
    found = FifoSnapshot(ctx, record).duplicates
    if not found:
        return 0
    rule = col("message_id").isin(found) & is_message() & col("receipt_handle").is_null()
    return tables.change_where(record.location, rule, f"dropping duplicates from {record.name!r}")
