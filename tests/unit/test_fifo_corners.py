"""FIFO corners: a message accepted after a purge or an expiry is never lost to a duplicate's
tombstone, moves take no duplicates and keep each group's order (a group's head held by a
receiver holds its group), and a crash between a move's copy and its drop followed by a move
back ends with the message once. Here on the native engine (real delta-rs commits, no JVM);
tests/integration/test_fifo_moves.py runs the same tests where Spark does the work."""

from __future__ import annotations

import pytest

from sparkqueue.engine.moves.choice import movers
from sparkqueue.services.redrive import Redrive
from tests.crashes import Crash, crash_at


def rows_of(broker, name: str, columns=("message_id",)) -> list:
    """Every row of the queue's table, tombstones and duplicates included, by its engine."""
    ctx = broker.context
    record = ctx.record(name)
    return ctx.tables_for(record).select(record.location, list(columns))


def fifo_pair(broker, max_receive_count: int = 1):
    dead = broker.create_queue("dead.fifo", fifo=True)
    work = broker.create_queue(
        "work.fifo", fifo=True, dead_letter_queue="dead.fifo", max_receive_count=max_receive_count
    )
    return work, dead


def test_a_send_accepted_after_a_purge_is_delivered(broker, clock):
    """A purge must not turn a never-delivered duplicate into a tombstone: it would outlive the
    original's and then pass for the accepted send, making the next send a duplicate after it
    was acknowledged with its own id (and the pass after that deleted it)."""
    queue = broker.create_queue("pay.fifo", fifo=True)
    first = queue.send("x1", group_id="g", deduplication_id="X")
    clock.advance(240)
    assert queue.send("x2", group_id="g", deduplication_id="X") == first  # a duplicate
    assert queue.purge() == 1  # the duplicate is no message anyone could see
    clock.advance(120)  # 6 minutes after the original: a new send of X is accepted
    later = queue.send("x3", group_id="g", deduplication_id="X")
    assert later != first
    clock.advance(250)  # the original's tombstone is spent; the duplicate's must not be left
    broker.redrive()
    broker.redrive()
    assert queue.stats().visible == 1
    assert [m.message_id for m in queue.receive(1)] == [later]


def test_a_send_accepted_after_its_duplicate_expired_is_delivered(broker, clock):
    """The same through retention: a duplicate past its retention is dropped, never kept as a
    tombstone that outlives its original's."""
    queue = broker.create_queue("short.fifo", fifo=True, retention_seconds=60)
    first = queue.send("x1", group_id="g", deduplication_id="X")
    clock.advance(240)
    assert queue.send("x2", group_id="g", deduplication_id="X") == first
    clock.advance(70)  # both past retention before a pass dropped the duplicate
    assert broker.redrive().expired_by_retention == 1  # the accepted message, not its duplicate
    queue.set_attributes(retention_seconds=345_600)
    clock.advance(50)  # 6 minutes after the original
    later = queue.send("x3", group_id="g", deduplication_id="X")
    assert later != first
    clock.advance(250)
    broker.redrive()
    assert [m.message_id for m in queue.receive(1)] == [later]


def test_a_move_takes_no_duplicate(broker, clock):
    work, dead = fifo_pair(broker)
    original = dead.send("pay", group_id="g", deduplication_id="p")
    assert dead.send("pay again", group_id="g", deduplication_id="p") == original
    assert dead.start_message_move(destination="work.fifo") == 1
    [moved] = work.receive(10)
    assert moved.message_id == original
    work.delete(moved.receipt_handle)
    clock.advance(60)
    assert work.receive(10) == []  # the duplicate is never delivered in the destination
    assert len(rows_of(broker, "work.fifo")) == 1  # (the tombstone of the one moved)
    broker.redrive()  # the duplicate stayed behind, for the pass to drop
    assert [row.message_id for row in rows_of(broker, "dead.fifo")] == [original]  # a tombstone


