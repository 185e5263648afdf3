"""A simulated day of traffic on one queue: single-message latency on a fresh queue, then on the
same queue carrying what that much traffic leaves behind under the given upkeep settings.

Usage: python benchmarks/day.py [--rounds 30] [--hours 24] [--commits-per-second 1.2]
                                [--file-retention-hours 1] [--local-log-minutes 5]

Traffic of `receive(1)` + `delete` at `--commits-per-second` (one consumer here: ~1.2) leaves two
things that every later snapshot update pays for (docs/performance.md, "Flat over time"):
- tombstones: each commit removes one file, and Delta keeps each removal in every checkpoint for
  `file_retention_hours` (`delta.deletedFileRetentionDuration`). They are made real here: one
  write of that many one-row files into the queue table, then one DELETE of them;
- `_delta_log` entries, two per commit: `local_log_minutes` of them when the redrive job trims the
  log, else all of them (Delta's own cleanup keeps a day or more). They are stand-ins here: empty
  files named outside Delta's patterns, which every snapshot update lists and nothing reads.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

from pyspark.sql import functions as F

from sparkqueue import Broker, spark_session
from sparkqueue.bench.scenarios import bodies, timed
from sparkqueue.limits import FILE_RETENTION_HOURS, LOCAL_LOG_MINUTES

ENTRIES_PER_COMMIT = 2  # the commit and its checksum (conf/spark-defaults.conf: no .crc sidecars)


def rounds_p50(queue, rounds: int) -> tuple[float, float]:
    receives, deletes = [], []
    for _ in range(rounds):
        took, [message] = timed(lambda: queue.receive(1, visibility_timeout=3_600))
        receives.append(took)
        deletes.append(timed(lambda m=message: queue.delete(m.receipt_handle))[0])
    return statistics.median(receives) * 1000, statistics.median(deletes) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--commits-per-second", type=float, default=1.2)
    parser.add_argument("--file-retention-hours", type=float, default=FILE_RETENTION_HOURS)
    parser.add_argument("--local-log-minutes", type=float, default=LOCAL_LOG_MINUTES, help="0: off")
    parser.add_argument("--root", default=tempfile.mkdtemp(prefix="sparkqueue-day-"))
    args = parser.parse_args()
    spark = spark_session()
    queue = Broker(spark, args.root).create_queue("day")
    queue.send_df(bodies(spark, args.rounds * 4 + 10))
    location = queue._ctx.record("day").location
    rounds_p50(queue, args.rounds)  # warm-up
    fresh = rounds_p50(queue, args.rounds)

    seconds = args.hours * 3_600
    tombstones = int(args.commits_per_second * min(seconds, args.file_retention_hours * 3_600))
    logged = seconds if not args.local_log_minutes else min(seconds, args.local_log_minutes * 60)
    entries = int(args.commits_per_second * logged * ENTRIES_PER_COMMIT)
    one_row = spark.read.format("delta").load(location).limit(1).withColumn("shard", F.lit(-1))
    (
        one_row.crossJoin(spark.range(tombstones).select())
        .coalesce(1)
        .write.format("delta")
        .mode("append")
        .option("maxRecordsPerFile", 1)
        .save(location)
    )
    spark.sql(f"DELETE FROM delta.`{location}` WHERE shard = -1")
    log_dir = os.path.join(location.removeprefix("file:"), "_delta_log")
    for index in range(entries):
        open(os.path.join(log_dir, f"#stand-in-{index:07d}"), "w").close()
    rounds_p50(queue, 10)  # past the next checkpoint: the tombstones now live in it
    after = rounds_p50(queue, args.rounds)
    print(
        f"{args.hours:g} h at {args.commits_per_second:g} commits/s,"
        f" file_retention_hours {args.file_retention_hours:g},"
        f" local_log_minutes {args.local_log_minutes:g}: {tombstones:,} tombstones,"
        f" {entries:,} log entries;"
        f" receive p50 {fresh[0]:,.0f} -> {after[0]:,.0f} ms ({after[0] / fresh[0]:.2f}x),"
        f" delete p50 {fresh[1]:,.0f} -> {after[1]:,.0f} ms ({after[1] / fresh[1]:.2f}x)"
    )


if __name__ == "__main__":
    main()
