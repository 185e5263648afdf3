"""A stream batch's claim on a standard queue: one UPDATE by id range per shard (engine/streams.py),
checked natively with no JVM. The source that uses it is tested in Spark in
tests/integration/test_datasource.py."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from sparkqueue import Broker
from sparkqueue.bench.stream_driver import clear_unlogged_first_batch
from sparkqueue.engine import streams
from sparkqueue.engine.messages import bulk
from sparkqueue.engine.messages.bulk import BatchClaim
from sparkqueue.engine.rounds import operations as rounds
from sparkqueue.errors import InvalidParameterValue
from sparkqueue.testing import FakeClock

ID = "01900000-0000-7000-8000-000000000000"


def _held(broker, record, claims) -> list[str]:
    tables = broker.context.native
    version = tables.open(record.location).version()
    shards = sorted({shard for claim in claims for shard in claim.shards})
    table = bulk.read_held(tables, record, claims, shards, version)
    return table.column("message_id").to_pylist()


def test_a_batch_claims_the_oldest_of_each_shard_it_takes_and_holds_them_for_its_timeout(
    broker, clock
):
    queue = broker.create_queue("work", shards=4)
    sent = queue.send_batch([f"m{i}" for i in range(40)])
    ctx, record = broker.context, broker.context.record("work")
    [claim] = streams.claim_batch(ctx, record, 25, 60)
    held = _held(broker, record, [claim])
    assert claim.count == len(held) == 25 and len(set(held)) == 25
    # each shard's claimed messages are its oldest: no unclaimed one older than a claimed one
    rest = queue.receive(10, visibility_timeout=0)
    for shard, _, highest in claim.bounds:
        assert all(m.message_id > highest for m in rest if m.receipt_handle.startswith(f"{shard}."))
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (15, 25)
    clock.advance(61)  # the timeout passed: the batch's messages come back, received once
    again = queue.receive(10_000)
    assert {m.message_id for m in again} == set(sent)
    assert {m.receive_count for m in again if m.message_id in held} == {2}
    assert _held(broker, record, [claim]) == []  # no longer the batch's


def test_finishing_a_batch_deletes_what_it_still_holds_and_nothing_else(broker, clock):
    queue = broker.create_queue("work", shards=2)
    queue.send_batch([f"m{i}" for i in range(10)])
    ctx, record = broker.context, broker.context.record("work")
    [lapsed] = streams.claim_batch(ctx, record, 6, 30)
    clock.advance(31)  # its timeout passed, and another receiver took every message
    others = queue.receive(10, visibility_timeout=30)
    assert len(others) == 10
    assert streams.finish(ctx, record, [lapsed]) == 0  # it holds none of them now
    assert not queue.delete_batch([m.receipt_handle for m in others[:4]]).failed
    clock.advance(31)
    [kept] = streams.claim_batch(ctx, record, 10, 30)
    assert kept.count == 6
    assert streams.finish(ctx, record, [kept]) == 6
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (0, 0)


def test_an_empty_queue_or_a_full_in_flight_limit_claims_no_batch(broker):
    queue = broker.create_queue("idle")
    ctx, record = broker.context, broker.context.record("idle")
    assert streams.claim_batch(ctx, record, 100, 30) == []
    queue.send("one")
    gauge = ctx.in_flight.of(record.location, fifo=False)
    granted = gauge.reserve(gauge.limit, lambda: 0)  # every in-flight place taken meanwhile
    try:
        assert streams.claim_batch(ctx, record, 100, 30) == []
    finally:
        gauge.settle(granted, 0)
    assert [c.count for c in streams.claim_batch(ctx, record, 100, 30)] == [1]


def test_batches_and_receives_on_threads_never_share_a_message_and_lose_none(broker):
    queue = broker.create_queue("shared", shards=3)
    sent = set(queue.send_batch([f"m{i}" for i in range(600)]))
    ctx, record = broker.context, broker.context.record("shared")
    taken: list[str] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def batches() -> None:
        try:
            while claims := streams.claim_batch(ctx, record, 70, 600):
                held = _held(broker, record, claims)
                assert len(held) == sum(c.count for c in claims)
                with lock:
                    taken.extend(held)
                streams.finish(ctx, record, claims)
        except BaseException as error:
            errors.append(error)

    def receives() -> None:
        try:
            while answer := rounds.settle_and_claim(ctx, record, [], 40, 600).claimed:
                with lock:
                    taken.extend(m.message_id for m in answer)
                queue.delete_batch([m.receipt_handle for m in answer])
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=t) for t in (batches, batches, receives)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert len(taken) == len(set(taken)) == len(sent)  # each message once, none lost
    assert set(taken) == sent
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (0, 0)


@pytest.mark.parametrize(
    "offset",
    [
        {"token": "0" * 32, "bounds": [], "count": 0},  # a batch of no shard
        {"token": "0' OR 1=1 --" + "0" * 20, "bounds": [[0, ID, ID]], "count": 1},
        {"token": "0" * 32, "bounds": [[0, ID + "'", ID]], "count": 1},
        {"token": "0" * 32, "bounds": [[0, ID]], "count": 1},
        {"token": "0" * 32, "bounds": [["zero", ID, ID]], "count": 1},
        {"bounds": [[0, ID, ID]], "count": 1},
        "not an offset",
    ],
)
def test_an_offset_is_read_back_only_as_the_stream_wrote_it(offset):
    with pytest.raises(InvalidParameterValue, match="not a sparkqueue stream offset"):
        BatchClaim.from_offset(offset)


def test_an_offset_the_stream_wrote_reads_back_the_same(broker):
    broker.create_queue("work").send_batch(["a", "b", "c"])
    [claim] = streams.claim_batch(broker.context, broker.context.record("work"), 2, 30)
    assert BatchClaim.from_offset(claim.to_offset()) == claim


def test_a_row_made_claimable_between_the_read_and_the_update_is_released_again(s3, monkeypatch):
    """On object storage no lock orders a claim's read and its UPDATE. Another broker, its clock
    behind, releases a message inside the claim's range meanwhile: the UPDATE takes it too, and
    the claim then releases it again as if never received, holding exactly what it read."""
    for name, value in s3.options.items():
        monkeypatch.setenv(name, value)
    root = f"{s3.new_bucket()}/queues"
    ahead, behind = FakeClock(), FakeClock(FakeClock()() - timedelta(minutes=5))
    claimer, other = Broker(None, root, clock=ahead), Broker(None, root, clock=behind)
    theirs = other.create_queue("work", shards=1)
    theirs.send_batch([f"m{i}" for i in range(10)])
    first, second, third = theirs.receive(3, visibility_timeout=600)  # in flight past `ahead`
    theirs.change_visibility(first.receipt_handle, 0)  # claimable again: the range spans all
    bounds_of = bulk._bounds

    def meanwhile(ids):
        theirs.change_visibility(second.receipt_handle, 0)  # visible at `behind`'s now
        return bounds_of(ids)

    ctx, record = claimer.context, claimer.context.record("work")
    with monkeypatch.context() as patched:
        patched.setattr(bulk, "_bounds", meanwhile)
        claim, _ = bulk.claim_oldest(ctx, record, 100, 30)
    held = set(_held(claimer, record, [claim]))
    assert claim.count == len(held) == 8  # read: 8 (the first and seven never received)
    assert second.message_id not in held and third.message_id not in held
    [again] = claimer.get_queue("work").receive(10)
    assert again.message_id == second.message_id and again.receive_count == 2  # one receive


def test_a_first_batch_killed_before_its_offsets_were_logged_leaves_a_checkpoint_to_start(tmp_path):
    """The streaming driver's restart clears the temp file of an offset Spark never renamed (Spark
    4 refuses such a checkpoint), and nothing once a batch was logged."""
    offsets = tmp_path / "fresh" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / ".0.5b2c.tmp").write_text("v1")
    (offsets / "..0.5b2c.tmp.crc").write_text("crc")
    clear_unlogged_first_batch(str(tmp_path / "fresh"))
    assert list(offsets.iterdir()) == []

    logged = tmp_path / "logged" / "offsets"
    logged.mkdir(parents=True)
    (logged / "0").write_text("v1")
    (logged / ".1.77aa.tmp").write_text("v1")
    clear_unlogged_first_batch(str(tmp_path / "logged"))
    assert sorted(path.name for path in logged.iterdir()) == [".1.77aa.tmp", "0"]
    clear_unlogged_first_batch(str(tmp_path / "none"))  # no checkpoint yet
