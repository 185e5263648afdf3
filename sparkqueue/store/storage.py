"""Where a broker's Delta tables live, and how every read and commit to them is made.

A `Storage` is bound to one Spark session. Each broker has two that share everything else: the
caller's session for bulk work (compiled code pays off over many rows), and an interpreting child
session for single-message work (see INTERPRETED). The engine picks one explicitly.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlparse

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql.types import StructType

from ..limits import COMPACTED_FILE_BYTES
from . import sql
from .dml import Counts, Merge, change, in_list
from .locking import ProcessLock, process_lock
from .logtrim import trim_log
from .transactions import ConflictCounter, RetryPolicy, run_transaction

T = TypeVar("T")

# Single-message operations are a few tiny queries whose literals (now, ids, handles) change every
# call, so compiled code is never reused; interpreting them was ~30% faster per receive and delete,
# while bulk work (send_df, receive_df, redrive) is 2-3x faster compiled. See docs/performance.md.
INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
# Compaction bins files up to this size: queue tables have no deletion vectors, so every claim
# rewrites the file holding its row (see limits.py).
SMALL_FILES = {"spark.databricks.delta.optimize.maxFileSize": str(COMPACTED_FILE_BYTES)}
# On a local root VACUUM runs outside the cross-process commit lock, so it must not commit:
# its START/END audit entries are the only commits it makes.
LOCAL_VACUUM = {"spark.databricks.delta.vacuum.logging.enabled": "false"}

# Mount-style paths that are not the driver's own disk even though they have no URI scheme.
_REMOTE_MOUNTS = ("/Volumes/", "/dbfs/", "/Workspace/")


@dataclass
class _Root:
    """What the two sessions of one broker share."""

    uri: str
    local_dir: str | None
    connect: bool
    policy: RetryPolicy
    conflicts: ConflictCounter = field(default_factory=ConflictCounter)
    known_tables: set[str] = field(default_factory=set)
    known_lock: threading.Lock = field(default_factory=threading.Lock)


class Storage:
    """A broker's root seen through one Spark session: paths, reads, and safe commits."""

    def __init__(self, spark: SparkSession, root: str, policy: RetryPolicy) -> None:
        sql.check_path(root, "root")
        parsed = urlparse(root)
        local_dir: str | None = None
        if parsed.scheme == "file":
            local_dir = os.path.abspath(parsed.path)
        elif not parsed.scheme and not root.startswith(_REMOTE_MOUNTS):
            local_dir = os.path.abspath(root)
        # Spark Connect sessions are driven with Spark's own APIs only (see dml.py).
        connect = type(spark).__module__.startswith("pyspark.sql.connect")
        uri = f"file:{local_dir}" if local_dir else root.rstrip("/")
        self._root = _Root(uri, local_dir, connect, policy)
        self.spark = spark
        self.interpreted = self if connect else self._sibling(_interpreting_child(spark, local_dir))

    def _sibling(self, spark: SparkSession) -> Storage:
        other = object.__new__(Storage)
        other._root, other.spark = self._root, spark
        other.interpreted = other
        return other

    # -- the root ---------------------------------------------------------------------------------

    @property
    def root(self) -> str:
        return self._root.uri

    @property
    def connect(self) -> bool:
        return self._root.connect

    @property
    def conflicts(self) -> ConflictCounter:
        return self._root.conflicts

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def claims_path(self, location: str) -> str:
        """Where `receive_df` stages the claims of the queue table at `location`."""
        return self.path("_sparkqueue", "claims", location.rsplit("/", 1)[-1])

    # -- reading ----------------------------------------------------------------------------------

    def read(self, path: str, *, version: int | None = None) -> DataFrame:
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(path)

    def version(self, path: str) -> int:
        """The table's latest committed version (one log read)."""
        row = self.spark.sql(sql.describe_history(path, 1)).select("version").first()
        assert row is not None
        return int(row.version)

    def detail(self, path: str) -> DataFrame:
        return self.spark.sql(sql.describe_detail(path))

    def exists(self, path: str) -> bool:
        try:
            self.read(path).schema  # noqa: B018 - analysing the read is the check
        except AnalysisException:
            return False
        return True

    # -- committing -------------------------------------------------------------------------------

    def transact(self, path: str, action: Callable[[], T], what: str) -> T:
        """Runs one read-check-commit operation on the table at `path`, safely and with retries."""
        root = self._root
        return run_transaction(
            action, lock=self._lock(path), policy=root.policy, counter=root.conflicts, what=what
        )

    def append(
        self,
        path: str,
        df: DataFrame,
        what: str,
        *,
        options: dict[str, str] | None = None,
        observe: Sequence[Column] = (),
    ) -> dict[str, Any]:
        """A blind append: one commit, never conflicting with other appends. Returns the named
        aggregates in `observe` over the rows written, computed by the write itself (never read
        back from the log)."""
        observation = Observation() if observe else None
        if observation is not None:
            df = df.observe(observation, *observe)
        writer = df.write.format("delta").mode("append").options(**(options or {}))
        self.transact(path, lambda: writer.save(path), what)
        return {} if observation is None else dict(observation.get)

    def merge(self, path: str, source: DataFrame, on: Column) -> Merge:
        """A MERGE into `path` from `source` (aliased `s`); target columns via dml.target_prefix."""
        return Merge(self.spark, self.connect, path, source, on)

    def change(
        self,
        path: str,
        rows: Column,
        key: tuple[str, ...],
        values: dict[str, Column] | None = None,
    ) -> Counts:
        """UPDATE (or, without `values`, DELETE) the rows meeting `rows`, within the caller's
        transaction; what the commit changed, where the session reports it (see dml.change)."""
        return change(self.spark, self.connect, path, rows, key, values)

    def change_where(
        self, path: str, condition: Column, what: str, *, values: dict[str, Column] | None = None
    ) -> int:
        """Updates the queue rows meeting `condition` to `values` (None: deletes them) and returns
        how many the commit changed.

        The change runs under a literal predicate on the shards that hold such rows, so it
        conflicts only with commits there. Classic sessions count from the commit itself; over
        Spark Connect, which reports no counts, the number comes from the read just before.
        """

        def attempt() -> int:
            shards = self.read(path).where(condition).groupBy("shard").count().collect()
            if not shards:
                return 0
            rows = in_list("shard", [row.shard for row in shards]) & condition
            counts = self.change(path, rows, ("shard", "message_id"), values)
            return counts.changed if counts.known else sum(row["count"] for row in shards)

        return self.transact(path, attempt, what)

    # -- tables -----------------------------------------------------------------------------------

    def ensure_table(
        self,
        path: str,
        schema: StructType,
        *,
        partition_by: tuple[str, ...] = (),
        properties: dict[str, str] | None = None,
    ) -> None:
        """Creates the table unless it exists (then nothing changes); once per process and path,
        later calls cost nothing."""
        if path in self._root.known_tables:
            return
        statement = sql.create_table(path, schema, partition_by, properties)
        self.transact(path, lambda: self.spark.sql(statement), f"creating the table at {path}")
        self._remember(path)

    def ensure_table_like(self, path: str, frame: DataFrame) -> None:
        """Creates a table with `frame`'s schema (an empty append: no user names reach SQL)."""
        if path not in self._root.known_tables:
            self.append(path, frame.limit(0), f"creating the table at {path}")
            self._remember(path)

    def drop_table(self, path: str) -> None:
        """Removes a table: its folder on a local root; elsewhere its rows (VACUUM frees the files)."""
        with self._root.known_lock:
            self._root.known_tables.discard(path)
        if self._root.local_dir:
            shutil.rmtree(urlparse(path).path, ignore_errors=True)
        elif self.exists(path):
            self.transact(path, lambda: self.spark.sql(sql.delete_all(path)), f"emptying {path}")

    def set_properties(self, path: str, properties: dict[str, str]) -> None:
        statement = sql.set_properties(path, properties)
        self.transact(
            path, lambda: self.spark.sql(statement), f"setting table properties of {path}"
        )

    def optimize(self, path: str, shard: int | None = None) -> None:
        """Compacts the table (or one shard) into small files (see SMALL_FILES), retried on
        conflicts; on a local root the commit lock is held for this one statement only."""
        statement = sql.optimize(path, shard)
        spark = self.interpreted.spark
        self.transact(path, lambda: spark.sql(statement).collect(), f"compacting {path}")

    def vacuum(self, path: str, retain_hours: int) -> None:
        """Deletes files the table stopped using; on a local root without the commit lock (it
        makes no commit there, see LOCAL_VACUUM), so it never stalls other processes."""
        statement = sql.vacuum(path, retain_hours)
        if self._root.local_dir:
            self.interpreted.spark.sql(statement).collect()
        else:
            self.transact(path, lambda: self.spark.sql(statement).collect(), f"vacuuming {path}")

    def trim_log(self, path: str, keep_seconds: float) -> int:
        """On a local root, deletes the table's `_delta_log` history older than `keep_seconds`
        (see logtrim.py) and returns how many files went; elsewhere nothing, as Delta's own
        cleanup (`delta.logRetentionDuration`) and the store's listing apply there."""
        lock = self._process_lock(path)
        if lock is None:
            return 0
        with lock.hold_alone():  # no transaction in flight: each later one reads a newer version
            return trim_log(urlparse(path).path, time.time(), keep_seconds)

    def _remember(self, path: str) -> None:
        with self._root.known_lock:
            self._root.known_tables.add(path)

    def _lock(self, path: str) -> Callable[[], AbstractContextManager[object]]:
        lock = self._process_lock(path)
        return nullcontext if lock is None else lock.hold

    def _process_lock(self, path: str) -> ProcessLock | None:
        """The cross-process commit lock of a table on a local root (None elsewhere)."""
        local_dir = self._root.local_dir
        if not local_dir:
            return None
        table = os.path.abspath(urlparse(path).path)
        if not table.startswith(local_dir + os.sep):  # a sink outside the root: lock beside it
            folder, name = os.path.split(table)
            return process_lock(os.path.join(folder, f".{name}.sparkqueue.lock"))
        name = table[len(local_dir) :].strip("/").replace("/", "__")
        return process_lock(os.path.join(local_dir, "_sparkqueue", "locks", f"{name}.lock"))


def _interpreting_child(spark: SparkSession, local_dir: str | None) -> SparkSession:
    """A session sharing `spark`'s context, caches and settings, with interpreted expressions
    (and sparkqueue's own compaction and VACUUM settings)."""
    child = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if spark.conf.isModifiable(key):
            child.conf.set(key, value)
    for key, value in {**INTERPRETED, **SMALL_FILES, **(LOCAL_VACUUM if local_dir else {})}.items():
        child.conf.set(key, value)
    return child
