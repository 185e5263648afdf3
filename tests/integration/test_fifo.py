"""FIFO queues: send rules, order within groups, one holder per group, deduplication, dead letters."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from pyspark.sql import functions as F

from sparkqueue.errors import InvalidParameterValue, MissingParameter
from sparkqueue.limits import IN_FLIGHT_LIMITS

from .helpers import run_threads


@pytest.fixture
def fifo(broker):
    return broker.create_queue("jobs.fifo", fifo=True)


def entry(body: str, group: str, dedup: str | None = None) -> dict[str, str]:
    return {"body": body, "group_id": group, "deduplication_id": dedup or body}


def drain(queue, max_messages: int = 10) -> list:
    """Receives and deletes until the queue is empty; returns messages in delivery order."""
    delivered = []
    while batch := queue.receive(max_messages):
        delivered += batch
        queue.delete_batch([m.receipt_handle for m in batch])
    return delivered


def by_group(messages) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for message in messages:
        groups.setdefault(message.group_id, []).append(message.body)
    return groups


def test_fifo_takes_an_explicit_zero_delay_and_returns_sequence_numbers(fifo):
    """SQS refuses only a non-zero per-message delay on FIFO; `send_messages` gives each message
    the sequence number its receivers see."""
    fifo.send("a", group_id="g", deduplication_id="a", delay_seconds=0)
    sent = fifo.send_messages([{"body": "b", "group_id": "g", "deduplication_id": "b",
                                "delay_seconds": 0}, {"body": "c", "group_id": "g",
                                "deduplication_id": "c"}])  # fmt: skip
    numbers = [s.sequence_number for s in sent]
    assert numbers == sorted(numbers) and None not in numbers
    got = fifo.receive(10)
    assert [(m.body, m.sequence_number) for m in got][1:] == list(zip("bc", numbers, strict=True))


def test_fifo_send_rules_reject_and_write_nothing(broker, fifo, spark):
    with pytest.raises(MissingParameter, match="group_id"):
        fifo.send("x", deduplication_id="d")
    with pytest.raises(MissingParameter, match="deduplication_id"):
        fifo.send("x", group_id="g")
    with pytest.raises(InvalidParameterValue, match="per-message delay_seconds"):
        fifo.send("x", group_id="g", deduplication_id="d", delay_seconds=5)
    with pytest.raises(MissingParameter, match="entry 1: a FIFO queue needs group_id"):
        fifo.send_batch([entry("a", "g"), {"body": "b", "deduplication_id": "b"}])
    frame = spark.createDataFrame(
        [("a", "g", "d"), ("b", None, "e")], "body string, g string, d string"
    )
    with pytest.raises(MissingParameter, match="group_id=<column>"):
        fifo.send_df(frame, deduplication_id="d")
    with pytest.raises(InvalidParameterValue, match="per-message delay_seconds"):
        fifo.send_df(frame, group_id="g", deduplication_id="d", delay_seconds=5)
    with pytest.raises(InvalidParameterValue, match="the group id is missing"):
        fifo.send_df(frame, group_id="g", deduplication_id="d")
    with pytest.raises(InvalidParameterValue, match="must be FIFO too"):
        broker.create_queue("plain")
        broker.create_queue(
            "ordered.fifo", fifo=True, dead_letter_queue="plain", max_receive_count=3
        )
    assert fifo.stats().visible == 0
    assert fifo.receive() == []


def test_order_follows_batch_rows_dataframe_rows_and_commits(fifo, spark):
    fifo.send_batch([entry(f"a{i}", "a") for i in range(6)])
    fifo.send("b0", group_id="b", deduplication_id="b0")
    rows = spark.range(0, 12, numPartitions=3).select(
        F.concat(F.lit("c"), F.col("id").cast("string")).alias("body"), F.lit("c").alias("group")
    )
    assert fifo.send_df(rows, group_id="group", deduplication_id="body") == 12
    fifo.send_batch([entry("a6", "a"), entry("b1", "b")])
    delivered = drain(fifo)
    assert by_group(delivered) == {
        "a": [f"a{i}" for i in range(7)],
        "b": ["b0", "b1"],
        "c": [f"c{i}" for i in range(12)],
    }
    for group in ("a", "b", "c"):
        sequence = [m.sequence_number for m in delivered if m.group_id == group]
        assert sequence == sorted(sequence) and len(set(sequence)) == len(sequence)
    assert all(m.deduplication_id == m.body for m in delivered)


def test_a_send_keeps_each_group_in_one_shard_and_in_order(broker, fifo, spark):
    """Groups live in their own shards, so claims on different groups rarely share a file; a
    send over many groups then writes several files in one commit, each group's rows in order."""
    groups = [f"g{n}" for n in range(12)]
    fifo.send_batch([entry(f"{g}-{i}", g) for i in range(3) for g in groups])
    rows = spark.range(24).select(
        F.concat(F.lit("g"), (F.col("id") % 12).cast("string")).alias("group"),
        F.col("id").cast("string").alias("n"),
    )
    body = F.concat(
        "group", F.lit("-"), (F.col("n").cast("int") / 12 + 3).cast("int").cast("string")
    )
    fifo.send_df(rows.withColumn("body", body), group_id="group", deduplication_id="body")
    table = spark.read.format("delta").load(broker.context.record("jobs.fifo").location)
    placed = table.groupBy("group_id").agg(
        F.countDistinct("shard").alias("shards"), F.min("shard").alias("shard")
    )
    assert {row.shards for row in placed.collect()} == {1}
    first_send = table.where(F.col("body").rlike("-[0-2]$")).select("shard").distinct()
    assert first_send.count() > 1  # one commit, several shards
    delivered = drain(fifo)
    assert by_group(delivered) == {g: [f"{g}-{i}" for i in range(5)] for g in groups}


