"""The benchmark's scenarios: each builds its queues on a broker, runs, and returns its figures."""

from __future__ import annotations

import platform
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from ..broker import Broker
from ..store.spark_s3 import session_commits_conditionally
from ..testing import FakeClock
from .backlog import bodies, fill
from .history import console_pages, history_cost
from .loads import load, native_batches
from .shared import shared
from .window import during_window


@dataclass(frozen=True)
class Sizes:
    """How big each scenario runs; --smoke shrinks everything to seconds."""

    messages: int = 1_000_000
    drain_batch: int = 100_000
    operations: int = 5_000
    window: int = 100  # operations compared for drift: the first and the last this many
    load_seconds: float = 60.0
    consumers: int = 4
    redrive_messages: int = 1_000_000
    expired: int = 10_000
    worker_backlog: int = 300_000
    worker_seconds: float = 45.0
    worker_batches: str = "10,100,1000,10000"  # the worker loop's batch sizes, each with 1 and 4
    prefetch: int = 1_000  # the buffered client's, in the buffered scenario
    chaos_seconds: float = 600.0  # chaos: only with --only chaos (it starts OS processes)
    chaos_messages: int = 3_000
    endpoint_seconds: float = 30.0  # each of 1 and 8 boto3 clients on the SQS endpoint
    celery_tasks: int = 50  # through the endpoint, one Celery worker, end to end
    page_reads: int = 30  # GETs of each console page
    scaling_seconds: float = 10.0  # each cell of the scaling grid (only with --only scaling)
    scaling_batches: str = "10,100,1000,10000"
    warm_up_rounds: int = (
        2  # bulk sends before the timed one: JIT-compiled, like a long-running job
    )


SMOKE = Sizes(
    messages=2_000,
    drain_batch=1_000,
    operations=4,
    window=2,
    load_seconds=2.0,
    consumers=2,
    redrive_messages=2_000,
    expired=100,
    worker_backlog=200,
    worker_seconds=1.0,
    worker_batches="10",
    prefetch=20,
    endpoint_seconds=1.0,
    celery_tasks=3,
    page_reads=3,
    warm_up_rounds=0,  # the smoke run checks that it works, not how fast
)


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def bulk(broker: Broker, sizes: Sizes) -> dict[str, float]:
    warm_up = broker.create_queue("bulk-warm-up")  # a warm session: the JVM has compiled the path
    for _ in range(sizes.warm_up_rounds):
        warm_up.send_df(bodies(broker.spark, sizes.messages))
    broker.delete_queue("bulk-warm-up")
    queue = broker.create_queue("bulk")
    frame = bodies(broker.spark, sizes.messages).cache()
    frame.count()  # the input is ready before the clock starts
    enqueue_s, sent = timed(lambda: queue.send_df(frame))
    frame.unpersist()

    def drain() -> int:
        drained = 0
        while True:
            batch = queue.receive_df(sizes.drain_batch, visibility_timeout=3_600)
            deleted = len(queue.delete_df(batch).successful)
            if not deleted:
                return drained
            drained += deleted

    drain_s, drained = timed(drain)
    return {
        "enqueued": sent,
        "enqueue_s": enqueue_s,
        "enqueue_per_s": sent / enqueue_s,
        "drained": drained,
        "drain_s": drain_s,
        "drain_per_s": drained / drain_s,
    }


def latency(broker: Broker, sizes: Sizes) -> dict[str, Any]:
    queue = broker.create_queue("latency")
    fill(broker, queue, sizes.operations + 10)
    receives: list[float] = []
    deletes: list[float] = []
    for _ in range(sizes.operations):
        took, [message] = timed(lambda: queue.receive(1, visibility_timeout=3_600))
        receives.append(took)
        deletes.append(timed(lambda m=message: queue.delete(m.receipt_handle))[0])
    first = statistics.median(receives[: sizes.window])
    last = statistics.median(receives[-sizes.window :])
    return {
        "receive_p50_ms": statistics.median(receives) * 1000,
        "receive_p99_ms": percentile(receives, 0.99) * 1000,
        "delete_p50_ms": statistics.median(deletes) * 1000,
        "delete_p99_ms": percentile(deletes, 0.99) * 1000,
        "drift": last / first,
        "receive_ms": [value * 1000 for value in receives],
        "delete_ms": [value * 1000 for value in deletes],
    }


FIFO_GROUPS = 50


