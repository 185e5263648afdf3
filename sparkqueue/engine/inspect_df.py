"""Looking at a queue from Spark: its visible messages as a DataFrame (`Queue.peek_df`)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..model import PEEK_FIELDS
from ..store.registry import QueueRecord
from ..store.spark_exprs import to_column
from ..store.spark_tables import collect_rows
from ..store.statements import Row
from . import fifo
from .conditions import claimable
from .context import QueueContext


def peek_df(ctx: QueueContext, record: QueueRecord, max_messages: int) -> DataFrame:
    """Visible messages, oldest first, read without claiming them."""
    table = ctx.read(record)
    if record.attributes.fifo:  # without never-delivered duplicates
        table = fifo.with_duplicates_flagged(table).where(~F.col("duplicate"))
    return (
        table.where(to_column(claimable(ctx.now(), record.attributes)))
        .orderBy("sent_at", "message_id")
        .limit(max_messages)
        .select(*PEEK_FIELDS)
    )


def peek_rows(ctx: QueueContext, record: QueueRecord, max_messages: int) -> list[Row]:
    """`peek_df` collected as the engines' rows (timestamps exact, aware UTC)."""
    return collect_rows(peek_df(ctx, record, max_messages), PEEK_FIELDS)
