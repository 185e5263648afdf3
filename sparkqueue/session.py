"""The local default SparkSession: Delta configured, jars resolved once from Maven Central, then cached."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import pwd
import re
import sys
import tempfile
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from .datasource import register
from .store.spark_azure import azure_packages, azure_settings
from .store.spark_s3 import (
    S3_EXCLUDES,
    S3_PACKAGES,
    log_store_jar,
    names_aws,
    s3_settings,
    spark_hadoop_version,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
DEFAULTS_FILE = Path(__file__).with_name("spark-defaults.conf")
# The embedded JVM's console (Ivy's resolution report, Spark's start-up warnings, later Spark logs)
# goes to a file here, so a program's own output is all its terminal shows.
SPARK_LOG_DIR = Path(tempfile.gettempdir()) / "sparkqueue-logs"
LOG_TAIL_BYTES = 4_000  # shown when the JVM fails to start, so the reason is not hidden
# Where Spark 4's Ivy keeps resolved jars unless `spark.jars.ivy` says otherwise: under the JVM's
# `user.home`, the account's home directory (not $HOME, which the JVM does not read).
DEFAULT_IVY_DIR = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".ivy2.5.2"
FETCHING_JARS = "fetching Delta Lake jars (first run only)"
FETCH_LOCK = ".sparkqueue-fetch.lock"  # in the Ivy folder: one JVM at a time fetches into it
# What a fetch fetches, and from where: a marker of "fetched" stands for one set of these.
FETCH_SETTINGS = (
    "spark.jars.packages",
    "spark.jars.excludes",
    "spark.jars.repositories",
    "spark.jars.ivySettings",
)
_Started = TypeVar("_Started")
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


def jars_cached(packages: str, ivy_dir: Path) -> bool:
    """Whether Ivy already holds the packages' jars (then the session starts offline and quietly)."""
    for coordinate in packages.split(","):
        group, artifact, version = coordinate.strip().split(":")
        if not (ivy_dir / "jars" / f"{group}_{artifact}-{version}.jar").is_file():
            return False
    return True


def spark_session(storage_options: Mapping[str, str] | None = None, **conf: str) -> SparkSession:
    """Returns the active session unchanged (Databricks, spark-submit, a fixture); a Spark Connect
    session when $SPARK_REMOTE names a server (`sc://host:port`), as pyspark itself reads it; else
    a local one.

    `storage_options` (delta-rs's keys, as a Broker takes them; `{}` for the environment's) also
    sets the local session up for object storage, so that this session and the native engine
    may write one queue there at once (see docs/how-it-works.md): on S3, Hadoop's S3A client from
    the same endpoint, keys and region, and a Delta log store whose commits are conditional
    puts; on Azure (where an account is named), Hadoop's ABFS client from the same account,
    credentials and endpoint."""
    spark = _session(storage_options, conf)
    register(spark)  # the "sparkqueue" data source
    return spark


def _session(storage_options: Mapping[str, str] | None, conf: Mapping[str, str]) -> SparkSession:
    from pyspark.sql import SparkSession  # installed with sparkqueue[local], or by the platform

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if os.environ.get("SPARK_REMOTE"):  # the server has Delta; conf/spark-defaults.conf is local
        return SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).getOrCreate()
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit, its --conf and --packages rule
        return _submitted_session()
    # Python data sources and UDFs run in Python workers that Spark starts with $PYSPARK_PYTHON
    # (`python3` on the PATH by default): this interpreter, whose packages include sparkqueue.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = read_properties(DEFAULTS_FILE)
    settings.update(
        {
            "spark.sql.extensions": DELTA_EXTENSION,
            "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
            "spark.jars.packages": delta_maven_coordinate(),
        }
    )
    ivy_dir = Path(conf.get("spark.jars.ivy") or settings.get("spark.jars.ivy") or DEFAULT_IVY_DIR)
    if storage_options is not None:
        azure = azure_settings(storage_options)
        if azure:  # an Azure account is named: Hadoop's ABFS client
            settings.update(azure)
            _add(settings, "spark.jars.packages", *azure_packages(spark_hadoop_version()))
        if not azure or names_aws(storage_options):  # S3A and the conditional log store
            settings.update(s3_settings(storage_options))
            _add(settings, "spark.jars.packages", *S3_PACKAGES)
            _add(settings, "spark.jars.excludes", *S3_EXCLUDES)
            _add(settings, "spark.jars", str(log_store_jar(ivy_dir)))
    settings.update({key: str(value) for key, value in conf.items()})
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    if not jars_cached(settings["spark.jars.packages"], ivy_dir):
        print(FETCHING_JARS, file=sys.stderr, flush=True)  # the one line a first run shows
    start = functools.partial(_with_console_in_a_file, builder.getOrCreate)
    return one_fetch_at_a_time(start, ivy_dir, settings)


