"""`Queue.history` over tables Spark wrote: its receives, DataFrame claims and redrive passes
(moves, releases, retention) read back from the same log as the native engine's."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from sparkqueue import Broker
from sparkqueue.testing import FakeClock
from tests.unit.conftest import near_wall_clock


@pytest.fixture
def clock() -> FakeClock:
    """Near the wall clock, as a broker's is (expiry is read against the commit's time)."""
    return near_wall_clock()


def test_native_operations_and_spark_passes_make_one_history(broker, clock):
    """The native engine's receives and deletes, Spark's redrive pass and move back, one log."""
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


def test_spark_writes_make_a_history_dataframes_passes_and_fifo(spark, broker, clock):
    """Spark's bulk send and DataFrame claim, its pass's release and expiry; and a FIFO queue
    Spark numbers, received and deleted through Spark."""
    spark_broker = Broker(spark, broker.root, engine="spark", clock=clock)
    queue = spark_broker.create_queue("bulk", visibility_timeout=10, retention_seconds=60)
    fifo = spark_broker.create_queue("spark.fifo", fifo=True, content_based_deduplication=True)
    in_order = fifo.send("in order", group_id="g")
    [message] = fifo.receive(1)
    fifo.delete(message.receipt_handle)
    queue.send_df(spark.range(3).select(F.col("id").cast("string").alias("body")))
    message_id = queue.receive_df(1).collect()[0].message_id
    clock.advance(11)
    assert spark_broker.redrive().released == 1
    clock.advance(60)
    assert spark_broker.redrive().expired_by_retention == 3

    events = broker.get_queue("bulk").history(message_id)

    assert [e.kind for e in events] == ["sent", "received", "released", "expired"]
    assert [e.kind for e in spark_broker.history("spark.fifo", in_order)] == [
        "sent",
        "received",
        "deleted",
    ]
