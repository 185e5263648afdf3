"""A broker's view of each standard queue's tenants, for fair receives (rules/fairness.py).

Which tenants are noisy is counted (messages/claim.py's `count_tenants`: one grouped scan) at most
every TENANT_RECOUNT_SECONDS per queue table and broker (`QueueContext.tenants`), whatever the
receive rate (every TENANT_SOON_SECONDS after the first count and while a tenant is `suspect`:
rules/fairness.py), and only on a queue whose messages carry groups; a receive itself reads only the
files it would read anyway plus the newest. A count that is due while the last one is still
recent runs on a thread of its own, beside the receives: a receive round (which serves every
caller of the broker at once) then never waits for a scan of the whole table, which grows with
a noisy tenant's backlog (50 ms on a fresh fair scenario, 235 ms after 30 s of it). The first
count, and one after a pause longer than TENANT_STALE_SECONDS, is the receive's own.
Other brokers' receives are seen at the next count (SQS's judgement is approximate too).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ...limits import TENANT_RECOUNT_SECONDS, TENANT_SOON_SECONDS, TENANT_STALE_SECONDS
from ...rules.fairness import TenantView

log = logging.getLogger(__name__)
THREAD_PREFIX = "sparkqueue-tenants-"  # its threads' names: what waits for them finds them


class TenantViews:
    """Per queue table, the latest `TenantView`, counted again once it is older than
    TENANT_RECOUNT_SECONDS (TENANT_SOON_SECONDS when the view says `soon`) by one caller while
    the others go on with the one they have; and
    only while there are tenants to count: a noisy one, or a message with a group that a read
    came across since the last count. A queue whose messages carry no group is never counted."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._views: dict[str, tuple[TenantView, float | None]] = {}
        self._counting: set[str] = set()
        self._grouped: set[str] = set()
        self._tenanted: set[str] = set()

    def saw_groups(self, location: str) -> None:
        """A read of the queue came across a message with a group (a tenant's)."""
        with self._lock:
            self._grouped.add(location)
            self._tenanted.add(location)

    def tenanted(self, location: str) -> bool:
        """Whether a read of the queue ever came across a tenant's message: then its receives
        keep no spares (spares.py), which would serve one tenant's messages between counts."""
        return location in self._tenanted

    def of(
        self, location: str, count: Callable[[TenantView, float | None], TenantView]
    ) -> TenantView:
        """The queue's view, counted by `count(last view, seconds since it was counted)` when
        due: by this caller when there is no recent view (none known yet: no tenant is noisy
        while the first count runs), else beside it, this caller going on with the last."""
        with self._lock:
            view, counted_at = self._views.get(location, (TenantView(), None))
            elapsed = None if counted_at is None else self._clock() - counted_at
            every = TENANT_SOON_SECONDS if view.soon else TENANT_RECOUNT_SECONDS
            due = elapsed is None or elapsed >= every
            wanted = bool(view.noisy) or location in self._grouped
            if not due or not wanted or location in self._counting:
                return view
            self._counting.add(location)
            self._grouped.discard(location)
        if elapsed is not None and elapsed < TENANT_STALE_SECONDS:
            try:  # not a daemon, as a compaction's thread (compaction.py): one scan, waited for
                threading.Thread(
                    target=self._beside,
                    args=(location, count, view, elapsed),
                    name=f"{THREAD_PREFIX}{location}",
                    daemon=False,
                ).start()
                return view
            except RuntimeError:  # no thread to be had: this caller counts
                pass
        return self._count(location, count, view, elapsed)

    def _beside(
        self,
        location: str,
        count: Callable[[TenantView, float | None], TenantView],
        view: TenantView,
        elapsed: float,
    ) -> None:
        try:
            self._count(location, count, view, elapsed)
        except Exception:  # receives go on with the last view; the next one counts again
            log.warning("counting the tenants of %s failed", location, exc_info=True)

    def _count(
        self,
        location: str,
        count: Callable[[TenantView, float | None], TenantView],
        view: TenantView,
        elapsed: float | None,
    ) -> TenantView:
        counted = False
        try:
            view = count(view, elapsed)
            counted = True
            with self._lock:
                self._views[location] = (view, self._clock())
        finally:
            with self._lock:
                self._counting.discard(location)
                if not counted:  # the next receive counts again
                    self._grouped.add(location)
        return view

    def last(self, location: str) -> tuple[TenantView, float | None]:
        """The queue's latest view as it is, and the seconds since it was counted (for `stats`:
        recent shares, and tenants held back before)."""
        with self._lock:
            view, counted_at = self._views.get(location, (TenantView(), None))
            return view, None if counted_at is None else self._clock() - counted_at