def one_fetch_at_a_time(
    start: Callable[[], _Started], ivy_dir: Path, settings: Mapping[str, str]
) -> _Started:
    """Runs `start`, a JVM start that resolves the packages `settings` name into Ivy's cache at
    `ivy_dir`, alone among the processes sharing that folder until they have once been fetched.

    Ivy's cache is not safe for two processes downloading into it at once: two sessions started
    together on a fresh machine each found the other's half-written jars ("Downloaded file size
    (0) doesn't match expected Content Length") and neither started. A lock file's `flock` is
    given back when its holder's process ends, killed or not (a JVM it started may still be
    downloading then, until it notices). A marker per set of fetch settings, written once the
    packages' jars are in the cache, lets every later start go without waiting for the others;
    a start after which they are not there (one whose process had its JVM up already, so that
    it fetched nothing) writes none.
    A folder that cannot be locked (read-only, or NFS without locks) is left to Ivy as before."""
    packages = settings["spark.jars.packages"]
    what = "\n".join(f"{key}={settings.get(key, '')}" for key in FETCH_SETTINGS)
    fetched = ivy_dir / f".sparkqueue-fetched-{hashlib.sha256(what.encode()).hexdigest()[:16]}"

    def done() -> bool:  # the marker alone would outlive a cache emptied by hand
        return fetched.exists() and jars_cached(packages, ivy_dir)

    if done():
        return start()
    try:
        ivy_dir.mkdir(parents=True, exist_ok=True)
        lock = (ivy_dir / FETCH_LOCK).open("a")
    except OSError:
        return start()
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
        except OSError:  # ENOLCK: a file system without locks
            return start()
        if not done():  # else another start fetched them while this one waited
            started = start()
            if jars_cached(packages, ivy_dir):
                with contextlib.suppress(OSError):
                    fetched.touch()
            return started
    return start()  # the lock is given back: starts of fetched packages run side by side


def _add(settings: dict[str, str], key: str, *values: str) -> None:
    """Appends to a comma-separated Spark setting."""
    settings[key] = ",".join(filter(None, [settings.get(key, ""), *values]))


def spark_log_path() -> Path:
    """Where this process's embedded JVM writes its console output."""
    return SPARK_LOG_DIR / f"spark-{os.getpid()}.log"


def _with_console_in_a_file(start: Callable[[], SparkSession]) -> SparkSession:
    """Starts the JVM with its stdout and stderr on `spark_log_path()` (it inherits them for its
    whole life); this process's own streams are restored at once. A failed start prints the
    file's tail, since that is where the JVM said why."""
    path = spark_log_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with path.open("ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            try:
                return start()
            finally:
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    except Exception:
        tail = path.read_bytes()[-LOG_TAIL_BYTES:].decode(errors="replace")
        print(f"Spark did not start; the end of {path}:\n{tail}", file=sys.stderr)
        raise
    finally:
        os.close(saved[0])
        os.close(saved[1])


def _submitted_session() -> SparkSession:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    if DELTA_EXTENSION not in (spark.conf.get("spark.sql.extensions", None) or ""):
        raise RuntimeError(
            "this spark-submit session lacks Delta Lake; submit with"
            " --properties-file conf/spark-defaults.conf"
            f" --packages {delta_maven_coordinate()}"
        )
    return spark
