"""The benchmark's start scenario, once: the `sparkqueue` command and `serve` from the shell."""

from __future__ import annotations

from sparkqueue.bench.report import table
from sparkqueue.bench.start import start_times


def test_the_command_and_the_server_are_timed_from_the_shell(tmp_path):
    started = start_times(str(tmp_path / "root"), runs=1)
    assert len(started["command_s"]) == len(started["serve_s"]) == 1
    assert all(0 < seconds < 60 for seconds in started["command_s"] + started["serve_s"])
    rows = table({"start": started})
    assert [bar for _, _, bar in rows] == ["<= 2 s", "<= 3 s"]
    assert all(figure.endswith(" s") for _, figure, _ in rows)
