"""`receive_df`: a claim of up to millions of messages, made once, whose result stays readable.

The claimed rows are first staged in the queue's claims table (partitioned by claim id), then one
MERGE applies them to the queue; rows another receiver claimed first are trimmed from the stage.
The DataFrame returned reads the stage, so evaluating it again never claims again.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..model import MESSAGE_FIELDS
from ..rules import handles
from ..store.dml import in_list, target_prefix
from ..store.registry import QueueRecord
from ..store.schema import CLAIMS_PARTITIONING, CLAIMS_SCHEMA, QUEUE_TABLE_PROPERTIES
from . import fifo
from .claim import claim_update, count_in_flight, keyed_merge
from .conditions import claimable
from .context import QueueContext
from .inflight import gauge

_APPLIED = (
    "receipt_handle",
    "visible_at",
    "receive_count",
    "first_received_at",
    "handle_issued_at",
)


def receive_df(
    ctx: QueueContext, name: str, max_messages: int, visibility_timeout: int | None
) -> DataFrame:
    record = ctx.record(name)
    storage = ctx.storage
    claims_path = storage.claims_path(record.location)
    storage.ensure_table(
        claims_path,
        CLAIMS_SCHEMA,
        partition_by=CLAIMS_PARTITIONING,
        properties=QUEUE_TABLE_PROPERTIES,
    )
    attrs = record.attributes
    in_flight = gauge(record.location, attrs.fifo)

    def attempt() -> str:
        now = ctx.now()
        granted = in_flight.reserve(
            max_messages, lambda: count_in_flight(ctx, record, now), f"queue {record.name!r}"
        )
        claimed = 0
        try:
            token, claimed = _stage_and_apply(ctx, record, claims_path, granted, visibility_timeout)
        finally:
            in_flight.settle(granted, claimed)
        return token

    token = storage.transact(record.location, attempt, f"receiving from {record.name!r}")
    return storage.read(claims_path).where(F.col("claim_id") == token).select(*MESSAGE_FIELDS)


def _stage_and_apply(
    ctx: QueueContext,
    record: QueueRecord,
    claims_path: str,
    wanted: int,
    visibility_timeout: int | None,
) -> tuple[str, int]:
    """Stages up to `wanted` claims and applies them; returns the claim id and how many won."""
    storage = ctx.storage
    attrs = record.attributes
    now = ctx.now()
    token = handles.new_token()
    seconds = attrs.visibility_timeout if visibility_timeout is None else visibility_timeout
    table = ctx.read(record)
    candidates = (
        fifo.deliverable(table, now, attrs, token)
        if attrs.fifo
        else table.where(claimable(now, attrs))
    )
    staged = (
        candidates.limit(wanted)
        .withColumns(
            {
                "expected_count": F.col("receive_count"),
                "receipt_handle": handles.issue_column(
                    record.secret, token, F.col("shard"), F.col("message_id")
                ),
                "visible_at": F.lit(now + timedelta(seconds=seconds)),
                "receive_count": F.col("receive_count") + 1,
                "first_received_at": F.coalesce("first_received_at", F.lit(now)),
                "handle_issued_at": F.lit(now),
                "claim_id": F.lit(token),
            }
        )
        .select(*CLAIMS_SCHEMA.names)
    )
    storage.append(claims_path, staged, f"staging a claim on {record.name!r}")
    claimed = storage.read(claims_path).where(F.col("claim_id") == token)
    per_shard = claimed.groupBy("shard").count().collect()
    if not per_shard:
        return token, 0
    shards = [row["shard"] for row in per_shard]
    try:
        merge = claim_update(
            keyed_merge(ctx, record, claimed, shards),
            now,
            attrs,
            {name: F.col(f"s.{name}") for name in _APPLIED},
        )
        counts = merge.execute()
    except Exception:
        _discard(ctx, claims_path, token)
        raise
    staged_count = sum(row["count"] for row in per_shard)
    if counts.all_of(staged_count):
        return token, staged_count
    won = _drop_lost_claims(ctx, record, claims_path, token, shards)
    return token, won


def _discard(ctx: QueueContext, claims_path: str, token: str) -> None:
    """Removes a claim whose MERGE failed, so its stage never shows rows it did not claim."""
    storage = ctx.storage
    storage.transact(
        claims_path,
        lambda: storage.change(claims_path, F.col("claim_id") == token, ("claim_id", "message_id")),
        "discarding a failed claim",
    )


def _drop_lost_claims(
    ctx: QueueContext, record: QueueRecord, claims_path: str, token: str, shards: list[int]
) -> int:
    """Removes staged rows whose message another receiver claimed first; returns how many won."""
    storage = ctx.storage
    c = target_prefix(claims_path)
    ours = F.col(f"{c}claim_id") == token
    won = (
        storage.read(claims_path)
        .where(F.col("claim_id") == token)
        .select("message_id", "receipt_handle")
        .join(
            ctx.read(record).where(in_list("shard", shards)).select("message_id", "receipt_handle"),
            ["message_id", "receipt_handle"],
        )
        .persist()
    )
    try:

        def trim() -> None:
            storage.merge(
                claims_path, won, ours & (F.col(f"{c}message_id") == F.col("s.message_id"))
            ).delete_unmatched(ours).execute()

        storage.transact(claims_path, trim, f"trimming a claim on {record.name!r}")
        return won.count()
    finally:
        won.unpersist()
