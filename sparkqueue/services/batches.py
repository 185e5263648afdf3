"""The worker loop's Spark side over one queue.

On a standard queue each batch is claimed in the commit that deletes the last batch (one ask to
the group committer, so the loops of one driver share their commits: engine/rounds/operations.py), and handed
to the handler as a DataFrame of the claimed rows held by the driver (it never claims again
however often it is evaluated). FIFO queues and batches over
EXCHANGE_MAX_BATCH are `receive_df` claims, and the finished batch is deleted before: by its
claim when the whole batch succeeded (see engine/frames/ranges.py).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..engine.context import QueueContext
from ..engine.frames import acknowledge_df, claim_df
from ..engine.messages import visibility
from ..engine.rounds import operations as rounds
from ..errors import InvalidParameterValue, ReceiptHandleIsInvalid
from ..limits import EXCHANGE_MAX_BATCH
from ..model import BatchResult, Message
from ..rules import handles
from ..store.native_arrow import arrow_table
from ..store.spark_schema import MESSAGE_FRAME_COLUMNS, MESSAGE_FRAME_SCHEMA
from .heartbeat import Heartbeat
from .sink import write_once
from .worker import Batch

SUCCEEDED = "succeeded"


class QueueBatches:
    """A `worker.BatchSource` over one queue of a context."""

    def __init__(self, ctx: QueueContext, name: str) -> None:
        self._ctx = ctx
        self.name = name
        self._claimed: Batch | None = None  # the last `receive_df` batch, deletable by its claim

    def visibility_timeout(self) -> int:
        return self._ctx.record(self.name).attributes.visibility_timeout

    def exchange(
        self, finished: list[str], size: int, visibility_timeout: int
    ) -> tuple[BatchResult, Batch]:
        record = self._ctx.record(self.name)
        if record.attributes.fifo or size > EXCHANGE_MAX_BATCH:
            done = self.delete_batch(finished) if finished else BatchResult()
            frame = claim_df.receive_df(self._ctx, self.name, size, visibility_timeout)
            rows = frame.select("message_id", "receipt_handle").collect()
            self._claimed = Batch(frame, {row.message_id: row.receipt_handle for row in rows})
            return done, self._claimed
        refs = {handle: handles.parse(record.secret, handle) for handle in finished}
        turn = rounds.settle_and_claim(
            self._ctx.quick, record, list(refs.values()), size, visibility_timeout
        )
        if turn.error is not None:
            raise turn.error
        failed = {
            handle: ReceiptHandleIsInvalid.code
            for handle, ref in refs.items()
            if ref.message_id in turn.superseded
        }
        done = BatchResult([h for h in refs if h not in failed], failed)
        return done, Batch(
            self._frame(turn.claimed), {m.message_id: m.receipt_handle for m in turn.claimed}
        )

    def _frame(self, messages: list[Message]) -> DataFrame:
        """The claimed messages as a DataFrame of receive_df's columns, held by the driver: from
        an Arrow table, which Spark takes ~3x faster than Python rows (docs/performance.md)."""
        spark = self._ctx.storage.spark
        if not messages:  # Spark Connect infers no schema from an empty Arrow table
            return spark.createDataFrame([], MESSAGE_FRAME_SCHEMA)
        return spark.createDataFrame(
            arrow_table([vars(m) for m in messages], MESSAGE_FRAME_COLUMNS)
        )

    def finished(self, batch: Batch, result: Any) -> list[str]:
        """Every handle when the handler returned None, else those its `succeeded` rows name."""
        if result is None:
            return list(batch.handles.values())
        if not isinstance(result, DataFrame) or not {"message_id", SUCCEEDED} <= set(
            result.columns
        ):
            raise InvalidParameterValue(
                "a handler returns None (all succeeded) or a DataFrame with message_id and a"
                f" boolean {SUCCEEDED!r} column"
            )
        done = result.where(F.col(SUCCEEDED)).select("message_id").distinct().collect()
        return [batch.handles[row.message_id] for row in done if row.message_id in batch.handles]

    def write_results(self, result: Any, sink: str) -> None:
        if not isinstance(result, DataFrame):
            raise InvalidParameterValue(
                "with sink=..., the handler must return the DataFrame of results to write"
            )
        write_once(self._ctx.storage, result, sink)

    def heartbeat(
        self, receipt_handles: list[str], visibility_timeout: int, interval: float
    ) -> AbstractContextManager[object]:
        return Heartbeat(self.extend, receipt_handles, visibility_timeout, interval)

    def extend(self, receipt_handles: list[str], seconds: int) -> visibility.Outcomes:
        """One heartbeat: extends each handle and reports, per handle, the error or None."""
        return rounds.extend(self._ctx.quick, self.name, receipt_handles, seconds)

    def delete_batch(self, receipt_handles: list[str]) -> BatchResult:
        """A whole `receive_df` batch goes by its claim (no list of literals); anything else,
        handle by handle."""
        claimed, self._claimed = self._claimed, None
        if claimed is not None and set(receipt_handles) == set(claimed.handles.values()):
            return acknowledge_df.delete_df(self._ctx, self.name, claimed.frame)
        return rounds.delete_batch(self._ctx.quick, self.name, receipt_handles)
