"""The checkpoint-cadence scenario (`--only checkpoints`, not in the default run): single-message
latency on queues that differ only in how often Delta writes a checkpoint
(`delta.checkpointInterval`), per engine.

    python -m sparkqueue.bench --only checkpoints --checkpoint-rounds 100 \\
        --checkpoint-intervals 10,20,50,100

Each round runs one `receive(1)` + `delete` on every queue in turn, so whatever the machine does
meanwhile hits every interval alike; a checkpoint is written by the commit that reaches it (a
longer interval replays more commit files per state rebuild, a shorter one makes more operations
pay for writing one)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from ..broker import Broker
from .backlog import fill, set_table_properties
from .timing import percentile, receive_delete

# What each interval's receives and deletes are summed up as (the mean shows what writing a
# checkpoint adds: the commit that writes one waits for it).
SUMMARY = {
    "p50": statistics.median,
    "mean": statistics.mean,
    "p99": lambda seconds: percentile(seconds, 0.99),
}


def checkpoints(broker: Broker, rounds: int, intervals: Sequence[int]) -> dict[str, Any]:
    """Per interval: p50, mean and p99 (ms) of `rounds` receives and of their deletes."""
    queues = {}
    for interval in intervals:
        name = f"checkpoint-every-{interval}"
        queue = broker.create_queue(name)
        set_table_properties(broker, name, {"delta.checkpointInterval": str(interval)})
        fill(broker, queue, rounds + 10)
        queues[interval] = queue
    taken: dict[int, dict[str, list[float]]] = {i: {"receive": [], "delete": []} for i in intervals}
    for _ in range(rounds):
        for interval, queue in queues.items():
            receive_s, delete_s = receive_delete(queue)
            taken[interval]["receive"].append(receive_s)
            taken[interval]["delete"].append(delete_s)
    return {
        str(interval): {
            f"{op}_{name}_ms": figure(seconds) * 1000
            for op, seconds in ops.items()
            for name, figure in SUMMARY.items()
        }
        for interval, ops in taken.items()
    }
