"""The `sparkqueue` command line: the typer app, the options every command takes, and the one place
that turns a command's `QueueError` into a clean line and an exit code.

Commands hold no queue logic: each one opens the broker, calls the public API and hands the
result to `render.show`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ..errors import QueueError, UnsupportedOperation
from ..where import Source, Where
from . import render

SETTINGS_FILE = Path("conf") / "redrive.toml"  # the root or catalog comes from here last
ROOT_VARIABLE = "SPARKQUEUE_ROOT"
CATALOG_VARIABLE = "SPARKQUEUE_CATALOG"
_VARIABLES = (ROOT_VARIABLE, CATALOG_VARIABLE)

app = typer.Typer(
    name="sparkqueue",
    help="Delta Lake queues with Amazon SQS semantics, from the shell.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

RootOption = Annotated[
    str | None,
    typer.Option(
        "--root",
        help=f"Folder or URI holding the queues (else ${ROOT_VARIABLE}, else {SETTINGS_FILE}).",
        show_default=False,
    ),
]
CatalogOption = Annotated[
    str | None,
    typer.Option(
        "--catalog",
        help=f"Catalog schema holding the queues instead, e.g. main.queues (else ${CATALOG_VARIABLE}).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]

F = TypeVar("F", bound=Callable[..., Any])


def resolve_where(root: str | None, catalog: str | None) -> Where:
    """--root or --catalog, then $SPARKQUEUE_ROOT or $SPARKQUEUE_CATALOG, then the `root` or
    `catalog` of conf/redrive.toml in this folder."""
    from ..services.settings import RedriveSettings

    settings = RedriveSettings.load(SETTINGS_FILE) if SETTINGS_FILE.exists() else RedriveSettings()
    return Where.first(
        Source("--root/--catalog", root, catalog),
        Source(f"${ROOT_VARIABLE}/${CATALOG_VARIABLE}", *map(os.environ.get, _VARIABLES)),
        Source(str(SETTINGS_FILE), settings.root, settings.catalog),
    )


def open_broker(root: str | None, catalog: str | None, *, spark: bool = False) -> Any:
    """The broker on the resolved root or catalog. A root on the local disk or object storage is
    served by the native engine with no JVM, unless the command needs Spark (`spark`: the redrive
    pass, moves, metrics); a catalog, or another remote root (dbfs:/, /Volumes/...), by a quiet
    local (or the active) Spark session."""
    where = resolve_where(root, catalog)
    if not spark and where.native():
        return where.broker(None)
    if where.native() and not where.local():
        raise UnsupportedOperation(
            "on object storage the command line writes through the native engine alone (Spark's"
            " commits would not take turns with other native writers there); this needs Spark:"
            " run it from a Spark job (Broker(spark, root)) while no native writer runs"
        )
    from ..session import spark_session

    return where.broker(spark_session())  # the JVM's warnings go to its log file, not here


def open_pass_broker(root: str | None, catalog: str | None) -> Any:
    """The broker for redrive passes: Spark's (whose pass also serves FIFO queues whose tables
    Spark numbers), except on object storage, whose native writers Spark's commits would not
    take turns with, and where pyspark is not installed: the native engine's there."""
    where = resolve_where(root, catalog)
    if where.native() and not where.local():
        return where.broker(None)
    try:
        return open_broker(root, catalog, spark=True)
    except ImportError:
        if not where.native():
            raise
        return where.broker(None)


def open_queue(root: str | None, catalog: str | None, name: str) -> Any:
    """One queue of the resolved root or catalog: natively where that serves it, through Spark
    for a FIFO queue whose table Spark numbers (by Delta row ids, which delta-rs cannot write)."""
    broker = open_broker(root, catalog)
    if broker.spark is None:  # the queue's table says which engine opens it
        record = broker.context.registry.get(name)
        if record is not None and broker.context.spark_only(record):
            return open_broker(root, catalog, spark=True).get_queue(name)
    return broker.get_queue(name)


def command(function: F) -> F:
    """Registers a command whose `QueueError`s end it with a clean message and a distinct code."""

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except QueueError as error:
            raise typer.Exit(
                render.report_error(error, as_json=kwargs.get("as_json", False))
            ) from None

    app.command(name=function.__name__.rstrip("_").replace("_", "-"))(run)
    return function
