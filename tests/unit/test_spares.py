"""Spare candidates: a receive's read keeps what it found beyond its claim, and the broker's next
receives claim those at once. They are hints: the claim's statement is the proof; a spare that
went elsewhere is neither delivered twice nor makes a receive come back empty, and a message
made visible at once comes before them."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from types import SimpleNamespace

from sparkqueue import Broker
from sparkqueue.attributes import QueueAttributes
from sparkqueue.engine.messages import claim
from sparkqueue.engine.messages.spares import SpareCandidates, spare_room
from sparkqueue.engine.rounds import standard
from sparkqueue.engine.rounds.requests import Ask
from sparkqueue.limits import MAX_MESSAGE_BYTES, SPARE_SECONDS
from sparkqueue.rules import handles
from sparkqueue.store.statements import Row
from tests.integration.helpers import run_threads


def spares_of(queue) -> list[str]:
    """The ids the queue's broker holds as spares (oldest first)."""
    ctx = queue._ctx
    location = ctx.record(queue.name).location
    return [row["message_id"] for row in ctx.spares._kept.get(location, (None, []))[1]]


def test_later_receives_take_the_spares_oldest_first_without_a_read(broker, monkeypatch):
    queue = broker.create_queue("work", shards=1)
    sent = sorted(queue.send(f"m{i}") for i in range(5))  # ids: oldest first
    [first] = queue.receive(1)
    assert first.message_id == sent[0] and spares_of(queue) == sent[1:]

    reads = []
    tables = queue._ctx.tables
    select = tables.select
    monkeypatch.setattr(tables, "select", lambda *a, **k: reads.append(a) or select(*a, **k))
    got = [queue.receive(1)[0].message_id for _ in range(4)]
    assert got == sent[1:] and reads == []  # four claims, not one read
    assert queue.receive(1) == []
    assert queue.stats().in_flight == 5


def test_a_read_whose_shard_is_empty_keeps_spares_from_the_others(broker, monkeypatch):
    queue = broker.create_queue("sparse", shards=8)
    sent = sorted(queue.send_batch([f"m{i}" for i in range(20)]))  # one small send: one shard
    tables, location = queue._ctx.tables, queue._ctx.record(queue.name).location
    [held] = {row.shard for row in tables.select(location, ["shard"])}
    # every read starts at a shard without messages: the others' read must bring the spares
    monkeypatch.setattr(claim, "random", SimpleNamespace(randrange=lambda n: (held + 1) % n))

    selects = []
    select = tables.select
    monkeypatch.setattr(tables, "select", lambda *a, **k: selects.append(a) or select(*a, **k))
    reading = []
    for _ in range(20):
        before = len(selects)
        [message] = queue.receive(1)
        reading.append(message.message_id if len(selects) > before else None)
    per_read = spare_room(1, queue._ctx.record(queue.name).attributes)  # ten: one read in ten
    gap = [None] * (per_read - 1)  # receives that claimed spares
    assert per_read == 10 and reading == [sent[0], *gap, sent[per_read], *gap]
    assert queue.receive(1) == []


def test_spares_taken_by_another_broker_send_the_receive_to_the_table(broker, tmp_path, clock):
    """A claim of spares that another broker took meanwhile claims nothing: the receive reads
    the table at once instead of coming back empty."""
    queue = broker.create_queue("work", shards=1)
    sent = sorted(queue.send(f"m{i}") for i in range(5))  # ids: oldest first
    assert queue.receive(1)[0].message_id == sent[0] and spares_of(queue) == sent[1:]
    other = Broker(None, str(tmp_path / "root"), clock=clock).get_queue("work")
    assert [m.message_id for m in other.receive(10)] == sent[1:]
    newer = queue.send("m5")

    assert [m.message_id for m in queue.receive(1)] == [newer]
    assert spares_of(queue) == []


def test_a_round_whose_spares_went_elsewhere_claims_from_the_table(broker, tmp_path, clock):
    """The same in a shared round beside a delete: the delete applies once, and the claim is
    made again from a read."""
    queue = broker.create_queue("work", shards=1)
    sent = sorted(queue.send(f"m{i}") for i in range(5))  # ids: oldest first
    [held] = queue.receive(1)
    assert spares_of(queue) == sent[1:]
    other = Broker(None, str(tmp_path / "root"), clock=clock).get_queue("work")
    assert len(other.receive(10)) == 4
    newer = queue.send("m5")

    ctx = queue._ctx
    record = ctx.record(queue.name)
    ref = handles.parse(record.secret, held.receipt_handle)
    deleted, claimed = standard.run(ctx, record, [Ask(retire=(ref,)), Ask(wanted=2, timeout=30)])
    assert deleted.superseded == frozenset()
    assert [m.message_id for m in claimed.claimed] == [newer]
    assert held.message_id == sent[0] and queue.stats().in_flight == 5  # m1..m5; m0 deleted


