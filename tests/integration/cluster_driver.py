"""A driver run by test_cluster.py against a standalone master: queue work with remote executors.

Prints one JSON line of what it saw; the test checks it. Usage: cluster_driver.py MASTER ROOT
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import functions as F

from sparkqueue import Broker, spark_session


def main(master: str, root: str) -> None:
    spark = spark_session(**{"spark.master": master, "spark.executor.memory": "1g"})
    broker = Broker(spark, root)
    queue = broker.create_queue("cluster-work")
    jobs = spark.range(500).select(
        F.concat(F.lit("job-"), F.col("id").cast("string")).alias("body")
    )
    sent = queue.send_df(jobs)

    batch = queue.receive_df(200)
    received = batch.count()
    bodies = {row.body for row in batch.select("body").collect()}
    deleted = len(queue.delete_df(batch).successful)

    sink = f"{root}/results"
    report = queue.consume(
        lambda b: b.select("message_id", F.upper("body").alias("result")),
        batch_size=150,
        sink=sink,
        max_empty_polls=1,
        poll_interval=0,
    )
    results = spark.read.format("delta").load(sink)
    # The streaming source on the cluster: its tasks read the claimed rows on the executors.
    queue.send_df(jobs)
    streamed_to = f"{root}/streamed"
    (
        spark.readStream.format("sparkqueue")
        .option("root", root)
        .option("queue", "cluster-work")
        .option("maxMessagesPerTrigger", 200)
        .load()
        .writeStream.format("delta")
        .option("checkpointLocation", f"{root}/checkpoint")
        .trigger(availableNow=True)
        .start(streamed_to)
        .awaitTermination(300)
    )
    streamed = spark.read.format("delta").load(streamed_to)
    # Asked after the work, so the executors that ran it have surely registered.
    executors = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    print(
        json.dumps(
            {
                "master": spark.conf.get("spark.master"),
                "executor_jvms": len(executors) - 1,  # the tracker lists the driver too
                "sent": sent,
                "received": received,
                "distinct_bodies": len(bodies),
                "deleted": deleted,
                "consumed": report.deleted,
                "result_rows": results.count(),
                "distinct_results": results.select("message_id").distinct().count(),
                "streamed": streamed.count(),
                "distinct_streamed": streamed.select("message_id").distinct().count(),
                "left": queue.stats().visible,
                "in_flight": queue.stats().in_flight,
            }
        )
    )
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
