"""What the engine needs from a broker, and nothing more: its tables, registry and clock."""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..clock import Clock, read_clock
from ..errors import QueueDoesNotExist, UnsupportedOperation
from ..store.registry import QueueRecord, Registry
from ..store.statements import Tables
from .messages.compaction import SmallFiles
from .messages.depths import ShardDepths
from .messages.handout import Handouts
from .messages.inflight import InFlightGauges
from .messages.spares import SpareCandidates
from .messages.tenants import TenantViews
from .rounds.committer import CommitGroups

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ..store.native_tables import NativeTables
    from ..store.storage import Storage


@dataclass(frozen=True)
class QueueContext:
    """Passed to every engine and service function instead of the Broker that owns it.

    `tables` serves the per-message operations through the broker's engine (native or Spark);
    `spark_tables` is Spark's when the broker has a session, `native` the native engine's
    wherever it can write the root (whatever the broker's engine: FIFO tables it numbers are
    its alone, see `tables_for`), and `bulk` is the Spark storage that DataFrame-scale work
    runs on."""

    tables: Tables
    registry: Registry
    clock: Clock
    bulk: Storage | None = None
    spark_tables: Tables | None = None
    native: NativeTables | None = None
    # Shared by every copy: one group committer per queue for the whole broker.
    commits: CommitGroups = field(default_factory=CommitGroups, compare=False, repr=False)
    # Likewise: how long claim statements take, so a visibility timeout runs from the handout.
    handouts: Handouts = field(default_factory=Handouts, compare=False, repr=False)
    # Likewise: each queue's in-flight gauge (OverLimit), whether it is deep and its noisy tenants
    # (messages/claim.py).
    in_flight: InFlightGauges = field(default_factory=InFlightGauges, compare=False, repr=False)
    depths: ShardDepths = field(default_factory=ShardDepths, compare=False, repr=False)
    tenants: TenantViews = field(default_factory=TenantViews, compare=False, repr=False)
    # Likewise: the rows each queue's last candidate read found beyond its claim (spares.py).
    spares: SpareCandidates = field(default_factory=SpareCandidates, compare=False, repr=False)
    # Likewise: the small files each queue's sends left since their last compaction.
    small_files: SmallFiles = field(default_factory=SmallFiles, compare=False, repr=False)
    # Likewise: the DataFrames receive_df returned, by the range claim each holds (frames/ranges.py);
    # weak, so they go with the frames.
    range_claims: weakref.WeakKeyDictionary[Any, Any] = field(
        default_factory=weakref.WeakKeyDictionary, compare=False, repr=False
    )

    @property
    def storage(self) -> Storage:
        """Spark's storage, for what only Spark does (DataFrames, FIFO reads, the redrive job)."""
        self.needs_spark("this")
        assert self.bulk is not None
        return self.bulk

    def needs_spark(self, what: str) -> None:
        """Raises UnsupportedOperation, before anything of Spark's is loaded, when the broker
        has no Spark session (pyspark may not even be installed)."""
        if self.bulk is None:
            raise UnsupportedOperation(
                f"{what} needs Spark, and the broker has no Spark session: create it with"
                " Broker(spark, root) (the native engine still serves every per-message"
                " operation of standard queues)"
            )

    @property
    def quick(self) -> QueueContext:
        """The same context with Spark's interpreting session as `storage`, for single-message
        work that only Spark does (FIFO claims)."""
        if self.bulk is None:
            return self
        return dataclasses.replace(self, bulk=self.bulk.interpreted)

    def tables_for(self, record: QueueRecord) -> Tables:
        """The engine that serves a queue's per-message operations: the broker's, except for
        FIFO queues, whose table says: one the native engine numbers (native_fifo.py) is the
        native engine's, one numbered by Delta row ids is Spark's (delta-rs cannot write it)."""
        if not record.attributes.fifo:
            return self.tables
        if self.sequenced(record):
            return self.native_writer(record)
        if self.spark_tables is None:
            raise UnsupportedOperation(
                f"FIFO queue {record.name!r} needs Spark: its table numbers messages by Delta row"
                " tracking, which the native engine cannot write; create the broker with a Spark"
                " session (Broker(spark, root))"
            )
        return self.spark_tables

    def sequenced(self, record: QueueRecord) -> bool:
        """Whether the queue is FIFO with a table the native engine numbers (asked of the native
        engine where the broker has it, else of Spark's table details)."""
        if not record.attributes.fifo:
            return False
        if self.native is not None:
            return self.native.is_sequenced(record.location)
        return self.bulk is not None and not self.bulk.row_tracking(record.location)

    def appended(self, record: QueueRecord) -> None:
        """A send's append by the native engine committed: on a local root it merges the small
        files such appends leave beside the consumers, when due (messages/compaction.py). Only
        there: alone under the cross-process commit lock, it meets no other transaction, and no
        other compaction (delta-rs 1.6.6 commits two compactions read from one version both,
        each adding a merged copy of the same rows). On object storage it would need the
        compaction lease (two more commits each time) and would still race other processes'
        claims, which rewrite the same small files; the redrive job's upkeep compacts there."""
        native = self.native
        if native is not None and not native.layout.object_store:
            compact = lambda: native.compact_small(record.location)  # noqa: E731
            self.small_files.appended(record.location, compact)

    def native_writer(self, record: QueueRecord) -> NativeTables:
        """The native engine, for a FIFO table it numbers: only it writes new rows there."""
        if self.native is None:
            raise UnsupportedOperation(
                f"FIFO queue {record.name!r} has a table the native engine numbers, and only that"
                " engine adds messages to it or claims them; open the root with a broker that"
                " writes it natively (a local folder, or object storage with Broker(None, root);"
                " not through Spark Connect)"
            )
        return self.native

    def spark_only(self, record: QueueRecord) -> bool:
        """Whether the queue's per-message operations need Spark (a row-tracking FIFO table)."""
        return record.attributes.fifo and not self.sequenced(record)

    def now(self) -> datetime:
        """The operation's one instant, read on the driver (a FakeClock in tests)."""
        return read_clock(self.clock)

    def record(self, name: str, *, fresh: bool = False) -> QueueRecord:
        if self.native is not None:  # first, before a forked child meets a lock or a round
            from ..store.native_process import check_process

            check_process()
        record = self.registry.get(name, fresh=fresh)
        if record is None:
            raise QueueDoesNotExist(f"queue {name!r} does not exist in {self.tables.layout}")
        return record

    def read(self, record: QueueRecord, *, version: int | None = None) -> DataFrame:
        """The queue's table in Spark (at `version`, or its latest); FIFO tables with each row's
        sequence number."""
        from ..store.spark_tables import numbered_by_row_id

        table = self.storage.read(record.location, version=version)
        if not record.attributes.fifo:
            return table
        return table if self.sequenced(record) else numbered_by_row_id(table)
