"""The Structured Streaming source: each micro-batch a claim, deleted when Spark commits it.

Offsets are `{"batch": n, "claims": [...]}`: the batch's number and its claims (engine/streams.py:
a token and each shard's id range, never the messages). How a batch goes:

- `latestOffset(start, limit)`: Spark asks it only once the batch ending at `start` is in its
  commit log (in this run, or before a restart), so that batch's messages are deleted first;
  then up to the limit are claimed with the query's visibility timeout. Nothing claimed: `start`
  again, and Spark runs no batch.
- `partitions(start, end)`: one task a shard, each reading the rows that still hold the batch's
  handles, at one table version. A batch this process did not claim is a restart's replay: its
  messages are first hidden again for a whole timeout, so that the ones still its own (still
  holding its handles, whatever their timeout did meanwhile) are its own throughout, and the
  others, which another receiver took, are not read.
- `commit(end)` deletes, as the next `latestOffset` would (whichever comes first).
- While a batch is claimed and not deleted, a heartbeat hides its messages again every third
  of the timeout, so a long batch is not handed to anyone else.

A batch that fails, or whose query dies, leaves its messages to come back when their timeout
ends, with their receive count raised (the dead-letter queue after maxReceiveCount).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from ..engine import streams
from ..engine.messages import bulk
from ..engine.messages.bulk import BatchClaim
from ..engine.messages.inspect import stats
from ..errors import UnsupportedOperation
from ..store.registry import QueueRecord
from .options import QueueOptions
from .rows import batch_rows

log = logging.getLogger(__name__)
HEARTBEAT_SHARE = 3  # a held batch is hidden again every third of its visibility timeout


ROWS_PER_TASK = 50_000  # a batch's rows a task reads (a task costs ~0.5-1 s to start here)


class BatchPartition(InputPartition):
    """One task of a batch: the rows of its shards that hold the batch's handles, at `version`
    of the queue `record` names."""

    def __init__(
        self, claims: list[dict[str, Any]], shards: list[int], version: int, record: QueueRecord
    ) -> None:
        super().__init__(shards)
        self.claims, self.shards, self.version, self.record = claims, shards, version, record


class QueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Spark's reader of one queue: its driver side keeps the batches it holds (`_Driver`), and
    its tasks read rows by `read` alone (pickled without that state)."""

    def __init__(self, options: QueueOptions) -> None:
        self.options = options
        self._driver: _Driver | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_driver": None}

    @property
    def driver(self) -> _Driver:
        if self._driver is None:
            self._driver = _Driver(self.options)
        return self._driver

    def initialOffset(self) -> dict[str, Any]:
        return {"batch": 0, "claims": []}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.options.max_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        self.driver.drain_visible()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        return self.driver.next_batch(start, limit)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[BatchPartition]:
        return self.driver.plan(start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BatchPartition)
        claims = [BatchClaim.from_offset(c) for c in partition.claims]
        tables, record = self.options.tables(), partition.record
        table = bulk.read_held(tables, record, claims, partition.shards, partition.version)
        yield from batch_rows(table).to_batches()

    def commit(self, end: dict[str, Any]) -> None:
        self.driver.finish_through(end)

    def stop(self) -> None:
        if self._driver is not None:
            self._driver.stop()


class _Driver:
    """The driver side's state: the batches claimed (or replayed) and not yet deleted, the
    heartbeat that keeps them hidden, and an AvailableNow run's budget."""

    def __init__(self, options: QueueOptions) -> None:
        self.ctx, self.record = options.open()
        self.options = options
        self.timeout = options.timeout(self.record.attributes)
        self._held: dict[int, list[BatchClaim]] = {}
        self._finished = 0  # every batch up to this one is deleted
        self._budget: int | None = None  # AvailableNow: how many messages are left to take
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._beat: threading.Thread | None = None

    def drain_visible(self) -> None:
        """AvailableNow: take at most the messages visible now, then stop."""
        self._budget = stats(self.ctx, self.record).visible

    def next_batch(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        self.finish_through(start)
        if isinstance(limit, ReadAllAvailable) and self._budget is None:
            # Trigger.Once: one batch, and no later call would delete its messages
            raise UnsupportedOperation(
                "the sparkqueue source runs with trigger(availableNow=True) or a processing-time"
                " trigger, not Trigger.Once: nothing would delete its one batch's messages"
            )
        limited = isinstance(limit, ReadMaxRows)
        wanted = limit.max_rows if limited else self.options.max_per_trigger
        if self._budget is not None:
            wanted = min(wanted, self._budget)
        if wanted <= 0:
            return start
        claims = streams.claim_batch(self.ctx, self.record, wanted, self.timeout)
        if not claims:
            return start
        if self._budget is not None:
            self._budget -= sum(claim.count for claim in claims)
        batch = int(start["batch"]) + 1
        self._hold(batch, claims)
        return {"batch": batch, "claims": [claim.to_offset() for claim in claims]}

    def plan(self, start: dict[str, Any], end: dict[str, Any]) -> list[BatchPartition]:
        batch = int(end["batch"])
        if batch == int(start["batch"]):  # an empty range
            return []
        claims = [BatchClaim.from_offset(c) for c in end["claims"]]
        with self._lock:
            replay = batch not in self._held
        if replay and claims:  # a restart's: its messages still its own, for a whole timeout
            streams.extend(self.ctx, self.record, claims, self.timeout)
            self._hold(batch, claims)
        version = self.ctx.native.open(self.record.location).version()
        offsets = [claim.to_offset() for claim in claims]
        return [
            BatchPartition(offsets, shards, version, self.record)
            for shards in streams.task_shards(claims, ROWS_PER_TASK)
        ]

    def finish_through(self, end: dict[str, Any]) -> None:
        """Deletes the messages of every batch up to `end`, which Spark has committed: those
        this process holds, and `end`'s own (claimed before a restart, perhaps)."""
        batch = int(end["batch"])
        with self._lock:
            if batch <= self._finished:
                return
            done = [b for b in self._held if b <= batch]
            claims = [claim for b in done for claim in self._held[b]]
        if batch not in done:
            claims += [BatchClaim.from_offset(c) for c in end["claims"]]
        streams.finish(self.ctx, self.record, claims)
        with self._lock:  # only now: the heartbeat keeps them until they are gone
            for b in done:
                self._held.pop(b, None)
            self._finished = max(self._finished, batch)

    def _hold(self, batch: int, claims: list[BatchClaim]) -> None:
        with self._lock:
            self._held[batch] = claims
            if self._beat is None:
                self._beat = threading.Thread(
                    target=self._heartbeat, name="sparkqueue-stream-heartbeat", daemon=True
                )
                self._beat.start()

    def _heartbeat(self) -> None:
        interval = max(self.timeout / HEARTBEAT_SHARE, 0.5)
        while not self._stopped.wait(interval):
            with self._lock:
                claims = [claim for held in self._held.values() for claim in held]
            try:
                streams.extend(self.ctx, self.record, claims, self.timeout)
            except Exception:  # the next beat tries again; the batch's timeout is the bound
                log.exception("could not extend a stream's batches on %r", self.record.name)

    def stop(self) -> None:
        self._stopped.set()
        if self._beat is not None:
            self._beat.join(timeout=10)
