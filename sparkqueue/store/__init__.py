"""Storage: where the tables live and how each engine reads and commits them.

- The one interface both engines implement: `Tables` (statements.py, with the statement values
  `Row`, `ListedMerge` and the message key); counts.py says what a commit reported.
- The native engine (delta-rs, no JVM): native_tables.py (reads as DataFusion queries,
  UPDATE/DELETE/MERGE/append, tables), native_sql.py (the rules as DataFusion SQL text, the only
  place literals become text), native_pool.py (opened tables kept between operations),
  native_commits.py (commit properties, checkpoints), native_fifo.py (numbered FIFO appends),
  native_history.py (one row's states through the log), native_upkeep.py, native_leases.py
  (compaction's lease on object storage), native_arrow.py,
  native_process.py (a forked child told to use spawn: delta-rs's runtime does not survive fork).
- Spark: spark_tables.py (the same interface on a session), storage.py (reads, appends and
  tables through an explicit session), dml.py and classic.py (MERGE/UPDATE/DELETE with row
  counts on classic and Connect sessions), spark_exprs.py (the rules as Columns), sql.py (the
  only Spark SQL text), spark_schema.py, spark_s3.py (the conditional-put log store's settings),
  spark_azure.py (the ABFS client's settings).
- Shared by both: schema.py (columns and table properties), tables.py (a root's paths or a
  catalog schema's names), transactions.py (one operation retried on commit conflicts),
  locking.py (the commit lock of a local root), logtrim.py (trimming a local `_delta_log`),
  registry.py (the queue registry).

A transaction (`Tables.transact`) holds the table's commit lock on a local root, runs the
operation's read-check-commit, and runs it again from a fresh read when a concurrent commit
conflicts with it; the engine layer above never knows which engine runs it.
"""
