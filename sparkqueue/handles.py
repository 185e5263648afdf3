"""Receipt handles: opaque, unguessable, new on every receive, and verifiable without a lookup.

A handle is `shard.message_id.nonce.mac`. The nonce derives from a random per-receive token, so
every receive issues a new handle; the MAC is keyed by a per-queue secret, so a handle that was
never issued by this queue is rejected even when its message is gone. Python and Spark compute
the same strings, so handles from `receive` and from `receive_df` are interchangeable.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from .errors import ReceiptHandleIsInvalid

_ID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
HANDLE_PATTERN = rf"^(0|[1-9][0-9]?)\.({_ID})\.([0-9a-f]{{32}})\.([0-9a-f]{{16}})$"
_HANDLE = re.compile(HANDLE_PATTERN)


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh secret for one receive (or for a queue's MAC key)."""
    return secrets.token_hex(16)


@dataclass(frozen=True)
class HandleRef:
    """What a valid handle points at."""

    handle: str
    shard: int
    message_id: str


def issue(secret: str, claim_token: str, shard: int, message_id: str) -> str:
    nonce = _sha256_hex(f"{claim_token}.{message_id}")[:32]
    mac = _sha256_hex(f"{secret}.{shard}.{message_id}.{nonce}")[:16]
    return f"{shard}.{message_id}.{nonce}.{mac}"


def parse(secret: str, handle: object) -> HandleRef:
    """Validates a handle's form and MAC; raises ReceiptHandleIsInvalid for anything else."""
    match = _HANDLE.match(handle) if isinstance(handle, str) else None
    if match is None:
        raise ReceiptHandleIsInvalid(
            f"receipt handle {_shorten(handle)} is malformed: pass the receipt_handle of a received"
            " message unchanged"
        )
    shard, message_id, nonce, mac = match.groups()
    if mac != _sha256_hex(f"{secret}.{shard}.{message_id}.{nonce}")[:16]:
        raise ReceiptHandleIsInvalid(
            f"receipt handle {_shorten(handle)} was not issued by this queue"
        )
    return HandleRef(handle, int(shard), message_id)


def issue_column(secret: str, claim_token: str, shard: Column, message_id: Column) -> Column:
    """`issue` computed by Spark, for claims too large to pass through the driver."""
    nonce = F.substring(F.sha2(F.concat_ws(".", F.lit(claim_token), message_id), 256), 1, 32)
    mac = F.substring(
        F.sha2(F.concat_ws(".", F.lit(secret), shard.cast("string"), message_id, nonce), 256), 1, 16
    )
    return F.concat_ws(".", shard.cast("string"), message_id, nonce, mac)


def parse_columns(secret: str, handle: Column) -> dict[str, Column]:
    """`parse` computed by Spark: shard, message_id and a `valid` flag for a handle column."""
    part = {i: F.regexp_extract(handle, HANDLE_PATTERN, i) for i in range(1, 5)}
    expected_mac = F.substring(
        F.sha2(F.concat_ws(".", F.lit(secret), part[1], part[2], part[3]), 256), 1, 16
    )
    valid = F.coalesce(handle.rlike(HANDLE_PATTERN) & (part[4] == expected_mac), F.lit(False))
    return {
        "shard": F.when(valid, part[1].cast("int")),
        "message_id": F.when(valid, part[2]),
        "valid": valid,
    }


def _shorten(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
