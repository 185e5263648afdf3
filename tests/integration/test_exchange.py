"""The worker loop's exchange: the finished batch settled and the next claimed, in one commit
(a round of one ask through the group committer; both statements, by the `statement` fixture)."""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import functions as F

from sparkqueue.engine.conditions import is_message
from sparkqueue.engine.rounds import standard
from sparkqueue.engine.rounds.operations import settle_and_claim
from sparkqueue.engine.rounds.requests import Answer
from sparkqueue.rules import handles
from sparkqueue.store.spark_exprs import to_column
from tests.integration.helpers import queue_table


def refs(queue, messages):
    secret = queue._ctx.record(queue.name).secret
    return [handles.parse(secret, m.receipt_handle) for m in messages]


def exchange(queue, finished, wanted: int, timeout: int) -> Answer:
    ctx = queue._ctx.quick
    return settle_and_claim(ctx, ctx.record(queue.name), refs(queue, finished), wanted, timeout)


def version(spark, queue) -> int:
    location = queue._ctx.record(queue.name).location
    return DeltaTable.forPath(spark, location).history(1).first().version


def test_one_commit_settles_the_finished_batch_and_claims_the_next(
    broker, spark, queue, clock, statement
):
    queue.send_batch(["a", "b", "c", "d"])
    first = exchange(queue, [], 2, 60)
    before = version(spark, queue)

    second = exchange(queue, first.claimed, 2, 60)

    assert version(spark, queue) == before + 1
    assert second.superseded == frozenset()
    assert {m.body for m in first.claimed + second.claimed} == {"a", "b", "c", "d"}
    left = queue_table(queue).where(to_column(is_message())).collect()
    assert {(r.message_id, r.receipt_handle) for r in left} == {
        (m.message_id, m.receipt_handle) for m in second.claimed
    }
    assert [m.receive_count for m in second.claimed] == [1, 1]
    tombstones = queue_table(queue).where(~to_column(is_message())).collect()
    retired = {(m.message_id, "", None) for m in first.claimed}  # in both forms: one rule
    assert {(r.message_id, r.body, r.receipt_handle) for r in tombstones} == retired
    assert queue.stats().in_flight == 2 and queue.stats().visible == 0
    clock.advance(601)  # past the tombstones' lifetime: the redrive job drops them
    broker.redrive()
    assert queue_table(queue).where(~to_column(is_message())).count() == 0


def test_a_superseded_handle_is_reported_and_the_rest_still_happens(queue, clock, statement):
    queue.send_batch(["a", "b"])
    held = exchange(queue, [], 2, 30).claimed
    clock.advance(31)  # both come back, and another receiver takes one of them again
    [again] = queue.receive(1, visibility_timeout=300)

    turn = exchange(queue, held, 5, 300)

    assert turn.superseded == {again.message_id}
    assert turn.claimed == []  # the other one was finished: retired, not claimed again
    left = queue_table(queue).where(to_column(is_message())).collect()
    assert [r.message_id for r in left] == [again.message_id]


def test_candidates_won_by_another_receiver_are_left_out(queue, monkeypatch, statement):
    """Another driver (on object storage nothing serialises the two) claims a candidate between
    this exchange's read and its commit: the commit skips it and the exchange returns the rest."""
    queue.send_batch(["a", "b", "c"])
    ctx, record = queue._ctx.quick, queue._ctx.record(queue.name)
    held = exchange(queue, [], 1, 300).claimed
    real = standard.candidates
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

    monkeypatch.setattr(standard, "candidates", raced)
    turn = exchange(queue, held, 10, 300)

    assert turn.superseded == frozenset()  # the finished message was deleted all the same
    assert len(turn.claimed) == 1 and turn.claimed[0].message_id != stolen[0]
    left = queue_table(queue).where(to_column(is_message())).collect()
    holders = {r.message_id: r.receipt_handle for r in left}
    assert holders == {
        stolen[0]: "theirs",
        turn.claimed[0].message_id: turn.claimed[0].receipt_handle,
    }
