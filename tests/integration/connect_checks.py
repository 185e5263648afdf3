"""The library over Spark Connect: a real Connect server with Delta; this process is only a client.

Run by test_connect.py in a pytest process of its own: Spark refuses a Connect session in a process
that already has a classic one (the main run's fixtures), and a client-only process is the point.
"""

from __future__ import annotations

import pytest
from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sparkqueue import Broker
from sparkqueue.errors import QueueDoesNotExist, ReceiptHandleIsInvalid
from tests.integration.helpers import run_threads
from tests.integration.servers import connect_server


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    with connect_server(tmp_path_factory.mktemp("connect")) as url:
        session = SparkSession.builder.remote(url).getOrCreate()
        yield session
        session.stop()


@pytest.fixture
def broker(remote, tmp_path, clock):
    return Broker(remote, str(tmp_path / "root"), clock=clock)


def test_the_session_is_a_connect_client(remote, broker):
    assert type(remote).__module__.startswith("pyspark.sql.connect")
    assert broker.storage.connect
    assert SparkContext._active_spark_context is None  # no JVM in this process


def test_standard_queue_behaviours_over_connect(broker, clock):
    queue = broker.create_queue("work", visibility_timeout=30)
    assert broker.create_queue("work", visibility_timeout=30).name == "work"  # idempotent
    queue.send_batch(["a", "b", "c"])

    held = queue.receive(2)
    other = queue.receive(10)
    assert len(held) == 2 and len(other) == 1
    assert {m.body for m in held + other} == {"a", "b", "c"}

    queue.change_visibility(held[0].receipt_handle, 0)  # released at once
    [again] = queue.receive()
    assert again.message_id == held[0].message_id and again.receive_count == 2
    with pytest.raises(ReceiptHandleIsInvalid):
        queue.delete(held[0].receipt_handle)  # superseded by the second receive
    queue.delete(again.receipt_handle)
    outcome = queue.delete_batch([held[1].receipt_handle, other[0].receipt_handle, "bogus"])
    assert len(outcome.successful) == 2 and list(outcome.failed.values()) == [
        "ReceiptHandleIsInvalid"
    ]

    queue.send_df(queue_bodies(broker, 20))
    batch = queue.receive_df(15)
    assert batch.count() == 15 and batch.count() == 15  # stable: no second claim
    assert len(queue.delete_df(batch).successful) == 15
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (5, 0)
    assert queue.purge() == 5
    broker.delete_queue("work")
    with pytest.raises(QueueDoesNotExist):
        broker.get_queue("work")


def test_catalog_mode_over_connect(remote, tmp_path, clock):
    """Queues as tables of a catalog schema, driven from a Connect client (as on Databricks)."""
    remote.sql(f"CREATE SCHEMA connect_queues LOCATION '{tmp_path / 'connect_queues.db'}'")
    broker = Broker(remote, catalog="spark_catalog.connect_queues", clock=clock)
    broker.create_queue("dead")
    queue = broker.create_queue("jobs", dead_letter_queue="dead", max_receive_count=1)
    queue.send_batch(["a", "b"])
    [held] = queue.receive(1)
    queue.delete(held.receipt_handle)
    queue.send_df(queue_bodies(broker, 6))
    batch = queue.receive_df(5)
    assert len(queue.delete_df(batch).successful) == 5

    def handler(batch):  # the worker loop, whose handler fails both messages left
        return batch.select("message_id", F.lit(False).alias("succeeded"))

    report = queue.consume(handler, batch_size=10, max_batches=1)
    assert (report.deleted, report.failed) == (0, 2)  # received once and never deleted
    clock.advance(31)
    assert broker.redrive().moved_to_dead_letter == 2
    report = broker.get_queue("dead").consume(
        lambda b: b.select("message_id", F.upper("body").alias("result")),
        sink="spark_catalog.connect_queues.results",
        max_empty_polls=1,
        poll_interval=0,
    )
    assert report.deleted == 2 and remote.read.table("connect_queues.results").count() == 2
    tables = {row.tableName for row in remote.sql("SHOW TABLES IN connect_queues").collect()}
    assert {"sparkqueue_queues", "sparkqueue_metrics", "results"} <= tables


def test_concurrent_receivers_over_connect_share_without_duplicates(broker):
    queue = broker.create_queue("shared")
    queue.send_df(queue_bodies(broker, 12))
    seen: list[str] = []

    def consumer():
        for _ in range(4):
            messages = queue.receive(3)
            seen.extend(m.message_id for m in messages)
            if messages:
                queue.delete_batch([m.receipt_handle for m in messages])

    run_threads([consumer, consumer])
    assert len(seen) == len(set(seen))  # nothing delivered twice
    assert len(seen) + queue.stats().visible == 12  # nothing lost


def queue_bodies(broker, count):
    return broker.spark.range(count).select(
        F.concat(F.lit("job "), F.col("id").cast("string")).alias("body")
    )


def test_the_sparkqueue_format_streams_and_writes_over_connect(remote, tmp_path):
    root = str(tmp_path / "root")
    queue = Broker(remote, root).create_queue("stream")  # it registered the format (wall clock)
    rows = remote.createDataFrame([(f"r{i}",) for i in range(30)], "body string")
    rows.write.format("sparkqueue").option("root", root).option("queue", "stream").mode(
        "append"
    ).save()
    assert queue.stats().visible == 30
    sink = str(tmp_path / "sink")
    query = (
        remote.readStream.format("sparkqueue")
        .option("root", root)
        .option("queue", "stream")
        .option("maxMessagesPerTrigger", 10)
        .load()
        .writeStream.format("delta")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start(sink)
    )
    query.awaitTermination(300)
    drained = remote.read.format("delta").load(sink)
    assert sorted(row.body for row in drained.collect()) == sorted(f"r{i}" for i in range(30))
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (0, 0)
