"""Both engines on one queue at once: native (delta-rs) and Spark receives, deletes, visibility
changes, DataFrame claims and redrive passes, in threads of one process and in two processes.
Every message is held by one holder at a time, nothing is lost, nothing comes back after a delete.
"""

from __future__ import annotations

import glob
import os
import threading

import pytest
from pyspark.sql import functions as F

from sparkqueue import Broker
from sparkqueue.errors import InvalidParameterValue
from sparkqueue.services.redrive import Redrive
from sparkqueue.store.spark_s3 import LOG_STORE_CLASS
from sparkqueue.store.storage import Storage

from .helpers import run_threads
from .test_concurrency import VISIBILITY, _assert_exactly_once, _consume, share_with_a_child


@pytest.fixture
def spark_broker(spark, broker, clock) -> Broker:
    """A second broker on the same root whose per-message operations Spark runs."""
    assert broker.engine == "native"
    return Broker(spark, broker.root, engine="spark", clock=clock)


def test_the_engine_is_chosen_and_says_so(spark, broker, spark_broker, tmp_path):
    assert (broker.engine, spark_broker.engine) == ("native", "spark")
    assert Broker(None, str(tmp_path / "other")).engine == "native"
    assert Broker(spark, str(tmp_path / "other"), engine="native").engine == "native"
    assert "engine='native'" in repr(broker)


def test_on_object_storage_a_broker_with_spark_keeps_to_spark(spark):
    """Delta's own S3 log store and delta-rs's conditional puts do not exclude each other's
    commits, so a session with it keeps an object-storage root to one engine, and on gs:// every
    session does, saying why: no emulator enforces GCS's create-only put for both clients, so
    the pair is untested there (refused before anything is read: this session has no file
    system for either)."""
    for root, why in (
        ("s3a://bucket/queues", "does not commit with conditional puts"),
        ("gs://bucket/queues", "no local emulator enforces it for both clients"),
    ):
        with pytest.raises(InvalidParameterValue, match=why):
            Broker(spark, root, engine="native")
        with pytest.raises(InvalidParameterValue, match=why):
            Broker(spark, root, storage_options={"AWS_REGION": "us-east-1"})
    spark.conf.set("spark.delta.logStore.s3a.impl", LOG_STORE_CLASS)  # too late for Delta
    try:
        with pytest.raises(InvalidParameterValue, match="does not commit with conditional puts"):
            Broker(spark, "s3a://bucket/queues", engine="native")
    finally:
        spark.conf.unset("spark.delta.logStore.s3a.impl")


def test_threads_of_both_engines_share_one_queue(spark, broker, spark_broker):
    queue = broker.create_queue("mixed")
    spark_queue = spark_broker.get_queue("mixed")
    queue.send_df(spark.range(60).select(F.col("id").cast("string").alias("body")))
    sent = [r.message_id for r in queue.peek_df(100).select("message_id").collect()]
    received: list[str] = []
    lock = threading.Lock()

    def by_dataframe() -> None:
        """Spark's DataFrame claims beside the per-message receivers."""
        while True:
            frame = spark_queue.receive_df(7, visibility_timeout=VISIBILITY)
            rows = frame.select("message_id").collect()
            if not rows:
                return
            with lock:
                received.extend(row.message_id for row in rows)
            assert not spark_queue.delete_df(frame).failed

    consumers = [
        lambda q=q: _consume(q, received, batch=3, until=lambda: True, idle_polls=1)
        for q in (queue, queue, spark_queue)
    ]
    run_threads([*consumers, by_dataframe])
    _assert_exactly_once(sent, received)
    assert (queue.stats().visible, spark_queue.stats().in_flight) == (0, 0)


def test_a_native_claim_racing_a_spark_claim_has_one_winner(broker, spark_broker):
    queue = broker.create_queue("race")
    spark_queue = spark_broker.get_queue("race")
    for _ in range(4):
        queue.send("only one")
        start = threading.Barrier(2)
        got: dict[str, list] = {}

        def take(name: str, q, start=start, got=got) -> None:
            start.wait()
            got[name] = q.receive(1, visibility_timeout=VISIBILITY)

        run_threads([lambda: take("native", queue), lambda: take("spark", spark_queue)])
        winners = [m for messages in got.values() for m in messages]
        assert len(winners) == 1, got
        queue.delete(winners[0].receipt_handle)
    assert queue.stats().in_flight == 0


