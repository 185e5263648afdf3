# Databricks notebook source
# MAGIC %md
# MAGIC # sparkqueue producer
# MAGIC Enqueues a DataFrame of orders in one commit. Widgets: `root` (a volume or cloud path on
# MAGIC Databricks) or `catalog` (a catalog schema such as `main.queues`; used when not empty),
# MAGIC `queue`, `orders`. Outside Databricks they default, or come from `SPARKQUEUE_ROOT`,
# MAGIC `SPARKQUEUE_CATALOG`, `SPARKQUEUE_QUEUE`, `SPARKQUEUE_ORDERS`.

# COMMAND ----------

from pyspark.sql import functions as F

from sparkqueue import spark_session
from sparkqueue.notebook import open_broker, parameters

params = parameters(
    globals().get("dbutils"),
    root="/tmp/sparkqueue-notebooks",
    catalog="",
    queue="orders",
    orders="200",
)
spark = spark_session()  # the notebook's own session on Databricks
broker = open_broker(spark, params)
broker.create_queue(f"{params['queue']}-dlq")
queue = broker.create_queue(
    params["queue"], dead_letter_queue=f"{params['queue']}-dlq", max_receive_count=2
)

# COMMAND ----------

# One order in 50 has a negative amount: the consumer rejects those and they end in the DLQ.
orders = spark.range(int(params["orders"])).select(
    F.to_json(
        F.struct(
            F.col("id").alias("order"),
            F.when(F.col("id") % 50 == 7, -1).otherwise(F.col("id") * 10).alias("amount"),
        )
    ).alias("body"),
    F.create_map(F.lit("source"), F.lit("producer-notebook")).alias("attributes"),
)
print(f"sent {queue.send_df(orders, attributes='attributes')} orders")
print(queue.stats())
