"""Chaos: buffered consumers, a producer and a Spark job as OS processes on one root (a local
folder, or object storage), the consumers and the job killed (SIGKILL) at random moments and
started again, many times. The consumers run the native engine (no JVM); the job runs on a Spark
session of its own, so the kills also land in Spark's commits. The job runs the redrive pass, and
with `spark_work` it also sends DataFrames (`send_df`) and claims and deletes them
(`receive_df`, `delete_df`): both engines then write the queue at once.

Afterwards every message sent is accounted for (deleted after a consumer took it, or still in the
queue or its dead-letter queue) and none was handed out twice within its visibility window: a
buffered consumer hands a message out only while at least `share` of its timeout T is left (a
claim of the job's, at once), and the next claim of it can come only after T, so two hand-outs of
one message are at least T x share apart, and no claim (message, receive count) is handed out
twice. Messages are known by their bodies, unique across senders.

Each killed role is `python -m sparkqueue.bench.chaos ROLE ROOT FOLDER` (the producer is a thread
of the runner); on object storage the roles take their credentials from the environment. What
each did goes to files in FOLDER, written around the act they record (a consumer logs a hand-out
before deleting it; a sender logs bodies after their send committed), so a kill loses no record
of an act that happened.

    python -m sparkqueue.bench --only chaos --chaos-seconds 600 --chaos-messages 3000
"""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..broker import Broker
from ..session import spark_session
from ..store.tables import is_object_store
from .reckoning import (
    DEAD_LETTERS,
    FAILED_PREFIXES,
    QUEUE,
    SHARE,
    TIMEOUT_SECONDS,
    ChaosReport,
    account,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STOP_FILE = "stop"
SENDS_OVER_FILE = "sends-over"  # present: the job claims and redrives but sends no more
SPARK_WORK_FILE = "spark-work"  # present: the job sends and claims DataFrames too
JOB_BATCH = 10  # rows the job sends, and claims, at a time


def run_chaos(
    spark: SparkSession | None,
    root: str,
    folder: Path,
    *,
    seconds: float,
    consumers: int = 2,
    messages: int = 600,
    kill_every: tuple[float, float] = (10.0, 25.0),
    seed: int | None = None,
    min_kills: int = 0,
    spark_work: bool = False,
    storage_options: Mapping[str, str] | None = None,
    send_seconds: float | None = None,
) -> ChaosReport:
    """Runs the roles for `seconds`, killing one at a time every `kill_every` seconds (a random
    span; consumers and the job in turn, each once it is up), then lets the consumers drain what
    is left and checks the records. The producer runs here, on a thread, and is not killed.
    Kills need their victims up (the job's JVM is slow to start on a loaded machine): the run goes
    on past `seconds`, up to three times as long, until it has made `min_kills` and, with
    `spark_work`, until a job has done a round. On object storage
    `storage_options` are the roles' environment too. `send_seconds`: the producer stops then,
    whatever it has sent (the soak's steady rate); by default it sends all `messages`."""
    rng = random.Random(seed)
    broker = Broker(spark, root, storage_options=storage_options)
    broker.create_queue(DEAD_LETTERS)
    queue = broker.create_queue(
        QUEUE,
        visibility_timeout=TIMEOUT_SECONDS,
        dead_letter_queue=DEAD_LETTERS,
        max_receive_count=5,
    )
    folder.mkdir(parents=True, exist_ok=True)
    for marker in (STOP_FILE, SENDS_OVER_FILE, SPARK_WORK_FILE):  # a folder used before
        (folder / marker).unlink(missing_ok=True)
    if spark_work:
        (folder / SPARK_WORK_FILE).touch()
    environment = {**os.environ, **(storage_options or {})}
    roles = [f"consumer-{i}" for i in range(consumers)] + ["job"]
    running = {name: _start(name, root, folder, environment) for name in roles}
    # sends for about half the run, or at a steady rate for `send_seconds`
    pace = max(0.05, (send_seconds or seconds / 2) / (messages / 20))
    until = None if send_seconds is None else time.monotonic() + send_seconds
    halt = threading.Event()  # the producer stops early: the run failed
    sending = threading.Thread(target=produce, args=(queue, folder, messages, pace, until, halt))
    sending.start()
    kills, started = 0, time.monotonic()
    jobs = [running["job"]]  # every job process started, to know whether one has done a round

    ready = None if spark_work else started  # when the run may end (a job has done a round)

    def end() -> float:
        """Past `seconds` only while kills are missing, or with spark work while no job has done
        a round yet (its JVM is slow to start on a loaded machine), up to three times as long."""
        nonlocal ready
        if ready is None and any(_is_up(job, folder) for job in jobs):
            ready = time.monotonic()
        return started + (seconds if kills >= min_kills and ready is not None else 3 * seconds)

    try:
        kill_at = started + rng.uniform(*kill_every)
        while time.monotonic() < end():
            # short naps: the end moves closer once a job is up or the kills are made
            time.sleep(max(0.0, min(1.0, kill_at - time.monotonic(), end() - time.monotonic())))
            if time.monotonic() < kill_at:
                continue
            kill_at = time.monotonic() + rng.uniform(*kill_every)
            up = [name for name, process in running.items() if _is_up(process, folder)]
            kinds = (
                [name for name in up if name.startswith("consumer")],
                [n for n in up if n == "job"],
            )
            victims = kinds[kills % 2] or kinds[(kills + 1) % 2]  # consumers and the job in turn
            if time.monotonic() >= end() or not victims:
                continue
            victim = rng.choice(victims)
            running[victim].kill()
            running[victim].wait()
            kills += 1
            running[victim] = _start(victim, root, folder, environment)
            if victim == "job":
                jobs.append(running[victim])
        ran = time.monotonic() - started
        sending.join()
        (folder / SENDS_OVER_FILE).touch()  # the job's sends end too, so the queue can empty
        drained = _drain(queue, deadline=time.monotonic() + 6 * TIMEOUT_SECONDS)
    finally:  # the roles and the producer stop whatever happened here: none runs on alone
        halt.set()
        (folder / STOP_FILE).touch()
        failed = _stop(running)
        sending.join()
    if failed:
        raise RuntimeError(f"chaos roles {failed} failed; see {folder}")
    job_ready = None if ready is None or not spark_work else round(ready - started, 1)
    report = account(folder, broker, kills)
    return replace(report, run_s=round(ran, 1), job_ready_s=job_ready, drained=drained)


def _start(
    name: str, root: str, folder: Path, environment: Mapping[str, str]
) -> subprocess.Popen[bytes]:
    role = "job" if name == "job" else "consumer"
    log = (folder / f"{name}-{time.monotonic_ns()}.out").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "sparkqueue.bench.chaos", role, root, str(folder)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(environment),
    )


