"""The redrive job: dead-letter moves, releases, retention, upkeep and metrics, one pass at a time."""

from __future__ import annotations

import logging
import threading
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .attributes import QueueAttributes, check_int
from .clock import from_micros, read_clock
from .conditions import (
    alive,
    awaiting_dead_letter,
    being_moved,
    due,
    expired_in_flight,
    past_retention,
    spent_tombstone,
)
from .errors import InvalidParameterValue, QueueDoesNotExist
from .fifo import drop_duplicates, retire
from .moves import Mover, StepHook, no_hook
from .queue import Queue
from .registry import QueueRecord
from .storage import Storage
from .upkeep import UpkeepSettings, keep_up, tidy_table

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

PROGRESS_AFTER_SECONDS = 10.0  # a pass slower than this logs each step as it starts

METRICS_SCHEMA = StructType(
    [
        StructField("queue", StringType(), False),
        StructField("pass_at", TimestampType(), False),
        StructField("visible", LongType(), False),
        StructField("in_flight", LongType(), False),
        StructField("delayed", LongType(), False),
        StructField("awaiting_dead_letter", LongType(), False),
        StructField("oldest_age_seconds", DoubleType(), False),
        StructField("moved_to_dead_letter", LongType(), False),
        StructField("released", LongType(), False),
        StructField("expired_by_retention", LongType(), False),
        StructField("duration_seconds", DoubleType(), False),
        StructField("upkeep", BooleanType(), False),
        StructField("active_files", LongType(), False),
        StructField("table_bytes", LongType(), False),
    ]
)


@dataclass(frozen=True)
class QueueRedrive:
    """What one pass did to one queue."""

    queue: str
    moved_to_dead_letter: int
    released: int
    expired_by_retention: int
    duration_seconds: float
    upkeep: bool


@dataclass(frozen=True)
class RedriveReport:
    """One pass of the redrive job: counts per queue and in total."""

    queues: dict[str, QueueRedrive] = field(default_factory=dict)

    @property
    def moved_to_dead_letter(self) -> int:
        return sum(q.moved_to_dead_letter for q in self.queues.values())

    @property
    def released(self) -> int:
        return sum(q.released for q in self.queues.values())

    @property
    def expired_by_retention(self) -> int:
        return sum(q.expired_by_retention for q in self.queues.values())


@dataclass(frozen=True)
class RedriveSettings:
    """What the scheduled job looks after and how (read from `conf/redrive.toml`)."""

    root: str | None = None
    every_seconds: int = 60
    defaults: UpkeepSettings = field(default_factory=UpkeepSettings)
    queues: dict[str, UpkeepSettings] | None = None  # None: every queue on the root

    def __post_init__(self) -> None:
        check_int("every_seconds", self.every_seconds, 1, 86_400)

    def upkeep_for(self, name: str) -> UpkeepSettings:
        return (self.queues or {}).get(name, self.defaults)

    @classmethod
    def load(cls, path: str | Path) -> RedriveSettings:
        with open(path, "rb") as handle:
            data: dict[str, Any] = tomllib.load(handle)
        unknown = sorted(set(data) - {"root", "every_seconds", "defaults", "queues"})
        if unknown:
            raise InvalidParameterValue(f"{path}: unknown setting(s) {unknown}")
        defaults = UpkeepSettings.from_mapping(data.get("defaults", {}))
        queues = data.get("queues")
        return cls(
            root=data.get("root"),
            every_seconds=data.get("every_seconds", 60),
            defaults=defaults,
            queues=None
            if queues is None
            else {name: UpkeepSettings.from_mapping(v, defaults) for name, v in queues.items()},
        )


