"""Where a broker's Delta tables live, their layout, and how every commit to them is made safe."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import reduce
from typing import TypeVar
from urllib.parse import urlparse

from delta.tables import DeltaTable
from pyspark.errors import AnalysisException
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

# Single-message operations are a few tiny queries whose literals (now, ids, handles) change every
# call, so compiled code is never reused; interpreting them was ~30% faster per receive and delete,
# while bulk work (send_df, receive_df, redrive) is 2-3x faster compiled. See README "Measured".
INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}

HISTORY_SEARCH_DEPTH = 200
_KEY = "__sparkqueue_key_"  # the key columns of Storage.change's MERGE source

# Mount-style paths that are not the driver's own disk even though they have no URI scheme.
_REMOTE_MOUNTS = ("/Volumes/", "/dbfs/", "/Workspace/")


class Storage:
    """A broker's root: table paths, reads, and commits wrapped in locks and conflict retries."""

    def __init__(self, spark: SparkSession, root: str, policy: RetryPolicy) -> None:
        if not isinstance(root, str) or not root.strip() or "`" in root:
            raise ValueError("root must be a non-empty path or URI without backticks")
        self._bulk = spark
        # Spark Connect sessions (Databricks serverless and shared clusters) are driven with
        # Spark's own APIs only, so a server needs Delta's SQL extension and nothing more.
        self.connect = type(spark).__module__.startswith("pyspark.sql.connect")
        self._quick = spark if self.connect else _interpreting_child(spark)
        self._mode = threading.local()
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

    @property
    def spark(self) -> SparkSession:
        """The session this thread's current operation runs in (see `quick`)."""
        return self._quick if getattr(self._mode, "quick", False) else self._bulk

    @contextmanager
    def quick(self) -> Iterator[None]:
        """Runs this thread's queries in the interpreting child session until the block ends."""
        outer = getattr(self._mode, "quick", False)
        self._mode.quick = True
        try:
            yield
        finally:
            self._mode.quick = outer

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def read(self, path: str, *, version: int | None = None) -> DataFrame:
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(path)

    def version(self, path: str) -> int:
        """The table's latest committed version (one log read)."""
        row = self.history(path, 1).select("version").first()
        assert row is not None
        return int(row.version)

    def history(self, path: str, depth: int) -> DataFrame:
        """The newest `depth` commits (`depth` is ours, a whole number)."""
        return self.spark.sql(f"DESCRIBE HISTORY {_table(path)} LIMIT {int(depth)}")

    def detail(self, path: str) -> DataFrame:
        return self.spark.sql(f"DESCRIBE DETAIL {_table(path)}")

    def exists(self, path: str) -> bool:
        try:
            self.read(path).schema  # noqa: B018 - analysing the read is the check
        except AnalysisException:
            return False
        return True

    def optimize(self, path: str) -> None:
        self.spark.sql(f"OPTIMIZE {_table(path)}").collect()

    def vacuum(self, path: str, retain_hours: int) -> None:
        self.spark.sql(f"VACUUM {_table(path)} RETAIN {int(retain_hours)} HOURS").collect()

    def merge(self, path: str, source: DataFrame, on: Column) -> Merge:
        """A MERGE into `path` from `source` (aliased `s`); target columns via target_prefix."""
        return Merge(self, path, source.alias("s"), on)

    def set_properties(self, path: str, properties: dict[str, str]) -> None:
        """Paths are ours (the root may not contain a backtick) and the values are formatted from
        validated numbers: no message, queue attribute text or other user value reaches SQL."""
        pairs = ", ".join(f"'{key}' = '{value}'" for key, value in sorted(properties.items()))
        self.transact(
            path,
            lambda: self.spark.sql(f"ALTER TABLE {_table(path)} SET TBLPROPERTIES ({pairs})"),
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
        what: str,
        *,
        values: dict[str, Column] | None = None,
    ) -> int:
        """Counts the queue rows meeting `condition`, then updates them to `values` (None: deletes
        them), with the count's shards pinned.

        The change runs under a literal shard predicate so it conflicts only with commits to those
        shards; Serializable isolation makes the count exact for the commit that wins.
        """

        def attempt() -> int:
            counts = self.read(path).where(condition).groupBy("shard").count().collect()
            if not counts:
                return 0
            rows = in_list("shard", [row.shard for row in counts]) & condition
            self.change(path, rows, ("shard", "message_id"), values)
            return sum(row["count"] for row in counts)

        return self.transact(path, attempt, what)

    def change(
        self,
        path: str,
        rows: Column,
        key: tuple[str, ...],
        values: dict[str, Column] | None = None,
    ) -> None:
        """UPDATE (or, without `values`, DELETE) the rows meeting `rows`, within the caller's
        transaction. Classic sessions use Delta's API; over Spark Connect it is a MERGE of the
        rows' `key` columns into the table, which needs nothing but Delta's SQL extension."""
        if not self.connect:
            table = DeltaTable.forPath(self.spark, path)
            table.delete(rows) if values is None else table.update(rows, values)
            return
        keys = self.read(path).where(rows).select([F.col(k).alias(f"{_KEY}{k}") for k in key])
        on = reduce(Column.__and__, [F.col(k) == F.col(f"{_KEY}{k}") for k in key], rows)
        merge = Merge(self, path, keys, on)
        (merge.delete() if values is None else merge.update(values)).execute()

    def claims_path(self, location: str) -> str:
        """Where `receive_df` stages the claims of the queue table at `location`."""
        return self.path("_sparkqueue", "claims", location.rsplit("/", 1)[-1])

    def committed_rows(self, path: str, user_metadata: str) -> int:
        """Rows written by the recent commit tagged `user_metadata` (one pass instead of a count)."""
        row = (
            self.history(path, HISTORY_SEARCH_DEPTH)
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
        columns = ", ".join(
            f"`{f.name}` {f.dataType.simpleString()}{'' if f.nullable else ' NOT NULL'}"
            for f in schema.fields
        )
        statement = f"CREATE TABLE IF NOT EXISTS {_table(path)} ({columns}) USING DELTA"
        if partition_by:
            statement += f" PARTITIONED BY ({', '.join(f'`{name}`' for name in partition_by)})"
        if properties:
            pairs = ", ".join(f"'{key}' = '{value}'" for key, value in sorted(properties.items()))
            statement += f" TBLPROPERTIES ({pairs})"
        self.transact(path, lambda: self.spark.sql(statement), f"creating the table at {path}")

    def ensure_table_like(self, path: str, frame: DataFrame) -> None:
        """Creates a table with `frame`'s schema (an empty append: no user names reach SQL)."""
        if path not in self._known_tables:
            self.append(path, frame.limit(0), f"creating the table at {path}")
            self._known_tables.add(path)

    def drop_table(self, path: str) -> None:
        """Removes a table: its folder on a local root; elsewhere its rows (VACUUM frees the files)."""
        if self.local_dir:
            shutil.rmtree(self._local_path(path), ignore_errors=True)
            return
        self.transact(
            path, lambda: self.spark.sql(f"DELETE FROM {_table(path)}"), f"emptying {path}"
        )

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


def _interpreting_child(spark: SparkSession) -> SparkSession:
    """A session sharing `spark`'s context, caches and settings, with interpreted expressions."""
    child = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if spark.conf.isModifiable(key):
            child.conf.set(key, value)
    for key, value in INTERPRETED.items():
        child.conf.set(key, value)
    return child


def target_prefix(path: str) -> str:
    """How MERGE conditions name the target table's columns: `<path>`.name (Spark's own
    `mergeInto` qualifies them by the table's name, which for a path table is the path)."""
    return f"`{path}`."


@dataclass
class Merge:
    """One MERGE, described once and run by Delta's Python API (classic sessions, which report
    row counts) or by Spark's `DataFrame.mergeInto` (Spark Connect, which does not)."""

    storage: Storage
    path: str
    source: DataFrame
    on: Column
    clauses: list[tuple[str, Column | None, dict[str, Column] | None]] = field(default_factory=list)

    def update(self, values: dict[str, Column], condition: Column | None = None) -> Merge:
        self.clauses.append(("update", condition, values))
        return self

    def delete(self, condition: Column | None = None) -> Merge:
        self.clauses.append(("delete", condition, None))
        return self

    def insert(self, values: dict[str, Column] | None = None) -> Merge:
        """Inserts unmatched source rows: `values`, or every column when None."""
        self.clauses.append(("insert", None, values))
        return self

    def delete_unmatched(self, condition: Column | None = None) -> Merge:
        """Deletes target rows that no source row matches."""
        self.clauses.append(("delete_unmatched", condition, None))
        return self

    def execute(self) -> dict[str, int] | None:
        """Runs the MERGE; its counters (num_updated_rows, ...) where the session reports them."""
        if self.storage.connect:
            self._spark_merge()
            return None
        target = DeltaTable.forPath(self.storage.spark, self.path).alias(self.path)
        builder = target.merge(self.source, self.on)
        for kind, condition, values in self.clauses:
            if kind == "update":
                builder = builder.whenMatchedUpdate(condition=condition, set=values)
            elif kind == "delete":
                builder = builder.whenMatchedDelete(condition=condition)
            elif kind == "insert" and values is None:
                builder = builder.whenNotMatchedInsertAll()
            elif kind == "insert":
                builder = builder.whenNotMatchedInsert(values=values)
            else:
                builder = builder.whenNotMatchedBySourceDelete(condition=condition)
        row = builder.execute().first()
        return {key: int(value or 0) for key, value in row.asDict().items()} if row else {}

    def _spark_merge(self) -> None:
        writer = self.source.mergeInto(_table(self.path), self.on)
        for kind, condition, values in self.clauses:
            if kind == "update":
                writer = writer.whenMatched(condition).update(values)
            elif kind == "delete":
                writer = writer.whenMatched(condition).delete()
            elif kind == "insert" and values is None:
                writer = writer.whenNotMatched().insertAll()
            elif kind == "insert":
                writer = writer.whenNotMatched().insert(values)
            else:
                writer = writer.whenNotMatchedBySource(condition).delete()
        writer.merge()


def _table(path: str) -> str:
    """A path table's SQL name; paths are ours and never contain a backtick (see Storage)."""
    return f"delta.`{path}`"


def in_list(column: str, values: list[int] | list[str]) -> Column:
    """A literal IN predicate, the form Delta's conflict checker can use to prune partitions."""
    return F.col(column).isin(sorted(set(values)))
