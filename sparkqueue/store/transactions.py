"""Optimistic transactions: re-run an operation on a Delta commit conflict, with bounded backoff."""

from __future__ import annotations

import functools
import logging
import random
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TypeVar

from ..errors import TransactionConflict

CONFLICT_SQLSTATE = "2D521"
# delta-rs's CommitFailedError texts that no retry can change (every other one is a conflict:
# a concurrent write, changed metadata or protocol, its own commit attempts used up).
PERMANENT_COMMIT_FAILURES = ("unsupported", "features must be specified", "append-only",
                             "append only", "evaluating predicate")  # fmt: skip
# Raised from inside a claim's UPDATE or MERGE (spark_exprs.unless_stale_column) when rows it read
# changed before it began.
STALE_READ_MARKER = "sparkqueue: stale read, retry"
T = TypeVar("T")
log = logging.getLogger(__name__)


class AnswerLost(Exception):
    """A store's answer that never came (a broken connection, a timeout) to a request that
    is known not to have acted, or whose repeat is harmless: the transaction runs again."""


@functools.cache
def conflict_classes(spark_loaded: bool) -> tuple[type[BaseException], ...]:
    """Delta's conflict exceptions of both engines, looked up at the first failure, Spark's only
    once pyspark is loaded (a process of the native engine alone never imports it)."""
    found: list[type[BaseException]] = []
    try:  # the native engine's: a commit that lost to a concurrent one
        from deltalake.exceptions import CommitFailedError

        found.append(CommitFailedError)
    except ImportError:  # pragma: no cover - installs without the native engine
        pass
    if spark_loaded:  # Spark's classes differ across versions and clients
        try:
            import delta.exceptions as delta_errors

            found += [getattr(delta_errors, name) for name in delta_errors.__all__]
        except ImportError:  # pragma: no cover - Databricks runtimes ship their own package
            pass
    return tuple(found)


def is_commit_conflict(error: BaseException) -> bool:
    """True for every flavour of Delta's optimistic-concurrency failure, for our own guard's
    (SQLSTATE 2D521 covers Spark's classes this lookup does not know), and for a lost answer
    to a commit that did not land (AnswerLost): each is tried again."""
    if isinstance(error, AnswerLost) or STALE_READ_MARKER in str(error):
        return True  # a lost answer's, or a FIFO claim's guard, in either engine
    if isinstance(error, conflict_classes("pyspark" in sys.modules)):
        # delta-rs raises CommitFailedError for what another attempt cannot fix too
        text = str(error).lower()
        return type(error).__name__ != "CommitFailedError" or not any(
            permanent in text for permanent in PERMANENT_COMMIT_FAILURES
        )
    spark_error = sys.modules.get("pyspark.errors")
    if spark_error is not None and isinstance(error, spark_error.PySparkException):
        return error.getSqlState() == CONFLICT_SQLSTATE
    return False


@dataclass(frozen=True)
class RetryPolicy:
    """How hard an operation tries before giving up with TransactionConflict."""

    attempts: int = 25
    base_delay: float = 0.02
    max_delay: float = 1.0

    def delay(self, attempt: int) -> float:
        """Full-jitter exponential backoff: spreads retrying consumers apart."""
        return random.uniform(0, min(self.max_delay, self.base_delay * 2**attempt))


class ConflictCounter:
    """Counts conflict retries, so tests and benchmarks can report how contended a run was."""

    def __init__(self) -> None:
        self._value = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self._value += 1

    @property
    def value(self) -> int:
        return self._value


def run_transaction(
    action: Callable[[], T],
    *,
    lock: Callable[[], AbstractContextManager[object]],
    policy: RetryPolicy,
    counter: ConflictCounter,
    what: str,
) -> T:
    """Runs `action` (read, check, one commit) until it commits without conflict or the bound is hit."""
    for attempt in range(policy.attempts):
        try:
            with lock():
                return action()
        except Exception as error:
            if not is_commit_conflict(error):
                raise
            counter.add()
            if attempt + 1 == policy.attempts:
                why = (
                    "lost the store's answers (none of its attempts is in the table's log)"
                    if isinstance(error, AnswerLost)
                    else "kept conflicting with concurrent commits"
                )
                raise TransactionConflict(
                    f"{what} {why}; gave up after {policy.attempts} attempts and changed"
                    " nothing. Retry later."
                ) from error
            log.debug("%s: commit conflict (attempt %d), retrying", what, attempt + 1)
            time.sleep(policy.delay(attempt))
    raise AssertionError("unreachable")  # pragma: no cover
