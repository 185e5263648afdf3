"""Looking at a queue from Spark: its visible messages as a DataFrame (`Queue.peek_df`)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from ...model import PEEK_FIELDS
from ...rules.deduplication import as_given
from ...store.registry import QueueRecord
from ...store.spark_exprs import to_column, to_columns
from ..conditions import claimable, not_duplicate
from ..context import QueueContext
from ..fifo import spark as spark_fifo


def peek_df(ctx: QueueContext, record: QueueRecord, max_messages: int) -> DataFrame:
    """Visible messages, oldest first, read without claiming them."""
    visible = claimable(ctx.now(), record.attributes)
    if record.attributes.fifo:  # without never-delivered duplicates, judged on the rows read
        table = spark_fifo.pinned(ctx, record)
        visible = visible & not_duplicate(spark_fifo.duplicates_in(table))
    else:
        table = ctx.read(record)
    return (
        table.where(to_column(visible))
        .orderBy("sent_at", "message_id")
        .limit(max_messages)
        .select(*to_columns(as_given(PEEK_FIELDS)))
    )
