"""Spare candidates: a receive's read keeps what it found beyond its claim, and the broker's next
receives claim those at once. They are hints: the claim's statement is the proof, and nothing a
spare misses is lost, delivered twice or delivered out of the order a broker can know."""

from __future__ import annotations

from datetime import timedelta

from sparkqueue import Broker
from sparkqueue.engine.messages.spares import SpareCandidates
from sparkqueue.engine.rounds import standard
from sparkqueue.engine.rounds.requests import Ask
from sparkqueue.rules import handles
from sparkqueue.store.statements import Row


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


def test_spares_taken_by_another_broker_send_the_receive_to_the_table(broker, tmp_path, clock):
    """A claim of spares that another broker took meanwhile claims nothing: the receive reads
    the table at once instead of coming back empty."""
    queue = broker.create_queue("work", shards=1)
    sent = sorted(queue.send(f"m{i}") for i in range(5))  # ids: oldest first
    assert queue.receive(1)[0].message_id == sent[0]  # spares: m1..m4
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


def test_no_message_twice_when_brokers_share_their_spares_queue(broker, tmp_path, clock):
    queue = broker.create_queue("work", shards=2)
    sent = set(queue.send_batch([f"m{i}" for i in range(60)]))
    other = Broker(None, str(tmp_path / "root"), clock=clock).get_queue("work")
    seen: list[str] = []
    for _ in range(40):
        for consumer in (queue, other):
            seen += [m.message_id for m in consumer.receive(3)]
    assert len(seen) == len(set(seen)) and set(seen) == sent


def row(message_id: str, body: str = "b") -> Row:
    return Row(message_id=message_id, body=body)


def test_spares_keep_within_their_bytes_and_age(clock):
    spares = SpareCandidates()
    now = clock()
    big = "x" * (3 << 20)
    spares.keep("q", [row("a", big), row("b", big), row("c")], now)
    assert [r["message_id"] for r in spares.take("q", 1, now)] == ["a"]
    assert spares.take("q", 1, now) == []  # "b" was over the bytes: nothing more was kept

    spares.keep("q", [row("d"), row("e")], now)
    assert spares.take("q", 1, now + timedelta(seconds=1)) == []  # read too long ago
    assert spares.take("q", 1, now) == []  # and dropped
    spares.keep("q", [row("f")], now)
    assert spares.take("q", 2, now) == []  # fewer than wanted: a read


def test_a_claim_that_missed_some_spares_drops_the_rest(clock):
    spares = SpareCandidates()
    now = clock()
    spares.keep("q", [row(i) for i in "abcdef"], now)
    taken = spares.take("q", 2, now)
    assert spares.settle("q", taken, 1) is False  # one won: no read again, but no more spares
    assert spares.take("q", 1, now) == []
    spares.keep("q", [row(i) for i in "gh"], now)
    taken = spares.take("q", 1, now)
    assert spares.settle("q", taken, 0) is True  # none won: read again
    assert spares.settle("q", [row("x")], 0) is False  # rows of a read are not spares
