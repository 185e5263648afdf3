"""The benchmark's smoke run (CI): every scenario runs at tiny sizes and writes its outputs.

The per-message scenarios run on the native engine; the Spark engine runs one of them beside it
(its operations are each a second here, and the scenarios' code is the same for both engines:
the rows that stand the two side by side are tests/unit/test_bench_report.py's)."""

from __future__ import annotations

import json

from sparkqueue.bench import main


def test_the_benchmark_smoke_run_writes_a_table_json_and_a_chart(spark, tmp_path, capsys):
    results = main(
        ["--smoke", "--engine", "native", "--out", str(tmp_path), "--root", str(tmp_path / "root")]
    )

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
    assert figures["fifo_load"]["delivered"] > 0
    assert figures["fifo_load"]["duplicates"] == figures["fifo_load"]["out_of_order"] == 0
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

    on_spark = main(
        ["--smoke", "--engine", "spark", "--only", "latency", "--out", str(tmp_path / "spark"),
         "--root", str(tmp_path / "spark-root")]
    )  # fmt: skip
    assert set(on_spark["engines"]) == {"spark"}
    assert len(on_spark["engines"]["spark"]["latency"]["receive_ms"]) == 4


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
