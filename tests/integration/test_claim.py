"""Receiving: visibility, receive counts, long polling, retention, dead-letter hold-back, bulk claims."""

from __future__ import annotations

import threading
import time

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from sparkqueue import Broker
from sparkqueue.engine.messages import claim, tenants
from sparkqueue.errors import InvalidParameterValue, OverLimit
from sparkqueue.limits import IN_FLIGHT_LIMITS
from tests.integration.conftest import both_engines
from tests.integration.helpers import run_threads


@both_engines
def test_visibility_default_hides_then_returns_the_message(queue, clock):
    queue.send("work")
    [first] = queue.receive()
    assert queue.receive() == []
    clock.advance(29.9)
    assert queue.receive() == []
    clock.advance(0.1)
    [again] = queue.receive()
    assert again.message_id == first.message_id
    assert again.receive_count == 2
    assert again.receipt_handle != first.receipt_handle
    assert again.first_received_at == first.first_received_at


def test_visibility_override_per_receive(queue, clock):
    queue.send("work")
    queue.receive(visibility_timeout=5)
    clock.advance(5)
    [message] = queue.receive(visibility_timeout=0)
    [same] = queue.receive()  # 0 leaves it visible at once
    assert same.message_id == message.message_id
    assert same.receive_count == 3


def test_receive_limits_and_argument_checks(queue):
    queue.send_batch([f"m{i}" for i in range(5)])
    assert len(queue.receive(3)) == 3
    assert len(queue.receive(10)) == 2
    for bad in ({"max_messages": 0}, {"max_messages": 10_001}, {"max_messages": "1"}):
        with pytest.raises(InvalidParameterValue, match="max_messages"):
            queue.receive(**bad)
    with pytest.raises(InvalidParameterValue, match="visibility_timeout"):
        queue.receive(visibility_timeout=43_201)
    with pytest.raises(InvalidParameterValue, match="wait_time_seconds"):
        queue.receive(wait_time_seconds=21)


@both_engines
def test_sent_at_and_first_received_at_come_from_the_broker_clock(queue, clock):
    sent = clock()
    queue.send("timed")
    clock.advance(7)
    [message] = queue.receive()
    assert message.sent_at == sent
    assert message.first_received_at == clock()


def test_long_polling_returns_as_soon_as_a_message_arrives(queue):
    threading.Timer(1.0, lambda: queue.send("late")).start()
    started = time.monotonic()
    messages = queue.receive(wait_time_seconds=20)
    assert [m.body for m in messages] == ["late"]
    assert time.monotonic() - started < 19


def test_long_polling_gives_up_after_the_wait(queue):
    started = time.monotonic()
    assert queue.receive(wait_time_seconds=1) == []
    assert time.monotonic() - started >= 1


@both_engines
def test_messages_past_retention_are_never_returned(broker, clock):
    queue = broker.create_queue("short-lived", retention_seconds=60)
    queue.send("old")
    clock.advance(60)
    assert queue.receive() == []
    assert queue.stats().visible == 0


@both_engines
def test_messages_at_max_receive_count_wait_for_the_redrive_job(broker, clock):
    broker.create_queue("dead")
    queue = broker.create_queue("flaky", dead_letter_queue="dead", max_receive_count=2)
    queue.send("poison")
    for expected_count in (1, 2):
        [message] = queue.receive(visibility_timeout=1)
        assert message.receive_count == expected_count
        clock.advance(1)
    assert queue.receive() == []
    stats = queue.stats()
    assert (stats.awaiting_dead_letter, stats.visible) == (1, 0)


