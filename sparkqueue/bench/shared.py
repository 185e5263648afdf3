"""Both engines on one object-storage root: a broker with a Spark session that commits
conditionally (`spark_session(storage_options=...)`) serves the per-message operations natively
while Spark sends DataFrames to the same queue. It runs with the per-message scenarios on an S3
or Azure root whose session commits conditionally:

    python -m sparkqueue.bench --engine native --only latency --object-store s3://bucket/prefix
    python -m sparkqueue.bench --engine native --only latency \
        --object-store abfss://container@account.dfs.core.windows.net/prefix
"""

from __future__ import annotations

import threading
from typing import Any

from pyspark.sql import SparkSession

from ..broker import Broker
from .backlog import bodies
from .loads import Sender, load

SPARK_SEND_EVERY_SECONDS = 2.0
SPARK_SEND_ROWS = 100


def spark_sender(spark: SparkSession) -> Sender:
    """A Spark job's sender: `send_df` of SPARK_SEND_ROWS rows every SPARK_SEND_EVERY_SECONDS."""

    def send(queue: Any, stop: threading.Event) -> int:
        sent = 0
        while not stop.wait(SPARK_SEND_EVERY_SECONDS):
            sent += queue.send_df(bodies(spark, SPARK_SEND_ROWS))
        return sent

    return send


def shared(broker: Broker, seconds: float, consumers: int, latency: Any) -> dict[str, Any]:
    """`latency` (the latency scenario) on the Spark-session broker, then its consumers alone and
    beside a Spark sender; what they keep is the second rate over the first."""
    alone = load(broker, seconds, consumers, name="shared-alone")
    beside = load(
        broker, seconds, consumers, name="shared-beside", sender=spark_sender(broker.spark)
    )
    return {
        "engine": broker.engine,
        "latency": latency,
        "alone": alone,
        "beside_spark": beside,
        "kept": beside["per_s"] / alone["per_s"] if alone["per_s"] else 0.0,
    }
