"""A queue: sends are blind appends; receive, delete and change-visibility are optimistic Delta
UPDATE, DELETE and MERGE transactions pruned to literal shards."""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from . import fifo, handles, worker
from .attributes import MAX_VISIBILITY_SECONDS, QueueAttributes, check_int, check_queue_name
from .clock import from_micros, read_clock, to_micros
from .conditions import alive, awaiting_dead_letter, claimable, due, is_message
from .errors import (
    EmptyBatchRequest,
    InvalidParameterValue,
    MessageNotInflight,
    OverLimit,
    QueueDoesNotExist,
    QueueError,
    ReceiptHandleIsInvalid,
)
from .heartbeat import Heartbeat
from .message import (
    MESSAGE_FIELDS,
    BatchResult,
    Message,
    QueueStats,
    message_id_column,
    new_message_id,
)
from .moves import Mover
from .registry import QueueRecord
from .sending import SendEntry, invalid_row_problem, normalize_entry, send_df_frame
from .storage import MESSAGE_SCHEMA, QUEUE_TABLE_PROPERTIES, Merge, in_list, target_prefix
from .worker import ConsumeReport, Handler

if TYPE_CHECKING:
    from .broker import Broker

MAX_RECEIVE = 10_000
MAX_RECEIVE_DF = 10_000_000
MAX_WAIT_SECONDS = 20
IN_FLIGHT_LIMIT = {False: 120_000, True: 20_000}
LONG_POLL_INTERVAL_SECONDS = 0.25
IN_FLIGHT_RECOUNT_SECONDS = 30.0  # SQS's in-flight figure is approximate too
CANDIDATE_SLACK = 8  # extra candidates read, so concurrent receivers pick different rows

_COLLECTED_NAMES = (
    "shard",
    "message_id",
    "body",
    "attributes",
    "group_id",
    "deduplication_id",
    "sequence_number",
    "receive_count",
)
PEEK_FIELDS = (*(name for name in MESSAGE_FIELDS if name != "receipt_handle"), "moved_from")
CLAIMS_SCHEMA = StructType(
    [
        *MESSAGE_SCHEMA.fields,
        StructField("expected_count", IntegerType(), False),
        StructField("claim_id", StringType(), False),
    ]
)


P = ParamSpec("P")
R = TypeVar("R")


def _quick(method: Callable[Concatenate[Queue, P], R]) -> Callable[Concatenate[Queue, P], R]:
    """Runs a single-message operation's queries interpreted (Storage.quick), not compiled."""

    @functools.wraps(method)
    def run(queue: Queue, *args: P.args, **kwargs: P.kwargs) -> R:
        with queue._broker.storage.quick():
            return method(queue, *args, **kwargs)

    return run