def test_a_move_waits_for_a_group_whose_head_is_held(broker, clock):
    """A move takes what a receive would: group prefixes, none of a group in flight."""
    work, dead = fifo_pair(broker)
    dead.send_batch(
        [{"body": b, "group_id": "g", "deduplication_id": b} for b in ("1-open", "2-debit")]
    )
    [head] = dead.receive(1, visibility_timeout=60)
    assert head.body == "1-open"
    assert dead.start_message_move(destination="work.fifo") == 0  # not 2-debit ahead of it
    dead.change_visibility(head.receipt_handle, 0)
    assert dead.start_message_move(destination="work.fifo") == 2
    assert [m.body for m in work.receive(10)] == ["1-open", "2-debit"]


def test_a_move_with_a_limit_takes_the_oldest_groups_prefixes(broker, clock):
    work, dead = fifo_pair(broker)
    for body, group in [("b1", "b"), ("a1", "a"), ("b2", "b"), ("a2", "a"), ("c1", "c")]:
        dead.send(body, group_id=group, deduplication_id=body)  # a commit each: in this order
    assert dead.start_message_move(destination="work.fifo", max_messages=3) == 3
    assert sorted(m.body for m in work.receive(10)) == ["a1", "b1", "b2"]  # b's head is oldest


def test_moves_with_a_limit_keep_a_groups_order(broker, clock):
    """One send's messages share a send time, so their ids need not sort in send order: a
    limited move still takes each group's head first."""
    work, dead = fifo_pair(broker)
    bodies = [f"d{i}" for i in range(6)]
    dead.send_batch([{"body": b, "group_id": "d", "deduplication_id": b} for b in bodies])
    for _ in range(3):
        assert dead.start_message_move(destination="work.fifo", max_messages=2) == 2
    assert [m.body for m in work.receive(10)] == bodies


def test_a_move_back_after_a_copy_without_its_drop_finishes_cleanly(broker, clock):
    """Killed between a dead-letter move's copy and its drop, then moved back by an operator
    before the next pass: the move back lands, every later pass finishes, and the message is
    in its queue once."""
    work, dead = fifo_pair(broker)
    [sent] = work.send_batch([{"body": "m", "group_id": "g", "deduplication_id": "m"}])
    work.receive(1, visibility_timeout=5)
    clock.advance(6)
    with pytest.raises(Crash):
        Redrive(broker.context, on_step=crash_at("copied")).run()
    assert [m["message_id"] for m in dead.peek(10)] == [sent]  # copied, not dropped from work
    assert dead.start_message_move() == 1
    for _ in range(2):
        assert broker.redrive().failed == {}
    assert [m.message_id for m in work.receive(10)] == [sent]
    assert dead.receive(10) == []
    live = [r for r in rows_of(broker, "work.fifo", ("message_id", "shard")) if r.shard >= 0]
    assert [r.message_id for r in live] == [sent]


def test_a_move_cancelled_after_its_message_came_back_leaves_it_once(broker, clock):
    """Killed between the copy and the drop of a move to another queue, then moved back by an
    operator, then that queue deleted: the pass that cancels the interrupted move drops the
    marked row instead of making it visible beside the message that came back."""
    _, dead = fifo_pair(broker)
    other = broker.create_queue("other.fifo", fifo=True)
    [sent] = dead.send_batch([{"body": "m", "group_id": "g", "deduplication_id": "m"}])
    crashing = movers(broker.context, crash_at("copied"))  # the broker's own kind of moves
    with pytest.raises(Crash):
        crashing.move_back(broker.context.record("dead.fifo"), "other.fifo", clock(), None)
    assert other.start_message_move(destination="dead.fifo") == 1  # lands beside the marked row
    broker.delete_queue("other.fifo")
    broker.redrive()
    [back] = dead.receive(10)
    assert back.message_id == sent
    live = [r for r in rows_of(broker, "dead.fifo", ("message_id", "shard")) if r.shard >= 0]
    assert [r.message_id for r in live] == [sent]
