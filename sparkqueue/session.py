"""The local default SparkSession: Delta configured, jars resolved once from Maven Central, then cached."""

from __future__ import annotations

import os
import re
from importlib import metadata
from pathlib import Path

from pyspark.sql import SparkSession

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
DEFAULTS_FILE = Path(__file__).with_name("spark-defaults.conf")
# A key ends at its first `=`, `:` or blank, as in java.util.Properties; values may contain all three.
_SEPARATOR = re.compile(r"\s*[=:\s]\s*")


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Parses a Spark properties file (`key value` or `key=value` lines, `#` comments)."""
    entries: dict[str, str] = {}
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, *value = _SEPARATOR.split(line, maxsplit=1)
        entries[key] = value[0] if value else ""
    return entries


def delta_maven_coordinate() -> str:
    """The Delta artifact matching the installed pyspark and delta-spark (Spark resolves it via Ivy)."""
    import pyspark

    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    delta_version = os.environ.get("SPARKQUEUE_DELTA_VERSION") or metadata.version("delta-spark")
    return f"io.delta:delta-spark_{spark_minor}_2.13:{delta_version}"


def spark_session(**conf: str) -> SparkSession:
    """Returns the active session unchanged (Databricks, spark-submit, a fixture); a Spark Connect
    session when $SPARK_REMOTE names a server (`sc://host:port`), as pyspark itself reads it; else
    a local one."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if os.environ.get("SPARK_REMOTE"):  # the server has Delta; conf/spark-defaults.conf is local
        return SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).getOrCreate()
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit, its --conf and --packages rule
        return _submitted_session()
    settings = read_properties(DEFAULTS_FILE)
    settings.update(
        {
            "spark.sql.extensions": DELTA_EXTENSION,
            "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
            "spark.jars.packages": delta_maven_coordinate(),
        }
    )
    settings.update({key: str(value) for key, value in conf.items()})
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _submitted_session() -> SparkSession:
    spark = SparkSession.builder.getOrCreate()
    if DELTA_EXTENSION not in (spark.conf.get("spark.sql.extensions", None) or ""):
        raise RuntimeError(
            "this spark-submit session lacks Delta Lake; submit with"
            " --properties-file conf/spark-defaults.conf"
            f" --packages {delta_maven_coordinate()}"
        )
    return spark
