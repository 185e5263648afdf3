"""Effectively-once results: a Delta sink keyed by message id never gets a redelivery's rows twice.

`write_once` inserts a batch's result rows only for keys the sink does not hold yet, in one MERGE
(insert-only, retried on conflicts); the caller deletes the batch's messages after that MERGE
commits. Which failures this closes, and which it cannot, is in docs/operations.md.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..errors import InvalidParameterValue
from ..rules.checks import check_sink
from ..store import sql
from ..store.storage import Storage


def write_once(
    storage: Storage, results: DataFrame, sink: str, *, key: str = "message_id"
) -> int | None:
    """Inserts the result rows whose `key` the sink lacks; returns how many (None where the
    session does not report it)."""
    check_sink(sink)
    if sql.check_column(key, "key") not in results.columns:
        raise InvalidParameterValue(
            f"the results have no {key!r} column to key the sink by; columns: {results.columns}"
        )
    storage.ensure_table_like(sink, results)
    column = sql.quote_identifier(key)
    bounds = results.agg(F.min(column).alias("low"), F.max(column).alias("high")).first()
    if bounds is None or bounds.low is None:
        return 0
    # Message ids sort by send time, so a literal range lets data skipping prune old sink files.
    target = F.col(f"{storage.target_prefix(sink)}{column}")
    match = target.between(F.lit(bounds.low), F.lit(bounds.high)) & (target == F.col(f"s.{column}"))

    def attempt() -> int | None:
        counts = storage.merge(sink, results, match).insert().execute()
        return counts.inserted if counts.known else None

    return storage.transact(sink, attempt, f"writing results to {sink}")
