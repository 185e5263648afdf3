"""Checkpoint cadence A/B: single-message latency on queues that differ only in how often Delta
writes a checkpoint (`delta.checkpointInterval`).

Usage: python benchmarks/checkpoints.py [--rounds 100] [--intervals 10,20,50,100] [--root DIR]
Each round runs one `receive(1)` + `delete` on every queue in turn, so whatever the machine does
meanwhile hits every interval alike; a checkpoint is written by the commit that reaches it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

from sparkqueue import Broker, spark_session
from sparkqueue.bench.scenarios import bodies, percentile, timed


def summary(seconds: list[float]) -> str:
    return (
        f"p50 {statistics.median(seconds) * 1000:,.0f} ms, mean"
        f" {statistics.mean(seconds) * 1000:,.0f} ms, p99 {percentile(seconds, 0.99) * 1000:,.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--intervals", default="10,20,50,100")
    parser.add_argument("--root", default=tempfile.mkdtemp(prefix="sparkqueue-checkpoints-"))
    args = parser.parse_args()
    intervals = [int(value) for value in args.intervals.split(",")]
    spark = spark_session()
    broker = Broker(spark, args.root)
    queues = {}
    for interval in intervals:
        queue = broker.create_queue(f"every-{interval}")
        location = broker.context.record(queue.name).location
        broker.storage.set_properties(location, {"delta.checkpointInterval": str(interval)})
        queue.send_df(bodies(spark, args.rounds + 10))
        queues[interval] = queue
    receives: dict[int, list[float]] = {interval: [] for interval in intervals}
    deletes: dict[int, list[float]] = {interval: [] for interval in intervals}
    for _ in range(args.rounds):
        for interval, queue in queues.items():
            took, [message] = timed(lambda q=queue: q.receive(1, visibility_timeout=3_600))
            receives[interval].append(took)
            deletes[interval].append(
                timed(lambda m=message, q=queue: q.delete(m.receipt_handle))[0]
            )
    for interval in intervals:
        print(
            f"every {interval} commits: receive {summary(receives[interval])};"
            f" delete {summary(deletes[interval])}"
        )


if __name__ == "__main__":
    main()
