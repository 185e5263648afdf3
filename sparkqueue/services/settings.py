"""The redrive job's settings (`conf/redrive.toml`): where, how often, and each table's upkeep."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import InvalidParameterValue
from ..limits import (
    CHECKPOINT_INTERVAL,
    FILE_RETENTION_HOURS,
    LOCAL_LOG_MINUTES,
    LOG_RETENTION_HOURS,
    REDRIVE_EVERY_SECONDS,
    UPKEEP_EVERY_SECONDS,
)
from ..rules.checks import check_int
from ..store.schema import retention_properties


@dataclass(frozen=True)
class UpkeepSettings:
    """How one queue's tables are kept small and fast."""

    upkeep_every_seconds: int = UPKEEP_EVERY_SECONDS  # 0: never
    file_retention_hours: int = FILE_RETENTION_HOURS
    log_retention_hours: int = LOG_RETENTION_HOURS
    checkpoint_interval: int = CHECKPOINT_INTERVAL
    # Local roots only: minutes of `_delta_log` kept, trimmed on every pass (0: Delta's daily cleanup).
    local_log_minutes: int = LOCAL_LOG_MINUTES

    def __post_init__(self) -> None:
        check_int("upkeep_every_seconds", self.upkeep_every_seconds, 0, 30 * 86_400)
        check_int("file_retention_hours", self.file_retention_hours, 1, 90 * 24)
        check_int("log_retention_hours", self.log_retention_hours, 1, 90 * 24)
        check_int("checkpoint_interval", self.checkpoint_interval, 1, 1000)
        check_int("local_log_minutes", self.local_log_minutes, 0, 7 * 24 * 60)
        if self.log_retention_hours < self.file_retention_hours:  # Delta refuses it too
            raise InvalidParameterValue(
                f"log_retention_hours ({self.log_retention_hours}) must be at least"
                f" file_retention_hours ({self.file_retention_hours})"
            )

    @classmethod
    def from_mapping(
        cls, values: dict[str, Any], base: UpkeepSettings | None = None
    ) -> UpkeepSettings:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(values) - known)
        if unknown:
            raise InvalidParameterValue(
                f"unknown upkeep setting(s) {unknown}; allowed: {sorted(known)}"
            )
        return cls(**{**(base or cls()).__dict__, **values})

    def table_properties(self) -> dict[str, str]:
        return retention_properties(
            self.file_retention_hours, self.log_retention_hours, self.checkpoint_interval
        )

    def due(self, last: datetime | None, now: datetime) -> bool:
        if not self.upkeep_every_seconds or last is None:
            return False
        return (now - last).total_seconds() >= self.upkeep_every_seconds


@dataclass(frozen=True)
class RedriveSettings:
    """What the scheduled job looks after and how."""

    root: str | None = None
    catalog: str | None = None  # a catalog schema instead of a root ("main.queues")
    every_seconds: int = REDRIVE_EVERY_SECONDS
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
        unknown = sorted(set(data) - {"root", "catalog", "every_seconds", "defaults", "queues"})
        if unknown:
            raise InvalidParameterValue(f"{path}: unknown setting(s) {unknown}")
        defaults = UpkeepSettings.from_mapping(data.get("defaults", {}))
        queues = data.get("queues")
        return cls(
            root=data.get("root"),
            catalog=data.get("catalog"),
            every_seconds=data.get("every_seconds", REDRIVE_EVERY_SECONDS),
            defaults=defaults,
            queues=None
            if queues is None
            else {name: UpkeepSettings.from_mapping(v, defaults) for name, v in queues.items()},
        )
