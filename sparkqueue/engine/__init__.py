"""The queue engine: what happens to which rows, for every operation, on either engine.

Every module is functions over a `QueueContext` (context.py: the broker's tables, registry,
clock and commit rounds; never a `Broker`) and a queue's `QueueRecord`. The row states every
statement reads (claimable, in flight, holds this handle...) are written once, in
conditions.py, as expressions that each engine renders (store/). Grouped by what a reader
looks for:

- messages/  the per-message operations: send, claim (receive), acknowledge (delete),
             visibility, inspect (stats, peek, purge), history; and what receives remember
             between calls (handout, inflight, depths, spares).
- rounds/    the shared commits those operations go through: committer.py (callers of one
             broker meet in rounds), requests.py (what a caller asks, what it gets back),
             operations.py (the public operations as requests), standard.py and
             statement.py (a round of several callers on a standard queue as one statement).
- frames/    the DataFrame operations (Spark): send_df, claim_df (`receive_df`),
             acknowledge_df (`delete_df`), inspect_df (`peek_df`), ranges (claims by range),
             id_merges (MERGEs keyed by message id).
- fifo/      FIFO queues: operations.py (send, receive, peek, counts and moves on either kind of
             FIFO table), spark.py (Spark's reads of group prefixes).
- moves/     messages between queues: steps.py (the three crash-safe commits), frames.py
             (Spark's, at DataFrame scale), choice.py (which of the two a broker makes).
- lifecycle.py  creating and deleting queues.

From the public method to the commit:

- `Queue.receive` -> rounds/operations.receive -> the queue's committer (committer.py) runs the
  next round -> operations.run_round: a round of one runs messages/claim.claim (read one random
  shard's candidates from one snapshot, or take the spares of the last read, then one UPDATE of
  those still as read); a round of
  several runs rounds/standard.run (every caller's claims, deletes and visibility changes in one
  statement: statement.RoundChanges, an UPDATE or, above 50 rows natively and 200 on Spark, a
  MERGE) -> the engine's
  `Tables.transact` and `change` / `merge_changes` (store/) -> one Delta commit.
- `Queue.delete`, `delete_batch` -> rounds/operations.delete(_batch) -> the same rounds ->
  messages/acknowledge.delete_refs (one DELETE on literal shards, ids and handles), or
  standard.run when it shares a round -> `Tables.change` -> one Delta commit.
- A redrive pass (services/redrive.py) -> moves/choice.movers -> moves/steps.Moves.move: mark the
  rows (an UPDATE), copy them to the destination (an idempotent append), drop them from the
  source (a DELETE): three transactions, each safe to repeat after a crash.
"""
