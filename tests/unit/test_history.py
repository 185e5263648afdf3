"""`Queue.history`: a message's events read back from its queues' Delta logs (native engine)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from deltalake import DeltaTable

from sparkqueue import Broker, MessageEvent
from sparkqueue.engine.rounds import operations as rounds
from sparkqueue.errors import InvalidParameterValue, QueueDoesNotExist
from sparkqueue.rules import handles
from sparkqueue.store import native_history
from sparkqueue.store.logtrim import trim_log, trim_table_log
from sparkqueue.testing import FakeClock
from tests.processes import run_here
from tests.unit.conftest import near_wall_clock

COMMAND = str(Path(sys.executable).with_name("sparkqueue"))


@pytest.fixture
def clock() -> FakeClock:
    """Expiry is read against the commit's time: the broker's clock is near it, as in production."""
    return near_wall_clock()


def kinds(events: list[MessageEvent]) -> list[tuple[str, str]]:
    return [(e.kind, e.detail["queue"]) for e in events]


@pytest.fixture
def orders(broker: Broker):
    broker.create_queue("orders-dlq")
    return broker.create_queue(
        "orders", visibility_timeout=30, dead_letter_queue="orders-dlq", max_receive_count=2
    )


def folder(broker: Broker, name: str) -> str:
    return broker.context.record(name).location.removeprefix("file:")


def test_a_whole_life_through_the_dead_letter_queue_and_back(broker, orders, clock):
    message_id = orders.send("order 1")
    [first] = orders.receive(1)
    changed_at = clock()
    orders.change_visibility(first.receipt_handle, 100)
    clock.advance(101)
    orders.receive(1)
    clock.advance(31)
    assert broker.redrive().moved_to_dead_letter == 1
    assert broker.get_queue("orders-dlq").start_message_move() == 1
    [again] = orders.receive(1)
    orders.delete(again.receipt_handle)

    events = orders.history(message_id)

    assert kinds(events) == [
        ("sent", "orders"),
        ("received", "orders"),
        ("visibility_changed", "orders"),
        ("received", "orders"),
        ("moved_out", "orders"),
        ("moved_in", "orders-dlq"),
        ("moved_out", "orders-dlq"),
        ("moved_in", "orders"),
        ("received", "orders"),
        ("deleted", "orders"),
    ]
    assert [e.receive_count for e in events] == [0, 1, 1, 2, 2, 0, 0, 0, 1, 1]
    changed = events[2]
    assert changed.detail["moved_by_seconds"] == 70.0
    assert changed.detail["visible_until"] == changed_at + timedelta(seconds=100)
    to_dlq, back = events[4], events[6]
    assert to_dlq.detail == {
        "queue": "orders",
        "to": "orders-dlq",
        "reason": "max_receive_count reached",
    }
    assert back.detail == {"queue": "orders-dlq", "to": "orders", "reason": "moved by request"}
    assert events[5].detail["from"] == "orders" and events[7].detail["from"] == "orders-dlq"
    # each queue's versions rise, and every time is the commit's (UTC)
    for queue in ("orders", "orders-dlq"):
        versions = [e.version for e in events if e.detail["queue"] == queue]
        assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert all(e.at.tzinfo is not None for e in events)
    # the same life, asked of the broker from the dead-letter queue's side
    assert broker.history("orders-dlq", message_id) == events


def test_a_release_and_an_expiry_by_retention(broker, clock):
    queue = broker.create_queue("short", visibility_timeout=10, retention_seconds=60)
    message_id = queue.send("soon gone")
    queue.receive(1)
    clock.advance(11)
    assert broker.redrive().released == 1
    clock.advance(60)
    assert broker.redrive().expired_by_retention == 1

    events = queue.history(message_id)

    assert [e.kind for e in events] == ["sent", "received", "released", "expired"]
    assert events[-1].detail["sent_at"] == clock() - timedelta(seconds=71)
    assert events[-1].at >= events[-1].detail["sent_at"] + timedelta(seconds=60)


def test_a_consumers_delete_after_the_retention_ran_out_is_a_deletion(broker, clock):
    """Held by its consumer when its retention ended, then deleted with its handle before any
    pass removed it: the consumer deleted it (a review found this called an expiry)."""
    queue = broker.create_queue("short", retention_seconds=60)
    message_id = queue.send("late")
    [message] = queue.receive(1, visibility_timeout=600)
    clock.advance(61)
    queue.delete(message.receipt_handle)

    assert [e.kind for e in queue.history(message_id)] == ["sent", "received", "deleted"]


def test_fifo_deletes_and_purges_are_deletions(broker):
    fifo = broker.create_queue("jobs.fifo", fifo=True, content_based_deduplication=True)
    kept = fifo.send("one", group_id="g")
    purged = fifo.send("two", group_id="g")
    [message] = fifo.receive(1)
    fifo.delete(message.receipt_handle)
    assert fifo.purge() == 1

    assert [e.kind for e in fifo.history(kept)] == ["sent", "received", "deleted"]
    assert [e.kind for e in fifo.history(purged)] == ["sent", "deleted"]


def test_unknown_ids_have_no_history_and_bad_input_is_refused(broker, orders):
    orders.send("x")
    assert orders.history("01a2b3c4-0000-7000-8000-000000000000") == []
    for bad in ("", 42, "'); DROP TABLE t; --", "01a21805-29zz-7000-8000-000000000000", "\x00"):
        with pytest.raises(InvalidParameterValue, match="message id is a UUID"):
            orders.history(bad)
    with pytest.raises(InvalidParameterValue, match="message id is a UUID"):
        broker.get_queue("orders-dlq").start_message_move(message_ids=["x\x00"])
    with pytest.raises(QueueDoesNotExist):
        broker.history("nope", "01a2b3c4-0000-7000-8000-000000000000")


def test_events_before_the_kept_log_come_from_the_row(broker, orders):
    """The redrive pass trims a local log to minutes: what went before is summarised from the
    row's own columns at the oldest checkpoint kept."""
    message_id = orders.send("old news")
    orders.receive(1)
    location = broker.context.record("orders").location
    DeltaTable(location).create_checkpoint()
    assert trim_log(folder(broker, "orders"), time.time() + 3600, 0) > 0
    orders.send("later")

    events = orders.history(message_id)

    assert [e.kind for e in events] == ["sent", "received"]
    assert all(e.detail["summarised"] for e in events)
    assert events[1].receive_count == 1
    [message] = orders.receive(1)  # the other one; then ours again once visible
    assert message.body == "later"
    orders.delete(message.receipt_handle)
    assert orders.history(message_id)[-1].kind == "received"  # untouched by the other's delete


