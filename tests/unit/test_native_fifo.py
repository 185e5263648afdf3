"""FIFO queues on the native engine alone: sequence numbers without row tracking, order under
concurrent producers (threads and OS processes), one holder per group, the claim's guard, and
deduplication, with real delta-rs commits and no JVM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from deltalake import DeltaTable

from sparkqueue import Broker
from sparkqueue.engine.fifo import operations as fifo_ops
from sparkqueue.engine.messages import claim
from sparkqueue.rules import handles
from sparkqueue.store.native_fifo import append_in_sequence
from sparkqueue.store.schema import MESSAGE_COLUMNS
from sparkqueue.store.transactions import STALE_READ_MARKER
from tests.unit.test_native_engine import produce_beside_consumers

REPO = Path(__file__).resolve().parents[2]


def entry(body: str, group: str) -> dict[str, str]:
    return {"body": body, "group_id": group, "deduplication_id": body}


def drain(queue) -> list:
    delivered = []
    while batch := queue.receive(10, visibility_timeout=3600):
        delivered += batch
        assert not queue.delete_batch([m.receipt_handle for m in batch]).failed
    return delivered


def check_order(delivered: list) -> None:
    """Nothing twice; within each group, sequence numbers rise in delivery order, and each
    producer's messages (bodies "<producer>-<n>") come in the order it sent them."""
    assert [i for i, n in Counter(m.message_id for m in delivered).items() if n > 1] == []
    for group in {m.group_id for m in delivered}:
        mine = [m for m in delivered if m.group_id == group]
        numbers = [m.sequence_number for m in mine]
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers), group
        for producer in {m.body.split("-")[0] for m in mine}:
            sent = [int(m.body.split("-")[1]) for m in mine if m.body.startswith(f"{producer}-")]
            assert sent == sorted(sent), (group, producer)


def test_a_fifo_queue_needs_no_spark_and_no_row_tracking(broker, clock):
    queue = broker.create_queue("jobs.fifo", fifo=True, content_based_deduplication=True)
    location = broker.context.record("jobs.fifo").location
    assert "rowTracking" not in (DeltaTable(location).protocol().writer_features or [])
    first = queue.send_messages([entry("a1", "a"), entry("b1", "b"), entry("a2", "a")])
    assert [s.sequence_number for s in first] == sorted(s.sequence_number for s in first)
    assert queue.send("again", group_id="a", deduplication_id="a1") == first[0].message_id
    assert queue.stats().visible == 3  # the duplicate is never counted
    held = queue.receive(1, visibility_timeout=60)
    assert [m.body for m in held] in (["a1"], ["b1"])  # a group's head
    rest = queue.receive(10, visibility_timeout=600)
    assert {m.group_id for m in rest} == {"a", "b"} - {held[0].group_id}  # its group stays held
    assert queue.receive(10) == []
    clock.advance(61)
    again = queue.receive(10, visibility_timeout=600)
    expected = {"a": ["a1", "a2"], "b": ["b1"]}[held[0].group_id]
    assert [m.body for m in again] == expected  # the head comes back first, then its group
    queue.delete_batch([m.receipt_handle for m in again + rest])
    assert queue.stats().in_flight == 0
    assert queue.purge() == 0  # only a never-delivered duplicate was left: no message
    clock.advance(238)  # 299 s after a1: its tombstone still deduplicates
    assert queue.send("a1 again", group_id="a", deduplication_id="a1") == first[0].message_id
    clock.advance(2)
    assert queue.send("a1 anew", group_id="a", deduplication_id="a1") != first[0].message_id


def test_a_claim_that_read_a_group_before_another_took_it_fails_whole(broker, clock):
    """The guard: a claim whose candidates changed since it read them fails uncommitted (and is
    retried on a fresh read), so a group is never half-claimed."""
    queue = broker.create_queue("guarded.fifo", fifo=True)
    queue.send_batch([entry(f"g-{i}", "g") for i in range(3)])
    ctx = broker.context
    record = ctx.record("guarded.fifo")
    now = ctx.now()
    found = fifo_ops.candidates(ctx, record, now, 10, claim.COLLECTED)
    assert [row.body for row in found] == ["g-0", "g-1", "g-2"]
    taken = Broker(None, broker.root, clock=clock).get_queue("guarded.fifo").receive(1)
    assert [m.body for m in taken] == ["g-0"]
    values = claim.claim_values(now, now + timedelta(seconds=30))
    with pytest.raises(Exception, match=STALE_READ_MARKER):
        claim._claim_rows(ctx, record, handles.new_token(), found, now, values)
    assert queue.stats().in_flight == 1  # nothing of the stale claim committed
    assert queue.receive(10) == []


