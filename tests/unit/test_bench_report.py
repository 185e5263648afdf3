"""The benchmark's report for `--only` runs: rows and chart for the scenarios that ran, no others."""

from __future__ import annotations

import pytest

from sparkqueue.bench import chart, main, table


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
