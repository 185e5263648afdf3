"""A streaming driver, killed with SIGKILL at random moments and run again from its checkpoints
(stream_kills.py). Usage: python -m sparkqueue.bench.stream_driver ROOT WORK MODE, MODE `run`
(until killed: processing-time triggers) or `drain` (AvailableNow, then one JSON line of what
the sinks hold).

Two queries: the queue `in` into the Delta table WORK/out (the streaming source), and the Delta
table WORK/src, a file a batch, into the queue `sent` (the streaming sink)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from sparkqueue import Broker, spark_session


def clear_unlogged_first_batch(checkpoint: str) -> None:
    """Spark writes each offset file as a hidden temp file and then renames it. A driver killed
    in between on a query's first batch leaves `offsets/` holding that temp file alone, and
    Spark 4 then refuses to start from the checkpoint (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY:
    "offsets should be empty on batch 0"). No batch was logged: the leftovers go."""
    offsets = Path(checkpoint) / "offsets"
    leftovers = list(offsets.iterdir()) if offsets.is_dir() else []
    if all(path.name.startswith(".") and ".tmp" in path.name for path in leftovers):
        for path in leftovers:
            path.unlink()


def main(root: str, work: str, mode: str) -> None:
    for query in ("out", "sent"):
        clear_unlogged_first_batch(f"{work}/checkpoints/{query}")
    spark = spark_session(**{"spark.sql.shuffle.partitions": "2"})
    drain = mode == "drain"
    source = (
        spark.readStream.format("sparkqueue")
        .option("root", root)
        .option("queue", "in")
        .option("maxMessagesPerTrigger", 40)
        .option("visibilityTimeout", 10)
        .load()
        .writeStream.format("delta")
        .option("checkpointLocation", f"{work}/checkpoints/out")
    )
    sink = (
        spark.readStream.format("delta")
        .option("maxFilesPerTrigger", 1)
        .load(f"{work}/src")
        .writeStream.format("sparkqueue")
        .option("root", root)
        .option("queue", "sent")
        .option("checkpointLocation", f"{work}/checkpoints/sent")
    )
    if not drain:
        source.trigger(processingTime="500 milliseconds").start(f"{work}/out")
        sink.trigger(processingTime="500 milliseconds").start()
        print("started", flush=True)
        spark.streams.awaitAnyTermination()
        return
    sink.trigger(availableNow=True).start().awaitTermination()
    broker = Broker(None, root)
    # A claim made just before a kill, whose offset Spark never wrote, is nobody's batch: its
    # messages come back when their timeout ends (10 s), and a later drain takes them.
    deadline = time.monotonic() + 60
    while True:
        source.trigger(availableNow=True).start(f"{work}/out").awaitTermination()
        stats = broker.get_queue("in").stats()
        if not (stats.visible or stats.in_flight) or time.monotonic() > deadline:
            break
        time.sleep(1)
    out = [row.message_id for row in spark.read.format("delta").load(f"{work}/out").collect()]
    sent = [m.body for m in broker.get_queue("sent").receive(10_000)]
    left = broker.get_queue("in").stats()
    print(json.dumps({"out": out, "sent": sent, "in_visible": left.visible,
                      "in_flight": left.in_flight}))  # fmt: skip


if __name__ == "__main__":
    main(*sys.argv[1:4])
