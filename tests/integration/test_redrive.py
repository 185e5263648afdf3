"""The redrive job: dead-letter moves, releases, retention, move-back, crash safety, upkeep, metrics.

The semantics run on both of the job's engines (`both_passes`): Spark's, for a broker with a
session, and the native engine's, for a broker without one (no upkeep there: Spark's alone)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from sparkqueue import Broker, RedriveReport
from sparkqueue.engine.moves.choice import movers
from sparkqueue.errors import (
    InvalidParameterValue,
    QueueDoesNotExist,
    ReceiptHandleIsInvalid,
)
from sparkqueue.services.redrive import Redrive
from sparkqueue.services.settings import RedriveSettings, UpkeepSettings
from tests.crashes import Crash, crash_at

MAX_RECEIVES = 1  # one receive exhausts a message, which keeps the tests short


@pytest.fixture
def broker(request, spark, tmp_path, clock) -> Broker:
    """A broker whose redrive pass runs on Spark (a session given) or, as `both_passes` asks,
    through the native engine (no session)."""
    session = None if getattr(request, "param", "spark") == "native" else spark
    return Broker(session, str(tmp_path / "root"), clock=clock)


both_passes = pytest.mark.parametrize("broker", ["spark", "native"], indirect=True)


@pytest.fixture
def dlq(broker: Broker):
    return broker.create_queue("work-dlq")


@pytest.fixture
def work(broker: Broker, dlq):
    return broker.create_queue("work", dead_letter_queue="work-dlq", max_receive_count=MAX_RECEIVES)


def exhaust(queue, clock, count: int) -> list[str]:
    """Receives every message MAX_RECEIVES times and lets each receive time out."""
    ids: set[str] = set()
    for _ in range(MAX_RECEIVES):
        ids |= {m.message_id for m in queue.receive(count)}
        clock.advance(31)
    assert queue.receive(10) == []  # held back for the redrive job
    return sorted(ids)


def ids_in(queue) -> list[str]:
    """Every message id in the queue's table, whatever its state (read natively)."""
    ctx = queue._ctx
    rows = ctx.tables.select(ctx.record(queue.name).location, ["message_id"])
    return sorted(row.message_id for row in rows)


@both_passes
def test_exhausted_messages_move_to_the_dead_letter_queue(broker, dlq, clock):
    work = broker.create_queue("work", dead_letter_queue="work-dlq", max_receive_count=2)
    work.send_batch(
        [{"body": "poison", "attributes": {"k": "v"}}, {"body": "also poison"}, {"body": "fine"}]
    )
    fine = next(m for m in work.receive(3) if m.body == "fine")
    work.change_visibility(fine.receipt_handle, 3600)
    clock.advance(31)
    exhausted = sorted(m.message_id for m in work.receive(3))
    assert len(exhausted) == 2
    clock.advance(31)
    assert work.stats().awaiting_dead_letter == 2

    report = broker.redrive()

    assert isinstance(report, RedriveReport)
    assert report.queues["work"].moved_to_dead_letter == 2 == report.moved_to_dead_letter
    assert ids_in(dlq) == exhausted
    moved = {m.message_id: m for m in dlq.receive(10)}  # visible there at once
    assert sorted(moved) == exhausted
    assert {m.body: m.attributes for m in moved.values()} == {
        "poison": {"k": "v"},
        "also poison": {},
    }
    assert all(m.receive_count == 1 for m in moved.values())
    assert work.stats().awaiting_dead_letter == 0
    work.delete(fine.receipt_handle)  # a held message was left alone


@both_passes
def test_expired_receives_are_released_and_their_handles_rejected(broker, clock):
    queue = broker.create_queue("plain")
    queue.send_batch(["expired", "held"])
    first = {m.body: m for m in queue.receive(2)}
    queue.change_visibility(first["held"].receipt_handle, 600)
    clock.advance(31)

    report = broker.redrive()

    assert (report.released, report.moved_to_dead_letter) == (1, 0)
    with pytest.raises(ReceiptHandleIsInvalid):
        queue.delete(first["expired"].receipt_handle)
    with pytest.raises(ReceiptHandleIsInvalid):
        queue.change_visibility(first["expired"].receipt_handle, 10)
    [again] = queue.receive(10)
    assert (again.body, again.receive_count) == ("expired", 2)
    queue.delete(first["held"].receipt_handle)


@both_passes
def test_messages_past_retention_are_removed(broker, clock):
    queue = broker.create_queue("short", retention_seconds=60)
    queue.send("old")
    clock.advance(30)
    queue.send("young")
    clock.advance(31)
    assert broker.redrive().expired_by_retention == 1
    assert [m.body for m in queue.receive(10)] == ["young"]


