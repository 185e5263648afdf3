"""The benchmark behind DESIGN.md's bars: `python -m sparkqueue.bench [--smoke] [--master URL]`.

Scenarios: bulk enqueue (`send_df`), bulk drain (`receive_df` + `delete_df`), single-message
`receive(1)`/`delete` latency and its drift, 4 consumer threads with and without a producer, and one
redrive pass over a large queue with expired receives. Prints a table, writes `bench.json` and
`bench.png` (latency over the run; throughput per scenario) into `--out`.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from .broker import Broker
from .session import spark_session
from .testing import FakeClock

BODY_BYTES = 100
WARM_UP_ROUNDS = 2  # bulk sends before the timed one: JIT-compiled, like a long-running job


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


SMOKE = Sizes(
    messages=2_000,
    drain_batch=1_000,
    operations=4,
    window=2,
    load_seconds=2.0,
    consumers=2,
    redrive_messages=2_000,
    expired=100,
)


def bodies(spark: SparkSession, count: int):
    """`count` distinct bodies of BODY_BYTES bytes each."""
    return spark.range(count).select(
        F.lpad(F.col("id").cast("string"), BODY_BYTES, "x").alias("body")
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
    for _ in range(WARM_UP_ROUNDS):
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
    queue.send_df(bodies(broker.spark, sizes.operations + 10))
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


def load(broker: Broker, sizes: Sizes, *, producer: bool, name: str) -> dict[str, Any]:
    """Consumers receive(10) + delete_batch for a while; every delivery is checked afterwards."""
    queue = broker.create_queue(name)
    backlog = int(sizes.load_seconds * 20 * sizes.consumers) + 100
    queue.send_df(bodies(broker.spark, backlog))
    delivered: list[str] = []
    sent_during: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()

    def consume() -> None:
        while not stop.is_set():
            messages = queue.receive(10, visibility_timeout=3_600)
            if messages:
                queue.delete_batch([m.receipt_handle for m in messages])
                with lock:
                    delivered.extend(m.message_id for m in messages)

    def produce() -> None:
        while not stop.is_set():
            ids = queue.send_batch([f"live {i}" for i in range(10)])
            with lock:
                sent_during.extend(ids)

    threads = [threading.Thread(target=consume) for _ in range(sizes.consumers)]
    if producer:
        threads.append(threading.Thread(target=produce))
    retries_before = broker.conflict_retries
    for thread in threads:
        thread.start()
    time.sleep(sizes.load_seconds)  # the measurement window, not a visibility timeout
    stop.set()
    for thread in threads:
        thread.join()
    left = {row.message_id for row in queue.peek_df(10_000_000).select("message_id").collect()}
    everything = backlog + len(sent_during)
    return {
        "delivered": len(delivered),
        "per_s": len(delivered) / sizes.load_seconds,
        "duplicates": len(delivered) - len(set(delivered)),
        "lost": everything - len(set(delivered) | left),
        "conflict_retries": broker.conflict_retries - retries_before,
        "sent_during": len(sent_during),
    }


def redrive(spark: SparkSession, root: str, sizes: Sizes) -> dict[str, float]:
    clock = FakeClock()
    broker = Broker(spark, root, clock=clock)
    queue = broker.create_queue("redrive", visibility_timeout=30)
    queue.send_df(bodies(spark, sizes.redrive_messages))
    queue.receive_df(sizes.expired).count()
    clock.advance(31)
    took, report = timed(lambda: broker.redrive(["redrive"]))
    return {"redrive_s": took, "released": report.released}


SCENARIOS = ("bulk", "latency", "load", "redrive")


def run(
    spark: SparkSession, root: str, sizes: Sizes, scenarios: Sequence[str] = SCENARIOS
) -> dict[str, Any]:
    broker = Broker(spark, root)
    results: dict[str, Any] = {"sizes": asdict(sizes)}
    if "bulk" in scenarios:
        results["bulk"] = bulk(broker, sizes)
    if "latency" in scenarios:
        results["latency"] = latency(broker, sizes)
    if "load" in scenarios:
        results["load_alone"] = load(broker, sizes, producer=False, name="load-alone")
        results["load_with_producer"] = load(broker, sizes, producer=True, name="load-producer")
        results["load_ratio"] = results["load_with_producer"]["per_s"] / max(
            results["load_alone"]["per_s"], 1e-9
        )
    if "redrive" in scenarios:
        results["redrive"] = redrive(spark, f"{root}/redrive", sizes)
    results["machine"] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "master": spark.conf.get("spark.master", "?"),
        "spark": spark.version,
    }
    return results


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(what, figure, bar) rows for docs/performance.md and the console, for the scenarios that ran."""
    rows: list[tuple[str, str, str]] = []
    if "bulk" in results:
        bulk_ = results["bulk"]
        rows += [
            ("enqueue (send_df)", f"{bulk_['enqueue_per_s']:,.0f} msg/s", ">= 250,000 msg/s"),
            (
                "drain (receive_df + delete_df)",
                f"{bulk_['drain_per_s']:,.0f} msg/s",
                ">= 100,000 msg/s",
            ),
        ]
    if "latency" in results:
        latency_ = results["latency"]
        rows += [
            (
                "receive(1) p50 / p99",
                f"{latency_['receive_p50_ms']:.0f} / {latency_['receive_p99_ms']:.0f} ms",
                "<= 300 / 1,000 ms",
            ),
            (
                "delete p50 / p99",
                f"{latency_['delete_p50_ms']:.0f} / {latency_['delete_p99_ms']:.0f} ms",
                "<= 300 / 1,000 ms",
            ),
            ("receive p50 drift (last / first)", f"{latency_['drift']:.2f}x", "<= 1.3x"),
        ]
    if "load_alone" in results:
        alone, loaded = results["load_alone"], results["load_with_producer"]
        rows += [
            (
                "consumers alone / with producer",
                f"{alone['per_s']:.1f} / {loaded['per_s']:.1f} msg/s ({results['load_ratio']:.0%})",
                ">= 70%",
            ),
            (
                "duplicates / losses under load",
                f"{alone['duplicates'] + loaded['duplicates']} / {alone['lost'] + loaded['lost']}",
                "0 / 0",
            ),
        ]
    if "redrive" in results:
        rows.append(("redrive pass", f"{results['redrive']['redrive_s']:.1f} s", "<= 10 s"))
    return rows


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (over_time, per_scenario) = plt.subplots(1, 2, figsize=(12, 4.5))
    if "latency" in results:
        over_time.plot(results["latency"]["receive_ms"], label="receive(1)", linewidth=0.6)
        over_time.plot(results["latency"]["delete_ms"], label="delete", linewidth=0.6)
        over_time.legend()
    over_time.set(title="single-message latency", xlabel="operation", ylabel="ms")
    figures = {
        "enqueue": ("bulk", "enqueue_per_s"),
        "drain": ("bulk", "drain_per_s"),
        "consumers": ("load_alone", "per_s"),
        "consumers+producer": ("load_with_producer", "per_s"),
    }
    scenarios = {
        label: results[scenario][key]
        for label, (scenario, key) in figures.items()
        if scenario in results
    }
    per_scenario.bar(list(scenarios), list(scenarios.values()))
    per_scenario.set(title="throughput", ylabel="messages/s", yscale="log")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes: a check that runs in seconds"
    )
    parser.add_argument("--master", help="run against this cluster (spark://host:7077)")
    parser.add_argument("--root", help="where the queues go (default: a fresh temporary folder)")
    parser.add_argument("--out", default="benchmarks/results", help="folder for bench.json/png")
    parser.add_argument(
        "--only",
        action="append",
        choices=SCENARIOS,
        help="run only this scenario (repeatable; default: all)",
    )
    for field in fields(Sizes):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=type(field.default))
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else Sizes()
    changes = {f.name: getattr(args, f.name) for f in fields(Sizes)}
    sizes = replace(sizes, **{name: value for name, value in changes.items() if value is not None})
    conf = {"spark.master": args.master} if args.master else {}
    spark = spark_session(**conf)
    root = args.root or tempfile.mkdtemp(prefix="sparkqueue-bench-")
    results = run(spark, root, sizes, args.only or SCENARIOS)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    chart(results, out / "bench.png")
    for what, figure, bar in table(results):
        print(f"{what:<34} {figure:>32}   bar {bar}")
    return results


if __name__ == "__main__":
    main()
