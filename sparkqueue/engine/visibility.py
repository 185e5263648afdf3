"""Changing visibility: hide a received message for longer, or make it visible again at once."""

from __future__ import annotations

from datetime import datetime, timedelta

from pyspark.sql import functions as F

from ..clock import to_micros
from ..errors import (
    InvalidParameterValue,
    MessageNotInflight,
    QueueError,
    ReceiptHandleIsInvalid,
)
from ..limits import MAX_VISIBILITY_SECONDS
from ..rules import handles
from ..rules.handles import HandleRef
from ..store.dml import in_list, target_prefix
from ..store.registry import QueueRecord
from .claim import keyed_merge
from .context import QueueContext

Outcomes = dict[str, QueueError | None]  # receipt handle -> its error, or None when it applied


def parse_entries(
    record: QueueRecord, entries: list[tuple[str, int]]
) -> tuple[list[tuple[HandleRef, int]], Outcomes]:
    """Valid (handle, seconds) entries, and the errors of the handles that are not valid."""
    valid: list[tuple[HandleRef, int]] = []
    errors: Outcomes = {}
    for handle, seconds in entries:
        try:
            valid.append((handles.parse(record.secret, handle), seconds))
        except ReceiptHandleIsInvalid as error:
            errors[handle] = error
    return valid, errors


def change_visibility(ctx: QueueContext, name: str, entries: list[tuple[str, int]]) -> Outcomes:
    """Applies every entry in one transaction; each handle's outcome (None: applied)."""
    record = ctx.record(name)
    valid, outcomes = parse_entries(record, entries)
    if valid:
        outcomes.update(_change(ctx, record, valid))
    return outcomes


def _change(
    ctx: QueueContext, record: QueueRecord, entries: list[tuple[HandleRef, int]]
) -> Outcomes:
    """One MERGE for all entries; only entries it did not update are looked at again."""
    shards = [ref.shard for ref, _ in entries]

    def attempt() -> Outcomes:
        now = ctx.now()
        targets = {ref.handle: now + timedelta(seconds=seconds) for ref, seconds in entries}
        source = ctx.storage.spark.createDataFrame(
            [(ref.message_id, ref.handle, targets[ref.handle]) for ref, _ in entries],
            "message_id string, receipt_handle string, visible_at timestamp",
        )
        t = target_prefix(record.location)
        ceiling = F.unix_micros("s.visible_at") - F.unix_micros(f"{t}handle_issued_at")
        counts = (
            keyed_merge(
                ctx,
                record,
                source,
                shards,
                F.col(f"{t}receipt_handle") == F.col("s.receipt_handle"),
            )
            .update(
                {"visible_at": F.col("s.visible_at")},
                (F.col(f"{t}visible_at") > F.lit(now))
                & (ceiling <= MAX_VISIBILITY_SECONDS * 1_000_000),
            )
            .execute()
        )
        if counts.all_of(len(entries)):
            return {ref.handle: None for ref, _ in entries}
        return _diagnose(ctx, record, entries, now, targets)

    return ctx.storage.transact(record.location, attempt, f"changing visibility on {record.name!r}")


def _diagnose(
    ctx: QueueContext,
    record: QueueRecord,
    entries: list[tuple[HandleRef, int]],
    now: datetime,
    targets: dict[str, datetime],
) -> Outcomes:
    """Says, per entry, why a visibility change did not apply (or that it did after all)."""
    rows = {
        row.message_id: row
        for row in ctx.read(record)
        .where(
            in_list("shard", [ref.shard for ref, _ in entries])
            & F.col("message_id").isin([ref.message_id for ref, _ in entries])
        )
        .select(
            "message_id",
            "receipt_handle",
            F.unix_micros("visible_at").alias("visible_us"),
        )
        .collect()
    }
    outcomes: Outcomes = {}
    for ref, seconds in entries:
        row = rows.get(ref.message_id)
        if row is None:
            outcomes[ref.handle] = ReceiptHandleIsInvalid(
                f"message {ref.message_id} is no longer in the queue (deleted or moved)",
                message_gone=True,
            )
        elif row.receipt_handle != ref.handle:
            outcomes[ref.handle] = ReceiptHandleIsInvalid(
                f"receipt handle for message {ref.message_id} was superseded by a later receive"
                " or a release; use the handle of the latest receive"
            )
        elif row.visible_us == to_micros(targets[ref.handle]):
            outcomes[ref.handle] = None
        elif row.visible_us <= to_micros(now):
            outcomes[ref.handle] = MessageNotInflight(
                f"message {ref.message_id} is not in flight: its visibility timeout already"
                " ended; receive it again to get a new handle"
            )
        else:
            outcomes[ref.handle] = InvalidParameterValue(
                f"visibility_timeout {seconds} would hide message {ref.message_id} more than"
                f" {MAX_VISIBILITY_SECONDS} s (12 hours) after the receive that issued this"
                " handle; use a smaller value"
            )
    return outcomes
