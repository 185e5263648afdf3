"""Reading which partitions a table's recent commits changed, from their log entries, through
Spark (so the same reader works on every store a Spark session reaches, and over Connect)."""

from __future__ import annotations

from collections.abc import Collection

from pyspark.errors import PySparkException
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StringType, StructField, StructType

_FILE = StructType([StructField("partitionValues", MapType(StringType(), StringType()))])
# The actions that matter here: files added or removed (with their partition values), and
# changes of the table's metadata or protocol (read as raw text: only their presence counts).
_ACTIONS = StructType(
    [
        StructField("add", _FILE),
        StructField("remove", _FILE),
        StructField("metaData", StringType()),
        StructField("protocol", StringType()),
    ]
)


def commits_touching(
    spark: SparkSession, table_dir: str, versions: range, column: str, values: Collection[str]
) -> int | None:
    """How many of the commits `versions` of the table at `table_dir` added or removed a file
    whose partition `column` holds one of `values`, or changed the table's metadata or protocol
    (which may touch any file): one small Spark job over their log entries. None when an entry
    cannot be read."""
    if not versions:
        return 0
    entries = [f"{table_dir.rstrip('/')}/_delta_log/{version:020d}.json" for version in versions]
    try:
        actions = spark.read.schema(_ACTIONS).json(entries)
        touching = _touches("add", column, values) | _touches("remove", column, values)
        touching = touching | F.col("metaData").isNotNull() | F.col("protocol").isNotNull()
        return actions.where(touching).select("_metadata.file_path").distinct().count()
    except PySparkException:  # an entry gone already (the log trimmed): not known
        return None


def _touches(action: str, column: str, values: Collection[str]) -> Column:
    """An `action` on a file in one of `values`' partitions, or on one whose partition value is
    not written (it may be anywhere)."""
    value = F.col(f"{action}.partitionValues").getItem(column)
    return F.col(action).isNotNull() & (value.isNull() | value.isin(list(values)))
