"""Celery through the SQS endpoint: one worker process on kombu's SQS transport, tasks end to end.

The endpoint serves the benchmark's broker in this process; the worker (`celery worker --pool
solo`, a process of its own) takes tasks from it as it would from Amazon SQS, and each task
appends a line to a file. One warm-up task first, so the worker's start is not counted; then
`tasks` tasks sent at once, timed until the last one has run.

    python -m sparkqueue.bench --only celery --engine native --celery-tasks 50
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..broker import Broker
from ..endpoint import AccessKeys, SqsEndpoint

KEY, SECRET = "bench", "bench-secret"
QUEUE = "celery-bench"
TASKS_MODULE = """
import os

from celery import Celery

app = Celery("sparkqueue_bench", broker=os.environ["SPARKQUEUE_BENCH_BROKER"])
app.conf.update(
    broker_transport_options={"region": "us-east-1", "is_secure": False,
                              "wait_time_seconds": 1, "polling_interval": 0},
    broker_connection_retry_on_startup=True,
    task_default_queue="celery-bench",
    worker_prefetch_multiplier=10,
)


@app.task(name="touch")
def touch(path, n):
    with open(path, "a") as done:
        done.write(f"{n}\\n")
"""


def celery_load(broker: Broker, tasks: int = 50, timeout: float = 300.0) -> dict[str, Any]:
    """Tasks per second through `sparkqueue serve`'s SQS API, one Celery worker, end to end."""
    with tempfile.TemporaryDirectory(prefix="sparkqueue-celery-") as folder:
        Path(folder, "bench_tasks.py").write_text(TASKS_MODULE)
        done = Path(folder, "done.txt")
        keys = AccessKeys.parse(f"{KEY}:{SECRET}")
        with SqsEndpoint(broker, port=0, access_keys=keys, redrive_every=0) as endpoint:
            address = urlparse(endpoint.url)
            env = {
                **os.environ,
                "PYTHONPATH": folder,
                "SPARKQUEUE_BENCH_BROKER": f"sqs://{KEY}:{SECRET}@{address.hostname}:{address.port}",
            }
            worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "bench_tasks", "worker", "--pool", "solo",
                 "--without-gossip", "--without-mingle", "--without-heartbeat",
                 "--loglevel", "WARNING", "-Q", QUEUE],
                cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                app = _app(folder, env)
                app.send_task("touch", args=[str(done), -1], queue=QUEUE)
                _wait_for_lines(done, 1, timeout)  # the worker is up and has taken a task
                began = time.perf_counter()
                for n in range(tasks):
                    app.send_task("touch", args=[str(done), n], queue=QUEUE)
                _wait_for_lines(done, tasks + 1, timeout)
                seconds = time.perf_counter() - began
            finally:
                worker.terminate()
                worker.wait(timeout=30)
    return {"tasks": tasks, "seconds": seconds, "per_s": tasks / seconds}


def _app(folder: str, env: dict[str, str]) -> Any:
    """The tasks module's Celery app, loaded in this process as the producer."""
    os.environ["SPARKQUEUE_BENCH_BROKER"] = env["SPARKQUEUE_BENCH_BROKER"]
    sys.modules.pop("bench_tasks", None)  # an earlier run's app names an endpoint now closed
    sys.path.insert(0, folder)
    try:
        import bench_tasks  # type: ignore[import-not-found]
    finally:
        sys.path.remove(folder)
    return bench_tasks.app


def _wait_for_lines(path: Path, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or len(path.read_text().splitlines()) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"Celery ran fewer than {count} tasks in {timeout:.0f} s")
        time.sleep(0.01)  # polling a file the worker writes, not waiting out a timeout
