"""The soak's short version (sparkqueue/bench/soak.py; an hour in the benchmark): the chaos
scenario's roles on S3 (moto's server) through the fault-injecting proxy, which loses answers,
answers 500 and 503, resets connections and stalls now and then, both engines at work (native
consumers, a Spark job of DataFrames and redrive passes). Nothing is lost, nothing is handed out
twice within its visibility window, nothing reaches the dead-letter queue undelivered."""

from __future__ import annotations

from sparkqueue.bench.soak import soak

CHANCES = {"lose": 0.01, "error": 0.01, "slowdown": 0.01, "reset": 0.01, "stall": 0.002}


def test_a_short_soak_through_store_faults_loses_nothing(s3, tmp_path, monkeypatch):
    for name, value in s3.options.items():
        monkeypatch.setenv(name, value)
    root = f"{s3.new_bucket()}/soak"
    result = soak(root, tmp_path / "records", seconds=30, windows=3, rate=10, chances=CHANCES)
    report = result["report"]
    problems = ("lost", "unsent", "too_soon", "doubled", "dead_undelivered")
    assert all(not report[kind] for kind in problems), report
    assert report["deleted"] + report["left"] == report["sent"] > 0, report
    assert report["by_job"] > 0, report  # the Spark job sent and claimed through the proxy
    assert {"lose", "error", "slowdown", "reset"} <= set(result["faults"]), result["faults"]
    windows = result["windows"]
    assert len(windows) == 3 and all(row["receives"] > 0 for row in windows), windows
    assert all(row["active_files"] > 0 and row["log_objects"] > 0 for row in windows), windows
