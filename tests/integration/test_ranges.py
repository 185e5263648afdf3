"""Bulk claims by range on standard queues: `receive_df` claims the oldest messages of the shards
it takes with one UPDATE, and `delete_df` of that very DataFrame deletes by the claim. On a
broker whose per-message engine is native the claim is delta-rs's (messages/bulk.py); on Spark's
it is staged first (frames/claim_df.py), and the tests of its stage and proof run there."""

from __future__ import annotations

import random
import threading
from collections import Counter
from contextlib import contextmanager
from datetime import timedelta

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from sparkqueue.engine.frames import claim_df, ranges
from sparkqueue.errors import QueueDoesNotExist, ReceiptHandleIsInvalid
from sparkqueue.model import BatchResult
from sparkqueue.store.storage import Storage
from sparkqueue.store.transactions import STALE_READ_MARKER
from tests.integration.conftest import both_engines

from .helpers import run_threads

on_spark = pytest.mark.parametrize("broker", ["spark"], indirect=True)  # the staged claim


def numbered(spark, count: int):
    return spark.range(count).select(F.col("id").cast("string").alias("body"))


@both_engines
def test_a_claim_takes_the_oldest_of_each_shard_and_fills_up_from_others(spark, broker):
    queue = broker.create_queue("ranged", shards=4)
    for start in range(0, 200, 50):  # four sends: ids rise from one send to the next
        queue.send_df(
            numbered(spark, 50).select((F.col("body") + start).cast("string").alias("body"))
        )
    claimed = queue.receive_df(150)
    rows = claimed.collect()
    assert len(rows) == 150 and claimed.count() == 150  # more than one shard holds: filled up
    location = broker.context.record("ranged").location
    claim = ranges.claim_of(broker.context.range_claims, claimed, location)
    assert claim is not None and claim.count == 150
    table = spark.read.format("delta").load(location)
    for shard, highest in claim.bounds:  # in each shard, every message up to its bound
        in_range = table.where((F.col("shard") == shard) & (F.col("message_id") <= highest))
        assert in_range.where(F.col("receipt_handle").isNull()).count() == 0
    assert queue.stats().in_flight == 150 and queue.stats().visible == 50

    result = queue.delete_df(claimed)
    assert sorted(result.successful) == sorted(row.receipt_handle for row in rows)
    assert not result.failed
    assert (queue.stats().in_flight, queue.stats().visible) == (0, 50)
    assert claimed.count() == 150  # still the same rows, read from the claim's stage
    queue.delete_df(queue.receive_df(50))
    nothing = queue.receive_df(10)
    assert nothing.count() == 0 and queue.delete_df(nothing) == BatchResult()


def test_a_partial_batch_goes_handle_by_handle_and_the_rest_by_the_claim(spark, broker):
    queue = broker.create_queue("partial", shards=2)
    queue.send_df(numbered(spark, 40))
    claimed = queue.receive_df(30)
    part = claimed.limit(10)
    assert (
        ranges.claim_of(
            broker.context.range_claims, part, broker.context.record("partial").location
        )
        is None
    )
    first = queue.delete_df(part)
    assert len(first.successful) == 10 and queue.stats().in_flight == 20
    rest = queue.delete_df(claimed)  # deleting again what is gone succeeds, as handle by handle
    assert len(rest.successful) == 30 and not rest.failed
    assert queue.stats().in_flight == 0 and queue.stats().visible == 10


def test_handles_received_again_fail_and_the_others_are_deleted(spark, broker, clock):
    queue = broker.create_queue("again", shards=1)
    queue.send_df(numbered(spark, 20))
    claimed = queue.receive_df(20, visibility_timeout=30)
    clock.advance(31)
    again = queue.receive(5)  # five of them, received again after the timeout
    result = queue.delete_df(claimed)
    lost = {row.receipt_handle for row in claimed.collect() if row.body in {m.body for m in again}}
    assert result.failed == {handle: ReceiptHandleIsInvalid.code for handle in lost}
    assert len(result.successful) == 15
    assert queue.stats().in_flight == 5  # the second receive's messages were kept
    for message in again:
        queue.delete(message.receipt_handle)
    assert queue.stats().visible == queue.stats().in_flight == 0


