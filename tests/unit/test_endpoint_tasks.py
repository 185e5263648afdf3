"""Move tasks on a stand-in dead-letter queue (real threads, no JVM): progress in chunks, a rate
limit, cancelling between chunks, and a failure reported rather than lost."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from sparkqueue import Broker
from sparkqueue.endpoint.faults import SqsFault
from sparkqueue.endpoint.service import Service
from sparkqueue.endpoint.tasks import MoveTask, MoveTasks


class DeadLetters:
    """Stands in for a Queue: `start_message_move` moves up to a chunk of what is left."""

    name = "dlq"

    def __init__(self, messages: int, *, fail: bool = False) -> None:
        self.left = messages
        self.fail = fail
        self.chunks: list[int] = []
        self.moving = threading.Event()

    def stats(self) -> SimpleNamespace:
        return SimpleNamespace(visible=self.left)

    def start_message_move(self, destination: str | None, max_messages: int) -> int:
        self.moving.set()
        if self.fail:
            raise RuntimeError("the destination is gone")
        time.sleep(0.05)
        moved = min(self.left, max_messages)
        self.left -= moved
        self.chunks.append(moved)
        return moved


def wait_done(tasks: MoveTasks, source: str) -> MoveTask:
    deadline = time.monotonic() + 10
    while (task := tasks.listed(source, 1)[0]).status == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return task


def test_a_task_moves_everything_in_chunks():
    tasks, source = MoveTasks(), DeadLetters(2_500)
    tasks.start(source, None, None)
    task = wait_done(tasks, "dlq")
    assert (task.status, task.moved, task.to_move) == ("COMPLETED", 2_500, 2_500)
    assert source.chunks == [1_000, 1_000, 500]


def test_a_rate_limited_task_can_be_cancelled_between_chunks():
    tasks, source = MoveTasks(), DeadLetters(100)
    task = tasks.start(source, "back", 10)  # 10 a second
    with pytest.raises(SqsFault):  # one running task per source
        tasks.start(source, None, None)
    source.moving.wait(5)
    time.sleep(0.3)
    assert tasks.cancel(task.handle) is task
    done = wait_done(tasks, "dlq")
    assert done.status == "CANCELLED" and 10 <= done.moved < 100
    with pytest.raises(SqsFault) as fault:
        tasks.cancel(task.handle)
    assert fault.value.kind.name == "ResourceNotFoundException"


def test_closing_cancels_the_running_tasks_waits_for_their_chunk_and_starts_no_more():
    """The endpoint closes (and its process may end): no task thread may still be moving."""
    tasks, source = MoveTasks(), DeadLetters(100)
    task = tasks.start(source, "back", 10)
    assert source.moving.wait(5)
    tasks.close(5)
    assert task.status == "CANCELLED" and task.moved == sum(source.chunks) < 100  # chunks whole
    with pytest.raises(SqsFault) as fault:
        tasks.start(DeadLetters(5), None, None)
    assert fault.value.kind.name == "ServiceUnavailable"


def test_a_close_meeting_a_start_under_way_joins_or_refuses_its_task(monkeypatch):
    """A task whose thread is starting as the endpoint closes: the close waits for the start and
    joins the thread, or the start is refused; the close never fails on a thread not started."""
    original = threading.Thread.start

    def slow_start(self: threading.Thread) -> None:
        time.sleep(0.3)
        original(self)

    monkeypatch.setattr(threading.Thread, "start", slow_start)
    tasks, source, outcome = MoveTasks(), DeadLetters(100), {}

    def start() -> None:
        try:
            outcome["task"] = tasks.start(source, "back", 10)
        except SqsFault as fault:
            outcome["refused"] = fault.kind.name

    starting = threading.Thread(target=start)
    original(starting)
    time.sleep(0.1)  # the start is under way, its thread not started yet
    tasks.close(5)
    starting.join(5)
    assert outcome.get("refused") == "ServiceUnavailable" or outcome["task"].status == "CANCELLED"


def test_a_task_whose_thread_cannot_start_is_refused_and_left_out(monkeypatch):
    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    tasks = MoveTasks()
    monkeypatch.setattr(threading.Thread, "start", refused)
    with pytest.raises(SqsFault) as fault:
        tasks.start(DeadLetters(5), None, None)
    assert fault.value.kind.name == "ServiceUnavailable" and tasks.listed("dlq", 10) == []
    tasks.close(1)  # nothing started to join


def test_a_failed_task_says_why():
    tasks = MoveTasks()
    tasks.start(DeadLetters(5, fail=True), None, None)
    task = wait_done(tasks, "dlq")
    assert task.status == "FAILED" and "destination is gone" in task.failure


def test_a_failure_reason_names_neither_the_root_nor_the_store(tmp_path):
    """A move task's FailureReason goes to any client with the queue's ARN: what a store's
    error says of the server's storage (its root, a request's URL with its bucket, keys and
    signature) is taken out, before the reason is cut to size."""
    broker = Broker(None, str(tmp_path / "root"))
    service = Service(broker)
    failure = (
        f"Generic S3 error: GET https://bucket.s3.amazonaws.com/queues/x/_delta_log?sig=abc"
        f" for {broker.root}/queues/x: does it exist? no"
    )
    said = service.redacted(failure)
    assert "bucket" not in said and "sig=" not in said and str(tmp_path) not in said
    assert said.endswith(": does it exist? no")
