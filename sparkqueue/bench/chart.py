"""The benchmark's chart (`bench.png`): single-message latency over time, and each scenario's
throughput."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (over_time, per_scenario) = plt.subplots(1, 2, figsize=(12, 4.5))
    engines = results.get("engines", {})
    for engine, figures in engines.items():
        if "latency" in figures:
            for operation in ("receive", "delete"):
                label = f"{engine} {operation}"
                over_time.plot(figures["latency"][f"{operation}_ms"], label=label, linewidth=0.6)
    if any("latency" in figures for figures in engines.values()):
        over_time.legend()
    over_time.set(title="single-message latency", xlabel="operation", ylabel="ms", yscale="log")
    scenarios = {
        label: results["bulk"][key]
        for label, key in (("enqueue", "enqueue_per_s"), ("drain", "drain_per_s"))
        if "bulk" in results
    }
    for engine, figures in engines.items():
        for label, scenario in (
            ("consumers", "load_alone"),
            ("consumers+producer", "load_with_producer"),
            ("buffered", "buffered_load"),
            ("FIFO", "fifo_load"),
            ("FIFO+producer", "fifo_with_producer"),
        ):
            if scenario in figures:
                scenarios[f"{label} ({engine})"] = figures[scenario]["per_s"]
    per_scenario.bar(list(scenarios), list(scenarios.values()))
    per_scenario.tick_params(axis="x", labelrotation=45)
    per_scenario.set(title="throughput", ylabel="messages/s", yscale="log")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
