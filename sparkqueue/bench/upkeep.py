"""The table-growth scenario (`--only upkeep`, not in the default run; it needs Spark): files and
`_delta_log` size per redrive pass under steady traffic, with upkeep on.

    python -m sparkqueue.bench --only upkeep --upkeep-passes 15 --upkeep-messages 200

Each pass sends `--upkeep-messages` with `send_df`, receives them with `receive_df` and deletes
90% with `delete_df`, lets the rest time out (1 s visibility), and runs one redrive pass with
upkeep due every pass after the first, which starts its cadence (compaction + VACUUM, with the
shortest retention: 1 hour). What it shows:
whether the active table stays flat, and how the files on disk and the log grow meanwhile."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any

from ..broker import Broker
from ..services.redrive import Redrive
from ..services.settings import RedriveSettings, UpkeepSettings

SETTINGS = RedriveSettings(
    defaults=UpkeepSettings(upkeep_every_seconds=1, file_retention_hours=1, log_retention_hours=1)
)
VISIBILITY_SECONDS = 1
KEPT_SHARE = 0.9  # what each pass deletes of what it received; the rest times out


@dataclass(frozen=True)
class Folder:
    """A table's folder on disk: data files (live or not yet vacuumed), `_delta_log` files and
    bytes."""

    data_files: int
    log_files: int
    log_bytes: int

    @classmethod
    def of(cls, path: str) -> Folder:
        data = log_files = log_bytes = 0
        for folder, _, files in os.walk(path):
            for name in files:
                if "_delta_log" in folder:
                    log_files += 1
                    log_bytes += os.path.getsize(os.path.join(folder, name))
                elif name.endswith((".parquet", ".bin")):
                    data += 1
        return cls(data, log_files, log_bytes)


def upkeep(broker: Broker, passes: int, messages: int) -> list[dict[str, Any]]:
    """One row per pass: the table's active files, its folder, the pass's seconds and whether it
    ran upkeep."""
    spark = broker.spark
    if spark is None:
        raise ValueError("the upkeep scenario's traffic is Spark's DataFrames: give it a session")
    queue = broker.create_queue("steady", visibility_timeout=VISIBILITY_SECONDS)
    redrive = Redrive(broker.context, SETTINGS)
    location = broker.context.record(queue.name).location
    rows = []
    for number in range(passes):
        queue.send_df(spark.range(messages).selectExpr("cast(id as string) as body"))
        batch = queue.receive_df(messages)
        queue.delete_df(batch.limit(int(messages * KEPT_SHARE)))
        time.sleep(VISIBILITY_SECONDS + 0.1)  # the rest times out and the pass releases it
        started = time.monotonic()
        report = redrive.run([queue.name])
        seconds = time.monotonic() - started
        active = broker.storage.detail(location).first()["numFiles"]
        rows.append(
            {
                "pass": number,
                "active_files": active,
                **asdict(Folder.of(location.removeprefix("file:"))),
                "pass_s": seconds,
                "upkeep": bool(report.queues[queue.name].upkeep),
            }
        )
    return rows
