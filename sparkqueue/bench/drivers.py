"""The drivers scenario: whether several Spark drivers draining one queue with `receive_df` +
`delete_df` add throughput, on a local root; and how native consumers fare beside one.

Each cell runs OS processes (`python -m sparkqueue.bench.drivers`), each a Spark driver of its
own (a local session from the packaged defaults, on `local[cores]`), on one queue filled first.
A driver drains one warm-up batch before the window (its JVM compiles the plans), then loops
`receive_df(batch)` + `delete_df` for the window; a batch counts when its delete finished
within the window. Each batch's message ids are collected (one more small Spark job per batch,
in every cell alike), so that afterwards every delivery is checked: none twice.

    python -m sparkqueue.bench --only drivers --drivers-seconds 60 --drivers-batch 100000 \
        --drivers-cores 1
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..broker import Broker
from .backlog import fill_in_chunks
from .processes import together, wait_for_go
from .timing import percentile
from .window import during_window

PROCESSES = (1, 2)
BESIDE = 2  # native consumer threads beside one driver, in the last cell
# More than two drivers drain in a second here (about 15,000 msg/s at batch 100,000): the
# backlog is this times the window, plus each driver's warm-up batch.
MOST_PER_S = 40_000


def drivers(
    root: str, batch: int, seconds: float, cores: int, processes: Sequence[int] = PROCESSES
) -> list[dict[str, Any]]:
    """One row per driver count, then one of a driver beside BESIDE native consumers: msg/s
    over the window, and duplicates. Each driver runs `local[cores]`: on a small machine one
    driver of every core saturates it, so adding drivers would measure the machine, not the
    queue."""
    broker = Broker(None, root)  # the parent fills natively: it starts no JVM of its own
    cells = [(count, 0) for count in processes] + [(1, BESIDE)]
    return [_cell(broker, batch, seconds, cores, count, beside) for count, beside in cells]


def _cell(
    broker: Broker, batch: int, seconds: float, cores: int, count: int, beside: int
) -> dict[str, Any]:
    queue = broker.create_queue(f"drivers-{count}-beside-{beside}")
    backlog = int(MOST_PER_S * seconds) + count * batch
    fill_in_chunks(queue, backlog)
    taken: list[str] = []
    receives: list[float] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def consume() -> None:  # as the load scenario's consumers: receive(10) + delete_batch
        try:
            while not stop.is_set():
                started = time.perf_counter()
                messages = queue.receive(10, visibility_timeout=3_600)
                receives.append(time.perf_counter() - started)
                taken.extend(m.message_id for m in messages)
                if messages:
                    queue.delete_batch([m.receipt_handle for m in messages])
        except BaseException as error:  # a failing consumer fails the cell, not a low figure
            errors.append(error)
            stop.set()

    command = [sys.executable, "-m", "sparkqueue.bench.drivers", broker.root, queue.name]
    command += [str(batch), str(seconds), str(cores)]
    reports = together(
        command, count, seconds, during=lambda: during_window([consume] * beside, seconds, stop)
    )
    if errors:
        raise errors[0]
    received = [each for report in reports for each in report["received"]]
    everything = received + taken
    row = {
        "batch": batch,
        "drivers": count,
        "cores": cores,
        "per_s": sum(report["deleted"] for report in reports) / seconds,
        "received": len(set(received)),
        "duplicates": len(everything) - len(set(everything)),
        "conflict_retries": sum(report["retries"] for report in reports),
        "ran_dry": len(set(everything)) >= backlog,  # then the figure is a floor
        "beside": beside,
    }
    if beside:
        row["beside_per_s"] = len(taken) / seconds
        row["beside_receive_p99_ms"] = percentile(receives, 0.99) * 1000 if receives else 0.0
    return row


def _work(root: str, name: str, batch: int, seconds: float, cores: int, go: Path) -> None:
    """One driver of a cell: a warm-up batch, then `receive_df` + `delete_df` for `seconds` once
    `go` exists; prints the ids it received, how many it deleted within the window and its
    conflict retries."""
    from ..session import spark_session  # here: the parent process starts no JVM

    broker = Broker(spark_session(**{"spark.master": f"local[{cores}]"}), root)
    queue = broker.get_queue(name)
    received: list[str] = []

    def drain_one() -> int:
        frame = queue.receive_df(batch, visibility_timeout=3_600)
        received.extend(frame.select("message_id").toArrow().column(0).to_pylist())
        return len(queue.delete_df(frame).successful)

    drain_one()
    wait_for_go(go)
    deadline = time.monotonic() + seconds
    deleted = 0
    while time.monotonic() < deadline:
        done = drain_one()
        if time.monotonic() <= deadline:  # a batch done after the window: not counted
            deleted += done
    report = {"received": received, "deleted": deleted, "retries": broker.conflict_retries}
    print(json.dumps(report), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="one driver of a drivers cell")
    for name in ("root", "queue", "batch", "seconds", "cores", "go"):
        parser.add_argument(name)
    args = parser.parse_args(argv)
    seconds, cores = float(args.seconds), int(args.cores)
    _work(args.root, args.queue, int(args.batch), seconds, cores, Path(args.go))


if __name__ == "__main__":
    main()