def test_a_message_made_visible_again_comes_before_the_spares(broker, clock):
    queue = broker.create_queue("work", shards=1, visibility_timeout=30)
    sent = sorted(queue.send(f"m{i}") for i in range(4))  # ids: oldest first
    [first] = queue.receive(1)
    queue.change_visibility(first.receipt_handle, 5)  # hidden past the spares' age: kept
    assert spares_of(queue) == sent[1:]
    queue.change_visibility(first.receipt_handle, 0)
    assert queue.receive(1)[0].message_id == sent[0]

    [again] = queue.receive(1, visibility_timeout=0)  # visible again at once, like a release
    assert again.message_id == sent[1]
    assert queue.receive(1)[0].message_id == sent[1]


def test_spares_do_not_outlive_a_released_message(broker, clock):
    """A visibility timeout that runs out makes an older message claimable: spares read before
    that are too old by then, by the queue's clock."""
    queue = broker.create_queue("work", shards=1, visibility_timeout=30)
    sent = sorted(queue.send(f"m{i}") for i in range(4))  # ids: oldest first
    assert queue.receive(1)[0].message_id == sent[0]
    clock.advance(31)
    assert queue.receive(1)[0].message_id == sent[0]


def test_a_caller_of_a_round_whose_spare_went_elsewhere_still_gets_one(broker, tmp_path, clock):
    """Two callers share a round of two spares, one of which another broker took: the caller it
    was dealt to claims again from a read."""
    queue = broker.create_queue("work", shards=1)
    sent = sorted(queue.send(f"m{i}") for i in range(5))
    assert queue.receive(1)[0].message_id == sent[0] and spares_of(queue) == sent[1:]
    other = Broker(None, str(tmp_path / "root"), clock=clock).get_queue("work")
    assert [m.message_id for m in other.receive(1)] == [sent[1]]

    ctx = queue._ctx
    first, second = standard.run(ctx, ctx.record(queue.name), [Ask(wanted=1, timeout=30)] * 2)
    assert [m.message_id for m in first.claimed] == [sent[3]]  # read after m2 went to the other
    assert [m.message_id for m in second.claimed] == [sent[2]]


def test_a_spare_that_its_own_round_deletes_counts_as_missed(broker, tmp_path, clock):
    """Another broker took a spare and deletes it through this broker in the round that would
    claim it: the claim goes to the table instead of coming back empty."""
    queue = broker.create_queue("work", shards=1)
    sent = sorted(queue.send(f"m{i}") for i in range(5))
    assert queue.receive(1)[0].message_id == sent[0] and spares_of(queue) == sent[1:]
    [taken] = Broker(None, str(tmp_path / "root"), clock=clock).get_queue("work").receive(1)
    assert taken.message_id == sent[1]

    ctx = queue._ctx
    record = ctx.record(queue.name)
    ref = handles.parse(record.secret, taken.receipt_handle)
    deleted, claimed = standard.run(ctx, record, [Ask(retire=(ref,)), Ask(wanted=1, timeout=30)])
    assert deleted.superseded == frozenset()
    assert [m.message_id for m in claimed.claimed] == [sent[2]]


def test_a_failed_claim_again_leaves_the_rounds_committed_work_answered(
    broker, tmp_path, clock, monkeypatch
):
    queue = broker.create_queue("work", shards=1)
    sent = sorted(queue.send(f"m{i}") for i in range(5))
    [held] = queue.receive(1)
    other = Broker(None, str(tmp_path / "root"), clock=clock).get_queue("work")
    assert len(other.receive(10)) == 4
    ctx = queue._ctx
    record = ctx.record(queue.name)
    round_once = standard.run

    def fails_again(*args):
        monkeypatch.setattr(standard, "run", lambda *a: (_ for _ in ()).throw(OSError("store")))
        return round_once(*args)

    monkeypatch.setattr(standard, "run", fails_again)
    ref = handles.parse(record.secret, held.receipt_handle)
    deleted, claimed = standard.run(ctx, record, [Ask(retire=(ref,)), Ask(wanted=1, timeout=30)])
    assert deleted.superseded == frozenset() and claimed.claimed == []
    assert queue.stats().in_flight == 4 and held.message_id == sent[0]  # m0 deleted


