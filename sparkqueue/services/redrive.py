"""The redrive job: dead-letter moves, releases, retention, upkeep and metrics, one pass at a time.

A pass runs on the broker's Spark session where it has one (moves at DataFrame scale, and table
upkeep), and otherwise through the native engine: the same steps, the same rules and the same
metrics, with moves of the rows at hand (engine/moves.py) and no compaction or VACUUM, which
are Spark's (a broker without Spark on a local root or object storage still moves its
dead letters, releases, expires and records its metrics).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..engine import fifo_queue, inspect
from ..engine.conditions import (
    being_moved,
    exhausted,
    past_retention,
    releasable,
    retire,
    spent_tombstone,
)
from ..engine.context import QueueContext
from ..engine.movers import movers
from ..engine.moves import StepHook, no_hook
from ..errors import InvalidParameterValue, QueueDoesNotExist
from ..model import QueueRedrive, RedriveReport
from ..rules.expr import null
from ..store.logtrim import trim_logs
from ..store.registry import QueueRecord
from ..store.schema import METRICS_COLUMNS
from ..store.statements import Tables
from ..store.tables import Layout
from .settings import RedriveSettings

if TYPE_CHECKING:
    from .upkeep import PassUpkeep

log = logging.getLogger(__name__)

PROGRESS_AFTER_SECONDS = 10.0  # a pass slower than this logs each step as it starts


class Redrive:
    """Runs passes of the redrive job over a broker's queues."""

    def __init__(
        self,
        ctx: QueueContext,
        settings: RedriveSettings | None = None,
        *,
        on_step: StepHook = no_hook,
    ) -> None:
        self._ctx = ctx
        self.settings = settings or RedriveSettings()
        self._mover = movers(ctx, on_step)
        tables = ctx.native if ctx.bulk is None else ctx.spark_tables
        assert tables is not None
        self._tables: Tables = tables
        self.metrics_table = tables.layout.metrics
        self._upkeep: PassUpkeep | LogUpkeep
        if ctx.bulk is None:
            self._upkeep = LogUpkeep(tables.layout, self.settings)
        else:
            from .upkeep import PassUpkeep  # Spark's compaction and VACUUM besides

            self._upkeep = PassUpkeep(ctx.bulk, self.settings, self.metrics_table)
        self._tables.ensure_table(self.metrics_table, METRICS_COLUMNS)

    def run(self, queues: Sequence[str] | None = None) -> RedriveReport:
        """One pass over `queues` (default: the settings' queues, else every queue)."""
        names = self._queue_names(queues)
        started = time.monotonic()
        results: dict[str, QueueRedrive] = {}
        rows: list[dict[str, Any]] = []
        for name in names:
            record = self._ctx.record(name)
            if not self._tables.exists(record.location):  # a creation or deletion under way
                log.debug("redrive %s: registered without its table; skipped", name)
                continue
            if self._ctx.bulk is None and self._ctx.spark_only(record):
                log.warning(
                    "redrive %s: its FIFO table is Spark's; a pass with Spark serves it", name
                )
                continue
            result, row = self._pass(record, started)
            results[name] = result
            rows.append(row)
        if rows:
            what = "recording redrive metrics"
            self._tables.append_rows(self.metrics_table, METRICS_COLUMNS, rows, what)
            shared = (self.metrics_table, self._ctx.registry.table)
            self._upkeep.shared(shared, any(result.upkeep for result in results.values()))
        return RedriveReport(results)

    def _queue_names(self, queues: Sequence[str] | None) -> list[str]:
        known = sorted(self._ctx.registry.records(fresh=True))
        if queues is None:
            if self.settings.queues is None:
                return known
            queues = list(self.settings.queues)
        if isinstance(queues, str) or not all(isinstance(name, str) for name in queues):
            raise InvalidParameterValue("queues must be a list of queue names")
        missing = sorted(set(queues) - set(known))
        if missing:
            raise QueueDoesNotExist(f"no such queue(s) in {self._tables.layout}: {missing}")
        return list(queues)

    def _pass(self, record: QueueRecord, pass_started: float) -> tuple[QueueRedrive, dict]:
        started = time.monotonic()
        name, attrs = record.name, record.attributes
        now = self._ctx.now()

        def step(label: str) -> None:
            level = (
                logging.INFO
                if time.monotonic() - pass_started > PROGRESS_AFTER_SECONDS
                else logging.DEBUG
            )
            log.log(level, "redrive %s: %s", name, label)

        todo = self._survey(record, now)
        moved = 0
        if todo["pending"]:
            step("finishing interrupted moves")
            moved += self._mover.finish_pending(record, now)
        target = attrs.dead_letter_queue
        if todo["exhausted"] and target is not None:
            dead = self._ctx.registry.get(target)
            if dead is None:
                log.warning("redrive %s: dead-letter queue %r does not exist", name, target)
            elif not self._mover.writable(dead):
                log.warning("redrive %s: this broker cannot write %r; not moving", name, target)
            else:
                step(f"moving exhausted messages to {target!r}")
                moved += self._mover.move(record, exhausted(now, attrs), target, now)
        released = expired = 0
        location = record.location
        if todo["expired_receives"]:
            step("releasing expired receives")
            released = self._tables.change_where(
                location,
                releasable(now, attrs),
                f"releasing expired receives in {name!r}",
                values={"receipt_handle": null("string"), "handle_issued_at": null("timestamp")},
            )
        if todo["past_retention"]:
            step("removing messages past retention")
            expired = self._tables.change_where(
                location,
                past_retention(now, attrs),
                f"removing messages past retention from {name!r}",
                values=retire(attrs),
            )
        if attrs.fifo:  # duplicates go before the tombstones that mark them as duplicates
            step("removing duplicates")
            self._drop_duplicates(record)
        if todo["spent_tombstones"]:  # FIFO deletes and the worker loop's retired batches
            step("removing spent tombstones")
            what = f"removing spent tombstones from {name!r}"
            self._tables.change_where(location, spent_tombstone(now), what)
        upkeep = self._upkeep.queue(record, now, step)
        stats = inspect.stats(self._ctx, record)
        files, size = self._tables.footprint(location)
        duration = time.monotonic() - started
        log.info(
            "redrive %s: moved %d, released %d, expired %d%s; visible %d, in flight %d (%.1f s)",
            name,
            moved,
            released,
            expired,
            ", upkeep done" if upkeep else "",
            stats.visible,
            stats.in_flight,
            duration,
        )
        row = {
            "queue": name,
            "pass_at": now,
            "visible": stats.visible,
            "in_flight": stats.in_flight,
            "delayed": stats.delayed,
            "awaiting_dead_letter": stats.awaiting_dead_letter,
            "oldest_age_seconds": stats.oldest_age_seconds,
            "moved_to_dead_letter": moved,
            "released": released,
            "expired_by_retention": expired,
            "duration_seconds": duration,
            "upkeep": upkeep,
            "active_files": files,
            "table_bytes": size,
        }
        return QueueRedrive(name, moved, released, expired, duration, upkeep), row

    def _survey(self, record: QueueRecord, now: datetime) -> dict[str, int]:
        """One scan that says which steps this pass has work for, so idle steps cost nothing."""
        attrs = record.attributes
        counts = {
            "pending": being_moved(),
            "exhausted": exhausted(now, attrs),
            "expired_receives": releasable(now, attrs),
            "past_retention": past_retention(now, attrs),
            "spent_tombstones": spent_tombstone(now),
        }
        return dict(self._tables.aggregate(record.location, counts, {}))

    def _drop_duplicates(self, record: QueueRecord) -> int:
        if self._ctx.bulk is None:
            assert self._ctx.native is not None
            return fifo_queue.drop_duplicates(self._ctx.native, record)
        from ..engine.fifo import drop_duplicates

        storage = self._ctx.storage
        return drop_duplicates(storage, record.location, lambda: self._ctx.read(record))


