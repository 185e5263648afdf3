"""The benchmark's report for `--only` runs: rows and chart for the scenarios that ran, no others."""

from __future__ import annotations

import pytest

from sparkqueue.bench import chart, main, table
from sparkqueue.bench.reckoning import problems


def test_a_partial_run_reports_only_its_scenarios(tmp_path):
    results = {"redrive": {"redrive_s": 3.5, "released": 100, "native_redrive_s": 0.25}}
    rows = table(results)
    assert rows == [("redrive pass", "spark 3.5 s | native 0.2 s", "<= 10 s")]
    chart(results, tmp_path / "bench.png")
    assert (tmp_path / "bench.png").stat().st_size > 0


def test_only_accepts_the_scenario_names_alone(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--only", "everything"])  # refused before any Spark session starts
    assert stop.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_each_engine_figure_stands_beside_the_other():
    latency = {"receive_p50_ms": 30.0, "receive_p99_ms": 90.0, "delete_p50_ms": 15.0}
    latency |= {"delete_p99_ms": 40.0, "drift": 1.0, "receive_ms": [30.0], "delete_ms": [15.0]}
    slow = {key: value * 40 if key.endswith("ms") else value for key, value in latency.items()}
    rows = table({"engines": {"native": {"latency": latency}, "spark": {"latency": slow}}})
    assert rows[0] == (
        "receive(1) p50 / p99",
        "native 30 / 90 ms | spark 1200 / 3600 ms",
        "<= 150 / 400 ms",
    )


def test_the_streaming_scenario_reports_its_drains_its_latency_and_its_kills():
    drain = {"per_s": 31_000.0, "twice": 0, "left": 0}
    continuous = {"rate": 1_000, "p50_s": 1.1, "p99_s": 3.1, "left": 0}
    kills = {"kills": 3, "lost": 0, "twice": 0, "left": 0, "rows_lost": 0, "rows_twice": 0}
    streamed = {"drain": drain, "two_queries": drain, "continuous": continuous, "kills": kills}
    rows = {what: figure for what, figure, _ in table({"streaming": streamed})}
    assert rows["AvailableNow drain into Delta, 1 query"] == "31,000 msg/s, 0 twice, 0 left"
    assert rows["streaming driver SIGKILLed 3 times, restarted"] == (
        "0 lost, 0 twice, 0 left; sink rows 0 lost, 0 twice"
    )


def test_problems_count_what_the_chaos_and_soak_runs_found_gone_wrong():
    clean = {kind: [] for kind in ("lost", "unsent", "too_soon", "doubled", "dead_undelivered")}
    assert problems({"redrive": {"redrive_s": 3.5}}) == 0
    assert problems({"chaos": clean, "soak": {"report": clean}}) == 0
    found = problems(
        {"chaos": {**clean, "doubled": ["m1"]}, "soak": {"report": {**clean, "lost": ["m2", "m3"]}}}
    )
    assert found == 3  # the benchmark keeps its root, with the records, when there are any
