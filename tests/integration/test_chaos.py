"""The chaos run, short: buffered consumers (native processes) and the redrive job (a process with a
JVM of its own) killed with SIGKILL at random moments and started again, while a producer sends;
afterwards every message sent is accounted for and none was handed out twice within its
visibility window. The long run is the benchmark's `--only chaos` scenario."""

from __future__ import annotations

import pytest

from sparkqueue.bench.chaos import run_chaos

pytestmark = pytest.mark.usefixtures("quick_drivers")


def test_killed_consumers_and_redrive_jobs_lose_nothing_and_deliver_nothing_too_soon(
    spark, tmp_path
):
    report = run_chaos(
        spark,
        str(tmp_path / "root"),
        tmp_path / "records",
        seconds=25,
        consumers=2,
        messages=120,
        kill_every=(3.0, 6.0),
        seed=14,
        min_kills=4,
    )

    assert report.kills >= 4, report  # consumers and the job in turn, each once it was up
    assert report.sent == 120
    assert report.lost == [] and report.unsent == [] and report.too_soon == [], report
    assert report.dead_undelivered == (), report  # every dead letter was handed out first
    assert report.failed == 0, report  # no fault but the kills: no role's step raised
    assert report.doubled == [], report
    assert report.deleted + report.left == report.sent
    assert report.deleted > 0 and report.delivered >= report.deleted
