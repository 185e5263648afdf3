"""Streaming drivers killed with SIGKILL at random moments and restarted from their checkpoints
(sparkqueue/bench/stream_kills.py, the benchmark's own, once here): the source's query into
Delta and a Delta table into the queue's sink. At the end nothing is lost, nothing is in a sink
twice, and the queue is empty."""

from __future__ import annotations

import pytest

from sparkqueue.bench.stream_kills import stream_kills

pytestmark = pytest.mark.usefixtures("quick_drivers")

KILLS = 1  # each run of the driver starts a JVM: one kill keeps the test run short


def test_killed_streaming_drivers_lose_nothing_and_send_nothing_twice(tmp_path):
    result = stream_kills(
        str(tmp_path / "root"), str(tmp_path / "work"), kills=KILLS, messages=300, rows=120,
        files=12,
    )  # fmt: skip
    assert (result["lost"], result["twice"], result["left"]) == (0, 0, 0)
    assert (result["rows_lost"], result["rows_twice"]) == (0, 0)  # each row sent once
