"""Concurrency: threads on one queue lose nothing and deliver nothing twice; `share_with_a_child`
is the same check for two OS processes (test_catalog; test_chaos kills processes on a local root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from pyspark.sql import functions as F

from .helpers import run_threads

VISIBILITY = 3600  # long enough that nothing may legitimately come back during a test


def _consume(queue, received: list[str], *, batch: int, until, idle_polls: int = 2) -> None:
    """Receives and deletes until `until()` says the work is over and the queue has looked
    empty `idle_polls` times in a row."""
    idle = 0
    while idle < idle_polls or not until():
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
    # Nothing comes back within the test (VISIBILITY): one empty receive means all is taken.
    run_threads([lambda: _consume(queue, received, batch=3, until=lambda: True, idle_polls=1)] * 4)
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


def share_the_queue(queue, tag: str) -> dict[str, list[str]]:
    """One process's part: send and take some messages while the other does the same, then
    take whatever is left."""
    sent: list[str] = []
    received: list[str] = []
    for i in range(2):
        sent += queue.send_batch([f"{tag}-{i}-a", f"{tag}-{i}-b"])
        for m in queue.receive(2, visibility_timeout=VISIBILITY):
            received.append(m.message_id)
            queue.delete(m.receipt_handle)
    _consume(queue, received, batch=3, until=lambda: True)
    return {"sent": sent, "received": received}


def share_with_a_child(queue, code: str, args: list[str], folder: Path) -> None:
    """Runs `code` in a child process with `args`, an output file and a ready file; once the
    child is warm, both share `queue` (share_the_queue); nothing may be lost or delivered twice."""
    repo = Path(__file__).resolve().parents[2]
    out, ready = folder / "child.json", folder / "child.ready"
    child = subprocess.Popen(
        [sys.executable, "-c", code, *args, str(out), str(ready)],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    deadline = time.monotonic() + 300
    while not ready.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    mine = share_the_queue(queue, "parent")
    assert child.wait(timeout=600) == 0
    theirs = json.loads(out.read_text())
    _assert_exactly_once(mine["sent"] + theirs["sent"], mine["received"] + theirs["received"])
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (0, 0)  # no delete commit was lost either