class LogUpkeep:
    """What a pass through the native engine keeps up: the `_delta_log` of local tables, trimmed
    on every pass (compaction and VACUUM are Spark's: upkeep.PassUpkeep)."""

    def __init__(self, layout: Layout, settings: RedriveSettings) -> None:
        self._layout = layout
        self._settings = settings

    def queue(self, record: QueueRecord, now: datetime, step: Callable[[str], None]) -> bool:
        minutes = self._settings.upkeep_for(record.name).local_log_minutes
        trim_logs(self._layout, (record.location,), minutes)
        return False

    def shared(self, tables: Sequence[str], tidy: bool) -> None:
        trim_logs(self._layout, tables, self._settings.defaults.local_log_minutes)


def run_schedule(
    ctx: QueueContext,
    settings: RedriveSettings,
    *,
    queues: Sequence[str] | None = None,
    once: bool = False,
    stop: threading.Event | None = None,
) -> None:
    """The job's loop: a pass now, then one every `settings.every_seconds` until stopped."""
    stop = stop or threading.Event()
    redrive = Redrive(ctx, settings)
    while True:
        started = time.monotonic()
        try:
            report = redrive.run(queues)
            log.info(
                "redrive pass over %d queue(s): moved %d, released %d, expired %d (%.1f s)",
                len(report.queues),
                report.moved_to_dead_letter,
                report.released,
                report.expired_by_retention,
                time.monotonic() - started,
            )
        except Exception:
            if once:
                raise
            log.exception("redrive pass failed; the next pass will retry")
        if once or stop.wait(max(0.0, settings.every_seconds - (time.monotonic() - started))):
            return
