"""The queues a scenario starts from (their messages, their table properties), and what is left
of the messages after it."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ..broker import Broker
from ..engine.conditions import claimable

BODY_BYTES = 100  # each message body's size


def bodies(spark: SparkSession, count: int):
    """`count` distinct bodies of BODY_BYTES bytes each."""
    return spark.range(count).select(
        F.lpad(F.col("id").cast("string"), BODY_BYTES, "x").alias("body")
    )


def fill(
    broker: Broker, queue: Any, count: int, *, groups: int = 0, tenant: str | None = None
) -> None:
    """Puts `count` distinct bodies in `queue` before a scenario's clock starts: with Spark's
    send_df where the broker has a session, else in one native send_batch (an object-storage
    root). `groups`: a FIFO queue's, bodies spread over that many groups; `tenant`: a standard
    queue's one group (fair queues)."""
    if broker.spark is None:
        rows = [str(i).rjust(BODY_BYTES, "x") for i in range(count)]
        if tenant is not None:
            queue.send_batch([{"body": b, "group_id": tenant} for b in rows])
        elif groups:
            queue.send_batch(
                [{"body": b, "group_id": str(i % groups), "deduplication_id": b}
                 for i, b in enumerate(rows)]
            )  # fmt: skip
        else:
            queue.send_batch(rows)
    elif tenant is not None:
        queue.send_df(
            bodies(broker.spark, count).withColumn("tenant", F.lit(tenant)), group_id="tenant"
        )
    elif groups:
        frame = bodies(broker.spark, count)
        frame = frame.withColumn("group", (F.xxhash64("body") % groups).cast("string"))
        queue.send_df(frame, group_id="group", deduplication_id="body")
    else:
        queue.send_df(bodies(broker.spark, count))


def fill_in_chunks(queue: Any, count: int) -> None:
    """Puts `count` bodies in `queue` natively, 10,000 per send_batch: backlogs of millions for
    the scenarios whose parent process starts no JVM (scaling, drivers)."""
    for start in range(0, count, 10_000):
        queue.send_batch([f"work {i}" for i in range(start, min(start + 10_000, count))])


def left_in(broker: Broker, queue: Any) -> set[str]:
    """The ids of the messages a receive could still take after a load scenario (what
    `peek_df` shows), read by the broker's engine."""
    native = broker.context.native
    if broker.engine == "native" and native is not None:
        record = broker.context.record(queue.name)
        takeable = claimable(broker.context.now(), record.attributes)
        return {row.message_id for row in native.select(record.location, ["message_id"], takeable)}
    return {row.message_id for row in queue.peek_df(10_000_000).select("message_id").collect()}


def set_table_properties(broker: Broker, name: str, properties: dict[str, str]) -> None:
    """Sets Delta table properties on queue `name`'s table, through the broker's engine (a
    scenario that compares queues differing in one property)."""
    record = broker.context.record(name)
    tables = broker.context.native if broker.engine == "native" else broker.context.storage
    assert tables is not None
    tables.set_properties(record.location, properties)