def test_receive_df_claims_once_and_stays_stable(spark, queue, clock):
    queue.send_df(spark.range(50).select(F.col("id").cast("string").alias("body")))
    claimed = queue.receive_df(20)
    first = claimed.collect()
    assert len(first) == 20
    assert claimed.count() == 20  # evaluating again claims nothing new
    assert queue.stats().in_flight == 20
    assert set(claimed.columns) >= {"message_id", "body", "receipt_handle", "receive_count"}
    assert {row.receive_count for row in first} == {1}
    result = queue.delete_df(claimed)
    assert len(result.successful) == 20 and not result.failed
    before = spark.createDataFrame(first, claimed.schema).drop(
        "attributes", "attribute_types"
    )  # maps do not sort
    assert_df_equality(claimed.drop("attributes", "attribute_types"), before, ignore_row_order=True)
    rest = queue.receive_df(100)
    assert rest.count() == 30
    assert {r.body for r in rest.collect()}.isdisjoint({r.body for r in first})
    clock.advance(30)
    assert queue.receive_df(100).count() == 30  # the 30 undeleted came back


def test_receive_df_handles_work_with_single_delete(spark, queue):
    queue.send("bulk")
    [row] = queue.receive_df(5).collect()
    queue.delete(row.receipt_handle)
    assert queue.stats().in_flight == 0


def test_receive_df_on_an_empty_queue_is_empty(queue):
    assert queue.receive_df(10).count() == 0


def test_over_limit_at_the_in_flight_limit(spark, broker, monkeypatch):
    """At the limit (120,000: tests/unit/test_inflight.py; 50 here, so the test fills fast) a
    standard queue's short poll is OverLimit, after a receive_df that reached it."""
    monkeypatch.setitem(IN_FLIGHT_LIMITS, False, 50)
    queue = broker.create_queue("busy", shards=2)
    queue.send_df(spark.range(51).select(F.lit("x").alias("body")))
    assert queue.receive_df(50).count() == 50
    with pytest.raises(OverLimit, match="has 50 messages in flight"):
        queue.receive()
    assert queue.receive(wait_time_seconds=1) == []  # long polling waits instead of failing
    assert queue.stats().visible == 1


def test_threads_and_queue_objects_share_the_in_flight_limit(spark, broker, monkeypatch):
    """Every Queue object and thread of a process reserves room from one gauge per queue."""
    monkeypatch.setitem(IN_FLIGHT_LIMITS, False, 5)
    broker.create_queue("small").send_batch([f"m{i}" for i in range(12)])
    queues = [broker.get_queue("small"), broker.get_queue("small")]
    claimed: list[int] = []

    def receive(queue) -> None:
        try:
            claimed.append(len(queue.receive(3, visibility_timeout=600)))
        except OverLimit:
            claimed.append(0)

    run_threads([lambda q=q: receive(q) for q in queues for _ in range(2)])
    assert 0 < sum(claimed) <= 5  # without a shared gauge, four threads claimed 3 each
    assert broker.get_queue("small").stats().in_flight == sum(claimed)


def test_a_deep_queue_is_read_one_shard_at_a_time_and_drains_completely(spark, broker, monkeypatch):
    """Once a read finds enough in one shard, receives read one shard and stop early; when that
    shard runs dry they fall back to the others, and the queue still drains exactly once."""
    monkeypatch.setattr(claim, "DEEP_SHARD_ROWS", 10)  # 80 messages make a deep queue here
    queue = broker.create_queue("deep", shards=2)
    queue.send_df(spark.range(80).select(F.col("id").cast("string").alias("body")))
    location = broker.context.record("deep").location
    received: list[str] = []
    deep_reads = 0
    while True:
        one_shard = broker.context.depths.is_deep(location)  # the path this receive will take
        batch = queue.receive(10)
        if not batch:
            break
        deep_reads += one_shard
        received += [m.body for m in batch]
    assert sorted(received, key=int) == [str(i) for i in range(80)]
    assert deep_reads > 0


@both_engines
def test_a_standard_queue_hands_out_each_shards_oldest_first(broker, clock):
    """A receive starts from a random shard (so receivers spread over the queue and a read
    touches few files), and takes that shard's oldest: per shard, messages leave in send order."""
    queue = broker.create_queue("ordered", shards=4)
    sent = []
    for i in range(12):  # one send at a time, each to a random shard
        sent.append(queue.send(f"m{i}"))
        clock.advance(0.002)
    taken: dict[int, list[str]] = {}
    while batch := queue.receive(2):
        for message in batch:
            shard = int(message.receipt_handle.split(".", 1)[0])  # a handle names its row's shard
            taken.setdefault(shard, []).append(message.message_id)
    assert sorted(i for ids in taken.values() for i in ids) == sorted(sent)
    for ids in taken.values():
        assert ids == sorted(ids, key=sent.index)


