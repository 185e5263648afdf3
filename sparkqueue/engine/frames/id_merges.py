"""Spark MERGEs keyed by message id: what DataFrame-scale claims and deletes join their sources
with. The rows' rules come from conditions.py, rendered
for the MERGE's target."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ...attributes import QueueAttributes
from ...store.dml import Merge, in_list
from ...store.registry import QueueRecord
from ...store.spark_exprs import to_column, unless_stale_column
from ..conditions import claimable
from ..context import QueueContext


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
    is ever half-claimed (see fifo/spark.py)."""
    t = merge.table.prefix
    unchanged = to_column(claimable(now, attrs), t) & (
        F.col(f"{t}receive_count") == F.col("s.expected_count")
    )
    if not attrs.fifo:
        return merge.update(values, unchanged)
    guarded = {**values, "receipt_handle": unless_stale_column(unchanged, values["receipt_handle"])}
    return merge.update(guarded)
