"""Where a broker's tables live: under a storage root, by path, or in a catalog schema, by name.

A `Layout` names every table a broker keeps (the registry, the metrics, each queue and its
`receive_df` claims) and turns an address (a path, or in catalog mode a table name) into a `Table`,
which knows how each kind of statement names it. Nothing above the store needs to know which
kind of address a queue's table has.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from ..errors import InvalidParameterValue, SchemaDoesNotExist
from . import sql

if TYPE_CHECKING:  # Spark's parts; a broker without Spark (the native engine) never loads them
    from delta.tables import DeltaTable
    from pyspark.sql import DataFrame, DataFrameWriter, SparkSession

# A catalog or schema name as Unity Catalog and Spark's session catalog both accept it.
_NAME_PART = re.compile(r"[A-Za-z0-9_-]{1,255}")
# Characters a queue name may have that a catalog table name had better not (`.fifo`, case).
_NOT_TABLE_NAME = re.compile(r"[^a-z0-9_]")
SESSION_CATALOG = "spark_catalog"  # Spark's own catalog (with Delta's), local to one process
# Mount-style paths that are not the driver's own disk even though they have no URI scheme.
_REMOTE_MOUNTS = ("/Volumes/", "/dbfs/", "/Workspace/")
# Object storage that delta-rs writes itself, with credentials from its storage options or the
# environment (AWS_*, GOOGLE_*, AZURE_*): S3, Google Cloud Storage, Azure Blob and ADLS Gen2.
OBJECT_STORE_SCHEMES = frozenset({"s3", "s3a", "gs", "az", "abfs", "abfss"})


@dataclass(frozen=True)
class Table:
    """One Delta table as statements name it: by path (`delta.`path``) or by catalog name."""

    address: str
    named: bool

    @property
    def sql(self) -> str:
        """Its name in SQL text."""
        if self.named:
            return ".".join(map(sql.quote_identifier, self.address.split(".")))
        return sql.path_table(self.address)

    @property
    def alias(self) -> str:
        """The qualifier of its columns as a MERGE target: the path for a path table (what
        Spark's own `mergeInto` uses), the table's own name for a named one."""
        return self.address.rsplit(".", 1)[-1] if self.named else self.address

    @property
    def prefix(self) -> str:
        """How MERGE conditions and values name a target column: `<prefix><column>`."""
        return f"{sql.quote_identifier(self.alias)}."

    def read(self, spark: SparkSession, version: int | None = None) -> DataFrame:
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.table(self.sql) if self.named else reader.load(self.address)

    def delta(self, spark: SparkSession) -> DeltaTable:
        """Delta's handle on the table (classic sessions only)."""
        from delta.tables import DeltaTable

        if self.named:
            return DeltaTable.forName(spark, self.sql)
        return DeltaTable.forPath(spark, self.address)

    def save(self, writer: DataFrameWriter) -> None:
        """Runs an append `writer` into the table (creating it when absent)."""
        if self.named:
            writer.saveAsTable(self.sql)
        else:
            writer.save(self.address)


def local_dir_of(location: str) -> str | None:
    """The driver-local folder of a root or schema location; None for remote storage (and for
    no location, as Unity Catalog describes schemas in its managed storage)."""
    if not location:
        return None
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return os.path.abspath(parsed.path)
    if not parsed.scheme and not location.startswith(_REMOTE_MOUNTS):
        return os.path.abspath(location)
    return None


def is_object_store(location: str) -> bool:
    """Whether a root is on object storage the native engine can write (given credentials)."""
    return urlparse(location).scheme.lower() in OBJECT_STORE_SCHEMES


def check_catalog_schema(catalog: object) -> tuple[str, ...]:
    """`schema` or `catalog.schema`, each part letters, digits, `_` or `-`; its parts."""
    parts = tuple(catalog.split(".")) if isinstance(catalog, str) else ()
    if not 1 <= len(parts) <= 2 or not all(_NAME_PART.fullmatch(part) for part in parts):
        raise InvalidParameterValue(
            "catalog must name a schema, as `catalog.schema` or `schema` (the current catalog's),"
            f" each part 1-255 letters, digits, '_' or '-'; got {catalog!r}"
        )
    return parts


def open_catalog(spark: SparkSession, catalog: str) -> CatalogLayout:
    """The layout of a broker on the catalog schema `catalog`, which must exist: a broker never
    creates schemas, whose owner, location and grants are its administrator's to choose."""
    from pyspark.errors import AnalysisException

    parts = check_catalog_schema(catalog)
    if len(parts) == 1:
        parts = (spark.catalog.currentCatalog(), *parts)
    quoted = ".".join(map(sql.quote_identifier, parts))
    try:
        rows = spark.sql(sql.describe_schema(quoted)).collect()
    except AnalysisException as error:
        if not _found_in_local_warehouse(spark, parts, quoted):
            raise SchemaDoesNotExist(
                f"catalog schema {'.'.join(parts)} does not exist or cannot be read"
                f" ({error.getCondition() or 'error'}); create it first: CREATE SCHEMA {quoted}"
            ) from None
        rows = spark.sql(sql.describe_schema(quoted)).collect()
    described = {row[0]: row[1] for row in rows}
    return CatalogLayout(parts[0], parts[1], described.get("Location") or "")


def _found_in_local_warehouse(spark: SparkSession, parts: tuple[str, ...], quoted: str) -> bool:
    """Registers a schema of Spark's local session catalog that another process created.

    That catalog lives in one process, but its schemas are folders of the warehouse
    (`<spark.sql.warehouse.dir>/<schema>.db`): when the folder is there, creating the schema
    here (at that same default location) finds the tables in it again (see Storage._attach)."""
    warehouse = local_dir_of(spark.conf.get("spark.sql.warehouse.dir", ""))
    if parts[0] != SESSION_CATALOG or warehouse is None:
        return False
    if not os.path.isdir(os.path.join(warehouse, f"{parts[1].lower()}.db")):
        return False
    spark.sql(sql.create_schema(quoted)).collect()
    return True


class PathLayout:
    """Tables in folders under one root path: `queues/<name>-<id>` and `_sparkqueue/...`."""

    def __init__(self, root: str) -> None:
        sql.check_path(root, "root")
        self.local_dir = local_dir_of(root)
        self.uri = f"file:{self.local_dir}" if self.local_dir else root.rstrip("/")
        self.object_store = is_object_store(root)

    def __str__(self) -> str:
        return self.uri

    @property
    def where(self) -> str:
        """How reprs say where the queues are."""
        return f"root={self.uri!r}"

    def table(self, address: str) -> Table:
        return Table(sql.check_path(address), named=False)

    def _path(self, *parts: str) -> str:
        return "/".join([self.uri, *parts])

    @property
    def registry(self) -> str:
        return self._path("_sparkqueue", "queues")

    @property
    def metrics(self) -> str:
        return self._path("_sparkqueue", "metrics")

    @property
    def leases(self) -> str:
        """Compaction leases on object storage (native_leases.py)."""
        return self._path("_sparkqueue", "leases")

    def new_queue(self, name: str) -> str:
        return self._path("queues", f"{name}-{uuid.uuid4().hex[:12]}")

    def claims(self, location: str) -> str:
        return self._path("_sparkqueue", "claims", location.rsplit("/", 1)[-1])

    def folder(self, address: str) -> str | None:
        """The local folder of a table, on a local root."""
        return os.path.abspath(urlparse(address).path) if self.local_dir else None

    def lock_file(self, address: str) -> str | None:
        """The table's cross-process commit lock, on a local root (None elsewhere)."""
        folder = self.folder(address)
        if self.local_dir is None or folder is None:
            return None
        # By real paths: brokers that spell one table differently (through a symlink, say) must
        # take one lock, or Spark's check-then-rename commit could lose a version beside theirs.
        folder, root = os.path.realpath(folder), os.path.realpath(self.local_dir)
        if not folder.startswith(root + os.sep):  # a sink outside the root: beside it
            parent, name = os.path.split(folder)
            return os.path.join(parent, f".{name}.sparkqueue.lock")
        name = folder[len(root) :].strip("/").replace("/", "__")
        return os.path.join(root, "_sparkqueue", "locks", f"{name}.lock")


class CatalogLayout:
    """Tables in one catalog schema: `sparkqueue_queues`, `sparkqueue_metrics`, and per queue
    `queue_<name>_<id>` with its claims `queue_<name>_<id>_claims`.

    On a schema whose location is on the driver's disk (Spark's session catalog locally), the
    tables' folders are `<schema location>/<table>` and the commit locks live beside them, as on
    a local root.
    """

    def __init__(self, catalog: str, schema: str, location: str) -> None:
        self.catalog, self.schema = catalog, schema
        self.local_dir = local_dir_of(location)

    def __str__(self) -> str:
        return f"{self.catalog}.{self.schema}"

    @property
    def where(self) -> str:
        return f"catalog={str(self)!r}"

    def table(self, address: str) -> Table:
        """Two- or three-part dotted names are tables in a catalog; anything else is a path."""
        parts = address.split(".") if isinstance(address, str) else []
        if 2 <= len(parts) <= 3 and all(_NAME_PART.fullmatch(part) for part in parts):
            return Table(address, named=True)
        return Table(sql.check_path(address), named=False)

    def _name(self, table: str) -> str:
        return f"{self.catalog}.{self.schema}.{table}"

    @property
    def registry(self) -> str:
        return self._name("sparkqueue_queues")

    @property
    def metrics(self) -> str:
        return self._name("sparkqueue_metrics")

    def new_queue(self, name: str) -> str:
        table = _NOT_TABLE_NAME.sub("_", name.lower())
        return self._name(f"queue_{table}_{uuid.uuid4().hex[:12]}")

    def claims(self, location: str) -> str:
        return f"{location}_claims"

    def mine(self, address: str) -> bool:
        """Whether `address` names a table of this schema."""
        return address.rsplit(".", 1)[0] == f"{self.catalog}.{self.schema}"

    def folder(self, address: str) -> str | None:
        """The local folder of one of this schema's tables (Spark's managed-table location)."""
        if self.local_dir is None or not self.mine(address):
            return None
        return os.path.join(self.local_dir, address.rsplit(".", 1)[-1])

    def lock_file(self, address: str) -> str | None:
        if self.local_dir is None:
            return None
        if not self.table(address).named:
            return PathLayout(self.local_dir).lock_file(address)
        name = address.replace(".", "__")
        return os.path.join(
            os.path.realpath(self.local_dir), "_sparkqueue", "locks", f"{name}.lock"
        )


Layout = PathLayout | CatalogLayout


def is_native_root(layout: object) -> bool:
    """Whether delta-rs can write this layout's tables: a path root on the local disk or on
    object storage (with credentials; see OBJECT_STORE_SCHEMES)."""
    return isinstance(layout, PathLayout) and (layout.local_dir is not None or layout.object_store)
