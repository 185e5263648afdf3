"""Table growth under steady traffic: files and _delta_log size per redrive pass, with upkeep on.

Usage: python benchmarks/upkeep.py [--passes 12] [--messages 200] [--root DIR]
Each round sends a batch, receives and deletes most of it, lets the rest time out, and runs one
redrive pass with upkeep due every pass (compaction + VACUUM with the shortest retention, 1 hour).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from sparkqueue import Broker, spark_session
from sparkqueue.services.redrive import Redrive
from sparkqueue.services.settings import RedriveSettings, UpkeepSettings


def folder_stats(path: str) -> tuple[int, int, int]:
    """Data files on disk, and the _delta_log's file count and bytes."""
    data = log_files = log_bytes = 0
    for folder, _, files in os.walk(path):
        for name in files:
            if "_delta_log" in folder:
                log_files += 1
                log_bytes += os.path.getsize(os.path.join(folder, name))
            elif name.endswith(".parquet") or name.endswith(".bin"):
                data += 1
    return data, log_files, log_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passes", type=int, default=12)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--root", default=tempfile.mkdtemp(prefix="sparkqueue-upkeep-"))
    args = parser.parse_args()
    spark = spark_session()
    broker = Broker(spark, args.root)
    queue = broker.create_queue("steady", visibility_timeout=1)
    settings = RedriveSettings(
        defaults=UpkeepSettings(
            upkeep_every_seconds=1, file_retention_hours=1, log_retention_hours=1
        )
    )
    redrive = Redrive(broker.context, settings)
    table = broker.context.record(queue.name).location.removeprefix("file:")
    print("pass  active_files  data_files_on_disk  log_files  log_kib  pass_s")
    for number in range(args.passes):
        queue.send_df(spark.range(args.messages).selectExpr("cast(id as string) as body"))
        batch = queue.receive_df(args.messages)
        queue.delete_df(batch.limit(args.messages * 9 // 10))
        time.sleep(1.1)  # the undeleted tenth times out (1 s visibility) and is released
        started = time.monotonic()
        report = redrive.run(["steady"])
        detail = broker.storage.detail(broker.context.record(queue.name).location).first()
        data, log_files, log_bytes = folder_stats(table)
        print(
            f"{number:>4}  {detail['numFiles']:>12}  {data:>18}  {log_files:>9}"
            f"  {log_bytes / 1024:>7.0f}  {time.monotonic() - started:>6.1f}"
            f"  {'upkeep' if report.queues['steady'].upkeep else ''}",
            flush=True,
        )


if __name__ == "__main__":
    main()
