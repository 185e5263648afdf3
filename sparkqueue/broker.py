"""The Broker: a set of queues under one storage root, each queue one Delta table."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from .attributes import QueueAttributes, check_queue_name
from .clock import Clock, wall_clock
from .errors import InvalidParameterValue, QueueAlreadyExists, QueueDoesNotExist
from .fifo import FIFO_TABLE_PROPERTIES
from .handles import new_token
from .queue import Queue
from .redrive import METRICS_SCHEMA, Redrive, RedriveReport, RedriveSettings, metrics_path
from .registry import QueueRecord, Registry
from .sink import check_sink, write_once
from .storage import MESSAGE_SCHEMA, QUEUE_TABLE_PROPERTIES, Storage
from .transactions import RetryPolicy


class Broker:
    """Entry point: create, find and delete queues; every Broker on one root sees the same queues."""

    def __init__(
        self,
        spark: SparkSession,
        root: str,
        *,
        clock: Clock | None = None,
        retry: RetryPolicy | None = None,
        attribute_cache_seconds: float = 5.0,
    ) -> None:
        self.spark = spark
        self.clock: Clock = clock or wall_clock
        self.storage = Storage(spark, root, retry or RetryPolicy())
        self.registry = Registry(self.storage, attribute_cache_seconds)

    @property
    def root(self) -> str:
        return self.storage.root

    @property
    def conflict_retries(self) -> int:
        """How many times an operation of this broker re-ran after a Delta commit conflict."""
        return self.storage.conflicts.value

    def create_queue(
        self,
        name: str,
        *,
        visibility_timeout: int = 30,
        delay_seconds: int = 0,
        retention_seconds: int = 345_600,
        max_message_bytes: int = 262_144,
        dead_letter_queue: str | None = None,
        max_receive_count: int | None = None,
        fifo: bool = False,
        content_based_deduplication: bool = False,
        shards: int = 8,
    ) -> Queue:
        """Creates a queue, or returns it when it exists with exactly these attributes."""
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
        )
        existing = self.registry.get(name, fresh=True)
        if existing is None:
            self.check_dead_letter_queue(name, attributes)
            record = QueueRecord(
                name,
                attributes,
                new_token(),
                self.storage.path("queues", f"{name}-{uuid.uuid4().hex[:12]}"),
            )
            self.storage.create_table(
                record.location,
                MESSAGE_SCHEMA,
                partition_by=("shard",),
                properties={**QUEUE_TABLE_PROPERTIES, **(FIFO_TABLE_PROPERTIES if fifo else {})},
            )
            if self.registry.insert_if_absent(record):
                return Queue(self, name)
            self.storage.drop_table(record.location)  # lost a race to a concurrent create
            existing = self.registry.get(name, fresh=True)
            if existing is None:
                raise QueueAlreadyExists(
                    f"queue {name!r} was created and deleted concurrently; retry"
                )
        if existing.attributes != attributes:
            raise QueueAlreadyExists(
                f"queue {name!r} already exists with different attributes:"
                f" {_difference(existing.attributes, attributes)}"
            )
        return Queue(self, name)

    def get_queue(self, name: str) -> Queue:
        check_queue_name(name)
        self.record(name)
        return Queue(self, name)

    def list_queues(self, prefix: str = "") -> list[str]:
        if not isinstance(prefix, str):
            raise InvalidParameterValue("prefix must be a str")
        return sorted(n for n in self.registry.records(fresh=True) if n.startswith(prefix))

    def delete_queue(self, name: str) -> None:
        check_queue_name(name)
        record = self.record(name, fresh=True)
        if not self.registry.remove(name):
            raise QueueDoesNotExist(f"queue {name!r} does not exist")
        self.storage.drop_table(record.location)

    def redrive(
        self, queues: Sequence[str] | None = None, *, settings: RedriveSettings | None = None
    ) -> RedriveReport:
        """One pass of the redrive job: dead-letter moves, releases, retention (and due upkeep)."""
        return Redrive(self, settings).run(queues)

    def redrive_metrics(self) -> DataFrame:
        """The redrive job's per-pass, per-queue metrics (depth, moves, timings) for dashboards."""
        path = metrics_path(self.storage)
        self.storage.ensure_table(path, METRICS_SCHEMA)
        return self.storage.read(path)

    def write_once(self, results: DataFrame, sink: str, *, key: str = "message_id") -> int | None:
        """Appends to the Delta table `sink` the rows whose `key` it lacks; returns rows written
        (None over Spark Connect). Keyed by message id, a redelivered message's results are never
        written twice."""
        return write_once(self.storage, results, check_sink(sink), key=key)

    # -- used by Queue --------------------------------------------------------------------------

    def record(self, name: str, *, fresh: bool = False) -> QueueRecord:
        record = self.registry.get(name, fresh=fresh)
        if record is None:
            raise QueueDoesNotExist(f"queue {name!r} does not exist under {self.root}")
        return record

    def check_dead_letter_queue(self, name: str, attributes: QueueAttributes) -> None:
        """A dead-letter queue must exist on this broker, be of the same type, and not be itself."""
        target = attributes.dead_letter_queue
        if target is None:
            return
        if target == name:
            raise InvalidParameterValue(f"queue {name!r} cannot be its own dead-letter queue")
        record = self.registry.get(target, fresh=True)
        if record is None:
            raise InvalidParameterValue(
                f"dead_letter_queue {target!r} does not exist; create it first on this broker"
            )
        if record.attributes.fifo != attributes.fifo:
            kind = "FIFO" if attributes.fifo else "standard"
            raise InvalidParameterValue(
                f"the dead-letter queue of a {kind} queue must be {kind} too; {target!r} is not"
            )


def _difference(current: QueueAttributes, wanted: QueueAttributes) -> str:
    have: dict[str, Any] = current.as_dict()
    want = wanted.as_dict()
    return ", ".join(f"{k}={have[k]!r} (asked {want[k]!r})" for k in have if have[k] != want[k])
