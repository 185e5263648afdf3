# Databricks notebook source
# MAGIC %md
# MAGIC # sparkqueue quickstart
# MAGIC Send, receive and delete on a queue. On Databricks, set the `root` widget to a volume or
# MAGIC cloud path, or the `catalog` widget to a catalog schema (`main.queues`); locally the notebook
# MAGIC runs as a plain Python file on a temporary folder.

# COMMAND ----------

import tempfile

from sparkqueue import spark_session
from sparkqueue.notebook import open_broker, parameters

params = parameters(globals().get("dbutils"), root="", catalog="")
if not params["root"] and not params["catalog"]:
    params["root"] = tempfile.mkdtemp(prefix="sparkqueue-notebook-")

spark = spark_session()
broker = open_broker(spark, params)
queue = broker.create_queue("notebook-demo")

# COMMAND ----------

queue.send_batch([f"task {i}" for i in range(5)])
messages = queue.receive(10)
print([m.body for m in messages])

# COMMAND ----------

queue.delete_batch([m.receipt_handle for m in messages])
print(queue.stats())
