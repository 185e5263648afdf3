"""The worker loop (`Queue.consume`) and effectively-once results (`Queue.write_once`)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from sparkqueue.engine.frames import acknowledge_df
from sparkqueue.errors import InvalidParameterValue
from sparkqueue.services import batches
from sparkqueue.services.sink import write_once
from tests.integration.helpers import queue_table, run_threads


def results_of(batch):
    """A handler's typical output: one result row per message, keyed by message id."""
    return batch.select("message_id", F.upper("body").alias("result"))


def test_consume_deletes_what_succeeded_and_failures_reach_the_dead_letter_queue(broker, clock):
    broker.create_queue("dead")
    queue = broker.create_queue("work", dead_letter_queue="dead", max_receive_count=1)
    queue.send_batch([f"job {i}" for i in range(6)])

    def handler(batch):
        failed = F.col("body").isin("job 1", "job 4")
        return batch.select("message_id", (~failed).alias("succeeded"))

    report = queue.consume(handler, batch_size=10, max_batches=1)

    assert (report.batches, report.received, report.deleted, report.failed) == (1, 6, 4, 2)
    assert report.stopped_by == "max_batches"
    assert queue.stats().in_flight == 2
    clock.advance(31)
    assert queue.stats().awaiting_dead_letter == 2  # the redrive job's next pass moves them


def test_a_failing_handler_leaves_its_batch_for_retry(queue, clock):
    queue.send_batch(["a", "b"])

    def handler(batch):
        raise RuntimeError("downstream is down")

    report = queue.consume(handler, max_empty_polls=1, poll_interval=0)

    assert (report.batches, report.handler_errors, report.deleted) == (1, 1, 0)
    assert report.stopped_by == "empty"  # the failed batch is still hidden
    clock.advance(31)
    assert queue.consume(lambda batch: None, max_batches=1).deleted == 2


def test_sigterm_stops_the_loop_after_the_batch_in_hand(queue):
    queue.send_batch(["a", "b", "c"])
    before = signal.getsignal(signal.SIGTERM)

    def handler(batch):
        os.kill(os.getpid(), signal.SIGTERM)

    report = queue.consume(handler, batch_size=1)

    assert (report.batches, report.deleted, report.stopped_by) == (1, 1, "SIGTERM")
    assert signal.getsignal(signal.SIGTERM) is before
    assert queue.stats().visible == 2


def test_the_heartbeat_keeps_a_slow_batch_hidden(queue, clock):
    queue.send("slow")
    seen_by_others: list[int] = []

    def hidden_until():
        return queue_table(queue).select("visible_at").first().visible_at

    def handler(batch):
        received_until = hidden_until()
        clock.advance(20)
        deadline = time.monotonic() + 60
        while hidden_until() == received_until and time.monotonic() < deadline:
            pass  # wait for the heartbeat's first extension (from the new "now")
        clock.advance(20)  # 40 s after the receive: past the 30 s it started with
        seen_by_others.append(len(queue.receive()))

    report = queue.consume(handler, heartbeat_interval=0.1, max_batches=1)

    assert seen_by_others == [0]
    assert report.deleted == 1


