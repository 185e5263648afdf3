"""Table upkeep either engine runs for the redrive job: retention settings, compaction and
VACUUM, all retried on conflicts.

Compaction removes files that consumers may be reading, so it aborts them: it runs here, on the
job's cadence and through the same conflict retries, never as Delta auto-compaction. On a local
root each statement holds the cross-process commit lock: a queue table is compacted one shard at
a time, so other processes wait at most one shard's compaction.
"""

from __future__ import annotations

from typing import Protocol

from .settings import UpkeepSettings


class Tidy(Protocol):
    """What upkeep asks of an engine's tables (Spark's Storage, the native NativeTables)."""

    def properties(self, address: str) -> dict[str, str]: ...

    def set_properties(self, address: str, properties: dict[str, str]) -> None: ...

    def optimize(self, address: str, shard: int | None = None) -> None: ...

    def vacuum(self, address: str, retain_hours: int) -> None: ...


def tidy_table(
    store: Tidy, path: str, settings: UpkeepSettings, shards: list[int] | None = None
) -> None:
    """Retention settings (only when changed: a metadata commit aborts everyone), compaction
    (per shard when given), VACUUM."""
    wanted = settings.table_properties()
    have = store.properties(path)
    if any(have.get(key) != value for key, value in wanted.items()):
        store.set_properties(path, wanted)
    for shard in shards or [None]:
        store.optimize(path, shard)
    store.vacuum(path, settings.file_retention_hours)
