"""FIFO queues in Spark: ordered message groups, one receiver per group at a time, and
deduplication, over either kind of FIFO table.

How the rules map onto Delta:

- Order. A message's sequence number increases with its group's send order. A FIFO table the
  native engine created numbers its rows itself in a `sequence_number` column, and rows enter
  it only through one conflict-checked append (store/native_fifo.py says why that keeps each
  group's order under concurrent producers); Spark's callers hand their rows to it too. Tables
  Spark created before (and Spark-only brokers create: catalog mode, Spark Connect, remote
  roots) turn on Delta row tracking instead: a message's number is its row id, which Delta
  assigns when the send commits: increasing in commit order across producers, and in row order
  within a commit because such a send writes one file per shard, sorted by entry order.
- A message lives in its group's shard (`home_shard`), so a group's messages of one send share
  a file, and claims on groups in different shards touch different files and never conflict.
- One receiver per group. A receive claims, for each group it takes, a prefix that starts at the
  group's head, and only from groups with nothing in flight. Any other claim on the same group
  must change that head row too, so two claims of one group always collide on it: either Delta
  rejects the later commit, or (when the other claim committed before this one's statement
  began) a guard in the claim's UPDATE (`receive`) or MERGE (`receive_df`) finds a claimed row
  changed since it was read and fails the whole statement, which then commits nothing and is
  retried on a fresh read. A group is never half-claimed.
- Deduplication (rules/deduplication.py states the rule; `with_duplicates_flagged` renders it
  over a whole table). A duplicate is never delivered, never counted, and removed by the redrive
  job. Deleting or moving a FIFO message leaves a tombstone (the row, emptied, in shard -1) so
  its id still deduplicates for the rest of the window. Because the check happens when reading,
  two producers sending the same id at the same moment still yield one delivery.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ..attributes import QueueAttributes
from ..limits import DEDUPLICATION_WINDOW
from ..model import SentMessage
from ..rules.deduplication import DEDUPLICATION_COLUMNS, sent_answers
from ..rules.expr import Expr
from ..store.dml import in_list
from ..store.native_fifo import append_in_sequence
from ..store.native_fifo import home_shard as group_shard
from ..store.registry import QueueRecord
from ..store.schema import MESSAGE_COLUMNS
from ..store.spark_exprs import to_column
from ..store.spark_tables import aggregate_frame, collect_rows
from ..store.statements import Row
from ..store.storage import Storage
from .conditions import alive, claimable, in_flight, is_message

if TYPE_CHECKING:
    from ..store.native_tables import NativeTables

ENTRY_ORDER = "_entry"  # a send's own row order, used once to lay its rows out in the file


def numbered_by_row_id(table: DataFrame) -> DataFrame:
    """A row-tracking FIFO table with each row's sequence number: its Delta row id."""
    return table.withColumn("sequence_number", F.col("_metadata.row_id"))


def home_shard(attrs: QueueAttributes) -> Column:
    """The shard a new row is written to: a FIFO message's group's (see the module's notes); a
    standard message's spread by its id."""
    spread_by = F.col("group_id") if attrs.fifo else F.col("message_id")
    return F.pmod(F.xxhash64(spread_by), F.lit(attrs.shards)).cast("int")


def deduplication_column(body: Column, given: Column, attrs: QueueAttributes) -> Column:
    """`send_df`'s deduplication ids: the given column, else (content-based) the body's SHA-256."""
    if attrs.content_based_deduplication:
        return F.coalesce(given, F.sha2(body, 256))
    return given


def in_entry_order(rows: DataFrame) -> DataFrame:
    """One file per shard sorted by the `ENTRY_ORDER` column, so the commit gives row ids in that
    order."""
    return rows.coalesce(1).sortWithinPartitions("shard", ENTRY_ORDER).drop(ENTRY_ORDER)


