"""The queue registry: one small Delta table under the root naming every queue and its settings."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from ..attributes import QueueAttributes
from ..errors import TransactionConflict
from ..limits import ATTRIBUTE_CHANGE_ATTEMPTS
from .dml import Merge
from .schema import REGISTRY_SCHEMA
from .storage import Storage


@dataclass(frozen=True)
class QueueRecord:
    """A queue as the registry knows it: its settings, its handle key and its table."""

    name: str
    attributes: QueueAttributes
    secret: str
    location: str


class Registry:
    """Reads are cached for `ttl_seconds` (as SQS, attribute changes propagate within moments)."""

    def __init__(self, storage: Storage, ttl_seconds: float) -> None:
        self._storage = storage
        self._ttl = ttl_seconds
        self.table = storage.layout.registry
        self._cache: dict[str, QueueRecord] = {}
        self._loaded_at: float | None = None
        self._lock = threading.Lock()
        storage.ensure_table(self.table, REGISTRY_SCHEMA)

    def records(self, *, fresh: bool = False) -> dict[str, QueueRecord]:
        with self._lock:
            stale = self._loaded_at is None or time.monotonic() - self._loaded_at > self._ttl
            if fresh or stale:
                rows = self._storage.read(self.table).collect()
                self._cache = {
                    row.name: QueueRecord(
                        row.name,
                        QueueAttributes.from_json(row.attributes),
                        row.secret,
                        row.location,
                    )
                    for row in rows
                }
                self._loaded_at = time.monotonic()
            return dict(self._cache)

    def get(self, name: str, *, fresh: bool = False) -> QueueRecord | None:
        record = self.records(fresh=fresh).get(name)
        if record is None and not fresh:
            record = self.records(fresh=True).get(name)
        return record

    def insert_if_absent(self, record: QueueRecord) -> bool:
        """Atomically registers a queue; False when another caller registered the name first."""
        row = (record.name, record.attributes.to_json(), record.secret, record.location)
        source = self._storage.spark.createDataFrame([row], REGISTRY_SCHEMA)
        return self._merge_on_name(
            record.name,
            source,
            lambda merge: merge.insert(),
            f"registering queue {record.name!r}",
            lambda before, after: after is not None and after.location == record.location,
        )

    def change_attributes(
        self, name: str, change: Callable[[QueueAttributes], QueueAttributes]
    ) -> bool:
        """Replaces the queue's attributes with `change(current)`, as one step: the write only
        lands if the stored attributes are still those `change` saw (a compare-and-set on the
        stored text), else they are read again and `change` runs again, so two concurrent
        changes (two AddPermissions, say) never lose one another. False if the queue is gone."""
        t = self._storage.target_prefix(self.table)
        for _ in range(ATTRIBUTE_CHANGE_ATTEMPTS):
            row = self._row(name)
            if row is None:
                return False
            updated = change(QueueAttributes.from_json(row.attributes)).to_json()
            as_read = F.col(f"{t}attributes") == F.lit(row.attributes)
            if self._merge_on_name(
                name,
                self._name_frame(name),
                lambda merge, as_read=as_read, updated=updated: merge.update(
                    {"attributes": F.lit(updated)}, as_read
                ),
                f"updating queue {name!r}",
                lambda before, after, updated=updated: (
                    after is not None and after.attributes == updated
                ),
            ):
                return True
        raise TransactionConflict(
            f"the attributes of queue {name!r} kept changing under this change; nothing was"
            " changed. Retry later."
        )

    def remove(self, record: QueueRecord) -> bool:
        """Unregisters the queue if it still has this record's table; False if it is gone."""
        location = F.col(f"{self._storage.target_prefix(self.table)}location") == F.lit(
            record.location
        )
        return self._merge_on_name(
            record.name,
            self._name_frame(record.name),
            lambda merge: merge.delete(location),
            f"deleting queue {record.name!r}",
            lambda before, after: before is not None and after is None,
        )

    def _name_frame(self, name: str) -> DataFrame:
        return self._storage.spark.createDataFrame([(name,)], "name string")

    def _merge_on_name(
        self,
        name: str,
        source: DataFrame,
        clause: Callable[[Merge], Merge],
        what: str,
        changed: Callable[[Row | None, Row | None], bool],
    ) -> bool:
        """One MERGE keyed by queue name; True when it changed the one row it aimed at (told by
        its counts, or where the session reports none by `changed(row before, row after)`)."""
        t = self._storage.target_prefix(self.table)
        reports = not self._storage.connect

        def merge() -> bool:
            before = None if reports else self._row(name)
            on = F.col(f"{t}name") == F.col("s.name")
            counts = clause(self._storage.merge(self.table, source, on)).execute()
            return counts.all_of(1) if counts.known else changed(before, self._row(name))

        result = self._storage.transact(self.table, merge, what)
        with self._lock:
            self._loaded_at = None
        return result

    def _row(self, name: str) -> Row | None:
        return self._storage.read(self.table).where(F.col("name") == name).first()
