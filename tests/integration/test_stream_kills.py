"""Streaming drivers killed with SIGKILL at random moments and restarted from their checkpoints
(tests/integration/stream_driver.py): the source's query into Delta and a Delta table into the
queue's sink. At the end nothing is lost, nothing is in a sink twice, and the queue is empty."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from pyspark.sql import SparkSession

from sparkqueue import Broker

DRIVER = Path(__file__).with_name("stream_driver.py")
REPO = Path(__file__).parents[2]
KILLS = 1  # each run of the driver starts a JVM: one kill keeps the test run short


def _driver(root: Path, work: Path, mode: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(DRIVER), str(root), str(work), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        start_new_session=True,  # its JVM and Python workers die with it
    )


def test_killed_streaming_drivers_lose_nothing_and_send_nothing_twice(
    spark: SparkSession, tmp_path
):
    root, work = tmp_path / "root", tmp_path / "work"
    broker = Broker(None, str(root))
    broker.create_queue("in").send_batch([f"m{i}" for i in range(300)])
    broker.create_queue("sent")
    rows = spark.createDataFrame([(f"r{i}",) for i in range(120)], "body string")
    rows.repartition(12).write.format("delta").save(str(work / "src"))  # 12 files: 12 batches

    rng = random.Random(7)
    for _ in range(KILLS):
        driver = _driver(root, work, "run")
        assert driver.stdout is not None
        assert driver.stdout.readline().strip() == "started"
        time.sleep(rng.uniform(1.0, 6.0))  # mid-batch, somewhere
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    drained = _driver(root, work, "drain")
    output, _ = drained.communicate(timeout=400)
    assert drained.returncode == 0
    seen = json.loads(output.strip().splitlines()[-1])

    in_ids = {m["message_id"] for m in broker.get_queue("in").peek(1)}  # nothing left to see
    assert not in_ids
    assert Counter(seen["out"]).most_common(1)[0][1] == 1  # none in the sink twice
    assert len(seen["out"]) == 300  # none lost
    assert (seen["in_visible"], seen["in_flight"]) == (0, 0)
    assert sorted(seen["sent"]) == sorted(f"r{i}" for i in range(120))  # each row sent once
