"""Where the queues are, as the entry points (the CLI, the jobs, the notebooks) are told it: a
storage root or a catalog schema, from the first source that names one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .broker import Broker
from .errors import InvalidParameterValue
from .store.tables import is_object_store, local_dir_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Source:
    """One place a root or catalog may come from, e.g. the flags or the settings file."""

    name: str
    root: str | None = None
    catalog: str | None = None


@dataclass(frozen=True)
class Where:
    """A broker's location: exactly one of a storage root or a catalog schema."""

    root: str | None = None
    catalog: str | None = None

    @classmethod
    def first(cls, *sources: Source) -> Where:
        """The first source giving a root or a catalog (giving both is an error: which one?)."""
        for source in sources:
            if source.root and source.catalog:
                raise InvalidParameterValue(
                    f"{source.name} give both a root ({source.root!r}) and a catalog"
                    f" ({source.catalog!r}); give one"
                )
            if source.root or source.catalog:
                return cls(source.root or None, source.catalog or None)
        names = ", ".join(source.name for source in sources)
        raise InvalidParameterValue(f"no queue root or catalog schema: give one in {names}")

    def local(self) -> bool:
        """Whether it is a root on the local disk."""
        return self.root is not None and local_dir_of(self.root) is not None

    def native(self) -> bool:
        """Whether the native engine can serve it alone: a root on the local disk, or on object
        storage (credentials from the environment, as delta-rs reads them)."""
        return self.local() or (self.root is not None and is_object_store(self.root))

    def broker(self, spark: SparkSession | None, **options: Any) -> Broker:
        if self.catalog:
            return Broker(spark, catalog=self.catalog, **options)
        return Broker(spark, self.root, **options)