class Redrive:
    """Runs passes of the redrive job over a broker's queues."""

    def __init__(
        self,
        broker: Broker,
        settings: RedriveSettings | None = None,
        *,
        on_step: StepHook = no_hook,
    ) -> None:
        self._broker = broker
        self._storage = broker.storage
        self.settings = settings or RedriveSettings()
        self._on_step = on_step
        self._mover = Mover(broker, on_step)
        self.metrics_path = metrics_path(self._storage)
        self._storage.ensure_table(self.metrics_path, METRICS_SCHEMA)
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
            frame = self._broker.spark.createDataFrame(rows, METRICS_SCHEMA)
            self._storage.append(self.metrics_path, frame, "recording redrive metrics")
            if any(result.upkeep for result in results.values()):
                for path in (self.metrics_path, self._broker.registry.path):
                    tidy_table(self._storage, path, self.settings.defaults)
        return RedriveReport(results)

    def _queue_names(self, queues: Sequence[str] | None) -> list[str]:
        known = self._broker.list_queues()
        if queues is None:
            if self.settings.queues is None:
                return known
            queues = list(self.settings.queues)
        if isinstance(queues, str) or not all(isinstance(name, str) for name in queues):
            raise InvalidParameterValue("queues must be a list of queue names")
        missing = sorted(set(queues) - set(known))
        if missing:
            raise QueueDoesNotExist(f"no such queue(s) under {self._broker.root}: {missing}")
        return list(queues)

    def _pass(self, name: str, pass_started: float) -> tuple[QueueRedrive, tuple[Any, ...]]:
        started = time.monotonic()
        record = self._broker.record(name)
        attrs = record.attributes
        now = read_clock(self._broker.clock)

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
            if self._broker.registry.get(target) is None:
                log.warning("redrive %s: dead-letter queue %r does not exist", name, target)
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
            step("removing duplicates and spent tombstones")
            self._tidy_fifo(record, now, todo["spent_tombstones"])
        upkeep_settings = self.settings.upkeep_for(name)
        upkeep = bool(upkeep_settings.upkeep_every_seconds) and upkeep_settings.due(
            self._last_upkeep(name, now), now
        )
        if upkeep:
            self._upkeep_at[name] = now
            step("upkeep: compaction and VACUUM")
            keep_up(self._storage, record.location, upkeep_settings, now)
        stats = Queue(self._broker, name).stats()
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
        count = lambda condition: F.count(F.when(condition, 1))  # noqa: E731
        row = (
            self._storage.read(record.location)
            .agg(
                count(being_moved()).alias("pending"),
                count(exhausted(now, attrs)("")).alias("exhausted"),
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
            values={
                "receipt_handle": F.lit(None).cast("string"),
                "handle_issued_at": F.lit(None).cast("timestamp"),
            },
        )

    def _expire(self, record: QueueRecord, now: datetime) -> int:
        return self._storage.change_where(
            record.location,
            past_retention(now, record.attributes),
            f"removing messages past retention from {record.name!r}",
            values=retire(record.attributes),
        )

    def _tidy_fifo(self, record: QueueRecord, now: datetime, spent_tombstones: int) -> None:
        """Drops never-delivered duplicates, then tombstones whose window has passed."""
        drop_duplicates(self._storage, record.location)
        if spent_tombstones:
            self._storage.change_where(
                record.location,
                spent_tombstone(now),
                f"removing spent deduplication tombstones from {record.name!r}",
            )

    def _last_upkeep(self, name: str, now: datetime) -> datetime | None:
        """When upkeep last ran for the queue; its first pass counts as the start of the cadence."""
        if name in self._upkeep_at:
            return self._upkeep_at[name]
        row = (
            self._storage.read(self.metrics_path)
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


def metrics_path(storage: Storage) -> str:
    return storage.path("_sparkqueue", "metrics")


def exhausted(now: datetime, attrs: QueueAttributes) -> Callable[[str], Column]:
    """Messages due for the dead-letter queue: receives used up and the last one timed out."""
    return lambda p: (
        due(now, p) & alive(now, attrs, p) & awaiting_dead_letter(attrs, p) & ~being_moved(p)
    )


def releasable(now: datetime, attrs: QueueAttributes) -> Column:
    return expired_in_flight(now) & ~awaiting_dead_letter(attrs)


def run_schedule(
    broker: Broker,
    settings: RedriveSettings,
    *,
    queues: Sequence[str] | None = None,
    once: bool = False,
    stop: threading.Event | None = None,
) -> None:
    """The job's loop: a pass now, then one every `settings.every_seconds` until stopped."""
    stop = stop or threading.Event()
    redrive = Redrive(broker, settings)
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
