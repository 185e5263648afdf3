"""Deleting a queue while writers that already looked it up are sending to it: no send is
acknowledged into the dropped table, and nothing of it is left behind (native engine, threads
of one process and a process of its own, no JVM)."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sparkqueue import Broker
from sparkqueue.errors import InvalidParameterValue, QueueDoesNotExist

SENDER = """
import sys, time
from sparkqueue import Broker
from sparkqueue.errors import QueueDoesNotExist
queue = Broker(None, sys.argv[1]).get_queue("doomed")
print("ready", flush=True)
try:
    while True:
        began = time.monotonic()
        queue.send("from another process")
        print("sent", began, flush=True)
except QueueDoesNotExist:
    print("gone", flush=True)
"""


class Senders:
    """Threads sending to one queue until it is gone: when each send began, and the refusals."""

    def __init__(self, queue, count: int) -> None:
        self.queue, self.stop = queue, threading.Event()
        self.acknowledged: list[float] = []
        self.refused: list[QueueDoesNotExist] = []
        self.threads = [threading.Thread(target=self._send) for _ in range(count)]
        for thread in self.threads:
            thread.start()

    def _send(self) -> None:
        while not self.stop.is_set():
            began = time.monotonic()
            try:
                self.queue.send("x")
                self.acknowledged.append(began)
            except QueueDoesNotExist as error:
                self.refused.append(error)
                return

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)


def test_a_queue_deleted_under_its_senders_takes_no_send_after_it_and_leaves_nothing(tmp_path):
    root = str(tmp_path / "root")
    for attempt in range(3):
        broker = Broker(None, root)
        queue = broker.create_queue("doomed")
        folder = Path(broker.context.record("doomed").location.removeprefix("file:"))
        other = subprocess.Popen(
            [sys.executable, "-c", SENDER, root],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        assert other.stdout is not None and other.stdout.readline().strip() == "ready"
        senders = Senders(queue, 3)
        time.sleep(0.3 + 0.1 * attempt)
        broker.delete_queue("doomed")
        deleted = time.monotonic()
        time.sleep(0.3)
        senders.join()
        lines, _ = other.communicate(timeout=60)
        sent_elsewhere = [float(line.split()[1]) for line in lines.splitlines()[:-1]]
        # a send that began once the delete was done was refused (one before may have landed:
        # then its message went with the table)
        assert [at for at in senders.acknowledged + sent_elsewhere if at > deleted] == []
        assert len(senders.refused) == 3 and lines.splitlines()[-1] == "gone"
        assert not folder.exists(), sorted(p.name for p in folder.rglob("*"))
        assert Broker(None, root).list_queues() == []


def test_a_redrive_allow_policy_binds_the_python_api_and_reads_arns_of_any_region(broker):
    deny = json.dumps({"redrivePermission": "denyAll"})
    broker.create_queue("closed-dlq", redrive_allow_policy=deny)
    with pytest.raises(InvalidParameterValue, match="redrive_allow_policy"):
        broker.create_queue("orders", dead_letter_queue="closed-dlq", max_receive_count=3)
    assert broker.list_queues() == ["closed-dlq"]  # nothing was created
    orders = broker.create_queue("orders")
    with pytest.raises(InvalidParameterValue, match="redrive_allow_policy"):
        orders.set_attributes(dead_letter_queue="closed-dlq", max_receive_count=3)
    assert orders.attributes["dead_letter_queue"] is None
    only = {
        "redrivePermission": "byQueue",
        "sourceQueueArns": ["arn:aws:sqs:eu-west-3:000000000000:orders"],
    }
    broker.create_queue("open-dlq", redrive_allow_policy=json.dumps(only))
    orders.set_attributes(dead_letter_queue="open-dlq", max_receive_count=3)
    with pytest.raises(InvalidParameterValue, match="redrive_allow_policy"):
        broker.create_queue("other", dead_letter_queue="open-dlq", max_receive_count=3)
    for bad in ("[]", '{"redrivePermission": "byQueue"}', '{"redrivePermission": "some"}'):
        with pytest.raises(InvalidParameterValue, match="redrivePermission"):
            broker.create_queue("bad-dlq", redrive_allow_policy=bad)


def _send_from_child(queue, root: str, answers) -> None:
    """In a child process: a send through the parent's queue (fork) or a broker of its own."""
    try:
        target = queue if queue is not None else Broker(None, root).get_queue("work")
        answers.put(("sent", target.send("from the child")))
    except BaseException as error:  # reported to the parent, whatever it is
        answers.put((type(error).__name__, str(error)))


def test_a_forked_child_is_told_to_use_spawn_and_a_spawned_one_works(broker):
    """delta-rs's runtime does not survive fork(2), and a child forked while a thread was in a
    commit round would wait for it forever: the child gets a clear error at once instead."""
    queue = broker.create_queue("work")
    stop = threading.Event()

    def busy() -> None:  # rounds under way in the parent when it forks
        while not stop.is_set():
            for message in queue.receive(10, wait_time_seconds=1):
                queue.delete(message.receipt_handle)
            queue.send("parent")

    worker = threading.Thread(target=busy)
    worker.start()
    try:
        for method, expected in (("fork", "UnsupportedOperation"), ("spawn", "sent")):
            context = multiprocessing.get_context(method)
            answers = context.Queue()
            child = context.Process(
                target=_send_from_child,
                args=(queue if method == "fork" else None, broker.root, answers),
            )
            child.start()
            kind, said = answers.get(timeout=120)
            child.join(timeout=60)
            assert kind == expected, said
            if method == "fork":
                assert "'spawn'" in said
    finally:
        stop.set()
        worker.join(timeout=60)


def test_a_stored_policy_is_read_leniently_and_checked_only_when_set(broker):
    """A queue's attributes are checked when they are set: one an older version stored (any
    text) never makes the registry unreadable, and a dead-letter queue's policy tightened later
    does not freeze its sources' other attributes."""
    broker.create_queue("dlq")
    broker.context.registry.change_attributes(
        "dlq", lambda current: dataclasses.replace(current, redrive_allow_policy="not json")
    )
    source = broker.create_queue("source", dead_letter_queue="dlq", max_receive_count=2)
    assert broker.list_queues() == ["dlq", "source"]
    broker.get_queue("dlq").set_attributes(
        redrive_allow_policy=json.dumps({"redrivePermission": "denyAll"})
    )
    source.set_attributes(visibility_timeout=5)  # its dead-letter queue unchanged: not checked
    assert source.attributes["visibility_timeout"] == 5
    with pytest.raises(InvalidParameterValue, match="redrive_allow_policy"):
        broker.create_queue("late", dead_letter_queue="dlq", max_receive_count=2)
