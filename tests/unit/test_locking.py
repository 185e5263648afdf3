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


HOLDER = """
import sys, threading, time
from pathlib import Path
from sparkqueue.store.locking import ProcessLock

lock, kind, marks = ProcessLock(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
seconds, me = float(sys.argv[4]), sys.argv[5]
deadline = time.monotonic() + seconds
guard = threading.Lock()

def loop(offset):  # two threads, staggered: the process is never without a holder for long
    time.sleep(offset)
    while time.monotonic() < deadline:
        with lock.hold(kind):
            began = time.monotonic()
            time.sleep(0.02)
            with guard, open(marks, "a") as out:
                out.write(f"{me} {kind} {began} {time.monotonic()}\\n")

threads = [threading.Thread(target=loop, args=(i * 0.01,)) for i in range(2)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""


def _holders(tmp_path, plan: list[tuple[str, float]]) -> list[tuple[str, str, float, float]]:
    """Runs one process per (kind, seconds) of `plan`, whose two threads hold the lock again and
    again;
    returns every hold: (process, kind, began, ended)."""
    lock_file, marks = str(tmp_path / "locks" / "t.lock"), tmp_path / "marks"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", HOLDER, lock_file, kind, str(marks), str(seconds), str(i)],
            env=env,
        )
        for i, (kind, seconds) in enumerate(plan)
    ]
    try:
        assert [w.wait(timeout=120) for w in workers] == [0] * len(plan)
    finally:  # none left holding the lock after a failure
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    rows = [line.split() for line in marks.read_text().splitlines()]
    return [(p, kind, float(began), float(ended)) for p, kind, began, ended in rows]


def _overlap(a: tuple[str, str, float, float], b: tuple[str, str, float, float]) -> bool:
    return a[0] != b[0] and a[2] < b[3] and b[2] < a[3]


def test_native_holders_of_different_processes_hold_the_lock_at_once(tmp_path):
    """delta-rs commits are put-if-absent writes of the next log entry: processes of the native
    engine share the file, and delta-rs's conflict check decides between them."""
    holds = _holders(tmp_path, [(NATIVE, 1.5), (NATIVE, 1.5)])
    assert any(_overlap(a, b) for a in holds for b in holds)


def test_a_spark_holder_excludes_native_ones_of_other_processes_and_is_not_starved(tmp_path):
    """Two processes of native holders keep the lock shared without a gap; a Spark process still
    gets it (the turnstile), and never while a native holder is inside."""
    holds = _holders(tmp_path, [(NATIVE, 4.0), (NATIVE, 4.0), (SPARK, 3.0)])
    spark = [h for h in holds if h[1] == SPARK]
    assert len(spark) >= 10, len(spark)  # ~0.5 s at most per turn over 3 s
    assert not any(_overlap(s, h) for s in spark for h in holds)
