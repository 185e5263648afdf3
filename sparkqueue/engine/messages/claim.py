"""Receiving: claim visible messages in one optimistic transaction, issuing new receipt handles.

A claim is one UPDATE of the candidates still as they were read, pruned to literal shards; its
count says whether every claim won, else the handles the table then holds say which did. On a FIFO
queue the UPDATE fails whole if any claimed row changed, so that no group is ever half-claimed
(see fifo/spark.py). Every statement is built from the rules' expressions and run by the queue's engine
(`QueueContext.tables_for`); a FIFO queue's candidates are group prefixes (fifo/operations.py).
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any

from ...attributes import QueueAttributes
from ...clock import to_micros
from ...limits import DEEP_SHARD_ROWS, QUIET_LOOKBACK
from ...model import Message
from ...rules import handles
from ...rules.deduplication import given_id
from ...rules.expr import Call, Expr, any_of, coalesce, col, lit, null, when
from ...rules.fairness import TenantView, counts_soon, judge, tenant_counts
from ...rules.ids import first_id_at
from ...store.registry import QueueRecord
from ...store.statements import Row, Tables
from ...store.transactions import is_commit_conflict
from ..conditions import claimable, id_range, in_flight, issued_handle
from ..context import QueueContext
from ..fifo import operations as fifo_ops
from .spares import spare_room

COLLECTED = ("shard", "message_id", "body", "attributes", "group_id", "deduplication_id",
             "sequence_number", "receive_count", "attribute_types", "sent_at",
             "first_received_at", "moved_from")  # fmt: skip
ORDER = ("message_id",)  # oldest first: ids sort by send time


def claim(
    ctx: QueueContext,
    record: QueueRecord,
    max_messages: int,
    visibility_timeout: int | None,
    *,
    token: str | None = None,
) -> list[Message]:
    """One claim transaction (retried on conflicts) within the queue's in-flight limit; its
    handles from `token` when given (rounds/requests.Ask says why), else from a new one."""
    attrs = record.attributes
    in_flight = ctx.in_flight.of(record.location, attrs.fifo)

    missed: list[bool] = []  # whether the last attempt claimed spares some of which were gone

    def attempt() -> list[Message]:
        now = ctx.now()
        granted = in_flight.reserve(
            max_messages, lambda: count_in_flight(ctx, record, now), f"queue {record.name!r}"
        )
        won: list[str] = []
        try:
            found = candidates(ctx, record, now, granted) if granted else []
            if not found:
                return []
            issuing = token or handles.new_token()
            claims = {
                row.message_id: (
                    row,
                    handles.issue(record.secret, issuing, row.shard, row.message_id),
                )
                for row in found
            }
            timeout = attrs.visibility_timeout if visibility_timeout is None else visibility_timeout
            began = ctx.now()
            values = claim_values(now, ctx.handouts.until(record.location, began, timeout))
            won = _claim_rows(ctx, record, issuing, found, now, values)
            ctx.handouts.took(record.location, began, ctx.now())
        except Exception:
            ctx.spares.drop(record.location)  # a retry reads: these may be what it met
            raise
        finally:
            in_flight.settle(granted, len(won))
        missed[:] = [ctx.spares.settle(record.location, found, len(won))]
        messages = [message_of(claims[i][0], claims[i][1], now) for i in won]
        if attrs.fifo:  # each group's messages in order
            messages.sort(key=lambda m: m.sequence_number or 0)
        else:  # oldest first (ids sort by send time)
            messages.sort(key=lambda m: m.message_id)
        return messages

    tables = ctx.tables_for(record)
    what = f"receiving from {record.name!r}"
    messages = tables.transact(record.location, attempt, what)
    if not messages and any(missed):  # none of the spares left (spares.py): read the table
        messages = tables.transact(record.location, attempt, what)
    return messages


def count_in_flight(ctx: QueueContext, record: QueueRecord, now: datetime) -> int:
    tables = ctx.tables_for(record)
    return int(tables.aggregate(record.location, {"n": in_flight(now)}, {})["n"])


def count_tenants(
    ctx: QueueContext, record: QueueRecord, now: datetime, before: TenantView, elapsed: float | None
) -> TenantView:
    """One grouped scan: each tenant's messages in flight and visible (which tenants are noisy,
    after the view `before` counted `elapsed` seconds ago) and each quiet tenant's oldest
    claimable message (where a receive looks for quiet ones)."""
    visible = claimable(now, record.attributes)
    groups = ctx.tables.aggregate_by(
        record.location,
        "group_id",
        {"in_flight": in_flight(now), "visible": visible},
        {"oldest": when([(visible, col("message_id"))], null("string"))},
    )
    counts = tenant_counts(groups)
    noisy, shares = judge(*counts, before, elapsed)
    quiet = [row for group, row in groups.items() if group not in noisy]
    recent = first_id_at(to_micros(now - QUIET_LOOKBACK))
    return TenantView(
        noisy,
        quiet_from=min([recent, *filter(None, (row["oldest"] for row in quiet))]),
        contended=any(row["in_flight"] or row["visible"] for row in quiet)
        and any(groups[group]["visible"] for group in noisy),
        shares=tuple(sorted(shares.items())),
        soon=counts_soon(*counts, noisy, first=elapsed is None),
    )


def candidates(ctx: QueueContext, record: QueueRecord, now: datetime, wanted: int) -> list[Row]:
    """Visible messages to try, oldest first: those of one random shard, topped up from the
    others when it holds too few; while some tenant is noisy, quiet tenants' first, read so too
    (rules/fairness.py). Receivers of different brokers then rarely collide while their shards
    hold enough (callers of one broker share rounds and never do), and a read touches one
    shard's files: on object storage every file is a request (a shallow queue filled by
    `send_df` holds two per shard). Otherwise the read takes more than wanted, of its shard and
    of the others' when they top it up, and the broker keeps the rest for its next receives,
    which take them instead of reading (spares.py).

    On a shallow queue the shard's oldest rows are read. On a deep one (one shard held
    DEEP_SHARD_ROWS more than wanted at the broker's last look: `QueueContext.depths`) the read
    stops at the rows it needs, spares included (roughly the shard's oldest: files are read in
    the order they were written): ~0.3 s on a 300,000-message backlog against ~0.7-1 s for the
    oldest of all.
    """
    attrs = record.attributes
    tables, location = ctx.tables_for(record), record.location
    if attrs.fifo:  # group prefixes, groups in an order of this receive's own
        return fifo_ops.candidates(ctx, record, now, wanted, COLLECTED)
    visible = claimable(now, attrs)
    tenants = ctx.tenants.of(location, lambda *last: count_tenants(ctx, record, now, *last))
    fair = tenants.contended  # some tenant noisy, with a backlog, beside others
    rank = tenants.rank() if len(tenants.noisy) > 1 else None  # several noisy: least busy first
    # Oldest first, and no tenants to be fair to: what spares serve (spares.py).
    plain = not fair and rank is None and not ctx.tenants.tenanted(location)
    if not plain:
        ctx.spares.drop(location)
    elif kept := ctx.spares.take(location, wanted, now):
        return _seen(ctx, location, kept)
    with tables.snapshot(location) as at:  # every read alike, the table opened once
        found: list[Row] = []
        if fair:  # quiet tenants' first, from every shard, among the ids the count bounds
            quiet = visible & tenants.quiet_candidates()
            found = tables.select(location, COLLECTED, quiet, order_by=ORDER, limit=wanted, at=at)
        if len(found) < wanted:  # then the rest: while fair, the noisy tenants'
            rest = visible & ~tenants.quiet() if fair else visible
            short = wanted - len(found)
            room = spare_room(wanted, attrs) if plain else short
            found += _from_shards(ctx, record, rest, short, at, rank, room)
        if fair and len(found) < wanted:  # a quiet message below the bound (released since)
            older = visible & tenants.quiet() & ~tenants.quiet_candidates()
            rest = wanted - len(found)
            found += tables.select(location, COLLECTED, older, order_by=ORDER, limit=rest, at=at)
    found.sort(key=lambda row: row["message_id"])  # oldest first (ORDER)
    if plain:
        ctx.spares.keep(location, found[wanted:], now)
    return _seen(ctx, location, found[:wanted])


def _seen(ctx: QueueContext, location: str, found: list[Row]) -> list[Row]:
    """`found`, once the tenants' view knows whether a receive came across a group (a tenant's:
    then the tenants are counted, messages/tenants.py)."""
    if any(row["group_id"] is not None for row in found):
        ctx.tenants.saw_groups(location)
    return found


def _from_shards(
    ctx: QueueContext,
    record: QueueRecord,
    rows: Expr,
    wanted: int,
    at: Any,
    rank: Expr | None,
    room: int,
) -> list[Row]:
    """`wanted` of `rows`, up to `room` (spares beyond `wanted`): one random shard's first,
    then, when it holds fewer than `wanted`, the others' (see `candidates`), the oldest first
    (after `rank` when given) or on a deep queue as the shard holds them; then whether the
    queue is deep is looked at again. The others' read fills the room too: a queue whose few
    messages sit in some shards (a small send is one shard's file) would otherwise read the
    table twice for every receive whose random shard is empty, and keep no spares."""
    attrs, tables, location = record.attributes, ctx.tables_for(record), record.location
    first = random.randrange(attrs.shards)
    in_first, others = rows & (col("shard") == first), rows & (col("shard") != first)
    depths = ctx.depths
    deep = depths.is_deep(location)
    order: list[str | Expr] = [] if deep else [*([rank] if rank is not None else []), *ORDER]
    found = tables.select(location, COLLECTED, in_first, order_by=order, limit=room, at=at)
    from_first = len(found)
    if from_first < wanted and attrs.shards > 1:
        rest = room - from_first
        found += tables.select(location, COLLECTED, others, order_by=order, limit=rest, at=at)
    if deep and from_first < wanted:
        depths.mark(location, False)
    elif not deep and from_first >= wanted and depths.due(location):  # has it grown deep?
        enough = wanted + DEEP_SHARD_ROWS
        in_shard = tables.select(location, ["message_id"], in_first, limit=enough, at=at)
        depths.mark(location, len(in_shard) == enough)
    return found


def _claim_rows(
    ctx: QueueContext,
    record: QueueRecord,
    token: str,
    found: list[Row],
    now: datetime,
    values: dict[str, Expr],
) -> list[str]:
    """One UPDATE of the candidates on literal shards and ids (a one-row UPDATE is about half a
    one-row MERGE here). A standard queue skips candidates claimed meanwhile; a FIFO queue fails
    the whole UPDATE if any changed, so that no group is ever half-claimed (see fifo/spark.py). When it
    updated every candidate they are all ours; otherwise the handles the table then holds say
    which claims won."""
    tables = ctx.tables_for(record)
    ids = [row.message_id for row in found]
    by_id = (
        col("shard").isin([row.shard for row in found])
        & id_range(ids)
        & col("message_id").isin(ids)
    )
    unchanged = still_claimable(found, now, record.attributes)
    handle = issued_handle(record.secret, token)
    if record.attributes.fifo:
        rows, new_handle = by_id, unless_stale(unchanged, handle)
    else:
        rows, new_handle = by_id & unchanged, handle
    mine = by_id & (col("receipt_handle") == handle)
    try:
        counts = tables.change(record.location, rows, {**values, "receipt_handle": new_handle})
    except Exception as error:
        found = landed(tables, record.location, error, mine)
        if not found:
            raise
        return [row.message_id for row in found]
    if counts.all_of(len(ids)):
        return ids
    return [row.message_id for row in tables.select(record.location, ["message_id"], mine)]


def landed(tables: Tables, location: str, error: Exception, mine: Expr) -> list[Row]:
    """After a claim's statement failed: the rows holding this claim's handles (`mine`) when the
    "conflict" was this very statement, committed with its answer lost, since a retry would
    claim other messages besides; none otherwise (the error stands). Spark's commits on
    Azure's Blob endpoint need it (ABFS retries a copy whose answer was lost, Azure refuses the
    retry, and Delta checks the transaction against itself), a `receive` and a `receive_df`
    alike; the native engine's own are found by their mark before this
    (store/native_commits.py)."""
    if not is_commit_conflict(error):
        return []
    return tables.select(location, ["message_id"], mine)


def still_claimable(found: list[Row], now: datetime, attrs: QueueAttributes) -> Expr:
    """Candidates still as they were read (no receive since) and still claimable now."""
    return as_read(found) & claimable(now, attrs)


def as_read(found: list[Row]) -> Expr:
    """Rows received no more times than when they were read.

    The ids are grouped by the receive count they were read with (usually one or two groups):
    plain comparisons, because delta-rs re-plans a commit's predicate to check it against the
    files a concurrent commit added, and a cast in it does not survive that round trip."""
    by_count: dict[int, list[str]] = {}
    for row in found:
        by_count.setdefault(row.receive_count, []).append(row.message_id)
    return any_of(
        [(col("receive_count") == n) & col("message_id").isin(ids) for n, ids in by_count.items()]
    )


def unless_stale(still_valid: Expr, value: Expr) -> Expr:
    """`value` while the row is as the claim read it; otherwise the whole statement fails
    uncommitted, and its transaction runs again on a fresh read (a FIFO claim: see fifo/spark.py)."""
    return Call("unless_stale", (still_valid, value))


def claim_values(now: datetime, visible_at: datetime) -> dict[str, Expr]:
    """What a claim writes besides the new handle (columns of the target: an UPDATE's, a FIFO
    MERGE's, or a round MERGE's, whose source columns `source` names apart)."""
    return {
        "visible_at": lit(visible_at),
        # A typed 1: DataFusion would widen `int + 1` to 64 bits and delta-rs write that type.
        "receive_count": col("receive_count") + lit(1, "int"),
        "first_received_at": coalesce(col("first_received_at"), lit(now)),
        "handle_issued_at": lit(now),
    }


def unclaim_values(now: datetime) -> dict[str, Expr]:
    """What a row a claim took by mistake becomes (one it must not hold: beyond what it was
    granted): as if that receive had never happened, visible at once."""
    return {
        "receipt_handle": null("string"),
        "handle_issued_at": null("timestamp"),
        "visible_at": lit(now),
        "receive_count": col("receive_count") - lit(1, "int"),
        "first_received_at": when(
            [(col("receive_count") > lit(1, "int"), col("first_received_at"))], null("timestamp")
        ),
    }


def message_of(row: Row, receipt_handle: str, now: datetime) -> Message:
    """The claimed row as delivered. Fields by item, not attribute: a `Row`'s attribute is a
    failed lookup first, and a claim of thousands pays it for every field."""
    attributes, types = row["attributes"], row["attribute_types"]
    return Message(
        message_id=row["message_id"],
        body=row["body"],
        attributes=dict(attributes) if attributes else {},
        receipt_handle=receipt_handle,
        receive_count=row["receive_count"] + 1,
        sent_at=row["sent_at"],
        first_received_at=row["first_received_at"] or now,
        group_id=row["group_id"],
        deduplication_id=given_id(row["deduplication_id"]),
        sequence_number=row["sequence_number"],
        attribute_types=dict(types) if types else {},
        moved_from=row["moved_from"],
    )
