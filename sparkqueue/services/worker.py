"""The worker loop: receive a batch, run the user's function, delete what succeeded.

The loop drives a `BatchSource` (a small protocol; `batches.QueueBatches` is the Spark one), so it
holds no Spark or Delta logic of its own. What a batch finished is deleted by the same `exchange`
that claims the next batch (one commit per batch where the queue allows it), and by a last
`delete_batch` when the loop stops. A batch is kept invisible by a heartbeat while the
handler runs, and only the messages the handler reports as done are deleted; the rest come back
after their visibility timeout, so a message that keeps failing reaches the dead-letter queue
after `max_receive_count` receives. The loop stops after `max_batches`, after `max_empty_polls`
empty receives in a row, when `stop` is set, or on SIGINT/SIGTERM (it finishes the batch in hand).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import HeartbeatFailed, InvalidParameterValue
from ..limits import MAX_RECEIVE_DF
from ..model import BatchResult, ConsumeReport
from ..rules.checks import check_int, check_seconds, check_sink
from .heartbeat import check_interval

Handler = Callable[[Any], Any]
MIN_HEARTBEAT_SECONDS = 0.05
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Batch:
    """One received batch: what the handler gets, and each message's receipt handle."""

    frame: Any
    handles: dict[str, str]  # message id -> receipt handle


class BatchSource(Protocol):
    """What the loop needs from a queue."""

    name: str

    def visibility_timeout(self) -> int: ...

    def exchange(
        self, finished: list[str], size: int, visibility_timeout: int
    ) -> tuple[BatchResult, Batch]:
        """Deletes the finished handles and receives the next batch."""
        ...

    def finished(self, batch: Batch, result: Any) -> list[str]: ...

    def write_results(self, result: Any, sink: str) -> None: ...

    def heartbeat(
        self, receipt_handles: list[str], visibility_timeout: int, interval: float
    ) -> AbstractContextManager[object]: ...

    def delete_batch(self, receipt_handles: list[str]) -> BatchResult: ...


def consume(
    source: BatchSource,
    handler: Handler,
    *,
    batch_size: int,
    visibility_timeout: int | None,
    heartbeat_interval: float | None,
    max_batches: int | None,
    max_empty_polls: int | None,
    poll_interval: float,
    sink: str | None,
    stop: threading.Event | None,
) -> ConsumeReport:
    """Runs the loop; see Queue.consume for the contract. Arguments are checked before anything
    is received."""
    if not callable(handler):
        raise InvalidParameterValue(f"handler must be a function of a DataFrame, got {handler!r}")
    check_int("batch_size", batch_size, 1, MAX_RECEIVE_DF)
    for name, limit in (("max_batches", max_batches), ("max_empty_polls", max_empty_polls)):
        if limit is not None:
            check_int(name, limit, 1, 2**31)
    check_seconds("poll_interval", poll_interval, allow_zero=True)
    if sink is not None:
        check_sink(sink)
    timeout = source.visibility_timeout() if visibility_timeout is None else visibility_timeout
    if heartbeat_interval is not None:
        check_seconds("heartbeat_interval", heartbeat_interval, allow_zero=False)
        interval = check_interval(timeout, heartbeat_interval) if timeout else heartbeat_interval
    else:
        interval = max(timeout / 3, MIN_HEARTBEAT_SECONDS)
    stop = stop or threading.Event()
    counts = {"batches": 0, "received": 0, "deleted": 0, "handler_errors": 0}
    finished: list[str] = []  # handles of the last batch, deleted with the next claim
    empty_polls = 0

    def settled(result: BatchResult) -> None:
        counts["deleted"] += len(result.successful)
        for handle, code in result.failed.items():
            log.warning(
                "queue %r: a finished message was not deleted (%s): %s", source.name, code, handle
            )

    with _stop_on_signals(stop) as signalled:
        try:
            while True:
                if stop.is_set():
                    stopped_by = signalled[0] if signalled else "stop"
                    break
                if max_batches is not None and counts["batches"] >= max_batches:
                    stopped_by = "max_batches"
                    break
                result, batch = source.exchange(finished, batch_size, timeout)
                finished = []
                settled(result)
                if not batch.handles:
                    empty_polls += 1
                    if max_empty_polls is not None and empty_polls >= max_empty_polls:
                        stopped_by = "empty"
                        break
                    stop.wait(poll_interval)
                    continue
                empty_polls = 0
                done = _run(source, handler, batch, timeout, interval, sink)
                if done is None:
                    counts["handler_errors"] += 1
                finished = done or []
                counts["batches"] += 1
                counts["received"] += len(batch.handles)
        finally:
            if finished:
                settled(source.delete_batch(finished))
    failed = counts["received"] - counts["deleted"]
    return ConsumeReport(**counts, failed=failed, stopped_by=stopped_by)


def _run(
    source: BatchSource,
    handler: Handler,
    batch: Batch,
    timeout: int,
    interval: float,
    sink: str | None,
) -> list[str] | None:
    """Runs the handler under a heartbeat; the handles it finished, or None when it raised.

    The heartbeat stops before the handles are deleted: each beat commits to the same rows, and a
    delete racing a fast heartbeat could lose every retry to it.
    """
    finished: list[str] = []
    held = list(batch.handles.values())
    try:
        # A zero timeout has nothing to extend.
        beating = source.heartbeat(held, timeout, interval) if timeout else nullcontext()
        with beating:
            result = handler(batch.frame)
            if sink is None:
                finished = source.finished(batch, result)
            else:
                source.write_results(result, sink)
                finished = held
    except HeartbeatFailed as error:  # the batch was finished; the delete reports what was lost
        log.warning("queue %r: %s", source.name, error)
    except Exception:
        log.exception("queue %r: the handler failed; the batch will be received again", source.name)
        return None
    return finished


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[list[str]]:
    """SIGINT/SIGTERM set `stop` (the batch in hand still finishes); main thread only."""
    received: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    previous = {
        signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
