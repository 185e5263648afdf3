"""A stream's batches: claims made with a token of their own and found again by it alone.

Spark's streaming source (datasource/stream.py) claims each micro-batch with a new token: on a
standard queue in one UPDATE of every claimable message in a range of ids per shard (the oldest,
as `receive_df` takes them), on a FIFO queue through the receive's own claim of group prefixes
(rounds/operations.py). Spark's offset log keeps only the token and each shard's range of
claimed ids. The rows that still hold a handle issued from that token are the batch's: what its
tasks read, what a restart replays, what its heartbeat extends and what Spark's commit of the
batch lets go. `held_by` is that one rule. A message another receiver took meanwhile holds
another handle, so it is in none of these.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pyarrow as pa

from ..errors import InvalidParameterValue, OverLimit, UnsupportedOperation
from ..limits import MAX_RECEIVE
from ..model import MESSAGE_FIELDS, Message
from ..rules import handles
from ..rules.expr import Expr, any_of, col, lit
from ..store.native_tables import NativeTables, select_statement
from ..store.registry import QueueRecord
from .conditions import claimable, id_range, is_message, nearness
from .context import QueueContext
from .messages.acknowledge import retire_where
from .messages.claim import claim_values, count_in_flight, landed
from .messages.visibility import within_ceiling
from .rounds import operations as rounds
from .rounds.requests import Ask

_TOKEN = re.compile(r"[0-9a-f]{32}")
_ID = re.compile(r"[0-9a-f-]{36}")


@dataclass(frozen=True)
class BatchClaim:
    """One claim of a batch: its token, each shard's lowest and highest claimed id, how many."""

    token: str
    bounds: tuple[tuple[int, str, str], ...]
    count: int

    @classmethod
    def of(cls, token: str, claimed: Sequence[Message]) -> BatchClaim:
        shards: dict[int, list[str]] = {}
        for message in claimed:
            shard = handles.shard_of(message.receipt_handle)
            shards.setdefault(shard, []).append(message.message_id)
        bounds = tuple((shard, min(ids), max(ids)) for shard, ids in sorted(shards.items()))
        return cls(token, bounds, len(claimed))

    def to_offset(self) -> dict[str, Any]:
        """As Spark's offset log keeps it (JSON)."""
        return {"token": self.token, "bounds": [list(b) for b in self.bounds], "count": self.count}

    @classmethod
    def from_offset(cls, value: Any) -> BatchClaim:
        """Read back from an offset log; anything else than what `to_offset` wrote is refused,
        since these values become literals of statements."""
        try:
            token, count = value["token"], int(value["count"])
            bounds = tuple((int(s), str(lo), str(hi)) for s, lo, hi in value["bounds"])
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidParameterValue(f"not a sparkqueue stream offset: {value!r}") from error
        ids_ok = bool(bounds) and all(
            _ID.fullmatch(lo) and _ID.fullmatch(hi) for _, lo, hi in bounds
        )
        if not (isinstance(token, str) and _TOKEN.fullmatch(token) and ids_ok):
            raise InvalidParameterValue(f"not a sparkqueue stream offset: {value!r}")
        return cls(token, bounds, count)

    @property
    def shards(self) -> list[int]:
        return [shard for shard, _, _ in self.bounds]


def held_by(record: QueueRecord, claims: Sequence[BatchClaim], shard: int | None = None) -> Expr:
    """Rows still holding a handle one of `claims` issued (in `shard` alone, when given): by
    literal shards and id ranges first, so a statement reads only the files that can hold them,
    and a row's handle is computed only for the claim whose ranges hold it."""
    each = [
        _in_bounds(claim, shard) & (col("receipt_handle") == _issued(record, claim.token))
        for claim in claims
        if shard is None or shard in claim.shards
    ]
    return any_of(each) if each else lit(False)


def _in_bounds(claim: BatchClaim, shard: int | None = None) -> Expr:
    return any_of(
        [
            (col("shard") == s) & id_range([lo, hi])
            for s, lo, hi in claim.bounds
            if shard is None or s == shard
        ]
    )


def _issued(record: QueueRecord, token: str) -> Expr:
    return handles.issue_expr(record.secret, token, col("shard"), col("message_id"))


def claim_batch(
    ctx: QueueContext, record: QueueRecord, wanted: int, visibility_timeout: int
) -> list[BatchClaim]:
    """Claims up to `wanted` messages; fewer when the queue has fewer visible (or its in-flight
    limit is reached: then what was claimed, as SQS answers). A FIFO queue's are the receive's
    group prefixes, MAX_RECEIVE a claim; a standard queue's one claim by range."""
    if not record.attributes.fifo:
        claim = _claim_oldest(ctx, record, wanted, visibility_timeout)
        return [claim] if claim is not None and claim.count else []
    claims: list[BatchClaim] = []
    remaining = wanted
    while remaining > 0:
        token = handles.new_token()
        asked = min(remaining, MAX_RECEIVE)
        answer = rounds.submit(
            ctx, record, Ask(wanted=asked, timeout=visibility_timeout, token=token)
        )
        if not answer.claimed:
            break
        claims.append(BatchClaim.of(token, answer.claimed))
        remaining -= len(answer.claimed)
        if len(answer.claimed) < asked:
            break
    return claims


