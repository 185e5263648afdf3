"""The buffered client: prefetch, expiry of prefetched messages, batched acknowledgements, release
at close and on a signal, and the in-flight count it adds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sparkqueue import Broker
from sparkqueue.errors import EmptyBatchRequest, InvalidParameterValue

pytestmark = pytest.mark.usefixtures("quick_drivers")


def test_receives_come_from_the_prefetch_and_acknowledgements_are_flushed_together(queue):
    queue.send_batch([f"m{i}" for i in range(30)])
    with queue.buffered(prefetch=10, flush_interval=60, max_pending=100) as q:
        taken = [m for _ in range(3) for m in q.receive(1)]
        assert len({m.message_id for m in taken}) == 3
        stats = queue.stats()
        assert 10 <= stats.in_flight <= 13  # prefetched messages count as in flight; no more
        q.delete(taken[0].receipt_handle)
        q.delete_batch([m.receipt_handle for m in taken[1:]])
        q.delete(taken[0].receipt_handle[:-1] + "x")  # not issued by this queue
        assert queue.stats().in_flight == stats.in_flight  # queued, not sent yet
        outcome = q.flush()
        assert set(outcome.successful) == {m.receipt_handle for m in taken}
        assert list(outcome.failed.values()) == ["ReceiptHandleIsInvalid"]
        assert queue.stats().visible + queue.stats().in_flight == 27
        assert q.flush().successful == []  # each outcome reported once


def test_a_prefetched_message_with_too_little_timeout_left_is_released_not_served(queue, clock):
    queue.send_batch([f"m{i}" for i in range(4)])
    with queue.buffered(prefetch=4, visibility_timeout=30, min_visibility_share=0.5) as q:
        [first] = q.receive(1)
        clock.advance(16)  # the other three have 14 s left of 30: less than half
        again = q.receive(3, wait_time_seconds=10)  # after their release, claimed afresh
        assert first.message_id not in {m.message_id for m in again}
        assert len(again) == 3 and all(m.receive_count == 2 for m in again)


def test_closing_releases_what_was_never_handed_out(queue):
    queue.send_batch([f"m{i}" for i in range(10)])
    q = queue.buffered(prefetch=10)
    held = q.receive(2)
    assert queue.stats().in_flight == 10
    assert q.close().successful == []  # the releases are not the caller's outcomes
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (8, 2)
    with pytest.raises(InvalidParameterValue, match="closed"):
        q.delete(held[0].receipt_handle)


def test_bad_arguments_are_refused_before_anything_starts(queue):
    for bad in ({"prefetch": 0}, {"flush_interval": 0}, {"max_pending": True}):
        with pytest.raises(InvalidParameterValue):
            queue.buffered(**bad)
    with pytest.raises(InvalidParameterValue, match="min_visibility_share"):
        queue.buffered(min_visibility_share=1)
    with queue.buffered() as q:
        with pytest.raises(EmptyBatchRequest):
            q.delete_batch([])
        with pytest.raises(InvalidParameterValue):
            q.change_visibility("handle", 43_201)


CHILD = """
import sys, time
from sparkqueue import Broker, spark_session
queue = Broker(spark_session(), sys.argv[1]).get_queue("signalled")
q = queue.buffered(prefetch=5, flush_interval=3600, max_pending=1000).__enter__()
taken = q.receive(2)
for message in taken:
    q.delete(message.receipt_handle)
print(" ".join(m.message_id for m in taken), flush=True)
time.sleep(600)
"""


def start_child(spark, tmp_path, script: str):
    """A queue of 8 messages, and a process running `script` on it: (queue, process)."""
    root = str(tmp_path / "root")
    queue = Broker(spark, root).create_queue("signalled", visibility_timeout=3600)
    queue.send_batch([f"m{i}" for i in range(8)])
    child = subprocess.Popen(
        [sys.executable, "-c", script, root],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    return queue, child


def test_sigterm_flushes_the_queued_deletes_and_releases_the_prefetch(spark, tmp_path):
    queue, child = start_child(spark, tmp_path, CHILD)
    deleted = child.stdout.readline().split()  # printed once the deletes are queued
    assert len(deleted) == 2, child.stderr.read()[-3000:]
    child.send_signal(signal.SIGTERM)
    child.wait(timeout=120)
    assert child.returncode == -signal.SIGTERM  # and then terminated as the signal says
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (6, 0)  # 2 deleted, 3 prefetched released


INTERRUPTED = """
import os, signal, sys, threading, time
from sparkqueue import Broker, spark_session
queue = Broker(spark_session(), sys.argv[1]).get_queue("signalled")
with queue.buffered(prefetch=5, flush_interval=3600, max_pending=1000) as q:
    for message in q.receive(2):
        q.delete(message.receipt_handle)

    def interrupt():  # Ctrl-C while the main thread flushes (holding the flush, leading a round)
        while not q._flushing.locked():
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    try:
        q.flush()
    except KeyboardInterrupt:
        print("interrupted", flush=True)
# the queue still serves this broker: its committer is not left waiting for a gone leader
queue.send("after")
[after] = queue.receive(1, visibility_timeout=0)
queue.delete(after.receipt_handle)
print("served", flush=True)
"""


def test_ctrl_c_during_a_flush_neither_hangs_nor_stops_the_queue(spark, tmp_path):
    """The signal handler used to flush on the interrupted thread, which held the flush lock
    (and led the round): the process hung. Now the close runs on a thread of its own."""
    queue, child = start_child(spark, tmp_path, INTERRUPTED)
    try:
        out, err = child.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        pytest.fail(f"the interrupted process hung: {out!r} {err[-3000:]}")
    assert child.returncode == 0 and out.split() == ["interrupted", "served"], err[-3000:]
    stats = queue.stats()
    # the 3 prefetched messages were released; the 2 handed out are deleted, or (when the
    # interrupt cut their flush short) in flight until their timeout, never lost
    assert stats.visible == 3 + 3 and stats.in_flight in (0, 2)


def test_the_buffered_client_refuses_fifo_queues(broker):
    fifo = broker.create_queue("ordered.fifo", fifo=True)
    with pytest.raises(InvalidParameterValue, match="FIFO"):
        fifo.buffered()


def test_flush_reports_the_callers_entries_not_the_clients_own_releases(queue, clock):
    queue.send_batch([f"m{i}" for i in range(4)])
    with queue.buffered(prefetch=4, visibility_timeout=30, flush_interval=3600) as q:
        [first] = q.receive(1)
        clock.advance(16)  # the other three have too little time left: released, not served
        assert q.receive(1) == []  # nothing else is visible until the releases are flushed
        q.delete(first.receipt_handle)
        outcome = q.flush()
        assert outcome.successful == [first.receipt_handle] and outcome.failed == {}
