"""FIFO moves never lose a message to deduplication: deduplication judges sends, not moves; and
the FIFO corners of tests/unit/test_fifo_corners.py where Spark does the work: tables Spark
numbers by row tracking (its reads, its MERGE that makes tombstones, its moves), and the native
engine's tables under Spark's redrive pass and moves."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from sparkqueue import Broker
from tests.unit import test_fifo_corners as corners

MINUTE = 60


def test_a_message_moved_back_is_delivered_though_a_later_send_had_its_id(broker, clock):
    """M1 goes to the dead-letter queue; M2, the same body ten minutes later, is processed and
    deleted (its tombstone still counts); M1 moved back is a message, not a duplicate of M2."""
    broker.create_queue("s-dlq.fifo", fifo=True, content_based_deduplication=True)
    source = broker.create_queue(
        "s.fifo",
        fifo=True,
        content_based_deduplication=True,
        dead_letter_queue="s-dlq.fifo",
        max_receive_count=1,
        visibility_timeout=30,
    )
    dlq = broker.get_queue("s-dlq.fifo")
    first = source.send("same body", group_id="g")
    assert [m.message_id for m in source.receive()] == [first]
    clock.advance(31)
    assert broker.redrive().moved_to_dead_letter == 1

    clock.advance(10 * MINUTE - 31)
    second = source.send("same body", group_id="g")
    assert second != first
    [m2] = source.receive()
    source.delete(m2.receipt_handle)

    clock.advance(2 * MINUTE)
    assert dlq.start_message_move() == 1
    broker.redrive()  # a pass that would drop duplicates
    [back] = source.receive()
    assert (back.message_id, back.body) == (first, "same body")
    source.delete(back.receipt_handle)
    assert source.stats().visible == 0 and dlq.stats().visible == 0


def _groups_in_descending_shards(spark, shards: int) -> tuple[str, str]:
    """Two group ids whose home shards put the first after the second (see fifo.home_shard), so
    a move copies the later-sent message's row first."""
    names = [f"g{i}" for i in range(64)]
    rows = (
        spark.createDataFrame([(n,) for n in names], "g string")
        .select("g", F.pmod(F.xxhash64("g"), F.lit(shards)).alias("shard"))
        .collect()
    )
    shard = {row.g: row.shard for row in rows}
    for early in names:
        for late in names:
            if shard[early] > shard[late]:
                return early, late
    raise AssertionError("no two groups in different shards")


def test_messages_moved_together_into_a_dead_letter_queue_are_all_kept(broker, clock, spark):
    """Two groups, one deduplication id, sent six minutes apart (both accepted), exhausted and
    moved in one pass: the copies land out of send order, and both stay messages."""
    dlq = broker.create_queue("d.fifo", fifo=True)
    source = broker.create_queue(
        "w.fifo", fifo=True, dead_letter_queue="d.fifo", max_receive_count=1
    )
    early, late = _groups_in_descending_shards(
        spark, broker.context.record("d.fifo").attributes.shards
    )
    source.send("sent first", group_id=early, deduplication_id="same")
    clock.advance(6 * MINUTE)
    source.send("sent later", group_id=late, deduplication_id="same")
    assert len(source.receive(10)) == 2
    clock.advance(31)
    assert broker.redrive().moved_to_dead_letter == 2
    broker.redrive()  # a second pass drops duplicates, if any were flagged

    assert dlq.stats().visible == 2
    assert sorted(m.body for m in dlq.receive(10)) == ["sent first", "sent later"]


def test_a_moved_message_does_not_deduplicate_a_later_send(broker, clock):
    """A copy moved in keeps its deduplication id, but only sends deduplicate sends."""
    broker.create_queue("d2.fifo", fifo=True)
    source = broker.create_queue(
        "w2.fifo", fifo=True, dead_letter_queue="d2.fifo", max_receive_count=1
    )
    dlq = broker.get_queue("d2.fifo")
    source.send("to the dlq", group_id="g", deduplication_id="x")
    source.receive()
    clock.advance(31)
    assert broker.redrive().moved_to_dead_letter == 1
    fresh = dlq.send("sent to the dlq itself", group_id="g", deduplication_id="x")
    assert fresh != source.send("again", group_id="g", deduplication_id="x")
    assert sorted(m.body for m in dlq.receive(10)) == ["sent to the dlq itself", "to the dlq"]


@pytest.fixture
def spark_broker(spark, tmp_path, clock) -> Broker:
    """FIFO tables Spark numbers (row tracking), served by Spark alone."""
    return Broker(spark, str(tmp_path / "root"), clock=clock, engine="spark")


@pytest.mark.parametrize(
    "corner",
    [
        corners.test_a_send_accepted_after_a_purge_is_delivered,
        corners.test_a_send_accepted_after_its_duplicate_expired_is_delivered,
        corners.test_a_move_takes_no_duplicate,
        corners.test_moves_with_a_limit_keep_a_groups_order,
        corners.test_a_move_back_after_a_copy_without_its_drop_finishes_cleanly,
        corners.test_a_move_cancelled_after_its_message_came_back_leaves_it_once,
    ],
    ids=lambda corner: corner.__name__.removeprefix("test_"),
)
def test_fifo_corners_on_tables_spark_numbers(spark_broker, clock, corner):
    """The corners whose statements Spark writes differently on such tables (tombstones, a
    move's copy, drop and cancel, a limit); the rest are rules both engines share, each
    Spark operation costing a second or more."""
    corner(spark_broker, clock)


def test_a_move_back_after_a_copy_without_its_drop_finishes_under_spark_passes(broker, clock):
    """The native engine's tables, with Spark's pass and moves (a broker with a session)."""
    assert broker.spark is not None and broker.engine == "native"
    corners.test_a_move_back_after_a_copy_without_its_drop_finishes_cleanly(broker, clock)
