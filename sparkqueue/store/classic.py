"""The one module that reaches a classic session's JVM, for what Delta's Python API leaves out.

Spark Connect sessions have no JVM on the client, so nothing else in the package may touch one
(tests/integration/test_connect.py checks it); dml.py calls in here only for classic sessions.
"""

from __future__ import annotations

from pyspark.sql import Column, SparkSession

from .counts import UNKNOWN, Counts
from .tables import Table


def counted_dml(
    spark: SparkSession, table: Table, rows: Column, values: dict[str, Column] | None
) -> Counts:
    """Delta's UPDATE/DELETE built and run exactly as `DeltaTable.update/delete` build them, but
    keeping the `num_affected_rows` their Python API drops: callers then need no read-back to
    learn what a claim or a delete did. The condition and values stay Spark expressions, so no
    value is ever pasted into SQL text."""
    jvm, session = spark._jvm, spark._jsparkSession
    logical = jvm.org.apache.spark.sql.catalyst.plans.logical
    delta = table.delta(spark)._jdt
    target = delta.toDF().queryExecution().analyzed()
    condition = session.expression(rows._jc)
    if values is None:
        plan = logical.DeleteFromTable(target, condition)
    else:
        assignments = jvm.java.util.ArrayList()
        for column, value in values.items():
            attribute = jvm.org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute
            assignments.add(
                logical.Assignment(attribute.quotedString(column), session.expression(value._jc))
            )
        seq = jvm.scala.jdk.javaapi.CollectionConverters.asScala(assignments).toSeq()
        plan = logical.UpdateTable(target, seq, jvm.scala.Some(condition))
    affected = int(delta.toDataset(session, plan).collectAsList().get(0).getLong(0))
    if affected < 0:  # a metadata-only DELETE of whole files whose row counts Delta lacks
        return UNKNOWN
    return Counts(known=True, updated=affected) if values else Counts(known=True, deleted=affected)


def context_setting(spark: SparkSession, key: str) -> str | None:
    """A setting of the session's SparkContext (what Delta reads its log store from), which a
    session-level `spark.conf.set` does not change."""
    conf = spark.sparkContext.getConf()
    return conf.get(key) if conf.contains(key) else None
