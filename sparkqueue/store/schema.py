"""The tables a broker keeps: their schemas, partitioning and Delta table properties."""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..limits import (
    CHECKPOINT_INTERVAL,
    FILE_RETENTION_HOURS,
    LOG_RETENTION_HOURS,
    QUEUE_ROWS_PER_FILE,
)
from ..model import MESSAGE_FIELDS

# Every table's columns as (name, type, nullable), the one definition both engines build from.
Columns = tuple[tuple[str, str, bool], ...]
MESSAGE_COLUMNS: Columns = (
    ("shard", "int", False),
    ("message_id", "string", False),
    ("body", "string", False),
    ("attributes", "map", True),
    ("group_id", "string", True),
    ("deduplication_id", "string", True),
    ("sequence_number", "long", True),
    ("sent_at", "timestamp", False),
    ("visible_at", "timestamp", False),
    ("receipt_handle", "string", True),
    ("receive_count", "int", False),
    ("first_received_at", "timestamp", True),
    ("handle_issued_at", "timestamp", True),
    ("moved_from", "string", True),  # the queue a moved message came from
    # The SQS DataType of each attribute that is not a plain "String" (Number, Binary, custom
    # types such as "Number.float"); Binary values are base64 text in `attributes`. A message
    # sent with string attributes from Spark and one sent over the SQS endpoint are one row.
    ("attribute_types", "map", True),
)
REGISTRY_COLUMNS: Columns = (
    ("name", "string", False),
    ("attributes", "string", False),
    ("secret", "string", False),
    ("location", "string", False),
)
_SPARK_TYPES = {
    "int": IntegerType(),
    "long": LongType(),
    "string": StringType(),
    "map": MapType(StringType(), StringType()),
    "timestamp": TimestampType(),
    "double": DoubleType(),
    "boolean": BooleanType(),
}


def spark_schema(columns: Columns) -> StructType:
    return StructType([StructField(n, _SPARK_TYPES[t], nullable) for n, t, nullable in columns])


MESSAGE_SCHEMA = spark_schema(MESSAGE_COLUMNS)
ATTRIBUTES_TYPE = MESSAGE_SCHEMA["attributes"].dataType
# What receive_df returns and the worker loop hands to a handler: one column per Message field.
MESSAGE_FRAME_SCHEMA = StructType([MESSAGE_SCHEMA[name] for name in MESSAGE_FIELDS])
MESSAGE_PARTITIONING = ("shard",)

# What receive_df stages per claim: the claimed rows as they will be, plus what the claim expects.
CLAIMS_SCHEMA = StructType(
    [
        *MESSAGE_SCHEMA.fields,
        StructField("expected_count", IntegerType(), False),
        StructField("claim_id", StringType(), False),
    ]
)
CLAIMS_PARTITIONING = ("claim_id",)

REGISTRY_SCHEMA = spark_schema(REGISTRY_COLUMNS)

METRICS_SCHEMA = StructType(
    [
        StructField("queue", StringType(), False),
        StructField("pass_at", TimestampType(), False),
        StructField("visible", LongType(), False),
        StructField("in_flight", LongType(), False),
        StructField("delayed", LongType(), False),
        StructField("awaiting_dead_letter", LongType(), False),
        StructField("oldest_age_seconds", DoubleType(), False),
        StructField("moved_to_dead_letter", LongType(), False),
        StructField("released", LongType(), False),
        StructField("expired_by_retention", LongType(), False),
        StructField("duration_seconds", DoubleType(), False),
        StructField("upkeep", BooleanType(), False),
        StructField("active_files", LongType(), False),
        StructField("table_bytes", LongType(), False),
    ]
)


def retention_properties(
    file_retention_hours: int = FILE_RETENTION_HOURS,
    log_retention_hours: int = LOG_RETENTION_HOURS,
    checkpoint_interval: int = CHECKPOINT_INTERVAL,
) -> dict[str, str]:
    """How long Delta keeps removed files and log entries, and how often it checkpoints; written
    at creation and re-written by upkeep only when they differ (a metadata commit aborts readers)."""
    return {
        "delta.logRetentionDuration": f"interval {log_retention_hours} hours",
        "delta.deletedFileRetentionDuration": f"interval {file_retention_hours} hours",
        "delta.checkpointInterval": str(checkpoint_interval),
    }


# No deletion vectors: with them every read of a queue runs an extra listing job and a one-row
# UPDATE several more (measured in docs/performance.md); without them a DML rewrites the files it
# touches, which QUEUE_WRITE_OPTIONS and compaction keep small. Compaction is the redrive job's,
# never automatic, because it removes files that consumers are reading (and aborts them).
QUEUE_TABLE_PROPERTIES = {
    "delta.enableDeletionVectors": "false",
    "delta.autoOptimize.autoCompact": "false",
    "delta.autoOptimize.optimizeWrite": "false",
    **retention_properties(),
    # Every interrupted move leaves one idempotent-write id behind; forget them after a week.
    "delta.setTransactionRetentionDuration": "interval 7 days",
}
QUEUE_WRITE_OPTIONS = {"maxRecordsPerFile": str(QUEUE_ROWS_PER_FILE)}
# FIFO sequence numbers are Delta row ids.
FIFO_TABLE_PROPERTIES = {**QUEUE_TABLE_PROPERTIES, "delta.enableRowTracking": "true"}
