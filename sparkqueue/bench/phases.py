"""The phases scenario (`--only phases`): where a native operation's time goes, a `receive(1)`
and a `delete` phase by phase. No Spark.

    python -m sparkqueue.bench --only phases --phase-rounds 200 --phase-backlog 1000

On a standard queue of `--phase-backlog` messages under a fresh local root, times
`--phase-rounds` receive(1) + delete pairs through the public API, and the same steps by hand on
the native engine's pieces: opening the table (reading its log), the candidate query, the claim
UPDATE, the DELETE. The difference between the API's figure and its steps' is the hand-offs (the
round committer) and Python."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from deltalake import DeltaTable

from ..broker import Broker
from ..engine.conditions import claimable
from ..engine.messages.claim import COLLECTED, still_claimable
from ..rules.expr import col
from .timing import percentile, timed

QUEUE = "phases"
SEND_BATCH = 500


def phases(root: str, rounds: int, backlog: int) -> dict[str, dict[str, float]]:
    """Per phase, in the order they run: its p50 and p99 (ms) over `rounds`."""
    broker = Broker(None, root)
    queue = broker.create_queue(QUEUE)
    for start in range(0, backlog, SEND_BATCH):
        queue.send_batch([f"m{i}" for i in range(start, min(start + SEND_BATCH, backlog))])
    tables = broker.context.tables
    record = broker.context.record(QUEUE)
    location = record.location
    taken: dict[str, list[float]] = {}

    def step(name: str, action: Callable[[], Any]) -> Any:
        took, result = timed(action)
        taken.setdefault(name, []).append(took * 1000)
        return result

    for _ in range(rounds):
        [message] = step(
            "receive(1), public API", lambda: queue.receive(1, visibility_timeout=3600)
        )
        step("delete, public API", lambda m=message: queue.delete(m.receipt_handle))
        step("open the table (read its log)", lambda: DeltaTable(location.removeprefix("file:")))
        now = broker.context.now()
        found = step(
            "candidate query (DataFusion)",
            lambda now=now: tables.select(
                location,
                COLLECTED,
                claimable(now, record.attributes),
                order_by=["message_id"],
                limit=1,
            ),
        )
        ids = col("message_id").isin([row.message_id for row in found])
        claim = ids & still_claimable(found, now, record.attributes)
        step(
            "claim UPDATE (open + commit)",
            lambda rows=claim: tables.transact(
                location,
                lambda: tables.change(location, rows, {"receipt_handle": col("message_id")}),
                "claim",
            ),
        )
        gone = col("shard").isin([row.shard for row in found]) & ids
        step(
            "DELETE (open + commit)",
            lambda rows=gone: tables.transact(
                location, lambda: tables.change(location, rows), "delete"
            ),
        )
    return {
        name: {"p50_ms": statistics.median(values), "p99_ms": percentile(values, 0.99)}
        for name, values in taken.items()
    }
