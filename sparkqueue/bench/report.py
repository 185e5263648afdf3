"""The benchmark's report: a table of figures against their bars (printed by `python -m
sparkqueue.bench`, one row per figure of the scenarios that ran; peers' rows beside ours)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from .checkpoints import SUMMARY
from .reckoning import gone_wrong

OPERATIONS = ("send", "receive", "delete")  # the endpoint scenario's calls, in cycle order
PEER = "(peer)"  # a peer's row: measured beside ours, no bar
DRY = {True: " (ran dry)", False: ""}
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
                f"{alone['per_s']:.1f} msg/s{DRY[alone['ran_dry']]}",
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
        rows += _fifo_rows(results)
    if "fair" in results:
        rows += _fair_rows(results["fair"])
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
                f"{load_['per_s']:,.0f} msg/s{DRY[load_['ran_dry']]}"
                f" ({load_['duplicates']} / {load_['lost']})",
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
        fronts = {"http": "SQS endpoint (boto3)", "direct": "same calls on Queue"}
        rows += _cycle_rows(fronts, endpoint, "(measured)")
    if "celery" in results:
        celery = results["celery"]
        rows.append(
            (
                f"Celery through the endpoint, 1 worker, {celery['tasks']} tasks",
                f"{celery['per_s']:.1f} tasks/s",
                ">= 5 tasks/s",
            )
        )
    rows += _worker_rows("worker loop", results.get("worker", {}), _worker_bar)
    if "history" in results:
        rows += _history_rows(results["history"])
    for every, figures in results.get("checkpoints", {}).items():
        for op in ("receive", "delete"):
            figure = " / ".join(f"{figures[f'{op}_{name}_ms']:,.0f}" for name in SUMMARY)
            what = f"checkpoint every {every} commits: {op} {' / '.join(SUMMARY)}"
            rows.append((what, f"{figure} ms", "(measured)"))
    if "day" in results:
        rows += _day_rows(results["day"])
    return rows


def _fifo_rows(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The FIFO consumers alone and beside a producer: throughput, what they keep, and every
    delivery's check (none twice, none out of its group's order)."""
    alone, beside = results["fifo_load"], results["fifo_with_producer"]
    twice = alone["duplicates"] + beside["duplicates"]
    unordered = alone["out_of_order"] + beside["out_of_order"]
    retries = f"{alone['conflict_retries']} / {beside['conflict_retries']} conflict retries"
    return [
        (
            "FIFO consumers, receive(10) + delete_batch (twice / out of order)",
            f"{alone['per_s']:.1f} msg/s ({twice} / {unordered})",
            ">= 50 msg/s (0 / 0)",
        ),
        (
            "FIFO consumers alone / beside a producer",
            f"{alone['per_s']:.1f} / {beside['per_s']:.1f} msg/s ({results['fifo_ratio']:.0%});"
            f" {retries}",
            "(measured)",
        ),
    ]


