"""Spark on S3 beside the native engine: S3A configured from delta-rs's storage options, and a
Delta log store that commits each version with a conditional put, as delta-rs does.

Delta's own S3 log store (`S3SingleDriverLogStore`) checks that `N.json` is absent and then
writes it, guarded only inside one JVM: another JVM, or delta-rs, committing version N between
the check and the write is silently overwritten. `ConditionalS3LogStore` (jvm/, compiled here
once against the jars Spark runs with) writes `N.json` through S3A's conditional create
(`If-None-Match: *`, Hadoop 3.5's S3A), so S3 itself refuses a second writer of a version, and
the loser's Delta transaction checks for conflicts and retries at the next version, as it does
against a writer in its own JVM. delta-rs's S3 commits are the same kind of put, so the two
engines' commits exclude each other on S3 itself."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from ..errors import InvalidParameterValue
from .spark_azure import AZURE_SCHEMES, renames_conditionally

LOG_STORE_CLASS = "org.sparkqueue.storage.ConditionalS3LogStore"
LOG_STORE_SOURCE = Path(__file__).parent.parent / "jvm" / "ConditionalS3LogStore.java"
S3_SCHEMES = ("s3", "s3a")
# Hadoop's S3A client with conditional create, and the AWS SDK v2 modules it loads, named one by
# one: hadoop-aws depends on the SDK's `bundle` jar (686 MB), which the session leaves out.
HADOOP_AWS_VERSION = "3.5.0"
AWS_SDK_VERSION = "2.35.4"  # the SDK Hadoop 3.5.0 is built and tested with
S3_PACKAGES = (
    f"org.apache.hadoop:hadoop-aws:{HADOOP_AWS_VERSION}",
    f"software.amazon.awssdk:s3:{AWS_SDK_VERSION}",
    f"software.amazon.awssdk:s3-transfer-manager:{AWS_SDK_VERSION}",
)
S3_EXCLUDES = ("software.amazon.awssdk:bundle",)
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
# delta-rs settings that swap its conditional put for another commit protocol on S3.
UNSAFE_WITH_SPARK = ("AWS_S3_ALLOW_UNSAFE_RENAME", "AWS_S3_LOCKING_PROVIDER", "AWS_CONDITIONAL_PUT",
                     "AWS_COPY_IF_NOT_EXISTS")  # fmt: skip
JAR_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sparkqueue" / "jars"


def s3_settings(storage_options: Mapping[str, str] | None) -> dict[str, str]:
    """Spark settings for S3 (`s3://` and `s3a://` roots) from delta-rs's storage options,
    falling back to the same names in the environment: the endpoint, keys, session token, region
    and plain-HTTP switch that configure the native engine configure Spark's S3A too."""
    given = {key.upper(): str(value) for key, value in (storage_options or {}).items()}
    options = {key: value for key, value in os.environ.items() if key.startswith("AWS_")}
    options.update(given)
    settings = {
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.create.conditional.enabled": "true",
        # S3A buffers uploads in memory: its disk buffer needs Hadoop's checksummed local file
        # system, which spark-defaults.conf swaps for the raw one.
        "spark.hadoop.fs.s3a.fast.upload.buffer": "bytebuffer",
        **{f"spark.delta.logStore.{scheme}.impl": LOG_STORE_CLASS for scheme in S3_SCHEMES},
    }
    endpoint = options.get("AWS_ENDPOINT_URL") or options.get("AWS_ENDPOINT")
    if endpoint:
        settings["spark.hadoop.fs.s3a.endpoint"] = endpoint
        settings["spark.hadoop.fs.s3a.path.style.access"] = "true"  # as delta-rs with an endpoint
        if endpoint.startswith("http://"):
            if options.get("AWS_ALLOW_HTTP", "").lower() not in ("true", "1", "yes"):
                raise InvalidParameterValue(
                    f"the endpoint {endpoint} is plain HTTP; set AWS_ALLOW_HTTP to 'true' in"
                    " storage_options to allow it (for both engines), or use https://"
                )
            settings["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "false"
    region = options.get("AWS_REGION") or options.get("AWS_DEFAULT_REGION")
    if region:
        settings["spark.hadoop.fs.s3a.endpoint.region"] = region
    if "AWS_ACCESS_KEY_ID" in given or "AWS_SECRET_ACCESS_KEY" in given:
        settings["spark.hadoop.fs.s3a.access.key"] = given.get("AWS_ACCESS_KEY_ID", "")
        settings["spark.hadoop.fs.s3a.secret.key"] = given.get("AWS_SECRET_ACCESS_KEY", "")
        provider = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        if "AWS_SESSION_TOKEN" in given:
            settings["spark.hadoop.fs.s3a.session.token"] = given["AWS_SESSION_TOKEN"]
            provider = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        settings["spark.hadoop.fs.s3a.aws.credentials.provider"] = provider
    return settings


def names_aws(storage_options: Mapping[str, str] | None) -> bool:
    """Whether delta-rs's AWS keys are given or in the environment (an S3 store may be meant)."""
    given = (str(key).upper() for key in (storage_options or {}))
    return any(key.startswith("AWS_") for key in (*given, *os.environ))


def session_commits_conditionally(spark: Any, uri: str) -> bool:
    """Whether this Spark session commits tables under `uri` so that the store refuses a second
    writer of a version (then the native engine may commit beside it there). Read from the Spark
    context's settings, which Delta chooses its log store by; a Spark Connect session's server is
    out of sight: never."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return False
    from .classic import context_setting

    scheme = uri.split(":", 1)[0]
    keys = (*log_store_keys(scheme), file_system_key(scheme))
    return commits_conditionally({key: context_setting(spark, key) for key in keys}, scheme)


def check_shared_options(storage_options: Mapping[str, str] | None, uri: str) -> None:
    """Refuses delta-rs settings that would make its S3 commits something other than conditional
    puts, where Spark commits beside it on S3 (given, or in the environment, which delta-rs
    reads)."""
    if uri.split(":", 1)[0] not in S3_SCHEMES:
        return
    given = {key.upper(): str(value) for key, value in (storage_options or {}).items()}
    for key in UNSAFE_WITH_SPARK:
        value = given.get(key, os.environ.get(key))
        if value is not None:
            raise InvalidParameterValue(
                f"{key} changes how the native engine commits on S3, and Spark commits beside it"
                " here with conditional puts; leave it unset (in storage_options and in the"
                " environment) for a root both engines write"
            )


def log_store_keys(scheme: str) -> tuple[str, ...]:
    """The settings naming the Delta log store for `scheme://` paths, the specific first, each
    with Spark's prefix and without (Delta reads both)."""
    return (f"spark.delta.logStore.{scheme}.impl", f"delta.logStore.{scheme}.impl",
            "spark.delta.logStore.class", "delta.logStore.class")  # fmt: skip


def file_system_key(scheme: str) -> str:
    """The Spark setting naming Hadoop's file system for `scheme://` paths."""
    return f"spark.hadoop.fs.{scheme}.impl"


def commits_conditionally(conf: Mapping[str, str | None], scheme: str) -> bool:
    """Whether a session with these settings commits `scheme://` tables so that the store
    refuses a second writer of a version (then the native engine may commit beside it): on S3
    with conditional puts, on Azure with Delta's renaming log store (spark_azure.py)."""
    log_store = next((conf[key] for key in log_store_keys(scheme) if conf.get(key)), None)
    if scheme in AZURE_SCHEMES:
        return renames_conditionally(log_store, conf.get(file_system_key(scheme)))
    return scheme in S3_SCHEMES and log_store == LOG_STORE_CLASS


def log_store_jar(ivy_dir: Path) -> Path:
    """The log store's jar, compiled from its source on first use and cached by the source's and
    the jars' versions. Needs a JDK's `javac` (Spark's own Java 17 or newer)."""
    hadoop_api = _hadoop_client_api()
    delta_version = os.environ.get("SPARKQUEUE_DELTA_VERSION") or metadata.version("delta-spark")
    source = LOG_STORE_SOURCE.read_bytes()
    digest = hashlib.sha256(source + hadoop_api.name.encode() + delta_version.encode())
    jar = JAR_CACHE / f"sparkqueue-s3-log-store-{digest.hexdigest()[:16]}.jar"
    if jar.is_file():
        return jar
    delta_storage = _delta_storage_jar(delta_version, ivy_dir)
    javac = shutil.which("javac", path=_java_bin_path())
    if javac is None:
        raise RuntimeError(
            "Spark's S3 log store is compiled on first use and needs a JDK's javac (Java 17+);"
            " none found on PATH or under JAVA_HOME"
        )
    JAR_CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=JAR_CACHE) as work:
        classes = Path(work, "classes")
        classpath = os.pathsep.join([str(hadoop_api), str(delta_storage)])
        _run([javac, "--release", "17", "-proc:none", "-d", str(classes), "-cp", classpath,
              str(LOG_STORE_SOURCE)])  # fmt: skip
        built = Path(work, jar.name)
        _run([shutil.which("jar", path=_java_bin_path()) or "jar", "cf", str(built),
              "-C", str(classes), "."])  # fmt: skip
        os.replace(built, jar)  # atomic: a process compiling beside this one finds a whole jar
    return jar


