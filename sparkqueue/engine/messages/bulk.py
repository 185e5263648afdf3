"""Bulk claims by id range on a standard queue, made natively and found again by their token.

A bulk claim (a stream's batch; a `receive_df` on a broker whose per-message engine is native)
reads the oldest claimable ids (from one random shard, then its neighbours: `nearness`), keeps
each shard's lowest and highest, and claims with one UPDATE every message claimable now in those
ranges, writing each row's receipt handle from the claim's token. Nothing but ids and counts
passes through Python, whatever the claim's size. `held_by` (the ranges on literal shards, then
the handle the token issued) is the one rule for the rows such a claim still holds: what its
readers read, what extends it and what deletes it. A message another receiver took meanwhile
holds another handle, so it is in none of these.

Why the ranges hold what was read: within a shard the read takes a prefix of its claimable ids
at the claim's `now`, and a row that stops being claimable meanwhile is simply not claimed. A
row may also become claimable meanwhile, where no lock orders the read and the UPDATE (object
storage) and another broker's clock is behind: the UPDATE then counts more than the read, and
the rows beyond the read are released again as if never received (`_release_extra`), so a claim
never holds more than it was granted.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from ...errors import InvalidParameterValue, UnsupportedOperation
from ...model import MESSAGE_FIELDS, Message
from ...rules import handles
from ...rules.deduplication import as_given
from ...rules.expr import Expr, Field, any_of, col, lit
from ...store.native_sql import select_statement
from ...store.native_tables import NativeTables
from ...store.registry import QueueRecord
from ..conditions import claimable, id_range, issued_handle, nearness
from ..context import QueueContext
from .claim import claim_values, count_in_flight, unclaim_values

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
        _in_bounds(claim, shard)
        & (col("receipt_handle") == issued_handle(record.secret, claim.token))
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


def claim_oldest(
    ctx: QueueContext, record: QueueRecord, wanted: int, visibility_timeout: int
) -> tuple[BatchClaim, int] | None:
    """Claims up to `wanted` of the oldest claimable messages in one UPDATE by id range per
    shard; the claim and the table version its rows can be read at, or None when none was
    claimable. OverLimit when the queue's in-flight limit is reached, as every receive.

    A conflict retries the whole read and claim, each retry for half as many (fewer files, fewer
    shards: a large claim beside busy receivers must still win one). A claim whose answer the
    store lost is found in the log by the commit's mark (store/native_commits.py)."""
    tables, attrs, location = native(ctx, record), record.attributes, record.location
    token = handles.new_token()
    gauge = ctx.in_flight.of(location, fifo=False)
    attempts = 0

    def attempt() -> tuple[BatchClaim, int, pa.Table] | None:
        nonlocal attempts
        now, asked = ctx.now(), max(1, wanted >> attempts)
        attempts += 1
        granted = gauge.reserve(
            asked, lambda: count_in_flight(ctx, record, now), f"queue {record.name!r}"
        )
        claimed = 0
        try:
            visible = claimable(now, attrs)
            ids = _oldest(tables, location, visible, attrs.shards, granted)
            if not ids.num_rows:
                return None
            claim = BatchClaim(token, _bounds(ids), ids.num_rows)
            began = ctx.now()
            until = ctx.handouts.until(location, began, visibility_timeout)
            values = {
                **claim_values(now, until),
                "receipt_handle": issued_handle(record.secret, token),
            }
            counts = tables.change(location, _in_bounds(claim) & visible, values)
            claimed, version = counts.updated, counts.version
            ctx.handouts.took(location, began, ctx.now())
        finally:  # rows beyond the read are released below
            gauge.settle(granted, min(claimed, granted))
        if version is None:
            version = tables.open(location).version()
        return replace(claim, count=claimed), version, ids

    found = tables.transact(location, attempt, f"claiming from {record.name!r} by range")
    if found is None:
        return None
    claim, version, ids = found
    if claim.count > ids.num_rows:
        return _release_extra(ctx, tables, record, claim, ids)
    return claim, version


