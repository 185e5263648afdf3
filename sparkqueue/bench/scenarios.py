"""The benchmark's scenarios and the run of them: each builds its queues on a broker, runs, and
returns its figures. `python -m sparkqueue.bench --only NAME` (repeatable) runs some of them;
this module holds the small ones (bulk send and drain, single-message latency and its drift,
the buffered client, one redrive pass) and hands the others to their modules."""

from __future__ import annotations

import platform
import statistics
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from ..broker import Broker
from ..limits import FILE_RETENTION_HOURS, LOCAL_LOG_MINUTES
from ..store.spark_s3 import session_commits_conditionally
from ..testing import FakeClock
from .backlog import bodies, fill
from .checkpoints import checkpoints
from .day import Traffic, day
from .endpoint import endpoint_load
from .fair import fair
from .fifo import fifo
from .history import console_pages, history_cost
from .loads import load, native_batches
from .peers import peers
from .phases import phases
from .shared import shared
from .start import start_times
from .timing import p50_ms, percentile, rounds, timed
from .upkeep import upkeep
from .worker import worker


@dataclass(frozen=True)
class Sizes:
    """How big each scenario runs, and with what settings (each an option: `--load-seconds 20`);
    --smoke shrinks everything to seconds."""

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
    soak_seconds: float = 3_600.0  # soak: only with --only soak and --object-store (see soak.py)
    soak_rate: float = 20.0  # the soak's producer, msg/s
    endpoint_seconds: float = 30.0  # each of 1 and 8 boto3 clients on the SQS endpoint
    celery_tasks: int = 50  # through the endpoint, one Celery worker, end to end
    page_reads: int = 30  # GETs of each console page
    scaling_seconds: float = 10.0  # each cell of the scaling grid (only with --only scaling)
    scaling_batches: str = "10,100,1000,10000"
    drivers_seconds: float = 60.0  # each of 1 and 2 Spark drivers (only with --only drivers)
    drivers_batch: int = 100_000  # each driver's receive_df
    drivers_cores: int = 1  # each driver's local[N]
    streaming_messages: int = 1_000_000  # drained by AvailableNow (only with --only streaming)
    streaming_per_trigger: int = 100_000  # the source's maxMessagesPerTrigger
    streaming_rate: int = 1_000  # the continuous query's producer, msg/s
    streaming_seconds: float = 60.0  # how long the producer sends
    streaming_kills: int = 3  # SIGKILLs of a streaming driver, each restarted from its checkpoint
    warm_up_rounds: int = (
        2  # bulk sends before the timed one: JIT-compiled, like a long-running job
    )
    fifo_consumers: int = 2  # the FIFO scenario's, alone and beside a producer
    fifo_groups: int = 50
    fair_seconds: float = 30.0  # each of the fairness scenario's three runs
    # Quiet tenants, each with less than a tenth of the consumers' time as SQS's fair queues
    # assume, or with fewer than ten tenants less than 1.5 even shares (the noisy one sends
    # NOISY_TIMES, 10, one's rate: more than the consumers take).
    fair_tenants: int = 9
    fair_rate: float = 0.0  # each quiet tenant's msg/s (0: a fifteenth of the consumers' capacity)
    fair_work_ms: float = 15.0  # what each message costs a consumer
    phase_rounds: int = 200  # receive(1) + delete pairs timed phase by phase (native)
    phase_backlog: int = 1_000
    start_runs: int = 5  # runs of `sparkqueue stats` and starts of `sparkqueue serve`
    checkpoint_rounds: int = 100  # only with --only checkpoints: rounds on each interval's queue
    checkpoint_intervals: str = "10,20,50,100"
    day_rounds: int = 30  # only with --only day: receive(1) + delete rounds on each side
    day_hours: float = 24.0
    day_commits_per_second: float = 1.2  # one consumer's receive(1) + delete
    day_file_retention_hours: float = float(FILE_RETENTION_HOURS)
    day_local_log_minutes: float = float(LOCAL_LOG_MINUTES)  # 0: the log is never trimmed
    upkeep_passes: int = 12  # only with --only upkeep: redrive passes with upkeep
    upkeep_messages: int = 200  # sent, received and 90% deleted before each pass


