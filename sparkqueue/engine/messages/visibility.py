"""Changing visibility: hide a received message for longer, or make it visible again at once."""

from __future__ import annotations

from datetime import datetime, timedelta

from ...errors import (
    InvalidParameterValue,
    MessageNotInflight,
    QueueError,
    ReceiptHandleIsInvalid,
)
from ...limits import MAX_VISIBILITY_SECONDS
from ...rules import handles
from ...rules.expr import Expr, col, lit, micros, when
from ...rules.handles import HandleRef
from ...store.registry import QueueRecord
from ..conditions import being_moved, id_range, in_flight
from ..context import QueueContext

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


def extension(
    entries: list[tuple[HandleRef, int]], now: datetime
) -> tuple[Expr, dict[str, Expr], dict[str, datetime]]:
    """What a visibility change updates and how: the rows still holding these handles, in flight,
    whose new time stays within 12 hours of the receive that issued the handle; their new
    visible_at; and each handle's target time (to tell afterwards what applied)."""
    targets = new_times(entries, now)
    visible_at = _per_handle(targets)
    rows = (
        col("message_id").isin([ref.message_id for ref, _ in entries])
        & col("receipt_handle").isin(list(targets))
        & (col("visible_at") > lit(now))
        & within_ceiling(visible_at, col("handle_issued_at"))
    )
    return rows, {"visible_at": visible_at}, targets


def new_times(entries: list[tuple[HandleRef, int]], now: datetime) -> dict[str, datetime]:
    """Each handle's new visible_at: `now` plus its seconds."""
    return {ref.handle: now + timedelta(seconds=seconds) for ref, seconds in entries}


def within_ceiling(visible_at: Expr, handle_issued_at: Expr) -> Expr:
    """A new visible_at may be at most 12 hours after the receive that issued the handle."""
    ceiling = micros(visible_at) - micros(handle_issued_at)
    return ceiling <= MAX_VISIBILITY_SECONDS * 1_000_000


def change(
    ctx: QueueContext, record: QueueRecord, entries: list[tuple[HandleRef, int]]
) -> Outcomes:
    """One UPDATE on literal shards, ids and handles (no join); only when it did not update every
    entry are the rows looked at again."""
    shards = col("shard").isin([ref.shard for ref, _ in entries])
    ids = id_range(ref.message_id for ref, _ in entries)
    tables = ctx.tables_for(record)

    def attempt() -> Outcomes:
        now = ctx.now()
        rows, values, targets = extension(entries, now)
        counts = tables.change(record.location, shards & ids & rows, values)
        if counts.all_of(len(targets)):
            return {ref.handle: None for ref, _ in entries}
        return diagnose(ctx, record, entries, now)

    return tables.transact(record.location, attempt, f"changing visibility on {record.name!r}")


def _per_handle(targets: dict[str, datetime]) -> Expr:
    """Each row's new visible_at by its handle: one literal when all agree (a heartbeat)."""
    distinct = set(targets.values())
    if len(distinct) == 1:
        return lit(distinct.pop())
    branches = [(col("receipt_handle") == handle, lit(at)) for handle, at in targets.items()]
    return when(branches[:-1], branches[-1][1])


def diagnose(
    ctx: QueueContext,
    record: QueueRecord,
    entries: list[tuple[HandleRef, int]],
    now: datetime,
) -> Outcomes:
    """Says, per entry, why a visibility change did not apply (or that it did after all)."""
    targets = new_times(entries, now)
    rows = {
        row.message_id: row
        for row in ctx.tables_for(record).select(
            record.location,
            ["message_id", "receipt_handle", "visible_at"],
            col("shard").isin([ref.shard for ref, _ in entries])
            & col("message_id").isin([ref.message_id for ref, _ in entries]),
        )
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
        elif row.visible_at == targets[ref.handle]:
            outcomes[ref.handle] = None
        elif row.visible_at <= now:
            outcomes[ref.handle] = not_in_flight(ref)
        else:
            outcomes[ref.handle] = InvalidParameterValue(
                f"visibility_timeout {seconds} would hide message {ref.message_id} more than"
                f" {MAX_VISIBILITY_SECONDS} s (12 hours) after the receive that issued this"
                " handle; use a smaller value"
            )
    return outcomes


def not_in_flight(ref: HandleRef) -> MessageNotInflight:
    return MessageNotInflight(
        f"message {ref.message_id} is not in flight: its visibility timeout already ended;"
        " receive it again to get a new handle"
    )


def current_receives(
    ctx: QueueContext, record: QueueRecord, refs: list[HandleRef]
) -> dict[str, HandleRef]:
    """Of these messages, those in flight now, each with the handle of its latest receive."""
    now = ctx.now()
    rows = ctx.tables_for(record).select(
        record.location,
        ["message_id", "shard", "receipt_handle"],
        col("shard").isin([ref.shard for ref in refs])
        & col("message_id").isin([ref.message_id for ref in refs])
        & in_flight(now)
        & ~being_moved(),
    )
    return {
        row.message_id: HandleRef(row.receipt_handle, row.shard, row.message_id) for row in rows
    }
