"""The simulated-day scenario (`--only day`, not in the default run; it needs Spark and a local
root): single-message latency on a fresh queue, then on the same queue carrying what a day of
traffic leaves behind under the given upkeep settings, per engine.

    python -m sparkqueue.bench --only day --day-hours 24                 # today's defaults
    python -m sparkqueue.bench --only day --day-hours 4 --day-file-retention-hours 24 \\
        --day-local-log-minutes 0                                         # the old ones

Traffic of `receive(1)` + `delete` at `--day-commits-per-second` (one consumer: ~1.2) leaves two
things that every later snapshot update pays for (docs/performance.md, "Flat over time"):
- tombstones: each commit removes one file, and Delta keeps each removal in every checkpoint for
  `file_retention_hours` (`delta.deletedFileRetentionDuration`). They are made real here: one
  write of that many one-row files into the queue table, then one DELETE of them;
- `_delta_log` entries, two per commit: `local_log_minutes` of them when the redrive job trims the
  log, else all of them (Delta's own cleanup keeps a day or more). They are stand-ins here: empty
  files named outside Delta's patterns, which every snapshot update lists and nothing reads.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from pyspark.sql import functions as F

from ..broker import Broker
from ..limits import CHECKPOINT_INTERVAL
from .backlog import fill
from .timing import p50_ms, rounds

ENTRIES_PER_COMMIT = 2  # the commit and its checksum (conf/spark-defaults.conf: no .crc sidecars)
PAST_A_CHECKPOINT = CHECKPOINT_INTERVAL // 2  # rounds of two commits: the tombstones now in one
OPS = ("receive", "delete")  # in the order `rounds` returns their times


@dataclass(frozen=True)
class Traffic:
    """The simulated traffic and the upkeep settings it ran under."""

    hours: float
    commits_per_second: float
    file_retention_hours: float
    local_log_minutes: float  # 0: the log is never trimmed

    @property
    def tombstones(self) -> int:
        """The removals a checkpoint still carries: the commits of the last retention window."""
        seconds = min(self.hours, self.file_retention_hours) * 3_600
        return int(self.commits_per_second * seconds)

    @property
    def log_entries(self) -> int:
        """The `_delta_log` entries left: the trimmed window's, or the whole day's."""
        seconds = self.hours * 3_600
        if self.local_log_minutes:
            seconds = min(seconds, self.local_log_minutes * 60)
        return int(self.commits_per_second * seconds * ENTRIES_PER_COMMIT)


def day(broker: Broker, count: int, traffic: Traffic) -> dict[str, Any]:
    """p50 of `count` receives and deletes on a fresh queue (after as many to warm up), then after
    the day's tombstones and log entries; and the ratio of each."""
    if broker.spark is None:
        raise ValueError("the simulated day writes its tombstones with Spark: give it a session")
    queue = broker.create_queue("day")
    fill(broker, queue, count * 3 + PAST_A_CHECKPOINT + 10)
    location = broker.context.record("day").location
    rounds(queue, count)  # warm-up
    fresh = [p50_ms(seconds) for seconds in rounds(queue, count)]
    _tombstones(broker, location, traffic.tombstones)
    _log_stand_ins(location, traffic.log_entries)
    rounds(queue, PAST_A_CHECKPOINT)
    after = [p50_ms(seconds) for seconds in rounds(queue, count)]
    figures = {
        **asdict(traffic),
        "tombstones": traffic.tombstones,
        "log_entries": traffic.log_entries,
    }
    for op, was, now in zip(OPS, fresh, after, strict=True):
        figures |= {f"fresh_{op}_p50_ms": was, f"{op}_p50_ms": now, f"{op}_ratio": now / was}
    return figures


def _tombstones(broker: Broker, location: str, count: int) -> None:
    """`count` removals in the table's log: one write of that many one-row files, one DELETE."""
    spark = broker.spark
    assert spark is not None
    one_row = spark.read.format("delta").load(location).limit(1).withColumn("shard", F.lit(-1))
    (
        one_row.crossJoin(spark.range(count).select())
        .coalesce(1)
        .write.format("delta")
        .mode("append")
        .option("maxRecordsPerFile", 1)
        .save(location)
    )
    spark.sql(f"DELETE FROM delta.`{location}` WHERE shard = -1")


def _log_stand_ins(location: str, count: int) -> None:
    """`count` empty files in the table's `_delta_log`, named outside Delta's patterns."""
    log = os.path.join(location.removeprefix("file:"), "_delta_log")
    for index in range(count):
        open(os.path.join(log, f"#stand-in-{index:07d}"), "w").close()
