"""The operator's commands: redrive passes, dead letters, the job's metrics, and the benchmark."""

from __future__ import annotations

import dataclasses
import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import InvalidParameterValue
from . import render
from .app import (
    SETTINGS_FILE,
    CatalogOption,
    JsonOption,
    RootOption,
    app,
    command,
    open_broker,
    open_pass_broker,
    open_queue,
)
from .commands import NameArgument, peeked

METRIC_COLUMNS = [
    "queue",
    "pass_at",
    "visible",
    "in_flight",
    "moved_to_dead_letter",
    "released",
    "duration_seconds",
]


@command
def redrive(
    every: Annotated[
        int | None, typer.Option("--every", help="A pass every this many seconds until Ctrl-C.")
    ] = None,
    queue: Annotated[list[str] | None, typer.Option(help="Only this queue (repeatable).")] = None,
    root: RootOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """One pass of the redrive job (releases, dead-letter moves, retention, upkeep), or --every.

    On Spark where it is installed (that pass also serves FIFO queues whose tables Spark numbers);
    through the native engine on object storage, where Spark would not take turns with native
    writers, or without pyspark."""
    from ..services.redrive import run_schedule
    from ..services.settings import RedriveSettings

    broker = open_pass_broker(root, catalog)
    settings = RedriveSettings.load(SETTINGS_FILE) if SETTINGS_FILE.exists() else RedriveSettings()
    if every is None:
        with render.working("running a redrive pass", as_json=as_json):
            report = broker.redrive(queue, settings=settings)
        rows = [dataclasses.asdict(result) for result in report.queues.values()]
        rows += [{"queue": name, "failed": error} for name, error in report.failed.items()]
        render.show(rows, as_json=as_json, title="redrive pass")
        if report.failed:  # the others were done; a script still learns that one was not
            raise typer.Exit(render.EXIT_PASS_FAILED)
        return
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    settings = dataclasses.replace(settings, every_seconds=every)
    run_schedule(broker.context, settings, queues=queue, stop=stop)


@command
def dead_letters(
    name: NameArgument,
    n: Annotated[int, typer.Option("-n", help="Show at most this many.")] = 10,
    move_back: Annotated[
        bool, typer.Option("--move-back", help="Move them back to their source queues.")
    ] = False,
    root: RootOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """The messages in a dead-letter queue, or --move-back to where they came from."""
    queue = open_queue(root, catalog, name)
    if move_back:
        with render.working(f"moving the messages of {name} back", as_json=as_json):
            moved = queue.start_message_move()
        render.show({"moved": moved}, as_json=as_json)
        return
    render.show(peeked(queue, n), as_json=as_json, title=f"dead letters in {name}")


@command
def history(
    name: NameArgument,
    message_id: Annotated[str, typer.Argument(help="The message's id.", show_default=False)],
    root: RootOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """A message's whole life, oldest first, read from the queues' Delta logs.

    Sent, each receive, visibility changes, moves to and from its dead-letter queue, its
    deletion or expiry."""
    events = open_broker(root, catalog).history(name, message_id)
    rows = [{**dataclasses.asdict(event), "detail": render.plain(event.detail)} for event in events]
    render.show(rows, as_json=as_json, title=f"history of {message_id}")


@command
def metrics(
    queue: Annotated[str | None, typer.Option(help="Only this queue.")] = None,
    last: Annotated[int, typer.Option("--last", help="The newest this many passes.")] = 20,
    png: Annotated[
        Path | None, typer.Option("--png", help="Chart queue depth into this file.")
    ] = None,
    root: RootOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """The redrive job's metrics, one row per queue per pass, as a table or a depth chart."""
    from pyspark.sql import functions as F

    frame = open_broker(root, catalog, spark=True).redrive_metrics()
    if queue is not None:
        frame = frame.where(F.col("queue") == F.lit(queue))
    passes = frame.orderBy(F.col("pass_at").desc()).limit(last).collect()
    rows = [row.asDict() for row in reversed(passes)]
    if png is not None:
        depth_chart(rows, png)
    shown = [{key: row[key] for key in METRIC_COLUMNS} for row in rows]
    render.show(shown, as_json=as_json, title="redrive metrics")


def depth_chart(rows: list[dict[str, Any]], path: Path) -> None:
    """Visible and in-flight messages per queue over the passes, as a PNG."""
    if not rows:
        raise InvalidParameterValue("no redrive metrics yet: run `sparkqueue redrive` first")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 4))
    for name in sorted({row["queue"] for row in rows}):
        mine = [row for row in rows if row["queue"] == name]
        times = [row["pass_at"] for row in mine]
        axes.plot(times, [row["visible"] for row in mine], label=f"{name} visible")
        axes.plot(times, [row["in_flight"] for row in mine], "--", label=f"{name} in flight")
    axes.set(title="queue depth per redrive pass", ylabel="messages")
    axes.legend()
    figure.autofmt_xdate()
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def bench(context: typer.Context) -> None:
    """The benchmark (`python -m sparkqueue.bench`); its options pass through (try --help)."""
    from ..bench.cli import main as run_bench

    run_bench(context.args)
