"""The scaling scenario: how a queue's throughput grows with the batch, the threads and the
processes that work it, on the native engine (no Spark: every process is cheap to start).

Each cell runs OS processes (`python -m sparkqueue.bench.scaling`), each with threads looping
`receive(batch)` + `delete_batch` on one queue for a window, all starting together; a batch
counts when its delete finished within the window (a window holds few batches of 10,000: make
it long enough). Afterwards every delivery is checked: none twice.

    python -m sparkqueue.bench --only scaling --scaling-seconds 10 --scaling-batches 10,100,1000
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
from .window import during_window

THREADS = (1, 2, 4)
PROCESSES = (1, 2)


def scaling(
    root: str,
    batches: Sequence[int],
    seconds: float,
    threads: Sequence[int] = THREADS,
    processes: Sequence[int] = PROCESSES,
) -> list[dict[str, Any]]:
    """One row per (batch, threads, processes): msg/s over the window, and duplicates."""
    broker = Broker(None, root)
    rows = []
    for batch in batches:
        for thread_count in threads:
            for process_count in processes:
                queue = broker.create_queue(f"scaling-{batch}-{thread_count}x{process_count}")
                backlog = int(_most_per_s(batch) * seconds)
                fill_in_chunks(queue, backlog)
                received, deleted = _cell(
                    root, queue.name, batch, thread_count, process_count, seconds
                )
                rows.append(
                    {
                        "batch": batch,
                        "threads": thread_count,
                        "processes": process_count,
                        "per_s": len(deleted) / seconds,
                        "received": len(set(received)),
                        "duplicates": len(received) - len(set(received)),
                        "ran_dry": len(set(received)) >= backlog,  # then the figure is a floor
                    }
                )
    return rows


def _most_per_s(batch: int) -> int:
    """More than a cell of this batch takes a second on this kind of machine (so it never runs
    dry): the backlog is this times the window."""
    return {10: 2_000, 100: 10_000, 1_000: 40_000}.get(batch, 60_000)


def _cell(
    root: str, name: str, batch: int, threads: int, processes: int, seconds: float
) -> tuple[list[str], list[str]]:
    """The message ids the cell's processes received, and those they deleted within the
    window (from each process's report)."""
    command = [sys.executable, "-m", "sparkqueue.bench.scaling", root, name]
    command += [str(batch), str(threads), str(seconds)]
    reports = together(command, processes, seconds)
    received = [each for report in reports for each in report["received"]]
    return received, [each for report in reports for each in report["deleted"]]


def _work(root: str, name: str, batch: int, threads: int, seconds: float, go: Path) -> None:
    """One process of a cell: `threads` loops for `seconds` once `go` exists; prints the ids it
    received and those whose delete succeeded within the window. A failing loop fails it."""
    queue = Broker(None, root).get_queue(name)
    received: list[str] = []
    taken: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    def loop() -> None:
        try:
            while not stop.is_set():
                messages = queue.receive(batch, visibility_timeout=3_600)
                if messages:
                    with lock:
                        received.extend(m.message_id for m in messages)
                    done = queue.delete_batch([m.receipt_handle for m in messages]).successful
                    if time.monotonic() <= deadline:  # a batch done after the window: not counted
                        ids = {m.receipt_handle: m.message_id for m in messages}
                        with lock:
                            taken.extend(ids[handle] for handle in done)
        except BaseException as error:
            errors.append(error)
            stop.set()

    wait_for_go(go)
    deadline = time.monotonic() + seconds
    during_window([loop] * threads, seconds, stop)
    if errors:
        raise errors[0]
    print(json.dumps({"received": received, "deleted": taken}), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="one process of a scaling cell")
    for name in ("root", "queue", "batch", "threads", "seconds", "go"):
        parser.add_argument(name)
    args = parser.parse_args(argv)
    _work(args.root, args.queue, int(args.batch), int(args.threads), float(args.seconds),
          Path(args.go))  # fmt: skip


if __name__ == "__main__":
    main()
