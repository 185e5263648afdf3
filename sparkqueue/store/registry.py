"""The queue registry: one small Delta table under the root naming every queue and its settings.

It is read and written through the broker's engine (`Tables`), so a native broker and a Spark
broker on one root share it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..attributes import QueueAttributes
from ..errors import TransactionConflict
from ..limits import ATTRIBUTE_CHANGE_ATTEMPTS
from ..rules.expr import col, lit
from .counts import Counts
from .schema import REGISTRY_COLUMNS
from .statements import Row, Tables

_NAMES = tuple(name for name, _, _ in REGISTRY_COLUMNS)
_KEY = ("name",)


@dataclass(frozen=True)
class QueueRecord:
    """A queue as the registry knows it: its settings, its handle key and its table."""

    name: str
    attributes: QueueAttributes
    secret: str
    location: str


class Registry:
    """Reads are cached for `ttl_seconds` (as SQS, attribute changes propagate within moments)."""

    def __init__(self, tables: Tables, ttl_seconds: float) -> None:
        self._tables = tables
        self._ttl = ttl_seconds
        self.table = tables.layout.registry
        self._cache: dict[str, QueueRecord] = {}
        self._loaded_at: float | None = None
        self._lock = threading.Lock()
        tables.ensure_table(self.table, REGISTRY_COLUMNS)

    def records(self, *, fresh: bool = False) -> dict[str, QueueRecord]:
        with self._lock:
            stale = self._loaded_at is None or time.monotonic() - self._loaded_at > self._ttl
            if fresh or stale:
                rows = self._tables.select(self.table, _NAMES)
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
        row = {
            "name": record.name,
            "attributes": record.attributes.to_json(),
            "secret": record.secret,
            "location": record.location,
        }
        return self._on_name(
            record.name,
            lambda: self._tables.insert_absent(self.table, REGISTRY_COLUMNS, "name", row),
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
        for _ in range(ATTRIBUTE_CHANGE_ATTEMPTS):
            row = self._row(name)
            if row is None:
                return False
            updated = change(QueueAttributes.from_json(row.attributes)).to_json()
            as_read = (col("name") == name) & (col("attributes") == row.attributes)
            if self._on_name(
                name,
                lambda as_read=as_read, updated=updated: self._tables.change(
                    self.table, as_read, {"attributes": lit(updated)}, key=_KEY
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
        rows = (col("name") == record.name) & (col("location") == record.location)
        return self._on_name(
            record.name,
            lambda: self._tables.change(self.table, rows, None, key=_KEY),
            f"deleting queue {record.name!r}",
            lambda before, after: before is not None and after is None,
        )

    def _on_name(
        self,
        name: str,
        statement: Callable[[], Counts],
        what: str,
        changed: Callable[[Row | None, Row | None], bool],
    ) -> bool:
        """One conflict-checked commit on the queue's row; True when it changed that one row
        (told by its counts, or where the session reports none by `changed(before, after)`)."""

        def attempt() -> bool:
            before = None if self._tables.counts_known else self._row(name)
            counts = statement()
            return counts.all_of(1) if counts.known else changed(before, self._row(name))

        result = self._tables.transact(self.table, attempt, what)
        with self._lock:
            self._loaded_at = None
        return result

    def _row(self, name: str) -> Row | None:
        rows = self._tables.select(self.table, _NAMES, col("name") == name, limit=1)
        return rows[0] if rows else None