def with_duplicates_flagged(table: DataFrame) -> DataFrame:
    """Adds `duplicate` and `original_id` (the accepted message it repeats, null for a row a
    move copied in) to a table with sequence numbers: rules/deduplication.py's rule, each send
    replaying its id's short history in sequence order (ties broken by message id)."""
    sent = F.col("moved_from").isNull()
    history = F.collect_list(
        F.when(
            sent, F.struct(F.unix_micros("sent_at").alias("sent"), F.col("message_id").alias("id"))
        )
    ).over(
        Window.partitionBy("deduplication_id")
        .orderBy("sequence_number", "message_id")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    window_us = _micros(DEDUPLICATION_WINDOW)
    accepted = F.aggregate(
        history,
        F.struct(F.lit(None).cast("long").alias("sent"), F.lit(None).cast("string").alias("id")),
        lambda last, row: F.when(
            last["sent"].isNull() | (row["sent"] - last["sent"] >= window_us), row
        ).otherwise(last),
    )["id"]
    return table.withColumn("original_id", F.when(sent, accepted)).withColumn(
        "duplicate",
        sent
        & F.col("deduplication_id").isNotNull()
        & (F.col("original_id") != F.col("message_id")),
    )


def deliverable(table: DataFrame, now: datetime, attrs: QueueAttributes, salt: str) -> DataFrame:
    """What a FIFO receive may claim: group prefixes, ordered so any limit keeps them prefixes.

    Groups come in an order shuffled by `salt`, so concurrent receivers start on different groups.
    """
    group = Window.partitionBy("group_id")
    held = to_column(in_flight(now))
    living = to_column(alive(now, attrs))
    messages = with_duplicates_flagged(table).where(living & ~F.col("duplicate"))
    return (
        messages.withColumns({"_ok": to_column(claimable(now, attrs)), "_held": held.cast("int")})
        .withColumns(
            {
                "_blocked": F.max("_held").over(group) > 0,
                "_stop": F.min(F.when(~F.col("_ok"), F.col("sequence_number"))).over(group),
            }
        )
        .where(
            F.col("_ok")
            & ~F.col("_blocked")
            & (F.col("_stop").isNull() | (F.col("sequence_number") < F.col("_stop")))
        )
        .orderBy(F.xxhash64("group_id", F.lit(salt)), "sequence_number")
        .drop("_ok", "_held", "_blocked", "_stop", "duplicate", "original_id")
    )


def aggregate(table: DataFrame, counts: dict[str, Expr], least: dict[str, Expr]) -> Row:
    """`Tables.aggregate` over a FIFO table's messages as receivers see them: never-delivered
    duplicates left out."""
    messages = with_duplicates_flagged(table).where(~F.col("duplicate"))
    return aggregate_frame(messages, counts, least)


def prefixes(
    table: DataFrame, now: datetime, attrs: QueueAttributes, wanted: int, columns: Sequence[str]
) -> list[Row]:
    """Up to `wanted` deliverable rows (group prefixes, see `deliverable`) as the engine's rows:
    timestamps read as exact microseconds, returned as aware UTC datetimes."""
    salt = secrets.token_hex(16)
    return collect_rows(deliverable(table, now, attrs, salt).limit(wanted), columns)


def originals(table: DataFrame, sent: dict[str, str]) -> dict[str, SentMessage]:
    """For each just-sent message id (mapped to its deduplication id), the accepted message it
    counts as (itself, or the earlier one it repeats), with that one's sequence number."""
    history = (
        table.where(F.col("deduplication_id").isin(set(sent.values())))
        .select(*DEDUPLICATION_COLUMNS)
        .collect()
    )
    return sent_answers(sent, [row.asDict() for row in history])


def append_frame(
    native: NativeTables,
    record: QueueRecord,
    frame: DataFrame,
    what: str,
    *,
    app_id: str | None = None,
) -> int:
    """Rows a Spark caller sends or moves into a table the native engine numbers (`send_df`, a
    move's copy): collected in their `ENTRY_ORDER`, placed in their groups' shards and appended
    in sequence by the native engine, the only writer of new rows there. With `app_id`, once."""
    names = [name for name, _, _ in MESSAGE_COLUMNS]  # every column, read exactly
    rows = collect_rows(frame.orderBy(ENTRY_ORDER, "message_id"), names)
    shards = record.attributes.shards
    placed = [{**row, "shard": group_shard(row["group_id"], shards)} for row in rows]
    if placed:
        append_in_sequence(native, record.location, MESSAGE_COLUMNS, placed, what, app_id=app_id)
    return len(placed)


def drop_duplicates(storage: Storage, location: str, read: Callable[[], DataFrame]) -> int:
    """Deletes duplicates (never delivered, never received) from a FIFO table, which `read`
    gives with sequence numbers; returns how many."""

    def attempt() -> int:
        found = (
            with_duplicates_flagged(read())
            .where(F.col("duplicate") & to_column(is_message()) & F.col("receipt_handle").isNull())
            .select("shard", "message_id")
            .collect()
        )
        if not found:
            return 0
        source = storage.spark.createDataFrame(
            [(row.message_id,) for row in found], "message_id string"
        )
        t = storage.target_prefix(location)
        match = (
            in_list(f"{t}shard", [row.shard for row in found])
            & (F.col(f"{t}message_id") == F.col("s.message_id"))
            & F.col(f"{t}receipt_handle").isNull()
        )
        storage.merge(location, source, match).delete().execute()
        return len(found)

    return storage.transact(location, attempt, f"dropping duplicates from {location}")


def _micros(span: timedelta) -> int:
    return int(span.total_seconds() * 1_000_000)
