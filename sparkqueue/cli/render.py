"""How the command line shows results: rich tables for people, one JSON document for programs.

Every command hands its result here as plain values (lists of row dicts, or one dict), so the two
forms never disagree and a command never formats anything itself.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import QueueDoesNotExist, QueueError, SchemaDoesNotExist, TransactionConflict

# Exit codes a script can branch on (2 stays click's own: a usage error).
EXIT_NOT_FOUND = 3
EXIT_BAD_INPUT = 4
EXIT_CONFLICT = 5
EXIT_PASS_FAILED = 6  # a redrive pass did every queue but one or more, which it names

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def plain(value: Any) -> Any:
    """A JSON-ready copy of a result: dataclasses as dicts, times as ISO 8601 strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def show(result: Any, *, as_json: bool, title: str | None = None) -> None:
    """Prints `result`: a list of rows as a table, a dict as a two-column table, text as is.

    Tables are for people at a terminal. Piped or redirected, output is for scripts and greps:
    one JSON object per line (a row, or the dict), every value whole, never wrapped or cut."""
    result = plain(result)
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    elif not out.is_terminal and isinstance(result, list | dict):
        records = result if isinstance(result, list) else [result]
        sys.stdout.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    elif isinstance(result, list):
        out.print(rows_table(result, title) if result else f"[dim]{title or 'nothing'}: none[/]")
    elif isinstance(result, dict):
        out.print(rows_table([{"name": k, "value": v} for k, v in result.items()], title))
    else:
        out.print(result)


def rows_table(rows: Sequence[dict[str, Any]], title: str | None = None) -> Table:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(cell(row.get(column)) for column in columns))
    return table


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


@contextmanager
def working(what: str, *, as_json: bool) -> Iterator[None]:
    """A spinner with the elapsed time on stderr while a long step runs (a send, a pass, a move),
    on a terminal only: one commit has no partial progress to count, but the wait shows."""
    if as_json or not err.is_terminal:
        yield
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        progress.add_task(what, total=None)
        yield


def exit_code(error: QueueError) -> int:
    if isinstance(error, QueueDoesNotExist | SchemaDoesNotExist):
        return EXIT_NOT_FOUND
    if isinstance(error, TransactionConflict):
        return EXIT_CONFLICT
    return EXIT_BAD_INPUT


def report_error(error: QueueError, *, as_json: bool) -> int:
    """One clean line (or a JSON object) saying what was wrong; the exit code for its kind."""
    if as_json:
        payload = {"error": {"code": error.code, "message": error.message}}
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        err.print(f"[bold red]error[/] {error.code}: {error.message}", highlight=False)
    return exit_code(error)
