"""The benchmark's report: a table of figures against their bars, and a chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

OPERATIONS = ("send", "receive", "delete")  # the endpoint scenario's calls, in cycle order
# The worker loop's bars for one worker, by batch size (about one commit and one read per batch).
WORKER_BARS = {
    10: ">= 7 msg/s",
    100: ">= 70 msg/s",
    1_000: ">= 600 msg/s",
    10_000: ">= 4,000 msg/s",
}


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(what, figure, bar) rows for docs/performance.md and the console, for the scenarios that ran."""
    rows: list[tuple[str, str, str]] = []
    if "bulk" in results:
        bulk_ = results["bulk"]
        rows += [
            ("enqueue (send_df)", f"{bulk_['enqueue_per_s']:,.0f} msg/s", ">= 250,000 msg/s"),
            (
                "drain (receive_df + delete_df)",
                f"{bulk_['drain_per_s']:,.0f} msg/s",
                ">= 100,000 msg/s",
            ),
        ]
    if "latency" in results:
        latency_ = results["latency"]
        rows += [
            (
                "receive(1) p50 / p99",
                f"{latency_['receive_p50_ms']:.0f} / {latency_['receive_p99_ms']:.0f} ms",
                "<= 300 / 1,000 ms",
            ),
            (
                "delete p50 / p99",
                f"{latency_['delete_p50_ms']:.0f} / {latency_['delete_p99_ms']:.0f} ms",
                "<= 300 / 1,000 ms",
            ),
            ("receive p50 drift (last / first)", f"{latency_['drift']:.2f}x", "<= 1.3x"),
        ]
    if "load_alone" in results:
        alone, loaded = results["load_alone"], results["load_with_producer"]
        rows += [
            (
                "consumers alone / with producer",
                f"{alone['per_s']:.1f} / {loaded['per_s']:.1f} msg/s ({results['load_ratio']:.0%})",
                ">= 70%",
            ),
            (
                "duplicates / losses under load",
                f"{alone['duplicates'] + loaded['duplicates']} / {alone['lost'] + loaded['lost']}",
                "0 / 0",
            ),
        ]
    if "buffered_load" in results:
        latency_, load_ = results["buffered_latency"], results["buffered_load"]
        rows += [
            (
                "buffered receive(1) p50 / p99",
                f"{latency_['receive_p50_ms']:.1f} / {latency_['receive_p99_ms']:.0f} ms",
                "p50 <= 10 ms",
            ),
            (
                "buffered consumers (duplicates / losses)",
                f"{load_['per_s']:,.0f} msg/s ({load_['duplicates']} / {load_['lost']})",
                ">= 500 msg/s (0 / 0)",
            ),
        ]
    if "endpoint" in results:
        endpoint = dict(results["endpoint"])
        rows.append(
            (
                "SQS endpoint GetQueueUrl p50 (no table)",
                f"{endpoint.pop('get_queue_url_p50_ms'):.1f} ms",
                "(measured)",
            )
        )
        for key, figures in endpoint.items():
            how, clients = key.split("_")
            front = "SQS endpoint (boto3)" if how == "http" else "same calls on Queue"
            calls = " / ".join(f"{figures.get(f'{op}_p50_ms', 0):.0f}" for op in OPERATIONS)
            rows.append(
                (
                    f"{front}, {clients} client(s): send / receive / delete p50",
                    f"{calls} ms; {figures['messages_per_s']:.1f} msg/s",
                    "(measured)",
                )
            )
    if "chaos" in results:
        chaos = results["chaos"]
        problems = len(chaos["lost"]) + len(chaos["unsent"]) + len(chaos["too_soon"])
        rows.append(
            (
                f"chaos: {chaos['kills']} kills, {chaos['sent']} sent",
                f"{chaos['deleted']} deleted, {chaos['left']} left, {problems} problems",
                "0 lost / twice too soon",
            )
        )
    if "redrive" in results:
        rows.append(("redrive pass", f"{results['redrive']['redrive_s']:.1f} s", "<= 10 s"))
    for label, run in results.get("worker", {}).items():
        bar = WORKER_BARS.get(run["batch"], "-") if run["workers"] == 1 else "4 workers >= 1 worker"
        rows.append((f"worker loop, {label}", f"{run['per_s']:,.1f} msg/s", bar))
    return rows


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (over_time, per_scenario) = plt.subplots(1, 2, figsize=(12, 4.5))
    if "latency" in results:
        over_time.plot(results["latency"]["receive_ms"], label="receive(1)", linewidth=0.6)
        over_time.plot(results["latency"]["delete_ms"], label="delete", linewidth=0.6)
        over_time.legend()
    over_time.set(title="single-message latency", xlabel="operation", ylabel="ms")
    figures = {
        "enqueue": ("bulk", "enqueue_per_s"),
        "drain": ("bulk", "drain_per_s"),
        "consumers": ("load_alone", "per_s"),
        "consumers+producer": ("load_with_producer", "per_s"),
        "buffered consumers": ("buffered_load", "per_s"),
    }
    scenarios = {
        label: results[scenario][key]
        for label, (scenario, key) in figures.items()
        if scenario in results
    }
    per_scenario.bar(list(scenarios), list(scenarios.values()))
    per_scenario.set(title="throughput", ylabel="messages/s", yscale="log")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