def _fair_rows(fair: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The quiet tenants' wait alone and beside a noisy one, with fair queues and without, and a
    single tenant's throughput beside the same load without groups."""

    def waits(run: dict[str, Any], kind: str) -> str:
        return f"{run[kind]['p50_s']:.2f} / {run[kind]['p99_s']:.2f} s"

    def load(run: dict[str, Any]) -> str:
        took, sent = run["taken_per_s"], run["quiet_sent_per_s"]
        return f"consumers took {took:.0f} msg/s, quiet tenants sent {sent:.0f} msg/s"

    def settled(alone: dict[str, Any], beside: dict[str, Any], ratio: float | None) -> str:
        if ratio is None:
            return "n/a (no message sent that late)"
        late = alone["quiet_settled"]["p99_s"], beside["quiet_settled"]["p99_s"]
        return f"{late[0]:.2f} / {late[1]:.2f} s ({ratio:.1f}x alone)"

    alone, on, off = fair["quiet_alone"], fair["noisy_fair"], fair["noisy_unfair"]
    return [
        ("fair: quiet tenants' wait p50 / p99, alone", waits(alone, "quiet"), "(measured)"),
        (
            "fair: quiet p50 / p99 beside a noisy tenant",
            f"{waits(on, 'quiet')} ({fair['quiet_p99_ratio_fair']:.1f}x alone; {load(on)})",
            "p99 <= 2x alone",
        ),
        (
            f"fair: quiet p99 alone / beside a noisy tenant, sent after {fair['settled_s']:.0f} s",
            f"{settled(alone, on, fair['quiet_settled_p99_ratio_fair'])}; through the endpoint "
            + settled(
                fair["endpoint_quiet_alone"],
                fair["endpoint_noisy_fair"],
                fair["endpoint_quiet_settled_p99_ratio_fair"],
            ),
            "(measured)",
        ),
        (
            "unfair: quiet p50 / p99 beside a noisy tenant",
            f"{waits(off, 'quiet')} ({fair['quiet_p99_ratio_unfair']:.1f}x alone)",
            "(measured)",
        ),
        (
            "fair / unfair: noisy tenant's p50 / p99",
            f"{waits(on, 'noisy')}; {waits(off, 'noisy')}",
            "(measured)",
        ),
        (
            "fair over the SQS endpoint: quiet p50 / p99 alone; beside a noisy tenant",
            f"{waits(fair['endpoint_quiet_alone'], 'quiet')};"
            f" {waits(fair['endpoint_noisy_fair'], 'quiet')}"
            f" ({fair['endpoint_quiet_p99_ratio_fair']:.1f}x alone; consumers take"
            f" {fair['endpoint_capacity_per_s']:.0f} msg/s through it from a backlog; beside the"
            f" noisy tenant {load(fair['endpoint_noisy_fair'])})",
            "p99 <= 2x alone",
        ),
        (
            "one tenant / no groups, receive(10) + delete_batch",
            f"{fair['single_tenant_per_s']:.1f} / {fair['ungrouped_per_s']:.1f} msg/s"
            f"{DRY[fair['single_tenant_ran_dry']]}",
            "not worse",
        ),
    ]


def _cycle_rows(
    fronts: dict[str, str], runs: dict[str, Any], bar: str
) -> list[tuple[str, str, str]]:
    """Send-receive-delete loops (the endpoint scenario's, and moto's among the peers), one row
    per run ("http_8": 8 clients through `fronts["http"]`): each call's p50 and msg/s."""
    rows = []
    for key, figures in runs.items():
        how, clients = key.split("_")
        calls = " / ".join(f"{figures.get(f'{op}_p50_ms', 0):.0f}" for op in OPERATIONS)
        rows.append(
            (
                f"{fronts[how]}, {clients} client(s): send / receive / delete p50",
                f"{calls} ms; {figures['messages_per_s']:.1f} msg/s",
                bar,
            )
        )
    return rows


def _worker_bar(run: dict[str, Any]) -> str:
    return WORKER_BARS.get(run["batch"], "-") if run["workers"] == 1 else "4 workers >= 1.5x"


def _worker_rows(
    what: str, cells: dict[str, Any], bar: Callable[[dict[str, Any]], str]
) -> list[tuple[str, str, str]]:
    """A worker-loop grid (ours, and PGMQ's among the peers), one row per cell; a cell that ran
    dry says so (its figure is a floor)."""
    return [
        (f"{what}, {label}", f"{run['per_s']:,.1f} msg/s{DRY[run['ran_dry']]}", bar(run))
        for label, run in cells.items()
    ]


def _day_rows(day: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Latency after a simulated day against a fresh queue's, and what the day left."""
    what = (
        f"after {day['hours']:g} h at {day['commits_per_second']:g} commits/s"
        f" ({day['tombstones']:,} tombstones, {day['log_entries']:,} log entries)"
    )
    return [
        (
            f"{op} p50 {what}",
            f"{day[f'fresh_{op}_p50_ms']:,.0f} -> {day[f'{op}_p50_ms']:,.0f} ms"
            f" ({day[f'{op}_ratio']:.2f}x)",
            "<= 1.2x",
        )
        for op in ("receive", "delete")
    ]


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
        rows.append(
            (
                f"chaos: {chaos['kills']} kills, {chaos['sent']} sent",
                f"{chaos['deleted']} deleted, {chaos['left']} left, {gone_wrong(chaos)} problems"
                f", {chaos.get('failed', 0)} steps raised",
                "0 lost / twice too soon",
            )
        )
    if "soak" in results:
        soak, report = results["soak"], results["soak"]["report"]
        measured = [window for window in soak["windows"] if "receive_p99_ms" in window]
        rows.append(
            (
                f"soak: {sum(soak['faults'].values())} faults, {report['sent']} sent",
                f"{report['deleted']} deleted, {report['left']} left, {gone_wrong(report)} problems"
                f", {report['failed']} steps raised",
                "0 lost / twice / dead undelivered",
            )
        )
        if measured:
            first, last = measured[0]["receive_p99_ms"], measured[-1]["receive_p99_ms"]
            window = "soak receive p99, first / last window"
            rows.append((window, f"{first:.0f} / {last:.0f} ms", "last <= 1.5x first"))
    if "console" in results:
        pages = " / ".join(f"{ms:.0f}" for ms in results["console"].values())
        rows.append((f"console p50: {' / '.join(results['console'])}", f"{pages} ms", "< 200 ms"))
    if "shared" in results:
        shared = results["shared"]
        store = shared["store"]
        receive = f"{shared['latency']['receive_p50_ms']:.0f} ms"
        rows.append((f"receive(1) p50, Spark-session broker on {store}", receive, "<= 300 ms"))
        kept = f"{shared['beside_spark']['per_s']:.1f} msg/s ({shared['kept']:.0%})"
        rows.append((f"4 consumers beside Spark's send_df on {store}", kept, ">= 50% of alone"))
    for cell in results.get("scaling", []):
        where = f"{cell['threads']} threads x {cell['processes']} processes"
        figure = f"{cell['per_s']:,.0f} msg/s, {cell['duplicates']} twice"
        figure += DRY[cell["ran_dry"]]
        rows.append((f"scaling: batch {cell['batch']}, {where}", figure, "0 twice"))
    for cell in results.get("drivers", []):
        figure = f"{cell['per_s']:,.0f} msg/s, {cell['conflict_retries']} retries"
        figure += f", {cell['duplicates']} twice{DRY[cell['ran_dry']]}"
        plural = "s" if cell["drivers"] > 1 else ""
        where = f"batch {cell['batch']}, {cell['drivers']} Spark driver{plural}"
        where += f", local[{cell['cores']}]"
        if cell["beside"]:
            where += f", {cell['beside']} native consumers beside"
            figure += f"; consumers {cell['beside_per_s']:,.1f} msg/s"
            figure += f", receive p99 {cell['beside_receive_p99_ms']:,.0f} ms"
        rows.append((f"receive_df + delete_df: {where}", figure, "0 twice"))
    if "streaming" in results:
        streamed = results["streaming"]
        for key, what in (("drain", "1 query"), ("two_queries", "2 queries")):
            cell = streamed[key]
            figure = f"{cell['per_s']:,.0f} msg/s, {cell['twice']} twice, {cell['left']} left"
            rows.append((f"AvailableNow drain into Delta, {what}", figure, ">= 50,000 msg/s"))
        cell = streamed["continuous"]
        figure = f"p50 {cell['p50_s']:.2f} s, p99 {cell['p99_s']:.2f} s; {cell['left']} left"
        rows.append((f"stream beside {cell['rate']:,} msg/s, 1 s trigger", figure, "p50 <= 3 s"))
        cell = streamed["kills"]
        figure = (
            f"{cell['lost']} lost, {cell['twice']} twice, {cell['left']} left; sink rows"
            f" {cell['rows_lost']} lost, {cell['rows_twice']} twice"
        )
        what = f"streaming driver SIGKILLed {cell['kills']} times, restarted"
        rows.append((what, figure, "0 lost, 0 twice"))
    if "redrive" in results:
        passes = results["redrive"]
        figure = f"spark {passes['redrive_s']:.1f} s | native {passes['native_redrive_s']:.1f} s"
        rows.append(("redrive pass", figure, "<= 10 s"))
    for name, phase in results.get("phases", {}).items():
        figure = f"{phase['p50_ms']:.1f} / {phase['p99_ms']:.1f} ms"
        rows.append((f"native phase p50 / p99: {name}", figure, "(measured)"))
    if "start" in results:
        started = results["start"]
        for what, key, bar in (
            ("a `sparkqueue` command, Python's start included", "command_s", "<= 2 s"),
            ("`sparkqueue serve --root` until it serves", "serve_s", "<= 3 s"),
        ):
            rows.append((f"{what} (median)", f"{statistics.median(started[key]):.2f} s", bar))
    for run in results.get("upkeep", []):
        figure = (
            f"{run['active_files']} / {run['data_files']}, {run['log_files']} /"
            f" {run['log_bytes'] / 1024:,.0f} KiB; {run['pass_s']:.1f} s"
        )
        figure += " (upkeep)" if run["upkeep"] else ""
        what = f"upkeep pass {run['pass']}: active / on-disk files, log files / size"
        rows.append((what, figure, "active flat"))
    if "peers" in results:
        rows += _peer_rows(results["peers"])
    return rows


def _peer_rows(peers: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The peers' rows, shaped as ours (the endpoint's loop, the worker loop's grid); a row
    saying why for a peer that is not there."""
    rows: list[tuple[str, str, str]] = []
    for peer, name in (("moto", "moto's SQS server"), ("pgmq", "PGMQ on PostgreSQL")):
        if "missing" in peers[peer]:
            rows.append((name, peers[peer]["missing"], PEER))
    moto = {key: run for key, run in peers["moto"].items() if key != "missing"}
    rows += _cycle_rows({"http": "moto's SQS server (boto3)"}, moto, PEER)
    pgmq = peers["pgmq"]
    if "worker" in pgmq:
        sent = f"{pgmq['send_per_s']:,.0f} msg/s ({pgmq['sent']:,} sent)"
        rows.append((f"PGMQ send_batch of {pgmq['send_batch']:,}", sent, PEER))
        rows += _worker_rows("PGMQ worker loop (read + delete)", pgmq["worker"], lambda run: PEER)
    return rows
