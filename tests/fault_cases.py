"""Cases both store-fault matrices share (tests/unit/test_store_faults.py for the native engine,
tests/integration/spark_faults.py for Spark's commits)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from sparkqueue import Broker
from sparkqueue.bench.faults import KINDS
from sparkqueue.testing import FakeClock


def fault_kinds(config: pytest.Config, default: Sequence[str]) -> list[str]:
    """The kinds a matrix runs, in KINDS' order: those `--fault-kinds` names (commas, or
    `all`), else the matrix's `default`."""
    chosen = config.getoption("--fault-kinds") or ",".join(default)
    named = set(KINDS) if chosen.strip() == "all" else {k.strip() for k in chosen.split(",")}
    if not named or not named <= set(KINDS):
        raise pytest.UsageError(f"--fault-kinds: some of {', '.join(KINDS)} (commas), or all")
    return [kind for kind in KINDS if kind in named]


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
