"""How the native engine commits: with delta-rs's after-commit hooks off, a checkpoint where
one is due, idempotent writes by app id, and the row counts delta-rs reports."""

from __future__ import annotations

import logging
import time
from typing import Any

from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, Transaction

from .statements import APP_TXN_VERSION

log = logging.getLogger(__name__)
# Every write commits alone: delta-rs's own after-commit work (a checkpoint, log cleanup) would
# raise its errors from a call whose commit landed, and a caller told "failed" would send again
# (see `after_commit`). Log cleanup on local roots is the redrive job's (logtrim.py).
NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
DEFAULT_CHECKPOINT_INTERVAL = 100  # Delta's, for a table that does not set its own


def applied(table: DeltaTable, app_id: str, version: int = APP_TXN_VERSION) -> bool:
    """Whether the table holds an idempotent write with this app id at `version` or later
    (`applying`)."""
    recorded = table.transaction_version(app_id)
    return recorded is not None and recorded >= version


def applying(
    app_id: str | None, *, retries: int | None = None, version: int = APP_TXN_VERSION
) -> CommitProperties | None:
    """A commit that records `app_id` (at `version`: a stream's batch id, one app id for a whole
    stream), so a repeat of it finds it `applied` (a move's copy after a crash, a batch Spark
    replays); delta-rs's conflict check rejects it if a concurrent commit recorded the same id.
    `retries`: delta-rs's own commit retries at later versions (None: its default)."""
    if app_id is None and retries is None:
        return None
    # With its time, so Delta's setTransactionRetentionDuration lets the app id go in the end.
    once = None if app_id is None else [Transaction(app_id, version, int(time.time() * 1000))]
    if retries is None:
        return CommitProperties(app_transactions=once)
    return CommitProperties(max_commit_retries=retries, app_transactions=once)


def metric(metrics: dict[str, Any], name: str) -> int:
    """A count delta-rs reported (a missing one is an error, never a silent 0: callers decide
    what happened from it)."""
    if name not in metrics:
        raise RuntimeError(f"delta-rs reported no {name!r}; it reported {sorted(metrics)}")
    return int(metrics[name])


def after_commit(table: DeltaTable, before: int) -> None:
    """A checkpoint when this commit is due one (`delta.checkpointInterval`), as Spark writes
    them; its failure is logged, never raised: the commit itself has landed."""
    version = table.version()
    if version == before:
        return  # nothing was committed (an UPDATE or DELETE that matched no row)
    interval = int(
        table.metadata().configuration.get("delta.checkpointInterval")
        or DEFAULT_CHECKPOINT_INTERVAL
    )
    if version % interval:
        return
    try:
        table.create_checkpoint()
    except Exception as error:  # the next due version writes one again
        log.warning("could not checkpoint %s at version %d: %s", table.table_uri, version, error)
