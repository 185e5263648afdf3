"""The cross-process commit lock for local roots: exclusive between processes, shared by threads."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from sparkqueue.store.locking import NATIVE, SPARK, ProcessLock

REPO = Path(__file__).resolve().parents[2]


def run_threads(targets) -> None:
    threads = [threading.Thread(target=t) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


LOCK_WORKER = """
import sys, time
from sparkqueue.store.locking import NATIVE, SPARK, ProcessLock

lock, counter = ProcessLock(sys.argv[1]), sys.argv[2]
for _ in range(150):
    with lock.hold():
        value = int(open(counter).read())
        time.sleep(0.0005)
        open(counter, "w").write(str(value + 1))
"""


def test_process_lock_excludes_other_processes(tmp_path):
    counter = tmp_path / "counter"
    counter.write_text("0")
    lock_file = str(tmp_path / "locks" / "t.lock")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    workers = [
        subprocess.Popen([sys.executable, "-c", LOCK_WORKER, lock_file, str(counter)], env=env)
        for _ in range(3)
    ]
    assert [w.wait(timeout=120) for w in workers] == [0, 0, 0]
    assert counter.read_text() == "450"


def test_process_lock_is_shared_by_threads_of_one_process(tmp_path):
    lock = ProcessLock(str(tmp_path / "locks" / "t.lock"))
    inside = threading.Barrier(2, timeout=10)

    def hold() -> None:
        with lock.hold():
            inside.wait()  # both threads are inside at once, or this times out

    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            hold()
        except BaseException as error:
            errors.append(error)

    run_threads([guarded, guarded])
    assert errors == []
    started = time.monotonic()
    with lock.hold():
        assert time.monotonic() - started < 1


def test_hold_alone_waits_for_the_threads_inside_and_keeps_newcomers_out(tmp_path):
    lock = ProcessLock(str(tmp_path / "locks" / "t.lock"))
    events: list[str] = []
    inside = threading.Event()

    def transaction(name: str, pause: float) -> None:
        with lock.hold():
            events.append(f"{name} in")
            inside.set()
            time.sleep(pause)
            events.append(f"{name} out")

    def alone() -> None:
        inside.wait(timeout=10)
        with lock.hold_alone():
            events.append("alone in")
            time.sleep(0.2)
            events.append("alone out")

    def late() -> None:
        inside.wait(timeout=10)
        time.sleep(0.1)  # arrives while the lone holder waits for the first transaction
        transaction("late", 0.0)

    run_threads([lambda: transaction("first", 0.3), alone, late])
    assert events.index("alone in") > events.index("first out")  # waited for the one inside
    assert events.index("late in") > events.index("alone out")  # the newcomer waited for it


def test_the_two_engines_of_one_process_take_turns_and_neither_starves(tmp_path):
    """Threads of one engine share the lock; the two engines are never inside at once; and under
    a steady stream of one engine's threads the other gets in at once when they leave."""
    lock = ProcessLock(str(tmp_path / "locks" / "t.lock"))
    inside: dict[str, int] = {SPARK: 0, NATIVE: 0}
    guard = threading.Lock()
    overlaps: list[tuple[int, int]] = []
    waits: list[float] = []
    stop = threading.Event()

    def enter(kind: str) -> None:
        with lock.hold(kind):
            with guard:
                inside[kind] += 1
                if inside[SPARK] and inside[NATIVE]:
                    overlaps.append((inside[SPARK], inside[NATIVE]))
            time.sleep(0.002)
            with guard:
                inside[kind] -= 1

    deadline = time.monotonic() + 30  # a starved engine fails the test rather than hanging it

    def native_stream() -> None:
        while not stop.is_set() and time.monotonic() < deadline:
            enter(NATIVE)

    def spark_turns() -> None:
        try:
            for _ in range(20):
                started = time.monotonic()
                enter(SPARK)
                waits.append(time.monotonic() - started)
        finally:
            stop.set()

    run_threads([native_stream] * 3 + [spark_turns])
    assert overlaps == []
    assert len(waits) == 20 and max(waits) < 0.5, max(waits)