@on_spark
@pytest.mark.parametrize("release_conflicts", [False, True])
def test_a_claim_raced_by_other_drivers_returns_exactly_what_it_holds(
    spark, broker, clock, monkeypatch, release_conflicts
):
    """Between the read and the UPDATE another driver claims a staged row, and one whose clock
    runs behind makes an in-flight row of the range visible again (on object stores nothing
    stops either). The stage loses the first; the second, claimed beyond the stage, is released.
    When that release meets a commit conflict, the release is retried, never the claim that had
    committed (which used to leave its rows hidden under handles nobody held)."""
    queue = broker.create_queue("raced", shards=1)
    queue.send_df(numbered(spark, 10))
    storage = broker.context.storage
    location = broker.context.record("raced").location
    now = clock()
    oldest, second = [
        row.message_id
        for row in spark.read.format("delta").load(location).orderBy("message_id").take(2)
    ]

    def hold(message_id: str, handle: str, visible_at) -> None:
        storage.change(
            location,
            F.col("message_id") == message_id,
            ("shard", "message_id"),
            {"receipt_handle": F.lit(handle), "visible_at": F.lit(visible_at),
             "receive_count": F.lit(1)},
        )  # fmt: skip

    hold(oldest, "an earlier receive", now + timedelta(seconds=600))  # in flight: not staged
    bounds_of = ranges.bounds_of

    def meanwhile(observed, shards):
        hold(second, "someone else", now + timedelta(seconds=600))  # a staged row, taken
        hold(oldest, "an earlier receive", now)  # a lagging clock's change_visibility(0)
        return bounds_of(observed, shards)

    monkeypatch.setattr(ranges, "bounds_of", meanwhile)
    if release_conflicts:
        change, conflicts = storage.change, []

        def conflict_once(address, rows, key, values=None):
            releasing = values is not None and "NULL" in str(values["receipt_handle"])
            if address == location and releasing and not conflicts:
                conflicts.append(address)  # as if another commit came first: retried
                raise PySparkException(message=STALE_READ_MARKER)
            return change(address, rows, key, values)

        monkeypatch.setattr(storage, "change", conflict_once)
    claimed = queue.receive_df(10)
    monkeypatch.undo()
    got = {row.message_id for row in claimed.collect()}
    assert len(got) == 8 and not got & {oldest, second}  # 9 staged, one taken first
    released = spark.read.format("delta").load(location).where(F.col("message_id") == oldest)
    row = released.first()
    assert row.receipt_handle is None
    assert row.receive_count == 1  # as before this claim
    assert queue.stats().in_flight == 9  # our 8 and the one someone else took
    assert len(queue.delete_df(claimed).successful) == 8
    assert [m.message_id for m in queue.receive(10)] == [oldest]


@both_engines
def test_concurrent_bulk_claims_never_share_a_message(spark, broker):
    queue = broker.create_queue("shared", shards=2)
    queue.send_df(numbered(spark, 150))
    seen: list[str] = []

    def drain() -> None:
        while True:
            batch = queue.receive_df(40, visibility_timeout=3_600)
            bodies = [row.body for row in batch.collect()]
            if not bodies:
                return
            seen.extend(bodies)
            assert len(queue.delete_df(batch).successful) == len(bodies)

    run_threads([drain, drain, drain])
    counts = Counter(seen)
    assert len(counts) == 150 and max(counts.values()) == 1
    assert queue.stats().visible == queue.stats().in_flight == 0


@contextmanager
def at_the_turn(monkeypatch, queue, frames: list):
    """A `receive_df(10)` of `queue` (in a thread; its DataFrame into `frames`) held after its
    stage, just before it takes the queue's turn for its UPDATE, for the block's duration."""
    reached, go = threading.Event(), threading.Event()
    turn = Storage.turn

    @contextmanager
    def waiting_turn(self, address):
        reached.set()
        assert go.wait(60)
        with turn(self, address):
            yield

    monkeypatch.setattr(Storage, "turn", waiting_turn)
    failures: list = []

    def receive() -> None:
        try:
            frames.append(queue.receive_df(10))
        except Exception as error:
            failures.append(error)

    receiving = threading.Thread(target=receive)
    receiving.start()
    try:
        while not reached.wait(0.1):  # staged, and holding no turn on the queue
            assert receiving.is_alive(), failures
        yield failures
    finally:
        go.set()
        receiving.join(120)
    assert not receiving.is_alive()


def reconciles(monkeypatch) -> list:
    """The claims whose count did not prove them and were reconciled, from now on."""
    calls: list = []
    reconcile = ranges.reconcile

    def counted(*args, **kwargs):
        calls.append(args)
        return reconcile(*args, **kwargs)

    monkeypatch.setattr(ranges, "reconcile", counted)
    return calls


