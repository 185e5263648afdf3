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


def wait_for_the_lock(lock_file: str, done: threading.Event, waits: list[float]) -> None:
    """Plays another process committing to the table: takes the lock again and again, from its
    own open file (flock is per open file), and records how long each take waited."""
    os.makedirs(os.path.dirname(lock_file), exist_ok=True)
    while not done.is_set():
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        started = time.monotonic()
        fcntl.flock(fd, fcntl.LOCK_EX)
        waits.append(time.monotonic() - started)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        time.sleep(0.01)


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
    waits: list[float] = []
    poller = threading.Thread(target=wait_for_the_lock, args=(lock_file, done, waits))
    poller.start()
    started = time.monotonic()
    keep_up(broker.storage, record, UpkeepSettings(), clock())
    took = time.monotonic() - started
    done.set()
    poller.join()

    # Held across the whole compaction and VACUUM (the old behaviour), the longest wait is about
    # the whole round. Held per shard, it is one shard's compaction: the first, cold one took up to
    # 35% of a round of 8 shards here, so half the round separates the two with room to spare.
    assert max(waits) < took / 2, (max(waits), took)
    assert queue.stats().visible == 1600
