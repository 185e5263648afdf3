"""Where a broker's Delta tables live, and how every read and commit to them is made.

A `Storage` is bound to one Spark session. Each broker has two that share everything else: the
caller's session for bulk work (compiled code pays off over many rows), and an interpreting child
session for single-message work (see INTERPRETED). The engine picks one explicitly.
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql.types import StructType

from ..errors import QueueDoesNotExist
from ..limits import COMPACTED_FILE_BYTES
from ..rules.expr import Expr
from . import sql
from .dml import Counts, Merge, change, in_list
from .locking import SPARK, commit_lock
from .logtrim import clear_unfinished_log, trim_table_log
from .spark_exprs import to_column
from .tables import Layout, Table
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


@dataclass
class _Root:
    """What the two sessions of one broker share."""

    layout: Layout
    connect: bool
    policy: RetryPolicy
    conflicts: ConflictCounter = field(default_factory=ConflictCounter)
    known_tables: set[str] = field(default_factory=set)
    # Catalog tables of a local schema that this process's catalog is known to hold.
    attached: set[str] = field(default_factory=set)
    known_lock: threading.Lock = field(default_factory=threading.Lock)
    # Per table: whether it has Delta row tracking (a table keeps its features for life).
    row_tracking: dict[str, bool] = field(default_factory=dict)


class Storage:
    """A broker's tables seen through one Spark session: addresses, reads, and safe commits.

    Every method takes a table's address, a path or (in catalog mode) a table name, as the
    broker's `Layout` gives it."""

    def __init__(self, spark: SparkSession, layout: Layout, policy: RetryPolicy) -> None:
        # Spark Connect sessions are driven with Spark's own APIs only (see dml.py).
        connect = type(spark).__module__.startswith("pyspark.sql.connect")
        self._root = _Root(layout, connect, policy)
        self.spark = spark
        local = layout.local_dir is not None
        self.interpreted = self if connect else self._sibling(_interpreting_child(spark, local))

    def _sibling(self, spark: SparkSession) -> Storage:
        other = object.__new__(Storage)
        other._root, other.spark = self._root, spark
        other.interpreted = other
        return other

    # -- the layout -------------------------------------------------------------------------------

    @property
    def layout(self) -> Layout:
        """Where the broker's tables live and what each is called."""
        return self._root.layout

    @property
    def connect(self) -> bool:
        return self._root.connect

    @property
    def conflicts(self) -> ConflictCounter:
        return self._root.conflicts

    def target_prefix(self, address: str) -> str:
        """How MERGE conditions and values name the columns of the target table at `address`."""
        return self.layout.table(address).prefix

    def _table(self, address: str) -> Table:
        table = self.layout.table(address)
        if table.named and address not in self._root.attached:
            self._attach(address, table)
        return table

    def _attach(self, address: str, table: Table) -> None:
        """Makes a table of a local catalog schema known to this process's catalog.

        Spark's local session catalog lives in one process (in memory, or in an embedded Derby
        metastore only one process may open), so a table another process created is a folder
        under the schema's location that this process's catalog does not name: it is registered
        here at that location. Shared catalogs (Unity Catalog) have no local folder: nothing to do.
        """
        folder = self.layout.folder(address)
        if folder is not None:
            if not os.path.isdir(os.path.join(folder, "_delta_log")):
                return  # nobody has created it yet: look again next time
            if not self.spark.catalog.tableExists(table.sql):
                self.spark.sql(sql.local_table(table.sql, folder)).collect()
        with self._root.known_lock:
            self._root.attached.add(address)

    # -- reading ----------------------------------------------------------------------------------

    def read(self, address: str, *, version: int | None = None) -> DataFrame:
        return self._table(address).read(self.spark, version)

    def version(self, address: str) -> int:
        """The table's latest committed version (one log read)."""
        statement = sql.describe_history(self._table(address).sql, 1)
        row = self.spark.sql(statement).select("version").first()
        assert row is not None
        return int(row.version)

    def row_tracking(self, address: str) -> bool:
        """Whether the table numbers rows by Delta row tracking (read once per table); True for
        a table not there (yet): Spark creates FIFO tables with it."""
        known = self._root.row_tracking.get(address)
        if known is None:
            if not self.exists(address):
                return True
            row = self.detail(address).select("tableFeatures").first()
            features = (row.tableFeatures if row is not None else None) or []
            known = self._root.row_tracking[address] = "rowTracking" in features
        return known

    def detail(self, address: str) -> DataFrame:
        return self.spark.sql(sql.describe_detail(self._table(address).sql))

    def exists(self, address: str) -> bool:
        try:
            self.read(address).schema  # noqa: B018 - analysing the read is the check
        except AnalysisException:
            return False
        return True

    # -- committing -------------------------------------------------------------------------------

    def transact(
        self,
        address: str,
        action: Callable[[], T],
        what: str,
        *,
        alone: bool = False,
        staged: bool = False,
    ) -> T:
        """Runs one read-check-commit operation on the table at `address`, safely, with retries;
        `alone`: with no other transaction on the table in flight, in this process or another
        (on a local root). `staged`: the action reads and stages its work elsewhere first and
        takes the table's `turn` itself around its one commit, so that on a local root the
        table's other writers (other processes' Spark commits, every native commit) are not
        kept waiting through the staging; its commit must hold whatever committed since its
        read (a claim's UPDATE re-checks its rows' condition)."""
        root = self._root
        lock_file = self.layout.lock_file(address)
        return run_transaction(
            action,
            lock=nullcontext if staged else commit_lock(lock_file, SPARK, alone=alone),
            policy=root.policy,
            counter=root.conflicts,
            what=what,
        )

    @contextmanager
    def turn(self, address: str) -> Iterator[None]:
        """This engine's turn at committing to the table at `address` (the commit lock on a
        local root; nothing elsewhere), for a `staged` transaction's one commit; raises
        QueueDoesNotExist when the table was dropped while the transaction staged."""
        with commit_lock(self.layout.lock_file(address), SPARK)():
            self._still_there(address)
            yield

    def append(
        self,
        address: str,
        df: DataFrame,
        what: str,
        *,
        options: dict[str, str] | None = None,
        observe: Sequence[Column] = (),
        creating: bool = False,
    ) -> dict[str, Any]:
        """A blind append: one commit, never conflicting with other appends. Returns the named
        aggregates in `observe` over the rows written, computed by the write itself (never read
        back from the log). Only `creating` makes a table that is not there."""
        observation = Observation() if observe else None
        if observation is not None:
            df = df.observe(observation, *observe)
        writer = df.write.format("delta").mode("append").options(**(options or {}))

        def save() -> None:
            if not creating:
                self._still_there(address)
            self._table(address).save(writer)

        self.transact(address, save, what)
        return {} if observation is None else dict(observation.get)

    def _still_there(self, address: str) -> None:
        """On a local root, under the table's commit lock: raises QueueDoesNotExist when the
        table was dropped (an append would create it anew, and its rows would be acknowledged
        into a table no queue names)."""
        folder = self.layout.folder(address)
        if folder is not None and not os.path.isdir(os.path.join(folder, "_delta_log")):
            raise QueueDoesNotExist(f"the table {address} does not exist: its queue was deleted")

    def merge(self, address: str, source: DataFrame, on: Column) -> Merge:
        """A MERGE into `address` from `source` (aliased `s`); target columns via target_prefix."""
        return Merge(self.spark, self.connect, self._table(address), source, on)

    def change(
        self,
        address: str,
        rows: Column,
        key: tuple[str, ...],
        values: dict[str, Column] | None = None,
    ) -> Counts:
        """UPDATE (or, without `values`, DELETE) the rows meeting `rows`, within the caller's
        transaction; what the commit changed, where the session reports it (see dml.change)."""
        return change(self.spark, self.connect, self._table(address), rows, key, values)

    def change_where(
        self, address: str, rule: Expr, what: str, *, values: dict[str, Expr] | None = None
    ) -> int:
        """Updates the queue rows meeting `condition` to `values` (None: deletes them) and returns
        how many the commit changed.

        The change runs under a literal predicate on the shards that hold such rows, so it
        conflicts only with commits there. Classic sessions count from the commit itself; over
        Spark Connect, which reports no counts, the number comes from the read just before.
        """

        condition = to_column(rule)
        changes = None if values is None else {n: to_column(v) for n, v in values.items()}

        def attempt() -> int:
            shards = self.read(address).where(condition).groupBy("shard").count().collect()
            if not shards:
                return 0
            rows = in_list("shard", [row.shard for row in shards]) & condition
            counts = self.change(address, rows, ("shard", "message_id"), changes)
            return counts.changed if counts.known else sum(row["count"] for row in shards)

        return self.transact(address, attempt, what)

    # -- tables -----------------------------------------------------------------------------------

    def ensure_table(
        self,
        address: str,
        schema: StructType,
        *,
        partition_by: tuple[str, ...] = (),
        properties: dict[str, str] | None = None,
    ) -> None:
        """Creates the table unless it exists, and gives a table an older version created the
        nullable columns it lacks; once per process and table, later calls cost nothing."""
        if address in self._root.known_tables:
            return

        folder = self.layout.folder(address)

        def create() -> None:
            if folder is not None:  # a creation killed before its first commit left a stub
                clear_unfinished_log(folder)
            statement = sql.create_table(self._table(address).sql, schema, partition_by, properties)
            self.spark.sql(statement)
            have = set(self.read(address).columns)
            missing = [f for f in schema.fields if f.name not in have and f.nullable]
            if missing:
                self.spark.sql(sql.add_columns(self._table(address).sql, missing))

        # Alone: clearing a stub must never remove the log of a creation under way in another
        # thread of this process (they share the commit lock otherwise).
        self.transact(address, create, f"creating the table {address}", alone=True)
        self._remember(address)

    def upgrade_table(self, address: str, schema: StructType) -> bool:
        """Gives an existing table of an older version the nullable columns of `schema` it lacks;
        False (and nothing written) when there is no table. Never creates one: a lookup racing
        a delete must not bring back the table the delete dropped. Once per process and table."""
        if address in self._root.known_tables:
            return True
        try:
            have = set(self.read(address).columns)
        except AnalysisException:
            return False
        missing = [f for f in schema.fields if f.name not in have and f.nullable]
        if missing:
            statement = sql.add_columns(self._table(address).sql, missing)
            self.transact(address, lambda: self.spark.sql(statement), f"upgrading {address}")
        self._remember(address)
        return True

    def ensure_table_like(self, address: str, frame: DataFrame) -> None:
        """Creates a table with `frame`'s schema (an empty append: no user names reach SQL)."""
        if address not in self._root.known_tables:
            self.append(address, frame.limit(0), f"creating the table {address}", creating=True)
            self._remember(address)

    def drop_table(self, address: str) -> None:
        """Removes a table: a catalog table is dropped; a path table's folder is deleted on a local
        root, elsewhere its rows (VACUUM frees the files)."""
        with self._root.known_lock:
            self._root.known_tables.discard(address)
            self._root.attached.discard(address)
        table, folder = self.layout.table(address), self.layout.folder(address)
        if table.named:
            self.transact(address, lambda: self.spark.sql(sql.drop_table(table.sql)), "dropping")
        elif folder is None and self.exists(address):
            statement = sql.delete_all(table.sql)
            self.transact(address, lambda: self.spark.sql(statement), f"emptying {address}")
        if folder is not None:  # alone under its commit lock: no writer is half-way in
            remove = functools.partial(shutil.rmtree, folder, ignore_errors=True)
            self.transact(address, remove, f"deleting {address}", alone=True)

    def properties(self, address: str) -> dict[str, str]:
        """The table's properties (its retention settings among them)."""
        current = self.detail(address).select("properties").first()
        return dict(current["properties"] or {}) if current else {}

    def set_properties(self, address: str, properties: dict[str, str]) -> None:
        statement = sql.set_properties(self._table(address).sql, properties)
        self.transact(
            address, lambda: self.spark.sql(statement), f"setting properties of {address}"
        )

    def optimize(self, address: str, shard: int | None = None) -> None:
        """Compacts the table (or one shard) into small files (see SMALL_FILES), retried on
        conflicts; on a local root the commit lock is held for this one statement only."""
        statement = sql.optimize(self._table(address).sql, shard)
        spark = self.interpreted.spark
        self.transact(address, lambda: spark.sql(statement).collect(), f"compacting {address}")

    def vacuum(self, address: str, retain_hours: int) -> None:
        """Deletes files the table stopped using; on a local root without the commit lock (it
        makes no commit there, see LOCAL_VACUUM), so it never stalls other processes."""
        statement = sql.vacuum(self._table(address).sql, retain_hours)
        if self.layout.local_dir:
            self.interpreted.spark.sql(statement).collect()
        else:
            self.transact(address, lambda: self.spark.sql(statement).collect(), "vacuuming")

    def trim_log(self, address: str, keep_seconds: float) -> int:
        """On a local root, deletes the table's `_delta_log` history older than `keep_seconds`
        (logtrim.py); how many files went."""
        return trim_table_log(self.layout, address, keep_seconds)

    def _remember(self, address: str) -> None:
        with self._root.known_lock:
            self._root.known_tables.add(address)


def _interpreting_child(spark: SparkSession, local: bool) -> SparkSession:
    """A session sharing `spark`'s context, caches and settings, with interpreted expressions
    (and sparkqueue's own compaction and VACUUM settings)."""
    child = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if spark.conf.isModifiable(key):
            child.conf.set(key, value)
    for key, value in {**INTERPRETED, **SMALL_FILES, **(LOCAL_VACUUM if local else {})}.items():
        child.conf.set(key, value)
    return child
