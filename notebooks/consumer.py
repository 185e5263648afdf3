# Databricks notebook source
# MAGIC %md
# MAGIC # sparkqueue consumer worker
# MAGIC Receives batches of orders as DataFrames, writes the valid ones to a Delta results table
# MAGIC effectively once (keyed by message id) and deletes them; rejected orders stay in the queue,
# MAGIC come back after the visibility timeout and, after `max_receive_count` receives, go to the
# MAGIC dead-letter queue. Stops when the queue stays empty (`max_empty_polls`), after
# MAGIC `max_batches`, or when the job is cancelled. Schedule it as a job task for a long-running worker.

# COMMAND ----------

from pyspark.sql import functions as F

from sparkqueue import spark_session
from sparkqueue.notebook import open_broker, parameters

params = parameters(
    globals().get("dbutils"),
    root="/tmp/sparkqueue-notebooks",
    catalog="",
    queue="orders",
    batch_size="100",
    visibility_timeout="60",
    max_empty_polls="1",
    max_batches="50",
)
spark = spark_session()
broker = open_broker(spark, params)
queue = broker.get_queue(params["queue"])
# The results: a table beside the queues in catalog mode, else a folder under the root.
if broker.catalog:
    results_table = f"{broker.catalog}.{params['queue'].replace('-', '_')}_results"
else:
    results_table = f"{broker.root}/results/{params['queue']}"

# COMMAND ----------

ORDER = "struct<order: bigint, amount: bigint>"


def process(batch):
    """The business logic: valid orders become result rows; the status says which succeeded."""
    orders = batch.select("message_id", F.from_json("body", ORDER).alias("o")).select(
        "message_id", "o.order", "o.amount", (F.col("o.amount") >= 0).alias("succeeded")
    )
    valid = orders.where("succeeded").select(
        "message_id", "order", (F.col("amount") / 100).alias("total")
    )
    broker.write_once(valid, results_table)  # a redelivered message adds no second row
    return orders.select("message_id", "succeeded")


report = queue.consume(
    process,
    batch_size=int(params["batch_size"]),
    visibility_timeout=int(params["visibility_timeout"]),
    max_batches=int(params["max_batches"]),
    max_empty_polls=int(params["max_empty_polls"]),
    poll_interval=0,
)
print(report)
print(queue.stats())
