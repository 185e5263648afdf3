"""Deleting a whole DataFrame of received messages by their receipt handles (Spark's)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ...errors import InvalidParameterValue, ReceiptHandleIsInvalid
from ...model import BatchResult
from ...rules import handles
from ...store.counts import Counts
from ...store.registry import QueueRecord
from ...store.spark_exprs import to_column
from ...store.statements import MESSAGE_KEY
from ..conditions import tombstone_values
from ..context import QueueContext
from ..messages.acknowledge import present, retire_where
from . import ranges
from .claim_df import staged_handles
from .id_merges import keyed_merge
from .ranges import RangeClaim


def delete_df(ctx: QueueContext, name: str, df: DataFrame) -> BatchResult:
    """Deletes the messages whose handles are in `df.receipt_handle`, in one transaction.

    The very DataFrame a standard queue's `receive_df` returned is deleted by its claim, with no
    join (see frames/ranges.py); any other goes handle by handle."""
    record = ctx.record(name)
    claim = ranges.claim_of(ctx.range_claims, df, record.location)
    if claim is not None:
        return _delete_claim(ctx, record, df, claim)
    parsed = (
        df.select(F.col("receipt_handle").cast("string").alias("receipt_handle"))
        .distinct()
        .withColumns(handles.parse_columns(record.secret, F.col("receipt_handle")))
        .persist()  # parsed and checked once, for the driver's list and for the MERGE
    )
    try:
        rows = parsed.collect()
        if any(row.receipt_handle is None for row in rows):
            raise InvalidParameterValue("delete_df: the receipt_handle column contains nulls")
        valid = [row for row in rows if row.valid]
        shards = sorted({row.shard for row in valid})
        still_there: set[str] = set()
        if valid:
            source = parsed.where("valid").select("message_id", "receipt_handle")
            if not _delete_matching(ctx, record, source, shards, len(valid)):
                still_there = present(ctx, record, shards, [row.message_id for row in valid])
    finally:
        parsed.unpersist()
    failed = {row.receipt_handle: ReceiptHandleIsInvalid.code for row in rows if not row.valid}
    failed.update(
        {
            row.receipt_handle: ReceiptHandleIsInvalid.code
            for row in valid
            if row.message_id in still_there
        }
    )
    successful = [row.receipt_handle for row in valid if row.receipt_handle not in failed]
    return BatchResult(successful=successful, failed=failed)


def _delete_claim(
    ctx: QueueContext, record: QueueRecord, frame: DataFrame, claim: RangeClaim
) -> BatchResult:
    """Deletes the rows in the claim's range that still hold the handles it issued; when the
    commit says that was all of them, every handle succeeded, else those whose message is still
    there (received again since, or moved) failed, as handle by handle."""
    what = f"deleting a claim from {record.name!r}"
    if ctx.tables.engine == "native":  # a standard queue's, deleted as its claim was made
        # What `frame` reads, with no Spark job; read first, so that a read failing after the
        # DELETE never reports deleted messages as an error.
        rows = staged_handles(ctx, record, claim.token)
        deleted = retire_where(ctx, ctx.tables, record, claim.held_rows(record.secret), what)
        counts = Counts(known=True, deleted=deleted)
    else:
        storage = ctx.storage
        counts = storage.transact(
            record.location,
            lambda: storage.change(record.location, claim.held(record.secret), MESSAGE_KEY),
            what,
        )
        # Through Arrow: a claim's handles are up to millions of strings, and Row objects cost
        # more to make (docs/performance.md).
        rows = frame.select("message_id", "receipt_handle").toArrow()
    handles_held = rows.column("receipt_handle").to_pylist()
    if counts.all_of(claim.count):
        return BatchResult(successful=handles_held)
    still_there = {
        row.message_id
        for row in ctx.read(record)
        .where(claim.rows())
        .join(frame.select("message_id"), "message_id", "left_semi")
        .select("message_id")
        .collect()
    }
    pairs = list(zip(rows.column("message_id").to_pylist(), handles_held, strict=True))
    return BatchResult(
        successful=[handle for message_id, handle in pairs if message_id not in still_there],
        failed={
            handle: ReceiptHandleIsInvalid.code
            for message_id, handle in pairs
            if message_id in still_there
        },
    )


def _delete_matching(
    ctx: QueueContext, record: QueueRecord, source: DataFrame, shards: list[int], expected: int
) -> bool:
    """Deletes rows whose message id AND current handle match `source`; True when the commit
    says it deleted all `expected` (else the caller looks which are left)."""

    def attempt() -> bool:
        t = ctx.storage.target_prefix(record.location)
        merge = keyed_merge(
            ctx, record, source, shards, F.col(f"{t}receipt_handle") == F.col("s.receipt_handle")
        )
        # FIFO: the deduplication id outlives the message, as a tombstone.
        fifo_queue = record.attributes.fifo
        tombstone = {name: to_column(v, t) for name, v in tombstone_values().items()}
        merge = merge.update(tombstone) if fifo_queue else merge.delete()
        return merge.execute().all_of(expected)

    return ctx.storage.transact(record.location, attempt, f"deleting from {record.name!r}")