def test_states_whose_files_were_vacuumed_are_summarised_from_the_next(broker, orders):
    message_id = orders.send("x")
    location = folder(broker, "orders")
    log = os.path.join(location, "_delta_log")
    send_commit = max(f for f in os.listdir(log) if f.endswith(".json"))
    [message] = orders.receive(1)  # rewrites the send's file, which VACUUM removes in time
    with open(os.path.join(log, send_commit)) as commit:
        added = [json.loads(line)["add"]["path"] for line in commit if '"add"' in line]
    for path in added:
        os.remove(os.path.join(location, path))
    orders.change_visibility(message.receipt_handle, 300)

    events = orders.history(message_id)

    assert [e.kind for e in events] == ["sent", "received", "visibility_changed"]
    assert [bool(e.detail.get("summarised")) for e in events] == [True, True, False]


def test_a_delete_in_a_round_that_also_claims_is_a_deletion(broker, orders):
    """The worker loop's round retires its batch and claims the next in one UPDATE whose
    predicate selects by `sent_at` too (claimable): that is no expiry (a bug once)."""
    orders.send_batch(["first", "second"])
    record = broker.context.record("orders")
    [message] = orders.receive(1)
    finished = [handles.parse(record.secret, message.receipt_handle)]
    turn = rounds.settle_and_claim(broker.context, record, finished, 1, 30)

    assert [m.message_id for m in turn.claimed] != [message.message_id]
    assert [e.kind for e in orders.history(message.message_id)] == ["sent", "received", "deleted"]


def test_a_log_trimmed_while_it_is_read_is_read_again(broker, orders, monkeypatch):
    """The redrive pass trims a local log from its oldest end, where a history starts: the
    first reading meets a commit gone, the second starts from the new oldest checkpoint."""
    message_id = orders.send("x")
    [message] = orders.receive(1)
    location = broker.context.record("orders").location
    DeltaTable(location).create_checkpoint()
    orders.delete(message.receipt_handle)
    read = native_history._actions
    trimmed: list[int] = []

    def trimming(files, version):  # the pass's real trim, landing between listing and reading
        if not trimmed:
            trimmed.append(trim_log(folder(broker, "orders"), time.time() + 3600, 0))
        return read(files, version)

    monkeypatch.setattr(native_history, "_actions", trimming)

    events = orders.history(message_id)

    assert trimmed[0] > 0
    assert [e.kind for e in events] == ["sent", "received", "deleted"]
    assert [bool(e.detail.get("summarised")) for e in events] == [True, True, False]


def test_the_command_line_prints_a_history_as_json(broker, orders, tmp_path):
    message_id = orders.send("from the shell")
    root = str(tmp_path / "root")
    done = run_here([COMMAND, "history", "orders", message_id, "--root", root, "--json"], 60)
    [sent] = json.loads(done.stdout)
    assert sent["kind"] == "sent" and sent["detail"]["queue"] == "orders"
    assert datetime.fromisoformat(sent["at"]).tzinfo is not None
    missing = run_here(
        [COMMAND, "history", "orders", "01a2b3c4-0000-7000-8000-000000000000",
         "--root", root, "--json"], 60,
    )  # fmt: skip
    assert json.loads(missing.stdout) == []


def test_histories_read_while_consumers_work_and_the_log_is_trimmed(broker, orders):
    """Real threads: consumers receive and delete, a trimmer checkpoints and trims the log as
    the redrive pass does, and a reader reads a history all the while. Every reading is whole:
    it starts with the arrival and has at most one departure, at its end (or, once the log is
    trimmed past the departure, nothing is left to tell)."""
    ids = orders.send_batch([f"m{i}" for i in range(40)])
    location = broker.context.record("orders").location
    done = threading.Event()
    readings: list[list[str]] = []
    errors: list[BaseException] = []

    def consume() -> None:
        while messages := orders.receive(2, visibility_timeout=600):
            orders.delete_batch([m.receipt_handle for m in messages])

    def trim() -> None:  # as the redrive pass does: under the commit lock, with none in flight
        while not done.is_set():
            DeltaTable(location).create_checkpoint()
            trim_table_log(broker.context.tables.layout, location, 0)

    def read() -> None:
        try:
            while not done.is_set():
                readings.append([e.kind for e in orders.history(ids[-1])])
        except BaseException as error:
            errors.append(error)

    workers = [threading.Thread(target=consume) for _ in range(2)]
    others = [threading.Thread(target=trim), threading.Thread(target=read)]
    for thread in workers + others:
        thread.start()
    for thread in workers:
        thread.join()
    done.set()
    for thread in others:
        thread.join()

    assert errors == [] and any(readings)
    for kinds in readings:
        assert kinds[:1] in ([], ["sent"])
        assert "deleted" not in kinds[:-1]
    assert [e.kind for e in orders.history(ids[-1])][-1:] in ([], ["deleted"])
