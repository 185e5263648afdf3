"""Table upkeep for the redrive job: retention settings, compaction and VACUUM, all retried.

Compaction removes files that consumers may be reading, so it aborts them: it runs here, on the
job's cadence and through the same conflict retries, never as Delta auto-compaction.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import functions as F

from .attributes import check_int
from .errors import InvalidParameterValue
from .storage import Storage

log = logging.getLogger(__name__)

CLAIMS_KEPT = timedelta(days=1)  # receive_df results stay re-readable this long after the claim


@dataclass(frozen=True)
class UpkeepSettings:
    """How one queue's tables are kept small and fast (`conf/redrive.toml`)."""

    upkeep_every_seconds: int = 3600  # 0: never
    file_retention_hours: int = 24
    log_retention_hours: int = 48
    checkpoint_interval: int = 20

    def __post_init__(self) -> None:
        check_int("upkeep_every_seconds", self.upkeep_every_seconds, 0, 30 * 86_400)
        check_int("file_retention_hours", self.file_retention_hours, 1, 90 * 24)
        check_int("log_retention_hours", self.log_retention_hours, 1, 90 * 24)
        check_int("checkpoint_interval", self.checkpoint_interval, 1, 1000)
        if self.log_retention_hours < self.file_retention_hours:  # Delta refuses it too
            raise InvalidParameterValue(
                f"log_retention_hours ({self.log_retention_hours}) must be at least"
                f" file_retention_hours ({self.file_retention_hours})"
            )

    @classmethod
    def from_mapping(
        cls, values: dict[str, Any], base: UpkeepSettings | None = None
    ) -> UpkeepSettings:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(values) - known)
        if unknown:
            raise InvalidParameterValue(
                f"unknown upkeep setting(s) {unknown}; allowed: {sorted(known)}"
            )
        merged = {**(base or cls()).__dict__, **values}
        return cls(**merged)

    def table_properties(self) -> dict[str, str]:
        return {
            "delta.logRetentionDuration": f"interval {self.log_retention_hours} hours",
            "delta.deletedFileRetentionDuration": f"interval {self.file_retention_hours} hours",
            "delta.checkpointInterval": str(self.checkpoint_interval),
        }

    def due(self, last: datetime | None, now: datetime) -> bool:
        if not self.upkeep_every_seconds or last is None:
            return False
        return (now - last).total_seconds() >= self.upkeep_every_seconds


def keep_up(storage: Storage, location: str, settings: UpkeepSettings, now: datetime) -> None:
    """One round of upkeep for a queue table and its receive_df claims table."""
    started = time.monotonic()
    paths = [location]
    claims = storage.claims_path(location)
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
        paths.append(claims)
    for path in paths:
        tidy_table(storage, path, settings)
    log.debug("upkeep of %s took %.1f s", location, time.monotonic() - started)


def tidy_table(storage: Storage, path: str, settings: UpkeepSettings) -> None:
    """Retention settings (only when changed: a metadata commit aborts everyone), OPTIMIZE, VACUUM."""
    wanted = settings.table_properties()
    current = storage.detail(path).select("properties").first()
    have = dict(current["properties"] or {}) if current else {}
    if any(have.get(key) != value for key, value in wanted.items()):
        storage.set_properties(path, wanted)
    storage.transact(path, lambda: storage.optimize(path), f"compacting {path}")
    storage.transact(
        path, lambda: storage.vacuum(path, settings.file_retention_hours), f"vacuuming {path}"
    )
