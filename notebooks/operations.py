# Databricks notebook source
# MAGIC %md
# MAGIC # sparkqueue operations
# MAGIC Stats for every queue, a redrive pass, dead-letter inspection and move-back, and a chart of
# MAGIC queue depth over time from the redrive job's metrics table. Widgets: `root` or `catalog`, `move_back`
# MAGIC (`yes` moves dead letters back to their source queues), `chart` (a PNG path; empty shows it).

# COMMAND ----------

from dataclasses import astuple

import matplotlib.pyplot as plt
from pyspark.sql import functions as F

from sparkqueue import spark_session
from sparkqueue.notebook import open_broker, parameters

params = parameters(
    globals().get("dbutils"), root="/tmp/sparkqueue-notebooks", catalog="", move_back="no", chart=""
)
spark = spark_session()
broker = open_broker(spark, params)
show = globals().get("display") or (lambda frame: frame.show(truncate=False))

# COMMAND ----------

# MAGIC %md ## Every queue's depth

# COMMAND ----------

names = broker.list_queues()
rows = [(name, *astuple(broker.get_queue(name).stats())) for name in names]
show(
    spark.createDataFrame(
        rows,
        "queue string, visible long, in_flight long, delayed long,"
        " oldest_age_seconds double, awaiting_dead_letter long, noisy_groups long,"
        " quiet_visible long, quiet_in_flight long, quiet_delayed long,"
        " quiet_oldest_age_seconds double",
    )
)

# COMMAND ----------

# MAGIC %md ## A redrive pass (the scheduled job does this every minute)

# COMMAND ----------

report = broker.redrive()
print(
    f"moved {report.moved_to_dead_letter}, released {report.released}, "
    f"expired {report.expired_by_retention}"
)

# COMMAND ----------

# MAGIC %md ## Dead letters: what is there, and move them back

# COMMAND ----------

dead_letter_queues = [name for name in names if name.endswith("-dlq")]
for name in dead_letter_queues:
    print(name)
    show(broker.get_queue(name).peek_df(20))
    if params["move_back"] == "yes":
        print(f"moved back {broker.get_queue(name).start_message_move()}")

# COMMAND ----------

# MAGIC %md ## Queue depth over time (one point per redrive pass)

# COMMAND ----------

depth = (
    broker.redrive_metrics()
    .select(
        "pass_at",
        "queue",
        (F.col("visible") + F.col("in_flight") + F.col("delayed")).alias("depth"),
    )
    .toPandas()
    .pivot_table(index="pass_at", columns="queue", values="depth")
)
axes = depth.plot(marker="o", title="queue depth per redrive pass", ylabel="messages")
if params["chart"]:
    axes.get_figure().savefig(params["chart"])
else:
    plt.show()
