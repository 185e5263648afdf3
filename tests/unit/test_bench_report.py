"""The benchmark's report for `--only` runs: rows and chart for the scenarios that ran, no others."""

from __future__ import annotations

import pytest

from sparkqueue.bench import chart, main, table


def test_a_partial_run_reports_only_its_scenarios(tmp_path):
    results = {"redrive": {"redrive_s": 3.5, "released": 100}}
    rows = table(results)
    assert rows == [("redrive pass", "3.5 s", "<= 10 s")]
    chart(results, tmp_path / "bench.png")
    assert (tmp_path / "bench.png").stat().st_size > 0


def test_only_accepts_the_scenario_names_alone(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--only", "everything"])  # refused before any Spark session starts
    assert stop.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
