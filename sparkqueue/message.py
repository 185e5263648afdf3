"""The values users get back: messages, queue statistics and per-entry batch outcomes."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime

from pyspark.sql import Column
from pyspark.sql import functions as F


@dataclass(frozen=True)
class Message:
    """One delivered message; `receipt_handle` is the proof of this particular receive."""

    message_id: str
    body: str
    attributes: dict[str, str]
    receipt_handle: str
    receive_count: int
    sent_at: datetime
    first_received_at: datetime | None
    group_id: str | None = None
    deduplication_id: str | None = None
    sequence_number: int | None = None


MESSAGE_FIELDS = tuple(Message.__dataclass_fields__)


@dataclass(frozen=True)
class QueueStats:
    """A snapshot of a queue's depth, like SQS's Approximate* metrics."""

    visible: int
    in_flight: int
    delayed: int
    oldest_age_seconds: float
    awaiting_dead_letter: int


@dataclass(frozen=True)
class BatchResult:
    """Per-entry outcome of a batch: handles that succeeded, and failed handle -> error code."""

    successful: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def _uuid7_layout(millis_hex: str, random_hex: str) -> str:
    return f"{millis_hex[:8]}-{millis_hex[8:12]}-7{random_hex[:3]}-8{random_hex[3:6]}-{random_hex[6:18]}"


def new_message_id(sent_at_micros: int) -> str:
    """A UUIDv7-shaped id that sorts by send time, so scans and data skipping follow arrival."""
    return _uuid7_layout(f"{sent_at_micros // 1000:012x}", secrets.token_hex(9))


def message_id_column(sent_at_micros: int) -> Column:
    """The same id shape, generated per row inside Spark for bulk sends."""
    random_hex = F.regexp_replace(F.expr("uuid()"), "-", "")
    millis_hex = f"{sent_at_micros // 1000:012x}"
    return F.concat(
        F.lit(f"{millis_hex[:8]}-{millis_hex[8:12]}-7"),
        random_hex.substr(1, 3),
        F.lit("-8"),
        random_hex.substr(4, 3),
        F.lit("-"),
        random_hex.substr(7, 12),
    )
