"""Cross-process safety for local roots, whose Delta log store only locks commits inside one JVM."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

# A process holds the lock while any of its threads commits; past this, newcomers let others in.
MAX_SHARED_HOLD_SECONDS = 0.5
# Who commits: threads of one kind share the lock, the two kinds take turns (see ProcessLock).
SPARK, NATIVE = "spark", "native"


class ProcessLock:
    """Exclusive between OS processes, shared by the threads of one (their JVM serializes commits).

    Delta's local log store writes `N.json` with a JVM-wide lock, so two threads of one driver are
    safe, but two drivers can both write version N and one commit is silently lost. flock(2) on a
    file beside the table closes that gap; sharing it inside a process keeps Delta's optimistic
    concurrency (and its conflict retries) between a process's own threads.

    Only threads committing through one engine share it. delta-rs writes a version with an atomic
    put-if-absent, but Spark's local log store checks for the file and then renames over it, so a
    native commit landing between the two would be overwritten: in one process, Spark's commits
    and native ones take turns as two processes do.

    Between processes, native holders share the file (flock's shared mode): their commits are
    atomic put-if-absent writes, so delta-rs's conflict check decides between them as it does on
    object storage, and processes add throughput. Spark's holders, and work that must be alone,
    lock it exclusively. A turnstile file keeps a waiting exclusive holder from starving behind a
    stream of shared ones (flock(2) itself prefers no one): every acquisition passes through it,
    an exclusive one stays in it until it holds the lock, and shared holders let go once they see
    someone waiting there (`_held_too_long`).
    """

    def __init__(self, path: str | None) -> None:
        self._path = path  # None: this process's threads only (see `table_lock`)
        self._cond = threading.Condition()
        self._holders = 0
        self._fd: int | None = None
        self._acquired_at = 0.0
        self._draining = False  # newcomers wait: the holders have had their turn
        self._alone = False
        self._kind = SPARK  # the engine of the threads holding it now
        self._waiting = {SPARK: 0, NATIVE: 0}  # threads of each engine waiting to enter
        self._turn: str | None = None  # the engine whose waiters go next, once it is free

    @contextmanager
    def hold(self, kind: str = SPARK) -> Iterator[None]:
        self._enter(kind)
        try:
            yield
        finally:
            self._leave()

    @contextmanager
    def hold_alone(self) -> Iterator[None]:
        """Exclusive among this process's threads too: for work that needs no transaction on the
        table in flight anywhere (trimming its log, see logtrim.py). Newcomers wait meanwhile."""
        with self._cond:
            while self._alone:
                self._cond.wait()
            self._alone = True
            try:
                while self._holders:
                    self._cond.wait()
            except BaseException:  # interrupted while waiting: never leave the lock wedged
                self._alone = False
                self._cond.notify_all()
                raise
        try:
            fd = self._lock_file(shared=False)
            try:
                yield
            finally:
                _unlock(fd)
        finally:
            with self._cond:
                self._alone = False
                self._cond.notify_all()

    def _enter(self, kind: str) -> None:
        """Joins the holders of `kind`, or waits for them to be let in. Holders stop letting
        their kind's newcomers in once they have held it MAX_SHARED_HOLD_SECONDS (so other
        processes get their turn) or once the other engine waits (so it gets its turn at once
        when they leave: `_turn`); waiters without the turn step back briefly after a drain,
        letting a process blocked in flock(2) take the lock."""
        yielded = False
        while True:
            with self._cond:
                self._waiting[kind] += 1
                try:
                    while self._blocked(kind):
                        if self._holders:
                            self._draining = True
                        self._cond.wait()
                        yielded = True
                except BaseException:  # an interrupt: others may wait on this thread's turn
                    self._cond.notify_all()
                    raise
                finally:
                    self._waiting[kind] -= 1
                if self._holders == 0 and yielded and self._turn != kind:
                    yielded = False
                else:
                    if self._holders == 0:
                        self._fd = self._lock_file(shared=kind == NATIVE)
                        self._acquired_at = time.monotonic()
                        self._kind, self._turn = kind, None
                        self._cond.notify_all()  # the other engine's waiters mark the drain
                    self._holders += 1
                    return
            if self._path is not None:  # after a drain, let a process blocked in flock(2) in
                time.sleep(0.005)

    def _blocked(self, kind: str) -> bool:
        if self._alone:
            return True
        if self._holders:
            return self._kind != kind or self._draining or self._held_too_long()
        turn = self._turn  # the other engine's waiters go first (while there are any)
        return turn is not None and turn != kind and self._waiting[turn] > 0

    def _held_too_long(self) -> bool:
        if self._path is None:  # no other process waits on it
            return False
        if not self._holders or time.monotonic() - self._acquired_at <= MAX_SHARED_HOLD_SECONDS:
            return False
        # Shared holders keep it while no process waits to hold it exclusively.
        return self._kind != NATIVE or _someone_waits(self._path)

    def _lock_file(self, *, shared: bool) -> int:
        """Holds the file (shared or exclusively), having passed the turnstile (see the class)."""
        if self._path is None:
            return NO_FILE
        os.makedirs(os.path.dirname(self._path), exist_ok=True)
        turnstile = os.open(self._path + TURNSTILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            except BaseException:  # interrupted while waiting: no descriptor left behind
                os.close(fd)
                raise
        finally:
            _unlock(turnstile)  # explicitly: a child forked meanwhile shares the descriptor
        return fd

    def _leave(self) -> None:
        with self._cond:
            self._holders -= 1
            if self._holders == 0:
                assert self._fd is not None
                _unlock(self._fd)
                self._fd = None
                self._draining = False
                other = NATIVE if self._kind == SPARK else SPARK
                self._turn = other if self._waiting[other] else None
                self._cond.notify_all()


def _someone_waits(path: str) -> bool:
    """Whether another process is in the turnstile (waiting to hold the lock exclusively, or
    passing through on its way to a shared hold: letting go then costs one brief drain). The
    probe itself holds the turnstile shared, so probes never see each other."""
    try:
        turnstile = os.open(path + TURNSTILE, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:  # shared: another process's probe does not look like a waiter
        fcntl.flock(turnstile, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(turnstile)
        return True
    _unlock(turnstile)
    return False


def _unlock(fd: int) -> None:
    if fd != NO_FILE:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


NO_FILE = -1  # the "descriptor" of a lock of this process's threads only
TURNSTILE = ".turn"  # beside the lock file: the queue to hold it (see ProcessLock)
_locks: dict[str, ProcessLock] = {}
_threads_only: dict[str, ProcessLock] = {}
_locks_guard = threading.Lock()


def process_lock(path: str) -> ProcessLock:
    """The one ProcessLock of this process for `path`, so every Broker on a root shares it."""
    with _locks_guard:
        return _locks.setdefault(path, ProcessLock(path))


def table_lock(address: str) -> ProcessLock:
    """The lock of one table among this process's threads, with no file: for object storage,
    whose conditional puts decide between processes. It keeps a transaction that must commit
    at the very next version (a numbered FIFO append, `alone`) from losing that race to this
    process's own transactions on the table, as the commit lock does on a local root."""
    with _locks_guard:
        return _threads_only.setdefault(address, ProcessLock(None))


def commit_lock(
    lock_file: str | None, kind: str, *, alone: bool = False, table: str | None = None
) -> Callable[[], AbstractContextManager[object]]:
    """What a transaction of engine `kind` holds around itself: the table's ProcessLock on a local
    root (`alone`: with no other transaction in flight); elsewhere the `table_lock` of `table`
    when given, else nothing."""
    if lock_file is None and table is None:
        return nullcontext
    lock = process_lock(lock_file) if lock_file is not None else table_lock(str(table))
    return lock.hold_alone if alone else lambda: lock.hold(kind)
