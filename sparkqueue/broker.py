"""`Broker`: the public entry point, a set of queues under a storage root or in a catalog schema.

It owns the storage, registry and clock, hands them to the engine and services as one
`QueueContext`, and checks arguments; no lower layer ever sees the Broker itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from .attributes import QueueAttributes
from .clock import Clock, wall_clock
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
from .model import RedriveReport
from .queue import Queue
from .rules.checks import check_queue_name
from .services.redrive import Redrive
from .services.settings import RedriveSettings
from .services.sink import write_once
from .store.registry import Registry
from .store.schema import METRICS_SCHEMA
from .store.storage import Storage
from .store.tables import PathLayout, open_catalog
from .store.transactions import RetryPolicy


class Broker:
    """Create, find and delete queues; every Broker on one root (or catalog schema) sees the same
    queues.

    `root` keeps the queues as Delta tables under a storage path; `catalog` ("main.queues", or a
    schema of the current catalog) keeps them as tables of that existing catalog schema, Unity
    Catalog on Databricks. Exactly one of the two is given.
    """

    def __init__(
        self,
        spark: SparkSession,
        root: str | None = None,
        *,
        catalog: str | None = None,
        clock: Clock | None = None,
        retry: RetryPolicy | None = None,
        attribute_cache_seconds: float = ATTRIBUTE_CACHE_SECONDS,
    ) -> None:
        if (root is None) == (catalog is None):
            raise InvalidParameterValue(
                "give a Broker exactly one of root (a storage path) or catalog (a catalog schema"
                f" such as 'main.queues'); got root={root!r}, catalog={catalog!r}"
            )
        self.spark = spark
        layout = PathLayout(root) if root is not None else open_catalog(spark, str(catalog))
        storage = Storage(spark, layout, retry or RetryPolicy())
        # The registry's reads and MERGEs are single-row work: the interpreting session's.
        registry = Registry(storage.interpreted, attribute_cache_seconds)
        self.context = QueueContext(storage, registry, clock or wall_clock)

    def __repr__(self) -> str:
        return f"Broker({self.context.storage.layout.where})"

    @property
    def root(self) -> str | None:
        """The storage root's URI (None in catalog mode)."""
        layout = self.context.storage.layout
        return layout.uri if isinstance(layout, PathLayout) else None

    @property
    def catalog(self) -> str | None:
        """The catalog schema, `catalog.schema` (None for a broker on a root)."""
        layout = self.context.storage.layout
        return None if isinstance(layout, PathLayout) else str(layout)

    @property
    def storage(self) -> Storage:
        return self.context.storage

    @property
    def conflict_retries(self) -> int:
        """How many times an operation of this broker re-ran after a Delta commit conflict."""
        return self.context.storage.conflicts.value

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
        )
        lifecycle.create_queue(self.context.quick, name, attributes)
        return Queue(self.context, name)

    def get_queue(self, name: str) -> Queue:
        """The queue named `name`; QueueDoesNotExist if there is none."""
        check_queue_name(name)
        lifecycle.open_table(self.context.quick, self.context.record(name))
        return Queue(self.context, name)

    def list_queues(self, prefix: str = "") -> list[str]:
        if not isinstance(prefix, str):
            raise InvalidParameterValue("prefix must be a str")
        return sorted(n for n in self.context.registry.records(fresh=True) if n.startswith(prefix))

    def delete_queue(self, name: str) -> None:
        """Removes the queue and its data; QueueDoesNotExist if there is none."""
        check_queue_name(name)
        lifecycle.delete_queue(self.context.quick, name)

    def redrive(
        self, queues: Sequence[str] | None = None, *, settings: RedriveSettings | None = None
    ) -> RedriveReport:
        """One pass of the redrive job: dead-letter moves, releases, retention (and due upkeep)."""
        return Redrive(self.context, settings).run(queues)

    def redrive_metrics(self) -> DataFrame:
        """The redrive job's per-pass, per-queue metrics (depth, moves, timings) for dashboards."""
        table = self.context.storage.layout.metrics
        self.context.storage.ensure_table(table, METRICS_SCHEMA)
        return self.context.storage.read(table)

    def write_once(self, results: DataFrame, sink: str, *, key: str = "message_id") -> int | None:
        """Appends to the Delta table `sink` the rows whose `key` it lacks; returns rows written
        (None over Spark Connect). Keyed by message id, a redelivered message's results are never
        written twice."""
        return write_once(self.context.storage, results, sink, key=key)
