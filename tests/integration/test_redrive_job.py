"""The redrive job as an OS process: a pass killed mid-move, then finished under spark-submit beside
a consumer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pyspark
import pytest

from sparkqueue import Broker
from sparkqueue.session import delta_maven_coordinate
from tests.integration.helpers import queue_table

pytestmark = pytest.mark.usefixtures("quick_drivers")

REPO = Path(__file__).resolve().parents[2]
# The killed pass is the native engine's (no JVM to start for it): the job that finishes it is
# Spark's, so the move's markers are read across engines as well.
KILL_AT_STEP = """
import os, signal, sys
from sparkqueue import Broker
from sparkqueue.services.redrive import Redrive

def die(step, queue):
    if step == sys.argv[2]:
        os.kill(os.getpid(), signal.SIGKILL)

Redrive(Broker(None, sys.argv[1]).context, on_step=die).run()
"""


@pytest.fixture
def wall_broker(spark, tmp_path) -> Broker:
    """A broker on the wall clock, shared with a job in another process."""
    return Broker(spark, str(tmp_path / "root"))


def exhausted_queue(broker: Broker, count: int) -> tuple[list[str], object, object]:
    dlq = broker.create_queue("jobs-dlq")
    queue = broker.create_queue("jobs", dead_letter_queue="jobs-dlq", max_receive_count=1)
    queue.send_batch([f"job-{i}" for i in range(count)])
    ids = sorted(m.message_id for m in queue.receive(count, visibility_timeout=0))
    return ids, queue, dlq


def message_ids(queue) -> list[str]:
    return sorted(row.message_id for row in queue_table(queue).collect())


def test_a_killed_pass_is_finished_by_a_spark_submit_job_beside_a_consumer(wall_broker):
    exhausted, queue, dlq = exhausted_queue(wall_broker, 10)
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AT_STEP, wall_broker.root, "copied"], cwd=REPO, check=False
    )
    assert killed.returncode == -signal.SIGKILL
    # Killed between the two commits: copied to the dead-letter queue, still marked in the source.
    assert message_ids(dlq) == message_ids(queue) == exhausted

    queue.send_batch([f"work-{i}" for i in range(20)])
    consumed: list[str] = []

    def consume() -> None:
        while len(consumed) < 20:
            for message in queue.receive(5, visibility_timeout=300, wait_time_seconds=1):
                queue.delete(message.receipt_handle)
                consumed.append(message.message_id)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    job = subprocess.run(
        [
            str(spark_submit),
            "--properties-file",
            "conf/spark-defaults.conf",
            "--packages",
            delta_maven_coordinate(),
            "jobs/redrive.py",
            "--once",
            "--root",
            wall_broker.root,
        ],
        cwd=REPO,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    consumer.join(timeout=300)
    assert job.returncode == 0, job.stderr[-3000:]
    assert (
        "redrive jobs: moved 10" in job.stdout
    )  # the interrupted move, finished  # spark-submit merges the driver's stderr there
    assert len(consumed) == len(set(consumed)) == 20
    assert message_ids(dlq) == exhausted
    assert message_ids(queue) == []
    assert not set(consumed) & set(exhausted)
