"""Reading which partitions a table's recent commits changed, from their log entries, through
Spark (so the same reader works on every store a Spark session reaches)."""

from __future__ import annotations

import logging
import re
from collections.abc import Collection
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StringType, StructField, StructType

if TYPE_CHECKING:
    from .storage import Storage

log = logging.getLogger(__name__)
# Past this many entries the check is not tried: a reconcile's cost is bounded, theirs is not.
MOST_ENTRIES = 200
# Characters Spark's file reader expands as a pattern in a path (Delta's own reads do not).
_GLOB = re.compile(r"[*?\[\]{}\\]")
_FILE = StructType([StructField("partitionValues", MapType(StringType(), StringType()))])
# The actions that matter here: files added or removed (with their partition values), and
# changes of the table's metadata or protocol (read as raw text: only their presence counts).
_ACTIONS = StructType(
    [
        StructField("add", _FILE),
        StructField("remove", _FILE),
        StructField("metaData", StringType()),
        StructField("protocol", StringType()),
    ]
)


def commits_touching(
    storage: Storage,
    address: str,
    after: int,
    through: int,
    column: str,
    values: Collection[str],
) -> int | None:
    """How many commits of the table at `address` after version `after`, through `through`,
    added or removed a file whose partition `column` holds one of `values` (or one whose value
    is not written), or changed the table's metadata or protocol (which may touch any file):
    one small Spark job over their log entries. None when that is not known: a table known by
    name alone (its log has no path here), a path Spark would read as a pattern, more entries
    than MOST_ENTRIES, or any failure to read one (an entry trimmed meanwhile)."""
    versions = range(after + 1, through + 1)
    table = storage.layout.table(address)
    where = storage.layout.folder(address) if table.named else table.address
    if where is None or _GLOB.search(where) or len(versions) > MOST_ENTRIES:
        return None
    entries = [f"{where.rstrip('/')}/_delta_log/{version:020d}.json" for version in versions]
    try:
        actions = storage.spark.read.schema(_ACTIONS).option("mode", "FAILFAST").json(entries)
        touching = _touches("add", column, values) | _touches("remove", column, values)
        touching = touching | F.col("metaData").isNotNull() | F.col("protocol").isNotNull()
        return actions.where(touching).select("_metadata.file_path").distinct().count()
    except Exception as error:  # whatever went wrong, the caller falls back to what needs no proof
        log.debug("reading the log entries of %s %s failed: %s", address, versions, error)
        return None


def _touches(action: str, column: str, values: Collection[str]) -> Column:
    """An `action` on a file in one of `values`' partitions, or on one whose partition value is
    not written (it may be anywhere)."""
    value = F.col(f"{action}.partitionValues").getItem(column)
    return F.col(action).isNotNull() & (value.isNull() | value.isin(list(values)))
