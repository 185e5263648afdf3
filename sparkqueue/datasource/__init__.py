"""Spark's own interfaces to a queue: the Python data source `"sparkqueue"` (pyspark 4's
`pyspark.sql.datasource`), a streaming source and sink and a batch source and sink.

`register(spark)` makes `spark.readStream.format("sparkqueue")` and the rest answer on that
session (a Spark Connect session's included); `spark_session()` and `Broker(spark, ...)` call it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def register(spark: SparkSession) -> None:
    """Registers the `"sparkqueue"` format on `spark`; with a pyspark before 4.2 (no streaming
    read limits) there is none to register, and everything else works as before."""
    try:
        from .source import QueueSource
    except ImportError as error:
        log.info("no sparkqueue data source on this pyspark (4.2 or newer has it): %s", error)
        return
    spark.dataSource.register(QueueSource)


__all__ = ["register"]
