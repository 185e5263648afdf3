"""Table upkeep either engine runs for the redrive job: retention settings, compaction and
VACUUM, all retried on conflicts.

Compaction removes files that consumers may be reading, so it aborts them: it runs here, on the
job's cadence and through the same conflict retries, never as Delta auto-compaction. On a local
root each statement holds the cross-process commit lock: a queue table is compacted one shard at
a time, so other processes wait at most one shard's compaction. On object storage a table is
compacted under its compaction lease (store/native_upkeep.py `compacting`), whichever engine
compacts: a process that finds it held leaves compaction to the holder this round.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Protocol

from .settings import UpkeepSettings

log = logging.getLogger(__name__)


class Hold(Protocol):
    """A process's lease on compacting one table (store/native_leases.py `LeaseHold`)."""

    def keep(self) -> bool: ...


class _Unleased:
    """Where no lease is taken: Spark's own conflict check refuses the second of two
    compactions, and on a local root the commit lock keeps them apart."""

    def keep(self) -> bool:
        return True


# A table's compaction lease, held while the block runs (None: another process holds it).
Lease = Callable[[str], AbstractContextManager[Hold | None]]


class Tidy(Protocol):
    """What upkeep asks of an engine's tables (Spark's Storage, the native NativeTables)."""

    def properties(self, address: str) -> dict[str, str]: ...

    def set_properties(self, address: str, properties: dict[str, str]) -> None: ...

    def optimize(self, address: str, shard: int | None = None) -> None: ...

    def vacuum(self, address: str, retain_hours: int) -> None: ...


def tidy_table(
    store: Tidy,
    path: str,
    settings: UpkeepSettings,
    shards: list[int] | None = None,
    *,
    lease: Lease | None = None,
) -> None:
    """Retention settings (only when changed: a metadata commit aborts everyone), compaction
    (per shard when given) under `lease` when given, VACUUM."""
    wanted = settings.table_properties()
    have = store.properties(path)
    if any(have.get(key) != value for key, value in wanted.items()):
        store.set_properties(path, wanted)
    with lease(path) if lease is not None else contextlib.nullcontext(_Unleased()) as hold:
        if hold is None:
            log.info("compaction of %s left to the process that holds its lease", path)
        else:
            for shard in shards or [None]:
                if not hold.keep():  # renewed when half gone; lost only to a stall past its end
                    log.warning("compaction of %s stopped: its lease ran out", path)
                    break
                store.optimize(path, shard)
    store.vacuum(path, settings.file_retention_hours)