def spark_hadoop_version() -> str:
    """The version of the Hadoop client that pyspark ships (Hadoop's cloud connectors must match)."""
    return _spark_hadoop_client().stem.removeprefix("hadoop-client-api-")


def _spark_hadoop_client() -> Path:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    found = sorted(jars.glob("hadoop-client-api-*.jar"))
    if not found:
        raise RuntimeError(f"no hadoop-client-api jar in {jars}: is pyspark installed whole?")
    return found[-1]


def _hadoop_client_api() -> Path:
    version = spark_hadoop_version()
    if version != HADOOP_AWS_VERSION:
        raise RuntimeError(
            f"Spark's Hadoop is {version}; the S3 log store needs Hadoop {HADOOP_AWS_VERSION}'s"
            " S3A (conditional create), which pyspark 4.1 and later ship"
        )
    return _spark_hadoop_client()


def _delta_storage_jar(version: str, ivy_dir: Path) -> Path:
    """delta-storage's jar (the log store's base class): Ivy's copy, else Maven Central's."""
    in_ivy = ivy_dir / "jars" / f"io.delta_delta-storage-{version}.jar"
    if in_ivy.is_file():
        return in_ivy
    cached = JAR_CACHE / f"delta-storage-{version}.jar"
    if not cached.is_file():
        JAR_CACHE.mkdir(parents=True, exist_ok=True)
        url = f"{MAVEN_CENTRAL}/io/delta/delta-storage/{version}/delta-storage-{version}.jar"
        partial = cached.with_suffix(f".{os.getpid()}.part")
        try:
            with urllib.request.urlopen(url, timeout=60) as answer:
                partial.write_bytes(answer.read())
            os.replace(partial, cached)
        finally:
            partial.unlink(missing_ok=True)
    return cached


def _java_bin_path() -> str:
    home = os.environ.get("JAVA_HOME")
    bins = [os.path.join(home, "bin")] if home else []
    return os.pathsep.join([*bins, os.environ.get("PATH", "")])


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:2])} failed:\n{done.stdout}{done.stderr}")
