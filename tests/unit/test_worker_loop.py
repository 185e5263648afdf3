"""The worker loop on a stub queue: what it deletes, what it leaves, and when it stops."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any

import pytest

from sparkqueue.errors import HeartbeatFailed, InvalidParameterValue
from sparkqueue.model import BatchResult
from sparkqueue.services.worker import Batch, consume


class StubQueue:
    """A BatchSource over a list of message ids; batches are plain lists."""

    name = "stub"

    def __init__(self, messages: int, *, heartbeat_fails: bool = False) -> None:
        self.waiting = [f"m{i}" for i in range(messages)]
        self.deleted: list[str] = []
        self.exchanged: list[list[str]] = []  # what each exchange was given to delete
        self.written: list[Any] = []
        self.beats: list[tuple[int, float]] = []
        self.heartbeat_fails = heartbeat_fails

    def visibility_timeout(self) -> int:
        return 30

    def exchange(
        self, finished: list[str], size: int, visibility_timeout: int
    ) -> tuple[BatchResult, Batch]:
        self.exchanged.append(list(finished))
        done = self.delete_batch(finished)
        taken, self.waiting = self.waiting[:size], self.waiting[size:]
        return done, Batch(taken, {m: f"h-{m}" for m in taken})

    def finished(self, batch: Batch, result: Any) -> list[str]:
        done = batch.frame if result is None else result
        return [batch.handles[m] for m in done]

    def write_results(self, result: Any, sink: str) -> None:
        self.written.append((sink, result))

    @contextmanager
    def heartbeat(self, receipt_handles: list[str], visibility_timeout: int, interval: float):
        self.beats.append((visibility_timeout, interval))
        yield
        if self.heartbeat_fails:
            raise HeartbeatFailed("lost")

    def delete_batch(self, receipt_handles: list[str]) -> BatchResult:
        self.deleted.extend(receipt_handles)
        return BatchResult(successful=list(receipt_handles))


def run(queue: StubQueue, handler, **options):
    settings = {
        "batch_size": 2,
        "visibility_timeout": None,
        "heartbeat_interval": None,
        "max_batches": None,
        "max_empty_polls": 1,
        "poll_interval": 0,
        "sink": None,
        "stop": None,
    }
    return consume(queue, handler, **{**settings, **options})


def test_deletes_what_the_handler_finished_and_leaves_the_rest():
    queue = StubQueue(5)
    report = run(queue, lambda batch: [m for m in batch if m != "m2"])
    assert queue.deleted == ["h-m0", "h-m1", "h-m3", "h-m4"]
    assert (report.batches, report.received, report.deleted, report.failed) == (3, 5, 4, 1)
    assert report.stopped_by == "empty"


def test_each_batch_is_deleted_by_the_next_exchange_and_the_last_on_the_way_out():
    queue = StubQueue(5)
    report = run(queue, lambda batch: None, max_batches=2)
    assert queue.exchanged == [[], ["h-m0", "h-m1"]]
    assert queue.deleted == ["h-m0", "h-m1", "h-m2", "h-m3"]
    assert (report.batches, report.deleted, report.stopped_by) == (2, 4, "max_batches")


def test_a_failing_exchange_still_deletes_the_finished_batch():
    queue = StubQueue(4)
    exchange = queue.exchange

    def fails_second(finished, size, visibility_timeout):
        if finished:
            raise RuntimeError("the table is gone")
        return exchange(finished, size, visibility_timeout)

    queue.exchange = fails_second  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="gone"):
        run(queue, lambda batch: None)
    assert queue.deleted == ["h-m0", "h-m1"]


def test_a_raising_handler_deletes_nothing_of_its_batch():
    queue = StubQueue(4)

    def handler(batch):
        if "m0" in batch:
            raise RuntimeError("boom")

    report = run(queue, handler)
    assert queue.deleted == ["h-m2", "h-m3"]
    assert report.handler_errors == 1


def test_results_go_to_the_sink_before_the_batch_is_deleted():
    queue = StubQueue(2)
    report = run(queue, lambda batch: f"results of {batch}", sink="/tmp/sink")
    assert queue.written == [("/tmp/sink", "results of ['m0', 'm1']")]
    assert report.deleted == 2


def test_a_failed_heartbeat_still_deletes_the_finished_batch():
    queue = StubQueue(2, heartbeat_fails=True)
    assert run(queue, lambda batch: None).deleted == 2


def test_the_heartbeat_runs_every_third_of_the_timeout_by_default():
    queue = StubQueue(1)
    run(queue, lambda batch: None, visibility_timeout=90)
    assert queue.beats == [(90, 30.0)]


def test_stops_after_max_batches_or_when_told():
    queue = StubQueue(10)
    assert run(queue, lambda batch: None, max_batches=2).stopped_by == "max_batches"
    stop = threading.Event()
    stop.set()
    assert run(queue, lambda batch: None, stop=stop).stopped_by == "stop"


@pytest.mark.parametrize(
    "options",
    [
        {"batch_size": 0},
        {"max_batches": 0},
        {"poll_interval": -1},
        {"heartbeat_interval": 0},
        {"heartbeat_interval": 30, "visibility_timeout": 30},
        {"sink": "bad`name"},
    ],
)
def test_bad_arguments_are_rejected_before_anything_is_received(options):
    queue = StubQueue(3)
    with pytest.raises(InvalidParameterValue):
        run(queue, lambda batch: None, **options)
    assert len(queue.waiting) == 3
