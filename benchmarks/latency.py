"""Single-message latency: receive(1) and delete p50/p99 on a warm local session.

Usage: python benchmarks/latency.py [--messages 200] [--operations 40]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from sparkqueue import Broker, spark_session


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--operations", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    spark = spark_session()
    queue = Broker(spark, tempfile.mkdtemp(prefix="sparkqueue-bench-")).create_queue("latency")
    queue.send_df(spark.range(args.messages).selectExpr("cast(id as string) as body"))
    receives: list[float] = []
    deletes: list[float] = []
    for i in range(args.warmup + args.operations):
        started = time.perf_counter()
        [message] = queue.receive(1, visibility_timeout=600)
        received = time.perf_counter()
        queue.delete(message.receipt_handle)
        if i >= args.warmup:
            receives.append(received - started)
            deletes.append(time.perf_counter() - received)
    for name, values in (("receive(1)", receives), ("delete", deletes)):
        print(
            f"{name:<11} p50 {statistics.median(values) * 1000:7.0f} ms"
            f"   p99 {percentile(values, 0.99) * 1000:7.0f} ms   n={len(values)}"
        )


if __name__ == "__main__":
    main()
