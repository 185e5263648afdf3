"""Real Spark servers for tests, started from the installed pyspark: a standalone master and
worker, and a Spark Connect server with Delta Lake."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pyspark

from sparkqueue.session import (
    DEFAULTS_FILE,
    DELTA_CATALOG,
    DELTA_EXTENSION,
    delta_maven_coordinate,
    read_properties,
)
from tests.processes import stop

SPARK_HOME = Path(pyspark.__file__).parent
CONNECT_IVY_HOME = Path.home() / ".ivy2-sparkqueue-connect"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def spark_env(log_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOG_DIR": str(log_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


@contextmanager
def daemon(args: list[str], log: Path, ready: str, env: dict[str, str]) -> Iterator[None]:
    """Runs a Spark daemon in the foreground until its log says `ready`; stops it afterwards."""
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 120
        while not re.search(ready, log.read_text(errors="replace")):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{args[1]} did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.2)
        yield
    finally:
        stop(process)


@contextmanager
def standalone_cluster(work: Path, *, cores: int = 2, memory: str = "2g") -> Iterator[str]:
    """A master and one worker (its executors are separate JVMs); yields the master URL."""
    work.mkdir(parents=True, exist_ok=True)
    env = spark_env(work)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port = free_port()
    master = [spark_class, "org.apache.spark.deploy.master.Master"]
    master += ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())]
    url = f"spark://127.0.0.1:{port}"
    worker = [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--cores", str(cores)]
    worker += ["--memory", memory, "--webui-port", str(free_port()), "--work-dir", str(work)]
    with (
        daemon(master, work / "master.log", "I have been elected leader", env),
        daemon(worker, work / "worker.log", "Successfully registered with master", env),
    ):
        yield url


@contextmanager
def connect_server(work: Path, attempts: int = 3) -> Iterator[str]:
    """A Spark Connect server (local[2]) with Delta's SQL extension and catalog; yields its URL.
    A port found free can be taken before the server binds it (its own driver's RPC service
    once took it): a start that failed to bind tries again on another port."""
    work.mkdir(parents=True, exist_ok=True)
    log = work / "connect.log"
    with ExitStack() as started:
        for attempt in range(1, attempts + 1):
            port = free_port()
            try:
                started.enter_context(
                    daemon(_connect_args(work, port), log, "Spark Connect server started",
                           spark_env(work))
                )  # fmt: skip
                break
            except RuntimeError:
                if attempt == attempts or "BindException" not in log.read_text(errors="replace"):
                    raise
        yield f"sc://127.0.0.1:{port}"


def _connect_args(work: Path, port: int) -> list[str]:
    conf = {
        "spark.master": "local[2]",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.ui.enabled": "false",
        "spark.sql.warehouse.dir": str(work / "warehouse"),  # catalog schemas without a LOCATION
        # Its own Ivy cache: this server starts while the run's own session resolves the same
        # jars, and two resolutions into one empty cache break each other's downloads.
        "spark.jars.ivy": str(CONNECT_IVY_HOME),
        "spark.jars.excludes": read_properties(DEFAULTS_FILE)["spark.jars.excludes"],
    }
    args = [str(SPARK_HOME / "bin" / "spark-submit"), "--packages", delta_maven_coordinate()]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return [*args, "--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