@both_passes
def test_a_message_held_by_a_consumer_is_never_moved(broker, dlq, clock):
    queue = broker.create_queue("once", dead_letter_queue="work-dlq", max_receive_count=1)
    queue.send("slow")
    [held] = queue.receive()
    assert broker.redrive(["once"]).moved_to_dead_letter == 0
    queue.change_visibility(held.receipt_handle, 60)  # still ours
    clock.advance(61)
    assert broker.redrive(["once"]).moved_to_dead_letter == 1
    queue.delete(held.receipt_handle)  # gone from this queue: a no-op, as for any deleted message
    assert [m.body for m in dlq.receive(10)] == ["slow"]


@both_passes
def test_two_passes_in_a_row_equal_one(broker, work, dlq, clock):
    work.send_batch(["a", "b", "c"])
    exhausted = exhaust(work, clock, 3)
    work.send("d")
    first = broker.redrive()
    second = broker.redrive()
    assert first.moved_to_dead_letter == 3
    assert (second.moved_to_dead_letter, second.released, second.expired_by_retention) == (0, 0, 0)
    assert ids_in(dlq) == exhausted
    assert len(ids_in(work)) == 1


# Every crash point on the native pass; on Spark's, the two after which its own statements
# resume (its marking is a MERGE of its own, its copy the same step as the native engine's drop
# follows): a Spark pass costs 10-30 s here.
@pytest.mark.parametrize(
    ("broker", "step"),
    [("native", "marked"), ("native", "copied"), ("native", "dropped"), ("spark", "marked"),
     ("spark", "copied")],
    indirect=["broker"],
)  # fmt: skip
def test_a_crash_between_commits_leaves_every_message_exactly_once(broker, work, dlq, clock, step):
    work.send_batch([f"m{i}" for i in range(4)])
    exhausted = exhaust(work, clock, 4)

    with pytest.raises(Crash):
        Redrive(broker.context, on_step=crash_at(step)).run()
    assert work.receive(10) == []  # mid-move messages are never delivered from the source
    in_dlq = ids_in(dlq)
    assert set(in_dlq) | set(ids_in(work)) == set(exhausted)

    assert broker.redrive().moved_to_dead_letter == (0 if step == "dropped" else 4)
    assert ids_in(dlq) == exhausted
    assert ids_in(work) == []


@both_passes
def test_a_copy_consumed_before_recovery_is_not_resurrected(broker, work, dlq, clock):
    work.send("poison")
    exhaust(work, clock, 1)
    with pytest.raises(Crash):
        Redrive(broker.context, on_step=crash_at("copied")).run()
    [copy] = dlq.receive()
    dlq.delete(copy.receipt_handle)
    broker.redrive()
    assert ids_in(dlq) == ids_in(work) == []


@both_passes
def test_start_message_move_returns_messages_to_their_source(broker, work, dlq, clock):
    other = broker.create_queue("other", dead_letter_queue="work-dlq", max_receive_count=1)
    work.send_batch(["w1", "w2"])
    other.send("o1")
    exhaust(work, clock, 2)
    other.receive()
    clock.advance(31)
    broker.redrive()
    held = dlq.receive(1)[0]  # held by a consumer: stays

    assert dlq.start_message_move() == 2
    assert sorted(m.body for m in work.receive(10) + other.receive(10)) == sorted(
        {"w1", "w2", "o1"} - {held.body}
    )
    dlq.delete(held.receipt_handle)


@both_passes
def test_start_message_move_to_a_destination_with_a_limit(broker, dlq, clock):
    target = broker.create_queue("replay")
    dlq.send_batch([f"d{i}" for i in range(5)])
    assert dlq.start_message_move("replay", max_messages=3) == 3
    assert dlq.start_message_move(destination="replay") == 2
    assert sorted(m.body for m in target.receive(10)) == [f"d{i}" for i in range(5)]
    assert dlq.start_message_move("replay") == 0


@pytest.mark.parametrize(
    ("broker", "step"),
    [("native", "marked"), ("native", "copied"), ("spark", "copied")],
    indirect=["broker"],
)
def test_start_message_move_is_crash_safe(broker, dlq, clock, step):
    target = broker.create_queue("replay")
    dlq.send_batch(["x", "y"])
    with pytest.raises(Crash):
        movers(broker.context, crash_at(step)).move_back(
            broker.context.record(dlq.name), "replay", clock(), None
        )
    assert dlq.receive(10) == []  # being moved: hidden
    broker.redrive()  # finishes the interrupted move
    assert sorted(m.body for m in target.receive(10)) == ["x", "y"]
    assert ids_in(dlq) == []