@on_spark
def test_a_native_receive_commits_between_a_stage_and_its_claim_and_takes_staged_rows(
    spark, broker, monkeypatch
):
    """On a local root a claim takes the queue's turn for its UPDATE only: after its stage of
    10 of 11 messages, a native receive commits and takes 10 of them, so at least 9 staged ones;
    the claim's count then falls short, its stage is trimmed to what the UPDATE took, and no
    message is held twice."""
    queue = broker.create_queue("staging", shards=1)
    queue.send_batch([f"m{i}" for i in range(12)])
    queue.delete_df(queue.receive_df(1))  # the claims table exists: this test's receive stages
    reconciled = reconciles(monkeypatch)
    frames: list = []
    with at_the_turn(monkeypatch, queue, frames) as failures:
        natively = queue.receive(10)
    assert not failures
    staged = {row.message_id for row in frames[0].collect()}
    assert len(natively) == 10 and len(staged) <= 1 and len(reconciled) == 1
    assert staged.isdisjoint(m.message_id for m in natively)
    assert queue.stats().in_flight == 10 + len(staged)


@on_spark
def test_a_commit_in_other_shards_meanwhile_leaves_the_claims_count_its_proof(
    spark, broker, monkeypatch
):
    """A commit between a claim's read and its UPDATE that changed no file of the claim's
    shards (here a delete in shard 1 while the claim takes shard 0) leaves the UPDATE's count a
    proof: no reconciling."""
    queue = broker.create_queue("apart", shards=2)
    queue.send_batch([f"m{i}" for i in range(1_000)])  # spread over both shards
    monkeypatch.setattr(random, "randrange", lambda _: 1)  # a receive starts at that shard
    [in_shard_1] = queue.receive(1)
    monkeypatch.setattr(random, "randrange", lambda _: 0)
    reconciled = reconciles(monkeypatch)
    frames: list = []
    with at_the_turn(monkeypatch, queue, frames) as failures:
        queue.delete(in_shard_1.receipt_handle)
    assert not failures
    staged = frames[0].collect()
    assert len(staged) == 10 and {row.receipt_handle[:2] for row in staged} == {"0."}
    assert not reconciled
    assert queue.delete_df(frames[0]).successful == [row.receipt_handle for row in staged]


@on_spark
def test_a_commit_in_the_claims_shard_meanwhile_voids_the_proof_though_the_count_matches(
    spark, broker, monkeypatch
):
    """A send into the claim's own shard between its read and its UPDATE takes none of the
    claim's rows (its ids are newer than the range), so the count matches; the log shows a
    commit in that shard all the same, and the claim is reconciled, which keeps every row."""
    queue = broker.create_queue("near", shards=2)
    monkeypatch.setattr(random, "randrange", lambda _: 0)  # sends and claims: shard 0 first
    queue.send_batch([f"m{i}" for i in range(20)])
    reconciled = reconciles(monkeypatch)
    frames: list = []
    with at_the_turn(monkeypatch, queue, frames) as failures:
        queue.send("newer")
    assert not failures and len(reconciled) == 1
    staged = frames[0].collect()
    assert len(staged) == 10 and "newer" not in {row.body for row in staged}
    assert queue.stats().in_flight == 10 and queue.stats().visible == 11


@on_spark
def test_a_queue_deleted_while_a_claim_stages_is_gone_for_the_claim(spark, broker, monkeypatch):
    queue = broker.create_queue("going", shards=1)
    queue.send_batch([f"m{i}" for i in range(20)])
    frames: list = []
    with at_the_turn(monkeypatch, queue, frames) as failures:
        broker.delete_queue("going")
    assert not frames and [type(error) for error in failures] == [QueueDoesNotExist]


def test_a_native_claim_whose_stage_fails_lets_its_messages_go_at_once(spark, broker, monkeypatch):
    """The native engine claims, then stages what it claimed: when the stage fails the claim's
    messages are released at once, as if never received, rather than hidden for a timeout."""
    queue = broker.create_queue("failing", shards=1)
    queue.send_batch(["a", "b", "c"])

    def disk_full(held, token):
        raise OSError("no space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(claim_df, "_staged", disk_full)
        with pytest.raises(Exception, match="no space left on device"):  # as delta-rs passes it on
            queue.receive_df(2, visibility_timeout=600)
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (3, 0)
    assert sorted(m.receive_count for m in queue.receive(10)) == [1, 1, 1]
