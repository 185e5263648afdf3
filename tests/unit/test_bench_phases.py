"""The benchmark's phases scenario, tiny: a native receive(1) and delete, phase by phase."""

from __future__ import annotations

from sparkqueue.bench.phases import phases
from sparkqueue.bench.report import table


def test_each_phase_is_timed_every_round_and_reported(tmp_path):
    timings = phases(str(tmp_path / "root"), rounds=3, backlog=20)
    assert list(timings) == [
        "receive(1), public API",
        "delete, public API",
        "open the table (read its log)",
        "candidate query (DataFusion)",
        "claim UPDATE (open + commit)",
        "DELETE (open + commit)",
    ]
    assert all(0 < t["p50_ms"] <= t["p99_ms"] < 60_000 for t in timings.values())
    rows = table({"phases": timings})
    assert rows[0][0] == "native phase p50 / p99: receive(1), public API"
    assert len(rows) == len(timings)
