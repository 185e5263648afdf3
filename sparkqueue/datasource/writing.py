"""Writing DataFrames to a queue: `df.write.format("sparkqueue")` and the streaming sink.

Each task checks its rows by the rules `send` obeys and hands them to the driver side, which
sends all of them in one commit, as `send_df` does: a row that breaks a rule fails the write and
nothing is sent. The streaming sink's commit records (this sink, the batch id) in Delta's `txn`
action, so a batch that Spark runs again after a crash is not sent again (on a FIFO queue the
repeat's deduplication ids say so, within their 5-minute window).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..attributes import QueueAttributes
from ..engine.messages.send import SendEntry, send_entries
from ..errors import MissingParameter
from .options import QueueOptions
from .rows import check_write_schema, entries

SINK_APP_PREFIX = "sparkqueue-sink-"


@dataclass(frozen=True)
class CheckedRows(WriterCommitMessage):
    """One task's rows, checked and ready to send."""

    entries: list[SendEntry]


class QueueWriter(DataSourceWriter):
    """`df.write.format("sparkqueue")`: every row sent in one commit."""

    def __init__(self, options: QueueOptions, schema: StructType) -> None:
        check_write_schema(schema)
        self.options = options
        self.attributes: QueueAttributes = options.open()[1].attributes

    def write(self, iterator: Iterator[Row]) -> CheckedRows:
        return CheckedRows(entries(iterator, self.attributes))

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        _send(self.options, messages, None)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Nothing was sent: tasks only check rows."""


class QueueStreamWriter(DataSourceStreamWriter):
    """The streaming sink: each batch's rows sent once, in one commit."""

    def __init__(self, options: QueueOptions, schema: StructType) -> None:
        check_write_schema(schema)
        if not options.checkpoint:
            raise MissingParameter(
                "the sparkqueue sink needs the query's checkpointLocation: it names the sink in"
                " the queue's log, so that a batch run again after a crash is not sent again"
            )
        self.options = options
        self.attributes: QueueAttributes = options.open()[1].attributes
        digest = hashlib.sha256(options.checkpoint.encode()).hexdigest()[:32]
        self.app_id = SINK_APP_PREFIX + digest

    def write(self, iterator: Iterator[Row]) -> CheckedRows:
        return CheckedRows(entries(iterator, self.attributes))

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        _send(self.options, messages, (self.app_id, batchId))

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing was sent: tasks only check rows."""


def _send(
    options: QueueOptions,
    messages: Sequence[WriterCommitMessage | None],
    once: tuple[str, int] | None,
) -> None:
    rows = [entry for m in messages if isinstance(m, CheckedRows) for entry in m.entries]
    if not rows:
        return
    ctx, record = options.open()
    send_entries(ctx, record, rows, once=once)
