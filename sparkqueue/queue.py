"""`Queue`: the public face of one queue. It checks arguments, then hands off to the engine.

Single-message operations run on the broker's engine (native or Spark, `QueueContext.tables`);
the DataFrame methods load Spark's modules when they are called, so a broker without Spark never
imports pyspark."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .attributes import QueueAttributes
from .engine import lifecycle
from .engine.context import QueueContext
from .engine.messages import inspect, send
from .engine.moves.choice import check_destination, movers
from .engine.rounds import operations as rounds
from .errors import InvalidParameterValue, QueueDoesNotExist, QueueError
from .limits import MAX_RECEIVE, MAX_RECEIVE_DF, MAX_VISIBILITY_SECONDS, MAX_WAIT_SECONDS
from .model import BatchResult, ConsumeReport, Message, MessageEvent, QueueStats, SentMessage
from .rules.checks import (
    check_int,
    check_message_ids,
    check_queue_name,
    check_receipt_handles,
    check_visibility_entries,
)
from .services import worker
from .services.buffered import BufferedQueue
from .services.heartbeat import Heartbeat, check_interval
from .services.history import history as message_history

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class Queue:
    """Handle on one queue of a Broker; cheap to create, safe to share between threads."""

    def __init__(self, ctx: QueueContext, name: str) -> None:
        self._ctx = ctx
        self.name = name

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, {self._ctx.tables.layout.where})"

    # -- attributes ---------------------------------------------------------------------------------

    @property
    def attributes(self) -> dict[str, Any]:
        return self._ctx.record(self.name).attributes.as_dict()

    def set_attributes(self, **changes: Any) -> None:
        """Changes settings for later operations; messages already in flight keep their timeouts."""
        self.update_attributes(lambda current: changes)

    def update_attributes(self, changes_of: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """`set_attributes(**changes_of(current))` as one step: `current` is read afresh, and if
        another change lands first it is read again and `changes_of` runs again (for changes that
        build on what is there, such as adding to a policy or to the tags)."""
        modified_at = self._ctx.now().timestamp()

        def change(current: QueueAttributes) -> QueueAttributes:
            changes = {**changes_of(current.as_dict()), "modified_at": modified_at}
            updated = current.changed(changes)
            lifecycle.check_dead_letter_queue(self._ctx, self.name, updated, current)
            return updated

        if not self._ctx.registry.change_attributes(self.name, change):
            raise QueueDoesNotExist(f"queue {self.name!r} does not exist")

    # -- sending ------------------------------------------------------------------------------------

    def send(
        self,
        body: str,
        *,
        delay_seconds: int | None = None,
        attributes: dict[str, str] | None = None,
        group_id: str | None = None,
        deduplication_id: str | None = None,
        attribute_types: dict[str, str] | None = None,
    ) -> str:
        """Sends one message; returns its id (a FIFO duplicate: the id of the one it repeats).

        `attribute_types` gives SQS DataTypes ("Number", "Binary", "String.label", ...) to some
        attributes, as SQS clients see them through the endpoint; the rest are plain strings."""
        entry = {
            "body": body,
            "delay_seconds": delay_seconds,
            "attributes": attributes,
            "group_id": group_id,
            "deduplication_id": deduplication_id,
            "attribute_types": attribute_types,
        }
        ctx = self._ctx.quick
        record = ctx.record(self.name)
        entries = [send.normalize_entry(entry, record.attributes)]
        return send.send_entries(ctx, record, entries)[0].message_id

    def send_batch(self, entries: Sequence[str | dict[str, Any]]) -> list[str]:
        """Sends every entry in one commit, or none of them if any entry is invalid."""
        outcomes = send.checked_entries("send_batch", entries, self._ctx.record(self.name))
        for index, outcome in enumerate(outcomes):
            if isinstance(outcome, InvalidParameterValue):
                raise type(outcome)(
                    f"entry {index}: {outcome.message}", sqs_message=outcome.sqs_message
                )
        sent = send.send_valid(self._ctx.quick, self.name, outcomes)
        return [message.message_id for message in sent]  # type: ignore[union-attr]

    def send_each(self, entries: Sequence[str | dict[str, Any]]) -> list[str | QueueError]:
        """Sends the valid entries in one commit; per entry its message id, or the error that
        kept it out (SQS's SendMessageBatch: one bad entry does not fail the others)."""
        outcomes = send.checked_entries("send_each", entries, self._ctx.record(self.name))
        sent = send.send_valid(self._ctx.quick, self.name, outcomes)
        return [o.message_id if isinstance(o, SentMessage) else o for o in sent]

    def send_messages(
        self, entries: Sequence[str | dict[str, Any]]
    ) -> list[SentMessage | QueueError]:
        """`send_each` with each message's FIFO sequence number (what the SQS endpoint returns)."""
        outcomes = send.checked_entries("send_messages", entries, self._ctx.record(self.name))
        return send.send_valid(self._ctx.quick, self.name, outcomes)

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
        self._ctx.needs_spark("send_df")
        from .engine.frames import send_df

        return send_df.send_df(
            self._ctx,
            self._ctx.record(self.name),
            df,
            body=body,
            attributes=attributes,
            group_id=group_id,
            deduplication_id=deduplication_id,
            delay_seconds=delay_seconds,
        )

    # -- receiving ----------------------------------------------------------------------------------

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
        timeout = _visibility(visibility_timeout)
        return rounds.receive(self._ctx.quick, self.name, max_messages, timeout, wait_time_seconds)

    def receive_df(self, max_messages: int, *, visibility_timeout: int | None = None) -> DataFrame:
        """Claims up to `max_messages` at once, in Spark; the returned DataFrame never claims again."""
        check_int("max_messages", max_messages, 1, MAX_RECEIVE_DF)
        self._ctx.needs_spark("receive_df")
        from .engine.frames import claim_df

        return claim_df.receive_df(
            self._ctx, self.name, max_messages, _visibility(visibility_timeout)
        )

    # -- acknowledging ------------------------------------------------------------------------------

    def delete(self, receipt_handle: str) -> None:
        """Deletes the message; a superseded or foreign handle raises and deletes nothing."""
        rounds.delete(self._ctx.quick, self.name, receipt_handle)

    def delete_batch(self, receipt_handles: Sequence[str]) -> BatchResult:
        """Deletes in one transaction; each handle's outcome in the BatchResult."""
        handles = check_receipt_handles("delete_batch", receipt_handles)
        return rounds.delete_batch(self._ctx.quick, self.name, handles)

    def delete_df(self, df: DataFrame) -> BatchResult:
        """Deletes the messages whose handles are in `df.receipt_handle`, in one transaction."""
        if "receipt_handle" not in df.columns:
            raise InvalidParameterValue("delete_df needs a DataFrame with a receipt_handle column")
        self._ctx.needs_spark("delete_df")
        from .engine.frames import acknowledge_df

        return acknowledge_df.delete_df(self._ctx, self.name, df)

    # -- changing visibility ------------------------------------------------------------------------

    def change_visibility(
        self, receipt_handle: str, visibility_timeout: int, *, latest_receive: bool = False
    ) -> None:
        """Hides the message until now + `visibility_timeout` (0: visible at once). With
        `latest_receive`, a handle of an earlier receive changes the message's latest receive
        while it is in flight (as SQS applies it) instead of raising ReceiptHandleIsInvalid."""
        check_int("visibility_timeout", visibility_timeout, 0, MAX_VISIBILITY_SECONDS)
        outcomes = rounds.change_visibility(
            self._ctx.quick,
            self.name,
            [(receipt_handle, visibility_timeout)],
            latest_receive=latest_receive,
        )
        error = outcomes[receipt_handle]
        if error is not None:
            raise error

    def change_visibility_batch(
        self, entries: Sequence[tuple[str, int]], *, latest_receive: bool = False
    ) -> BatchResult:
        """Changes every entry's visibility in one transaction; each entry's outcome
        (`latest_receive` as in `change_visibility`)."""
        valid, failed = check_visibility_entries("change_visibility_batch", entries)
        ctx, name = self._ctx.quick, self.name
        done = (
            rounds.change_visibility_batch(ctx, name, valid, latest_receive=latest_receive)
            if valid
            else None
        )
        failed.update(done.failed if done else {})
        return BatchResult(successful=done.successful if done else [], failed=failed)

    def heartbeat(
        self, messages: Iterable[Message | str], *, visibility_timeout: int, interval: float
    ) -> Heartbeat:
        """While the `with` block runs, keeps extending the messages' visibility in the background
        every `interval` seconds (which must be shorter than `visibility_timeout`)."""
        check_int("visibility_timeout", visibility_timeout, 0, MAX_VISIBILITY_SECONDS)
        seconds = check_interval(visibility_timeout, interval)
        receipt_handles = [m.receipt_handle if isinstance(m, Message) else m for m in messages]
        ctx, name = self._ctx.quick, self.name
        return Heartbeat(
            lambda handles, seconds: rounds.extend(ctx, name, handles, seconds),
            receipt_handles,
            visibility_timeout,
            seconds,
        )

    def buffered(
        self,
        prefetch: int = 100,
        flush_interval: float = 0.05,
        max_pending: int = 1000,
        *,
        visibility_timeout: int | None = None,
        min_visibility_share: float = 0.5,
    ) -> BufferedQueue:
        """A buffered client (use it in a `with` block): receives served from up to `prefetch`
        messages claimed ahead, deletes and visibility changes queued and flushed every
        `flush_interval` s or at `max_pending` entries. A prefetched message is handed out only
        while at least `min_visibility_share` of its visibility timeout (the queue's, or
        `visibility_timeout`) is left; unserved ones are released when the client closes."""
        return BufferedQueue(
            self._ctx,
            self.name,
            prefetch=prefetch,
            flush_interval=flush_interval,
            max_pending=max_pending,
            visibility_timeout=_visibility(visibility_timeout),
            min_visibility_share=min_visibility_share,
        )

    # -- worker loop and effectively-once results ---------------------------------------------------

    def consume(
        self,
        handler: worker.Handler,
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
        self._ctx.needs_spark("consume")
        from .services.batches import QueueBatches  # the worker loop's batches are DataFrames

        return worker.consume(
            QueueBatches(self._ctx, self.name),
            handler,
            batch_size=batch_size,
            visibility_timeout=_visibility(visibility_timeout),
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
        self._ctx.needs_spark("write_once")
        from .services.sink import write_once

        write_once(self._ctx.storage, results, sink, key=key)
        return self.delete_df(batch)

    # -- moving -------------------------------------------------------------------------------------

    def start_message_move(
        self,
        destination: str | None = None,
        max_messages: int | None = None,
        *,
        message_ids: Sequence[str] | None = None,
    ) -> int:
        """Moves this dead-letter queue's visible messages (or those of `message_ids`) back to the
        queues they came from (or to `destination`); returns how many moved. Messages held by a
        consumer stay."""
        if max_messages is not None:
            check_int("max_messages", max_messages, 1, MAX_RECEIVE_DF)
        if message_ids is not None:
            message_ids = check_message_ids(message_ids)
        record = self._ctx.record(self.name)
        if destination is not None:
            check_destination(self._ctx, record, check_queue_name(destination))
        self._ctx.tables_for(record)  # a FIFO table Spark numbers needs Spark (says so)
        moves = movers(self._ctx)
        return moves.move_back(record, destination, self._ctx.now(), max_messages, message_ids)

    def move_to_dead_letter_queue(self, limit: int | None = None) -> int:
        """Moves the messages that used up `max_receive_count` (their last receive timed out)
        to the dead-letter queue now, as the next redrive pass would (up to `limit`); returns
        how many (0 without a dead-letter queue this broker can write). SQS moves them at the
        receive that finds them: the SQS endpoint calls this then."""
        from .services.redrive import dead_letters_of, move_exhausted

        if limit is not None:
            check_int("limit", limit, 1, MAX_RECEIVE_DF)
        record, mover = self._ctx.record(self.name), movers(self._ctx)
        if dead_letters_of(self._ctx, mover, record) is None:
            return 0
        return move_exhausted(self._ctx, mover, record, self._ctx.now(), limit)

    # -- inspecting ---------------------------------------------------------------------------------

    def stats(self) -> QueueStats:
        """Visible, in flight, delayed, awaiting the dead-letter queue, and the oldest's age."""
        return inspect.stats(self._ctx.quick, self._ctx.record(self.name))

    def peek_df(self, max_messages: int = 100) -> DataFrame:
        """Visible messages, oldest first, read without claiming them (for inspecting a DLQ)."""
        check_int("max_messages", max_messages, 1, MAX_RECEIVE_DF)
        self._ctx.needs_spark("peek_df")
        from .engine.frames import inspect_df

        return inspect_df.peek_df(self._ctx, self._ctx.record(self.name), max_messages)

    def peek(self, max_messages: int = 10, *, newest: bool = False) -> list[dict[str, Any]]:
        """`peek_df` without Spark: up to `max_messages` visible messages, oldest first (newest
        first with `newest`, standard queues), each a dict of the message's fields (no receipt
        handle) and `moved_from`."""
        check_int("max_messages", max_messages, 1, MAX_RECEIVE)
        ctx, name = self._ctx.quick, self.name
        return [
            dict(row) for row in inspect.peek(ctx, ctx.record(name), max_messages, newest=newest)
        ]

    def history(self, message_id: str) -> list[MessageEvent]:
        """The message's events, oldest first, from this queue's and its dead-letter queue's
        Delta logs, following its moves ([] if neither held it within the kept log)."""
        return message_history(self._ctx, self.name, message_id)

    def purge(self) -> int:
        """Deletes every message, in flight or not; returns how many were deleted."""
        return inspect.purge(self._ctx.quick, self._ctx.record(self.name))


def _visibility(visibility_timeout: int | None) -> int | None:
    if visibility_timeout is None:
        return None
    return check_int("visibility_timeout", visibility_timeout, 0, MAX_VISIBILITY_SECONDS)