def test_a_fair_receive_drops_the_spares_to_serve_a_quiet_tenant(broker):
    queue = broker.create_queue("work", shards=1)
    queue.send_batch([{"body": f"loud-{i}", "group_id": "loud"} for i in range(40)])
    assert len(queue.receive(30, visibility_timeout=7200)) == 30
    assert len(spares_of(queue)) == 10  # read before any tenant was counted
    queue.send_batch([{"body": "calm", "group_id": "calm"}])
    assert [m.body for m in queue.receive(1)] == ["calm"]  # loud is noisy: 30 in flight
    assert spares_of(queue) == []


def test_a_queue_whose_messages_carry_groups_keeps_no_spares_after_its_first_read(broker):
    """Its tenants are counted once a second, and spares would serve one tenant's messages in
    between: only the read that first meets a group keeps any."""
    queue = broker.create_queue("work", shards=1)
    queue.send_batch([{"body": f"m{i}", "group_id": f"t{i % 3}"} for i in range(20)])
    assert len(queue.receive(1)) == 1 and len(spares_of(queue)) == 9
    assert len(queue.receive(1)) == 1 and spares_of(queue) == []
    assert len(queue.receive(1)) == 1 and spares_of(queue) == []


def test_a_fifo_receive_keeps_no_spares(broker):
    queue = broker.create_queue("work.fifo", fifo=True)
    queue.send_batch(
        [{"body": f"m{i}", "group_id": "g", "deduplication_id": str(i)} for i in range(5)]
    )
    assert [m.body for m in queue.receive(1)] == ["m0"]
    assert spares_of(queue) == []


def test_brokers_on_threads_share_a_queue_none_twice_none_lost(broker, tmp_path, clock):
    queue = broker.create_queue("work", shards=2)
    sent = set(queue.send_batch([f"m{i}" for i in range(300)]))
    other = Broker(None, str(tmp_path / "root"), clock=clock).get_queue("work")
    taken: list[str] = []
    lock = threading.Lock()

    def consume(consumer) -> None:
        while batch := consumer.receive(3):
            with lock:
                taken.extend(m.message_id for m in batch)
            consumer.delete_batch([m.receipt_handle for m in batch])

    run_threads([lambda c=c: consume(c) for c in (queue, queue, other, other)])
    assert set(taken) == sent and max(Counter(taken).values()) == 1
    assert queue.stats().visible == queue.stats().in_flight == 0


def row(message_id: str, body: str = "b") -> Row:
    return Row(message_id=message_id, body=body)


def test_a_read_asks_for_spares_within_rows_and_bytes():
    small, large = QueueAttributes(), QueueAttributes(max_message_bytes=MAX_MESSAGE_BYTES)
    assert spare_room(1, small) == 10 and spare_room(10, small) == 10 + 64  # 16 MiB of 256 KiB
    assert spare_room(10, large) == 10 + 16 and spare_room(100, small) == 164
    assert spare_room(101, small) == 101  # its spares could serve no other claim like it


def test_spares_age_out_and_serve_only_whole_claims(clock):
    spares = SpareCandidates()
    now = clock()
    spares.keep("q", [row("a"), row("b")], now)
    assert [r["message_id"] for r in spares.take("q", 1, now)] == ["a"]
    assert spares.take("q", 1, now + timedelta(seconds=SPARE_SECONDS)) == []  # read too long ago
    assert spares.take("q", 1, now) == []  # and dropped
    spares.keep("q", [row("c")], now)
    assert spares.take("q", 2, now) == []  # fewer than wanted: a read
    spares.keep("q", [row("d")], now)
    spares.keep("other", [], now + timedelta(seconds=2))
    assert spares.take("q", 1, now) == []  # swept as stale by another queue's read


def test_a_claim_that_missed_some_spares_drops_the_rest(clock):
    spares = SpareCandidates()
    now = clock()
    spares.keep("q", [row(i) for i in "abcdef"], now)
    taken = spares.take("q", 2, now)
    assert spares.settle("q", taken, 1) is True  # one went elsewhere
    assert spares.take("q", 1, now) == []  # and the rest went with it
    spares.keep("q", [row(i) for i in "gh"], now)
    taken = spares.take("q", 1, now)
    assert spares.settle("q", taken, 1) is False  # all won: keep going
    assert [r["message_id"] for r in spares.take("q", 1, now)] == ["h"]
    spares.keep("q", [], now)
    assert spares.settle("q", [row("x")], 0) is False  # rows of a read are not spares