def _claim_oldest(
    ctx: QueueContext, record: QueueRecord, wanted: int, visibility_timeout: int
) -> BatchClaim | None:
    """One UPDATE claims, in each shard it takes, every message claimable now between the
    lowest and the highest id of a read of the oldest (by nearness to a random shard, as
    `receive_df`): nothing but ids and counts passes through Python, whatever the batch's size.

    The read picks a prefix of each shard's claimable ids, so the ranges hold exactly those at
    the claim's `now`; a row that became claimable since (another broker's clock) is claimed
    too, and counted (so a batch may hold a few more than `wanted`), since the batch is
    whatever holds its token's handles. A conflict retries the whole read and claim, each retry
    for half as many (fewer files, fewer shards: a large claim beside busy receivers must still
    win one); a "conflict" that is this very commit, its answer lost, is recognised by rows
    holding those handles (messages/claim.py, `landed`)."""
    tables, attrs, location = _native(ctx, record), record.attributes, record.location
    token = handles.new_token()
    gauge = ctx.in_flight.of(location, fifo=False)
    attempts = 0

    def attempt() -> BatchClaim | None:
        nonlocal attempts
        now, asked = ctx.now(), max(1, wanted >> attempts)
        attempts += 1
        try:
            granted = gauge.reserve(
                asked, lambda: count_in_flight(ctx, record, now), f"queue {record.name!r}"
            )
        except OverLimit:
            return None
        claimed = 0
        try:
            visible = claimable(now, attrs)
            order = [nearness(random.randrange(attrs.shards), attrs.shards), col("message_id")]
            statement = select_statement(["shard", "message_id"], visible, order, granted)
            ids = tables.arrow(location, statement, at=tables.open(location))
            if not ids.num_rows:
                return None
            claim = BatchClaim(token, _bounds(ids), ids.num_rows)
            began = ctx.now()
            until = ctx.handouts.until(location, began, visibility_timeout)
            values = {**claim_values(now, until), "receipt_handle": _issued(record, token)}
            try:
                claimed = tables.change(location, _in_bounds(claim) & visible, values).updated
            except Exception as error:
                claimed = len(landed(tables, location, error, held_by(record, [claim])))
            ctx.handouts.took(location, began, ctx.now())
        finally:
            gauge.settle(granted, claimed)
        return BatchClaim(token, claim.bounds, claimed)

    return tables.transact(location, attempt, f"claiming a stream's batch from {record.name!r}")


def _bounds(ids: pa.Table) -> tuple[tuple[int, str, str], ...]:
    """Each shard's lowest and highest id among `ids` (shard, message_id)."""
    ids = ids.cast(pa.schema([("shard", pa.int32()), ("message_id", pa.string())]))
    per_shard = ids.group_by("shard").aggregate([("message_id", "min"), ("message_id", "max")])
    shards, lows, highs = (
        per_shard[name].to_pylist() for name in ("shard", "message_id_min", "message_id_max")
    )
    return tuple(sorted(zip(shards, lows, highs, strict=True)))


def extend(
    ctx: QueueContext, record: QueueRecord, claims: Sequence[BatchClaim], seconds: int
) -> int:
    """Hides the batch's messages for `seconds` from now (a heartbeat, or a replay making them
    its own again), within SQS's 12 hours from their receive; how many were still held."""
    if not claims:
        return 0
    until = lit(ctx.now() + timedelta(seconds=seconds))
    rows = held_by(record, claims) & within_ceiling(until, col("handle_issued_at"))
    return ctx.tables_for(record).change_where(
        record.location, rows, f"extending a stream's batch on {record.name!r}",
        values={"visible_at": until},
    )  # fmt: skip


def finish(ctx: QueueContext, record: QueueRecord, claims: Sequence[BatchClaim]) -> int:
    """Lets go of the batch's messages once Spark committed it (deletes them, tombstones on a
    FIFO queue, as every delete); how many it still held."""
    if not claims:
        return 0
    rule = held_by(record, claims) & is_message()
    what = f"deleting a stream's committed batch from {record.name!r}"
    return retire_where(ctx, ctx.tables_for(record), record, rule, what)


def read_batch(
    tables: NativeTables,
    record: QueueRecord,
    claims: Sequence[BatchClaim],
    shards: Sequence[int],
    version: int,
) -> pa.Table:
    """The batch's rows in `shards` at table `version` (receive_df's columns), natively: what
    one of its Spark tasks reads (given the queue's record, so a task reads no registry)."""
    order = ["group_id", "sequence_number"] if record.attributes.fifo else ["message_id"]
    rows = any_of([held_by(record, claims, shard) for shard in shards])
    statement = select_statement(MESSAGE_FIELDS, rows, order)
    return tables.arrow(record.location, statement, at=tables.open(record.location, version))


def task_shards(claims: Sequence[BatchClaim], rows_per_task: int) -> list[list[int]]:
    """The batch's shards dealt to tasks of about `rows_per_task` claimed rows each (at least
    one task): a small batch is one task, since each task pays a fixed price to start."""
    shards = sorted({shard for claim in claims for shard in claim.shards})
    rows = sum(claim.count for claim in claims)
    tasks = max(1, min(len(shards), -(-rows // rows_per_task)))
    return [shards[i::tasks] for i in range(tasks)]


def read_visible(ctx: QueueContext, record: QueueRecord, shard: int) -> pa.Table:
    """The messages of `shard` visible now, unclaimed and untouched (a batch read's task): the
    receipt handle is left out, as a peek leaves it."""
    tables = _native(ctx, record)
    columns = [name for name in MESSAGE_FIELDS if name != "receipt_handle"]
    visible = claimable(ctx.now(), record.attributes) & (col("shard") == shard) & is_message()
    statement = select_statement(columns, visible, order_by=["sent_at", "message_id"])
    return tables.arrow(record.location, statement, at=tables.open(record.location))


def _native(ctx: QueueContext, record: QueueRecord) -> NativeTables:
    """The native engine, which serves Spark's data source in every process it runs in."""
    tables = ctx.native
    if tables is None or (record.attributes.fifo and not ctx.sequenced(record)):
        raise UnsupportedOperation(
            f"the queue {record.name!r} is read by Spark alone (a FIFO table Delta numbers)"
        )
    return tables