def test_a_group_in_flight_is_held_back_until_deleted_or_timed_out(fifo, clock):
    fifo.send_batch([entry("a1", "a"), entry("a2", "a"), entry("a3", "a"), entry("b1", "b")])
    everything = fifo.receive(10)
    assert by_group(everything) == {"a": ["a1", "a2", "a3"], "b": ["b1"]}  # several, in order
    assert fifo.receive(10) == []
    first_a, *_ = (m for m in everything if m.group_id == "a")
    fifo.delete(first_a.receipt_handle)
    assert fifo.receive(10) == []  # a2 and a3 are still held
    clock.advance(30)  # their visibility ends: the group resumes where it stopped
    assert by_group(fifo.receive(10)) == {"a": ["a2", "a3"], "b": ["b1"]}
    assert fifo.stats().in_flight == 3


def test_receive_df_claims_whole_group_prefixes(fifo, spark):
    fifo.send_batch([entry(f"{g}{i}", g) for g in "abc" for i in range(4)])
    held = fifo.receive(1)  # one group is now in flight
    claimed = fifo.receive_df(7).orderBy("sequence_number").collect()
    assert len(claimed) == 7
    groups = by_group(claimed)
    assert held[0].group_id not in groups
    for group, bodies in groups.items():  # each a prefix of its group, in order
        assert bodies == [f"{group}{i}" for i in range(len(bodies))]
    assert fifo.receive(10) == []


def test_deduplication_within_five_minutes(broker, fifo, clock, spark):
    original = fifo.send("pay 1", group_id="g", deduplication_id="p1")
    assert fifo.send("pay 1 again", group_id="g", deduplication_id="p1") == original
    ids = fifo.send_batch(
        [entry("p2", "g"), entry("p1 in batch", "g", "p1"), entry("p2 twice", "g", "p2")]
    )
    assert ids[1] == original and ids[2] == ids[0]
    frame = spark.createDataFrame([("p1 in df", "p1"), ("p3", "p3")], "body string, d string")
    assert fifo.send_df(frame.withColumn("g", F.lit("g")), group_id="g", deduplication_id="d") == 2
    assert fifo.stats().visible == 3
    delivered = drain(fifo)
    assert [m.body for m in delivered] == ["pay 1", "p2", "p3"]
    clock.advance(200)  # deleted, but still within the window: accepted, not delivered
    assert fifo.send("pay 1 late", group_id="g", deduplication_id="p1") == original
    assert fifo.receive() == []
    clock.advance(101)  # 5 minutes after the original: a new message
    fresh = fifo.send("pay 1 new", group_id="g", deduplication_id="p1")
    assert fresh != original
    [message] = fifo.receive()
    assert message.message_id == fresh
    fifo.delete(message.receipt_handle)

    rows = spark.read.format("delta").load(broker.context.record("jobs.fifo").location)
    clock.advance(300)  # the redrive job drops duplicates, and tombstones once spent
    broker.redrive()
    assert [(r.shard, r.message_id) for r in rows.collect()] == [(-1, fresh)]
    clock.advance(300)
    broker.redrive()
    assert rows.count() == 0


def test_a_receive_skips_duplicates_wherever_they_sit(fifo):
    """Duplicates in the middle of a group, and in another group (deduplication is queue-wide)."""
    sent = [("a1", "g1", "d1"), ("b1", "g2", "e1"), ("a2", "g1", "d1"), ("a3", "g1", "d3")]
    fifo.send_batch([entry(*fields) for fields in [*sent, ("b2", "g2", "d1")]])
    assert by_group(drain(fifo, 1)) == {"g1": ["a1", "a3"], "g2": ["b1"]}


