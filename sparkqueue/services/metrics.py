"""The redrive job's metrics rows read back: a queue's depth over time, for charts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..engine.context import QueueContext
from ..rules.expr import col, lit

DEPTH_COLUMNS = ("pass_at", "visible", "in_flight", "delayed", "awaiting_dead_letter")


def depth_history(ctx: QueueContext, queue: str, since: datetime) -> list[dict[str, Any]]:
    """The queue's depth at each redrive pass since `since`, oldest first ([] before the first
    pass wrote the metrics table). Read by the native engine where the broker has it, else by
    Spark."""
    table = ctx.tables.layout.metrics
    rows = (col("queue") == lit(queue)) & (col("pass_at") >= lit(since))
    if ctx.native is not None:
        if not ctx.native.exists(table):
            return []
        found = ctx.native.select(table, DEPTH_COLUMNS, rows, order_by=["pass_at"])
        return [dict(row) for row in found]
    from ..store.spark_exprs import to_column

    storage = ctx.storage
    if not storage.exists(table):
        return []
    frame = storage.read(table).where(to_column(rows)).orderBy("pass_at")
    return [row.asDict() for row in frame.select(*DEPTH_COLUMNS).collect()]
