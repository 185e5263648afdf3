"""Chaos, short: buffered consumers, a producer and the redrive job as OS processes on one local
root; consumers and the job killed at random moments and started again (the long run is the
benchmark's `--only chaos`)."""

from __future__ import annotations

from sparkqueue.bench.chaos import run_chaos


def test_killed_consumers_and_jobs_lose_nothing_and_hand_out_nothing_twice_too_soon(
    spark, tmp_path
):
    report = run_chaos(
        spark,
        str(tmp_path / "root"),
        tmp_path / "records",
        seconds=75,
        consumers=2,
        messages=300,
        kill_every=(8.0, 16.0),
        seed=11,
    )
    print(report)
    assert report.kills >= 4
    assert report.sent == 300
    assert (report.lost, report.unsent, report.too_soon) == ([], [], [])
    assert report.deleted > 0 and report.delivered >= report.deleted
