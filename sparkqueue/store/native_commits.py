"""How the native engine commits: with delta-rs's after-commit hooks off, a checkpoint where
one is due, idempotent writes by app id, the row counts delta-rs reports, and a mark of its own
in each commit's commitInfo, by which a commit whose answer the store lost is found again."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, Transaction

from .statements import APP_TXN_VERSION
from .transactions import STALE_READ_MARKER, AnswerLost, is_commit_conflict

log = logging.getLogger(__name__)
# Every write commits alone: delta-rs's own after-commit work (a checkpoint, log cleanup) would
# raise its errors from a call whose commit landed, and a caller told "failed" would send again
# (see `after_commit`). Log cleanup on local roots is the redrive job's (logtrim.py).
NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
DEFAULT_CHECKPOINT_INTERVAL = 100  # Delta's, for a table that does not set its own
COMMIT_MARK = "sparkqueue.commit"  # a commitInfo field: the commit's own random id
# How object_store ends the line of a request whose answer never came (a broken connection, a
# timeout: the store may or may not have acted), where a store's own answer says "Client error
# with status 403" or "Server error"; the line also holds the request's URL (a queue's name).
_NO_ANSWER = re.compile(r" - HTTP error(:|$)", re.MULTILINE)


def applied(table: DeltaTable, app_id: str, version: int = APP_TXN_VERSION) -> bool:
    """Whether the table holds an idempotent write with this app id at `version` or later
    (`applying`)."""
    recorded = table.transaction_version(app_id)
    return recorded is not None and recorded >= version


def applying(
    mark: str,
    app_id: str | None = None,
    *,
    retries: int | None = None,
    version: int = APP_TXN_VERSION,
) -> CommitProperties:
    """A commit carrying `mark` (see `commit_once`) that records `app_id` (at `version`: a
    stream's batch id, one app id for a whole stream), so a repeat of it finds it `applied` (a
    move's copy after a crash, a batch Spark replays); delta-rs's conflict check rejects it if a
    concurrent commit recorded the same id. `retries`: delta-rs's own commit retries at later
    versions (None: its default)."""
    # With its time, so Delta's setTransactionRetentionDuration lets the app id go in the end.
    once = None if app_id is None else [Transaction(app_id, version, int(time.time() * 1000))]
    marked = {COMMIT_MARK: mark}
    if retries is None:
        return CommitProperties(custom_metadata=marked, app_transactions=once)
    return CommitProperties(
        custom_metadata=marked, max_commit_retries=retries, app_transactions=once
    )


@dataclass(frozen=True)
class Committed:
    """A native commit's answer: delta-rs's metrics and the version it wrote."""

    metrics: dict[str, Any]
    version: int


def commit_once(
    table: DeltaTable,
    reopen: Callable[[], DeltaTable] | None,
    write: Callable[[str], dict[str, Any] | None],
) -> Committed:
    """Runs `write(mark)`, one delta-rs commit on `table` that carries `mark` (`applying`). On
    object storage the store may act and its answer be lost: delta-rs then reports a transport
    error, or (when its retry of the put found the version taken by that very put) a conflict.
    Either way the log since `table`'s version is searched for the mark: found, the commit
    landed, and its commitInfo's metrics and version are the answer (a second attempt would do
    the work twice: a second message, a second claim). A transport error whose commit is not
    there raises AnswerLost, which runs the transaction again; anything else is raised as it
    was. `reopen` is None on a local root, where no answer is lost and a conflict is one."""
    mark = uuid.uuid4().hex
    before = table.version()
    try:
        metrics = write(mark) or {}
    except Exception as error:
        lost = unanswered(error)
        if reopen is None or STALE_READ_MARKER in str(error):  # no put was made
            raise
        if not (lost or is_commit_conflict(error)):
            raise
        found = _marked_commit(reopen(), before, mark)
        if found is not None:
            log.warning("a commit landed though its answer was lost: %s", str(error)[:200])
            return Committed(found.get("operationMetrics") or {}, int(found["version"]))
        if lost:
            raise AnswerLost(f"the store's answer to a commit was lost: {error}") from error
        raise
    return Committed(metrics, table.version())


def unanswered(error: BaseException) -> bool:
    """Whether delta-rs's error is a request whose answer never came (the store may have acted)."""
    if not isinstance(error, OSError) or isinstance(error, (FileNotFoundError, PermissionError)):
        return False
    return _NO_ANSWER.search(str(error)) is not None


def asked_again(error: BaseException) -> BaseException:
    """For a request whose repeat is harmless (a table created if absent, a folder deleted):
    AnswerLost when its answer never came, or when the store says the table's first version
    exists (delta-rs's client retried the put of a creation whose answer it lost), so that its
    transaction asks again."""
    if unanswered(error) or "version 0 already exists" in str(error).lower():
        return AnswerLost(f"the store's answer was lost: {error}")
    return error


def _marked_commit(latest: DeltaTable, before: int, mark: str) -> dict[str, Any] | None:
    """The commitInfo carrying `mark` among the versions after `before`, or None."""
    newer = latest.version() - before
    if newer <= 0:
        return None
    return next((info for info in latest.history(newer) if info.get(COMMIT_MARK) == mark), None)


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
