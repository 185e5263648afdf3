"""A caller of the group committer interrupted by Ctrl-C (a real SIGINT to the main thread) at
each point it can be: waiting, lingering as leader, in a round it leads. The interrupt ends the
main thread's wait only; the committer keeps serving everyone, nobody waits for a leader that is
gone, and a process that ends on the interrupt ends after the round (no JVM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sparkqueue.engine.rounds.committer import GroupCommitter, parts_played_inline

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def interruptible() -> Iterator[None]:
    """Python's own SIGINT handler (KeyboardInterrupt), whatever the test runner installed."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def interrupt_when(ready: Callable[[], bool]) -> threading.Thread:
    """Sends SIGINT to this process (Python runs it on the main thread) once `ready()`."""

    def watch() -> None:
        deadline = time.monotonic() + 10
        while not ready():
            if time.monotonic() > deadline:
                return  # never reached: no stray signal later (the test fails on its own)
            time.sleep(0.002)
        os.kill(os.getpid(), signal.SIGINT)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    return watcher


def submit_on_threads(committer: GroupCommitter, run, ops: list[int]) -> dict[int, object]:
    results: dict[int, object] = {}

    def call(op: int) -> None:
        try:
            results[op] = committer.submit(op, run)
        except Exception as error:
            results[op] = error

    threads = [threading.Thread(target=call, args=(op,), daemon=True) for op in ops]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive(), "a caller hangs: the committer is led by nobody"
    return results


def times_ten(ops: list[int]) -> list[int]:
    return [op * 10 for op in ops]


def test_a_caller_interrupted_while_waiting_leaves_the_line():
    committer: GroupCommitter[int, int] = GroupCommitter()
    leading, release = threading.Event(), threading.Event()

    def slow_first(ops: list[int]) -> list[int]:
        if 1 in ops:
            leading.set()
            release.wait(10)
        return times_ten(ops)

    leader = threading.Thread(target=committer.submit, args=(1, slow_first), daemon=True)
    leader.start()
    assert leading.wait(5)
    watcher = interrupt_when(lambda: len(committer._waiting) == 1)
    with pytest.raises(KeyboardInterrupt):
        committer.submit(2, slow_first)  # waits behind the round of 1
    watcher.join()
    release.set()
    leader.join(5)
    assert not leader.is_alive()
    assert submit_on_threads(committer, times_ten, [3, 4, 5]) == {3: 30, 4: 40, 5: 50}
    assert committer.submit(6, times_ten) == 60


def test_a_leader_interrupted_while_lingering_passes_the_lead_on():
    committer: GroupCommitter[int, int] = GroupCommitter()

    def slow(ops: list[int]) -> list[int]:
        time.sleep(0.8)
        return times_ten(ops)

    submit_on_threads(committer, slow, [1, 2, 3])  # callers about: the next leader lingers
    lingering = threading.Event()

    def run(ops: list[int]) -> list[int]:
        return times_ten(ops)

    original_wait_for = committer._arrived.wait_for

    def wait_for(predicate, timeout=None):  # observe the linger begin, then linger for real
        lingering.set()
        return original_wait_for(predicate, timeout)

    committer._arrived.wait_for = wait_for  # type: ignore[method-assign]
    watcher = interrupt_when(lingering.is_set)
    with pytest.raises(KeyboardInterrupt):
        committer.submit(7, run)
    watcher.join()
    committer._arrived.wait_for = original_wait_for  # type: ignore[method-assign]
    assert submit_on_threads(committer, run, [8, 9]) == {8: 80, 9: 90}


