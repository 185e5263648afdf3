"""Concurrency: threads and OS processes on one queue lose nothing and deliver nothing twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

from pyspark.sql import functions as F

from .helpers import run_threads

VISIBILITY = 3600  # long enough that nothing may legitimately come back during a test


def _consume(queue, received: list[str], *, batch: int, until) -> None:
    """Receives and deletes until `until()` says the work is over and the queue looks empty."""
    idle = 0
    while idle < 2 or not until():
        messages = queue.receive(batch, visibility_timeout=VISIBILITY)
        if not messages:
            idle += 1
            continue
        idle = 0
        received.extend(m.message_id for m in messages)
        result = queue.delete_batch([m.receipt_handle for m in messages])
        assert not result.failed, result.failed


def _assert_exactly_once(sent: list[str], received: list[str]) -> None:
    duplicates = [i for i, n in Counter(received).items() if n > 1]
    assert duplicates == [], f"delivered twice: {duplicates}"
    assert set(received) == set(sent), f"lost: {set(sent) - set(received)}"


def test_four_threads_receive_each_message_once(spark, broker):
    queue = broker.create_queue("contended")
    queue.send_df(spark.range(24).select(F.col("id").cast("string").alias("body")))
    sent = [r.message_id for r in queue.receive_df(24, visibility_timeout=0).collect()]
    received: list[str] = []
    run_threads([lambda: _consume(queue, received, batch=3, until=lambda: True)] * 4)
    _assert_exactly_once(sent, received)
    assert queue.stats().visible + queue.stats().in_flight == 0
    print(f"conflict retries (4 consumers): {broker.conflict_retries}")


def test_producer_and_consumers_together(broker):
    queue = broker.create_queue("busy")
    sent: list[str] = []
    received: list[str] = []
    producing = threading.Event()
    producing.set()

    def produce() -> None:
        for i in range(6):
            sent.extend(queue.send_batch([f"p{i}-a", f"p{i}-b"]))
        producing.clear()

    consumers = [lambda: _consume(queue, received, batch=2, until=lambda: not producing.is_set())]
    run_threads([produce, *consumers * 3])
    _assert_exactly_once(sent, received)
    print(f"conflict retries (1 producer, 3 consumers): {broker.conflict_retries}")


WORKER = """
import json, sys
from sparkqueue import Broker, spark_session
from tests.integration.test_concurrency import _consume

root, out, tag = sys.argv[1:4]
queue = Broker(spark_session(), root).get_queue("shared")
sent, received = [], []
for i in range(2):
    sent += queue.send_batch([f"{tag}-{i}-a", f"{tag}-{i}-b"])
    for m in queue.receive(2, visibility_timeout=3600):
        received.append(m.message_id)
        queue.delete(m.receipt_handle)
_consume(queue, received, batch=3, until=lambda: True)
json.dump({"sent": sent, "received": received}, open(out, "w"))
"""


def test_two_processes_share_a_local_root_safely(broker, tmp_path):
    broker.create_queue("shared")
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    outs = [tmp_path / f"worker{i}.json" for i in range(2)]
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, broker.root, str(out), f"w{i}"], cwd=repo, env=env
        )
        for i, out in enumerate(outs)
    ]
    assert [w.wait(timeout=900) for w in workers] == [0, 0]
    results = [json.loads(out.read_text()) for out in outs]
    sent = [i for r in results for i in r["sent"]]
    received = [i for r in results for i in r["received"]]
    _assert_exactly_once(sent, received)
    stats = broker.get_queue("shared").stats()
    assert (stats.visible, stats.in_flight) == (0, 0)  # no delete commit was lost either
