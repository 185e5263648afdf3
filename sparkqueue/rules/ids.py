"""Message ids (UUIDv7-shaped, sorting by send time) and SQS's content-based deduplication id."""

from __future__ import annotations

import hashlib
import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column


def _uuid7_layout(millis_hex: str, random_hex: str) -> str:
    return f"{millis_hex[:8]}-{millis_hex[8:12]}-7{random_hex[:3]}-8{random_hex[3:6]}-{random_hex[6:18]}"


def new_message_id(sent_at_micros: int) -> str:
    """A UUIDv7-shaped id that sorts by send time, so scans and data skipping follow arrival."""
    return _uuid7_layout(f"{sent_at_micros // 1000:012x}", secrets.token_hex(9))


def first_id_at(sent_at_micros: int) -> str:
    """The least id a message sent at that moment (or later) can have."""
    return _uuid7_layout(f"{sent_at_micros // 1000:012x}", "0" * 18)


def message_id_column(sent_at_micros: int) -> Column:
    """The same id shape, generated per row inside Spark for bulk sends."""
    from pyspark.sql import functions as F

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


def content_deduplication_id(body: str) -> str:
    """SQS's content-based deduplication id: the SHA-256 of the body."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()
