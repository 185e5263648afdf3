"""Creating and deleting queues: a crash at any point is completed by the next call, and nothing
is left behind that the registry does not name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparkqueue import Broker
from sparkqueue.engine import lifecycle
from sparkqueue.errors import QueueDoesNotExist


class Crash(Exception):
    """Stands for the process dying at this point."""


def folders(broker, *parts: str) -> list[str]:
    path = Path(broker.root.removeprefix("file:"), *parts)
    return sorted(os.listdir(path)) if path.exists() else []


def test_a_create_that_died_before_its_table_is_finished_by_the_next_create(broker, monkeypatch):
    def crash(ctx, record):
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(lifecycle, "ensure_table", crash)
        with pytest.raises(Crash):
            broker.create_queue("orders")
    assert broker.list_queues() == ["orders"]
    assert folders(broker, "queues") == []  # registered, no table yet: nothing orphaned

    queue = broker.create_queue("orders")
    queue.send("hello")
    assert [m.body for m in queue.receive()] == ["hello"]


def test_a_lookup_never_creates_a_table(broker, spark, clock, monkeypatch):
    """get_queue of a queue registered without a table (a create that died, or a delete under
    way) says it does not exist and creates nothing; create_queue finishes the creation."""
    with monkeypatch.context() as patch:
        patch.setattr(lifecycle, "ensure_table", lambda ctx, record: (_ for _ in ()).throw(Crash()))
        with pytest.raises(Crash):
            broker.create_queue("orders")
    other = Broker(spark, broker.root, clock=clock)  # another process, as it were
    with pytest.raises(QueueDoesNotExist, match="create_queue"):
        other.get_queue("orders")
    assert folders(broker, "queues") == []
    other.create_queue("orders").send("hello")
    assert broker.get_queue("orders").stats().visible == 1


def test_a_lookup_during_a_delete_leaves_nothing_behind(broker, spark, clock, monkeypatch):
    """A lookup between delete_queue's drop of the table and its unregistering used to create
    the table again, which then no registry entry named."""
    broker.create_queue("old").send("x")
    other = Broker(spark, broker.root, clock=clock)
    registry = broker.context.registry
    remove = registry.remove

    def look_first(record):
        with pytest.raises(QueueDoesNotExist):
            other.get_queue("old")
        return remove(record)

    monkeypatch.setattr(registry, "remove", look_first)
    broker.delete_queue("old")
    assert broker.list_queues() == [] and folders(broker, "queues") == []


def test_delete_queue_removes_the_claims_table_too(broker):
    queue = broker.create_queue("bulk")
    queue.send_batch(["a", "b"])
    assert queue.receive_df(2).count() == 2
    assert folders(broker, "_sparkqueue", "claims") != []
    broker.delete_queue("bulk")
    assert folders(broker, "queues") == []
    assert folders(broker, "_sparkqueue", "claims") == []


def test_a_delete_that_died_before_unregistering_is_finished_by_the_next_delete(
    broker, monkeypatch
):
    broker.create_queue("old").send("x")
    registry = broker.context.registry
    with monkeypatch.context() as patch:
        patch.setattr(registry, "remove", lambda record: (_ for _ in ()).throw(Crash()))
        with pytest.raises(Crash):
            broker.delete_queue("old")
    assert broker.list_queues() == ["old"]
    broker.delete_queue("old")
    assert broker.list_queues() == []
    assert folders(broker, "queues") == []
    with pytest.raises(QueueDoesNotExist):
        broker.delete_queue("old")
