"""The group committer's rules, with real threads and a stand-in for the commit (no JVM)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from sparkqueue.engine.rounds.committer import CommitGroups, GroupCommitter


class Rounds:
    """A round that takes `seconds` (as a commit would) and records what each round carried."""

    def __init__(self, seconds: float = 0.05) -> None:
        self.seconds = seconds
        self.carried: list[list[int]] = []
        self.inside = 0
        self.most_inside = 0
        self._lock = threading.Lock()

    def __call__(self, ops: list[int]) -> list[int]:
        with self._lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
            self.carried.append(list(ops))
        time.sleep(self.seconds)
        with self._lock:
            self.inside -= 1
        return [op * 10 for op in ops]


def arrived(committer: GroupCommitter, rounds: Rounds, op: int) -> bool:
    """Whether `op` waits in the committer's line or a round has taken it."""
    with committer._lock:
        waiting = [waiter.op for waiter in committer._waiting]
    return op in waiting or any(op in ops for ops in list(rounds.carried))


def run_callers(committer: GroupCommitter, run: Rounds, ops: list[int]) -> dict[int, object]:
    results: dict[int, object] = {}

    def call(op: int) -> None:
        try:
            results[op] = committer.submit(op, run)
        except Exception as error:  # the test looks at what each caller got
            results[op] = error

    threads = [threading.Thread(target=call, args=(op,)) for op in ops]
    for op, thread in zip(ops, threads, strict=True):
        thread.start()  # each arrives after the one before, while rounds are under way
        deadline = time.monotonic() + 10
        while not arrived(committer, run, op) and time.monotonic() < deadline:
            time.sleep(0.001)
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive(), "a caller never got its outcome"
    return results


def test_a_lone_caller_runs_at_once_in_a_round_of_its_own():
    rounds, committer = Rounds(0), GroupCommitter()
    assert committer.submit(7, rounds) == 70
    assert committer.submit(8, rounds) == 80
    assert rounds.carried == [[7], [8]]


def test_concurrent_callers_share_rounds_and_each_gets_its_own_outcome():
    rounds, committer = Rounds(), GroupCommitter()
    results = run_callers(committer, rounds, list(range(40)))
    assert results == {op: op * 10 for op in range(40)}
    assert rounds.most_inside == 1  # one round at a time
    assert sorted(op for ops in rounds.carried for op in ops) == list(range(40))  # each once
    assert len(rounds.carried) < 40 / 3  # shared: far fewer rounds than callers
    assert (committer.rounds, committer.carried) == (len(rounds.carried), 40)


def loops(committer: GroupCommitter, run, callers: int, turns: int, work: float) -> None:
    """`callers` threads that each submit `turns` times, doing `work` seconds of their own
    between submits, each a little slower than the one before (as loops building their batch)."""

    def loop(caller: int) -> None:
        for turn in range(turns):
            committer.submit(caller * 100 + turn, run)
            time.sleep(work * (1 + caller / callers))

    threads = [threading.Thread(target=loop, args=(caller,)) for caller in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)


def test_a_leader_lingers_for_the_callers_of_the_last_round():
    """Four loops whose work between submits is shorter than a quarter of a round: they come
    back a moment apart, and the rounds carry all four (without the wait, rounds of 1 and 3
    would alternate: 8 rounds or more)."""
    rounds, committer = Rounds(0.4), GroupCommitter()
    loops(committer, rounds, callers=4, turns=4, work=0.01)
    sizes = [len(ops) for ops in rounds.carried]
    assert sum(sizes) == 16 and len(sizes) <= 5 and sizes.count(4) >= 3, sizes


def test_a_leader_lingers_no_longer_than_a_share_of_the_last_round():
    """Callers slower than the linger: the leader goes without them (a round of one here takes
    the first arrival alone), so an absent caller never holds the others up for long."""
    rounds, committer = Rounds(0.04), GroupCommitter()  # linger: at most 10 ms
    loops(committer, rounds, callers=2, turns=3, work=0.1)
    assert max(len(ops) for ops in rounds.carried[1:]) == 1
    assert committer.carried == 6


def test_callers_are_served_in_the_order_they_arrived():
    rounds, committer = Rounds(), GroupCommitter()
    run_callers(committer, rounds, list(range(30)))
    order = [op for ops in rounds.carried for op in ops]
    assert order == sorted(order)


def test_take_bounds_a_round_and_a_big_operation_runs_alone():
    rounds = Rounds()

    def take(ops: Sequence[int]) -> int:  # rounds of at most 5 units; op 50 is 5 units
        total = 0
        for taken, op in enumerate(ops):
            total += 5 if op == 50 else 1
            if total > 5:
                return taken
        return len(ops)

    committer = GroupCommitter(take)
    results = run_callers(committer, rounds, [*range(12), 50, *range(12, 20)])
    assert len(results) == 21 and results[50] == 500
    assert all(len(ops) <= 5 for ops in rounds.carried)
    assert [50] in rounds.carried  # five units: a round of its own


def test_a_failed_round_fails_its_own_callers_only():
    committer = GroupCommitter()
    started = threading.Event()
    release = threading.Event()

    def run(ops: list[int]) -> list[int]:
        if 0 in ops:  # the first round holds until the others wait, then fails
            started.set()
            release.wait(5)
            raise RuntimeError("commit failed")
        return [op * 10 for op in ops]

    first: list[object] = []
    leader = threading.Thread(target=lambda: first.append(_outcome(committer, 0, run)))
    leader.start()
    started.wait(5)
    later: dict[int, object] = {}
    others = [
        threading.Thread(target=lambda op=op: later.__setitem__(op, _outcome(committer, op, run)))
        for op in (1, 2, 3)
    ]
    for thread in others:
        thread.start()
    time.sleep(0.1)
    release.set()
    for thread in [leader, *others]:
        thread.join(10)
    assert isinstance(first[0], RuntimeError)
    assert later == {1: 10, 2: 20, 3: 30}  # the next round, led by the oldest waiting caller


def _outcome(committer: GroupCommitter, op: int, run) -> object:
    try:
        return committer.submit(op, run)
    except RuntimeError as error:
        return error


def test_a_round_returning_the_wrong_number_of_outcomes_is_an_error_not_a_hang():
    committer = GroupCommitter()
    with pytest.raises(RuntimeError, match="returned 0 outcomes"):
        committer.submit(1, lambda ops: [])
    assert committer.submit(2, lambda ops: [op for op in ops]) == 2  # and the next one runs


def test_a_broker_has_one_committer_per_table():
    groups = CommitGroups()
    assert groups.of("a", len) is groups.of("a", len)
    assert groups.of("a", len) is not groups.of("b", len)
