"""Deleting and changing visibility: handles, superseding, batches, the 12-hour ceiling, heartbeats."""

from __future__ import annotations

import time

import pytest

from sparkqueue import BatchResult
from sparkqueue.errors import (
    EmptyBatchRequest,
    HeartbeatFailed,
    InvalidParameterValue,
    MessageNotInflight,
    ReceiptHandleIsInvalid,
)
from tests.integration.conftest import both_engines


@pytest.fixture
def held(queue):
    """A message received once (and so in flight for the default 30 s)."""
    queue.send("work")
    [message] = queue.receive()
    return message


@both_engines
def test_delete_removes_the_message(queue, held, clock):
    queue.delete(held.receipt_handle)
    clock.advance(60)
    assert queue.receive() == []
    assert queue.stats().in_flight == 0


def test_deleting_twice_with_the_last_handle_is_a_no_op(queue, held):
    queue.delete(held.receipt_handle)
    queue.delete(held.receipt_handle)


@both_engines
def test_a_superseded_handle_deletes_nothing(queue, held, clock):
    clock.advance(30)
    [again] = queue.receive()
    with pytest.raises(ReceiptHandleIsInvalid, match="superseded"):
        queue.delete(held.receipt_handle)
    assert queue.stats().in_flight == 1
    queue.delete(again.receipt_handle)
    assert queue.stats().in_flight == 0


@both_engines
def test_the_handle_of_an_expired_but_unclaimed_receive_still_deletes(queue, held, clock):
    clock.advance(31)  # visible again, but nobody received it since
    queue.delete(held.receipt_handle)
    assert queue.receive() == []


def test_malformed_handles_are_rejected(queue, held):
    for handle in ["", "garbage", "0.abc.def.ghi", "'; DELETE FROM t; --", "1.x\n2", None, 42]:
        with pytest.raises(ReceiptHandleIsInvalid):
            queue.delete(handle)
            pytest.fail(f"delete accepted handle {handle!r}")
        with pytest.raises(ReceiptHandleIsInvalid):
            queue.change_visibility(handle, 10)
            pytest.fail(f"change_visibility accepted handle {handle!r}")
    assert queue.stats().in_flight == 1  # the held message was left alone


def test_a_forged_or_foreign_handle_is_rejected(broker, queue, held):
    other = broker.create_queue("other")
    other.send("x")
    [foreign] = other.receive()
    with pytest.raises(ReceiptHandleIsInvalid, match="not issued by this queue"):
        queue.delete(foreign.receipt_handle)
    tampered = held.receipt_handle[:-1] + ("0" if held.receipt_handle[-1] != "0" else "1")
    with pytest.raises(ReceiptHandleIsInvalid):
        queue.delete(tampered)
    assert queue.stats().in_flight == 1 and other.stats().in_flight == 1


@both_engines
def test_delete_batch_reports_each_handle(queue, clock):
    queue.send_batch(["a", "b", "c"])
    first = queue.receive(10)
    clock.advance(30)
    second = {m.body: m for m in queue.receive(1)}
    stale = next(m for m in first if m.body in second)
    fresh = [m for m in first if m.body not in second]
    handles = [m.receipt_handle for m in fresh] + [stale.receipt_handle, "bogus"]
    result = queue.delete_batch(handles)
    assert sorted(result.successful) == sorted(m.receipt_handle for m in fresh)
    assert result.failed == {
        stale.receipt_handle: "ReceiptHandleIsInvalid",
        "bogus": "ReceiptHandleIsInvalid",
    }
    assert queue.stats().in_flight == 1
    with pytest.raises(EmptyBatchRequest):
        queue.delete_batch([])


@both_engines
def test_a_batch_with_a_stale_and_the_current_handle_of_one_message_deletes_by_the_current(
    queue, clock
):
    """Each handle gets what `delete` of it alone would: the stale one is refused while the
    message holds the current one; once it is gone, both are no-ops."""
    for stale_first in (True, False):
        queue.send("once")
        [first] = queue.receive(1)
        clock.advance(31)
        [current] = queue.receive(1)
        pair = [first.receipt_handle, current.receipt_handle]
        result = queue.delete_batch(pair if stale_first else pair[::-1])
        assert result.failed == {first.receipt_handle: "ReceiptHandleIsInvalid"}
        assert result.successful == [current.receipt_handle]
        assert queue.stats().in_flight == 0
        assert queue.delete_batch(pair) == BatchResult(successful=pair)  # gone: no-ops


def test_delete_df_needs_a_receipt_handle_column(spark, queue):
    with pytest.raises(InvalidParameterValue, match="receipt_handle"):
        queue.delete_df(spark.createDataFrame([("x",)], "handle string"))


@both_engines
def test_change_visibility_is_relative_to_now(queue, held, clock):
    clock.advance(20)
    queue.change_visibility(held.receipt_handle, 60)  # hidden until t=80, not t=30+60
    clock.advance(59)
    assert queue.receive() == []
    clock.advance(1)
    assert [m.message_id for m in queue.receive()] == [held.message_id]


def test_change_visibility_zero_releases_at_once(queue, held):
    queue.change_visibility(held.receipt_handle, 0)
    [again] = queue.receive()
    assert again.receive_count == 2


def test_change_visibility_can_shorten(queue, held, clock):
    queue.change_visibility(held.receipt_handle, 5)
    clock.advance(5)
    assert len(queue.receive()) == 1