@both_passes
def test_start_message_move_rejects_bad_destinations(broker, dlq):
    broker.create_queue("jobs.fifo", fifo=True)
    cases = [
        ("work-dlq", InvalidParameterValue, "itself"),
        ("missing", QueueDoesNotExist, "missing"),
        ("jobs.fifo", InvalidParameterValue, "same type"),
        ("bad name!", InvalidParameterValue, "invalid queue name"),
    ]
    for destination, error, text in cases:
        with pytest.raises(error, match=text):
            dlq.start_message_move(destination)
    with pytest.raises(InvalidParameterValue):
        dlq.start_message_move(max_messages=0)


@both_passes
def test_redrive_rejects_unknown_queues(broker, work):
    with pytest.raises(QueueDoesNotExist, match="nope"):
        broker.redrive(["work", "nope"])
    with pytest.raises(InvalidParameterValue):
        broker.redrive("work")


def test_each_pass_records_metrics_and_upkeep_runs_on_its_cadence(broker, clock, spark):
    settings = RedriveSettings(
        defaults=UpkeepSettings(upkeep_every_seconds=600, log_retention_hours=36)
    )
    work = broker.create_queue("plain")
    work.send_batch(["a", "b"])
    work.receive(1)
    redrive = Redrive(broker.context, settings)
    assert not redrive.run(["plain"]).queues["plain"].upkeep  # the first pass starts the cadence
    clock.advance(601)
    assert redrive.run(["plain"]).queues["plain"].upkeep
    assert not redrive.run(["plain"]).queues["plain"].upkeep

    metrics = spark.read.format("delta").load(redrive.metrics_table).orderBy("pass_at")
    rows = metrics.collect()
    assert [(r.queue, r.visible, r.in_flight, r.released, r.upkeep) for r in rows] == [
        ("plain", 1, 1, 0, False),
        ("plain", 2, 0, 1, True),
        ("plain", 2, 0, 0, False),
    ]
    assert all(r.active_files >= 1 and r.duration_seconds > 0 for r in rows)
    properties = broker.storage.detail(broker.context.record(work.name).location).first()[
        "properties"
    ]
    assert properties["delta.logRetentionDuration"] == "interval 36 hours"
    assert metrics.where(F.col("upkeep")).count() == 1


def test_settings_come_from_conf_redrive_toml(tmp_path):
    shipped = RedriveSettings.load("conf/redrive.toml")
    assert shipped.queues is None and shipped.defaults == UpkeepSettings()
    custom = tmp_path / "redrive.toml"
    custom.write_text(
        'root = "/data/queues"\nevery_seconds = 30\n[defaults]\nupkeep_every_seconds = 0\n'
        "[queues.orders]\n[queues.audit]\ncheckpoint_interval = 50\n"
    )
    settings = RedriveSettings.load(custom)
    assert (settings.root, settings.every_seconds) == ("/data/queues", 30)
    assert settings.upkeep_for("orders").upkeep_every_seconds == 0
    assert settings.upkeep_for("audit").checkpoint_interval == 50
    assert sorted(settings.queues or {}) == ["audit", "orders"]
    custom.write_text("[defaults]\nvacuum = true\n")
    with pytest.raises(InvalidParameterValue, match="vacuum"):
        RedriveSettings.load(custom)
    for bad in (
        "file_retention_hours = 0",
        "log_retention_hours = 0",
        "local_log_minutes = 20000",
        "upkeep_every_seconds = -1",
    ):
        custom.write_text(f"[defaults]\n{bad}\n")
        with pytest.raises(InvalidParameterValue, match=bad.split()[0]):
            RedriveSettings.load(custom)


def test_the_report_counts_what_the_commit_changed(broker, clock, monkeypatch):
    """A consumer that deletes a counted message between the count and the release must not be
    counted as released."""
    queue = broker.create_queue("raced")
    queue.send_batch(["a", "b", "c"])
    received = queue.receive(3, visibility_timeout=5)
    clock.advance(6)
    storage_type = type(broker.storage)
    real_change = storage_type.change
    raced: list[bool] = []

    def change_after_a_delete(storage, *args, **kwargs):
        if not raced:  # the consumer's late delete lands just before the release commits
            raced.append(True)
            broker.context.storage.change(
                broker.context.record("raced").location,
                F.col("message_id") == received[0].message_id,
                ("shard", "message_id"),
            )
        return real_change(storage, *args, **kwargs)

    monkeypatch.setattr(storage_type, "change", change_after_a_delete)
    report = broker.redrive(["raced"])
    monkeypatch.undo()
    assert report.released == 2
    assert queue.stats().visible == 2
