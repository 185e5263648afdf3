"""Spark's upkeep of one queue for the redrive job: its table (services/tidy.py) and its
`receive_df` claims table (appended to by both engines' `receive_df`, trimmed here)."""

from __future__ import annotations

import logging
import time
from datetime import datetime

from pyspark.sql import functions as F

from ..engine.conditions import all_shards
from ..limits import CLAIMS_KEPT
from ..store.registry import QueueRecord
from ..store.storage import Storage
from .settings import UpkeepSettings
from .tidy import Lease, tidy_table

log = logging.getLogger(__name__)


def keep_up(
    storage: Storage,
    record: QueueRecord,
    settings: UpkeepSettings,
    now: datetime,
    lease: Lease | None = None,
) -> None:
    """One round of upkeep for a queue table and its receive_df claims table (compacted under
    `lease`, see services/tidy.py)."""
    started = time.monotonic()
    tidy_table(storage, record.location, settings, all_shards(record.attributes), lease=lease)
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
        tidy_table(storage, claims, settings, lease=lease)
    log.debug("upkeep of %s took %.1f s", record.location, time.monotonic() - started)
