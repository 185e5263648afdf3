"""Table upkeep for the redrive job: retention settings, compaction and VACUUM, all retried.

Compaction removes files that consumers may be reading, so it aborts them: it runs here, on the
job's cadence and through the same conflict retries, never as Delta auto-compaction. On a local
root each statement holds the cross-process commit lock: a queue table is compacted one shard at
a time, so other processes wait at most one shard's compaction, and VACUUM runs without the lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime

from pyspark.sql import functions as F

from ..clock import from_micros
from ..engine.conditions import TOMBSTONE_SHARD
from ..limits import CLAIMS_KEPT
from ..store.logtrim import trim_logs
from ..store.registry import QueueRecord
from ..store.storage import Storage
from .settings import RedriveSettings, UpkeepSettings

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


class PassUpkeep:
    """What a redrive pass on Spark adds to each queue's steps: upkeep on its cadence, log
    trimming every pass, and the same for the broker's shared tables after the queues."""

    def __init__(self, storage: Storage, settings: RedriveSettings, metrics_table: str) -> None:
        self._storage = storage
        self._settings = settings
        self._metrics_table = metrics_table
        self._upkeep_at: dict[str, datetime] = {}

    def queue(self, record: QueueRecord, now: datetime, step: Callable[[str], None]) -> bool:
        """Upkeep of one queue when due, and its log trimming; whether upkeep ran."""
        settings = self._settings.upkeep_for(record.name)
        due = bool(settings.upkeep_every_seconds) and settings.due(
            self._last_upkeep(record.name, now), now
        )
        if due:
            self._upkeep_at[record.name] = now
            step("upkeep: compaction and VACUUM")
            keep_up(self._storage, record, settings, now)
        claims = self._storage.layout.claims(record.location)
        trim_logs(self._storage.layout, (record.location, claims), settings.local_log_minutes)
        return due

    def shared(self, tables: Sequence[str], tidy: bool) -> None:
        """After the queues: the shared tables' upkeep (when any queue's ran) and log trimming."""
        if tidy:
            for path in tables:
                tidy_table(self._storage, path, self._settings.defaults)
        trim_logs(self._storage.layout, tables, self._settings.defaults.local_log_minutes)

    def _last_upkeep(self, name: str, now: datetime) -> datetime | None:
        """When upkeep last ran for the queue; its first pass counts as the start of the cadence."""
        if name in self._upkeep_at:
            return self._upkeep_at[name]
        row = (
            self._storage.read(self._metrics_table)
            .where(F.col("queue") == F.lit(name))
            .agg(
                F.max(F.when(F.col("upkeep"), F.unix_micros("pass_at"))).alias("upkeep_us"),
                F.min(F.unix_micros("pass_at")).alias("first_us"),
            )
            .first()
        )
        last = from_micros(row["upkeep_us"] or row["first_us"]) if row else None
        self._upkeep_at[name] = last or now
        return last
