"""What the engine needs from a broker, and nothing more: storage, registry and clock."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime

from pyspark.sql import DataFrame

from ..clock import Clock, read_clock
from ..errors import QueueDoesNotExist
from ..store.registry import QueueRecord, Registry
from ..store.storage import Storage
from . import fifo
from .group import CommitGroups
from .handout import Handouts


@dataclass(frozen=True)
class QueueContext:
    """Passed to every engine and service function instead of the Broker that owns it."""

    storage: Storage
    registry: Registry
    clock: Clock
    # Shared by `quick` and every other copy: one group committer per queue for the whole broker.
    commits: CommitGroups = field(default_factory=CommitGroups, compare=False, repr=False)
    # Likewise: how long claim statements take, so a visibility timeout runs from the handout.
    handouts: Handouts = field(default_factory=Handouts, compare=False, repr=False)

    @property
    def quick(self) -> QueueContext:
        """The same context on the interpreting session, for single-message operations."""
        return dataclasses.replace(self, storage=self.storage.interpreted)

    def now(self) -> datetime:
        """The operation's one instant, read on the driver (a FakeClock in tests)."""
        return read_clock(self.clock)

    def record(self, name: str, *, fresh: bool = False) -> QueueRecord:
        record = self.registry.get(name, fresh=fresh)
        if record is None:
            raise QueueDoesNotExist(f"queue {name!r} does not exist in {self.storage.layout}")
        return record

    def read(self, record: QueueRecord) -> DataFrame:
        """The queue's table; FIFO tables with each row's sequence number."""
        table = self.storage.read(record.location)
        return fifo.sequenced(table) if record.attributes.fifo else table