def test_visibility_changes_and_deletes_of_either_engine_hold_for_the_other(
    broker, spark_broker, clock
):
    queue = broker.create_queue("handover", visibility_timeout=30)
    spark_queue = spark_broker.get_queue("handover")
    queue.send_batch(["a", "b"])
    first, second = spark_queue.receive(2)
    queue.change_visibility(first.receipt_handle, 300)  # native extends a Spark receive
    spark_queue.delete(second.receipt_handle)  # Spark deletes what it received
    clock.advance(60)
    assert queue.receive(1) == []  # extended, and the deleted one stays deleted
    clock.advance(300)
    [again] = queue.receive(1)
    assert (again.message_id, again.receive_count) == (first.message_id, 2)
    spark_queue.delete(again.receipt_handle)
    assert spark_queue.stats().visible + queue.stats().in_flight == 0


CHILD = """
import json, pathlib, sys
from sparkqueue import Broker
from sparkqueue.errors import InvalidParameterValue
from sparkqueue.services.redrive import Redrive
from tests.integration.test_concurrency import share_the_queue

root, out, ready = sys.argv[1:4]
queue = Broker(None, root).get_queue("shared")  # the native engine alone: no JVM in this process
pathlib.Path(ready).touch()
json.dump(share_the_queue(queue, "child"), open(out, "w"))
"""


def test_a_native_process_and_a_spark_process_share_one_queue(spark_broker, tmp_path):
    queue = spark_broker.create_queue("shared")
    share_with_a_child(queue, CHILD, [spark_broker.root], tmp_path)


@pytest.mark.parametrize("step", ["marked", "copied"])
@pytest.mark.parametrize("marks", ["spark", "native"])
def test_a_move_one_engine_began_is_finished_once_by_the_others_pass(broker, clock, marks, step):
    """A redrive pass of one engine marks the exhausted messages (and, at "copied", copies
    them too); then a pass of the other engine finds the marks and finishes the move: its copy
    carries the marker as its app id, which both engines write and read as Delta's `txn`, so
    after a copy it copies nothing. The first pass then drops nothing: every message reaches
    the dead-letter queue exactly once."""
    dead = broker.create_queue("spent")
    work = broker.create_queue("tried", dead_letter_queue="spent", max_receive_count=1)
    sent = work.send_batch([f"m{i}" for i in range(40)])
    while work.receive(10, visibility_timeout=5):
        pass
    clock.advance(6)
    native = Broker(None, broker.root, clock=clock)
    first, second = (broker, native) if marks == "spark" else (native, broker)
    finished = []

    def the_other_pass_finishes(reached: str, queue: str) -> None:
        if step == reached and not finished:
            finished.append(second.redrive())

    report = Redrive(first.context, on_step=the_other_pass_finishes).run()

    assert (finished[0].moved_to_dead_letter, report.moved_to_dead_letter) == (40, 0)
    moved: list[str] = []
    while batch := dead.receive(10, visibility_timeout=600):
        moved += [m.message_id for m in batch]
    assert sorted(moved) == sorted(sent)  # each once
    left = work.stats()
    assert (left.visible, left.in_flight, left.awaiting_dead_letter) == (0, 0, 0)


def test_native_consumers_beside_redrive_passes_lose_nothing(spark, broker, clock):
    queue = broker.create_queue("redriven", visibility_timeout=5)
    queue.send_df(spark.range(40).select(F.col("id").cast("string").alias("body")))
    sent = [r.message_id for r in queue.peek_df(100).select("message_id").collect()]
    for message in queue.receive(10, visibility_timeout=0):  # expired receives to release
        assert message.receive_count == 1
    received: list[str] = []
    done = threading.Event()

    def redrive() -> None:
        while not done.is_set():
            broker.redrive(["redriven"])

    def consume() -> None:
        try:
            _consume(queue, received, batch=4, until=lambda: True, idle_polls=1)
        finally:
            done.set()

    run_threads([consume, consume, redrive])
    _assert_exactly_once(sent, received)


