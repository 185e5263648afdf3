"""Receipt handles: opaque, unguessable, new on every receive, and verifiable without a lookup.

A handle is `shard.message_id.nonce.mac`. The nonce derives from a random per-receive token, so
every receive issues a new handle; the MAC is keyed by a per-queue secret, so a handle that was
never issued by this queue is rejected even when its message is gone. Python and Spark compute
the same strings, so handles from `receive` and from `receive_df` are interchangeable.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ReceiptHandleIsInvalid
from ..limits import MAX_SHARDS
from .expr import Expr, as_string, concat_ws, lit, prefix, sha256_hex

if TYPE_CHECKING:
    from pyspark.sql import Column

_ID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# Every shard a queue may have: 0 to MAX_SHARDS - 1, without leading zeros.
_SHARD = rf"0|[1-9][0-9]{{0,{len(str(MAX_SHARDS - 1)) - 1}}}"
HANDLE_PATTERN = rf"^({_SHARD})\.({_ID})\.([0-9a-f]{{32}})\.([0-9a-f]{{16}})$"
_HANDLE = re.compile(HANDLE_PATTERN)
# A move (engine/moves/steps.py) writes a marker in a row's receipt_handle in a handle's place:
# `moving:<token>:<destination>`, which no handle pattern matches.
MOVE_MARKER_PREFIX = "moving:"
NONCE_LENGTH = 32
MAC_LENGTH = 16


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


def _mac(secret: str, shard: str, message_id: str, nonce: str) -> str:
    return _sha256_hex(f"{secret}.{shard}.{message_id}.{nonce}")[:MAC_LENGTH]


def issue(secret: str, claim_token: str, shard: int, message_id: str) -> str:
    nonce = _sha256_hex(f"{claim_token}.{message_id}")[:NONCE_LENGTH]
    return f"{shard}.{message_id}.{nonce}.{_mac(secret, str(shard), message_id, nonce)}"


def parse(secret: str, handle: object) -> HandleRef:
    """Validates a handle's form and MAC; raises ReceiptHandleIsInvalid for anything else.

    The MAC is compared in constant time, so response times say nothing about a forged one."""
    match = _HANDLE.fullmatch(handle) if isinstance(handle, str) else None
    if match is None:
        raise ReceiptHandleIsInvalid(
            f"receipt handle {_shorten(handle)} is malformed: pass the receipt_handle of a received"
            " message unchanged"
        )
    shard, message_id, nonce, mac = match.groups()
    if not hmac.compare_digest(mac, _mac(secret, shard, message_id, nonce)):
        raise ReceiptHandleIsInvalid(
            f"receipt handle {_shorten(handle)} was not issued by this queue"
        )
    return HandleRef(handle, int(shard), message_id)


def shard_of(handle: str) -> int:
    """The shard a handle this engine issued names (its first part; no MAC check)."""
    return int(handle.split(".", 1)[0])


def issue_expr(secret: str, claim_token: str, shard: Expr, message_id: Expr) -> Expr:
    """`issue` computed by the engine inside a claim's statement, row by row."""
    nonce = prefix(sha256_hex(concat_ws(".", lit(claim_token), message_id)), NONCE_LENGTH)
    mac = prefix(
        sha256_hex(concat_ws(".", lit(secret), as_string(shard), message_id, nonce)), MAC_LENGTH
    )
    return concat_ws(".", as_string(shard), message_id, nonce, mac)


def parse_columns(secret: str, handle: Column) -> dict[str, Column]:
    """`parse` computed by Spark: shard, message_id and a `valid` flag for a handle column."""
    from pyspark.sql import functions as F

    part = {i: F.regexp_extract(handle, HANDLE_PATTERN, i) for i in range(1, 5)}
    expected_mac = F.substring(
        F.sha2(F.concat_ws(".", F.lit(secret), part[1], part[2], part[3]), 256), 1, MAC_LENGTH
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