def fifo_load(broker: Broker, sizes: Sizes) -> dict[str, Any]:
    """Two consumers receive(10) + delete_batch on a FIFO queue of FIFO_GROUPS groups for a
    while; afterwards every delivery is checked: none twice, each group in send order."""
    queue = broker.create_queue("load.fifo", fifo=True)
    backlog = int(sizes.load_seconds * 400) + 100  # more than two consumers take meanwhile
    fill(broker, queue, backlog, groups=FIFO_GROUPS)
    delivered: list[Any] = []
    stop = threading.Event()
    lock = threading.Lock()

    def consume() -> None:
        while not stop.is_set():
            messages = queue.receive(10, visibility_timeout=3_600)
            if messages:
                with lock:  # noted before the delete lets the group go to the other consumer
                    delivered.extend(messages)
                queue.delete_batch([m.receipt_handle for m in messages])

    during_window([consume, consume], sizes.load_seconds, stop)
    out_of_order = 0
    for group in {m.group_id for m in delivered}:
        numbers = [m.sequence_number for m in delivered if m.group_id == group]
        out_of_order += sum(1 for a, b in pairwise(numbers) if b <= a)
    ids = [m.message_id for m in delivered]
    return {
        "delivered": len(ids),
        "per_s": len(ids) / sizes.load_seconds,
        "duplicates": len(ids) - len(set(ids)),
        "out_of_order": out_of_order,
    }


def redrive(spark: SparkSession, root: str, sizes: Sizes) -> dict[str, float]:
    """A pass over a queue of `redrive_messages` with `expired` receives to release: on Spark
    (a broker with a session) and through the native engine (one without), each on a queue of
    its own, set up alike, one after the other."""
    clock = FakeClock()
    broker = Broker(spark, root, clock=clock)
    for engine in ENGINES:
        queue = broker.create_queue(f"redrive-{engine}", visibility_timeout=30)
        queue.send_df(bodies(spark, sizes.redrive_messages))
        queue.receive_df(sizes.expired).count()
    clock.advance(31)
    native = Broker(None, root, clock=clock)
    spark_s, on_spark = timed(lambda: broker.redrive(["redrive-spark"]))
    native_s, natively = timed(lambda: native.redrive(["redrive-native"]))
    return {
        "redrive_s": spark_s,
        "released": on_spark.released,
        "native_redrive_s": native_s,
        "native_released": natively.released,
    }


def buffered_latency(broker: Broker, sizes: Sizes) -> dict[str, Any]:
    """receive(1) and delete through a buffered client (prefetch 100, the default)."""
    queue = broker.create_queue("latency-buffered")
    fill(broker, queue, sizes.operations + 10)
    receives: list[float] = []
    deletes: list[float] = []
    with queue.buffered(visibility_timeout=3_600) as client:
        for _ in range(sizes.operations):
            took, [message] = timed(lambda: client.receive(1))
            receives.append(took)
            deletes.append(timed(lambda m=message: client.delete(m.receipt_handle))[0])
    return {
        "receive_p50_ms": statistics.median(receives) * 1000,
        "receive_p99_ms": percentile(receives, 0.99) * 1000,
        "delete_p50_ms": statistics.median(deletes) * 1000,
    }


def worker(broker: Broker, sizes: Sizes) -> dict[str, Any]:
    """`consume` with a no-op handler for `worker_seconds` per batch size, with 1 worker and with
    4 in one driver (threads), on a backlog topped up to `worker_backlog` before each run."""
    queue = broker.create_queue("worker", visibility_timeout=600)
    waiting = 0
    figures: dict[str, Any] = {}
    for batch in [int(size) for size in sizes.worker_batches.split(",")]:
        for workers in (1, WORKERS):
            if waiting < sizes.worker_backlog:
                fill(broker, queue, sizes.worker_backlog - waiting)
                waiting = sizes.worker_backlog
            took, reports = timed(
                lambda b=batch, w=workers: _loops(queue, b, w, sizes.worker_seconds)
            )
            deleted = sum(report.deleted for report in reports)
            waiting -= deleted
            figures[f"batch {batch}, {workers} worker{'s' if workers > 1 else ''}"] = {
                "batch": batch,
                "workers": workers,
                "deleted": deleted,
                "per_s": deleted / took,
            }
    return figures


def _loops(queue: Any, batch: int, workers: int, seconds: float) -> list[Any]:
    """Runs `workers` worker loops on threads for `seconds`; their reports."""
    stop = threading.Event()
    reports: list[Any] = []

    def loop() -> None:
        reports.append(
            queue.consume(lambda frame: None, batch_size=batch, stop=stop, poll_interval=0)
        )

    during_window([loop] * workers, seconds, stop)
    return reports


WORKERS = 4  # the worker scenario's "many workers in one driver"
SCENARIOS = ("bulk", "latency", "load", "fifo", "buffered", "redrive", "worker", "endpoint",
             "celery", "history", "console", "scaling", "chaos")  # fmt: skip
