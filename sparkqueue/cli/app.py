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

from ..errors import InvalidParameterValue, QueueError
from . import render

SETTINGS_FILE = Path("conf") / "redrive.toml"  # the root comes from here last
ROOT_VARIABLE = "SPARKQUEUE_ROOT"

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
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]

F = TypeVar("F", bound=Callable[..., Any])


def resolve_root(root: str | None) -> str:
    """--root, then $SPARKQUEUE_ROOT, then the `root` of conf/redrive.toml in this folder."""
    if root:
        return root
    if os.environ.get(ROOT_VARIABLE):
        return os.environ[ROOT_VARIABLE]
    if SETTINGS_FILE.exists():
        from ..services.settings import RedriveSettings

        configured = RedriveSettings.load(SETTINGS_FILE).root
        if configured:
            return configured
    raise InvalidParameterValue(
        f"no queue root: pass --root, set {ROOT_VARIABLE}, or set root in {SETTINGS_FILE}"
    )


def open_broker(root: str | None) -> Any:
    """The broker on the resolved root, over a quiet local (or the active) Spark session."""
    from ..broker import Broker
    from ..session import spark_session

    where = resolve_root(root)
    return Broker(spark_session(), where)  # the JVM's warnings go to its log file, not here


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
