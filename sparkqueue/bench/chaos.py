"""Chaos: buffered consumers, a producer and the redrive job as OS processes on one local root,
the consumers and the job killed (SIGKILL) at random moments and started again, many times.
The consumers run the native engine (no JVM, as consumers on a local root do); the job runs on a
Spark session of its own, so the kills also land in Spark's commits.

Afterwards every message sent is accounted for (deleted after a consumer took it, or still in the
queue or its dead-letter queue) and none was handed out twice within its visibility window: a
buffered consumer hands a message out only while at least `share` of its timeout T is left, and
the next claim of it can come only after T, so two hand-outs of one message are at least T x share
apart, and no claim (message id, receive count) is handed out twice.

Each killed role is `python -m sparkqueue.bench.chaos ROLE ROOT FOLDER` (the producer is a thread
of the runner). What each did goes to files in FOLDER, written around the act they record (a
consumer logs a hand-out before deleting it; the producer logs ids after their send committed),
so a kill loses no record of an act that happened.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from ..broker import Broker
from ..session import spark_session

QUEUE, DEAD_LETTERS = "chaos", "chaos-dlq"
# Each message's visibility timeout: killed consumers' messages come back after it. It must far
# outlast a claim: with four JVMs on two cores a claim took over 4 s, and with 8 s every prefetch
# arrived with less than half its timeout left and was released again.
TIMEOUT_SECONDS = 30
SHARE = 0.5  # a buffered message is handed out only with this much of its timeout left
STOP_FILE = "stop"
# A hand-out is logged just after it happens; on two busy cores a process may pause in between.
CLOCK_SLACK_SECONDS = 1.0


@dataclass(frozen=True)
class ChaosReport:
    sent: int
    delivered: int  # hand-outs, redeliveries included
    deleted: int
    left: int  # still in the queue or its dead-letter queue
    kills: int
    lost: list[str]  # sent, never handed out, and gone
    unsent: list[str]  # in the tables but never sent
    too_soon: list[str]  # handed out twice within a visibility window


def run_chaos(
    spark: SparkSession,
    root: str,
    folder: Path,
    *,
    seconds: float,
    consumers: int = 2,
    messages: int = 600,
    kill_every: tuple[float, float] = (10.0, 25.0),
    seed: int | None = None,
    min_kills: int = 0,
) -> ChaosReport:
    """Runs the roles for `seconds`, killing one at a time every `kill_every` seconds (a random
    span; consumers and the job in turn, each once it is up), then lets the consumers drain what
    is left and checks the records. The producer runs here, on a thread, and is not killed.
    Kills need their victims up (the job's JVM is slow to start on a loaded machine): the run goes
    on past `seconds`, up to twice as long, until it has made `min_kills`."""
    rng = random.Random(seed)
    broker = Broker(spark, root)
    broker.create_queue(DEAD_LETTERS)
    queue = broker.create_queue(
        QUEUE,
        visibility_timeout=TIMEOUT_SECONDS,
        dead_letter_queue=DEAD_LETTERS,
        max_receive_count=5,
    )
    folder.mkdir(parents=True, exist_ok=True)
    roles = [f"consumer-{i}" for i in range(consumers)] + ["redrive"]
    running = {name: _start(name, root, folder) for name in roles}
    pace = max(0.05, seconds / 2 / (messages / 20))  # sends for about half the run
    sending = threading.Thread(target=produce, args=(queue, folder, messages, pace))
    sending.start()
    kills, started = 0, time.monotonic()

    def end() -> float:  # past `seconds` only while kills are missing, up to twice as long
        return started + (seconds if kills >= min_kills else 2 * seconds)

    while time.monotonic() < end():
        time.sleep(min(rng.uniform(*kill_every), max(0.0, end() - time.monotonic())))
        up = [name for name, process in running.items() if _is_up(process, folder)]
        kinds = (
            [name for name in up if name.startswith("consumer")],
            [n for n in up if n == "redrive"],
        )
        victims = kinds[kills % 2] or kinds[(kills + 1) % 2]  # consumers and the job in turn
        if time.monotonic() >= end() or not victims:
            continue
        victim = rng.choice(victims)
        running[victim].kill()
        running[victim].wait()
        kills += 1
        running[victim] = _start(victim, root, folder)
    sending.join()
    _drain(queue, deadline=time.monotonic() + 6 * TIMEOUT_SECONDS)
    (folder / STOP_FILE).touch()
    for process in running.values():
        if process.wait(timeout=300) != 0:
            raise RuntimeError(f"a chaos role failed; see {folder}")
    return account(folder, broker, kills)


def _start(name: str, root: str, folder: Path) -> subprocess.Popen[bytes]:
    role = "redrive" if name == "redrive" else "consumer"
    log = (folder / f"{name}-{time.monotonic_ns()}.out").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "sparkqueue.bench.chaos", role, root, str(folder)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _is_up(process: subprocess.Popen[bytes], folder: Path) -> bool:
    """Whether the role's process has its session and queue (killing it then loses real work)."""
    return (folder / f"up-{process.pid}").exists()


def _drain(queue: Any, deadline: float) -> None:
    """Waits until the consumers have taken everything (killed ones' messages come back first)."""
    while time.monotonic() < deadline:
        stats = queue.stats()
        if stats.visible + stats.in_flight + stats.delayed == 0:
            return
        time.sleep(1.0)  # the consumers' progress, on the wall clock


def account(folder: Path, broker: Broker, kills: int) -> ChaosReport:
    """Checks the records against what the queue and its dead-letter queue still hold."""
    left: set[str] = set()
    for name in (QUEUE, DEAD_LETTERS):
        table = broker.context.read(broker.context.record(name))
        left |= {row.message_id for row in table.where("shard >= 0").select("message_id").collect()}
    return tally(folder, left, kills)


def tally(folder: Path, left: set[str], kills: int) -> ChaosReport:
    """The report from the records in `folder` and the ids still in the tables (`left`)."""
    sent = set((folder / "sent.log").read_text().split())
    handed: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for path in folder.glob("delivered-*.log"):
        for line in path.read_text().splitlines():
            at, message_id, count = line.split()
            handed[message_id].append((float(at), int(count)))
    return ChaosReport(
        sent=len(sent),
        delivered=sum(len(times) for times in handed.values()),
        deleted=len(sent - left),
        left=len(left),
        kills=kills,
        lost=sorted(sent - left - set(handed)),
        unsent=sorted((left | set(handed)) - sent),
        too_soon=sorted(message_id for message_id, times in handed.items() if not _apart(times)),
    )


def _apart(times: list[tuple[float, int]]) -> bool:
    """Each claim handed out once, and hand-outs at least a window's guaranteed part apart."""
    ordered = sorted(times, key=lambda pair: pair[1])
    if len({count for _, count in ordered}) < len(ordered):
        return False
    gap = TIMEOUT_SECONDS * SHARE - CLOCK_SLACK_SECONDS
    return all(later[0] - earlier[0] >= gap for earlier, later in pairwise(ordered))


# -- the roles, each in a process of its own -------------------------------------------------------


def produce(queue: Any, folder: Path, messages: int, pace: float) -> None:
    """Sends `messages` in batches of 20, each batch's ids recorded once its send committed."""
    with (folder / "sent.log").open("a") as log:
        for start in range(0, messages, 20):
            ids = queue.send_batch([f"work {i}" for i in range(start, min(messages, start + 20))])
            log.write("\n".join(ids) + "\n")
            log.flush()
            time.sleep(pace)


def consumer(root: str, folder: Path) -> None:
    """A buffered consumer: the native engine, as every consumer on a local root (a JVM would
    serve it nothing, only slow its restarts)."""
    queue = Broker(None, root).get_queue(QUEUE)
    (folder / f"up-{os.getpid()}").touch()
    stop = folder / STOP_FILE
    with (
        (folder / f"delivered-{time.monotonic_ns()}.log").open("a") as log,
        queue.buffered(
            prefetch=20, visibility_timeout=TIMEOUT_SECONDS, min_visibility_share=SHARE
        ) as client,
    ):
        while not stop.exists():
            messages = client.receive(10, wait_time_seconds=1)
            if not messages:
                continue
            log.write(
                "".join(f"{time.time()} {m.message_id} {m.receive_count}\n" for m in messages)
            )
            log.flush()  # recorded before the delete is even queued
            client.delete_batch([m.receipt_handle for m in messages])


def redrive(root: str, folder: Path) -> None:
    broker = Broker(spark_session(), root)
    (folder / f"up-{os.getpid()}").touch()
    while not (folder / STOP_FILE).exists():
        broker.redrive()
        time.sleep(1.0)  # the job's cadence, short for the test


if __name__ == "__main__":
    role, root_, folder_ = sys.argv[1:]
    (consumer if role == "consumer" else redrive)(root_, Path(folder_))