def _oldest(
    tables: NativeTables, location: str, visible: Expr, shards: int, wanted: int
) -> pa.Table:
    """The shard and id of up to `wanted` claimable rows, taken by `nearness` from a random
    shard: that shard's own partition read first (a deep queue's claim takes one shard's
    oldest and reads no other file), then, if it held too few, the others, at the same
    version."""
    first, at, columns = random.randrange(shards), tables.open(location), ["shard", "message_id"]
    in_first = visible & (col("shard") == lit(first))
    found = tables.arrow(
        location, select_statement(columns, in_first, ["message_id"], wanted), at=at
    )
    if found.num_rows < wanted and shards > 1:
        others = visible & (col("shard") != lit(first))
        order = [nearness(first, shards), col("message_id")]
        statement = select_statement(columns, others, order, wanted - found.num_rows)
        found = pa.concat_tables([found, tables.arrow(location, statement, at=at)])
    return found


def _release_extra(
    ctx: QueueContext, tables: NativeTables, record: QueueRecord, claim: BatchClaim, ids: pa.Table
) -> tuple[BatchClaim, int]:
    """Releases the rows the claim's UPDATE took beyond its read (see the module's docstring),
    in a transaction of its own (the claim has committed: a conflict here retries this step
    alone, and a repeat finds those rows no longer held)."""
    location, held = record.location, held_by(record, [claim])
    read = set(ids.column("message_id").to_pylist())

    def release() -> int:
        found = [row.message_id for row in tables.select(location, ["message_id"], held)]
        extra = [message_id for message_id in found if message_id not in read]
        if extra:
            rows = held & id_range(extra) & col("message_id").isin(extra)
            tables.change(location, rows, unclaim_values(ctx.now()))
        return len(found) - len(extra)

    kept = tables.transact(location, release, "releasing what a claim took beyond its read")
    return replace(claim, count=kept), tables.open(location).version()


def _bounds(ids: pa.Table) -> tuple[tuple[int, str, str], ...]:
    """Each shard's lowest and highest id among `ids` (shard, message_id)."""
    ids = ids.cast(pa.schema([("shard", pa.int32()), ("message_id", pa.string())]))
    per_shard = ids.group_by("shard").aggregate([("message_id", "min"), ("message_id", "max")])
    shards, lows, highs = (
        per_shard[name].to_pylist() for name in ("shard", "message_id_min", "message_id_max")
    )
    return tuple(sorted(zip(shards, lows, highs, strict=True)))


def read_held(
    tables: NativeTables,
    record: QueueRecord,
    claims: Sequence[BatchClaim],
    shards: Sequence[int],
    version: int,
) -> pa.Table:
    """The rows `claims` hold in `shards` at table `version` (receive_df's columns), natively:
    what a stream batch's Spark task reads (given the queue's record, so a task reads no
    registry)."""
    fields = as_given(MESSAGE_FIELDS)
    return held_batches(tables, record, claims, shards, version, fields).read_all()


def held_batches(
    tables: NativeTables,
    record: QueueRecord,
    claims: Sequence[BatchClaim],
    shards: Sequence[int],
    version: int,
    columns: Sequence[Field],
) -> pa.RecordBatchReader:
    """`read_held`'s rows with `columns`, batch by batch (a native `receive_df`'s stage: its
    rows pass through this process a batch at a time, however many were claimed)."""
    order = ["group_id", "sequence_number"] if record.attributes.fifo else ["message_id"]
    rows = any_of([held_by(record, claims, shard) for shard in shards])
    statement = select_statement(columns, rows, order)
    return tables.batches(record.location, statement, at=tables.open(record.location, version))


def release(ctx: QueueContext, record: QueueRecord, claim: BatchClaim) -> int:
    """Lets the claim's messages go at once, as if never received (a claim whose caller failed
    before it could hand them out); how many it still held."""
    tables, rows = native(ctx, record), held_by(record, [claim])
    what = f"releasing a claim on {record.name!r}"
    return tables.transact(
        record.location,
        lambda: tables.change(record.location, rows, unclaim_values(ctx.now())).updated,
        what,
    )


def native(ctx: QueueContext, record: QueueRecord) -> NativeTables:
    """The native engine, which serves Spark's data source in every process it runs in."""
    tables = ctx.native
    if tables is None or (record.attributes.fifo and not ctx.sequenced(record)):
        raise UnsupportedOperation(
            f"the queue {record.name!r} is read by Spark alone (a FIFO table Delta numbers)"
        )
    return tables
