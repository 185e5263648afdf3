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
        StructField("moved_from", StringType(), True),  # the queue a moved message came from
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
    # Every interrupted move leaves one idempotent-write id behind; forget them after a week.
    "delta.setTransactionRetentionDuration": "interval 7 days",
}

HISTORY_SEARCH_DEPTH = 200

# Mount-style paths that are not the driver's own disk even though they have no URI scheme.
_REMOTE_MOUNTS = ("/Volumes/", "/dbfs/", "/Workspace/")


class Storage:
    """A broker's root: table paths, reads, and commits wrapped in locks and conflict retries."""

    def __init__(self, spark: SparkSession, root: str, policy: RetryPolicy) -> None:
        if not isinstance(root, str) or not root.strip() or "`" in root:
            raise ValueError("root must be a non-empty path or URI without backticks")
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

    def read(self, path: str, *, version: int | None = None) -> DataFrame:
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(path)

    def version(self, path: str) -> int:
        """The table's latest committed version (one log read)."""
        row = self.delta(path).history(1).select("version").first()
        assert row is not None
        return int(row.version)

    def delta(self, path: str) -> DeltaTable:
        return DeltaTable.forPath(self.spark, path)

    def exists(self, path: str) -> bool:
        return DeltaTable.isDeltaTable(self.spark, path)

    def set_properties(self, path: str, properties: dict[str, str]) -> None:
        """Delta's Python API cannot alter table properties, so this is the one SQL statement.

        The path is ours (root + generated name; the root may not contain a backtick) and the
        values are formatted from validated numbers: no user text reaches the SQL.
        """
        pairs = ", ".join(f"'{key}' = '{value}'" for key, value in sorted(properties.items()))
        self.transact(
            path,
            lambda: self.spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({pairs})"),
            f"setting table properties of {path}",
        )

    def transact(self, path: str, action: Callable[[], T], what: str) -> T:
        """Runs one read-check-commit operation on the table at `path`, safely and with retries."""
        return run_transaction(
            action, lock=self._lock(path), policy=self.policy, counter=self.conflicts, what=what
        )

    def append(
        self,
        path: str,
        df: DataFrame,
        what: str,
        *,
        user_metadata: str | None = None,
        options: dict[str, str] | None = None,
    ) -> None:
        """A blind append: one commit, never conflicting with other appends."""
        writer = df.write.format("delta").mode("append").options(**(options or {}))
        if user_metadata is not None:
            writer = writer.option("userMetadata", user_metadata)
        self.transact(path, lambda: writer.save(path), what)

    def change_where(
        self,
        path: str,
        condition: Column,
        change: Callable[[DeltaTable, Column], None],
        what: str,
    ) -> int:
        """Counts the rows meeting `condition`, then changes them with the count's shards pinned.

        The change runs under a literal shard predicate so it conflicts only with commits to those
        shards; Serializable isolation makes the count exact for the commit that wins.
        """

        def attempt() -> int:
            counts = self.read(path).where(condition).groupBy("shard").count().collect()
            if not counts:
                return 0
            change(self.delta(path), in_list("shard", [row.shard for row in counts]) & condition)
            return sum(row["count"] for row in counts)

        return self.transact(path, attempt, what)

    def claims_path(self, location: str) -> str:
        """Where `receive_df` stages the claims of the queue table at `location`."""
        return self.path("_sparkqueue", "claims", location.rsplit("/", 1)[-1])

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
        table = os.path.abspath(self._local_path(path))
        if not table.startswith(self.local_dir + os.sep):  # a sink outside the root: lock beside it
            folder, name = os.path.split(table)
            return process_lock(os.path.join(folder, f".{name}.sparkqueue.lock")).hold
        name = table[len(self.local_dir) :].strip("/").replace("/", "__")
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
