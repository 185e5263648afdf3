"""Writing DataFrames to a queue: `df.write.format("sparkqueue")` and the streaming sink.

Each task checks its rows by the rules `send` obeys and hands them to the driver side, which
sends all of them in one commit, as `send_df` does: a row that breaks a rule fails the write and
nothing is sent. The streaming sink's commit records (this sink, the batch id) in Delta's `txn`
action, so a batch that Spark runs again after a crash is not sent again (on a FIFO queue the
repeat's deduplication ids say so, within their 5-minute window).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..attributes import QueueAttributes
from ..engine.messages.send import SendEntry, send_entries
from ..errors import InvalidParameterValue, MissingParameter
from .options import QueueOptions
from .rows import check_write_schema, entries

SINK_APP_PREFIX = "sparkqueue-sink-"


@dataclass(frozen=True)
class CheckedRows(WriterCommitMessage):
    """One task's rows, checked and ready to send."""

    entries: list[SendEntry]


class _RowChecks:
    """What both writers' tasks do: check their rows against the queue's attributes."""

    def __init__(self, options: QueueOptions, schema: StructType) -> None:
        check_write_schema(schema)
        self.options = options
        self.attributes: QueueAttributes = options.open()[1].attributes

    def write(self, iterator: Iterator[Row]) -> CheckedRows:
        return CheckedRows(entries(iterator, self.attributes))


class QueueWriter(_RowChecks, DataSourceWriter):
    """`df.write.format("sparkqueue")`: every row sent in one commit."""

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        _send(self.options, messages, None)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Nothing was sent: tasks only check rows."""


class QueueStreamWriter(_RowChecks, DataSourceStreamWriter):
    """The streaming sink: each batch's rows sent once, in one commit."""

    def __init__(self, options: QueueOptions, schema: StructType) -> None:
        if not options.checkpoint:
            raise MissingParameter(
                "the sparkqueue sink needs the query's checkpointLocation: it names the sink in"
                " the queue's log, so that a batch run again after a crash is not sent again"
            )
        super().__init__(options, schema)
        self.app_id = sink_id(options.checkpoint)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        ctx, record = self.options.open()
        assert ctx.native is not None
        recorded = ctx.native.open(record.location).transaction_version(self.app_id)
        if recorded is not None and recorded > batchId:  # Spark replays its last batch alone
            raise InvalidParameterValue(
                f"the queue {record.name!r} holds batch {recorded} of the sink checkpointed at"
                f" {self.options.checkpoint!r}, and Spark now writes its batch {batchId}: the"
                " checkpoint was reset or is shared. Give this query a checkpointLocation of its"
                " own, so that none of its batches is taken for one already sent"
            )
        _send(self.options, messages, (self.app_id, batchId))

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing was sent: tasks only check rows."""


def sink_id(checkpoint: str) -> str:
    """The app id a sink's commits record: its checkpoint folder (one spelling: `file:/x/` and
    `/x` are one) and, where that folder is on this machine's disk, the id of the query Spark
    keeps in it, so that a query started anew on a reset folder is a sink of its own."""
    where = checkpoint.removeprefix("file:").rstrip("/") or "/"
    metadata = Path(where) / "metadata"
    query = ""
    if metadata.is_file():
        query = str(json.loads(metadata.read_text(encoding="utf-8").splitlines()[0])["id"])
    return SINK_APP_PREFIX + hashlib.sha256(f"{where}\n{query}".encode()).hexdigest()[:32]


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
