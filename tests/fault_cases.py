"""Cases both store-fault matrices share (tests/unit/test_store_faults.py for the native engine,
tests/integration/spark_faults.py for Spark's commits)."""

from __future__ import annotations

from collections.abc import Callable

from sparkqueue import Broker
from sparkqueue.testing import FakeClock


def redrive_move(broker: Broker, clock: FakeClock, faulted_redrive: Callable[[], object]) -> None:
    """A message received once on a queue whose max receive count is 1, its timeout run out:
    `faulted_redrive` (a redrive pass, with its fault armed) moves it to the dead-letter queue
    "dead", delivered once and once only there. `broker` sets it up and checks (natively)."""
    broker.create_queue("dead")
    queue = broker.create_queue("redriven", dead_letter_queue="dead", max_receive_count=1)
    queue.send("exhausted")
    assert len(queue.receive(1, visibility_timeout=5)) == 1
    clock.advance(6)
    faulted_redrive()
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (0, 0), stats
    [moved] = broker.get_queue("dead").receive(10)
    assert (moved.body, moved.receive_count) == ("exhausted", 1)  # delivered once, then moved
