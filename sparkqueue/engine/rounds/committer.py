"""Group commit: the operations that callers of one driver make on a queue while a commit is in
flight share the next commit.

Every commit here costs the same ~0.5 s however few rows it changes (Delta rebuilds the table's
state and plans the statement), and on a local root the commits of one table take turns anyway.
So callers do not queue for the table one by one: each hands its operation to the queue's
`GroupCommitter` and waits. The first caller to find no round under way leads: it takes every
operation waiting (its own first among them), runs them as one round, gives each caller its own
outcome and, if more have arrived meanwhile, wakes the oldest of them to lead the next round.
No thread of its own: a lone caller runs at once, as if there were no committer, and callers are
served in the order they arrived, so none starves.

One wait, short and bounded: when several callers were about during the last round (in it, or
waiting for the next) and fewer are waiting now, the leader lingers for the others, up to a
quarter of the last round's duration (at most LINGER_MAX_SECONDS). Callers that loop (worker
loops, consumers) come back from their own work a moment apart; without the wait, the first back
would lead a round of one and the rest the next, halving what each commit carries.

This module knows nothing of Spark: a round is whatever `run` does with the operations.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

Op = TypeVar("Op")
Out = TypeVar("Out")

LINGER_SHARE = 0.25  # of the last round's duration, a leader waits for the last round's callers
LINGER_MAX_SECONDS = 0.5


@dataclass(eq=False)
class _Waiter(Generic[Op, Out]):
    """One caller's operation while it waits: it ends with an outcome, an error, or a turn to lead."""

    op: Op
    woken: threading.Event = field(default_factory=threading.Event)
    leads: bool = False
    done: bool = False
    outcome: Out | None = None
    error: BaseException | None = None

    def finish(self, outcome: Out | None, error: BaseException | None) -> None:
        self.outcome, self.error, self.done = outcome, error, True
        self.woken.set()

    def result(self) -> Out:
        if self.error is not None:
            raise self.error
        return self.outcome  # type: ignore[return-value]