def test_failing_head_blocks_its_group_until_moved_to_a_fifo_dead_letter_queue(broker, clock):
    dead = broker.create_queue("dead.fifo", fifo=True)
    work = broker.create_queue(
        "work.fifo", fifo=True, dead_letter_queue="dead.fifo", max_receive_count=2
    )
    work.send_batch([entry("a1", "a"), entry("a2", "a"), entry("b1", "b"), entry("b2", "b")])
    for _ in range(2):  # the heads a1 and b1 fail twice
        assert sorted(m.body for m in work.receive(1) + work.receive(1)) == ["a1", "b1"]
        clock.advance(30)
    work.send("c1", group_id="c", deduplication_id="c1")
    assert work.stats().awaiting_dead_letter == 2
    assert [m.body for m in work.receive(10)] == ["c1"]  # a and b stay blocked by their heads
    assert broker.redrive().moved_to_dead_letter == 2
    assert by_group(work.receive(10)) == {"a": ["a2"], "b": ["b2"]}
    moved = drain(dead)
    assert by_group(moved) == {"a": ["a1"], "b": ["b1"]}
    assert len({m.sequence_number for m in moved}) == 2  # each numbered anew in its new queue


def test_a_fifo_queue_at_its_in_flight_limit_answers_receive_df_with_nothing(
    broker, spark, monkeypatch
):
    """As SQS does: no error at a FIFO queue's limit (120,000; 5 here), only no messages."""
    monkeypatch.setitem(IN_FLIGHT_LIMITS, True, 5)
    queue = broker.create_queue("busy.fifo", fifo=True, shards=2)
    rows = spark.range(8).select(
        F.col("id").cast("string").alias("body"), F.col("id").cast("string").alias("g")
    )
    queue.send_df(rows, group_id="g", deduplication_id="body")
    assert queue.receive_df(10).count() == 5
    assert queue.receive_df(10).count() == 0
    assert queue.receive(10) == []
    assert queue.stats().visible == 3


def test_concurrent_consumers_hold_a_group_one_at_a_time_and_in_order(broker):
    queue = broker.create_queue("shared.fifo", fifo=True)
    queue.send_batch([entry(f"{g}{i}", g) for g in "abc" for i in range(3)])
    holders: dict[str, int] = {}
    overlaps: list[str] = []
    delivered: list = []
    lock = threading.Lock()
    deadline = time.monotonic() + 300

    def consume(worker: int) -> None:
        while len(delivered) < 9 and time.monotonic() < deadline:
            batch = queue.receive(2, visibility_timeout=3600)
            groups = {m.group_id for m in batch}
            with lock:
                overlaps.extend(g for g in groups if holders.get(g, worker) != worker)
                holders.update(dict.fromkeys(groups, worker))
                delivered.extend(batch)
            with lock:  # let go before deleting, so the next holder never looks like an overlap
                for group in groups:
                    del holders[group]
            if batch:
                assert not queue.delete_batch([m.receipt_handle for m in batch]).failed

    run_threads([lambda w=w: consume(w) for w in range(3)])
    assert overlaps == []
    assert [n for n in Counter(m.message_id for m in delivered).values() if n > 1] == []
    assert by_group(delivered) == {g: [f"{g}{i}" for i in range(3)] for g in "abc"}
    print(f"conflict retries (3 FIFO consumers): {broker.conflict_retries}")


def test_concurrent_producers_with_one_deduplication_id_make_one_delivery(broker):
    queue = broker.create_queue("orders.fifo", fifo=True)
    together = threading.Barrier(2, timeout=60)
    returned: dict[int, list[str]] = {0: [], 1: []}

    def produce(worker: int) -> None:
        for order in range(3):
            together.wait()
            returned[worker].append(
                queue.send(
                    f"order {order} via {worker}", group_id="g", deduplication_id=f"o{order}"
                )
            )

    run_threads([lambda w=w: produce(w) for w in range(2)])
    assert returned[0] == returned[1]  # both producers are told the id of the one accepted send
    delivered = drain(queue)
    assert [m.deduplication_id for m in delivered] == ["o0", "o1", "o2"]
    assert [m.message_id for m in delivered] == returned[0]


def test_purge_keeps_the_deduplication_ids_of_the_purged(fifo, clock):
    """As every FIFO delete: a purged message's id still deduplicates for the rest of its window."""
    original = fifo.send("before the purge", group_id="g", deduplication_id="p")
    assert fifo.purge() == 1
    clock.advance(60)
    assert fifo.send("again", group_id="g", deduplication_id="p") == original
    assert fifo.receive(10) == []
    clock.advance(241)  # five minutes after the original: a new message
    assert fifo.send("later", group_id="g", deduplication_id="p") != original
    assert [m.body for m in fifo.receive(10)] == ["later"]
