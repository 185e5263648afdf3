"""`receive_df`: a claim of up to millions of messages, made once, whose result stays readable.

The claimed rows are first staged in the queue's claims table (partitioned by claim id), then
applied to the queue; the DataFrame returned reads the stage, so evaluating it again never claims
again. A standard queue claims by range, one UPDATE on literal predicates (see frames/ranges.py); a FIFO
queue applies its group prefixes with one MERGE that fails whole if any row changed (see fifo/spark.py),
and rows another receiver claimed first are trimmed from the stage.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ...errors import QueueDoesNotExist, TransactionConflict
from ...model import MESSAGE_FIELDS
from ...rules import handles
from ...rules.deduplication import as_given
from ...rules.expr import col, lit
from ...store.dml import in_list
from ...store.native_arrow import arrow_schema
from ...store.native_fifo import FULLEST
from ...store.native_sql import select_statement
from ...store.registry import QueueRecord
from ...store.schema import (
    CLAIMS_COLUMNS,
    CLAIMS_PARTITIONING,
    MESSAGE_COLUMNS,
    QUEUE_TABLE_PROPERTIES,
)
from ...store.spark_exprs import to_column, to_columns
from ...store.spark_log import commits_touching
from ...store.spark_schema import CLAIMS_SCHEMA
from ..conditions import claimable, issued_handle, nearness
from ..context import QueueContext
from ..fifo.operations import FifoSnapshot
from ..messages import bulk
from ..messages.claim import claim_values, count_in_flight, landed, unclaim_values
from . import ranges
from .id_merges import claim_update, keyed_merge
from .ranges import RangeClaim

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
    claims_table = storage.layout.claims(record.location)
    storage.ensure_table(
        claims_table,
        CLAIMS_SCHEMA,
        partition_by=CLAIMS_PARTITIONING,
        properties=QUEUE_TABLE_PROPERTIES,
    )
    attrs = record.attributes
    seconds = attrs.visibility_timeout if visibility_timeout is None else visibility_timeout
    if not attrs.fifo and ctx.tables.engine == "native":
        return _claim_natively(ctx, record, claims_table, max_messages, seconds)
    in_flight = ctx.in_flight.of(record.location, attrs.fifo)

    def attempt() -> _Claim:
        """Read, stage, and the claim's one commit on the queue: the last thing it does, so a
        retry never follows a claim that committed."""
        now = ctx.now()
        granted = in_flight.reserve(
            max_messages, lambda: count_in_flight(ctx, record, now), f"queue {record.name!r}"
        )
        claim = _Claim(ctx, record, claims_table, now, seconds, granted)
        try:
            claim.commit()
        except QueueDoesNotExist:  # deleted while the claim staged: its claims table goes too
            in_flight.settle(granted, 0)
            raise
        except Exception as error:
            if claim.landed(error):  # settle() makes the stage and the queue agree
                return claim
            in_flight.settle(granted, 0)
            _discard(ctx, claims_table, claim.token)  # so the stage never shows rows not claimed
            raise
        return claim

    # A standard queue's claim reads the queue and writes its stage without the queue's turn, and
    # takes it for its UPDATE only (see _Claim._ranges), so other writers do not wait through a
    # large stage. A FIFO claim holds it throughout: its MERGE fails whole when any staged row
    # changed, so writers working meanwhile could make every attempt fail.
    what = f"receiving from {record.name!r}"
    claim = storage.transact(record.location, attempt, what, staged=not attrs.fifo)
    claimed = 0
    try:
        claimed = claim.settle()  # steps after the commit: idempotent, each retried on its own
    except TransactionConflict as error:
        raise TransactionConflict(
            f"a receive_df on {record.name!r} committed its claim, but making its result agree"
            " with the queue kept conflicting: the claimed messages come back when their"
            " visibility timeout ends. Retry later."
        ) from error
    finally:
        in_flight.settle(claim.granted, claimed)
    frame = _delivered(storage.read(claims_table).where(F.col("claim_id") == claim.token))
    by_range = claim.by_range
    if by_range is not None and by_range.count:
        ctx.range_claims[frame] = by_range  # delete_df of this very frame deletes by its claim
    return frame


def _claim_natively(
    ctx: QueueContext, record: QueueRecord, claims_table: str, max_messages: int, seconds: int
) -> DataFrame:
    """A standard queue's claim where the broker's per-message engine is native: one UPDATE by
    range (messages/bulk.py), then the rows it holds staged as Spark's claims are (the stage is
    what makes the DataFrame stable), both by delta-rs, the stage a batch at a time: no Spark
    job until the DataFrame is read. A stage that fails lets the claimed messages go at once."""
    found = bulk.claim_oldest(ctx, record, max_messages, seconds)
    frame = ctx.storage.read(claims_table)
    if found is None or not found[0].count:
        return _delivered(frame.where(F.lit(False)))
    claim, version = found
    tables, schema = bulk.native(ctx, record), arrow_schema(CLAIMS_COLUMNS)
    columns = [name for name, _, _ in MESSAGE_COLUMNS]

    def staged() -> pa.RecordBatchReader:
        held = bulk.held_batches(tables, record, [claim], claim.shards, version, columns)
        return pa.RecordBatchReader.from_batches(schema, (_staged(b, claim.token) for b in held))

    try:
        tables.append_arrow(claims_table, staged, f"staging a claim on {record.name!r}")
    except BaseException:
        bulk.release(ctx, record, claim)
        raise
    frame = _delivered(frame.where(F.col("claim_id") == claim.token))
    highest = tuple((shard, high) for shard, _, high in claim.bounds)
    ctx.range_claims[frame] = RangeClaim(record.location, claim.token, highest, claim.count)
    return frame


def _delivered(staged: DataFrame) -> DataFrame:
    """A claim's staged rows as receive_df hands them out: one column per Message field."""
    return staged.select(*to_columns(as_given(MESSAGE_FIELDS)))


