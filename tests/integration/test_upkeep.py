"""Upkeep holds the cross-process commit lock only around commits: one shard's compaction at a
time, and VACUUM (which commits nothing on a local root) without it."""

from __future__ import annotations

import fcntl
import os
import threading
import time

from pyspark.sql import functions as F

from sparkqueue.services.settings import UpkeepSettings
from sparkqueue.services.upkeep import keep_up


def longest_hold(lock_file: str, done: threading.Event, holds: list[float]) -> None:
    """Polls the lock file from its own open file (flock is per open file) until `done`."""
    held_since = None
    while not done.is_set():
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            if held_since is not None:
                holds.append(time.monotonic() - held_since)
                held_since = None
        except BlockingIOError:
            held_since = held_since or time.monotonic()
        finally:
            os.close(fd)
        time.sleep(0.005)


def test_upkeep_never_holds_the_lock_for_long(broker, spark, clock):
    queue = broker.create_queue("kept")
    for _ in range(4):  # several small files per shard, so compaction has work
        queue.send_df(spark.range(400).select(F.col("id").cast("string").alias("body")))
    record = broker.context.record("kept")
    table = record.location.removeprefix("file:").strip("/").split("/")[-1]
    lock_file = os.path.join(
        broker.root.removeprefix("file:"), "_sparkqueue", "locks", f"queues__{table}.lock"
    )

    done = threading.Event()
    holds: list[float] = []
    poller = threading.Thread(target=longest_hold, args=(lock_file, done, holds))
    poller.start()
    started = time.monotonic()
    keep_up(broker.storage, record, UpkeepSettings(), clock())
    took = time.monotonic() - started
    done.set()
    poller.join()

    assert holds, "upkeep committed under the lock at least once"
    assert max(holds) < took / 3, (max(holds), took)
    assert queue.stats().visible == 1600