def test_an_interrupt_in_a_round_leaves_the_round_whole():
    """The main thread's operation shares a round with another caller's; Ctrl-C comes while the
    round runs. The round runs to its end on the caller's own thread: the other caller gets its
    real outcome (not somebody else's KeyboardInterrupt), the interrupted operation ran too, and
    the next caller is served."""
    committer: GroupCommitter[int, int] = GroupCommitter()
    leading, release, in_round = threading.Event(), threading.Event(), threading.Event()
    ran: list[int] = []

    def run(ops: list[int]) -> list[int]:
        if 1 in ops:  # the first round holds until the others queue behind it
            leading.set()
            release.wait(10)
        elif 2 in ops:
            in_round.set()
            time.sleep(0.5)  # the interrupt comes here
        ran.extend(ops)
        return times_ten(ops)

    first = threading.Thread(target=committer.submit, args=(1, run), daemon=True)
    first.start()
    assert leading.wait(5)
    results: dict[int, object] = {}
    other = threading.Thread(
        target=lambda: results.__setitem__(3, committer.submit(3, run)), daemon=True
    )

    def queue_behind() -> None:  # the main thread's operation waits; another caller joins it
        while len(committer._waiting) < 1:
            time.sleep(0.002)
        other.start()
        while len(committer._waiting) < 2:
            time.sleep(0.002)
        release.set()  # the first round ends; operations 2 and 3 share the next

    helper = threading.Thread(target=queue_behind, daemon=True)
    helper.start()
    watcher = interrupt_when(in_round.is_set)
    with pytest.raises(KeyboardInterrupt):
        committer.submit(2, run)
    watcher.join()
    other.join(10)
    assert not other.is_alive(), "the other caller of the interrupted round hangs"
    assert results == {3: 30}
    assert sorted(ran) == [1, 2, 3]  # the interrupted operation ran: the interrupt ended a wait
    assert committer.submit(4, run) == 40


def test_ctrl_c_while_waiting_to_hold_a_table_alone_leaves_the_lock_usable(tmp_path):
    """A FIFO send waits for the table's transactions in flight (ProcessLock.hold_alone); Ctrl-C
    there must not leave the lock held alone forever, hanging every later transaction."""
    from sparkqueue.store.locking import ProcessLock

    lock = ProcessLock(str(tmp_path / "locks" / "t.lock"))
    inside, release = threading.Event(), threading.Event()

    def transaction() -> None:
        with lock.hold():
            inside.set()
            release.wait(timeout=10)

    holder = threading.Thread(target=transaction)
    holder.start()
    inside.wait(timeout=10)
    interrupt_when(lambda: lock._alone)  # once it waits for the holder inside
    with pytest.raises(KeyboardInterrupt), lock.hold_alone():
        pass
    release.set()
    holder.join()
    later = threading.Thread(target=lambda: lock.hold().__enter__())
    later.start()
    later.join(timeout=5)
    assert not later.is_alive()  # before the fix it waited forever for the lone holder


def test_a_process_ended_by_ctrl_c_in_a_round_ends_after_the_round(tmp_path):
    """The main thread's part is played on a thread of its own, which the interpreter's exit
    waits for: it was a daemon (and Python 3.11's join(), once interrupted, marks the thread it
    waited for as stopped), so the process ended in the middle of the round."""
    out = tmp_path / "round"
    script = (
        "import os, signal, sys, time\n"
        "from sparkqueue.engine.rounds.committer import GroupCommitter\n"
        "def run(ops):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"  # Ctrl-C while the round runs
        "    time.sleep(0.5)\n"
        "    open(sys.argv[1], 'w').write('whole')\n"
        "    return ops\n"
        "GroupCommitter().submit(1, run)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(out)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == -signal.SIGINT, done.stderr  # ended by the interrupt
    assert "KeyboardInterrupt" in done.stderr
    assert out.read_text() == "whole"  # but after its round


def test_the_main_thread_plays_its_part_itself_where_no_thread_may_start(monkeypatch):
    """At the interpreter's exit (an atexit hook) a thread started is waited for by nobody, and
    from Python 3.12 none starts: the part is played on the main thread instead."""
    committer: GroupCommitter[int, int] = GroupCommitter()
    players: list[str] = []

    def run(ops: list[int]) -> list[int]:
        players.append(threading.current_thread().name)
        return times_ten(ops)

    with parts_played_inline():
        assert committer.submit(1, run) == 10

    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(threading.Thread, "start", refused)
    assert committer.submit(2, run) == 20
    assert players == ["MainThread", "MainThread"]
