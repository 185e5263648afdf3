"""The load scenarios' loop: consumer threads on one queue, beside a sender, for a window; every
delivery checked afterwards (none twice, none lost). The load scenario runs it alone and beside a
producer, the buffered scenario through one buffered client, and on S3 the shared scenario beside
Spark's send_df.

    python -m sparkqueue.bench --only load --only buffered --load-seconds 30 --consumers 4
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..broker import Broker
from ..limits import LONG_POLL_INTERVAL_SECONDS
from .backlog import fill, left_in
from .window import during_window

Sender = Callable[[Any, threading.Event], int]  # sends to a queue until stopped; how many
BACKLOG_MAX = 400_000  # messages: a fill of native send_batch rows (object storage) stays modest


def load(
    broker: Broker,
    seconds: float,
    consumers: int,
    *,
    name: str,
    sender: Sender | None = None,
    prefetch: int | None = None,
    rate: int = 1_500,
    tenant: str | None = None,
) -> dict[str, Any]:
    """`consumers` threads receive(10) + delete_batch for `seconds`, beside `sender` if given;
    every delivery is checked afterwards. With `prefetch`, they share one buffered client with that
    prefetch. The backlog holds `rate` messages per consumer and second (at most BACKLOG_MAX); a
    run in which a receive came back empty ran dry, and its msg/s is a floor. `tenant`: every
    message of the backlog that one tenant's (a standard queue's message group)."""
    queue = broker.create_queue(name)
    backlog = min(int(seconds * rate * consumers) + 100, BACKLOG_MAX)
    fill(broker, queue, backlog, tenant=tenant)
    delivered: list[str] = []
    sent_during: list[int] = []
    stop, dry = threading.Event(), threading.Event()
    lock = threading.Lock()
    buffered = None if prefetch is None else queue.buffered(prefetch, visibility_timeout=3_600)
    client = queue if buffered is None else buffered

    def consume() -> None:
        while not stop.is_set():
            messages = client.receive(10, visibility_timeout=3_600)
            if not messages:  # drained: look again a moment later, as a long poll would
                dry.set()
                stop.wait(LONG_POLL_INTERVAL_SECONDS)
                continue
            client.delete_batch([m.receipt_handle for m in messages])
            with lock:
                delivered.extend(m.message_id for m in messages)

    def send() -> None:
        if sender is not None:
            sent_during.append(sender(queue, stop))

    retries_before = broker.conflict_retries
    during_window([consume] * consumers + [send], seconds, stop)
    if buffered is not None:
        buffered.close()  # flushes the last deletes, releases what was never handed out
    left = left_in(broker, queue)
    everything = backlog + sum(sent_during)
    return {
        "delivered": len(delivered),
        "per_s": len(delivered) / seconds,
        "duplicates": len(delivered) - len(set(delivered)),
        "lost": everything - len(set(delivered) | left),
        "conflict_retries": broker.conflict_retries - retries_before,
        "sent_during": sum(sent_during),
        "ran_dry": dry.is_set(),
    }


def native_batches(queue: Any, stop: threading.Event) -> int:
    """A producer: batches of 10 through the native engine, back to back."""
    sent = 0
    while not stop.is_set():
        sent += len(queue.send_batch([f"live {i}" for i in range(10)]))
    return sent
