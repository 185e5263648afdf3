"""The worker loop: receive a batch as a DataFrame, run the user's function, delete what succeeded.

A batch is claimed with `receive_df`, kept invisible by a heartbeat while the handler runs, and
only the messages the handler reports as done are deleted; the rest come back after their
visibility timeout, so a message that keeps failing reaches the dead-letter queue after
`max_receive_count` receives. The loop stops after `max_batches`, after `max_empty_polls` empty
receives in a row, when `stop` is set, or on SIGINT/SIGTERM (it finishes the batch in hand first).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .attributes import check_int
from .errors import HeartbeatFailed, InvalidParameterValue
from .message import BatchResult
from .sink import check_sink

if TYPE_CHECKING:
    from .queue import Queue

Handler = Callable[[DataFrame], DataFrame | None]
SUCCEEDED = "succeeded"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConsumeReport:
    """What a worker loop did, and why it stopped."""

    batches: int
    received: int
    deleted: int
    failed: int
    handler_errors: int
    stopped_by: str  # "max_batches", "empty", "stop" or a signal name such as "SIGTERM"


@dataclass(frozen=True)
class _Batch:
    frame: DataFrame
    handles: dict[str, str]  # message id -> receipt handle


def consume(
    queue: Queue,
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
    """Runs the loop; see Queue.consume for the contract."""
    if not callable(handler):
        raise InvalidParameterValue(f"handler must be a function of a DataFrame, got {handler!r}")
    check_int("batch_size", batch_size, 1, 10_000_000)
    for name, limit in (("max_batches", max_batches), ("max_empty_polls", max_empty_polls)):
        if limit is not None:
            check_int(name, limit, 1, 2**31)
    _check_seconds("poll_interval", poll_interval, allow_zero=True)
    if heartbeat_interval is not None:
        _check_seconds("heartbeat_interval", heartbeat_interval, allow_zero=False)
    if sink is not None:
        check_sink(sink)
    timeout = (
        queue.attributes["visibility_timeout"] if visibility_timeout is None else visibility_timeout
    )
    interval = heartbeat_interval or max(timeout / 3, 0.05)
    stop = stop or threading.Event()
    counts = {"batches": 0, "received": 0, "deleted": 0, "failed": 0, "handler_errors": 0}
    empty_polls = 0
    with _stop_on_signals(stop) as signalled:
        while True:
            if stop.is_set():
                stopped_by = signalled[0] if signalled else "stop"
                break
            if max_batches is not None and counts["batches"] >= max_batches:
                stopped_by = "max_batches"
                break
            batch = _receive(queue, batch_size, visibility_timeout)
            if not batch.handles:
                empty_polls += 1
                if max_empty_polls is not None and empty_polls >= max_empty_polls:
                    stopped_by = "empty"
                    break
                stop.wait(poll_interval)
                continue
            empty_polls = 0
            outcome = _run(queue, handler, batch, timeout, interval, sink)
            if outcome is None:
                counts["handler_errors"] += 1
            for handle, code in (outcome.failed if outcome else {}).items():
                log.warning(
                    "queue %r: a finished message was not deleted (%s): %s",
                    queue.name,
                    code,
                    handle,
                )
            deleted = len(outcome.successful) if outcome else 0
            counts["batches"] += 1
            counts["received"] += len(batch.handles)
            counts["deleted"] += deleted
            counts["failed"] += len(batch.handles) - deleted
    return ConsumeReport(**counts, stopped_by=stopped_by)


def _receive(queue: Queue, batch_size: int, visibility_timeout: int | None) -> _Batch:
    frame = queue.receive_df(batch_size, visibility_timeout=visibility_timeout)
    rows = frame.select("message_id", "receipt_handle").collect()
    return _Batch(frame, {row.message_id: row.receipt_handle for row in rows})


def _run(
    queue: Queue,
    handler: Handler,
    batch: _Batch,
    timeout: int,
    interval: float,
    sink: str | None,
) -> BatchResult | None:
    """Runs the handler under a heartbeat, then deletes what it finished; None when it raised.

    The delete waits for the heartbeat to stop: each beat is a MERGE on the same rows, and a
    delete racing a fast heartbeat could lose every retry to it.
    """
    finished: list[str] = []
    beating = queue.heartbeat(
        list(batch.handles.values()), visibility_timeout=timeout, interval=interval
    )
    try:
        with beating if timeout else nullcontext():  # a zero timeout has nothing to extend
            result = handler(batch.frame)
            if sink is None:
                finished = _succeeded(batch, result)
            elif isinstance(result, DataFrame):
                queue._broker.write_once(result, sink)
                finished = list(batch.handles.values())
            else:
                raise InvalidParameterValue(
                    "with sink=..., the handler must return the DataFrame of results to write"
                )
    except HeartbeatFailed as error:  # the batch was finished; the delete reports what was lost
        log.warning("queue %r: %s", queue.name, error)
    except Exception:
        log.exception("queue %r: the handler failed; the batch will be received again", queue.name)
        return None
    return queue.delete_batch(finished) if finished else BatchResult()


def _succeeded(batch: _Batch, result: DataFrame | None) -> list[str]:
    if result is None:
        return list(batch.handles.values())
    if not isinstance(result, DataFrame) or not {"message_id", SUCCEEDED} <= set(result.columns):
        raise InvalidParameterValue(
            "a handler returns None (all succeeded) or a DataFrame with message_id and a boolean"
            f" {SUCCEEDED!r} column"
        )
    done = result.where(F.col(SUCCEEDED)).select("message_id").distinct().collect()
    return [batch.handles[row.message_id] for row in done if row.message_id in batch.handles]


def _check_seconds(name: str, value: float, *, allow_zero: bool) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value < 0
        or (value == 0 and not allow_zero)
    ):
        bound = "zero or more" if allow_zero else "more than zero"
        raise InvalidParameterValue(f"{name} must be a number of seconds, {bound}; got {value!r}")


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
