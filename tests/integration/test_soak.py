"""The soak's short version (sparkqueue/bench/soak.py; an hour in the benchmark): the chaos
scenario's roles on S3 (moto's server) through the fault-injecting proxy, which loses answers,
answers 500 and 503, resets connections and stalls now and then, both engines at work (native
consumers, a Spark job of DataFrames and redrive passes). Nothing is lost, nothing is handed out
twice within its visibility window, nothing reaches the dead-letter queue undelivered."""

from __future__ import annotations

import pytest

from sparkqueue.bench.soak import soak

pytestmark = pytest.mark.usefixtures("quick_drivers")

# A few of each kind a run (a receive makes ten requests or more; a stall holds one 12 s).
CHANCES = {"lose": 0.004, "error": 0.004, "slowdown": 0.004, "reset": 0.004, "stall": 0.0005}


def test_a_short_soak_through_store_faults_loses_nothing(s3, tmp_path, monkeypatch):
    for name, value in s3.options.items():
        monkeypatch.setenv(name, value)
    root = f"{s3.new_bucket()}/soak"
    result = soak(root, tmp_path / "records", seconds=20, windows=2, rate=10, chances=CHANCES)
    report = result["report"]
    problems = ("lost", "unsent", "too_soon", "doubled", "dead_undelivered")
    assert all(not report[kind] for kind in problems), report
    assert report["deleted"] + report["left"] == report["sent"] > 0, report
    assert report["by_job"] > 0, report  # the Spark job sent and claimed through the proxy
    # The run ends at its length, or once the job has done a round if that came later, at most
    # at three times the length (a nap of the runner's once overslept to that, waiting on a job
    # long since ready).
    ready = report["job_ready_s"]
    assert report["run_s"] <= (60 if ready is None else max(20, ready)) + 3, report
    assert {"lose", "error", "slowdown", "reset"} <= set(result["faults"]), result["faults"]
    windows = result["windows"]  # the probe's figures are the benchmark's (an hour of them)
    assert len(windows) == 2, windows
    # The log always holds the creation's commit; the table may be empty at a window's end (the
    # consumers can be level with a slow producer), but then it holds no bytes either.
    assert all(row["log_objects"] > 0 and row["log_bytes"] > 0 for row in windows), windows
    assert all((row["active_files"] == 0) == (row["active_bytes"] == 0) for row in windows), windows
