"""The in-flight gauge: threads and Queue objects of one process never overshoot the limit."""

from __future__ import annotations

import threading

import pytest

from sparkqueue.engine.messages.inflight import InFlightGauge
from sparkqueue.errors import OverLimit
from sparkqueue.limits import IN_FLIGHT_LIMITS


def test_grants_what_fits_and_refuses_at_the_limit():
    gauge = InFlightGauge(10)
    assert gauge.reserve(6, lambda: 0) == 6
    assert gauge.reserve(6, lambda: 0) == 4  # recounted (still 0 in the table) + 6 reserved
    with pytest.raises(OverLimit):
        gauge.reserve(1, lambda: 0)


def test_a_full_fifo_queue_grants_nothing_and_raises_nothing():
    gauge = InFlightGauge(10, fifo=True)
    assert gauge.reserve(12, lambda: 0) == 10
    assert gauge.reserve(1, lambda: 10) == 0


def test_both_kinds_of_queue_allow_120000_in_flight():
    assert IN_FLIGHT_LIMITS == {False: 120_000, True: 120_000}


def test_settling_returns_what_was_not_claimed():
    gauge = InFlightGauge(10)
    granted = gauge.reserve(8, lambda: 0)
    gauge.settle(granted, 3)
    assert gauge.reserve(10, lambda: 3) == 7


def test_a_stale_estimate_is_recounted():
    now = [0.0]
    gauge = InFlightGauge(1000, clock=lambda: now[0])
    counts = iter([5, 500])
    gauge.settle(gauge.reserve(1, lambda: next(counts)), 1)
    now[0] = 31.0
    assert gauge.reserve(1000, lambda: next(counts)) == 500


def test_concurrent_reservations_never_exceed_the_limit():
    gauge = InFlightGauge(100)
    granted: list[int] = []
    in_table = [0]  # what a recount would find: every claim so far
    lock = threading.Lock()
    start = threading.Barrier(8)

    def receiver() -> None:
        start.wait()
        for _ in range(20):
            try:
                got = gauge.reserve(7, lambda: in_table[0])
            except OverLimit:
                continue
            with lock:
                granted.append(got)
                in_table[0] += got  # every grant claims all it was given
            gauge.settle(got, got)

    threads = [threading.Thread(target=receiver) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(granted) == 100
