"""The redrive pass through the native engine (a broker without Spark): what only it does, with
no JVM. The semantics it shares with Spark's pass run on both in tests/integration/test_redrive.py.
"""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path

import pytest
from deltalake.exceptions import CommitFailedError

from sparkqueue import Broker
from sparkqueue.engine import lifecycle
from sparkqueue.engine.moves import steps
from sparkqueue.limits import TOMBSTONE_LIFETIME
from sparkqueue.services.redrive import PassFailed, Redrive, run_schedule
from sparkqueue.services.settings import RedriveSettings, UpkeepSettings
from sparkqueue.store.transactions import RetryPolicy


def rows_of(broker, name: str, columns=("message_id",)) -> list:
    ctx = broker.context
    return ctx.native.select(ctx.record(name).location, list(columns))


def test_a_poison_head_reaches_the_fifo_dead_letter_queue_and_frees_its_group(broker, clock):
    dead = broker.create_queue("jobs-dlq.fifo", fifo=True)
    jobs = broker.create_queue(
        "jobs.fifo", fifo=True, dead_letter_queue="jobs-dlq.fifo", max_receive_count=1
    )
    jobs.send_batch(
        [{"body": f"a{i}", "group_id": "a", "deduplication_id": f"a{i}"} for i in range(3)]
    )
    [head] = jobs.receive(1, visibility_timeout=30)
    clock.advance(31)
    assert jobs.receive(10) == []  # its head waits for the dead-letter queue: the group is held

    report = broker.redrive()

    assert report.queues["jobs.fifo"].moved_to_dead_letter == 1
    [moved] = dead.receive(10)
    assert (moved.body, moved.message_id) == (head.body, head.message_id)
    assert [m.body for m in jobs.receive(10)] == ["a1", "a2"]  # the group goes on, in order
    passes = broker.context.native.select(broker.context.native.layout.metrics, ["queue"])
    assert sorted(row.queue for row in passes) == ["jobs-dlq.fifo", "jobs.fifo"]


def test_a_pass_drops_fifo_duplicates_and_spent_tombstones(broker, clock):
    queue = broker.create_queue("once.fifo", fifo=True)
    first = queue.send("x", group_id="g", deduplication_id="d")
    assert queue.send("x again", group_id="g", deduplication_id="d") == first
    assert len(rows_of(broker, "once.fifo")) == 2  # the duplicate's row, never delivered
    broker.redrive()
    assert [row.message_id for row in rows_of(broker, "once.fifo")] == [first]

    [message] = queue.receive(1)
    queue.delete(message.receipt_handle)  # a FIFO delete leaves a tombstone for deduplication
    assert len(rows_of(broker, "once.fifo")) == 1
    broker.redrive()
    assert len(rows_of(broker, "once.fifo")) == 1  # still deduplicating
    clock.advance(TOMBSTONE_LIFETIME.total_seconds() + 1)
    broker.redrive()
    assert rows_of(broker, "once.fifo") == []


def test_a_pass_trims_the_log_of_a_local_table(broker, clock):
    """Without Spark there is no compaction, but the `_delta_log` of a local table is trimmed
    on every pass as Spark's pass does (each entry slows every later operation)."""
    queue = broker.create_queue("busy")
    for i in range(45):  # past two checkpoints (every 20 commits)
        queue.send(f"m{i}")
    log = Path(broker.context.record("busy").location.removeprefix("file:")) / "_delta_log"
    day_ago = time.time() - 86_400
    for entry in log.iterdir():
        os.utime(entry, (day_ago, day_ago))
    before = len(list(log.iterdir()))
    settings = RedriveSettings(defaults=UpkeepSettings(local_log_minutes=1))

    Redrive(broker.context, settings).run(["busy"])

    after = sorted(entry.name for entry in log.iterdir())
    assert len(after) < before - 30, after
    assert queue.stats().visible == 45  # the table reads the same from its checkpoint on


def test_a_pass_skips_a_queue_registered_without_its_table(broker, monkeypatch):
    """A pass that comes between create_queue's two commits (registered, no table yet: the
    endpoint's passes run every few seconds beside its clients) skips that queue and does the
    others."""
    broker.create_queue("ready").send("x")
    with monkeypatch.context() as patch:
        patch.setattr(lifecycle, "ensure_table", lambda ctx, record: throw(Crash()))
        with pytest.raises(Crash):
            broker.create_queue("half")
    assert sorted(broker.redrive().queues) == ["ready"]
    broker.create_queue("half")  # finishes the creation
    assert sorted(broker.redrive().queues) == ["half", "ready"]


