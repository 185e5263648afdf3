"""Effectively-once results: a Delta sink keyed by message id never gets a redelivery's rows twice.

`write_once` inserts a batch's result rows only for keys the sink does not hold yet, in one MERGE
(insert-only, retried on conflicts), and `Queue.write_once` deletes the batch's messages after that
MERGE commits. Which failures this closes, and which it cannot, is written down in the README
("Effectively once into Delta").
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .errors import InvalidParameterValue
from .storage import Storage, target_prefix


def check_sink(sink: object) -> str:
    """A sink is a Delta table path; backticks are refused because paths are quoted with them."""
    if not isinstance(sink, str) or not sink.strip() or "`" in sink:
        raise InvalidParameterValue(
            f"sink must be the path of a Delta table, without backticks; got {sink!r}"
        )
    return sink


def write_once(
    storage: Storage, results: DataFrame, path: str, *, key: str = "message_id"
) -> int | None:
    """Inserts the result rows whose key the sink lacks; returns how many (None over Spark Connect,
    which does not report it)."""
    if key not in results.columns:
        raise InvalidParameterValue(
            f"the results have no {key!r} column to key the sink by; columns: {results.columns}"
        )
    storage.ensure_table_like(path, results)
    bounds = results.agg(F.min(key).alias("low"), F.max(key).alias("high")).first()
    if bounds is None or bounds.low is None:
        return 0
    # Message ids sort by send time, so a literal range lets data skipping prune old sink files.
    target = F.col(f"{target_prefix(path)}`{key}`")
    match = target.between(F.lit(bounds.low), F.lit(bounds.high)) & (target == F.col(f"s.`{key}`"))

    def attempt() -> int | None:
        metrics = storage.merge(path, results, match).insert().execute()
        return None if metrics is None else metrics["num_inserted_rows"]

    return storage.transact(path, attempt, f"writing results to {path}")
