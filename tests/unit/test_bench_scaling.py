"""The benchmark's scaling grid, tiny: real processes on one native queue, every delivery
checked."""

from __future__ import annotations

from sparkqueue.bench.report import table
from sparkqueue.bench.scaling import scaling


def test_each_cell_runs_its_processes_and_threads_and_takes_nothing_twice(tmp_path):
    rows = scaling(str(tmp_path / "root"), [10], 0.5, threads=(1, 2), processes=(1, 2))
    assert [(r["threads"], r["processes"]) for r in rows] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert all(r["received"] > 0 and r["duplicates"] == 0 for r in rows)
    reported = [what for what, _, _ in table({"scaling": rows})]
    assert reported[-1] == "scaling: batch 10, 2 threads x 2 processes"
