"""The worker-loop grid that both our worker scenario and PGMQ's (peers) run through: the backlog
topped up before each cell, a cell that took all of it flagged as a floor."""

from __future__ import annotations

from sparkqueue.bench.report import table
from sparkqueue.bench.worker import grid


def test_each_cell_starts_on_a_full_backlog_and_one_that_took_it_all_ran_dry():
    topped: list[int] = []
    takes = {(10, 1): 30, (10, 4): 100, (100, 1): 0, (100, 4): 100}
    cells = grid([10, 100], 100, topped.append, lambda batch, workers: takes[batch, workers])
    assert topped == [100, 30, 100]  # what the cells before took, and nothing for a full one
    assert list(cells) == [
        "batch 10, 1 worker",
        "batch 10, 4 workers",
        "batch 100, 1 worker",
        "batch 100, 4 workers",
    ]
    assert [cell["ran_dry"] for cell in cells.values()] == [False, True, False, True]
    assert [cell["deleted"] for cell in cells.values()] == [30, 100, 0, 100]
    figures = [figure for _, figure, _ in table({"engines": {"native": {"worker": cells}}})]
    assert figures[1].endswith("msg/s (ran dry)") and not figures[0].endswith("(ran dry)")
