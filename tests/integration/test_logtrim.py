"""Trimming `_delta_log` on a local root: the redrive pass does it, and live consumers lose nothing."""

from __future__ import annotations

import os
import threading
import time

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from sparkqueue import Broker
from sparkqueue.services.redrive import Redrive
from sparkqueue.services.settings import RedriveSettings, UpkeepSettings

from .helpers import run_threads


def log_dir(location: str) -> str:
    return os.path.join(location.removeprefix("file:"), "_delta_log")


def commits(location: str) -> list[int]:
    return sorted(
        int(name[:20]) for name in os.listdir(log_dir(location)) if name.endswith(".json")
    )


def age_the_log(location: str, seconds: float) -> None:
    """Makes every file in the table's log look `seconds` old (no waiting for real time)."""
    folder = log_dir(location)
    when = time.time() - seconds
    for name in os.listdir(folder):
        os.utime(os.path.join(folder, name), (when, when))


def send(queue, spark, count: int) -> None:
    queue.send_df(spark.range(count).select(F.col("id").cast("string").alias("body")))


def test_a_redrive_pass_trims_history_behind_an_old_checkpoint(broker, spark):
    queue = broker.create_queue("trimmed")
    send(queue, spark, 30)
    location = broker.context.record("trimmed").location
    broker.storage.set_properties(location, {"delta.checkpointInterval": "3"})
    for _ in range(4):
        [message] = queue.receive(1, visibility_timeout=600)
        queue.delete(message.receipt_handle)
    latest = commits(location)[-1]

    off = RedriveSettings(defaults=UpkeepSettings(local_log_minutes=0))
    age_the_log(location, 3_600)
    Redrive(broker.context, off).run()
    assert commits(location)[0] == 0  # turned off: Delta's own (daily) cleanup only

    age_the_log(location, 3_600)
    broker.redrive()
    assert commits(location)[0] == latest - latest % 3  # from the newest checkpoint on
    with pytest.raises(AnalysisException):  # history behind it is gone, as documented
        broker.storage.read(location, version=0).count()

    left: list[str] = []  # the queue goes on: every message not deleted, exactly once
    while messages := queue.receive(10, visibility_timeout=600):
        left.extend(m.body for m in messages)
    assert len(left) == len(set(left)) == 26


def test_trimming_under_live_consumers_loses_nothing_and_delivers_once(broker, spark):
    queue = broker.create_queue("busy")
    send(queue, spark, 240)  # native receives take milliseconds: enough of them to trim under
    location = broker.context.record("busy").location
    broker.storage.set_properties(location, {"delta.checkpointInterval": "4"})
    delivered: list[str] = []
    guard = threading.Lock()
    done = threading.Event()
    trimmed: list[int] = []

    def consume() -> None:
        while messages := queue.receive(3, visibility_timeout=600):
            with guard:
                delivered.extend(m.body for m in messages)
            queue.delete_batch([m.receipt_handle for m in messages])

    def consumers() -> None:
        try:
            run_threads([consume, consume])
        finally:
            done.set()

    def trim() -> None:  # keeps 1 s of history: every transaction here takes less than that
        while not done.is_set():
            trimmed.append(broker.storage.trim_log(location, keep_seconds=1))
            time.sleep(0.1)

    run_threads([consumers, trim])
    assert sum(trimmed) > 0 and commits(location)[0] > 0
    assert sorted(delivered, key=int) == [str(n) for n in range(240)]  # each exactly once
    assert queue.stats().visible == queue.stats().in_flight == 0


def test_a_table_whose_creation_was_killed_before_its_first_commit_is_created(spark, tmp_path):
    """What a redrive job killed while creating its metrics table leaves: `_delta_log` without
    a version. The next broker on the root creates the table instead of failing to read it."""
    root = tmp_path / "root"
    (root / "_sparkqueue" / "metrics" / "_delta_log" / "_staged_commits").mkdir(parents=True)
    broker = Broker(spark, str(root))
    broker.create_queue("after-a-kill")
    assert broker.redrive().queues["after-a-kill"].released == 0
    assert broker.redrive_metrics().count() == 1