def test_concurrent_producers_and_consumers_keep_each_groups_order(broker):
    queue = broker.create_queue("orders.fifo", fifo=True)
    sent: list[str] = []
    lock = threading.Lock()

    def produce(producer: int) -> None:
        for n in range(8):
            group = "shared" if n % 2 else f"own{producer}"
            ids = queue.send_batch([entry(f"p{producer}-{n}", group)])
            with lock:
                sent.extend(ids)

    producers = [lambda p=p: produce(p) for p in range(3)]
    delivered = produce_beside_consumers(queue, producers, 2, 10)
    assert sorted(m.message_id for m in delivered) == sorted(sent)
    check_order(delivered)


PRODUCER = """
import sys
from sparkqueue import Broker

queue = Broker(None, sys.argv[1]).get_queue("shared.fifo")
for n in range(12):
    queue.send(f"{sys.argv[2]}-{n}", group_id="one", deduplication_id=f"{sys.argv[2]}-{n}")
"""

CONSUMER = """
import json, sys
from sparkqueue import Broker
from tests.unit.test_native_fifo import drain

queue = Broker(None, sys.argv[1]).get_queue("shared.fifo")
print(json.dumps([[m.message_id, m.body, m.sequence_number] for m in drain(queue)]))
"""


def test_producer_processes_on_one_group_keep_its_order(broker):
    """Two OS processes send to one group at once while a third drains it: every message
    arrives once, the group's sequence numbers rise, and each producer's order holds."""
    queue = broker.create_queue("shared.fifo", fifo=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def start(script: str, *args: str) -> subprocess.Popen:
        command = [sys.executable, "-c", script, broker.root, *args]
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE)

    producers = [start(PRODUCER, name) for name in ("x", "y")]
    delivered = []
    for producer in producers:
        producer.communicate(timeout=300)
        assert producer.returncode == 0
        consumer = start(CONSUMER)  # drains what has arrived so far, in a process of its own
        out, _ = consumer.communicate(timeout=300)
        assert consumer.returncode == 0
        delivered += json.loads(out)
    delivered += [[m.message_id, m.body, m.sequence_number] for m in drain(queue)]
    assert len(delivered) == 24 and len({row[0] for row in delivered}) == 24
    numbers = [row[2] for row in delivered]
    assert numbers == sorted(numbers)
    for name in ("x", "y"):
        assert [int(b.split("-")[1]) for _, b, _ in delivered if b[0] == name] == list(range(12))


def test_an_append_with_an_app_id_lands_once(broker):
    """A move's copy repeated after a crash (see engine/moves/steps.py) adds its rows once."""
    queue = broker.create_queue("moved.fifo", fifo=True)
    record = broker.context.record("moved.fifo")
    queue.send("first", group_id="g", deduplication_id="first")
    [row] = [dict(r) for r in broker.context.native.query(record.location, "SELECT * FROM t")]
    copy = {**row, "message_id": "00000000-0000-7000-8000-000000000001", "moved_from": "src"}
    native = broker.context.native
    numbers = append_in_sequence(
        native, record.location, MESSAGE_COLUMNS, [copy], "copy", app_id="m"
    )
    assert numbers is not None and numbers[0] > row["sequence_number"]
    again = append_in_sequence(native, record.location, MESSAGE_COLUMNS, [copy], "copy", app_id="m")
    assert again is None
    assert [m.body for m in drain(queue)] == ["first", "first"]


def test_concurrent_sends_of_one_id_to_different_groups_keep_the_answer_they_were_given(broker):
    """Deduplication is queue-wide (SQS's default): sends of one id to different groups land in
    different shards, and the one accepted must be the one every sender was told of, delivered
    once. Numbers follow commit order across shards, so a later commit never wins."""
    queue = broker.create_queue("orders.fifo", fifo=True)
    start = threading.Barrier(4, timeout=60)
    told: dict[int, list[str]] = {r: [] for r in range(6)}
    lock = threading.Lock()

    def produce(producer: int) -> None:
        for order in range(6):
            start.wait()
            sent = queue.send(f"{producer}-{order}", group_id=f"g{producer}",
                              deduplication_id=f"o{order}")  # fmt: skip
            with lock:
                told[order].append(sent)

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    delivered = drain(queue)
    by_order = {m.deduplication_id: m.message_id for m in delivered}
    assert len(delivered) == len(by_order) == 6  # one delivery per deduplication id
    for order, answers in told.items():
        assert set(answers) == {by_order[f"o{order}"]}, order


def test_a_fifo_claim_leaves_the_other_groups_of_its_file_alone(tmp_path, clock):
    """The claim's guard fails only for the rows the UPDATE claims: other groups' rows in the
    same file (one shard) never trip it."""
    queue = Broker(None, str(tmp_path / "root"), clock=clock).create_queue(
        "one.fifo", fifo=True, shards=1
    )
    queue.send_batch([entry(f"{g}-{i}", g) for i in range(3) for g in "abc"])
    first = queue.receive(3, visibility_timeout=600)
    assert len({m.group_id for m in first}) == 1 and len(first) == 3
    rest = drain(queue)
    assert sorted(m.body for m in first + rest) == sorted(
        f"{g}-{i}" for i in range(3) for g in "abc"
    )
    check_order(first + rest)
