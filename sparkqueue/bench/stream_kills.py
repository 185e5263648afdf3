"""The streaming scenario's kills: a streaming driver (stream_driver.py: the source's query into
Delta, and a Delta table into the queue's sink) killed with SIGKILL at random moments and started
again from its checkpoints, several times, then drained. What counts: nothing lost, nothing in a
sink twice, the queue empty at the end. This process starts no JVM; each driver starts its own."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from typing import Any, NoReturn

import pyarrow as pa
from deltalake import write_deltalake

from ..broker import Broker

DRIVER = "sparkqueue.bench.stream_driver"
DRAIN_TIMEOUT_SECONDS = 600
LOG_LINES = 40  # of a failed driver's standard error, in the error raised


def stream_kills(
    root: str, work: str, *, kills: int, messages: int, rows: int, files: int, seed: int = 7
) -> dict[str, Any]:
    """`messages` in the queue `in`, `rows` in `files` files of the Delta table WORK/src (a file
    a batch of the sink's query); `kills` runs of the driver, each killed 1-6 s after it
    started its queries; then one that drains both and says what the sinks hold."""
    broker = Broker(None, root)
    broker.create_queue("in").send_batch([f"m{i}" for i in range(messages)])
    broker.create_queue("sent")
    bodies = [f"r{i}" for i in range(rows)]
    for part in range(files):  # one append, one file
        write_deltalake(f"{work}/src", pa.table({"body": bodies[part::files]}), mode="append")
    rng = random.Random(seed)
    for run in range(kills):
        driver = _driver(root, work, "run", run)
        assert driver.stdout is not None
        if driver.stdout.readline().strip() != "started":
            _failed("did not start", driver.wait(), work, f"run{run}")
        time.sleep(rng.uniform(1.0, 6.0))  # mid-batch, somewhere
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    drained = _driver(root, work, "drain", kills)
    output, _ = drained.communicate(timeout=DRAIN_TIMEOUT_SECONDS)
    if drained.returncode:
        _failed("failed", drained.returncode, work, f"drain{kills}")
    seen = json.loads(output.strip().splitlines()[-1])
    landed, sent = Counter(seen["out"]), Counter(seen["sent"])
    return {
        "kills": kills,
        "messages": messages,
        "lost": messages - len(landed),
        "twice": sum(count - 1 for count in landed.values()),
        "left": seen["in_visible"] + seen["in_flight"],
        "rows": rows,
        "rows_lost": len(set(bodies) - set(sent)),
        "rows_twice": sum(count - 1 for count in sent.values()),
    }


def _driver(root: str, work: str, mode: str, run: int) -> subprocess.Popen:
    """A driver whose standard error goes to WORK/logs/MODE<run>.log, for a failure to show."""
    os.makedirs(f"{work}/logs", exist_ok=True)
    with open(f"{work}/logs/{mode}{run}.log", "w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", DRIVER, root, work, mode],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,  # its JVM and Python workers die with it
        )


def _failed(what: str, code: int, work: str, name: str) -> NoReturn:
    """Raise with the end of the driver's log: its Python traceback or Spark's error."""
    with open(f"{work}/logs/{name}.log", errors="replace") as log:
        tail = "".join(log.readlines()[-LOG_LINES:])
    raise RuntimeError(f"the streaming driver {name} {what} (exit {code}):\n{tail}")
