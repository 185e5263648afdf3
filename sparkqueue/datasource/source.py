"""The `"sparkqueue"` data source: a queue as Spark's batch and streaming source and sink."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from ..engine.streams import read_visible
from .options import QueueOptions
from .rows import SCHEMA, batch_rows
from .stream import QueueStreamReader
from .writing import QueueStreamWriter, QueueWriter


class QueueSource(DataSource):
    """Options: `root`, `queue`, `storage.<delta-rs key>`; a stream's `maxMessagesPerTrigger`
    and `visibilityTimeout` (docs/api.md, "Spark's own interfaces")."""

    @classmethod
    def name(cls) -> str:
        return "sparkqueue"

    def schema(self) -> StructType:
        QueueOptions.parse(self.options).open()  # at load(): a wrong option or queue says so
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return VisibleReader(QueueOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return QueueStreamReader(QueueOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return QueueWriter(_for_writing(self.options, overwrite), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return QueueStreamWriter(_for_writing(self.options, overwrite), schema)


def _for_writing(options: dict[str, str], overwrite: bool) -> QueueOptions:
    from ..errors import InvalidParameterValue

    if overwrite:
        raise InvalidParameterValue(
            "a queue takes messages, it is not overwritten: write with mode('append')"
        )
    return QueueOptions.parse(options)


class VisibleReader(DataSourceReader):
    """`spark.read.format("sparkqueue")`: the visible messages, unclaimed (as a peek), a task
    a shard."""

    def __init__(self, options: QueueOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        shards = self.options.open()[1].attributes.shards
        return [InputPartition(shard) for shard in range(shards)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        ctx, record = self.options.open()
        yield from batch_rows(read_visible(ctx, record, partition.value)).to_batches()
