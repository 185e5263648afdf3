"""Compaction leases on object storage: one process at a time compacts a table.

delta-rs 1.6.6 commits two compactions read from one version both, each adding a merged copy of
the same rows (tests/unit/test_small_files.py's tripwire), and on object storage no lock keeps
two processes' upkeep apart (two redrive jobs, `serve` beside a job). On a local root the commit
lock already makes each compaction the only transaction in flight on its table.

A lease lives in the root's lease table (`_sparkqueue/leases`), which holds no rows and which
nothing else writes: per leased table an app id (`sparkqueue.compaction:<table>`) whose recorded
version is the lease's end in epoch milliseconds, 0 once given back. Taking it is a commit of no
files recording that app id, made only from a version where the recorded end has passed:
delta-rs refuses a commit recording an app id that a commit since its read version recorded,
so of two processes that read one version, one takes it and the other, retried, finds it held.
Renewing and giving it back are the same commit, made only from a version where the recorded
end is still this holder's own, so a lease that lapsed and was taken by another process is
never renewed or given back by the first. The table being compacted is not written: its
claims never meet a lease's commit, and tables delta-rs cannot write (Spark's FIFO tables, with
row tracking) are leased as any other.

What a lease cannot do: stop a holder that stalls past its end mid-compaction (it renews between
a table's shards, when half the lease is gone), or fence a compaction of a process that takes
no lease (a Spark Connect job's, which has no native engine; see docs/operations.md).
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlparse

from ..limits import COMPACTION_LEASE
from .native_commits import NO_HOOKS, after_commit, applying, commit_once
from .schema import Columns
from .tables import PathLayout

if TYPE_CHECKING:
    from deltalake import DeltaTable

T = TypeVar("T")
log = logging.getLogger(__name__)
LEASE_APP_PREFIX = "sparkqueue.compaction:"
LEASE_COLUMNS: Columns = (("table", "string", True),)  # never a row: the log is the lease
_CHECKPOINT_INTERVAL = 20
LEASE_TABLE_PROPERTIES = {
    "delta.checkpointInterval": str(_CHECKPOINT_INTERVAL),
    "delta.logRetentionDuration": "interval 1 hours",
    # A table's app id goes a day after its last lease (a deleted queue's, a far-off end).
    "delta.setTransactionRetentionDuration": "interval 1 days",
}
_LEASE_MS = int(COMPACTION_LEASE.total_seconds() * 1000)
_FOREVER = 2**62  # a local root's hold: the commit lock keeps compactions apart there


def _ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def _clean_log(table: DeltaTable) -> None:
    """Log entries past the lease table's log retention go (no upkeep pass tidies it)."""
    try:
        table.cleanup_metadata()
    except Exception as error:  # the next checkpoint's turn tries again
        log.warning("could not clean the log of %s: %s", table.table_uri, error)


def lease_app_id(address: str) -> str:
    """The app id of a table's lease: by the table's last two path segments
    (`queues/<name>-<id>`, `claims/<name>-<id>`, `_sparkqueue/queues`, `_sparkqueue/metrics`),
    the same however a process spells the root (`s3://` or `s3a://`, say)."""
    segments = urlparse(address).path.rstrip("/").split("/")
    return LEASE_APP_PREFIX + "/".join(segments[-2:])


class LeaseHold:
    """This process's lease on one table's compaction, while `keep` says so."""

    def __init__(
        self, leases: NativeLeases, address: str, until: int, clock: Callable[[], datetime]
    ):
        self._leases, self._address, self._clock = leases, address, clock
        self.until = until

    def keep(self) -> bool:
        """Whether the lease is still this process's, renewed first once half of it is gone
        (before each shard's compaction: a compaction must end before its lease does)."""
        now = _ms(self._clock())
        if now < self.until - _LEASE_MS // 2:
            return True
        if now >= self.until:
            return False
        until = _end(now)
        if not self._leases.record_lease(self._address, self.until, until):
            return False
        self.until = until
        return True


def _end(now_ms: int) -> int:
    """A new lease's end: COMPACTION_LEASE on, plus up to a second at random, so that no two
    leases of a table end alike and a taker that finds its own end recorded knows it is its own
    (a take whose answer was lost, retried)."""
    return now_ms + _LEASE_MS + random.randrange(1, 1000)


class NativeLeases:
    """Compaction leases through delta-rs (mixed into NativeTables: it reads and commits through
    the table's own `open`, `ensure_table` and `transact`)."""

    _layout: PathLayout

    if TYPE_CHECKING:

        def open(self, address: str) -> DeltaTable: ...

        def ensure_table(
            self, address: str, columns: Columns, *, properties: dict[str, str] | None = None
        ) -> None: ...

        def transact(
            self, address: str, action: Callable[[], T], what: str, *, alone: bool = False
        ) -> T: ...

        def reopener(self, address: str) -> Callable[[], DeltaTable] | None: ...

    @contextlib.contextmanager
    def compacting(self, address: str, clock: Callable[[], datetime]) -> Iterator[LeaseHold | None]:
        """This process's lease on compacting the table, held while the block runs (None: another
        process holds it). On a local root a hold that is always kept, with no commit. A lease
        whose holder dies lapses COMPACTION_LEASE after it was taken or last renewed."""
        if not self._layout.object_store:
            yield LeaseHold(self, address, _FOREVER, clock)
            return
        now = _ms(clock())
        until = _end(now)
        if not self.record_lease(address, now, until, taking=True):
            yield None
            return
        hold = LeaseHold(self, address, until, clock)
        try:
            yield hold
        finally:
            try:
                self.record_lease(address, hold.until, 0)
            except Exception as error:  # it lapses on its own
                log.warning("could not give back the compaction lease of %s: %s", address, error)

    def record_lease(self, address: str, held: int, until: int, *, taking: bool = False) -> bool:
        """Records `until` as the end of the table's lease (0: given back) if the recorded end
        is `held` (this holder's), or, `taking`, has passed by `held` (the time now); whether
        it is recorded (also when it already is: this very commit, landed though its answer
        was lost). A recorded end further off than two leases is no lease's."""
        leases = self._layout.leases
        self.ensure_table(leases, LEASE_COLUMNS, properties=LEASE_TABLE_PROPERTIES)
        app_id = lease_app_id(address)

        def record() -> tuple[bool, DeltaTable | None]:
            """Whether it is recorded, and the lease table if a checkpoint was just written."""
            table = self.open(leases)
            recorded = table.transaction_version(app_id) or 0
            if recorded == until:  # this very commit, landed though its answer was lost
                return True, None
            free = recorded <= held or recorded > held + 2 * _LEASE_MS
            if not (free if taking else recorded == held):
                return False, None
            before = table.version()
            commit_once(
                table,
                self.reopener(leases),
                lambda mark: table.create_write_transaction(
                    [],
                    mode="append",
                    schema=table.schema(),
                    commit_properties=applying(mark, app_id, version=until),
                    post_commithook_properties=NO_HOOKS,
                ),
            )
            latest = self.open(leases)  # (delta-rs leaves `table` at the version it read)
            after_commit(latest, before)
            return True, latest if latest.version() % _CHECKPOINT_INTERVAL == 0 else None

        what = f"recording the compaction lease of {address}"
        recorded, checkpointed = self.transact(leases, record, what)
        if checkpointed is not None:  # outside the transaction: it lists the whole log
            _clean_log(checkpointed)
        return recorded
