"""The FIFO scenario (`--only fifo`): `--fifo-consumers` threads calling `receive(10)` +
`delete_batch` on a FIFO queue of `--fifo-groups` groups for `--load-seconds`, first alone, then
beside a producer that sends a batch to every fourth group in a loop. Afterwards every delivery
is checked: none twice, each group in send order; the commit-conflict retries of each run are
counted. Per engine: `--engine spark --only fifo` measures the Spark engine's case."""

from __future__ import annotations

import threading
from itertools import pairwise
from typing import Any

from ..broker import Broker
from .backlog import fill
from .loads import Sender
from .window import during_window

PRODUCER_EVERY = 4  # the producer's batch goes to every fourth group


def fifo_producer(groups: int) -> Sender:
    """A producer: one `send_batch` to every PRODUCER_EVERY-th group, back to back."""

    def send(queue: Any, stop: threading.Event) -> int:
        sent = rounds = 0
        while not stop.is_set():
            entries = [
                {"body": f"{g}:p{rounds}", "group_id": str(g), "deduplication_id": f"{g}:p{rounds}"}
                for g in range(0, groups, PRODUCER_EVERY)
            ]
            sent += len(queue.send_batch(entries))
            rounds += 1
        return sent

    return send


def fifo_load(
    broker: Broker,
    seconds: float,
    consumers: int,
    groups: int,
    *,
    name: str,
    sender: Sender | None = None,
) -> dict[str, Any]:
    """`consumers` threads on a fresh FIFO queue `name` for `seconds`, beside `sender` if given."""
    queue = broker.create_queue(f"{name}.fifo", fifo=True)
    backlog = int(seconds * 200 * consumers) + 100  # more than the consumers take meanwhile
    fill(broker, queue, backlog, groups=groups)
    delivered: list[Any] = []
    sent_during: list[int] = []
    stop = threading.Event()
    lock = threading.Lock()

    def consume() -> None:
        while not stop.is_set():
            messages = queue.receive(10, visibility_timeout=3_600)
            if messages:
                with lock:  # noted before the delete lets the group go to another consumer
                    delivered.extend(messages)
                queue.delete_batch([m.receipt_handle for m in messages])

    def send() -> None:
        if sender is not None:
            sent_during.append(sender(queue, stop))

    retries_before = broker.conflict_retries
    during_window([consume] * consumers + [send], seconds, stop)
    out_of_order = 0
    for group in {m.group_id for m in delivered}:
        numbers = [m.sequence_number for m in delivered if m.group_id == group]
        out_of_order += sum(1 for a, b in pairwise(numbers) if b <= a)
    ids = [m.message_id for m in delivered]
    return {
        "delivered": len(ids),
        "per_s": len(ids) / seconds,
        "duplicates": len(ids) - len(set(ids)),
        "out_of_order": out_of_order,
        "conflict_retries": broker.conflict_retries - retries_before,
        "sent_during": sum(sent_during),
    }


def fifo(broker: Broker, seconds: float, consumers: int, groups: int) -> dict[str, Any]:
    """The consumers alone, then beside the producer, each on a queue of its own; what they keep
    beside it is the second rate over the first."""
    alone = fifo_load(broker, seconds, consumers, groups, name="fifo-alone")
    beside = fifo_load(
        broker, seconds, consumers, groups, name="fifo-producer", sender=fifo_producer(groups)
    )
    return {
        "fifo_load": alone,
        "fifo_with_producer": beside,
        "fifo_ratio": beside["per_s"] / max(alone["per_s"], 1e-9),
    }
