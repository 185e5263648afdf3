"""Commits whose answer object storage lost: the store kept the log version, the caller heard 500.

moto's S3 server (tests/moto_s3.py) stores the put, then answers 500 as a broken connection
would. object_store retries the put, finds the version taken (412), and delta-rs reports a
conflict with what is really its own commit. Each operation must then tell its caller what
happened once, and never do it a second time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sparkqueue import Broker
from sparkqueue.engine import streams
from sparkqueue.engine.rounds import operations as rounds
from sparkqueue.rules import handles
from sparkqueue.rules.expr import col, lit
from sparkqueue.store.schema import CLAIMS_COLUMNS, CLAIMS_PARTITIONING


@pytest.fixture
def broker(s3, monkeypatch) -> Broker:
    for name, value in s3.options.items():
        monkeypatch.setenv(name, value)
    return Broker(None, f"{s3.new_bucket()}/queues")


def _lost(s3, count: int = 1) -> int:
    """Loses the answers of the next `count` log puts; how many puts were journaled before."""
    s3.lose_answers(count, "")
    return len(s3.log_puts())


def _losses_since(s3, mark: int) -> int:
    return sum(put["lost"] for put in s3.log_puts()[mark:])


def test_a_fifo_send_whose_answer_was_lost_returns_its_message_sent_once(s3, broker):
    queue = broker.create_queue("orders.fifo", fifo=True)
    mark = _lost(s3)
    message_id = queue.send("one", group_id="g", deduplication_id="d-1")
    assert _losses_since(s3, mark) == 1  # the send's commit really lost its answer
    # the caller's retry after the answer is deduplicated: still one message
    assert queue.send("one", group_id="g", deduplication_id="d-1") == message_id
    [message] = queue.receive(10)
    assert (message.message_id, message.body) == (message_id, "one")
    queue.delete(message.receipt_handle)
    assert queue.receive(10) == []


def test_a_receive_whose_answer_was_lost_hands_out_what_it_claimed_and_no_more(s3, broker):
    queue = broker.create_queue("work")
    sent = set(queue.send_batch(["a", "b", "c"]))
    mark = _lost(s3)
    [first] = queue.receive(1)
    assert _losses_since(s3, mark) == 1
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (2, 1)  # nothing else held under lost handles
    rest = queue.receive(10)
    assert {m.message_id for m in rest} == sent - {first.message_id}
    assert {m.receive_count for m in [first, *rest]} == {1}
    for message in [first, *rest]:  # every handle handed out is the one its row holds
        queue.delete(message.receipt_handle)
    assert queue.stats().in_flight == 0


def test_a_shared_round_whose_answer_was_lost_tells_each_ask_its_own_outcome(s3, broker):
    queue = broker.create_queue("exchange")
    sent = set(queue.send_batch([f"m{i}" for i in range(6)]))
    ctx, record = broker.context, broker.context.record("exchange")
    first = rounds.settle_and_claim(ctx, record, [], 2, 600)
    refs = [handles.parse(record.secret, m.receipt_handle) for m in first.claimed]
    mark = _lost(s3)
    second = rounds.settle_and_claim(ctx, record, refs, 2, 600)  # retire two, claim two
    assert _losses_since(s3, mark) == 1
    assert len(second.claimed) == 2 and not second.superseded
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (2, 2)  # the first two deleted, two held
    rest = queue.receive(10)
    taken = [*first.claimed, *second.claimed, *rest]
    assert sorted(m.message_id for m in taken) == sorted(sent)
    assert not queue.delete_batch([m.receipt_handle for m in [*second.claimed, *rest]]).failed


def test_a_stream_batch_whose_claim_lost_its_answer_holds_what_it_claimed_once(s3, broker):
    queue = broker.create_queue("stream")
    sent = set(queue.send_batch([f"m{i}" for i in range(5)]))
    ctx, record = broker.context, broker.context.record("stream")
    mark = _lost(s3)
    [claim] = streams.claim_batch(ctx, record, 3, 600)
    assert _losses_since(s3, mark) == 1
    assert claim.count == 3
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (2, 3)  # no second claim beside the first
    assert streams.finish(ctx, record, [claim]) == 3
    rest = queue.receive(10)
    assert len(rest) == 2 and {m.message_id for m in rest} < sent


def test_a_stage_append_whose_answer_was_lost_is_written_once(s3, broker):
    """A native receive_df stages its claim with one delta-rs append: when the store kept the
    append but its answer was lost, the DataFrame still shows each claimed row once."""
    broker.create_queue("work")
    tables, record = broker.context.native, broker.context.record("work")
    stage = tables.layout.claims(record.location)
    tables.ensure_table(stage, CLAIMS_COLUMNS, partition_by=CLAIMS_PARTITIONING)
    token, now = handles.new_token(), datetime.now(UTC)
    row = {
        "shard": 0, "message_id": "m-1", "body": "b", "sent_at": now, "visible_at": now,
        "receive_count": 1, "expected_count": 0, "claim_id": token,
    }  # fmt: skip
    mark = _lost(s3)
    tables.append_rows(stage, CLAIMS_COLUMNS, [row], f"staging a claim on {record.name!r}")
    assert _losses_since(s3, mark) == 1
    assert len(tables.select(stage, ["message_id"], col("claim_id") == lit(token))) == 1
