"""Where a broker's Delta tables live, their layout, and how every commit to them is made safe."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TypeVar
from urllib.parse import urlparse

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .locking import process_lock
from .transactions import ConflictCounter, RetryPolicy, run_transaction

T = TypeVar("T")

MESSAGE_SCHEMA = StructType(
    [
        StructField("shard", IntegerType(), False),
        StructField("message_id", StringType(), False),
        StructField("body", StringType(), False),
        StructField("attributes", MapType(StringType(), StringType()), True),
        StructField("group_id", StringType(), True),
        StructField("deduplication_id", StringType(), True),
        StructField("sequence_number", LongType(), True),
        StructField("sent_at", TimestampType(), False),
        StructField("visible_at", TimestampType(), False),
        StructField("receipt_handle", StringType(), True),
        StructField("receive_count", IntegerType(), False),
        StructField("first_received_at", TimestampType(), True),
        StructField("handle_issued_at", TimestampType(), True),
    ]
)

# Deletion vectors make MERGE/DELETE rewrite only changed rows; compaction is the redrive job's,
# never automatic, because it removes files that consumers are reading (and aborts them).
QUEUE_TABLE_PROPERTIES = {
    "delta.enableDeletionVectors": "true",
    "delta.autoOptimize.autoCompact": "false",
    "delta.autoOptimize.optimizeWrite": "false",
    "delta.checkpointInterval": "20",
    "delta.logRetentionDuration": "interval 2 days",
    "delta.deletedFileRetentionDuration": "interval 1 days",
}

HISTORY_SEARCH_DEPTH = 200

# Mount-style paths that are not the driver's own disk even though they have no URI scheme.
_REMOTE_MOUNTS = ("/Volumes/", "/dbfs/", "/Workspace/")


class Storage:
    """A broker's root: table paths, reads, and commits wrapped in locks and conflict retries."""

    def __init__(self, spark: SparkSession, root: str, policy: RetryPolicy) -> None:
        if not isinstance(root, str) or not root.strip():
            raise ValueError("root must be a non-empty path or URI")
        self.spark = spark
        self.policy = policy
        self.conflicts = ConflictCounter()
        self._known_tables: set[str] = set()
        parsed = urlparse(root)
        self.local_dir: str | None = None
        if parsed.scheme == "file":
            self.local_dir = os.path.abspath(parsed.path)
        elif not parsed.scheme and not root.startswith(_REMOTE_MOUNTS):
            self.local_dir = os.path.abspath(root)
        self.root = f"file:{self.local_dir}" if self.local_dir else root.rstrip("/")

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def read(self, path: str) -> DataFrame:
        return self.spark.read.format("delta").load(path)

    def delta(self, path: str) -> DeltaTable:
        return DeltaTable.forPath(self.spark, path)

    def transact(self, path: str, action: Callable[[], T], what: str) -> T:
        """Runs one read-check-commit operation on the table at `path`, safely and with retries."""
        return run_transaction(
            action, lock=self._lock(path), policy=self.policy, counter=self.conflicts, what=what
        )

    def append(
        self, path: str, df: DataFrame, what: str, *, user_metadata: str | None = None
    ) -> None:
        """A blind append: one commit, never conflicting with other appends."""
        writer = df.write.format("delta").mode("append")
        if user_metadata is not None:
            writer = writer.option("userMetadata", user_metadata)
        self.transact(path, lambda: writer.save(path), what)

    def committed_rows(self, path: str, user_metadata: str) -> int:
        """Rows written by the recent commit tagged `user_metadata` (one pass instead of a count)."""
        row = (
            self.delta(path)
            .history(HISTORY_SEARCH_DEPTH)
            .where(F.col("userMetadata") == user_metadata)
            .select(F.col("operationMetrics")["numOutputRows"].alias("rows"))
            .first()
        )
        if row is None:
            raise RuntimeError(
                f"the commit tagged {user_metadata} is not in the recent history of {path}"
            )
        return int(row["rows"] or 0)

    def ensure_table(
        self,
        path: str,
        schema: StructType,
        *,
        partition_by: tuple[str, ...] = (),
        properties: dict[str, str] | None = None,
    ) -> None:
        """Creates the table once per process; later calls cost nothing."""
        if path not in self._known_tables:
            self.create_table(path, schema, partition_by=partition_by, properties=properties)
            self._known_tables.add(path)

    def create_table(
        self,
        path: str,
        schema: StructType,
        *,
        partition_by: tuple[str, ...] = (),
        properties: dict[str, str] | None = None,
    ) -> None:
        def create() -> None:
            builder = DeltaTable.createIfNotExists(self.spark).location(path).addColumns(schema)
            if partition_by:
                builder = builder.partitionedBy(*partition_by)
            for key, value in (properties or {}).items():
                builder = builder.property(key, value)
            builder.execute()

        self.transact(path, create, f"creating the table at {path}")

    def drop_table(self, path: str) -> None:
        """Removes a table: its folder on a local root; elsewhere its rows (VACUUM frees the files)."""
        if self.local_dir:
            shutil.rmtree(self._local_path(path), ignore_errors=True)
            return
        self.transact(path, lambda: self.delta(path).delete(), f"dropping the table at {path}")

    def _local_path(self, path: str) -> str:
        return urlparse(path).path

    def _lock(self, path: str) -> Callable[[], AbstractContextManager[object]]:
        if not self.local_dir:
            return nullcontext
        name = self._local_path(path)[len(self.local_dir) :].strip("/").replace("/", "__")
        return process_lock(
            os.path.join(self.local_dir, "_sparkqueue", "locks", f"{name}.lock")
        ).hold


def merge_metrics(result: DataFrame | None) -> dict[str, int]:
    """The counters of a MERGE (num_updated_rows, num_deleted_rows, ...) as a dict."""
    if result is None:  # pragma: no cover - Delta versions before 3.x returned nothing
        raise RuntimeError("this Delta version does not report MERGE metrics; use delta-spark 4.x")
    row = result.first()
    return {key: int(value or 0) for key, value in row.asDict().items()} if row else {}


def in_list(column: str, values: list[int] | list[str]) -> Column:
    """A literal IN predicate, the form Delta's conflict checker can use to prune partitions."""
    return F.col(column).isin(sorted(set(values)))