def staged_handles(ctx: QueueContext, record: QueueRecord, token: str) -> pa.Table:
    """The message ids and handles a native claim staged, read by delta-rs from the claim's own
    partition: what `delete_df` of its DataFrame returns, without a Spark job."""
    tables = bulk.native(ctx, record)
    claims_table = tables.layout.claims(record.location)
    statement = select_statement(["message_id", "receipt_handle"], col("claim_id") == lit(token))
    return tables.arrow(claims_table, statement, at=tables.open(claims_table))


def _staged(held: pa.RecordBatch, token: str) -> pa.RecordBatch:
    """A claimed row as the stage keeps it: with the receive count it had before the claim and
    the claim's id."""
    before = pc.subtract(held.column("receive_count"), pa.scalar(1, pa.int32()))
    token_column = pa.array([token] * held.num_rows, pa.string())
    batch = pa.RecordBatch.from_arrays(
        [*held.columns, before, token_column],
        names=[*held.schema.names, "expected_count", "claim_id"],
    )
    return batch.cast(arrow_schema(CLAIMS_COLUMNS))


class _Claim:
    """One attempt at a claim: stage the rows, apply them to the queue, settle the stage."""

    def __init__(
        self,
        ctx: QueueContext,
        record: QueueRecord,
        claims_table: str,
        now: datetime,
        seconds: int,
        granted: int,
    ) -> None:
        self.ctx, self.record, self.claims_table, self.now = ctx, record, claims_table, now
        self.granted = granted  # what the in-flight limit allows this claim
        self.token = handles.new_token()
        values = claim_values(now, now + timedelta(seconds=seconds))
        self.values = {name: to_column(value) for name, value in values.items()}
        self.by_range: RangeClaim | None = None  # a standard queue's claim, once committed
        self._settled: int | None = None  # the claimed count, when the commit's counts prove it
        self._shards: list[int] = []  # a FIFO claim's shards
        # A range claim's UPDATE: (counted all staged, the version before its read, after it).
        self._proof = (False, 0, 0)

    def commit(self) -> None:
        """Stages up to `granted` rows, then makes the claim's one commit on the queue."""
        if not self.granted:  # a FIFO queue at its in-flight limit: nothing, as in SQS
            self._settled = 0
        elif self.record.attributes.fifo:
            self._groups(self.granted)
        else:
            self._ranges(self.granted)

    def settle(self) -> int:
        """After the commit: when its counts did not prove that the queue took exactly the
        staged rows, makes the stage and the queue agree (each step its own transaction, safe to
        repeat); returns how many messages the claim holds."""
        if self._settled is not None:
            return self._settled
        ctx, record = self.ctx, self.record
        if self.by_range is not None:
            if self._proven(*self._proof):
                return self.by_range.count
            won = ranges.reconcile(
                ctx.storage,
                record.location,
                self.claims_table,
                self.by_range,
                record.secret,
                self._release(),
            )
            self.by_range = RangeClaim(
                self.by_range.location, self.by_range.token, self.by_range.bounds, won
            )
            return won
        return _drop_lost_claims(ctx, record, self.claims_table, self.token, self._shards)

    def landed(self, error: Exception) -> bool:
        """Whether the commit that raised `error` landed all the same (its answer lost, the
        "conflict" itself): then the queue holds rows under this claim's handle, which a retry
        would leave in flight with no caller holding them while it claimed others."""
        mine = col("receipt_handle") == issued_handle(self.record.secret, self.token)
        found = landed(self.ctx.tables_for(self.record), self.record.location, error, mine)
        if found:
            self._proof, self._settled = (False, 0, 0), None  # counts unknown: reconcile
        return bool(found)

    def _release(self) -> dict[str, Column]:
        """What a row the claim's UPDATE took beyond its stage becomes: as if never received."""
        return {name: to_column(value) for name, value in unclaim_values(self.now).items()}

    def _handle(self) -> Column:
        return to_column(issued_handle(self.record.secret, self.token))

    def _stage(self, rows: DataFrame, observe: list[Column]) -> dict[str, object]:
        """Appends `rows` as they will be once claimed; the aggregates `observe` named."""
        staged = rows.withColumns(
            {
                **self.values,
                "expected_count": F.col("receive_count"),
                "receipt_handle": self._handle(),
                "claim_id": F.lit(self.token),
            }
        ).select(*CLAIMS_SCHEMA.names)
        what = f"staging a claim on {self.record.name!r}"
        return self.ctx.storage.append(self.claims_table, staged, what, observe=observe)

    def _ranges(self, wanted: int) -> None:
        """A standard queue's claim: the lowest ids of one random shard (a deep queue), else of
        the shards in order of nearness to it; then one UPDATE by range."""
        record, attrs, storage = self.record, self.record.attributes, self.ctx.storage
        before = storage.version(record.location)
        # Every read at `before`, so the proof (_proven) weighs exactly the commits since.
        visible = self.ctx.read(record, version=before)
        visible = visible.where(to_column(claimable(self.now, attrs)))
        first = random.randrange(attrs.shards)
        bounds: dict[int, tuple[str, int]] = {}
        if self.ctx.depths.is_deep(record.location):
            in_first = visible.where(F.col("shard") == first).orderBy("message_id")
            bounds = self._stage_lowest(in_first, [first], wanted)
            visible = visible.where(F.col("shard") != first)
        remaining = wanted - sum(rows for _, rows in bounds.values())
        if remaining > 0:
            ordered = visible.orderBy(to_column(nearness(first, attrs.shards)), "message_id")
            bounds |= self._stage_lowest(ordered, list(range(attrs.shards)), remaining)
        self.ctx.depths.mark(record.location, bounds.get(first, ("", 0))[1] == wanted)
        claim = RangeClaim(
            record.location,
            self.token,
            tuple((shard, highest) for shard, (highest, _) in sorted(bounds.items())),
            sum(rows for _, rows in bounds.values()),
        )
        self.by_range = claim
        if not claim.count:
            self._settled = 0
            return
        with storage.turn(record.location):  # the staging needs none: the UPDATE re-checks rows
            counts = storage.change(
                record.location,
                claim.rows() & to_column(claimable(self.now, attrs)),
                ("shard", "message_id"),
                {**self.values, "receipt_handle": self._handle()},
            )
            try:  # read in the turn: on a local root no other process commits meanwhile
                after = storage.version(record.location)
            except Exception:  # the claim committed: nothing may fail it now (then reconcile)
                after = -1
        self._proof = (counts.all_of(claim.count), before, after)

    def _proven(self, counted: bool, before: int, after: int) -> bool:
        """Whether the UPDATE's count proves that it claimed exactly the staged rows: when no
        commit but this one, since the read, changed a file of the claim's shards, the UPDATE
        saw those shards as the stage's read did (see frames/ranges.py). `after` is this
        commit's version or a later one (another process's on object storage, another thread's
        of this one): later commits then count too, which only ever asks for a reconcile."""
        if not counted or after <= before:
            return False
        if after == before + 1:
            return True
        assert self.by_range is not None
        shards = [str(shard) for shard in self.by_range.shards]
        location = self.record.location
        return commits_touching(self.ctx.storage, location, before, after, "shard", shards) == 1

    def _stage_lowest(
        self, ordered: DataFrame, shards: list[int], wanted: int
    ) -> dict[int, tuple[str, int]]:
        observed = self._stage(ordered.limit(wanted), ranges.bounds_observed(shards))
        return ranges.bounds_of(observed, shards)

    def _groups(self, wanted: int) -> None:
        """A FIFO claim: group prefixes staged, then one MERGE that fails whole if any changed."""
        ctx, record = self.ctx, self.record
        snapshot = FifoSnapshot(ctx, record, in_spark=True)
        ok = claimable(self.now, record.attributes)
        prefixes = snapshot.deliverable(
            now=self.now, ok=ok, order=FULLEST, salt=self.token, limit=wanted
        )
        self._stage(prefixes, [])
        claimed = ctx.storage.read(self.claims_table).where(F.col("claim_id") == self.token)
        per_shard = claimed.groupBy("shard").count().collect()
        if not per_shard:
            self._settled = 0
            return
        shards = self._shards = [row["shard"] for row in per_shard]
        merge = claim_update(
            keyed_merge(ctx, record, claimed, shards),
            self.now,
            record.attributes,
            {name: F.col(f"s.{name}") for name in _APPLIED},
        )
        counts = merge.execute()
        staged_count = sum(row["count"] for row in per_shard)
        if counts.all_of(staged_count):
            self._settled = staged_count


def _discard(ctx: QueueContext, claims_table: str, token: str) -> None:
    """Removes a claim whose MERGE failed, so its stage never shows rows it did not claim;
    nothing when the claims table is gone (its queue was deleted: the error that says so is the
    one to raise)."""
    storage = ctx.storage
    if not storage.exists(claims_table):
        return
    storage.transact(
        claims_table,
        lambda: storage.change(
            claims_table, F.col("claim_id") == token, ("claim_id", "message_id")
        ),
        "discarding a failed claim",
    )


def _drop_lost_claims(
    ctx: QueueContext, record: QueueRecord, claims_table: str, token: str, shards: list[int]
) -> int:
    """Removes staged rows whose message another receiver claimed first; returns how many won."""
    storage = ctx.storage
    won = (
        storage.read(claims_table)
        .where(F.col("claim_id") == token)
        .select("message_id", "receipt_handle")
        .join(
            ctx.read(record).where(in_list("shard", shards)).select("message_id", "receipt_handle"),
            ["message_id", "receipt_handle"],
        )
        .persist()
    )
    try:
        ranges.keep_only(storage, claims_table, token, won)
        return won.count()
    finally:
        won.unpersist()
