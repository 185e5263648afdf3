"""A buffered client over one queue, as SQS's own buffered client (AmazonSQSBufferedAsyncClient).

Two costs it takes off the caller's path, each a commit here:
- receives are served from memory: a background thread claims up to `prefetch` messages ahead,
  their visibility timeout already running, and claims more when half are handed out;
- deletes and visibility changes are queued and flushed together every `flush_interval` seconds,
  or at once when `max_pending` are queued, as one `delete_batch` and one
  `change_visibility_batch` (which share commits with the broker's other callers, see
  engine/rounds/committer.py).

The trade-offs: prefetched messages count as in flight while they wait in the buffer; a message
whose remaining timeout fell below `min_visibility_share` of it is not handed out but released
(visible again at once); a crashed process's buffered and unflushed messages come back when their
timeouts end; and an acknowledgement's outcome is known only when it is flushed (`flush()` and
`close()` report it). Leaving the `with` block, `close()`, SIGINT and SIGTERM flush what is queued
and release what was never handed out; so does the interpreter's exit, for a client never closed.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Sequence
from datetime import datetime, timedelta
from types import FrameType, TracebackType

from ..engine.context import QueueContext
from ..engine.rounds import operations as rounds
from ..engine.rounds.committer import parts_played_inline
from ..errors import EmptyBatchRequest, InvalidParameterValue, QueueError
from ..limits import (
    LONG_POLL_INTERVAL_SECONDS,
    MAX_RECEIVE,
    MAX_VISIBILITY_SECONDS,
    MAX_WAIT_SECONDS,
)
from ..model import BatchResult, Message
from ..rules.checks import (
    check_fraction,
    check_int,
    check_list,
    check_receipt_handles,
    check_seconds,
)

log = logging.getLogger(__name__)
SIGNAL_JOIN_SECONDS = 5.0


class BufferedQueue:
    """The buffered face of one queue: `receive`, `delete`, `delete_batch`, `change_visibility`,
    `change_visibility_batch`, `flush` and `close`; a context manager. Safe to share between
    threads."""

    def __init__(
        self,
        ctx: QueueContext,
        name: str,
        *,
        prefetch: int,
        flush_interval: float,
        max_pending: int,
        visibility_timeout: int | None,
        min_visibility_share: float,
    ) -> None:
        """Checks the arguments (`visibility_timeout` None: the queue's) and refuses a FIFO
        queue: prefetching would hand one group's messages to several callers at once."""
        record = ctx.record(name)
        if record.attributes.fifo:
            raise InvalidParameterValue(
                f"{name!r} is a FIFO queue: the buffered client serves standard queues only"
                " (as SQS's does), since prefetching would hand one group's messages to several"
                " callers at once; use receive() on FIFO queues"
            )
        self._ctx, self.name = ctx.quick, name  # single-message work: the interpreting session
        self.prefetch = check_int("prefetch", prefetch, 1, MAX_RECEIVE)
        self.flush_interval = check_seconds("flush_interval", flush_interval, allow_zero=False)
        self.max_pending = check_int("max_pending", max_pending, 1, MAX_RECEIVE)
        self.visibility_timeout = (
            record.attributes.visibility_timeout
            if visibility_timeout is None
            else visibility_timeout
        )
        self.min_visibility_share = check_fraction("min_visibility_share", min_visibility_share)
        self._changed = threading.Condition(threading.RLock())  # RLock: signal handlers re-enter
        self._buffer: deque[tuple[Message, datetime]] = deque()  # message, when its timeout ends
        self._hungry = 0  # receives waiting for the next claim
        self._drained = False  # the last claim found nothing: claim again only when asked
        self._claims = 0  # claims completed, so a receive can wait for the next one
        self._claim_error: Exception | None = None
        self._deletes: dict[str, None] = {}
        self._changes: dict[str, int] = {}
        self._releases: set[str] = set()  # this client's own releases: never reported to callers
        self._flushed = BatchResult()
        self._flushing = threading.Lock()
        self._closed = threading.Event()
        self._threads = [
            threading.Thread(target=self._keep_prefetched, name="sparkqueue-prefetch", daemon=True),
            threading.Thread(target=self._keep_flushing, name="sparkqueue-flush", daemon=True),
        ]
        self._previous_handlers: dict[int, object] = {}
        for thread in self._threads:
            thread.start()
        atexit.register(self._close_at_exit)

    # -- receiving ----------------------------------------------------------------------------------

    def receive(
        self,
        max_messages: int = 1,
        *,
        visibility_timeout: int | None = None,
        wait_time_seconds: int = 0,
    ) -> list[Message]:
        """Up to `max_messages` from the buffer; waits for one claim when it is empty (and up to
        `wait_time_seconds` for messages). Another `visibility_timeout` than the buffer's goes
        straight to the queue, as SQS's buffered client does."""
        check_int("max_messages", max_messages, 1, MAX_RECEIVE)
        check_int("wait_time_seconds", wait_time_seconds, 0, MAX_WAIT_SECONDS)
        self._check_open()
        if visibility_timeout is not None and visibility_timeout != self.visibility_timeout:
            check_int("visibility_timeout", visibility_timeout, 0, MAX_VISIBILITY_SECONDS)
            return rounds.receive(
                self._ctx, self.name, max_messages, visibility_timeout, wait_time_seconds
            )
        deadline = time.monotonic() + wait_time_seconds
        with self._changed:
            claims_seen = self._claims
            while True:
                served = self._serve(max_messages)
                if served:
                    return served
                claimed_since = self._claims > claims_seen
                if claimed_since and self._claim_error is not None:
                    raise self._claim_error
                remaining = deadline - time.monotonic()
                if (claimed_since and remaining <= 0) or self._closed.is_set():
                    return []
                self._hungry += 1
                self._drained = False
                self._changed.notify_all()
                try:  # until a claim completes, then until the wait is over
                    self._changed.wait(remaining if claimed_since else None)
                finally:
                    self._hungry -= 1

    def _serve(self, wanted: int) -> list[Message]:
        """Takes up to `wanted` messages with enough of their timeout left; releases the rest of
        the stale ones (called holding the lock)."""
        now = self._ctx.now()
        enough = timedelta(seconds=self.visibility_timeout * self.min_visibility_share)
        served: list[Message] = []
        while self._buffer and len(served) < wanted:
            message, ends = self._buffer.popleft()
            if ends - now >= enough:
                served.append(message)
            else:
                self._release([message.receipt_handle])  # back to the queue at the next flush
        if len(self._buffer) < self.prefetch / 2:
            self._changed.notify_all()
        return served

    def _keep_prefetched(self) -> None:
        while True:
            with self._changed:
                while not self._closed.is_set() and not self._claim_due():
                    self._changed.wait()
                if self._closed.is_set():
                    return
                wanted = max(1, self.prefetch - len(self._buffer))
            claimed, error, began = [], None, self._ctx.now()
            try:  # the claim's own instant is at or after `began`: its timeout ends no sooner
                claimed = rounds.receive(self._ctx, self.name, wanted, self.visibility_timeout, 0)
            except Exception as failure:  # handed to the waiting receives: none may wait forever
                error = failure
                log.warning("buffered receive from %r failed: %s", self.name, failure)
            ends = began + timedelta(seconds=self.visibility_timeout)
            with self._changed:
                self._buffer.extend((message, ends) for message in claimed)
                self._claims += 1
                self._claim_error = error
                self._drained = not claimed
                self._changed.notify_all()
            if not claimed:
                self._closed.wait(LONG_POLL_INTERVAL_SECONDS)

    def _claim_due(self) -> bool:
        """A receive waits on an empty buffer, or half the prefetch is handed out. (A waiting
        receive that has messages in the buffer is about to take them: no claim for it.)"""
        if self._hungry and not self._buffer:
            return True
        return not self._drained and len(self._buffer) < self.prefetch / 2

    # -- acknowledging ------------------------------------------------------------------------------

    def delete(self, receipt_handle: str) -> None:
        """Queues the delete; its outcome comes with the next flush."""
        self.delete_batch([receipt_handle])

    def delete_batch(self, receipt_handles: Sequence[str]) -> None:
        self._queue(deletes=check_receipt_handles("delete_batch", receipt_handles), changes=())

    def change_visibility(self, receipt_handle: str, visibility_timeout: int) -> None:
        """Queues the change; its outcome comes with the next flush."""
        self.change_visibility_batch([(receipt_handle, visibility_timeout)])

    def change_visibility_batch(self, entries: Sequence[tuple[str, int]]) -> None:
        entries = check_list("change_visibility_batch", entries, "(handle, seconds) pairs")
        if not entries:
            raise EmptyBatchRequest("change_visibility_batch needs at least one entry")
        for index, entry in enumerate(entries):
            if not (
                isinstance(entry, (tuple, list)) and len(entry) == 2 and isinstance(entry[0], str)
            ):
                raise InvalidParameterValue(
                    f"entry {index}: expected a (receipt_handle, seconds) pair"
                )
            check_int("visibility_timeout", entry[1], 0, MAX_VISIBILITY_SECONDS)
        self._queue(deletes=(), changes=entries)

    def _queue(self, deletes: Sequence[str], changes: Sequence[tuple[str, int]]) -> None:
        self._check_open()
        with self._changed:
            self._deletes.update(dict.fromkeys(deletes))
            self._changes.update(dict(changes))
            full = len(self._deletes) + len(self._changes) >= self.max_pending
        if full:
            self._flush_pending()

    def _keep_flushing(self) -> None:
        while not self._closed.wait(self.flush_interval):
            self._flush_pending()

    def _flush_pending(self) -> None:
        """Sends what is queued: one visibility batch, then one delete batch."""
        with self._flushing:
            with self._changed:
                deletes, self._deletes = list(self._deletes), {}
                changes, self._changes = list(self._changes.items()), {}
            outcomes = []
            for sending, entries in (
                (lambda: rounds.change_visibility_batch(self._ctx, self.name, changes), changes),
                (lambda: rounds.delete_batch(self._ctx, self.name, deletes), deletes),
            ):
                if not entries:
                    continue
                try:
                    outcomes.append(sending())
                except Exception as error:  # every entry of the batch failed: flush() says so
                    log.warning("flushing on %r failed: %s", self.name, error)
                    code = error.code if isinstance(error, QueueError) else "InternalError"
                    handles = [e[0] if isinstance(e, tuple) else e for e in entries]
                    outcomes.append(BatchResult(failed=dict.fromkeys(handles, code)))
            with self._changed:
                for outcome in outcomes:
                    self._flushed.successful.extend(outcome.successful)
                    self._flushed.failed.update(outcome.failed)

    def _release(self, receipt_handles: Sequence[str]) -> None:
        """Queues messages this client claimed but will not hand out (called holding the lock)."""
        self._releases.update(receipt_handles)
        self._changes.update(dict.fromkeys(receipt_handles, 0))

    def flush(self) -> BatchResult:
        """Sends what is queued now; returns every flushed entry's outcome since the last call
        (the caller's own entries: the releases this client made are its own business)."""
        self._flush_pending()
        with self._changed:
            result, self._flushed = self._flushed, BatchResult()
            own = self._releases & {*result.successful, *result.failed}  # sent ones only
            self._releases -= own
        return BatchResult(
            [h for h in result.successful if h not in own],
            {h: code for h, code in result.failed.items() if h not in own},
        )

    # -- closing ------------------------------------------------------------------------------------

    def close(self) -> BatchResult:
        """Stops, releases the messages never handed out and flushes; returns the last outcomes."""
        return self._close(join_seconds=None)

    def _close_at_exit(self) -> None:
        """A client its program never closed: its threads are daemons, which would end wherever
        the interpreter's exit found them (inside delta-rs, that kills the process), and its
        queued deletes would never be made. So the exit closes it, as `close()` does."""
        with parts_played_inline():
            failed = self.close().failed
        if failed:
            log.warning("buffered client of %r, closed at exit: %s", self.name, failed)

    def _close(self, join_seconds: float | None) -> BatchResult:
        atexit.unregister(self._close_at_exit)
        with self._changed:
            self._closed.set()
            self._changed.notify_all()
        for thread in self._threads:  # a claim or flush under way finishes first, whoever closes
            thread.join(join_seconds)
        with self._changed:
            self._release([message.receipt_handle for message, _ in self._buffer])
            self._buffer.clear()
        return self.flush()

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise InvalidParameterValue(f"the buffered client of {self.name!r} is closed")

    def __enter__(self) -> BufferedQueue:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous_handlers[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._restore_handlers()
        self.close()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """Closes on a thread of its own, then does what the signal did before this client was
        entered.

        The handler runs on the interrupted main thread, which may hold a lock the closing needs
        (this client's, or the lead of a round in the queue's group committer): closing there
        could wait for itself. So a closing thread flushes and releases; the previous handler
        (Python's raises KeyboardInterrupt) runs at once, and unwinding the `with` block waits
        for the closing. Where the signal's default was to end the process, the closing thread
        ends it once it is done (within SIGNAL_JOIN_SECONDS for the background threads)."""
        previous = self._previous_handlers.get(signum)
        self._restore_handlers()
        closing = threading.Thread(
            target=self._close_then_signal,
            args=(signum, previous == signal.SIG_DFL),
            name="sparkqueue-close",
        )
        closing.start()
        if callable(previous):
            previous(signum, frame)

    def _close_then_signal(self, signum: int, resignal: bool) -> None:
        try:
            self._close(join_seconds=SIGNAL_JOIN_SECONDS)
        finally:
            if resignal:  # the default disposition is back: the process ends as it would have
                os.kill(os.getpid(), signum)

    def _restore_handlers(self) -> None:
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self._previous_handlers.clear()
