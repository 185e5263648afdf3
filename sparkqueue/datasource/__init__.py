"""Spark's own interfaces to a queue: the Python data source `"sparkqueue"` (pyspark 4's
`pyspark.sql.datasource`), a streaming source and sink and a batch source and sink.

`register(spark)` makes `spark.readStream.format("sparkqueue")` and the rest answer on that
session (a Spark Connect session's included); `spark_session()` and `Broker(spark, ...)` call it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Registers the `"sparkqueue"` format on `spark`."""
    from .source import QueueSource

    spark.dataSource.register(QueueSource)


__all__ = ["register"]