class Crash(Exception):
    pass


def throw(error: Exception):
    raise error


def test_a_mark_retried_after_a_conflict_never_reuses_a_finished_marker(broker, clock, monkeypatch):
    """A move back to several origins marks each in its own commit. When a later one conflicts
    and the whole marking runs again, another pass may already have finished the first marker
    (copied under it as app id, dropped): rows marked again under that marker would find their
    copy "done" and be dropped, lost. Each commit gets a marker of its own."""
    broker.create_queue("dlq")
    for name in ("a", "b"):
        broker.create_queue(name, dead_letter_queue="dlq", max_receive_count=1)
    queues = {name: broker.get_queue(name) for name in ("a", "b")}
    sent = queues["a"].send_batch(["a1", "a2"]) + queues["b"].send_batch(["b1"])
    for queue in queues.values():
        queue.receive(10, visibility_timeout=5)
    clock.advance(6)
    broker.redrive()  # all three in the dead-letter queue
    sent += queues["a"].send_batch(["a3"])
    queues["a"].receive(1, visibility_timeout=5)
    clock.advance(6)  # a3 is due for the dead-letter queue too

    # Another broker's pass, as another process's would be, runs while the marking waits to
    # retry (outside its transaction, as another process's would).
    other = Broker(None, broker.root, clock=clock)
    native = broker.context.native
    real_change, real_delay = native.change, RetryPolicy.delay
    calls: list[int] = []

    def change(address, rows, values=None, **options):
        calls.append(1)
        if len(calls) == 2:  # between the marks of "a" and of "b"
            raise CommitFailedError("a concurrent transaction deleted data this operation read")
        return real_change(address, rows, values, **options)

    def delay(policy, attempt):
        if len(calls) == 2:
            calls.append(1)
            other.redrive(["a", "dlq"])  # a3 arrives; the mark of "a" is finished elsewhere
        return real_delay(policy, attempt)

    monkeypatch.setattr(native, "change", change)
    monkeypatch.setattr(RetryPolicy, "delay", delay)
    broker.get_queue("dlq").start_message_move()
    monkeypatch.undo()

    back = [m for queue in queues.values() for m in queue.receive(10, visibility_timeout=60)]
    assert sorted(m.message_id for m in back) == sorted(sent)  # each once, a3 not lost
    assert rows_of(broker, "dlq") == []


def test_a_native_move_goes_in_chunks(broker, clock, monkeypatch):
    """A thousand rows at a time (four here), each chunk its own three steps; a message sent to
    the dead-letter queue itself has no queue to go back to, and stays, without ending the
    move of the others."""
    monkeypatch.setattr(steps.RowMoves, "chunk", 4)
    dead = broker.create_queue("many-dlq")
    source = broker.create_queue("many", dead_letter_queue="many-dlq", max_receive_count=1)
    dead.send_batch([f"stray{i}" for i in range(5)])  # sent there directly: no origin
    source.send_batch([f"m{i}" for i in range(10)])
    while source.receive(10, visibility_timeout=5):
        pass
    clock.advance(6)
    assert broker.redrive().moved_to_dead_letter == 10
    copies: list[int] = []
    real_append = broker.context.native.append_rows

    def append_rows(address, columns, rows, what, **options):
        copies.append(len(rows))
        real_append(address, columns, rows, what, **options)

    monkeypatch.setattr(broker.context.native, "append_rows", append_rows)
    assert dead.start_message_move() == 10
    assert sorted(copies) == [2, 4, 4]
    assert source.stats().visible == 10 and dead.stats().visible == 5