def test_a_redelivered_batch_adds_no_rows_to_the_sink(queue, broker, clock, spark, tmp_path):
    sink = str(tmp_path / "results")
    queue.send_batch(["x", "y", "z"])
    first = queue.receive_df(10)
    write_once(broker.storage, results_of(first), sink)  # ... and the worker dies before deleting
    clock.advance(31)

    report = queue.consume(results_of, sink=sink, max_empty_polls=1, poll_interval=0)

    assert (report.received, report.deleted) == (3, 3)
    assert_df_equality(
        spark.read.format("delta").load(sink),
        results_of(first),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    assert queue.stats().visible + queue.stats().in_flight == 0


def test_concurrent_writes_of_one_batch_land_once(queue, broker, spark, tmp_path):
    """Two workers holding the same messages (a timeout ran out mid-batch) both write them."""
    sink = str(tmp_path / "results")
    queue.send_batch(["p", "q"])
    results = results_of(queue.receive_df(10)).cache()
    start = threading.Barrier(2)

    def worker():
        start.wait()
        write_once(broker.storage, results, sink)

    run_threads([worker, worker])

    assert spark.read.format("delta").load(sink).count() == 2


def test_write_once_deletes_the_batch_after_writing(queue, spark, tmp_path):
    sink = str(tmp_path / "results")
    queue.send_batch(["m", "n"])
    batch = queue.receive_df(10)

    outcome = queue.write_once(batch, results_of(batch), sink)

    assert len(outcome.successful) == 2
    assert spark.read.format("delta").load(sink).count() == 2


def test_bad_worker_arguments_are_rejected_before_anything_is_received(queue, spark, tmp_path):
    queue.send("keep me")
    bad = [
        {"handler": "not callable"},
        {"batch_size": 0},
        {"max_batches": 0},
        {"max_empty_polls": -1},
        {"poll_interval": -1},
        {"heartbeat_interval": 0},
        {"visibility_timeout": 43_201},
        {"sink": ""},
        {"sink": "/tmp/`results`"},
    ]
    for arguments in bad:
        handler = arguments.pop("handler", lambda batch: None)
        with pytest.raises(InvalidParameterValue):
            queue.consume(handler, **arguments)
    batch = spark.createDataFrame([("h",)], "receipt_handle string")
    with pytest.raises(InvalidParameterValue, match="no 'message_id' column"):
        queue.write_once(batch, batch, str(tmp_path / "results"))
    assert queue.stats().visible == 1


def test_write_once_quotes_its_key_and_refuses_one_it_cannot(broker, spark, tmp_path):
    """The key is a user's column name: quoted where it reaches Spark, checked before anything."""
    sink = str(tmp_path / "dotted")
    results = spark.createDataFrame([("a", 1), ("b", 2)], "`order.id` string, n int")
    assert broker.write_once(results, sink, key="order.id") == 2
    assert broker.write_once(results, sink, key="order.id") == 0
    assert spark.read.format("delta").load(sink).count() == 2

    odd = spark.createDataFrame([("a", 1)], "`we``ird` string, n int")
    with pytest.raises(InvalidParameterValue, match="without backticks"):
        broker.write_once(odd, str(tmp_path / "odd"), key="we`ird")
    assert not (tmp_path / "odd").exists()


def test_four_worker_loops_on_threads_share_commits_and_deliver_each_message_once(queue, statement):
    """Concurrent exchanges (each deleting its last batch while claiming the next) on one queue,
    sharing rounds of the group committer."""
    sent = set(queue.send_batch([f"job {i}" for i in range(40)]))
    seen: list[str] = []
    lock = threading.Lock()

    def handler(batch):
        with lock:
            seen.extend(row.message_id for row in batch.select("message_id").collect())

    def loop():
        queue.consume(
            handler, batch_size=4, visibility_timeout=3600, max_empty_polls=1, poll_interval=0
        )

    run_threads([loop] * 4)

    assert sorted(seen) == sorted(sent)  # every message once: none lost, none twice
    assert queue.stats().visible + queue.stats().in_flight == 0  # every batch was deleted
    committer = queue._ctx.commits._by_table[queue._ctx.record(queue.name).location]
    assert committer.carried > committer.rounds  # some rounds carried several loops' exchanges


def test_batches_too_big_to_exchange_are_deleted_by_their_claim(queue, spark, monkeypatch):
    """Above EXCHANGE_MAX_BATCH a batch is a `receive_df` claim: a whole batch that succeeded is
    deleted by the claim, a partly failed one handle by handle."""
    monkeypatch.setattr(batches, "EXCHANGE_MAX_BATCH", 5)
    queue.send_df(spark.range(25).select(F.col("id").cast("string").alias("body")))
    by_claim = []
    delete_df = acknowledge_df.delete_df
    monkeypatch.setattr(acknowledge_df, "delete_df", lambda *a: by_claim.append(1) or delete_df(*a))

    def handler(batch):
        return batch.select("message_id", (F.col("body") != "7").alias("succeeded"))

    report = queue.consume(handler, batch_size=10, max_empty_polls=1, poll_interval=0)
    assert (report.received, report.deleted, report.failed) == (25, 24, 1)
    assert len(by_claim) == 2  # the two batches without message 7
    assert queue.stats().in_flight == 1
