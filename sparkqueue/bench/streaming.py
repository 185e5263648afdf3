"""The streaming scenario (`--only streaming`): the `"sparkqueue"` source and sink under load.

- drain: an AvailableNow query takes a backlog into a Delta table; messages a second, and every
  message in the sink once;
- continuous: a query with a 1-second trigger beside a producer sending at a steady rate; the
  time from each message's send to the sink's commit of its batch (p50, p99), and whether it
  kept up (what is left at the end);
- two queries: two AvailableNow queries draining one backlog together;
- kills: a streaming driver killed with SIGKILL at random moments, several times, and started
  again from its checkpoints (stream_kills.py): nothing lost, nothing in a sink twice.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from ..broker import Broker
from .backlog import fill
from .stream_kills import stream_kills
from .timing import percentile, timed

KILLED_MESSAGES = 1_000  # the killed driver's queue (40 a batch)
KILLED_ROWS = 200  # and what its sink's query sends (10 rows a file, a file a batch)


def streaming(
    spark: SparkSession,
    root: str,
    messages: int,
    per_trigger: int,
    rate: int,
    seconds: float,
    kills: int,
) -> dict[str, Any]:
    broker = Broker(spark, root)
    return {
        "drain": _drain(broker, root, messages, per_trigger, queries=1),
        "two_queries": _drain(broker, root, messages, per_trigger, queries=2),
        "continuous": _continuous(broker, root, per_trigger, rate, seconds),
        "kills": _kills(root, kills),
    }


def _kills(root: str, kills: int) -> dict[str, Any]:
    files = KILLED_ROWS // 10
    return stream_kills(
        f"{root}/kills", f"{root}/kills-work", kills=kills, messages=KILLED_MESSAGES,
        rows=KILLED_ROWS, files=files,
    )  # fmt: skip


def _source(spark: SparkSession, root: str, queue: str, per_trigger: int) -> DataFrame:
    return (
        spark.readStream.format("sparkqueue")
        .option("root", root)
        .option("queue", queue)
        .option("maxMessagesPerTrigger", per_trigger)
        .load()
    )


def _drain(
    broker: Broker, root: str, messages: int, per_trigger: int, *, queries: int
) -> dict[str, Any]:
    spark = broker.spark
    assert spark is not None
    name = f"drain-{queries}"
    fill(broker, broker.create_queue(name), messages)
    sinks = [f"{root}/{name}-sink-{n}" for n in range(queries)]

    def run() -> None:
        started = [
            _source(spark, root, name, per_trigger)
            .writeStream.format("delta")
            .option("checkpointLocation", f"{root}/{name}-checkpoint-{n}")
            .trigger(availableNow=True)
            .start(sink)
            for n, sink in enumerate(sinks)
        ]
        for query in started:
            query.awaitTermination()

    seconds, _ = timed(run)
    ids = spark.read.format("delta").load(sinks[0])
    for sink in sinks[1:]:
        ids = ids.unionByName(spark.read.format("delta").load(sink))
    drained = ids.count()
    return {
        "messages": messages,
        "drained": drained,
        "twice": drained - ids.select("message_id").distinct().count(),
        "seconds": seconds,
        "per_s": drained / seconds,
        "left": broker.get_queue(name).stats().visible,
    }


def _continuous(
    broker: Broker, root: str, per_trigger: int, rate: int, seconds: float
) -> dict[str, Any]:
    spark = broker.spark
    assert spark is not None
    queue = broker.create_queue("continuous")
    latencies: list[float] = []
    sink = f"{root}/continuous-sink"

    def land(batch: DataFrame, batch_id: int) -> None:
        batch.write.format("delta").mode("append").save(sink)
        landed = time.time()  # collected timestamps are naive, in this process's time zone
        latencies.extend(landed - row.sent_at.timestamp() for row in batch.collect())

    query = (
        _source(spark, root, "continuous", per_trigger)
        .writeStream.foreachBatch(land)
        .option("checkpointLocation", f"{root}/continuous-checkpoint")
        .trigger(processingTime="1 second")
        .start()
    )
    stop, sent = threading.Event(), [0]

    def produce() -> None:  # a tenth of the rate every tenth of a second
        step, start = 0, time.monotonic()
        while not stop.is_set():
            queue.send_batch([f"c{sent[0] + i}" for i in range(max(rate // 10, 1))])
            sent[0] += max(rate // 10, 1)
            step += 1
            time.sleep(max(0.0, start + step / 10 - time.monotonic()))

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    time.sleep(seconds)
    stop.set()
    producer.join()
    time.sleep(3)  # the last sends' batch
    failed = query.exception()
    query.stop()
    if failed is not None:
        raise RuntimeError(f"the continuous query failed: {failed}")
    stats = queue.stats()
    return {
        "rate": rate,
        "sent": sent[0],
        "landed": len(latencies),
        "left": stats.visible + stats.in_flight,
        "p50_s": percentile(latencies, 0.5) if latencies else None,
        "p99_s": percentile(latencies, 0.99) if latencies else None,
    }