def test_a_native_pass_keeps_the_tables_up_on_their_cadence(broker, clock):
    """Without Spark the pass still tidies on the upkeep cadence, as Spark's does: retention
    settings, compaction of each shard's small files, and a VACUUM that lists the whole folder
    (so a file no version uses, left by a rewrite that lost a conflict, goes too). The cadence
    survives a new pass object: it reads the metrics."""
    queue = broker.create_queue("small-files", shards=1)
    for i in range(6):
        queue.send(f"m{i}")  # one file each
    location = broker.context.record("small-files").location
    folder = Path(location.removeprefix("file:"))
    orphan = folder / "shard=0" / "part-00000-lost-to-a-conflict.parquet"
    orphan.write_bytes(b"never committed")
    two_hours_ago = time.time() - 7_200
    os.utime(orphan, (two_hours_ago, two_hours_ago))
    settings = RedriveSettings(
        defaults=UpkeepSettings(
            upkeep_every_seconds=600, file_retention_hours=1, log_retention_hours=48
        )
    )
    first = Redrive(broker.context, settings).run(["small-files"]).queues["small-files"]
    clock.advance(601)
    second = Redrive(broker.context, settings).run(["small-files"]).queues["small-files"]
    assert (first.upkeep, second.upkeep) == (False, True)
    assert broker.context.native.footprint(location)[0] == 1
    assert not orphan.exists()
    properties = broker.context.native.properties(location)
    assert properties["delta.logRetentionDuration"] == "interval 48 hours"
    assert queue.stats().visible == 6


def test_native_compaction_keeps_files_small(broker):
    """Every claim rewrites the file holding its row, so compaction makes files of about a
    MiB, as Spark's does (delta-rs's own default is 100 MB)."""
    queue = broker.create_queue("big-bodies", shards=1)
    for _ in range(3):  # three files of ~400 KB that do not compress
        queue.send_batch([base64.b64encode(os.urandom(150_000)).decode() for _ in range(2)])
    location = broker.context.record("big-bodies").location
    broker.context.native.optimize(location, 0)
    assert broker.context.native.footprint(location)[0] >= 2
    assert queue.stats().visible == 6


def test_an_idempotent_append_loses_to_a_concurrent_one_of_its_app_id(tmp_path):
    """Two finishers of one move copy under the same app id from the same snapshot: delta-rs's
    conflict check rejects the second, however many commits it would retry across."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from sparkqueue.store.native_commits import applied, applying

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"a": [0]}))
    stale, fresh = DeltaTable(path), DeltaTable(path)
    write_deltalake(path, pa.table({"a": [9]}), mode="append")  # an unrelated commit between
    fresh_commit, stale_commit = applying("mark-1", "m"), applying("mark-2", "m")
    write_deltalake(fresh, pa.table({"a": [1]}), mode="append", commit_properties=fresh_commit)
    with pytest.raises(CommitFailedError):
        write_deltalake(stale, pa.table({"a": [1]}), mode="append", commit_properties=stale_commit)
    assert applied(DeltaTable(path), "m")
    assert sorted(DeltaTable(path).to_pyarrow_table()["a"].to_pylist()) == [0, 1, 9]


def test_a_queue_whose_pass_fails_stops_no_other(broker, clock):
    """A queue the pass cannot read (a data file gone from under its table) is reported and
    tried again next pass; the queues after it still get their releases."""
    broker.create_queue("a-broken").send("lost file")
    later = broker.create_queue("b-fine")
    later.send("held")
    later.receive(1, visibility_timeout=5)
    clock.advance(6)
    folder = Path(broker.context.record("a-broken").location.removeprefix("file:"))
    for data in folder.rglob("*.parquet"):
        data.unlink()

    report = broker.redrive()

    assert list(report.failed) == ["a-broken"] and "a-broken" not in report.queues
    assert report.queues["b-fine"].released == 1
    assert later.receive(1)  # released by this pass
    with pytest.raises(PassFailed, match="a-broken"):  # the job's --once exits with an error
        run_schedule(broker.context, RedriveSettings(), once=True)


def test_a_dead_letter_queue_whose_table_is_gone_gives_the_messages_back(broker, clock):
    """A dead-letter queue deleted (or its deletion killed) between dropping its table and
    leaving the registry: the source's pass still runs, and its exhausted messages stay in it."""
    broker.create_queue("gone-dlq")
    work = broker.create_queue("work", dead_letter_queue="gone-dlq", max_receive_count=1)
    sent = work.send("poison")
    work.receive(1, visibility_timeout=5)
    clock.advance(6)
    ctx = broker.context
    ctx.tables.drop_table(ctx.record("gone-dlq").location)  # still registered
    report = broker.redrive()
    assert report.failed == {} and report.queues["work"].moved_to_dead_letter == 0
    assert work.stats().awaiting_dead_letter == 1  # not lost, not marked for good
    broker.delete_queue("gone-dlq")  # the deletion finished; the queue gets a new policy
    work.set_attributes(dead_letter_queue=None, max_receive_count=None)
    assert [m.message_id for m in work.receive(1)] == [sent]
