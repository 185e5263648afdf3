"""The FIFO parts of send, receive, peek and stats, on either kind of FIFO table.

A table the native engine numbers (store/native_fifo.py) is served by delta-rs: sends append in
sequence, receives take group prefixes with one DataFusion query, and reads leave out the
duplicates that rules/deduplication.py finds among the few rows sharing a deduplication id, both
read from one snapshot. A row-tracking table is Spark's (fifo.py). Either way the rules are the
same expressions (conditions.py) and the same deduplication rule.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..model import SentMessage
from ..rules.deduplication import duplicates, sent_answers
from ..rules.expr import Expr, col, null, when
from ..store.registry import QueueRecord
from ..store.schema import MESSAGE_COLUMNS
from ..store.statements import Row
from .conditions import alive, claimable, in_flight, is_message
from .context import QueueContext

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from ..store.native_tables import NativeTables


def send(ctx: QueueContext, record: QueueRecord, rows: list[dict[str, Any]]) -> list[SentMessage]:
    """Writes a FIFO send's rows in entry order, in one commit; returns what each answers (a
    duplicate: the id and sequence number of the message it repeats)."""
    if not ctx.sequenced(record):
        from .send_df import send_fifo_rows

        return send_fifo_rows(ctx, record, rows)
    from ..store.native_fifo import append_in_sequence, deduplication_history, home_shard

    native = ctx.native_writer(record)
    shards = record.attributes.shards
    placed = [{**row, "shard": home_shard(row["group_id"], shards)} for row in rows]
    what = f"sending to {record.name!r}"
    append_in_sequence(native, record.location, MESSAGE_COLUMNS, placed, what)
    sent = {row["message_id"]: row["deduplication_id"] for row in rows}
    history = deduplication_history(native, record.location, sorted(set(sent.values())))
    answers = sent_answers(sent, history)
    return [answers[row["message_id"]] for row in rows]


def candidates(
    ctx: QueueContext, record: QueueRecord, now: datetime, wanted: int, columns: Sequence[str]
) -> list[Row]:
    """Up to `wanted` rows a FIFO receive may claim: whole group prefixes (see fifo.py), groups
    in an order of this receive's own, so concurrent receivers start on different groups."""
    attrs = record.attributes
    native = reader(ctx, record)
    if native is None:  # Spark reads either kind (the claim after it says who may write)
        from . import fifo

        return fifo.prefixes(ctx.read(record), now, attrs, wanted, columns)
    from ..store.native_fifo import group_prefixes

    snapshot = native.open(record.location)
    return group_prefixes(
        native,
        record.location,
        columns,
        living=alive(now, attrs) & _not_duplicate(native, record, snapshot),
        ok=claimable(now, attrs),
        held=in_flight(now),
        salt=secrets.token_hex(16),
        limit=wanted,
        at=snapshot,
    )


def counted(
    ctx: QueueContext, record: QueueRecord, counts: dict[str, Expr], least: dict[str, Expr]
) -> Row:
    """`Tables.aggregate` over a FIFO queue's messages as receivers see them: never-delivered
    duplicates left out (`least` values are 64-bit integers)."""
    native = reader(ctx, record)
    if native is None:
        from .fifo import aggregate

        return aggregate(ctx.read(record), counts, least)
    snapshot = native.open(record.location)
    kept = _not_duplicate(native, record, snapshot)
    return native.aggregate(
        record.location,
        {name: kept & condition for name, condition in counts.items()},
        {name: when([(kept, value)], null("long")) for name, value in least.items()},
        at=snapshot,
    )


def peek(
    ctx: QueueContext, record: QueueRecord, where: Expr, columns: Sequence[str], limit: int
) -> list[Row]:
    """Rows of a table the native engine numbers meeting `where`, duplicates left out, in send
    order (a broker with that engine: see `reader`)."""
    native = reader(ctx, record)
    if native is None:
        raise ValueError(f"{record.name!r} is read by Spark here (inspect_df.peek_rows)")
    snapshot = native.open(record.location)
    return native.select(
        record.location,
        columns,
        where & _not_duplicate(native, record, snapshot),
        order_by=["sent_at", "message_id"],
        limit=limit,
        at=snapshot,
    )


def reader(ctx: QueueContext, record: QueueRecord) -> NativeTables | None:
    """The native engine where it reads this FIFO queue (a table it numbers, on a broker that
    has it); None where Spark reads it. Each read takes one snapshot, so duplicates are judged on
    the very rows read."""
    if ctx.native is not None and ctx.sequenced(record):
        return ctx.native
    return None


def _not_duplicate(native: NativeTables, record: QueueRecord, snapshot: DeltaTable) -> Expr:
    """Rows that are not duplicates, as a condition on the duplicates' ids (few: only rows
    sharing a deduplication id can be one)."""
    from ..store.native_fifo import deduplication_history

    history = deduplication_history(native, record.location, at=snapshot)
    return ~col("message_id").isin(duplicates(history))


def drop_duplicates(native: NativeTables, record: QueueRecord) -> int:
    """Deletes the duplicates (never delivered, never received) of a FIFO table the native
    engine numbers: fifo.drop_duplicates for the rows at hand; returns how many."""
    from ..store.native_fifo import deduplication_history

    def attempt() -> int:
        found = duplicates(deduplication_history(native, record.location))
        if not found:
            return 0
        rule = col("message_id").isin(found) & is_message() & col("receipt_handle").is_null()
        return native.change(record.location, rule).changed

    return native.transact(record.location, attempt, f"dropping duplicates from {record.name!r}")
