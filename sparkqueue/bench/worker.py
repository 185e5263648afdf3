"""The worker-loop scenario (`--only worker`): `Queue.consume` with a no-op handler for
`--worker-seconds` per batch size (`--worker-batches`), with 1 worker and with 4 in one driver
(threads), on a backlog topped up to `--worker-backlog` before each run.

Its grid (each batch with 1 and with WORKERS workers, a topped-up backlog, msg/s deleted) is also
the one the peers scenario runs PGMQ's worker loop through, so the two stand row by row."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..broker import Broker
from .backlog import fill
from .timing import timed
from .window import during_window

WORKERS = 4  # the worker scenario's "many workers in one driver"


def label(batch: int, workers: int) -> str:
    """A cell's name in the report: "batch 100, 4 workers"."""
    return f"batch {batch}, {workers} worker{'s' if workers > 1 else ''}"


def grid(
    batches: Sequence[int],
    backlog: int,
    top_up: Callable[[int], None],
    run_cell: Callable[[int, int], int],
) -> dict[str, Any]:
    """For each batch, with 1 worker and with WORKERS: tops the backlog up to `backlog` (what the
    cells before took, through `top_up(count)`), then times `run_cell(batch, workers)`, which
    returns how many messages its workers deleted. A cell that took the whole backlog ran dry:
    its msg/s is a floor (a larger `--worker-backlog` measures it)."""
    waiting = 0
    figures: dict[str, Any] = {}
    for batch in batches:
        for workers in (1, WORKERS):
            if waiting < backlog:
                top_up(backlog - waiting)
                waiting = backlog
            took, deleted = timed(lambda b=batch, w=workers: run_cell(b, w))
            waiting -= deleted
            figures[label(batch, workers)] = {
                "batch": batch,
                "workers": workers,
                "deleted": deleted,
                "per_s": deleted / took,
                "ran_dry": deleted >= backlog,
            }
    return figures


def worker(broker: Broker, batches: Sequence[int], backlog: int, seconds: float) -> dict[str, Any]:
    """The worker loop's grid on one queue of `broker`."""
    queue = broker.create_queue("worker", visibility_timeout=600)

    def run_cell(batch: int, workers: int) -> int:
        stop = threading.Event()
        reports: list[Any] = []

        def loop() -> None:
            reports.append(
                queue.consume(lambda frame: None, batch_size=batch, stop=stop, poll_interval=0)
            )

        during_window([loop] * workers, seconds, stop)
        return sum(report.deleted for report in reports)

    return grid(batches, backlog, lambda count: fill(broker, queue, count), run_cell)