# scaling and chaos run when named: they start OS processes for minutes
DEFAULT_SCENARIOS = SCENARIOS[:-2]
ENGINES = ("native", "spark")
# What each engine runs: the per-message scenarios. DataFrame work (bulk, redrive) is Spark's.
PER_ENGINE = ("latency", "load", "fifo", "buffered", "worker", "endpoint", "celery", "history")


def run(
    spark: SparkSession,
    root: str,
    sizes: Sizes,
    scenarios: Sequence[str] = DEFAULT_SCENARIOS,
    engines: Sequence[str] = ENGINES,
    object_store: str | None = None,
) -> dict[str, Any]:
    """The scenarios; the per-message ones once per engine, each on a root of its own, one
    after the other in this one run (so their figures compare: an A/B on one machine), and
    with `object_store` (an s3://... root) once more there, natively (no Spark: no worker loop)."""
    results: dict[str, Any] = {"sizes": asdict(sizes)}
    if "bulk" in scenarios:
        results["bulk"] = bulk(Broker(spark, root), sizes)
    per_engine = [name for name in scenarios if name in PER_ENGINE]
    if per_engine:
        results["engines"] = {
            engine: per_message(Broker(spark, f"{root}/{engine}", engine=engine), sizes, per_engine)
            for engine in engines
        }
        if object_store:
            where = f"native on {object_store.split(':', 1)[0]}"
            broker = Broker(None, f"{object_store.rstrip('/')}/{uuid.uuid4().hex[:8]}")
            without_spark = [name for name in per_engine if name != "worker"]
            results["engines"][where] = per_message(broker, sizes, without_spark)
            if session_commits_conditionally(spark, object_store):  # both engines on one root
                beside = Broker(spark, f"{broker.root}-shared", storage_options={})
                figures = latency(beside, sizes)
                results["shared"] = shared(beside, sizes.load_seconds, sizes.consumers, figures)
    if "redrive" in scenarios:
        results["redrive"] = redrive(spark, f"{root}/redrive", sizes)
    if "console" in scenarios:
        results["console"] = console_pages(f"{root}/console", sizes.page_reads)
    if "scaling" in scenarios:
        from .scaling import scaling  # not at import: its processes run it as main

        batches = [int(batch) for batch in sizes.scaling_batches.split(",")]
        results["scaling"] = scaling(f"{root}/scaling", batches, sizes.scaling_seconds)
    if "chaos" in scenarios:
        from .chaos import run_chaos  # not at import: `-m sparkqueue.bench.chaos` runs it as main

        report = run_chaos(
            spark,
            f"{root}/chaos",
            Path(root) / "chaos-records",
            seconds=sizes.chaos_seconds,
            consumers=sizes.consumers,
            messages=sizes.chaos_messages,
        )
        results["chaos"] = asdict(report)
    results["machine"] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "master": spark.conf.get("spark.master", "?"),
        "spark": spark.version,
    }
    return results


def per_message(broker: Broker, sizes: Sizes, scenarios: Sequence[str]) -> dict[str, Any]:
    """The per-message scenarios on one broker (one engine)."""
    results: dict[str, Any] = {}
    if "latency" in scenarios:
        results["latency"] = latency(broker, sizes)
    if "load" in scenarios:
        results["load_alone"] = load(broker, sizes.load_seconds, sizes.consumers, name="load-alone")
        results["load_with_producer"] = load(
            broker, sizes.load_seconds, sizes.consumers, name="load-producer", sender=native_batches
        )
        results["load_ratio"] = results["load_with_producer"]["per_s"] / max(
            results["load_alone"]["per_s"], 1e-9
        )
    if "fifo" in scenarios:
        results["fifo_load"] = fifo_load(broker, sizes)
    if "buffered" in scenarios:
        results["buffered_latency"] = buffered_latency(broker, sizes)
        results["buffered_load"] = load(
            broker,
            sizes.load_seconds,
            sizes.consumers,
            name="load-buffered",
            prefetch=sizes.prefetch,
        )
    if "worker" in scenarios:
        results["worker"] = worker(broker, sizes)
    if "endpoint" in scenarios:
        from .endpoint import endpoint_load  # needs boto3, from the dev extra

        results["endpoint"] = endpoint_load(broker, sizes.endpoint_seconds)
    if "celery" in scenarios:
        from .celery_load import celery_load  # needs celery, from the dev extra

        results["celery"] = celery_load(broker, sizes.celery_tasks)
    if "history" in scenarios:
        results["history"] = history_cost(broker, sizes.operations)
    return results
