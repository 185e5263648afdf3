"""The benchmark's smoke run (CI): every scenario of the default run runs at tiny sizes and
writes its outputs; the named-only scenarios that need Spark (the simulated day, table growth)
run tiny on their own. The JVM-free ones have theirs in tests/unit/test_bench_*.py.

The per-message scenarios run on the native engine; the Spark engine runs one of them beside it
(its operations are each a second here, and the scenarios' code is the same for both engines:
the rows that stand the two side by side are tests/unit/test_bench_report.py's)."""

from __future__ import annotations

import json
import os
import statistics
import tempfile

import pytest

from sparkqueue import Broker
from sparkqueue.bench import main, table
from sparkqueue.bench.day import Traffic, day
from sparkqueue.bench.upkeep import upkeep


def test_the_benchmark_smoke_run_writes_a_table_json_and_a_chart(
    spark, tmp_path, capsys, monkeypatch
):
    temporary = tmp_path / "tmp"  # where the run makes its own root, removed after the run
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    results = main(["--smoke", "--engine", "native", "--out", str(tmp_path)])
    assert not list(temporary.glob("sparkqueue-bench-*"))

    assert results["bulk"]["enqueued"] == results["bulk"]["drained"] == 2_000
    assert results["redrive"]["released"] == results["redrive"]["native_released"] == 100
    figures = results["engines"]["native"]
    assert len(figures["latency"]["receive_ms"]) == 4
    for scenario in ("load_alone", "load_with_producer", "buffered_load"):
        assert figures[scenario]["delivered"] > 0
        assert figures[scenario]["duplicates"] == figures[scenario]["lost"] == 0
    assert figures["buffered_latency"]["receive_p50_ms"] > 0
    assert [(run["batch"], run["workers"]) for run in figures["worker"].values()] == [
        (10, 1),
        (10, 4),
    ]
    assert all(run["deleted"] > 0 for run in figures["worker"].values())
    endpoint = dict(figures["endpoint"])
    assert endpoint.pop("get_queue_url_p50_ms") > 0
    assert set(endpoint) == {"http_1", "http_8", "direct_1", "direct_8"}
    assert all(run["messages_per_s"] > 0 and run["send_p50_ms"] > 0 for run in endpoint.values())
    for scenario in ("fifo_load", "fifo_with_producer"):
        assert figures[scenario]["delivered"] > 0
        assert figures[scenario]["duplicates"] == figures[scenario]["out_of_order"] == 0
    assert len(results["phases"]) == 6
    assert len(results["start"]["command_s"]) == len(results["start"]["serve_s"]) == 1
    assert figures["celery"]["tasks"] == 3 and figures["celery"]["per_s"] > 0
    history = figures["history"]
    assert history["operations"] == 4 and history["versions"] == 8
    assert history["plain_receive_p50_ms"] > 0 and history["history_p50_ms"] > 0
    assert set(results["console"]) == {
        "queues", "queue", "dead letters", "history", "depth chart", "live rows"
    }  # fmt: skip
    assert json.loads((tmp_path / "bench.json").read_text())["sizes"]["messages"] == 2_000
    assert (tmp_path / "bench.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "redrive pass" in printed and "receive(1) p50 / p99" in printed
    assert "with CDF" in printed and "console p50" in printed
    assert "native phase p50 / p99" in printed and "until it serves" in printed

    on_spark = main(
        ["--smoke", "--engine", "spark", "--only", "latency", "--out", str(tmp_path / "spark"),
         "--root", str(tmp_path / "spark-root")]
    )  # fmt: skip
    assert set(on_spark["engines"]) == {"spark"}
    assert len(on_spark["engines"]["spark"]["latency"]["receive_ms"]) == 4
    assert any((tmp_path / "spark-root").iterdir())  # a root given is kept


def test_a_failed_run_keeps_its_own_root_and_says_where(spark, tmp_path, capsys, monkeypatch):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    with pytest.raises(statistics.StatisticsError):  # no operations: no median to take
        main(["--smoke", "--engine", "native", "--only", "latency", "--operations", "0",
              "--out", str(tmp_path)])  # fmt: skip
    [root] = temporary.glob("sparkqueue-bench-*")
    assert any(root.iterdir()) and f"kept in {root}" in capsys.readouterr().err


def test_the_benchmark_runs_natively_on_object_storage_beside_the_local_root(
    spark, s3, tmp_path, monkeypatch
):
    for name, value in s3.options.items():
        monkeypatch.setenv(name, value)
    bucket = s3.new_bucket()
    results = main(
        ["--smoke", "--engine", "native", "--only", "latency", "--only", "fifo", "--out",
         str(tmp_path), "--root", str(tmp_path / "root"), "--object-store", bucket]
    )  # fmt: skip
    assert set(results["engines"]) == {"native", "native on s3"}
    figures = results["engines"]["native on s3"]
    assert len(figures["latency"]["receive_ms"]) == 4
    fifo = figures["fifo_load"]
    assert fifo["delivered"] > 0 and fifo["duplicates"] == fifo["out_of_order"] == 0


def test_a_simulated_day_leaves_its_tombstones_and_log_entries_and_is_timed(spark, tmp_path):
    broker = Broker(spark, str(tmp_path / "root"))
    traffic = Traffic(
        hours=0.01, commits_per_second=1.2, file_retention_hours=1, local_log_minutes=5
    )
    figures = day(broker, 3, traffic)
    assert (figures["tombstones"], figures["log_entries"]) == (43, 86)
    log = os.path.join(broker.context.record("day").location.removeprefix("file:"), "_delta_log")
    assert sum(name.startswith("#stand-in-") for name in os.listdir(log)) == 86
    for op in ("receive", "delete"):
        assert figures[f"fresh_{op}_p50_ms"] > 0 and figures[f"{op}_p50_ms"] > 0
        assert figures[f"{op}_ratio"] == figures[f"{op}_p50_ms"] / figures[f"fresh_{op}_p50_ms"]
    rows = table({"engines": {"native": {"day": figures}}})
    assert rows[0][0] == "receive p50 after 0.01 h at 1.2 commits/s (43 tombstones, 86 log entries)"


def test_table_growth_is_measured_pass_by_pass_with_upkeep(spark, tmp_path):
    passes = upkeep(Broker(spark, str(tmp_path / "root")), passes=2, messages=20)
    assert [run["pass"] for run in passes] == [0, 1]
    assert passes[-1]["upkeep"]  # due every pass once the first has set the clock
    assert all(run["active_files"] > 0 and run["log_files"] > 0 for run in passes)
    assert all(run["data_files"] >= run["active_files"] and run["pass_s"] > 0 for run in passes)
    assert table({"upkeep": passes})[1][0] == (
        "upkeep pass 1: active / on-disk files, log files / size"
    )
