"""The redrive job: dead-letter moves, releases, retention, upkeep and metrics, one pass at a time.

A pass runs on the broker's Spark session where it has one (moves at DataFrame scale), and
otherwise through the native engine (moves of the rows at hand, engine/moves/steps.py): the same steps,
the same rules, the same upkeep on the same cadence (tidy.py) and the same metrics, so a broker
without Spark, on a local root or object storage, keeps its queues as Spark's job would.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ..clock import from_micros
from ..engine.conditions import (
    all_shards,
    being_moved,
    exhausted,
    past_retention,
    releasable,
    spent_tombstone,
)
from ..engine.context import QueueContext
from ..engine.fifo import operations as fifo_ops
from ..engine.messages import inspect
from ..engine.messages.acknowledge import retire_where
from ..engine.moves.choice import movers
from ..engine.moves.steps import Moves, StepHook, no_hook
from ..errors import InvalidParameterValue, QueueDoesNotExist
from ..model import QueueRedrive, RedriveReport
from ..rules.expr import col, lit, micros, null, when
from ..store.logtrim import trim_logs
from ..store.registry import QueueRecord
from ..store.schema import METRICS_COLUMNS, TENANT_FIGURES
from ..store.statements import Tables
from .settings import RedriveSettings, UpkeepSettings
from .tidy import Lease, Tidy, tidy_table

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
        self._upkeep_at: dict[str, datetime] = {}
        # Reads, changes and upkeep: through the native engine, or Spark's bulk session.
        self._tables: Tables
        self._tidy: Tidy
        self._keep_up: Callable[[QueueRecord, UpkeepSettings, datetime], None]
        if ctx.bulk is None:
            native = ctx.native
            assert native is not None
            self._tables = self._tidy = native
            self._keep_up = lambda record, settings, now: tidy_table(
                native,
                record.location,
                settings,
                all_shards(record.attributes),
                lease=self._lease(),
            )
        else:
            from ..store.spark_tables import SparkTables  # its scans at scale: compiled
            from .upkeep import keep_up  # the queue's receive_df claims too, which are Spark's

            self._tables, self._tidy = SparkTables(ctx.bulk, interpreted=False), ctx.bulk
            bulk = ctx.bulk
            self._keep_up = lambda record, settings, now: keep_up(
                bulk, record, settings, now, self._lease()
            )
        self.metrics_table = self._tables.layout.metrics
        self._tables.ensure_table(self.metrics_table, METRICS_COLUMNS)

    def run(self, queues: Sequence[str] | None = None) -> RedriveReport:
        """One pass over `queues` (default: the settings' queues, else every queue)."""
        names = self._queue_names(queues)
        started = time.monotonic()
        results: dict[str, QueueRedrive] = {}
        rows: list[dict[str, Any]] = []
        failed: dict[str, Exception] = {}

        # Each queue on its own: one that fails (a store error, a table another broker left in
        # a state this one cannot finish) is logged and tried once more after the others, then
        # reported; it never keeps the queues after it from their releases and retention.
        def attempt(name: str) -> None:
            try:
                found = self._queue_pass(name, started)
            except Exception as error:
                gone = isinstance(error, QueueDoesNotExist)  # this queue, or another one?
                if gone and self._ctx.registry.get(name, fresh=True) is None:
                    failed.pop(name, None)  # deleted meanwhile
                    return
                log.exception("redrive %s: the pass failed; the others go on", name)
                failed[name] = error
                return
            failed.pop(name, None)
            if found is not None:
                results[name], row = found
                rows.append(row)

        for name in names:
            attempt(name)
        for name in list(failed):
            attempt(name)
        if rows:
            what = "recording redrive metrics"
            self._tables.append_rows(self.metrics_table, METRICS_COLUMNS, rows, what)
            shared = (self.metrics_table, self._ctx.registry.table)
            defaults = self.settings.defaults
            if any(result.upkeep for result in results.values()):
                for address in shared:
                    tidy_table(self._tidy, address, defaults, lease=self._lease())
            trim_logs(self._tables.layout, shared, defaults.local_log_minutes)
        return RedriveReport(results, {name: _described(e) for name, e in failed.items()})

    def _lease(self) -> Lease | None:
        """Compaction's lease on object storage, taken through the native engine whichever
        engine compacts (services/tidy.py); None where no native engine reaches the root."""
        native, clock = self._ctx.native, self._ctx.now
        return None if native is None else lambda path: native.compacting(path, clock)

    def _queue_pass(self, name: str, started: float) -> tuple[QueueRedrive, dict] | None:
        """One queue's part of a pass (None: nothing this pass can do for it)."""
        record = self._ctx.record(name)
        if not self._tables.exists(record.location):  # a creation or deletion under way
            log.debug("redrive %s: registered without its table; skipped", name)
            return None
        if self._ctx.bulk is None and self._ctx.spark_only(record):
            log.warning("redrive %s: its FIFO table is Spark's; a pass with Spark serves it", name)
            return None
        return self._pass(record, started)

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
        if todo["exhausted"]:
            step("moving exhausted messages to the dead-letter queue")
            moved += move_exhausted(self._ctx, self._mover, record, now)
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
            expired = retire_where(
                self._ctx,
                self._tables,
                record,
                past_retention(now, attrs),
                f"removing messages past retention from {name!r}",
            )
        if attrs.fifo:  # duplicates go before the tombstones that mark them as duplicates
            step("removing duplicates")
            fifo_ops.drop_duplicates(self._ctx, record, self._tables)
        if todo["spent_tombstones"]:  # FIFO deletes and the worker loop's retired batches
            step("removing spent tombstones")
            what = f"removing spent tombstones from {name!r}"
            self._tables.change_where(location, spent_tombstone(now), what)
        settings = self.settings.upkeep_for(name)
        upkeep = bool(settings.upkeep_every_seconds) and settings.due(
            self._last_upkeep(name, now), now
        )
        if upkeep:
            self._upkeep_at[name] = now
            step("upkeep: compaction and VACUUM")
            try:
                self._keep_up(record, settings, now)
            except Exception:  # the queue's moves and metrics stand; upkeep waits a cadence
                log.exception("redrive %s: upkeep failed; the next one is due in %d s", name,
                              settings.upkeep_every_seconds)  # fmt: skip
                upkeep = False
        claims = self._tables.layout.claims(location)  # (receive_df's, on a local root)
        trim_logs(self._tables.layout, (location, claims), settings.local_log_minutes)
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
            **{name: getattr(stats, name) for name in TENANT_FIGURES},
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

    def _last_upkeep(self, name: str, now: datetime) -> datetime | None:
        """When upkeep last ran for the queue (from the metrics, once per process); its first
        pass counts as the start of the cadence."""
        if name not in self._upkeep_at:
            mine, at = col("queue") == lit(name), micros(col("pass_at"))
            row = self._tables.aggregate(
                self.metrics_table,
                {},
                {  # the latest upkeep as the least negated instant
                    "upkeep_us": when([(mine & col("upkeep"), lit(0) - at)], null("long")),
                    "first_us": when([(mine, at)], null("long")),
                },
            )
            if row.upkeep_us is not None:
                last: datetime | None = from_micros(-row.upkeep_us)
            else:
                last = None if row.first_us is None else from_micros(row.first_us)
            self._upkeep_at[name] = last or now
            return last
        return self._upkeep_at[name]


def dead_letters_of(ctx: QueueContext, mover: Moves, record: QueueRecord) -> QueueRecord | None:
    """The queue's dead-letter queue where `mover` can write it (None: none, or it is gone, or
    the broker cannot write it: what is left for a broker that can)."""
    target = record.attributes.dead_letter_queue
    dead = None if target is None else ctx.registry.get(target)
    return dead if dead is not None and mover.writable(dead) else None


def move_exhausted(
    ctx: QueueContext, mover: Moves, record: QueueRecord, now: datetime, limit: int | None = None
) -> int:
    """Moves the queue's messages that used up their receives (and whose last one timed out)
    to its dead-letter queue, up to `limit`; how many. A dead-letter queue that is gone, or
    that this broker cannot write, is logged and left for a broker that can."""
    dead = dead_letters_of(ctx, mover, record)
    if dead is None:
        log.warning(
            "redrive %s: dead-letter queue %r is gone or this broker cannot write it; not moving",
            record.name,
            record.attributes.dead_letter_queue,
        )
        return 0
    return mover.move(record, exhausted(now, record.attributes), dead.name, now, limit)


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
                "redrive pass over %d queue(s): moved %d, released %d, expired %d (%.1f s)%s",
                len(report.queues),
                report.moved_to_dead_letter,
                report.released,
                report.expired_by_retention,
                time.monotonic() - started,
                f"; failed: {sorted(report.failed)}" if report.failed else "",
            )
            if report.failed and once:
                raise PassFailed(report.failed)
        except Exception:
            if once:
                raise
            log.exception("redrive pass failed; the next pass will retry")
        if once or stop.wait(max(0.0, settings.every_seconds - (time.monotonic() - started))):
            return


class PassFailed(RuntimeError):
    """A pass (the job's `--once`) that did every queue but the ones it names."""

    def __init__(self, failed: dict[str, str]) -> None:
        super().__init__(f"the redrive pass failed for {len(failed)} queue(s): {failed}")
        self.failed = failed


def _described(error: Exception) -> str:
    """A failed queue's line in the report: the error's kind and what it said."""
    return f"{type(error).__name__}: {error}"
