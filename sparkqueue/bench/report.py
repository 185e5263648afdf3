"""The benchmark's report: a table of figures against their bars, and a chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

OPERATIONS = ("send", "receive", "delete")  # the endpoint scenario's calls, in cycle order
# The worker loop's bars for one worker, by batch size (the native engine's).
WORKER_BARS = {
    10: ">= 40 msg/s",
    100: ">= 400 msg/s",
    1_000: ">= 2,500 msg/s",
    10_000: ">= 10,000 msg/s",
}


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(what, figure, bar) rows for docs/performance.md and the console, for the scenarios that
    ran; a per-message scenario's figures for each engine side by side ("native X | spark Y")."""
    rows = _bulk_rows(results)
    merged: dict[str, tuple[list[str], str]] = {}
    for engine, figures in results.get("engines", {}).items():
        for what, figure, bar in _per_message_rows(figures):
            merged.setdefault(what, ([], bar))[0].append(f"{engine} {figure}")
    rows += [(what, " | ".join(figures), bar) for what, (figures, bar) in merged.items()]
    return rows + _job_rows(results)


def _bulk_rows(results: dict[str, Any]) -> list[tuple[str, str, str]]:
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
    return rows


def _per_message_rows(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    if "latency" in results:
        latency_ = results["latency"]
        rows += [
            (
                "receive(1) p50 / p99",
                f"{latency_['receive_p50_ms']:.0f} / {latency_['receive_p99_ms']:.0f} ms",
                "<= 150 / 400 ms",
            ),
            (
                "delete p50 / p99",
                f"{latency_['delete_p50_ms']:.0f} / {latency_['delete_p99_ms']:.0f} ms",
                "<= 60 / 400 ms",
            ),
            ("receive p50 drift (last / first)", f"{latency_['drift']:.2f}x", "<= 1.3x"),
        ]
    if "load_alone" in results:
        alone, loaded = results["load_alone"], results["load_with_producer"]
        rows += [
            (
                "4 consumers, receive(10) + delete_batch",
                f"{alone['per_s']:.1f} msg/s",
                ">= 250 msg/s",
            ),
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
    if "fifo_load" in results:
        fifo = results["fifo_load"]
        rows.append(
            (
                "FIFO, 2 consumers, receive(10) + delete_batch (twice / out of order)",
                f"{fifo['per_s']:.1f} msg/s ({fifo['duplicates']} / {fifo['out_of_order']})",
                ">= 50 msg/s (0 / 0)",
            )
        )
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
                ">= 2,000 msg/s (0 / 0)",
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
    if "celery" in results:
        celery = results["celery"]
        rows.append(
            (
                f"Celery through the endpoint, 1 worker, {celery['tasks']} tasks",
                f"{celery['per_s']:.1f} tasks/s",
                ">= 5 tasks/s",
            )
        )
    for label, run in results.get("worker", {}).items():
        bar = WORKER_BARS.get(run["batch"], "-") if run["workers"] == 1 else "4 workers >= 1.5x"
        rows.append((f"worker loop, {label}", f"{run['per_s']:,.1f} msg/s", bar))
    if "history" in results:
        rows += _history_rows(results["history"])
    return rows


def _history_rows(history: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The change data feed's price per operation (the history design not taken) and a read."""
    rows = []
    for op in ("receive", "delete"):
        plain, cdf = history[f"plain_{op}_p50_ms"], history[f"cdf_{op}_p50_ms"]
        figure = f"{plain:.0f} / {cdf:.0f} ms ({cdf / plain - 1:+.0%})"
        rows.append((f"{op} p50, plain table / with CDF", figure, "history adds 0"))
    figure = f"{history['history_p50_ms']:.0f} / {history['history_max_ms']:.0f} ms"
    rows.append((f"history p50 / max, {history['versions']} versions", figure, "(measured)"))
    return rows


def _job_rows(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
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
    if "console" in results:
        pages = " / ".join(f"{ms:.0f}" for ms in results["console"].values())
        rows.append((f"console p50: {' / '.join(results['console'])}", f"{pages} ms", "< 200 ms"))
    if "shared" in results:
        shared = results["shared"]
        receive = f"{shared['latency']['receive_p50_ms']:.0f} ms"
        rows.append(("receive(1) p50, Spark-session broker on S3", receive, "<= 300 ms"))
        kept = f"{shared['beside_spark']['per_s']:.1f} msg/s ({shared['kept']:.0%})"
        rows.append(("4 consumers beside Spark's send_df on S3", kept, ">= 50% of alone"))
    for cell in results.get("scaling", []):
        where = f"{cell['threads']} threads x {cell['processes']} processes"
        figure = f"{cell['per_s']:,.0f} msg/s, {cell['duplicates']} twice"
        figure += " (ran dry)" if cell["ran_dry"] else ""
        rows.append((f"scaling: batch {cell['batch']}, {where}", figure, "0 twice"))
    if "redrive" in results:
        passes = results["redrive"]
        figure = f"spark {passes['redrive_s']:.1f} s | native {passes['native_redrive_s']:.1f} s"
        rows.append(("redrive pass", figure, "<= 10 s"))
    return rows


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
        ):
            if scenario in figures:
                scenarios[f"{label} ({engine})"] = figures[scenario]["per_s"]
    per_scenario.bar(list(scenarios), list(scenarios.values()))
    per_scenario.tick_params(axis="x", labelrotation=45)
    per_scenario.set(title="throughput", ylabel="messages/s", yscale="log")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
