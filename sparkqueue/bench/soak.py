"""The soak (`--only soak`, not in the default run): the chaos scenario's roles (chaos.py: native
consumer processes, a producer, a Spark job of DataFrames and redrive passes with upkeep) run
for a long time, without kills, on an object-storage root reached through the fault-injecting
proxy (faults.py), which loses answers, answers 500 and 503, resets connections and stalls now and
then. A probe consumer in this process times its receives. Every window it records the probe's
receive p50 and p99, the queue table's active files and bytes, its log's objects and bytes, and
the faults injected so far. At the end, the chaos scenario's reckoning: nothing lost, nothing
handed out twice within its visibility window, nothing dead-lettered that was never delivered.

    AWS_ENDPOINT_URL=http://127.0.0.1:9000 python -m sparkqueue.bench --only soak \\
        --object-store s3://bucket/soak --soak-seconds 3600

The store must be reached over plain HTTP (the proxy forwards HTTP): moto's server, MinIO, or
Azurite (`AZURITE_BLOB_STORAGE_URL`, with an `abfss://` root). What counts: receive p99 in the
last window within 1.5x of the first."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
from deltalake.fs import DeltaStorageHandler

from ..broker import Broker
from .chaos import run_chaos
from .faults import FaultProxy, fault_proxy
from .reckoning import QUEUE, TIMEOUT_SECONDS
from .timing import percentile

ENDPOINTS = ("AWS_ENDPOINT_URL", "AZURITE_BLOB_STORAGE_URL")  # what the proxy stands in for
# Each request's chance of each fault: a few a minute at this traffic, of every kind.
FAULT_CHANCES = {"lose": 0.004, "error": 0.004, "slowdown": 0.004, "reset": 0.004, "stall": 0.001}
STALL_SECONDS = 12.0  # past the client timeout below
CLIENT_TIMEOUT = "8s"


def soak(
    root: str,
    folder: Path,
    *,
    seconds: float,
    windows: int = 12,
    consumers: int = 2,
    rate: float = 20.0,
    spark_work: bool = True,
    chances: dict[str, float] = FAULT_CHANCES,
) -> dict[str, Any]:
    """Runs the soak on `root` through a proxy in front of the store the environment names
    (AWS_ENDPOINT_URL or AZURITE_BLOB_STORAGE_URL); returns the windows, the faults and the
    reckoning."""
    name = next((key for key in ENDPOINTS if os.environ.get(key)), None)
    if name is None:
        raise ValueError(f"the soak's store is reached through a proxy: set one of {ENDPOINTS}")
    with fault_proxy(os.environ[name], stall_seconds=STALL_SECONDS) as proxy:
        options = {name: proxy.url, "timeout": CLIENT_TIMEOUT}
        saved = {key: os.environ.get(key) for key in options}
        os.environ.update(options)  # the roles' environment, and Azurite's address for delta-rs
        try:
            return _soak(root, folder, proxy, options, seconds, windows, consumers, rate,
                         spark_work, chances)  # fmt: skip
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _soak(
    root: str,
    folder: Path,
    proxy: FaultProxy,
    options: dict[str, str],
    seconds: float,
    windows: int,
    consumers: int,
    rate: float,
    spark_work: bool,
    chances: dict[str, float],
) -> dict[str, Any]:
    stop = threading.Event()
    timings: list[tuple[float, float, bool]] = []  # (when, seconds, failed) of each probe receive
    rows: list[dict[str, Any]] = []
    started = time.monotonic()

    def probe() -> None:
        """A consumer of its own, recorded as the chaos roles record their hand-outs."""
        queue = _wait_for_queue(root, options, stop)
        with (folder / f"delivered-probe-{time.monotonic_ns()}.log").open("a") as log:
            while not stop.is_set():
                began = time.monotonic()
                try:
                    messages = queue.receive(10, visibility_timeout=TIMEOUT_SECONDS)
                except Exception:  # a fault the retries did not outlast: the next try
                    messages = None
                # what the caller waited, answer or error
                timings.append((began - started, time.monotonic() - began, messages is None))
                if not messages:
                    stop.wait(0.2)
                    continue
                log.write("".join(f"{time.time()} {m.body} {m.receive_count}\n" for m in messages))
                log.flush()
                try:
                    queue.delete_batch([m.receipt_handle for m in messages])
                except Exception:  # they come back after their timeout
                    continue

    def sample() -> None:
        span = seconds / windows
        for number in range(1, windows + 1):
            if stop.wait(max(0.0, started + number * span - time.monotonic())):
                return
            try:
                rows.append(_window(root, options, proxy, timings, number * span, span))
            except Exception as error:  # a store's fault on the sampler's own reads
                rows.append({"at_s": round(number * span, 1), "error": str(error)[:200]})

    threads = [threading.Thread(target=probe), threading.Thread(target=sample)]
    for thread in threads:
        thread.start()
    for kind, chance in chances.items():
        proxy.chance(kind, chance)
    try:
        report = run_chaos(
            None, root, folder, seconds=seconds, consumers=consumers,
            messages=int(rate * seconds), kill_every=(seconds * 10, seconds * 10),
            spark_work=spark_work, storage_options=options, send_seconds=seconds,
        )  # fmt: skip
    finally:
        proxy.disarm()
        stop.set()
        for thread in threads:
            thread.join()
    first, last = (rows[0], rows[-1]) if rows else ({}, {})
    return {
        "windows": rows,
        "faults": dict(proxy.tally()),
        "report": asdict(report),
        "p99_ratio": last.get("receive_p99_ms", 0.0) / max(first.get("receive_p99_ms", 0.0), 1e-9),
    }


def _wait_for_queue(root: str, options: dict[str, str], stop: threading.Event) -> Any:
    broker = Broker(None, root, storage_options=options)
    while True:  # run_chaos creates it
        try:
            return broker.get_queue(QUEUE)
        except Exception:
            if stop.wait(0.5):
                raise


def _window(
    root: str,
    options: dict[str, str],
    proxy: FaultProxy,
    timings: list[tuple[float, float, bool]],
    end: float,
    span: float,
) -> dict[str, Any]:
    """One window's row: the probe's receives in it, the table and its log, faults so far."""
    window = [
        (duration, failed) for when, duration, failed in list(timings) if end - span <= when < end
    ]
    taken = sorted(duration for duration, _ in window)
    broker = Broker(None, root, storage_options=options)
    location = broker.context.record(QUEUE).location
    native = broker.context.native
    assert native is not None
    files, data_bytes = native.footprint(location)
    log = pafs.PyFileSystem(DeltaStorageHandler(location, options))
    entries = log.get_file_info(pafs.FileSelector("_delta_log", allow_not_found=True))
    return {
        "at_s": round(end, 1),
        "receives": len(taken),
        "receive_errors": sum(failed for _, failed in window),
        "receive_p50_ms": percentile(taken, 0.5) * 1000 if taken else 0.0,
        "receive_p99_ms": percentile(taken, 0.99) * 1000 if taken else 0.0,
        "active_files": files,
        "active_bytes": data_bytes,
        "log_objects": len(entries),
        "log_bytes": sum(entry.size or 0 for entry in entries),
        "faults": sum(proxy.tally().values()),
    }
