"""The worker loop's exchange: the finished batch settled and the next claimed, in one commit."""

from __future__ import annotations

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from sparkqueue.engine import exchange as exchange_module
from sparkqueue.engine.conditions import is_message
from sparkqueue.engine.exchange import exchange
from sparkqueue.rules import handles
from tests.integration.helpers import queue_table


def refs(queue, messages):
    secret = queue._ctx.record(queue.name).secret
    return [handles.parse(secret, m.receipt_handle) for m in messages]


@pytest.fixture(params=["update", "merge"])
def statement(request, monkeypatch) -> str:
    """Both ways an exchange commits: one UPDATE (small batches) and one MERGE (larger ones)."""
    if request.param == "merge":
        monkeypatch.setattr(exchange_module, "EXCHANGE_UPDATE_MAX_ROWS", 0)
    return request.param


def version(spark, queue) -> int:
    location = queue._ctx.record(queue.name).location
    return DeltaTable.forPath(spark, location).history(1).first().version


def test_one_commit_settles_the_finished_batch_and_claims_the_next(
    broker, spark, queue, clock, statement
):
    queue.send_batch(["a", "b", "c", "d"])
    ctx, record = queue._ctx.quick, queue._ctx.record(queue.name)
    first = exchange(ctx, record, [], 2, 60)
    before = version(spark, queue)

    second = exchange(ctx, record, refs(queue, first.claimed), 2, 60)

    assert version(spark, queue) == before + 1
    assert second.superseded == set()
    assert {m.body for m in first.claimed + second.claimed} == {"a", "b", "c", "d"}
    left = queue_table(queue).where(is_message()).collect()
    assert {(r.message_id, r.receipt_handle) for r in left} == {
        (m.message_id, m.receipt_handle) for m in second.claimed
    }
    assert [m.receive_count for m in second.claimed] == [1, 1]
    tombstones = queue_table(queue).where(~is_message()).collect()
    retired = {(m.message_id, "", None) for m in first.claimed} if statement == "update" else set()
    assert {(r.message_id, r.body, r.receipt_handle) for r in tombstones} == retired
    assert queue.stats().in_flight == 2 and queue.stats().visible == 0
    clock.advance(601)  # past the tombstones' lifetime: the redrive job drops them
    broker.redrive()
    assert queue_table(queue).where(~is_message()).count() == 0


def test_a_superseded_handle_is_reported_and_the_rest_still_happens(queue, clock, statement):
    queue.send_batch(["a", "b"])
    ctx, record = queue._ctx.quick, queue._ctx.record(queue.name)
    held = exchange(ctx, record, [], 2, 30).claimed
    clock.advance(31)  # both come back, and another receiver takes one of them again
    [again] = queue.receive(1, visibility_timeout=300)

    turn = exchange(ctx, record, refs(queue, held), 5, 300)

    assert turn.superseded == {again.message_id}
    assert turn.claimed == []  # the other one was finished: retired, not claimed again
    left = queue_table(queue).where(is_message()).collect()
    assert [r.message_id for r in left] == [again.message_id]


def test_candidates_won_by_another_receiver_are_left_out(queue, monkeypatch, statement):
    """Another driver (on object storage nothing serialises the two) claims a candidate between
    this exchange's read and its commit: the commit skips it and the exchange returns the rest."""
    queue.send_batch(["a", "b"])
    ctx, record = queue._ctx.quick, queue._ctx.record(queue.name)
    real = exchange_module.candidates
    stolen = []

    def raced(*args):
        found = real(*args)
        if not stolen:
            stolen.append(found[0].message_id)
            ctx.storage.change(  # that driver's claim: a new handle, one more receive
                record.location,
                F.col("message_id") == stolen[0],
                ("shard", "message_id"),
                {"receipt_handle": F.lit("theirs"), "receive_count": F.lit(1)},
            )
        return found

    monkeypatch.setattr(exchange_module, "candidates", raced)
    turn = exchange(ctx, record, [], 10, 300)

    assert len(turn.claimed) == 1 and turn.claimed[0].message_id != stolen[0]
    holders = {r.message_id: r.receipt_handle for r in queue_table(queue).collect()}
    assert holders == {
        stolen[0]: "theirs",
        turn.claimed[0].message_id: turn.claimed[0].receipt_handle,
    }
