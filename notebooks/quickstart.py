# Databricks notebook source
# MAGIC %md
# MAGIC # sparkqueue quickstart
# MAGIC Send, receive and delete on a queue under `root`. On Databricks, set the `root` widget to a
# MAGIC volume or cloud path; locally the notebook runs as a plain Python file.

# COMMAND ----------

import tempfile

from sparkqueue import Broker, spark_session

try:
    root = dbutils.widgets.get("root")  # type: ignore[name-defined]
except NameError:  # running outside Databricks
    root = tempfile.mkdtemp(prefix="sparkqueue-notebook-")

spark = spark_session()
broker = Broker(spark, root)
queue = broker.create_queue("notebook-demo")

# COMMAND ----------

queue.send_batch([f"task {i}" for i in range(5)])
messages = queue.receive(10)
print([m.body for m in messages])

# COMMAND ----------

queue.delete_batch([m.receipt_handle for m in messages])
print(queue.stats())
