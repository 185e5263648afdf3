"""The `"sparkqueue"` data source on the session's local Spark: batch read and write, the
streaming source (AvailableNow drains, failures and restarts from the checkpoint, FIFO order,
heartbeats, two queries on one queue) and the streaming sink (a replayed batch not sent again)."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from sparkqueue import Broker
from sparkqueue.testing import FakeClock


@pytest.fixture
def root(tmp_path) -> str:
    return str(tmp_path / "root")


def _source(spark, root: str, queue: str, **options):
    reader = spark.readStream.format("sparkqueue").option("root", root).option("queue", queue)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _drain(frame, checkpoint: Path, sink: Path):
    query = (
        frame.writeStream.format("delta")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(sink))
    )
    query.awaitTermination(120)
    return query


def _each_batch(frame, handle, checkpoint: Path):
    """An AvailableNow query handing each batch to `handle(batch, batch_id)`, started."""
    return (
        frame.writeStream.foreachBatch(handle)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def _bodies(spark, sink: Path) -> Counter:
    return Counter(row.body for row in spark.read.format("delta").load(str(sink)).collect())


def test_a_written_dataframe_is_sent_and_read_back_without_claiming(spark, broker, root):
    broker = Broker(spark, root)
    queue = broker.create_queue("orders")
    frame = spark.createDataFrame(
        [("a", {"k": "v"}, 0), ("b", None, 0), ("c", None, 600)],
        "body string, attributes map<string,string>, delay_seconds int",
    )
    frame.write.format("sparkqueue").option("root", root).option("queue", "orders").mode(
        "append"
    ).save()
    stats = queue.stats()
    assert (stats.visible, stats.delayed) == (2, 1)
    read = spark.read.format("sparkqueue").option("root", root).option("queue", "orders").load()
    rows = {row.body: row for row in read.collect()}
    assert set(rows) == {"a", "b"} and rows["a"].attributes == {"k": "v"}
    assert rows["a"].receipt_handle is None and rows["a"].receive_count == 0
    assert queue.stats().visible == 2  # reading claimed nothing
    assert sorted(m.body for m in queue.receive(10)) == ["a", "b"]


def test_wrong_options_columns_and_rows_fail_naming_what_is_allowed(spark, root):
    queue = Broker(spark, root).create_queue("orders")

    def fails(action, *words: str) -> None:
        with pytest.raises(Exception) as caught:
            action()
        for word in words:
            assert word in str(caught.value), str(caught.value)

    def base():  # a reader keeps the options it was given: a new one each time
        return spark.read.format("sparkqueue").option("root", root)

    fails(lambda: base().option("queue", "orders").option("color", "red").load(), "'color'")
    fails(lambda: base().option("queue", "nowhere").load(), "nowhere")
    fails(lambda: base().load(), "'queue'")
    fails(
        lambda: spark.read.format("sparkqueue").option("catalog", "main.q").option("queue", "o").load(),
        "catalog",
    )  # fmt: skip
    fails(lambda: _source(spark, root, "orders", maxMessagesPerTrigger="lots"), "whole number")
    fails(lambda: _source(spark, root, "orders", visibilityTimeout=1), "visibilityTimeout")
    once = _source(spark, root, "orders").writeStream.format("noop")  # leaves no table behind
    fails(lambda: once.trigger(once=True).start().awaitTermination(60), "availableNow")

    def write(frame, mode: str = "append") -> None:
        frame.write.format("sparkqueue").option("root", root).option("queue", "orders").mode(
            mode
        ).save()

    good = spark.createDataFrame([("a",)], "body string")
    fails(lambda: write(good, "overwrite"), "append")
    fails(lambda: write(good.withColumn("extra", F.lit(1))), "'extra'")
    bad = spark.createDataFrame([("fine",), ("",)], "body string")  # an empty body
    fails(lambda: write(bad), "nothing is")
    assert queue.stats().visible == 0  # nothing of the failed writes was sent


def test_available_now_drains_what_is_visible_into_a_delta_sink_once(spark, root, tmp_path):
    queue = Broker(spark, root).create_queue("work")
    queue.send_batch([f"m{i}" for i in range(45)])
    query = _drain(
        _source(spark, root, "work", maxMessagesPerTrigger=20),
        tmp_path / "checkpoint",
        tmp_path / "sink",
    )
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [20, 20, 5]
    assert _bodies(spark, tmp_path / "sink") == Counter(f"m{i}" for i in range(45))
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (0, 0)  # every batch deleted, the last one too


def test_a_failed_batch_is_replayed_on_restart_without_what_another_consumer_took(
    spark, root, tmp_path
):
    queue = Broker(spark, root).create_queue("work", visibility_timeout=300)
    sent = set(queue.send_batch([f"m{i}" for i in range(8)]))
    checkpoint, sink = tmp_path / "checkpoint", tmp_path / "sink"

    def failing(batch, batch_id):
        raise RuntimeError("the sink is down")

    query = _each_batch(_source(spark, root, "work"), failing, checkpoint)
    with pytest.raises(PySparkException, match="the sink is down"):
        query.awaitTermination(120)
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (0, 8)  # the failed batch still holds them
    # After the batch's timeout (a fake clock's) another consumer takes one of them.
    later = FakeClock(datetime.now(UTC) + timedelta(seconds=301))
    [taken] = Broker(None, root, clock=later).get_queue("work").receive(1)
    assert taken.receive_count == 2
    _drain(_source(spark, root, "work"), checkpoint, sink)  # the restart replays the batch
    assert _bodies(spark, sink) == Counter(sent_body for sent_body in _sent_bodies(sent, taken))
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (0, 1)  # only the other consumer's is left


def _sent_bodies(sent: set[str], taken) -> list[str]:
    assert taken.message_id in sent
    return [f"m{i}" for i in range(8) if f"m{i}" != taken.body]


def test_the_sink_sends_each_row_once_even_when_spark_replays_a_batch(spark, root, tmp_path):
    queue = Broker(spark, root).create_queue("out")
    source = tmp_path / "source"
    spark.createDataFrame([(f"r{i}",) for i in range(5)], "body string").write.format("delta").save(
        str(source)
    )
    checkpoint = tmp_path / "checkpoint"

    def run() -> None:
        query = (
            spark.readStream.format("delta")
            .load(str(source))
            .writeStream.format("sparkqueue")
            .option("root", root)
            .option("queue", "out")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)

    run()
    assert queue.stats().visible == 5
    # As after a crash between the queue's commit and Spark's: the batch is run again.
    (checkpoint / "commits" / "0").unlink()
    run()
    assert sorted(m.body for m in queue.receive(10)) == [f"r{i}" for i in range(5)]
    # A new query on the old checkpoint's folder is a sink of its own: its batch 0 is sent.
    shutil.rmtree(checkpoint)
    run()
    assert queue.stats().visible == 5


def test_fifo_groups_keep_their_order_across_batches(spark, root, tmp_path):
    queue = Broker(spark, root).create_queue("jobs.fifo", fifo=True)
    queue.send_batch(
        [
            {"body": f"{group}-{n}", "group_id": group, "deduplication_id": f"{group}-{n}"}
            for n in range(6)
            for group in ("a", "b", "c")
        ]
    )
    seen: list[tuple[int, str, int]] = []

    def collect(batch, batch_id):
        seen.extend((batch_id, row.group_id, row.sequence_number) for row in batch.collect())

    frame = _source(spark, root, "jobs.fifo", maxMessagesPerTrigger=4)
    _each_batch(frame, collect, tmp_path / "checkpoint").awaitTermination(120)
    assert len(seen) == 18
    for group in "abc":
        numbers = [(b, s) for b, g, s in seen if g == group]
        assert sorted(numbers) == sorted(numbers, key=lambda pair: pair[1])  # batch order = sends
    assert queue.stats().visible == 0


def test_a_long_batch_keeps_its_messages_hidden(spark, root, tmp_path):
    queue = Broker(spark, root).create_queue("work")
    queue.send_batch([f"m{i}" for i in range(10)])
    other = Broker(None, root).get_queue("work")
    stolen: list[str] = []

    def slow(batch, batch_id):  # the batch runs past its 10-second timeout
        deadline = time.monotonic() + 13
        while time.monotonic() < deadline:
            stolen.extend(m.body for m in other.receive(10))
            time.sleep(0.3)
        batch.write.format("delta").mode("append").save(str(tmp_path / "sink"))

    frame = _source(spark, root, "work", visibilityTimeout=10)
    _each_batch(frame, slow, tmp_path / "checkpoint").awaitTermination(120)
    assert stolen == []  # the heartbeat kept every message of the batch hidden
    assert _bodies(spark, tmp_path / "sink") == Counter(f"m{i}" for i in range(10))
    assert queue.stats().in_flight == 0


def test_two_queries_on_one_queue_share_its_messages(spark, root, tmp_path):
    queue = Broker(spark, root).create_queue("work")
    queue.send_batch([f"m{i}" for i in range(60)])
    queries = [
        _source(spark, root, "work", maxMessagesPerTrigger=10)
        .writeStream.format("delta")
        .option("checkpointLocation", str(tmp_path / f"checkpoint-{n}"))
        .trigger(availableNow=True)
        .start(str(tmp_path / f"sink-{n}"))
        for n in range(2)
    ]
    for query in queries:
        query.awaitTermination(120)
        assert query.exception() is None
    bodies = [_bodies(spark, tmp_path / f"sink-{n}") for n in range(2)]
    assert bodies[0] + bodies[1] == Counter(f"m{i}" for i in range(60))  # none twice, none lost
    assert queue.stats().in_flight == 0
