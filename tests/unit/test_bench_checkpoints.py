"""The benchmark's checkpoint-cadence scenario, tiny, on the native engine: one queue per
interval, the interval set on each table, every round timed on every queue."""

from __future__ import annotations

from deltalake import DeltaTable

from sparkqueue import Broker
from sparkqueue.bench.checkpoints import checkpoints
from sparkqueue.bench.report import table


def test_each_interval_gets_its_queue_and_its_figures(tmp_path):
    broker = Broker(None, str(tmp_path / "root"))
    figures = checkpoints(broker, rounds=3, intervals=[2, 5])
    assert list(figures) == ["2", "5"]
    for interval, ops in figures.items():
        location = broker.context.record(f"checkpoint-every-{interval}").location
        settings = DeltaTable(location.removeprefix("file:")).metadata().configuration
        assert settings["delta.checkpointInterval"] == interval
        assert all(value > 0 for value in ops.values())
        assert ops["receive_p50_ms"] <= ops["receive_p99_ms"]
    rows = table({"engines": {"native": {"checkpoints": figures}}})
    assert rows[0][0] == "checkpoint every 2 commits: receive p50 / mean / p99"
    assert rows[0][1].startswith("native ") and rows[0][1].endswith(" ms")
    assert len(rows) == 4
