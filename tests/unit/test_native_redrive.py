"""The redrive pass through the native engine (a broker without Spark): what only it does, with
no JVM. The semantics it shares with Spark's pass run on both in tests/integration/test_redrive.py.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sparkqueue.engine import lifecycle
from sparkqueue.limits import TOMBSTONE_LIFETIME
from sparkqueue.services.redrive import Redrive
from sparkqueue.services.settings import RedriveSettings, UpkeepSettings


def rows_of(broker, name: str, columns=("message_id",)) -> list:
    ctx = broker.context
    return ctx.native.select(ctx.record(name).location, list(columns))


def test_a_poison_head_reaches_the_fifo_dead_letter_queue_and_frees_its_group(broker, clock):
    dead = broker.create_queue("jobs-dlq.fifo", fifo=True)
    jobs = broker.create_queue(
        "jobs.fifo", fifo=True, dead_letter_queue="jobs-dlq.fifo", max_receive_count=1
    )
    jobs.send_batch(
        [{"body": f"a{i}", "group_id": "a", "deduplication_id": f"a{i}"} for i in range(3)]
    )
    [head] = jobs.receive(1, visibility_timeout=30)
    clock.advance(31)
    assert jobs.receive(10) == []  # its head waits for the dead-letter queue: the group is held

    report = broker.redrive()

    assert report.queues["jobs.fifo"].moved_to_dead_letter == 1
    [moved] = dead.receive(10)
    assert (moved.body, moved.message_id) == (head.body, head.message_id)
    assert [m.body for m in jobs.receive(10)] == ["a1", "a2"]  # the group goes on, in order
    passes = broker.context.native.select(broker.context.native.layout.metrics, ["queue"])
    assert sorted(row.queue for row in passes) == ["jobs-dlq.fifo", "jobs.fifo"]


def test_a_pass_drops_fifo_duplicates_and_spent_tombstones(broker, clock):
    queue = broker.create_queue("once.fifo", fifo=True)
    first = queue.send("x", group_id="g", deduplication_id="d")
    assert queue.send("x again", group_id="g", deduplication_id="d") == first
    assert len(rows_of(broker, "once.fifo")) == 2  # the duplicate's row, never delivered
    broker.redrive()
    assert [row.message_id for row in rows_of(broker, "once.fifo")] == [first]

    [message] = queue.receive(1)
    queue.delete(message.receipt_handle)  # a FIFO delete leaves a tombstone for deduplication
    assert len(rows_of(broker, "once.fifo")) == 1
    broker.redrive()
    assert len(rows_of(broker, "once.fifo")) == 1  # still deduplicating
    clock.advance(TOMBSTONE_LIFETIME.total_seconds() + 1)
    broker.redrive()
    assert rows_of(broker, "once.fifo") == []


def test_a_pass_trims_the_log_of_a_local_table(broker, clock):
    """Without Spark there is no compaction, but the `_delta_log` of a local table is trimmed
    on every pass as Spark's pass does (each entry slows every later operation)."""
    queue = broker.create_queue("busy")
    for i in range(45):  # past two checkpoints (every 20 commits)
        queue.send(f"m{i}")
    log = Path(broker.context.record("busy").location.removeprefix("file:")) / "_delta_log"
    day_ago = time.time() - 86_400
    for entry in log.iterdir():
        os.utime(entry, (day_ago, day_ago))
    before = len(list(log.iterdir()))
    settings = RedriveSettings(defaults=UpkeepSettings(local_log_minutes=1))

    Redrive(broker.context, settings).run(["busy"])

    after = sorted(entry.name for entry in log.iterdir())
    assert len(after) < before - 30, after
    assert queue.stats().visible == 45  # the table reads the same from its checkpoint on


def test_a_pass_skips_a_queue_registered_without_its_table(broker, monkeypatch):
    """A pass that comes between create_queue's two commits (registered, no table yet: the
    endpoint's passes run every few seconds beside its clients) skips that queue and does the
    others."""
    broker.create_queue("ready").send("x")
    with monkeypatch.context() as patch:
        patch.setattr(lifecycle, "ensure_table", lambda ctx, record: throw(Crash()))
        with pytest.raises(Crash):
            broker.create_queue("half")
    assert sorted(broker.redrive().queues) == ["ready"]
    broker.create_queue("half")  # finishes the creation
    assert sorted(broker.redrive().queues) == ["half", "ready"]


class Crash(Exception):
    pass


def throw(error: Exception):
    raise error
