"""`Broker`: the public entry point, a set of queues under a storage root or in a catalog schema.

It owns the storage, registry and clock, hands them to the engine and services as one
`QueueContext`, and checks arguments; no lower layer ever sees the Broker itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .attributes import QueueAttributes
from .clock import Clock, wall_clock
from .datasource import register
from .engine import lifecycle
from .engine.context import QueueContext
from .errors import InvalidParameterValue
from .limits import (
    ATTRIBUTE_CACHE_SECONDS,
    DEFAULT_MESSAGE_BYTES,
    DEFAULT_RETENTION_SECONDS,
    DEFAULT_SHARDS,
    DEFAULT_VISIBILITY_SECONDS,
)
from .model import MessageEvent, RedriveReport
from .queue import Queue
from .rules.checks import check_queue_name
from .services.history import history as message_history
from .services.settings import RedriveSettings
from .store.registry import Registry
from .store.statements import Tables
from .store.tables import PathLayout
from .store.transactions import RetryPolicy

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .store.native_tables import NativeTables
    from .store.storage import Storage

ENGINES = ("auto", "spark", "native")


class Broker:
    """Create, find and delete queues; every Broker on one root (or catalog schema) sees the same
    queues.

    `root` keeps the queues as Delta tables under a storage path; `catalog` ("main.queues", or a
    schema of the current catalog) keeps them as tables of that existing catalog schema, Unity
    Catalog on Databricks. Exactly one of the two is given.

    `engine` says who reads and commits the per-message operations: "native" (delta-rs, no JVM,
    a root on the local disk or on object storage), "spark", or "auto": native where it can
    write the root, Spark elsewhere (catalog mode, Spark Connect). `spark` may be None for a
    broker that never touches Spark; DataFrame methods and the redrive job then say that they
    need a session.

    On object storage the native engine takes its credentials from `storage_options` (delta-rs's
    keys, e.g. AWS_ENDPOINT_URL) or the environment. On S3 and Azure both engines share a root
    when the store refuses a second writer of a version from either: on S3 when the session
    commits with conditional puts, as `spark_session(storage_options=...)` sets it up; on
    `abfs(s)://container@account.dfs.core.windows.net/...` roots with Delta's default log
    store. "auto" is then native for the per-message operations and Spark for DataFrames and
    the redrive job. With another session (Delta's default S3 log store, or on gs:// roots) one
    engine writes a root: "auto" is Spark's when a session is given and native without one
    (`Broker(None, root)`).
    """

    def __init__(
        self,
        spark: SparkSession | None,
        root: str | None = None,
        *,
        catalog: str | None = None,
        engine: str = "auto",
        storage_options: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        retry: RetryPolicy | None = None,
        attribute_cache_seconds: float = ATTRIBUTE_CACHE_SECONDS,
    ) -> None:
        if (root is None) == (catalog is None):
            raise InvalidParameterValue(
                "give a Broker exactly one of root (a storage path) or catalog (a catalog schema"
                f" such as 'main.queues'); got root={root!r}, catalog={catalog!r}"
            )
        if engine not in ENGINES:
            raise InvalidParameterValue(f"engine must be one of {list(ENGINES)}; got {engine!r}")
        self.spark = spark
        self._options = {
            "engine": engine,
            "storage_options": storage_options,
            "clock": clock,
            "retry": retry,
            "attribute_cache_seconds": attribute_cache_seconds,
        }
        if spark is not None:  # spark.readStream.format("sparkqueue") and the rest
            register(spark)
        policy = retry or RetryPolicy()
        storage = _spark_storage(spark, root, catalog, policy, engine)
        layout = storage.layout if storage is not None else PathLayout(str(root))
        spark_tables = None if storage is None else _spark_tables(storage)
        native = _native_tables(layout, policy, engine, storage, storage_options)
        tables = native if native is not None and engine != "spark" else spark_tables
        assert tables is not None
        registry = Registry(tables, attribute_cache_seconds)
        self.context = QueueContext(
            tables,
            registry,
            clock or wall_clock,
            bulk=storage,
            spark_tables=spark_tables,
            native=native,
        )

    def __repr__(self) -> str:
        return f"Broker({self.context.tables.layout.where}, engine={self.engine!r})"

    @property
    def engine(self) -> str:
        """Which engine serves the per-message operations: "native" or "spark"."""
        return self.context.tables.engine

    @property
    def root(self) -> str | None:
        """The storage root's URI (None in catalog mode)."""
        layout = self.context.tables.layout
        return layout.uri if isinstance(layout, PathLayout) else None

    def on_root(self, root: str) -> Broker:
        """A broker like this one (its session, engine, storage options, clock) on another root:
        the SQS endpoint keeps each region's queues under a root of their own."""
        return Broker(self.spark, root, **self._options)

    def holds_queues(self, root: str) -> bool:
        """Whether a broker kept queues under `root` (its registry exists), found without
        creating anything there (this broker's storage options)."""
        from .store.native_tables import NativeTables

        tables = NativeTables(PathLayout(root), RetryPolicy(), self._options["storage_options"])
        return tables.exists(tables.layout.registry)

    @property
    def catalog(self) -> str | None:
        """The catalog schema, `catalog.schema` (None for a broker on a root)."""
        layout = self.context.tables.layout
        return None if isinstance(layout, PathLayout) else str(layout)

    @property
    def storage(self) -> Storage:
        """Spark's storage (UnsupportedOperation on a broker without a Spark session)."""
        return self.context.storage

    @property
    def conflict_retries(self) -> int:
        """How many times an operation of this broker re-ran after a Delta commit conflict."""
        counters = {id(t.conflicts): t.conflicts for t in self._all_tables()}
        return sum(counter.value for counter in counters.values())

    def _all_tables(self) -> list[Tables]:
        ctx = self.context
        return [t for t in (ctx.tables, ctx.spark_tables, ctx.native) if t is not None]

    def create_queue(
        self,
        name: str,
        *,
        visibility_timeout: int = DEFAULT_VISIBILITY_SECONDS,
        delay_seconds: int = 0,
        retention_seconds: int = DEFAULT_RETENTION_SECONDS,
        max_message_bytes: int = DEFAULT_MESSAGE_BYTES,
        dead_letter_queue: str | None = None,
        max_receive_count: int | None = None,
        fifo: bool = False,
        content_based_deduplication: bool = False,
        shards: int = DEFAULT_SHARDS,
        receive_wait_time_seconds: int = 0,
        redrive_allow_policy: str | None = None,
        tags: dict[str, str] | None = None,
        sqs_metadata: dict[str, str] | None = None,
    ) -> Queue:
        """Creates a queue, or returns it when it exists with exactly these attributes (tags are
        not compared, as in SQS)."""
        check_queue_name(name, fifo=fifo if isinstance(fifo, bool) else None)
        attributes = QueueAttributes(
            visibility_timeout=visibility_timeout,
            delay_seconds=delay_seconds,
            retention_seconds=retention_seconds,
            max_message_bytes=max_message_bytes,
            dead_letter_queue=dead_letter_queue,
            max_receive_count=max_receive_count,
            fifo=fifo,
            content_based_deduplication=content_based_deduplication,
            shards=shards,
            receive_wait_time_seconds=receive_wait_time_seconds,
            redrive_allow_policy=redrive_allow_policy,
            tags={} if tags is None else tags,
            sqs_metadata={} if sqs_metadata is None else sqs_metadata,
        ).check_fifo_modes()
        lifecycle.create_queue(self.context, name, attributes)
        return Queue(self.context, name)

    def get_queue(self, name: str) -> Queue:
        """The queue named `name`; QueueDoesNotExist if there is none."""
        check_queue_name(name)
        lifecycle.open_table(self.context, self.context.record(name))
        return Queue(self.context, name)

    def list_queues(self, prefix: str = "") -> list[str]:
        if not isinstance(prefix, str):
            raise InvalidParameterValue("prefix must be a str")
        return sorted(n for n in self.context.registry.records(fresh=True) if n.startswith(prefix))

    def delete_queue(self, name: str) -> None:
        """Removes the queue and its data; QueueDoesNotExist if there is none."""
        check_queue_name(name)
        lifecycle.delete_queue(self.context, name)

    def redrive(
        self, queues: Sequence[str] | None = None, *, settings: RedriveSettings | None = None
    ) -> RedriveReport:
        """One pass of the redrive job: dead-letter moves, releases, retention (and due upkeep,
        with Spark); through the native engine on a broker without a Spark session."""
        from .services.redrive import Redrive

        return Redrive(self.context, settings).run(queues)

    def history(self, name: str, message_id: str) -> list[MessageEvent]:
        """`Queue.history` by queue name: the message's events in queue `name` and its
        dead-letter queue, following its moves (a message found in the DLQ by its source's name)."""
        check_queue_name(name)
        return message_history(self.context, name, message_id)

    def redrive_metrics(self) -> DataFrame:
        """The redrive job's per-pass, per-queue metrics (depth, moves, timings) for dashboards."""
        self.context.needs_spark("redrive_metrics")
        from .store.spark_schema import METRICS_SCHEMA

        table = self.context.storage.layout.metrics
        self.context.storage.ensure_table(table, METRICS_SCHEMA)
        return self.context.storage.read(table)

    def write_once(self, results: DataFrame, sink: str, *, key: str = "message_id") -> int | None:
        """Appends to the Delta table `sink` the rows whose `key` it lacks; returns rows written
        (None over Spark Connect). Keyed by message id, a redelivered message's results are never
        written twice."""
        self.context.needs_spark("write_once")
        from .services.sink import write_once

        return write_once(self.context.storage, results, sink, key=key)


def _spark_storage(
    spark: SparkSession | None,
    root: str | None,
    catalog: str | None,
    policy: RetryPolicy,
    engine: str,
) -> Storage | None:
    """Spark's storage for the broker's layout; None without a session (native only)."""
    if spark is None:
        if catalog is not None or engine == "spark":
            raise InvalidParameterValue(
                "catalog mode and engine='spark' need a Spark session: Broker(spark, ...)"
            )
        return None
    from .store.storage import Storage
    from .store.tables import open_catalog

    layout = PathLayout(root) if root is not None else open_catalog(spark, str(catalog))
    return Storage(spark, layout, policy)


def _spark_tables(storage: Storage) -> Tables:
    from .store.spark_tables import SparkTables

    return SparkTables(storage)


def _native_tables(
    layout: object,
    policy: RetryPolicy,
    engine: str,
    storage: Storage | None,
    storage_options: Mapping[str, str] | None,
) -> NativeTables | None:
    """The native engine wherever it can write the root: the broker's engine where it is chosen
    (or "auto"), and under an explicit "spark" still the writer of the FIFO tables it numbers on a
    local root. On object storage a broker with a Spark session shares the root only where the
    store itself refuses a second writer of a version from either engine (S3 with the
    conditional log store, Azure with Delta's renaming one); elsewhere it keeps to Spark, since
    nothing there would make the two engines' commits take turns, as the commit lock does on a
    local disk."""
    from .store.native_tables import NativeTables
    from .store.spark_s3 import check_shared_options, session_commits_conditionally
    from .store.tables import is_native_root

    if not is_native_root(layout):
        if engine == "native" or storage is None:
            raise InvalidParameterValue(
                "the native engine writes roots on the local disk or on object storage (s3://,"
                " s3a://, gs://, az://, abfs://, abfss://); give one, or a Spark session and"
                f" engine='spark' or 'auto' for {layout}"
            )
        return None
    assert isinstance(layout, PathLayout)
    if storage is not None and layout.object_store:
        if session_commits_conditionally(storage.spark, layout.uri):
            check_shared_options(storage_options, layout.uri)
        elif (engine == "native" or storage_options) and layout.uri.startswith("gs:"):
            raise InvalidParameterValue(
                f"both engines on one gs:// root are refused ({layout}): Google Cloud Storage's"
                " create-only put would make their commits take turns, but no local emulator"
                " enforces it for both clients, so the pair is untested; use"
                " Broker(None, root, storage_options=...) for the native engine alone, or"
                " engine='spark' without storage_options for Spark alone"
            )
        elif engine == "native" or storage_options:
            raise InvalidParameterValue(
                f"this Spark session's Delta log store for {layout} does not commit with"
                " conditional puts, so its commits and the native engine's could overwrite"
                " each other there; start the session with sparkqueue.spark_session("
                "storage_options=...) (S3; on Azure, an abfss:// root with Delta's default log"
                " store), or use Broker(None, root, storage_options=...)"
                " for the native engine alone, or engine='spark' without storage_options"
            )
        else:
            return None
    if engine != "native" and storage is not None and storage.connect:
        return None  # a Spark Connect session: its server writes the tables
    return NativeTables(layout, policy, storage_options)
