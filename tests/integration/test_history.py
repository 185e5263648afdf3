"""`Queue.history` over tables Spark wrote: its receives, DataFrame claims and redrive passes
(moves, releases, retention) read back from the same log as the native engine's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pyspark.sql import functions as F

from sparkqueue import Broker
from sparkqueue.testing import FakeClock

from .conftest import both_engines


@pytest.fixture
def clock() -> FakeClock:
    """Near the wall clock, as a broker's is (expiry is read against the commit's time)."""
    return FakeClock(datetime.now(UTC) - timedelta(minutes=10))


@both_engines
def test_spark_passes_and_both_engines_operations_make_one_history(broker, clock):
    broker.create_queue("dlq")
    queue = broker.create_queue(
        "work", visibility_timeout=30, dead_letter_queue="dlq", max_receive_count=2
    )
    message_id = queue.send("a life")
    queue.receive(1)
    clock.advance(31)
    queue.receive(1)
    clock.advance(31)
    spark_pass = Broker(broker.spark, broker.root, engine="spark", clock=clock)
    assert spark_pass.redrive().moved_to_dead_letter == 1
    spark_pass.get_queue("dlq").start_message_move()
    [message] = queue.receive(1)
    queue.delete(message.receipt_handle)

    assert [(e.kind, e.detail["queue"]) for e in queue.history(message_id)] == [
        ("sent", "work"),
        ("received", "work"),
        ("received", "work"),
        ("moved_out", "work"),
        ("moved_in", "dlq"),
        ("moved_out", "dlq"),
        ("moved_in", "work"),
        ("received", "work"),
        ("deleted", "work"),
    ]


def test_dataframe_sends_claims_releases_and_expiry(spark, broker, clock):
    spark_broker = Broker(spark, broker.root, engine="spark", clock=clock)
    queue = spark_broker.create_queue("bulk", visibility_timeout=10, retention_seconds=60)
    queue.send_df(spark.range(3).select(F.col("id").cast("string").alias("body")))
    claimed = queue.receive_df(1).collect()
    message_id = claimed[0].message_id
    clock.advance(11)
    assert spark_broker.redrive().released == 1
    clock.advance(60)
    assert spark_broker.redrive().expired_by_retention == 3

    events = broker.get_queue("bulk").history(message_id)

    assert [e.kind for e in events] == ["sent", "received", "released", "expired"]


def test_a_spark_numbered_fifo_queue_has_a_history(spark, broker, clock):
    spark_broker = Broker(spark, broker.root, engine="spark", clock=clock)
    fifo = spark_broker.create_queue("spark.fifo", fifo=True, content_based_deduplication=True)
    message_id = fifo.send("in order", group_id="g")
    [message] = fifo.receive(1)
    fifo.delete(message.receipt_handle)

    assert [e.kind for e in spark_broker.history("spark.fifo", message_id)] == [
        "sent",
        "received",
        "deleted",
    ]