@both_engines
def test_change_visibility_on_a_message_no_longer_in_flight(queue, held, clock):
    clock.advance(30)
    with pytest.raises(MessageNotInflight):
        queue.change_visibility(held.receipt_handle, 10)


@both_engines
def test_change_visibility_with_a_superseded_or_deleted_handle(queue, held, clock):
    clock.advance(30)
    [again] = queue.receive()
    with pytest.raises(ReceiptHandleIsInvalid):
        queue.change_visibility(held.receipt_handle, 10)
    queue.delete(again.receipt_handle)
    with pytest.raises(ReceiptHandleIsInvalid, match="no longer in the queue"):
        queue.change_visibility(again.receipt_handle, 10)


@both_engines
def test_change_visibility_range_and_the_12_hour_ceiling(queue, held, clock):
    for bad in (-1, 43_201, "10", 1.5):
        with pytest.raises(InvalidParameterValue):
            queue.change_visibility(held.receipt_handle, bad)
    clock.advance(10)
    queue.change_visibility(held.receipt_handle, 43_190)  # exactly 12 h after the receive
    clock.advance(3600)
    with pytest.raises(InvalidParameterValue, match="12 hours"):
        queue.change_visibility(held.receipt_handle, 43_190)
    queue.change_visibility(held.receipt_handle, 43_200 - 3610)  # still within the ceiling
    clock.advance(43_200 - 3610)
    assert len(queue.receive()) == 1  # visible exactly at the ceiling


def test_a_new_receive_resets_the_12_hour_ceiling(queue, held, clock):
    queue.change_visibility(held.receipt_handle, 0)
    clock.advance(40_000)
    [again] = queue.receive()
    queue.change_visibility(again.receipt_handle, 43_200)


@both_engines
def test_change_visibility_batch_reports_each_entry(queue, clock):
    queue.send_batch(["a", "b", "c"])
    a, b, c = sorted(queue.receive(3), key=lambda m: m.body)  # standard queues do not order
    queue.delete(c.receipt_handle)
    result = queue.change_visibility_batch(
        [(a.receipt_handle, 100), (b.receipt_handle, 50_000), (c.receipt_handle, 10), ("x", 5)]
    )
    assert result.successful == [a.receipt_handle]
    assert result.failed == {
        b.receipt_handle: "InvalidParameterValue",
        c.receipt_handle: "ReceiptHandleIsInvalid",
        "x": "ReceiptHandleIsInvalid",
    }
    clock.advance(99)  # b kept its 30 s; a was extended to 100 s
    assert [m.body for m in queue.receive(10)] == ["b"]
    with pytest.raises(EmptyBatchRequest):
        queue.change_visibility_batch([])
    with pytest.raises(InvalidParameterValue, match="twice"):
        queue.change_visibility_batch([(a.receipt_handle, 1), (a.receipt_handle, 2)])


def test_a_queue_level_change_leaves_in_flight_messages_alone(queue, held, clock):
    queue.set_attributes(visibility_timeout=300)
    clock.advance(30)  # the held message keeps the 30 s it was received with
    [again] = queue.receive()
    assert again.message_id == held.message_id
    clock.advance(299)
    assert queue.receive() == []  # the new receive used the new 300 s default
    clock.advance(1)
    assert len(queue.receive()) == 1


def test_heartbeat_extends_while_the_block_runs(queue, held, clock):
    with queue.heartbeat([held], visibility_timeout=60, interval=0.05) as beat:
        _wait_for(lambda: beat.beats >= 1)
        clock.advance(50)  # past the original 30 s, within the 60 s the beat granted
        assert queue.receive() == []
        # Extends again from the new now: a beat begun after the advance has ended once the
        # count has gone up twice since (a beat takes milliseconds on the native engine).
        seen = beat.beats
        _wait_for(lambda: beat.beats >= seen + 2)
        clock.advance(50)
        assert queue.receive() == []
    clock.advance(60)
    assert len(queue.receive()) == 1  # no more extensions after the block


def test_heartbeat_drops_deleted_messages_quietly(queue, held):
    # A slow beat: every beat is a MERGE, and the delete must not lose every race to them.
    with queue.heartbeat([held], visibility_timeout=60, interval=1) as beat:
        queue.delete(held.receipt_handle)
        _wait_for(lambda: not beat.held)
    assert beat.failures == {}


def test_heartbeat_failures_are_raised_on_exit(queue, held, clock):
    clock.advance(31)  # the message timed out before the heartbeat began (its first beat may
    with (  # come at once, so the clock cannot move inside the block without a race)
        pytest.raises(HeartbeatFailed, match="MessageNotInflight"),
        queue.heartbeat([held], visibility_timeout=60, interval=0.05) as beat,
    ):
        _wait_for(lambda: beat.failures)


def test_heartbeat_arguments_are_checked(queue, held):
    with pytest.raises(InvalidParameterValue):
        queue.heartbeat([held], visibility_timeout=43_201, interval=1)
    with pytest.raises(InvalidParameterValue):
        queue.heartbeat([held], visibility_timeout=30, interval=0)


def _wait_for(condition, timeout: float = 60.0) -> None:
    """Waits for the heartbeat thread (real work, not a visibility timeout)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the heartbeat"
        time.sleep(0.05)