def test_a_queue_of_one_shard_hands_out_the_oldest_first(broker, clock):
    queue = broker.create_queue("one-shard", shards=1)
    sent = []
    for i in range(6):
        sent.append(queue.send(f"m{i}"))
        clock.advance(0.002)
    assert [m.message_id for m in queue.receive(1) + queue.receive(1)] == sent[:2]
    assert [m.message_id for m in queue.receive(10)] == sent[2:]


@pytest.mark.parametrize("broker", ["spark"], indirect=True)  # the native engine's: tests/unit
def test_the_spark_engine_serves_quiet_tenants_before_a_noisy_ones_backlog(broker, monkeypatch):
    monkeypatch.setattr(tenants, "TENANT_RECOUNT_SECONDS", 0.0)  # counted at every receive,
    monkeypatch.setattr(tenants, "TENANT_STALE_SECONDS", 0.0)  # by the receive itself
    queue = broker.create_queue("tenants", visibility_timeout=600)
    queue.send_batch([{"body": f"loud-{i}", "group_id": "loud"} for i in range(40)])
    assert len(queue.receive(30)) == 30  # loud holds 30 in flight: noisy
    queue.send_batch([{"body": "calm", "group_id": "calm"}, {"body": "plain"}])
    assert sorted(m.body for m in queue.receive(2)) == ["calm", "plain"]
    more = queue.receive(3)  # no quiet message left: the noisy tenant's, as usual
    assert len(more) == 3 and all(m.group_id == "loud" for m in more)
    stats = queue.stats()
    assert (stats.noisy_groups, stats.quiet_in_flight, stats.visible) == (1, 2, 7)


@both_engines
def test_the_visibility_timeout_runs_from_the_handout_not_from_the_read(broker, clock, monkeypatch):
    """A receive that spends 3 s reading and 1 s in its statement (the fake clock moves while
    they run): its message stays hidden for the whole timeout after it is handed out."""
    queue = broker.create_queue("slow", visibility_timeout=10)
    storage = broker.context.storage.interpreted
    read, change = claim.candidates, storage.change

    def slow_read(*args, **kwargs):
        found = read(*args, **kwargs)
        clock.advance(3)
        return found

    def slow_statement(address, rows, key, values=None):
        counts = change(address, rows, key, values)
        clock.advance(1)
        return counts

    monkeypatch.setattr(claim, "candidates", slow_read)
    monkeypatch.setattr(storage, "change", slow_statement)
    queue.send("warm-up")  # a first claim measures how long its statement takes
    queue.delete(queue.receive(1)[0].receipt_handle)
    queue.send("work")
    [message] = queue.receive(1)  # handed out now
    clock.advance(9.9)
    assert queue.receive(1) == []
    clock.advance(0.1 + 4)  # the receive's own read and statement move the clock by 4 s
    [again] = queue.receive(1)
    assert again.message_id == message.message_id


def test_a_native_broker_claims_around_the_spares_a_spark_engine_broker_took(
    broker, spark, tmp_path, clock
):
    """Spares of one engine's broker taken by the other engine's: the receive reads again, and
    no message goes to both."""
    queue = broker.create_queue("spared", shards=1)
    sent = sorted(queue.send(f"m{i}") for i in range(5))
    assert queue.receive(1)[0].message_id == sent[0]  # spares: the other four
    other = Broker(spark, str(tmp_path / "root"), clock=clock, engine="spark").get_queue("spared")
    assert [m.message_id for m in other.receive(4)] == sent[1:]
    newer = queue.send("m5")
    assert [m.message_id for m in queue.receive(1)] == [newer]
