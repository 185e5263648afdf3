"""The data source's options, checked once, and the queue they name, opened natively.

Spark runs a Python data source's driver side in a Python worker of its own, and its tasks in
executors' workers: neither has the user's SparkSession. So the data source reaches the queue
through the native engine (delta-rs) on a root that engine writes: a local folder or object
storage, with `storage.<key>` options in delta-rs's keys (as `Broker(..., storage_options=)`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..attributes import QueueAttributes
from ..clock import wall_clock
from ..engine.context import QueueContext
from ..errors import InvalidParameterValue, MissingParameter
from ..limits import ATTRIBUTE_CACHE_SECONDS, MAX_VISIBILITY_SECONDS
from ..rules.checks import check_int, check_queue_name
from ..store.registry import QueueRecord, Registry
from ..store.tables import PathLayout, is_native_root
from ..store.transactions import RetryPolicy

if TYPE_CHECKING:
    from ..store.native_tables import NativeTables

DEFAULT_MAX_PER_TRIGGER = 10_000
# A batch is at most ten claims (10,000 messages each), each a token every read of it checks.
MAX_PER_TRIGGER = 100_000
# A stream's claims last at least this long: the heartbeat's first beat comes a third of it
# after the claim, and a batch's tasks must hold its messages until then.
MIN_STREAM_VISIBILITY_SECONDS = 10
STORAGE_PREFIX = "storage."
# Option names as users spell them (Spark passes them on in any case).
OPTIONS = ("root", "catalog", "queue", "maxMessagesPerTrigger", "visibilityTimeout")
# What Spark itself adds to a writer's options.
SPARK_OPTIONS = ("path", "checkpointLocation", "queryName")


@dataclass(frozen=True)
class QueueOptions:
    """Where the queue is and how a stream reads it."""

    root: str
    queue: str
    storage: dict[str, str] = field(default_factory=dict)
    max_per_trigger: int = DEFAULT_MAX_PER_TRIGGER
    visibility_timeout: int | None = None
    checkpoint: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> QueueOptions:
        """Every option checked: an unknown one, or a missing root or queue, is an error that
        names it and says what is allowed."""
        known = {name.lower(): name for name in (*OPTIONS, *SPARK_OPTIONS)}
        given: dict[str, str] = {}
        storage: dict[str, str] = {}
        for key, value in options.items():
            if key.lower().startswith(STORAGE_PREFIX):
                storage[key[len(STORAGE_PREFIX) :].upper()] = value
            elif key.lower() in known:
                given[known[key.lower()]] = value
            else:
                raise InvalidParameterValue(
                    f"the sparkqueue data source has no option {key!r}; its options are"
                    f" {list(OPTIONS)} and storage.<delta-rs key> (e.g. storage.AWS_ENDPOINT_URL)"
                )
        if "catalog" in given:
            raise InvalidParameterValue(
                "the sparkqueue data source reaches queues under a root (a local folder or object"
                " storage), not in a catalog schema: Spark runs it where no SparkSession is. Use"
                " Broker(spark, catalog=...).receive_df / send_df for a catalog's queues"
            )
        for name in ("root", "queue"):
            if not given.get(name):
                raise MissingParameter(f"the sparkqueue data source needs the option {name!r}")
        check_queue_name(given["queue"])
        return cls(
            root=given["root"],
            queue=given["queue"],
            storage=storage,
            max_per_trigger=_whole("maxMessagesPerTrigger", given, 1, MAX_PER_TRIGGER),
            visibility_timeout=_whole(
                "visibilityTimeout", given, MIN_STREAM_VISIBILITY_SECONDS, MAX_VISIBILITY_SECONDS
            ),
            checkpoint=given.get("checkpointLocation"),
        )

    def tables(self) -> NativeTables:
        """The root's tables, through the native engine."""
        from ..store.native_tables import NativeTables

        layout = PathLayout(self.root)
        if not is_native_root(layout):
            raise InvalidParameterValue(
                f"the sparkqueue data source needs a root on the local disk or on object storage"
                f" (s3://, gs://, abfss://, ...); got {self.root!r}"
            )
        return NativeTables(layout, RetryPolicy(), self.storage or None)

    def open(self) -> tuple[QueueContext, QueueRecord]:
        """The queue, through the native engine (QueueDoesNotExist when it is not there)."""
        tables = self.tables()
        registry = Registry(tables, ATTRIBUTE_CACHE_SECONDS)
        ctx = QueueContext(tables, registry, wall_clock, native=tables)
        return ctx, ctx.record(self.queue)

    def timeout(self, attributes: QueueAttributes) -> int:
        """The visibility timeout a stream's claims take: the option's, else the queue's."""
        if self.visibility_timeout is None:
            return max(attributes.visibility_timeout, MIN_STREAM_VISIBILITY_SECONDS)
        return self.visibility_timeout


def _whole(name: str, given: Mapping[str, str], low: int, high: int) -> int | None:
    if name not in given:
        return DEFAULT_MAX_PER_TRIGGER if name == "maxMessagesPerTrigger" else None
    try:
        value = int(given[name])
    except ValueError:
        raise InvalidParameterValue(
            f"the option {name!r} is a whole number from {low} to {high}; got {given[name]!r}"
        ) from None
    return check_int(name, value, low, high)
