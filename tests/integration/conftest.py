"""One local Spark session for the whole run; a fresh broker on a fresh folder for every test."""

from __future__ import annotations

import os

import pytest
from pyspark.sql import SparkSession

from sparkqueue import Broker, spark_session
from sparkqueue.engine.rounds import statement as statement_module
from sparkqueue.testing import FakeClock
from tests.integration.sqs_clients import endpoint, json_client

# The worker's own driver collects garbage with HotSpot's parallel collector instead of
# spark-defaults.conf's G1: on two cores it costs the tests' Spark statements less CPU (the Spark
# tests of test_ranges and test_acknowledge, one run each way: 9% less time, 11-12% less CPU).
SESSION_JVM = {"spark.driver.extraJavaOptions": "-XX:+UseParallelGC"}


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    session = spark_session(**SESSION_JVM)
    yield session
    session.stop()


# HotSpot's C1 compiler alone, for the Spark drivers that a module's tests start and stop within
# seconds or minutes (killed drivers, Spark jobs, a cluster's driver). C2's compiler threads cost
# such a JVM more CPU than its faster code saves, and the run is CPU-bound on two cores: the
# modules that use this went from 1,114 to 892 s of test time (one run each). Not for
# this process's own session (`spark`): it runs most of the tests' Spark statements for the
# whole run, and C1 alone made most of its modules 1.6-2.2x slower.
QUICK_JVM = "-XX:TieredStopAtLevel=1"


@pytest.fixture
def quick_drivers(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Spark drivers this test starts compile with C1 alone (`spark` starts first, with
    the default compilers), after any options the environment gives them."""
    given = os.environ.get("SPARK_SUBMIT_OPTS", "")
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", f"{given} {QUICK_JVM}".strip())


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def broker(request, spark: SparkSession, tmp_path, clock: FakeClock) -> Broker:
    """A broker on a local root: the native engine ("auto"), or the engine a module's
    `both_engines` parametrization names."""
    engine = getattr(request, "param", "auto")
    calls = getattr(request.node, "callspec", None)
    if calls is not None and calls.params.get("statement") == "merge":
        engine = "spark"  # a round's MERGE form is the Spark engine's (see `statement`)
    return Broker(spark, str(tmp_path / "root"), clock=clock, engine=engine)


# Queue-semantics tests whose statements differ by engine run on both: `@both_engines`. Checks
# made before any statement (arguments, handle parsing) and the services above the engines
# (heartbeats, long polls) run once, on the native engine: a Spark operation costs 1-3 s.
both_engines = pytest.mark.parametrize("broker", ["native", "spark"], indirect=True)


@pytest.fixture
def queue(broker: Broker):
    return broker.create_queue("work")


@pytest.fixture(params=["update", "merge"])
def statement(request, monkeypatch) -> str:
    """Both ways a round commits, on either engine: one UPDATE (small rounds) and one MERGE
    (larger ones)."""
    if request.param == "merge":
        monkeypatch.setattr(statement_module, "EXCHANGE_UPDATE_MAX_ROWS", {"spark": 0, "native": 0})
    return request.param


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    """The SQS endpoint (`sparkqueue serve`, a process of its own) on a root of its own, with
    access keys: (root, url). Without its scheduled redrive pass: that would start a JVM in the
    server for the rest of the session, a pass a minute over every test's queues, on the cores
    the other tests run on (test_endpoint_sqs.py's `pinned` endpoint tests the schedule)."""
    folder = tmp_path_factory.mktemp("endpoint")
    with endpoint(folder / "root", folder / "serve.log", extra=["--redrive-every", "0"]) as url:
        yield folder / "root", url


@pytest.fixture(scope="session")
def sqs(served):
    """boto3's SQS client on the endpoint (the JSON protocol, signed)."""
    return json_client(served[1])