SMOKE = Sizes(
    messages=2_000,
    drain_batch=1_000,
    operations=4,
    window=2,
    load_seconds=1.0,
    consumers=2,
    redrive_messages=2_000,
    expired=100,
    worker_backlog=200,
    worker_seconds=1.0,
    worker_batches="10",
    prefetch=20,
    endpoint_seconds=0.5,
    celery_tasks=3,
    page_reads=3,
    warm_up_rounds=0,  # the smoke run checks that it works, not how fast
    fifo_groups=5,
    fair_seconds=1.0,
    phase_rounds=3,
    phase_backlog=20,
    start_runs=1,
    checkpoint_rounds=3,
    day_rounds=3,
    day_hours=0.01,
    upkeep_passes=2,
    upkeep_messages=20,
)


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
    receives, deletes = rounds(queue, sizes.operations)
    first = statistics.median(receives[: sizes.window])
    last = statistics.median(receives[-sizes.window :])
    return {
        "receive_p50_ms": p50_ms(receives),
        "receive_p99_ms": percentile(receives, 0.99) * 1000,
        "delete_p50_ms": p50_ms(deletes),
        "delete_p99_ms": percentile(deletes, 0.99) * 1000,
        "drift": last / first,
        "receive_ms": [value * 1000 for value in receives],
        "delete_ms": [value * 1000 for value in deletes],
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
    with queue.buffered(visibility_timeout=3_600) as client:
        receives, deletes = rounds(client, sizes.operations)
    return {
        "receive_p50_ms": p50_ms(receives),
        "receive_p99_ms": percentile(receives, 0.99) * 1000,
        "delete_p50_ms": p50_ms(deletes),
    }


SCENARIOS = ("bulk", "latency", "load", "fifo", "fair", "buffered", "redrive", "worker", "endpoint",
             "celery", "history", "console", "phases", "start", "checkpoints", "day", "upkeep",
             "peers", "scaling", "drivers", "chaos", "streaming", "soak")  # fmt: skip
# Run only when named: each takes many minutes (scaling, drivers, chaos and soak start OS
# processes), and peers measures other systems than ours.
NAMED_ONLY = ("fair", "checkpoints", "day", "upkeep", "peers", "scaling", "drivers", "chaos",
              "streaming", "soak")  # fmt: skip
DEFAULT_SCENARIOS = tuple(name for name in SCENARIOS if name not in NAMED_ONLY)
ENGINES = ("native", "spark")
# The buffered scenario's backlog, per consumer and second, per message of prefetch: 5,000 at the
# default prefetch of 1,000, more than four consumers took on this machine (about 5,200 msg/s).
BUFFERED_RATE_PER_PREFETCH = 5
# What each engine runs: the per-message scenarios. DataFrame work (bulk, redrive) is Spark's.
PER_ENGINE = ("latency", "load", "fifo", "fair", "buffered", "worker", "endpoint", "celery", "history",
              "checkpoints", "day")  # fmt: skip
# The per-message scenarios that need the broker's Spark session (not run natively on object
# storage): the worker loop's handler DataFrame, the simulated day's tombstone writes.
WITH_SPARK = ("worker", "day")


def run(
    spark: SparkSession,
    root: str,
    sizes: Sizes,
    scenarios: Sequence[str] = DEFAULT_SCENARIOS,
    engines: Sequence[str] = ENGINES,
    object_store: str | None = None,
    pgmq_dsn: str | None = None,
) -> dict[str, Any]:
    """The scenarios; the per-message ones once per engine, each on a root of its own, one
    after the other in this one run (so their figures compare: an A/B on one machine), and
    with `object_store` (an s3:// or abfss:// root) once more there, natively (no Spark: no
    worker loop, no simulated day). `pgmq_dsn`: the peers scenario's PostgreSQL with PGMQ (never recorded)."""
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
            without_spark = [name for name in per_engine if name not in WITH_SPARK]
            results["engines"][where] = per_message(broker, sizes, without_spark)
            if session_commits_conditionally(spark, object_store):  # both engines on one root
                beside = Broker(spark, f"{broker.root}-shared", storage_options={})
                figures = latency(beside, sizes)
                results["shared"] = {
                    **shared(beside, sizes.load_seconds, sizes.consumers, figures),
                    "store": object_store.split(":", 1)[0],
                }
    if "redrive" in scenarios:
        results["redrive"] = redrive(spark, f"{root}/redrive", sizes)
    if "console" in scenarios:
        results["console"] = console_pages(f"{root}/console", sizes.page_reads)
    if "phases" in scenarios:
        results["phases"] = phases(f"{root}/phases", sizes.phase_rounds, sizes.phase_backlog)
    if "start" in scenarios:
        results["start"] = start_times(f"{root}/start", sizes.start_runs)
    if "upkeep" in scenarios:
        broker = Broker(spark, f"{root}/upkeep")
        results["upkeep"] = upkeep(broker, sizes.upkeep_passes, sizes.upkeep_messages)
    if "peers" in scenarios:
        results["peers"] = peers(
            pgmq_dsn,
            sizes.endpoint_seconds,
            numbers(sizes.worker_batches),
            sizes.worker_backlog,
            sizes.worker_seconds,
        )
    if "scaling" in scenarios:
        from .scaling import scaling  # not at import: its processes run it as main

        batches = numbers(sizes.scaling_batches)
        results["scaling"] = scaling(f"{root}/scaling", batches, sizes.scaling_seconds)
    if "drivers" in scenarios:
        from .drivers import drivers  # not at import: its processes run it as main

        results["drivers"] = drivers(
            f"{root}/drivers", sizes.drivers_batch, sizes.drivers_seconds, sizes.drivers_cores
        )
    if "streaming" in scenarios:
        from .streaming import streaming

        results["streaming"] = streaming(
            spark,
            f"{root}/streaming",
            sizes.streaming_messages,
            sizes.streaming_per_trigger,
            sizes.streaming_rate,
            sizes.streaming_seconds,
            sizes.streaming_kills,
        )
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
    if "soak" in scenarios:
        from .soak import soak  # not at import: it runs the chaos roles, each its module's main

        if not object_store:
            raise ValueError("the soak runs on object storage: give --object-store")
        results["soak"] = soak(
            f"{object_store.rstrip('/')}/soak-{uuid.uuid4().hex[:8]}",
            Path(root) / "soak-records",
            seconds=sizes.soak_seconds,
            consumers=sizes.consumers,
            rate=sizes.soak_rate,
        )
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
        results |= fifo(broker, sizes.load_seconds, sizes.fifo_consumers, sizes.fifo_groups)
    if "fair" in scenarios:
        results["fair"] = fair(broker, sizes.fair_seconds, sizes.consumers, sizes.fair_tenants,
                               sizes.fair_rate, sizes.fair_work_ms, sizes.load_seconds)  # fmt: skip
    if "buffered" in scenarios:
        results["buffered_latency"] = buffered_latency(broker, sizes)
        results["buffered_load"] = load(
            broker,
            sizes.load_seconds,
            sizes.consumers,
            name="load-buffered",
            rate=BUFFERED_RATE_PER_PREFETCH * sizes.prefetch,
            prefetch=sizes.prefetch,
        )
    if "worker" in scenarios:
        batches = numbers(sizes.worker_batches)
        results["worker"] = worker(broker, batches, sizes.worker_backlog, sizes.worker_seconds)
    if "endpoint" in scenarios:
        results["endpoint"] = endpoint_load(broker, sizes.endpoint_seconds)
    if "celery" in scenarios:
        from .celery_load import celery_load  # needs celery, from the dev extra

        results["celery"] = celery_load(broker, sizes.celery_tasks)
    if "history" in scenarios:
        results["history"] = history_cost(broker, sizes.operations)
    if "checkpoints" in scenarios:
        intervals = numbers(sizes.checkpoint_intervals)
        results["checkpoints"] = checkpoints(broker, sizes.checkpoint_rounds, intervals)
    if "day" in scenarios:
        traffic = Traffic(
            sizes.day_hours,
            sizes.day_commits_per_second,
            sizes.day_file_retention_hours,
            sizes.day_local_log_minutes,
        )
        results["day"] = day(broker, sizes.day_rounds, traffic)
    return results


def numbers(listed: str) -> list[int]:
    """A size given as a comma-separated list ("10,100,1000")."""
    return [int(number) for number in listed.split(",")]