class Queue:
    """Handle on one queue of a Broker; cheap to create, safe to share between threads."""

    def __init__(self, broker: Broker, name: str) -> None:
        self._broker = broker
        self.name = name
        self._in_flight_estimate: tuple[int, float] | None = None

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, root={self._broker.root!r})"

    # -- attributes -----------------------------------------------------------------------------

    @property
    def attributes(self) -> dict[str, Any]:
        return self._record().attributes.as_dict()

    def set_attributes(self, **changes: Any) -> None:
        """Changes settings for later operations; messages already in flight keep their timeouts."""
        record = self._broker.record(self.name, fresh=True)
        updated = record.attributes.changed(changes)
        self._broker.check_dead_letter_queue(self.name, updated)
        if not self._broker.registry.update_attributes(self.name, updated):
            raise QueueDoesNotExist(f"queue {self.name!r} does not exist")

    # -- sending --------------------------------------------------------------------------------

    @_quick
    def send(
        self,
        body: str,
        *,
        delay_seconds: int | None = None,
        attributes: dict[str, str] | None = None,
        group_id: str | None = None,
        deduplication_id: str | None = None,
    ) -> str:
        entry = {
            "body": body,
            "delay_seconds": delay_seconds,
            "attributes": attributes,
            "group_id": group_id,
            "deduplication_id": deduplication_id,
        }
        record = self._record()
        return self._append(record, [normalize_entry(entry, record.attributes)])[0]

    @_quick
    def send_batch(self, entries: Sequence[str | dict[str, Any]]) -> list[str]:
        """Sends every entry in one commit, or none of them if any entry is invalid."""
        if not isinstance(entries, (list, tuple)):
            raise InvalidParameterValue("send_batch takes a list of bodies or entry dicts")
        if not entries:
            raise EmptyBatchRequest("send_batch needs at least one entry")
        record = self._record()
        normalized = []
        for index, entry in enumerate(entries):
            try:
                normalized.append(normalize_entry(entry, record.attributes))
            except InvalidParameterValue as error:
                raise type(error)(f"entry {index}: {error.message}") from None
        return self._append(record, normalized)

    def send_df(
        self,
        df: DataFrame,
        *,
        body: str = "body",
        attributes: str | None = None,
        group_id: str | None = None,
        deduplication_id: str | None = None,
        delay_seconds: str | int | None = None,
    ) -> int:
        """Bulk send in one commit; returns the row count. Any invalid row: nothing is written."""
        record = self._record()
        now = self._now()
        rows = send_df_frame(
            df,
            record.attributes,
            body=body,
            attributes=attributes,
            group_id=group_id,
            deduplication_id=deduplication_id,
            delay_seconds=delay_seconds,
            now=now,
            message_ids=message_id_column(to_micros(now)),
        )
        token = handles.new_token()
        storage = self._broker.storage
        try:
            storage.append(record.location, rows, f"send_df to {self.name!r}", user_metadata=token)
        except Exception as error:
            problem = invalid_row_problem(error)
            if problem is None:
                raise
            raise InvalidParameterValue(
                f"send_df: a row is invalid ({problem}); nothing was written"
            ) from None
        return storage.committed_rows(record.location, token)

    def _append(self, record: QueueRecord, entries: list[SendEntry]) -> list[str]:
        now = self._now()
        micros = to_micros(now)
        shard = random.randrange(record.attributes.shards)  # one commit, one file, one partition
        ids = [new_message_id(micros) for _ in entries]
        rows = [
            (
                shard,
                message_id,
                entry.body,
                entry.attributes,
                entry.group_id,
                entry.deduplication_id,
                None,
                now,
                now + timedelta(seconds=entry.delay_seconds),
                None,
                0,
                None,
                None,
                None,
            )
            for message_id, entry in zip(ids, entries, strict=True)
        ]
        if record.attributes.fifo:
            schema = StructType(
                [*MESSAGE_SCHEMA.fields, StructField(fifo.ENTRY_ORDER, IntegerType())]
            )
            entries_df = self._broker.storage.spark.createDataFrame(
                [(*row, position) for position, row in enumerate(rows)], schema
            )
            frame = fifo.in_entry_order(entries_df)
        else:
            frame = self._broker.storage.spark.createDataFrame(rows, MESSAGE_SCHEMA)
        self._broker.storage.append(record.location, frame, f"sending to {self.name!r}")
        if not record.attributes.fifo:
            return ids
        sent = {i: e.deduplication_id for i, e in zip(ids, entries, strict=True)}
        originals = fifo.originals(self._read(record), sent)  # type: ignore[arg-type]
        return [originals[message_id] for message_id in ids]

    # -- receiving ------------------------------------------------------------------------------

    @_quick
    def receive(
        self,
        max_messages: int = 1,
        *,
        visibility_timeout: int | None = None,
        wait_time_seconds: int = 0,
    ) -> list[Message]:
        """Claims up to `max_messages` visible messages in one transaction (long polls if asked)."""
        check_int("max_messages", max_messages, 1, MAX_RECEIVE)
        check_int("wait_time_seconds", wait_time_seconds, 0, MAX_WAIT_SECONDS)
        timeout = self._visibility(visibility_timeout)
        deadline = time.monotonic() + wait_time_seconds
        while True:
            try:
                messages = self._claim(max_messages, timeout)
            except OverLimit:
                if not wait_time_seconds:
                    raise
                messages = []
            remaining = deadline - time.monotonic()
            if messages or remaining <= 0:
                return messages
            time.sleep(min(LONG_POLL_INTERVAL_SECONDS, remaining))

    def _claim(self, max_messages: int, visibility_timeout: int | None) -> list[Message]:
        record = self._record()
        storage = self._broker.storage

        def attempt() -> list[Message]:
            now = self._now()
            attrs = record.attributes
            wanted = min(max_messages, self._room(record, now, max_messages))
            candidates = self._candidates(record, now, wanted)
            if not candidates:
                return []
            token = handles.new_token()
            claims = {
                row.message_id: (
                    row,
                    handles.issue(record.secret, token, row.shard, row.message_id),
                )
                for row in candidates
            }
            shards = [row.shard for row in candidates]
            timeout = attrs.visibility_timeout if visibility_timeout is None else visibility_timeout
            values = _claim_values(now, now + timedelta(seconds=timeout))
            if attrs.fifo:
                won = self._claim_groups(record, claims, shards, now, values)
            else:
                won = self._claim_rows(record, token, candidates, now, values)
            self._note_claimed(len(won))
            messages = [_message(claims[i][0], claims[i][1], now) for i in won]
            if attrs.fifo:  # each group's messages in order
                messages.sort(key=lambda m: m.sequence_number or 0)
            return messages

        return storage.transact(record.location, attempt, f"receiving from {self.name!r}")

    def _claim_rows(
        self,
        record: QueueRecord,
        token: str,
        candidates: list[Any],
        now: datetime,
        values: dict[str, Column],
    ) -> list[str]:
        """A standard queue's claim: one UPDATE of the candidates still as read (a one-row UPDATE
        is about half a one-row MERGE here); the handles the table then holds say who won."""
        shards = [row.shard for row in candidates]
        ids = [row.message_id for row in candidates]
        as_read = F.concat_ws(":", "message_id", F.col("receive_count").cast("string")).isin(
            [f"{row.message_id}:{row.receive_count}" for row in candidates]
        )
        rows = in_list("shard", shards) & in_list("message_id", ids) & as_read
        handle = handles.issue_column(record.secret, token, F.col("shard"), F.col("message_id"))
        storage = self._broker.storage
        storage.change(
            record.location,
            rows & claimable(now, record.attributes),
            ("shard", "message_id"),
            {**values, "receipt_handle": handle},
        )
        mine = self._read(record).where(
            in_list("shard", shards)
            & in_list("message_id", ids)
            & (F.col("receipt_handle") == handle)
        )
        return [row.message_id for row in mine.select("message_id").collect()]

    def _claim_groups(
        self,
        record: QueueRecord,
        claims: dict[str, tuple[Any, str]],
        shards: list[int],
        now: datetime,
        values: dict[str, Column],
    ) -> list[str]:
        """A FIFO claim: one MERGE that fails whole if any row changed, so no group is split."""
        source = self._broker.storage.spark.createDataFrame(
            [(row.message_id, row.receive_count, h) for row, h in claims.values()],
            "message_id string, expected_count int, receipt_handle string",
        )
        merge = _claim_update(
            self._merge(record, source, shards),
            now,
            record.attributes,
            {**values, "receipt_handle": F.col("s.receipt_handle")},
        )
        metrics = merge.execute()
        if metrics is not None and metrics["num_updated_rows"] == len(claims):
            return list(claims)
        mine = self._read(record).where(
            in_list("shard", shards) & F.col("receipt_handle").isin([h for _, h in claims.values()])
        )
        return [row.message_id for row in mine.select("message_id").collect()]

    def _candidates(self, record: QueueRecord, now: datetime, wanted: int) -> list[Any]:
        """Visible messages to try, preferring one random shard so receivers rarely collide."""
        if record.attributes.fifo:  # group prefixes, groups in an order of this receive's own
            salt = handles.new_token()
            deliverable = fifo.deliverable(self._read(record), now, record.attributes, salt)
            return deliverable.select(*_collected_columns()).limit(wanted).collect()
        shards = record.attributes.shards
        nearness = F.pmod(F.col("shard") - random.randrange(shards), F.lit(shards))
        found = (
            self._read(record)
            .where(claimable(now, record.attributes))
            .orderBy(nearness)  # one query; a random first shard, then the next ones
            .select(*_collected_columns())
            .limit(wanted + CANDIDATE_SLACK)
            .collect()
        )
        return random.sample(found, min(len(found), wanted))

    def receive_df(self, max_messages: int, *, visibility_timeout: int | None = None) -> DataFrame:
        """Claims up to `max_messages` at once, in Spark; the returned DataFrame never claims again."""
        check_int("max_messages", max_messages, 1, MAX_RECEIVE_DF)
        timeout = self._visibility(visibility_timeout)
        record = self._record()
        storage = self._broker.storage
        claims_path = storage.claims_path(record.location)
        storage.ensure_table(
            claims_path,
            CLAIMS_SCHEMA,
            partition_by=("claim_id",),
            properties=QUEUE_TABLE_PROPERTIES,
        )

        def attempt() -> str:
            now = self._now()
            attrs = record.attributes
            wanted = min(max_messages, self._room(record, now, max_messages))
            token = handles.new_token()
            seconds = attrs.visibility_timeout if timeout is None else timeout
            table = self._read(record)
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
            storage.append(claims_path, staged, f"staging a claim on {self.name!r}")
            claimed = storage.read(claims_path).where(F.col("claim_id") == token)
            per_shard = claimed.groupBy("shard").count().collect()
            if not per_shard:
                return token
            shards = [row["shard"] for row in per_shard]
            try:
                merge = _claim_update(
                    self._merge(record, claimed, shards),
                    now,
                    attrs,
                    {
                        name: F.col(f"s.{name}")
                        for name in (
                            "receipt_handle",
                            "visible_at",
                            "receive_count",
                            "first_received_at",
                            "handle_issued_at",
                        )
                    },
                )
                metrics = merge.execute()
            except Exception:
                storage.transact(
                    claims_path,
                    lambda: storage.change(
                        claims_path, F.col("claim_id") == token, ("claim_id", "message_id")
                    ),
                    "discarding a failed claim",
                )
                raise
            staged = sum(row["count"] for row in per_shard)
            updated = staged if metrics is None else metrics["num_updated_rows"]
            if metrics is None or updated < staged:
                self._drop_lost_claims(record, claims_path, token, shards)
            self._note_claimed(updated)
            return token

        token = storage.transact(record.location, attempt, f"receiving from {self.name!r}")
        return storage.read(claims_path).where(F.col("claim_id") == token).select(*MESSAGE_FIELDS)

    def _drop_lost_claims(
        self, record: QueueRecord, claims_path: str, token: str, shards: list[int]
    ) -> None:
        """Removes staged rows whose message another receiver claimed first."""
        storage = self._broker.storage
        c = target_prefix(claims_path)
        ours = F.col(f"{c}claim_id") == token
        won = (
            storage.read(claims_path)
            .where(F.col("claim_id") == token)
            .select("message_id", "receipt_handle")
            .join(
                self._read(record)
                .where(in_list("shard", shards))
                .select("message_id", "receipt_handle"),
                ["message_id", "receipt_handle"],
            )
        )

        def trim() -> None:
            storage.merge(
                claims_path, won, ours & (F.col(f"{c}message_id") == F.col("s.message_id"))
            ).delete_unmatched(ours).execute()

        storage.transact(claims_path, trim, f"trimming a claim on {self.name!r}")

    # -- acknowledging --------------------------------------------------------------------------

    @_quick
    def delete(self, receipt_handle: str) -> None:
        """Deletes the message; a superseded or foreign handle raises and deletes nothing."""
        record = self._record()
        ref = handles.parse(record.secret, receipt_handle)
        if self._delete_refs(record, [ref]):
            raise ReceiptHandleIsInvalid(
                f"receipt handle for message {ref.message_id} is no longer valid: a later receive"
                " or a release superseded it; use the handle of the latest receive"
            )

    @_quick
    def delete_batch(self, receipt_handles: Sequence[str]) -> BatchResult:
        if not isinstance(receipt_handles, (list, tuple)):
            raise InvalidParameterValue("delete_batch takes a list of receipt handles")
        if not receipt_handles:
            raise EmptyBatchRequest("delete_batch needs at least one receipt handle")
        for index, handle in enumerate(receipt_handles):
            if not isinstance(handle, str):
                raise InvalidParameterValue(f"entry {index}: a receipt handle must be a str")
        record = self._record()
        refs: dict[str, handles.HandleRef] = {}
        failed: dict[str, str] = {}
        for handle in dict.fromkeys(receipt_handles):
            try:
                refs[handle] = handles.parse(record.secret, handle)
            except ReceiptHandleIsInvalid:
                failed[handle] = ReceiptHandleIsInvalid.code
        if refs:
            superseded = self._delete_refs(record, list(refs.values()))
            failed.update(
                {
                    h: ReceiptHandleIsInvalid.code
                    for h, r in refs.items()
                    if r.message_id in superseded
                }
            )
        return BatchResult(successful=[h for h in refs if h not in failed], failed=failed)

    def _delete_refs(self, record: QueueRecord, refs: list[handles.HandleRef]) -> set[str]:
        """Deletes the rows that still hold these handles (a DELETE on literal shards, ids and
        handles: no join); returns the ids still present, whose handles were superseded."""
        shards = [ref.shard for ref in refs]
        ids = [ref.message_id for ref in refs]
        rows = (
            in_list("shard", shards)
            & in_list("message_id", ids)
            & in_list("receipt_handle", [ref.handle for ref in refs])
        )
        storage = self._broker.storage
        storage.transact(
            record.location,
            lambda: storage.change(
                record.location, rows, ("shard", "message_id"), fifo.retire(record.attributes)
            ),
            f"deleting from {self.name!r}",
        )
        return self._present(record, shards, ids)

    def delete_df(self, df: DataFrame) -> BatchResult:
        """Deletes the messages whose handles are in `df.receipt_handle`, in one transaction."""
        if "receipt_handle" not in df.columns:
            raise InvalidParameterValue("delete_df needs a DataFrame with a receipt_handle column")
        record = self._record()
        handle = F.col("receipt_handle").cast("string")
        parsed = (
            df.select(handle.alias("receipt_handle"))
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
            present: set[str] = set()
            if valid:
                source = parsed.where("valid").select("message_id", "receipt_handle")
                deleted = self._delete_matching(record, source, shards)
                if deleted is None or deleted < len(valid):
                    present = self._present(record, shards, [row.message_id for row in valid])
        finally:
            parsed.unpersist()
        failed = {row.receipt_handle: ReceiptHandleIsInvalid.code for row in rows if not row.valid}
        failed.update(
            {
                row.receipt_handle: ReceiptHandleIsInvalid.code
                for row in valid
                if row.message_id in present
            }
        )
        successful = [row.receipt_handle for row in valid if row.receipt_handle not in failed]
        return BatchResult(successful=successful, failed=failed)

    def _delete_matching(
        self, record: QueueRecord, source: DataFrame, shards: list[int]
    ) -> int | None:
        """Deletes rows whose message id AND current handle match `source`; returns how many,
        where the session reports it."""

        def attempt() -> int | None:
            t = target_prefix(record.location)
            merge = self._merge(
                record, source, shards, F.col(f"{t}receipt_handle") == F.col("s.receipt_handle")
            )
            if record.attributes.fifo:  # the deduplication id outlives the message
                merge = merge.update(fifo.tombstone_values(t))
            else:
                merge = merge.delete()
            metrics = merge.execute()
            if metrics is None:
                return None
            return metrics["num_deleted_rows"] + metrics["num_updated_rows"]

        return self._broker.storage.transact(
            record.location, attempt, f"deleting from {self.name!r}"
        )

    def _present(self, record: QueueRecord, shards: list[int], message_ids: list[str]) -> set[str]:
        rows = (
            self._read(record)
            .where(in_list("shard", shards) & F.col("message_id").isin(message_ids))
            .select("message_id")
            .collect()
        )
        return {row.message_id for row in rows}

    # -- changing visibility --------------------------------------------------------------------

    @_quick
    def change_visibility(self, receipt_handle: str, visibility_timeout: int) -> None:
        """Hides the message until now + `visibility_timeout` (0: visible at once)."""
        check_int("visibility_timeout", visibility_timeout, 0, MAX_VISIBILITY_SECONDS)
        record = self._record()
        ref = handles.parse(record.secret, receipt_handle)
        error = self._change_visibility(record, [(ref, visibility_timeout)])[ref.handle]
        if error is not None:
            raise error

    @_quick
    def change_visibility_batch(self, entries: Sequence[tuple[str, int]]) -> BatchResult:
        if not isinstance(entries, (list, tuple)):
            raise InvalidParameterValue("change_visibility_batch takes a list of (handle, seconds)")
        if not entries:
            raise EmptyBatchRequest("change_visibility_batch needs at least one entry")
        record = self._record()
        failed: dict[str, str] = {}
        valid: list[tuple[handles.HandleRef, int]] = []
        for index, entry in enumerate(entries):
            if not (
                isinstance(entry, (tuple, list)) and len(entry) == 2 and isinstance(entry[0], str)
            ):
                raise InvalidParameterValue(
                    f"entry {index}: expected a (receipt_handle, seconds) pair"
                )
            handle, seconds = entry
            try:
                check_int("visibility_timeout", seconds, 0, MAX_VISIBILITY_SECONDS)
                valid.append((handles.parse(record.secret, handle), seconds))
            except QueueError as error:
                failed[handle] = error.code
        if len({ref.handle for ref, _ in valid}) < len(valid):
            raise InvalidParameterValue("change_visibility_batch: a receipt handle appears twice")
        outcomes = self._change_visibility(record, valid) if valid else {}
        failed.update({h: e.code for h, e in outcomes.items() if e is not None})
        successful = [h for h, e in outcomes.items() if e is None]
        return BatchResult(successful=successful, failed=failed)

    def heartbeat(
        self, messages: Iterable[Message | str], *, visibility_timeout: int, interval: float
    ) -> Heartbeat:
        """While the `with` block runs, keeps extending the messages' visibility in the background."""
        check_int("visibility_timeout", visibility_timeout, 0, MAX_VISIBILITY_SECONDS)
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
            raise InvalidParameterValue(
                f"interval must be a positive number of seconds, got {interval!r}"
            )
        receipt_handles = [m.receipt_handle if isinstance(m, Message) else m for m in messages]
        return Heartbeat(self._extend, receipt_handles, visibility_timeout, float(interval))

    # -- worker loop and effectively-once results ----------------------------------------------

    def consume(
        self,
        handler: Handler,
        *,
        batch_size: int = 100,
        visibility_timeout: int | None = None,
        heartbeat_interval: float | None = None,
        max_batches: int | None = None,
        max_empty_polls: int | None = None,
        poll_interval: float = 1.0,
        sink: str | None = None,
        stop: threading.Event | None = None,
    ) -> ConsumeReport:
        """Receives batches as DataFrames and hands each to `handler` until told to stop.

        `handler(batch)` returns None when every message succeeded, or a DataFrame with
        `message_id` and a boolean `succeeded` column; only succeeded messages are deleted and the
        rest come back after the visibility timeout. With `sink`, the handler returns its results
        instead, and they are written with `write_once` before the batch is deleted. A heartbeat
        keeps the batch hidden while the handler runs (every `heartbeat_interval` s, by default a
        third of the timeout). Stops after `max_batches`, after `max_empty_polls` empty receives
        in a row (waiting `poll_interval` s between them), when `stop` is set, or on SIGINT/SIGTERM.
        """
        return worker.consume(
            self,
            handler,
            batch_size=batch_size,
            visibility_timeout=self._visibility(visibility_timeout),
            heartbeat_interval=heartbeat_interval,
            max_batches=max_batches,
            max_empty_polls=max_empty_polls,
            poll_interval=poll_interval,
            sink=sink,
            stop=stop,
        )

    def write_once(
        self, batch: DataFrame, results: DataFrame, sink: str, *, key: str = "message_id"
    ) -> BatchResult:
        """Writes `results` to the Delta table `sink` effectively once per `key`, then deletes `batch`.

        Rows whose key the sink already holds are skipped, so a redelivered message adds nothing.
        """
        self._broker.write_once(results, sink, key=key)
        return self.delete_df(batch)

    @_quick
    def _extend(self, receipt_handles: list[str], seconds: int) -> dict[str, QueueError | None]:
        """One heartbeat: extends each handle and reports, per handle, the error or None."""
        record = self._record()
        outcomes: dict[str, QueueError | None] = {}
        refs = []
        for handle in receipt_handles:
            try:
                refs.append((handles.parse(record.secret, handle), seconds))
            except QueueError as error:
                outcomes[handle] = error
        if refs:
            outcomes.update(self._change_visibility(record, refs))
        return outcomes

    def _change_visibility(
        self, record: QueueRecord, entries: list[tuple[handles.HandleRef, int]]
    ) -> dict[str, QueueError | None]:
        """One MERGE for all entries; only entries it did not update are looked at again."""
        shards = [ref.shard for ref, _ in entries]

        def attempt() -> dict[str, QueueError | None]:
            now = self._now()
            targets = {ref.handle: now + timedelta(seconds=seconds) for ref, seconds in entries}
            source = self._broker.storage.spark.createDataFrame(
                [(ref.message_id, ref.handle, targets[ref.handle]) for ref, _ in entries],
                "message_id string, receipt_handle string, visible_at timestamp",
            )
            t = target_prefix(record.location)
            ceiling = F.unix_micros("s.visible_at") - F.unix_micros(f"{t}handle_issued_at")
            metrics = (
                self._merge(
                    record, source, shards, F.col(f"{t}receipt_handle") == F.col("s.receipt_handle")
                )
                .update(
                    {"visible_at": F.col("s.visible_at")},
                    (F.col(f"{t}visible_at") > F.lit(now))
                    & (ceiling <= MAX_VISIBILITY_SECONDS * 1_000_000),
                )
                .execute()
            )
            if metrics is not None and metrics["num_updated_rows"] == len(entries):
                return {ref.handle: None for ref, _ in entries}
            return self._diagnose(record, entries, now, targets)

        return self._broker.storage.transact(
            record.location, attempt, f"changing visibility on {self.name!r}"
        )

    def _diagnose(
        self,
        record: QueueRecord,
        entries: list[tuple[handles.HandleRef, int]],
        now: datetime,
        targets: dict[str, datetime],
    ) -> dict[str, QueueError | None]:
        """Says, per entry, why a visibility change did not apply (or that it did after all)."""
        rows = {
            row.message_id: row
            for row in self._read(record)
            .where(
                in_list("shard", [ref.shard for ref, _ in entries])
                & F.col("message_id").isin([ref.message_id for ref, _ in entries])
            )
            .select(
                "message_id",
                "receipt_handle",
                F.unix_micros("visible_at").alias("visible_us"),
                F.unix_micros("handle_issued_at").alias("issued_us"),
            )
            .collect()
        }
        outcomes: dict[str, QueueError | None] = {}
        for ref, seconds in entries:
            row = rows.get(ref.message_id)
            target = to_micros(targets[ref.handle])
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
            elif row.visible_us == target:
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

    # -- moving ---------------------------------------------------------------------------------

    def start_message_move(
        self, destination: str | None = None, max_messages: int | None = None
    ) -> int:
        """Moves this dead-letter queue's visible messages back to the queues they came from (or to
        `destination`); returns how many moved. Messages held by a consumer stay."""
        if max_messages is not None:
            check_int("max_messages", max_messages, 1, MAX_RECEIVE_DF)
        record = self._record()
        if destination is not None:
            self._check_move_destination(record, destination)
        return Mover(self._broker).move_back(record, destination, self._now(), max_messages)

    def _check_move_destination(self, record: QueueRecord, destination: str) -> None:
        check_queue_name(destination)
        if destination == self.name:
            raise InvalidParameterValue(f"cannot move messages of {self.name!r} to itself")
        target = self._broker.registry.get(destination, fresh=True)
        if target is None:
            raise QueueDoesNotExist(f"destination queue {destination!r} does not exist")
        if target.attributes.fifo != record.attributes.fifo:
            raise InvalidParameterValue(
                f"messages of {self.name!r} can only move to a queue of the same type (FIFO or"
                f" standard); {destination!r} is not"
            )

    # -- inspecting -----------------------------------------------------------------------------

    def stats(self) -> QueueStats:
        record = self._record()
        attrs = record.attributes
        now = self._now()
        living = alive(now, attrs)
        visible = due(now)
        waiting = awaiting_dead_letter(attrs)
        count = lambda condition: F.count(F.when(living & condition, 1))  # noqa: E731
        table = self._read(record)
        if attrs.fifo:
            table = fifo.with_duplicates_flagged(table).where(~F.col("duplicate"))
        row = table.agg(
            count(visible & ~waiting).alias("visible"),
            count(~visible & F.col("receipt_handle").isNotNull()).alias("in_flight"),
            count(~visible & F.col("receipt_handle").isNull()).alias("delayed"),
            count(visible & waiting).alias("awaiting"),
            F.min(F.when(living, F.unix_micros("sent_at"))).alias("oldest_us"),
        ).first()
        assert row is not None
        oldest = row["oldest_us"]
        age = max(0.0, (to_micros(now) - oldest) / 1e6) if oldest is not None else 0.0
        return QueueStats(
            visible=row["visible"],
            in_flight=row["in_flight"],
            delayed=row["delayed"],
            oldest_age_seconds=age,
            awaiting_dead_letter=row["awaiting"],
        )

    def peek_df(self, max_messages: int = 100) -> DataFrame:
        """Visible messages, oldest first, read without claiming them (for inspecting a DLQ)."""
        check_int("max_messages", max_messages, 1, MAX_RECEIVE_DF)
        record = self._record()
        table = self._read(record)
        if record.attributes.fifo:
            table = fifo.with_duplicates_flagged(table).where(~F.col("duplicate"))
        return (
            table.where(claimable(self._now(), record.attributes))
            .orderBy("sent_at", "message_id")
            .limit(max_messages)
            .select(*PEEK_FIELDS)
        )

    def purge(self) -> int:
        """Deletes every message, in flight or not; returns how many were deleted."""
        record = self._record()
        empty = self._broker.storage.spark.createDataFrame([], "message_id string")

        storage = self._broker.storage
        t = target_prefix(record.location)

        def attempt() -> int:
            # Without reported counts, count first: the MERGE reads (so conflicts with) them all.
            counted = self._read(record).where(is_message()).count() if storage.connect else 0
            merge = storage.merge(
                record.location, empty, F.col(f"{t}message_id") == F.col("s.message_id")
            )
            metrics = merge.delete_unmatched(is_message(t)).execute()
            return counted if metrics is None else metrics["num_deleted_rows"]

        return self._broker.storage.transact(record.location, attempt, f"purging {self.name!r}")

    # -- internals ------------------------------------------------------------------------------

    def _record(self) -> QueueRecord:
        return self._broker.record(self.name)

    def _now(self) -> datetime:
        return read_clock(self._broker.clock)

    def _read(self, record: QueueRecord) -> DataFrame:
        table = self._broker.storage.read(record.location)
        return fifo.sequenced(table) if record.attributes.fifo else table

    def _merge(
        self, record: QueueRecord, source: DataFrame, shards: list[int], extra: Column | None = None
    ) -> Merge:
        """A MERGE keyed by message id and pruned to literal shards, so it conflicts only there."""
        t = target_prefix(record.location)
        condition = in_list(f"{t}shard", shards) & (
            F.col(f"{t}message_id") == F.col("s.message_id")
        )
        if extra is not None:
            condition = condition & extra
        return self._broker.storage.merge(record.location, source, condition)

    def _visibility(self, visibility_timeout: int | None) -> int | None:
        if visibility_timeout is None:
            return None
        return check_int("visibility_timeout", visibility_timeout, 0, MAX_VISIBILITY_SECONDS)

    def _room(self, record: QueueRecord, now: datetime, wanted: int) -> int:
        """How many more messages may go in flight; recounted when stale or near the limit."""
        limit = IN_FLIGHT_LIMIT[record.attributes.fifo]
        estimate = self._in_flight_estimate
        if (
            estimate is None
            or time.monotonic() - estimate[1] > IN_FLIGHT_RECOUNT_SECONDS
            or estimate[0] + wanted > limit * 0.8
        ):
            in_flight = (
                self._read(record)
                .where(F.col("receipt_handle").isNotNull() & (F.col("visible_at") > F.lit(now)))
                .count()
            )
            estimate = (in_flight, time.monotonic())
            self._in_flight_estimate = estimate
        room = limit - estimate[0]
        if room <= 0:
            raise OverLimit(self._over_limit_text(record.attributes))
        return room

    def _note_claimed(self, count: int) -> None:
        estimate = self._in_flight_estimate
        if estimate is not None:
            self._in_flight_estimate = (estimate[0] + count, estimate[1])

    def _over_limit_text(self, attrs: QueueAttributes) -> str:
        limit = IN_FLIGHT_LIMIT[attrs.fifo]
        return (
            f"queue {self.name!r} has {limit} messages in flight, the most allowed; delete or"
            " release some (change_visibility to 0) before receiving more"
        )


def _claim_update(
    merge: Merge, now: datetime, attrs: QueueAttributes, values: dict[str, Column]
) -> Merge:
    """Standard queues skip rows claimed meanwhile; FIFO fails the whole MERGE, so that no group
    is ever half-claimed (see fifo.py)."""
    t = target_prefix(merge.path)
    unchanged = claimable(now, attrs, t) & (F.col(f"{t}receive_count") == F.col("s.expected_count"))
    if not attrs.fifo:
        return merge.update(values, unchanged)
    guarded = {**values, "receipt_handle": fifo.unless_stale(unchanged, values["receipt_handle"])}
    return merge.update(guarded)


def _claim_values(now: datetime, visible_at: datetime) -> dict[str, Column]:
    """What a claim writes besides the new handle (columns unqualified: UPDATE and FIFO MERGE
    both resolve them against the target)."""
    return {
        "visible_at": F.lit(visible_at),
        "receive_count": F.col("receive_count") + 1,
        "first_received_at": F.coalesce(F.col("first_received_at"), F.lit(now)),
        "handle_issued_at": F.lit(now),
    }


def _collected_columns() -> list[str | Column]:
    """What the driver fetches of a candidate: timestamps as exact epoch microseconds."""
    return [
        *_COLLECTED_NAMES,
        F.unix_micros("sent_at").alias("sent_at_us"),
        F.unix_micros("first_received_at").alias("first_received_at_us"),
    ]


def _message(row: Any, receipt_handle: str, now: datetime) -> Message:
    return Message(
        message_id=row.message_id,
        body=row.body,
        attributes=dict(row.attributes or {}),
        receipt_handle=receipt_handle,
        receive_count=row.receive_count + 1,
        sent_at=from_micros(row.sent_at_us),  # type: ignore[arg-type]
        first_received_at=from_micros(row.first_received_at_us) or now,
        group_id=row.group_id,
        deduplication_id=row.deduplication_id,
        sequence_number=row.sequence_number,
    )
