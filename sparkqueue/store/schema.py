"""The tables a broker keeps: their columns, partitioning and Delta table properties (each
engine builds its own schema types from the columns: spark_schema.py, native_tables.py)."""

from __future__ import annotations

from ..limits import (
    CHECKPOINT_INTERVAL,
    FILE_RETENTION_HOURS,
    LOG_RETENTION_HOURS,
    QUEUE_ROWS_PER_FILE,
)

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
MESSAGE_PARTITIONING = ("shard",)

# What receive_df stages per claim: the claimed rows as they will be, plus what the claim expects.
CLAIMS_COLUMNS: Columns = (
    *MESSAGE_COLUMNS,
    ("expected_count", "int", False),
    ("claim_id", "string", False),
)
CLAIMS_PARTITIONING = ("claim_id",)

METRICS_COLUMNS: Columns = (
    ("queue", "string", False),
    ("pass_at", "timestamp", False),
    ("visible", "long", False),
    ("in_flight", "long", False),
    ("delayed", "long", False),
    ("awaiting_dead_letter", "long", False),
    ("oldest_age_seconds", "double", False),
    ("moved_to_dead_letter", "long", False),
    ("released", "long", False),
    ("expired_by_retention", "long", False),
    ("duration_seconds", "double", False),
    ("upkeep", "boolean", False),
    ("active_files", "long", False),
    ("table_bytes", "long", False),
    # A standard queue's tenants (fair queues; a FIFO queue, with none, the queue's own figures);
    # nullable, so an older metrics table gains them.
    ("noisy_groups", "long", True),
    ("quiet_visible", "long", True),
    ("quiet_in_flight", "long", True),
    ("quiet_delayed", "long", True),
    ("quiet_oldest_age_seconds", "double", True),
)
# QueueStats' figures of a queue's tenants, recorded by each redrive pass as they are named.
TENANT_FIGURES = (
    "noisy_groups", "quiet_visible", "quiet_in_flight", "quiet_delayed", "quiet_oldest_age_seconds"
)  # fmt: skip


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
# touches, which QUEUE_WRITE_OPTIONS and compaction keep small. Compaction is sparkqueue's own
# (the redrive job's upkeep, and on a local root a broker's beside its producers, alone under the
# commit lock), never Delta's automatic one, which would abort consumers at random moments.
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
