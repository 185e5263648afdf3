"""The redrive job: dead-letter moves, releases, retention, upkeep and metrics, one pass at a time."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pyspark.sql import functions as F

from ..attributes import QueueAttributes
from ..clock import from_micros
from ..engine import inspect
from ..engine.conditions import (
    alive,
    awaiting_dead_letter,
    being_moved,
    due,
    expired_in_flight,
    past_retention,
    retire,
    spent_tombstone,
)
from ..engine.context import QueueContext
from ..engine.fifo import drop_duplicates
from ..engine.moves import Mover, StepHook, no_hook
from ..errors import InvalidParameterValue, QueueDoesNotExist
from ..model import QueueRedrive, RedriveReport
from ..rules.expr import Expr, null
from ..store.registry import QueueRecord
from ..store.spark_exprs import to_column
from ..store.spark_schema import METRICS_SCHEMA
from .settings import RedriveSettings
from .upkeep import keep_up, tidy_table, trim_logs

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
        self._storage = ctx.storage
        self.settings = settings or RedriveSettings()
        self._on_step = on_step
        self._mover = Mover(ctx, on_step)
        self.metrics_table = self._storage.layout.metrics
        self._storage.ensure_table(self.metrics_table, METRICS_SCHEMA)
        self._upkeep_at: dict[str, datetime] = {}

    def run(self, queues: Sequence[str] | None = None) -> RedriveReport:
        """One pass over `queues` (default: the settings' queues, else every queue)."""
        names = self._queue_names(queues)
        started = time.monotonic()
        results: dict[str, QueueRedrive] = {}
        rows: list[tuple[Any, ...]] = []
        for name in names:
            result, row = self._pass(name, started)
            results[name] = result
            rows.append(row)
        if rows:
            frame = self._storage.spark.createDataFrame(rows, METRICS_SCHEMA)
            self._storage.append(self.metrics_table, frame, "recording redrive metrics")
            shared = (self.metrics_table, self._ctx.registry.table)
            if any(result.upkeep for result in results.values()):
                for path in shared:
                    tidy_table(self._storage, path, self.settings.defaults)
            trim_logs(self._storage, shared, self.settings.defaults)
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
            raise QueueDoesNotExist(f"no such queue(s) in {self._storage.layout}: {missing}")
        return list(queues)

    def _pass(self, name: str, pass_started: float) -> tuple[QueueRedrive, tuple[Any, ...]]:
        started = time.monotonic()
        record = self._ctx.record(name)
        attrs = record.attributes
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
                log.warning("redrive %s: %r is written natively only; not moving", name, target)
            else:
                step(f"moving exhausted messages to {target!r}")
                moved += self._mover.move(record, exhausted(now, attrs), F.lit(target), now)
        released = 0
        if todo["expired_receives"]:
            step("releasing expired receives")
            released = self._release(record, now)
        expired = 0
        if todo["past_retention"]:
            step("removing messages past retention")
            expired = self._expire(record, now)
        if attrs.fifo:  # duplicates go before the tombstones that mark them as duplicates
            step("removing duplicates")
            drop_duplicates(self._storage, record.location, lambda: self._ctx.read(record))
        if todo["spent_tombstones"]:  # FIFO deletes and the worker loop's retired batches
            step("removing spent tombstones")
            self._storage.change_where(
                record.location,
                spent_tombstone(now),
                f"removing spent tombstones from {record.name!r}",
            )
        upkeep_settings = self.settings.upkeep_for(name)
        upkeep = bool(upkeep_settings.upkeep_every_seconds) and upkeep_settings.due(
            self._last_upkeep(name, now), now
        )
        if upkeep:
            self._upkeep_at[name] = now
            step("upkeep: compaction and VACUUM")
            keep_up(self._storage, record, upkeep_settings, now)
        claims = self._storage.layout.claims(record.location)
        trim_logs(self._storage, (record.location, claims), upkeep_settings)
        stats = inspect.stats(self._ctx, record)
        detail = self._storage.detail(record.location).first()
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
        row = (
            name,
            now,
            stats.visible,
            stats.in_flight,
            stats.delayed,
            stats.awaiting_dead_letter,
            stats.oldest_age_seconds,
            moved,
            released,
            expired,
            duration,
            upkeep,
            int(detail["numFiles"] or 0) if detail else 0,
            int(detail["sizeInBytes"] or 0) if detail else 0,
        )
        return QueueRedrive(name, moved, released, expired, duration, upkeep), row

    def _survey(self, record: QueueRecord, now: datetime) -> dict[str, int]:
        """One scan that says which steps this pass has work for, so idle steps cost nothing."""
        attrs = record.attributes
        count = lambda condition: F.count(F.when(to_column(condition), 1))  # noqa: E731
        row = (
            self._storage.read(record.location)
            .agg(
                count(being_moved()).alias("pending"),
                count(exhausted(now, attrs)).alias("exhausted"),
                count(releasable(now, attrs)).alias("expired_receives"),
                count(past_retention(now, attrs)).alias("past_retention"),
                count(spent_tombstone(now)).alias("spent_tombstones"),
            )
            .first()
        )
        assert row is not None
        return row.asDict()

    def _release(self, record: QueueRecord, now: datetime) -> int:
        """Expired receives become plainly visible again; their handles stop working."""
        return self._storage.change_where(
            record.location,
            releasable(now, record.attributes),
            f"releasing expired receives in {record.name!r}",
            values={"receipt_handle": null("string"), "handle_issued_at": null("timestamp")},
        )

    def _expire(self, record: QueueRecord, now: datetime) -> int:
        return self._storage.change_where(
            record.location,
            past_retention(now, record.attributes),
            f"removing messages past retention from {record.name!r}",
            values=retire(record.attributes),
        )

    def _last_upkeep(self, name: str, now: datetime) -> datetime | None:
        """When upkeep last ran for the queue; its first pass counts as the start of the cadence."""
        if name in self._upkeep_at:
            return self._upkeep_at[name]
        row = (
            self._storage.read(self.metrics_table)
            .where(F.col("queue") == F.lit(name))
            .agg(
                F.max(F.when(F.col("upkeep"), F.unix_micros("pass_at"))).alias("upkeep_us"),
                F.min(F.unix_micros("pass_at")).alias("first_us"),
            )
            .first()
        )
        last = from_micros(row["upkeep_us"] or row["first_us"]) if row else None
        self._upkeep_at[name] = last or now
        return last


def exhausted(now: datetime, attrs: QueueAttributes) -> Expr:
    """Messages due for the dead-letter queue: receives used up and the last one timed out."""
    return due(now) & alive(now, attrs) & awaiting_dead_letter(attrs) & ~being_moved()


def releasable(now: datetime, attrs: QueueAttributes) -> Expr:
    return expired_in_flight(now) & ~awaiting_dead_letter(attrs)


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
