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
- Deduplication: rules/deduplication.py's rule, in Python, over the few rows that share a
  deduplication id, read from the same version as the rows it judges (`pinned`,
  `duplicates_in`; the native engine reads the same rows itself). A duplicate is never
  delivered, never counted, never turned into a tombstone, and removed by the redrive job.
  Deleting, moving, purging or expiring an accepted FIFO message leaves a tombstone (the row,
  emptied, in shard -1) so its id still deduplicates for the rest of the window (`retire`).
  Because the check happens when reading, two producers sending the same id at the same moment
  still yield one delivery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ...attributes import QueueAttributes
from ...model import SentMessage
from ...rules.deduplication import (
    DEDUPLICATION_COLUMNS,
    SCOPE_SEPARATOR,
    duplicates,
    sent_answers,
)
from ...rules.expr import Expr
from ...store.native_fifo import FULLEST, OLDEST, append_in_sequence
from ...store.native_fifo import home_shard as group_shard
from ...store.registry import QueueRecord
from ...store.schema import MESSAGE_COLUMNS
from ...store.spark_exprs import to_column
from ...store.spark_tables import collect_rows
from ..conditions import not_duplicate

if TYPE_CHECKING:
    from ...store.native_tables import NativeTables
    from ..context import QueueContext

ENTRY_ORDER = "_entry"  # a send's own row order, used once to lay its rows out in the file


def home_shard(attrs: QueueAttributes) -> Column:
    """The shard a new row is written to: a FIFO message's group's (see the module's notes); a
    standard message's spread by its id."""
    spread_by = F.col("group_id") if attrs.fifo else F.col("message_id")
    return F.pmod(F.xxhash64(spread_by), F.lit(attrs.shards)).cast("int")


def deduplication_column(
    body: Column, group: Column, given: Column, attrs: QueueAttributes
) -> Column:
    """`send_df`'s deduplication keys: the given id, else (content-based) the body's SHA-256;
    within the group on a queue that deduplicates by group (rules/deduplication.py's key)."""
    if attrs.content_based_deduplication:
        given = F.coalesce(given, F.sha2(body, 256))
    if attrs.deduplicates_in_group:
        return F.concat(group, F.lit(SCOPE_SEPARATOR), given)
    return given


def in_entry_order(rows: DataFrame) -> DataFrame:
    """One file per shard sorted by the `ENTRY_ORDER` column, so the commit gives row ids in that
    order."""
    return rows.coalesce(1).sortWithinPartitions("shard", ENTRY_ORDER).drop(ENTRY_ORDER)


def pinned(ctx: QueueContext, record: QueueRecord) -> DataFrame:
    """The queue's table at its latest version, fixed: every read of the frame sees that very
    version (with each row's sequence number), so duplicates judged on it are judged on the
    rows read."""
    storage = ctx.storage
    return ctx.read(record, version=storage.version(record.location))


def duplicates_in(table: DataFrame) -> list[str]:
    """rules/deduplication.py's duplicates among a FIFO table's rows, judged in Python on the
    few rows that share a deduplication id (only those can be one): the rule both engines read."""
    name = "deduplication_id"
    shared = table.where(F.col(name).isNotNull()).groupBy(name).count().where(F.col("count") > 1)
    history = table.join(shared.select(name), name, "left_semi")
    return duplicates(collect_rows(history, DEDUPLICATION_COLUMNS))


def deliverable(
    table: DataFrame,
    *,
    living: Expr,
    ok: Expr,
    held: Expr,
    order: str,
    salt: str = "",
    limit: int | None = None,
) -> DataFrame:
    """Up to `limit` rows a FIFO receive (or move) may take: among `living` rows, each group with
    no `held` row gives its `ok` rows up to its first row that is not; groups in `order`
    (native_fifo's GROUP_ORDERS), each in sequence order, so the limit keeps them prefixes.
    Spark's rendering of native_fifo.group_prefixes (tests/integration/test_fifo_engines.py
    holds the two alike)."""
    group = Window.partitionBy("group_id")
    ok_column = to_column(ok)
    prefixes = (
        table.where(to_column(living))
        .withColumns({"_ok": ok_column, "_held": to_column(held).cast("int")})
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
        .withColumns(
            {
                "_size": F.count(F.lit(1)).over(group),
                "_head": F.min("sequence_number").over(group),
                "_shuffled": F.sha2(F.concat(F.col("group_id"), F.lit(salt)), 256),
            }
        )
    )
    size = F.col("_size") if limit is None else F.least("_size", F.lit(limit))
    first = {FULLEST: [size.desc(), F.col("_shuffled")], OLDEST: [F.col("_head")]}[order]
    chosen = prefixes.orderBy(*first, "group_id", "sequence_number", "message_id").drop(
        "_ok", "_held", "_blocked", "_stop", "_size", "_head", "_shuffled"
    )
    return chosen if limit is None else chosen.limit(limit)


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


def retire(
    ctx: QueueContext, record: QueueRecord, rule: Expr, values: dict[str, Expr], what: str
) -> int:
    """Spark's form of fifo_queue.retire: the rows meeting `rule` that one pinned version judges
    no duplicate become `values` (a tombstone), by a MERGE whose source is that version's rows
    (Delta row ids cannot bound an UPDATE). A row committed later is never in the source, so a
    duplicate sent meanwhile is never made a tombstone as if it were an accepted send."""
    from ..frames.id_merges import keyed_merge

    storage = ctx.storage
    t = storage.target_prefix(record.location)

    def attempt() -> int:
        table = pinned(ctx, record)
        source = table.where(to_column(rule & not_duplicate(duplicates_in(table))))
        # one row per key: a row moving out beside its message moved back shares one
        source = source.select("shard", "message_id").dropDuplicates().persist()
        try:
            shards = [row.shard for row in source.select("shard").distinct().collect()]
            if not shards:
                return 0
            changed = {name: to_column(value, t) for name, value in values.items()}
            counts = (
                keyed_merge(ctx, record, source, shards)
                .update(changed, to_column(rule, t))
                .execute()
            )
            return counts.changed if counts.known else source.count()
        finally:
            source.unpersist()

    return storage.transact(record.location, attempt, what)