def _is_up(process: subprocess.Popen[bytes], folder: Path) -> bool:
    """Whether the role's process has its session and queue (killing it then loses real work)."""
    return (folder / f"up-{process.pid}").exists()


def _stop(running: Mapping[str, subprocess.Popen[bytes]]) -> list[str]:
    """Waits for each role to see the stop file and end (killing one that has not within five
    minutes); returns the names of those that did not end well."""
    failed = []
    for name, process in running.items():
        try:
            code = process.wait(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        if code != 0:
            failed.append(name)
    return failed


def _drain(queue: Any, deadline: float) -> bool:
    """Waits until the consumers have taken everything (killed ones' messages come back first);
    whether they had by the deadline."""
    while time.monotonic() < deadline:
        try:
            stats = queue.stats()
        except Exception as error:  # a store's fault (the soak): look again
            print(f"drain: counting failed: {error}", file=sys.stderr, flush=True)
            stats = None
        if stats is not None and stats.visible + stats.in_flight + stats.delayed == 0:
            return True
        time.sleep(1.0)  # the consumers' progress, on the wall clock
    return False


# -- the roles, each in a process of its own -------------------------------------------------------


def produce(
    queue: Any,
    folder: Path,
    messages: int,
    pace: float,
    until: float | None = None,
    halt: threading.Event | None = None,
) -> None:
    """Sends `messages` in batches of 20, each batch's bodies recorded before its send and once
    it committed (a send that raised may have landed: the tally finds it in the tables); stops
    at `until`, or once `halt` is set."""
    halt = halt or threading.Event()
    with (
        (folder / "sending-producer.log").open("a") as sending,
        (folder / "sent.log").open("a") as log,
    ):
        for start in range(0, messages, 20):
            if halt.is_set() or (until is not None and time.monotonic() > until):
                return
            bodies = [f"work-{i}" for i in range(start, min(messages, start + 20))]
            sending.write("\n".join(bodies) + "\n")
            sending.flush()
            try:
                queue.send_batch(bodies)
            except Exception as error:  # a store's fault (the soak): landed or not, the tally says
                print(f"{FAILED_PREFIXES[2]}: {error}", file=sys.stderr, flush=True)
                continue
            log.write("\n".join(bodies) + "\n")
            log.flush()
            halt.wait(pace)


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
            try:
                messages = client.receive(10, wait_time_seconds=1)
            except Exception as error:  # a store's fault (the soak): the next receive tries again
                print(f"{FAILED_PREFIXES[0]}: {error}", flush=True)
                continue
            if not messages:
                continue
            log.write("".join(f"{time.time()} {m.body} {m.receive_count}\n" for m in messages))
            log.flush()  # recorded before the delete is even queued
            client.delete_batch([m.receipt_handle for m in messages])


def job(root: str, folder: Path) -> None:
    """The Spark job: the redrive pass, and with spark work DataFrames sent, claimed and deleted
    (each claim recorded before its delete), on a session of its own (set up for the root's
    object store from the environment's credentials)."""
    on_store = is_object_store(root)
    spark = spark_session(storage_options={} if on_store else None)
    broker = Broker(spark, root, storage_options={} if on_store else None)
    spark_work = (folder / SPARK_WORK_FILE).exists()
    started = time.monotonic_ns()
    with (
        (folder / f"sending-job-{started}.log").open("a") as sending,
        (folder / f"sent-job-{started}.log").open("a") as sent,
        (folder / f"delivered-job-{started}.log").open("a") as delivered,
    ):
        for batch in itertools.count():
            if (folder / STOP_FILE).exists():
                return
            sends = spark_work and not (folder / SENDS_OVER_FILE).exists()
            try:
                _round(
                    broker, spark_work, sends, f"job-{started}-{batch}", sending, sent, delivered
                )
            except Exception as error:  # a store's fault (the soak): the records say what landed
                print(f"{FAILED_PREFIXES[1]} {batch}: {error}", flush=True)
                time.sleep(1.0)
                continue
            # Up (worth a kill) once a whole round has run: a JVM's first round is slow.
            (folder / f"up-{os.getpid()}").touch()
            time.sleep(1.0)  # the job's cadence, short for the test


def _round(
    broker: Broker,
    spark_work: bool,
    sends: bool,
    prefix: str,
    sending: Any,
    sent: Any,
    delivered: Any,
) -> None:
    """One round of the job: with spark work a DataFrame sent (while `sends`), claimed and
    deleted (each step recorded around its act: a send before and after, a claim before its
    delete), then the redrive pass."""
    spark, queue = broker.spark, broker.get_queue(QUEUE)
    if spark_work and spark is not None:
        if sends:
            bodies = [f"{prefix}-{i}" for i in range(JOB_BATCH)]
            sending.write("\n".join(bodies) + "\n")
            sending.flush()
            queue.send_df(spark.createDataFrame([(body,) for body in bodies], "body string"))
            sent.write("\n".join(bodies) + "\n")
            sent.flush()
        claimed = queue.receive_df(JOB_BATCH)
        rows = claimed.select("body", "receive_count").collect()
        delivered.write("".join(f"{time.time()} {r[0]} {r[1]}\n" for r in rows))
        delivered.flush()
        queue.delete_df(claimed)
    broker.redrive()


if __name__ == "__main__":
    role, root_, folder_ = sys.argv[1:]
    (consumer if role == "consumer" else job)(root_, Path(folder_))