def _log_of(broker: Broker, name: str) -> str:
    return os.path.join(broker.context.record(name).location.removeprefix("file:"), "_delta_log")


def test_checkpoints_of_either_engine_are_read_by_the_other(broker, spark_broker):
    queue = broker.create_queue("checkpointed")
    spark_queue = spark_broker.get_queue("checkpointed")
    log = _log_of(broker, "checkpointed")
    for i in range(22):  # past the checkpoint interval (20) by native commits alone
        queue.send(f"n{i}")
    native_checkpoints = glob.glob(f"{log}/*.checkpoint.parquet")
    assert native_checkpoints, "delta-rs wrote no checkpoint"
    assert spark_queue.stats().visible == 22  # Spark reads from the native checkpoint
    for i in range(20):
        spark_queue.send(f"s{i}")
    assert len(glob.glob(f"{log}/*.checkpoint.parquet")) > len(native_checkpoints)
    assert queue.stats().visible == 42  # and delta-rs from Spark's
    taken = queue.receive(10, visibility_timeout=VISIBILITY)
    assert len(spark_queue.delete_batch([m.receipt_handle for m in taken]).successful) == 10
    assert queue.stats().visible == 32


def test_native_operations_continue_after_the_log_is_trimmed(broker, clock):
    queue = broker.create_queue("trimmed")
    for i in range(25):
        queue.send(f"m{i}")
    storage: Storage = broker.storage
    location = broker.context.record("trimmed").location
    assert storage.trim_log(location, keep_seconds=0) > 0
    taken = queue.receive(5, visibility_timeout=VISIBILITY)
    queue.delete_batch([m.receipt_handle for m in taken])
    assert Broker(None, broker.root, clock=clock).get_queue("trimmed").stats().visible == 20


def test_an_idempotent_copy_stays_idempotent_across_a_native_checkpoint(spark, broker, clock):
    """A move's copy is a Spark write with a txnAppId (moves/steps.py); when delta-rs wrote the newest
    checkpoint, Spark must still find that id in it and skip the repeated copy."""
    queue = broker.create_queue("copied")
    location = broker.context.record("copied").location
    frame = spark.createDataFrame(
        [(0, "00000000-0000-7000-8000-000000000001", "b", clock(), clock(), 0)],
        "shard int, message_id string, body string, sent_at timestamp, visible_at timestamp,"
        " receive_count int",
    )
    options = {"txnAppId": "moving:test", "txnVersion": "1"}

    def copy() -> None:
        writer = frame.write.format("delta").mode("append").options(**options)
        writer.save(location)

    copy()
    for i in range(25):  # a checkpoint by delta-rs, past the copy's commit
        queue.send(f"n{i}")
    log = _log_of(broker, "copied")
    assert glob.glob(f"{log}/*.checkpoint.parquet")
    copy()  # repeated after a crash: skipped
    assert queue.stats().visible == 26


def test_rows_the_native_engine_changed_are_read_by_spark_as_written(spark, broker, clock):
    """A native claim writes `receive_count + 1`, which DataFusion computes as a 64-bit integer:
    the file must still hold the column's own 32-bit type, or Spark cannot read it."""
    queue = broker.create_queue("typed", visibility_timeout=30)
    queue.send_batch(["a", "b"])
    [first, _] = queue.receive(2)
    queue.change_visibility(first.receipt_handle, 0)
    location = broker.context.record("typed").location
    rows = spark.read.format("delta").load(location).select("receive_count", "visible_at")
    assert sorted(row.receive_count for row in rows.collect()) == [1, 1]
    clock.advance(31)
    by_spark = Broker(spark, broker.root, engine="spark", clock=clock).get_queue("typed")
    again = by_spark.receive_df(10).collect()
    assert sorted(row.receive_count for row in again) == [2, 2]