class GroupCommitter(Generic[Op, Out]):
    """Runs the operations of concurrent callers in shared rounds (see the module's notes).

    `take(waiting)` says how many of the waiting operations (oldest first) one round may carry:
    at least one, so that a round always makes progress.
    """

    def __init__(self, take: Callable[[Sequence[Op]], int] = len) -> None:
        self._take = take
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._waiting: list[_Waiter[Op, Out]] = []
        self._leading = False
        self._last_size, self._last_seconds = 0, 0.0  # callers around the last round, its duration
        self.rounds = 0  # rounds run so far, for tests and benchmarks
        self.carried = 0  # operations carried by those rounds

    def submit(self, op: Op, run: Callable[[list[Op]], list[Out]]) -> Out:
        """Runs `op` in the next round and returns its own outcome (or raises its own error).

        `run` receives a round's operations and returns their outcomes in the same order; if it
        raises, every operation of that round gets the error.

        Signals (Ctrl-C's KeyboardInterrupt, a handler's SystemExit) land on the main thread,
        between any two of its steps. So there the caller only waits: a thread of its own plays
        its part (waiting, leading rounds, handing the lead on) to the end, and an interrupt ends
        the wait alone. No round is left half-finished and no lead half-handed-over, and the
        interrupted operation still runs; later callers never wait for a leader that is gone.
        """
        if threading.current_thread() is not threading.main_thread() or _INLINE.get():
            return self._submit(op, run)
        box: dict[str, Any] = {}
        played = threading.Event()

        def play() -> None:
            try:
                box["outcome"] = self._submit(op, run)
            except BaseException as error:  # handed to the waiting main thread
                box["error"] = error
            finally:
                played.set()

        # Not a daemon, and not waited for with join(): the interpreter's exit must wait for a
        # part still being played. A daemon thread still inside delta-rs then is ended by
        # CPython (before 3.14) with pthread_exit, whose unwinding through Rust frames kills
        # the process with SIGSEGV; and Python 3.11's join(), interrupted by Ctrl-C, marks the
        # thread it waited for as stopped though it runs on, so the exit would not wait.
        player = threading.Thread(target=play, name="sparkqueue-commit", daemon=False)
        try:
            player.start()
        except RuntimeError:  # no new thread while the interpreter ends (3.12+: in atexit hooks)
            return self._submit(op, run)
        played.wait()  # interruptible: a signal ends this wait, never the part played
        if "error" in box:
            raise box["error"]
        return box["outcome"]

    def _submit(self, op: Op, run: Callable[[list[Op]], list[Out]]) -> Out:
        me: _Waiter[Op, Out] = _Waiter(op)
        with self._lock:
            self._waiting.append(me)
            me.leads = not self._leading
            self._leading = True
            self._arrived.notify()
        try:
            if not me.leads:
                me.woken.wait()  # until a round has run this operation, or it is this caller's turn
            while me.leads and not me.done:  # rounds until this caller's own operation has run
                self._round(run)
        finally:
            self._leave(me)
        return me.result()

    def _round(self, run: Callable[[list[Op]], list[Out]]) -> None:
        batch: list[_Waiter[Op, Out]] = []
        began = time.monotonic()
        outcomes: list[Out] | None = None
        failure: BaseException | None = None
        try:
            with self._lock:
                expected = self._last_size
                linger = min(LINGER_SHARE * self._last_seconds, LINGER_MAX_SECONDS)
                self._arrived.wait_for(lambda: len(self._waiting) >= expected, timeout=linger)
                size = max(1, min(len(self._waiting), self._take([w.op for w in self._waiting])))
                batch, self._waiting = self._waiting[:size], self._waiting[size:]
                self.rounds += 1
                self.carried += len(batch)
            began = time.monotonic()
            outcomes = run([w.op for w in batch])
            if len(outcomes) != len(batch):
                raise RuntimeError(f"a round of {len(batch)} returned {len(outcomes)} outcomes")
        except BaseException as error:  # each caller of the round gets it, none hangs
            failure = error
        finally:
            for index, waiter in enumerate(batch):
                waiter.finish(None if failure else outcomes[index], failure)  # type: ignore[index]
            with self._lock:  # the round's callers and those that came meanwhile: who is about
                self._last_size = len(batch) + len(self._waiting)
                self._last_seconds = time.monotonic() - began

    def _leave(self, me: _Waiter[Op, Out]) -> None:
        """Ends `me`'s part: out of the line if it never ran, and the lead, if it holds it, to
        the oldest waiting caller, or to nobody."""
        with self._lock:
            if me in self._waiting:  # interrupted before a round took it
                self._waiting.remove(me)
            if not me.leads:
                return
            me.leads = False
            if self._waiting:
                nxt = self._waiting[0]
                nxt.leads = True
                nxt.woken.set()
            else:
                self._leading = False


_INLINE = contextvars.ContextVar("sparkqueue_parts_inline", default=False)


@contextmanager
def parts_played_inline() -> Iterator[None]:
    """The main thread plays its own parts in the block, as other threads do: for work at the
    interpreter's exit (an atexit hook), after Python has joined its threads, where a thread
    started then would be waited for by nobody (and, from Python 3.12, cannot start)."""
    token = _INLINE.set(True)
    try:
        yield
    finally:
        _INLINE.reset(token)


class CommitGroups:
    """A broker's group committers, one per queue table, made on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_table: dict[str, GroupCommitter[Any, Any]] = {}

    def of(self, table: str, take: Callable[[Sequence[Any]], int]) -> GroupCommitter[Any, Any]:
        """The committer of the queue table at `table` (`take` sizes its rounds when new)."""
        with self._lock:
            found = self._by_table.get(table)
            if found is None:
                found = self._by_table[table] = GroupCommitter(take)
            return found
