# Databricks notebook source
# MAGIC %md
# MAGIC # sparkqueue streaming consumer
# MAGIC A Structured Streaming query reads the queue (`format("sparkqueue")`) and writes each
# MAGIC message to a Delta table once: Delta's streaming sink records every batch, and a batch that
# MAGIC fails or is killed comes back on the next run with the messages still its own. With
# MAGIC `available_now` (the default) each run drains what is in the queue and stops: schedule it
# MAGIC as a job. With `available_now=no` it runs on, a batch every `trigger_seconds`.

# COMMAND ----------

from pyspark.sql import functions as F

from sparkqueue import spark_session
from sparkqueue.notebook import parameters

params = parameters(
    globals().get("dbutils"),
    root="/tmp/sparkqueue-notebooks",
    queue="orders",
    results="",
    checkpoint="",
    max_messages_per_trigger="10000",
    visibility_timeout="300",
    available_now="yes",
    trigger_seconds="10",
)
spark = spark_session()  # registers the "sparkqueue" format
root = params["root"]
results = params["results"] or f"{root}/results/{params['queue']}-stream"
checkpoint = params["checkpoint"] or f"{root}/checkpoints/{params['queue']}-stream"

# COMMAND ----------

messages = (
    spark.readStream.format("sparkqueue")
    .option("root", root)
    .option("queue", params["queue"])
    .option("maxMessagesPerTrigger", params["max_messages_per_trigger"])
    .option("visibilityTimeout", params["visibility_timeout"])
    .load()
)
# The business logic: here, each message's body with when it was sent and received.
rows = messages.select("message_id", "body", "sent_at", F.current_timestamp().alias("taken_at"))
writer = rows.writeStream.format("delta").option("checkpointLocation", checkpoint)
if params["available_now"] == "yes":
    writer = writer.trigger(availableNow=True)
else:
    writer = writer.trigger(processingTime=f"{int(params['trigger_seconds'])} seconds")
query = writer.start(results)
query.awaitTermination()

# COMMAND ----------

print(f"{spark.read.format('delta').load(results).count()} messages in {results}")
