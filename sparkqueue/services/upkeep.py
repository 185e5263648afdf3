"""Table upkeep for the redrive job: retention settings, compaction and VACUUM, all retried.

Compaction removes files that consumers may be reading, so it aborts them: it runs here, on the
job's cadence and through the same conflict retries, never as Delta auto-compaction. On a local
root each statement holds the cross-process commit lock: a queue table is compacted one shard at
a time, so other processes wait at most one shard's compaction, and VACUUM runs without the lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import datetime

from pyspark.sql import functions as F

from ..engine.conditions import TOMBSTONE_SHARD
from ..limits import CLAIMS_KEPT
from ..store.registry import QueueRecord
from ..store.storage import Storage
from .settings import UpkeepSettings

log = logging.getLogger(__name__)


def keep_up(storage: Storage, record: QueueRecord, settings: UpkeepSettings, now: datetime) -> None:
    """One round of upkeep for a queue table and its receive_df claims table."""
    started = time.monotonic()
    shards = [*range(record.attributes.shards), TOMBSTONE_SHARD]
    tidy_table(storage, record.location, settings, shards)
    claims = storage.layout.claims(record.location)
    if storage.exists(claims):
        storage.transact(
            claims,
            lambda: storage.change(
                claims,
                F.col("handle_issued_at") < F.lit(now - CLAIMS_KEPT),
                ("claim_id", "message_id"),
            ),
            "trimming old receive_df claims",
        )
        tidy_table(storage, claims, settings)
    log.debug("upkeep of %s took %.1f s", record.location, time.monotonic() - started)


def tidy_table(
    storage: Storage, path: str, settings: UpkeepSettings, shards: list[int] | None = None
) -> None:
    """Retention settings (only when changed: a metadata commit aborts everyone), OPTIMIZE (per
    shard when given), VACUUM."""
    wanted = settings.table_properties()
    current = storage.detail(path).select("properties").first()
    have = dict(current["properties"] or {}) if current else {}
    if any(have.get(key) != value for key, value in wanted.items()):
        storage.set_properties(path, wanted)
    for shard in shards or [None]:
        storage.optimize(path, shard)
    storage.vacuum(path, settings.file_retention_hours)


def trim_logs(storage: Storage, paths: Sequence[str], settings: UpkeepSettings) -> int:
    """Trims the tables' `_delta_log` history on a local root (store/logtrim.py). It runs on every
    pass, not on the upkeep cadence: each entry slows every later operation on the table, and a
    listing plus a few deletes cost next to nothing."""
    if not settings.local_log_minutes:
        return 0
    return sum(storage.trim_log(path, settings.local_log_minutes * 60) for path in paths)
