"""The command line's output rules: JSON-ready values, exit codes per error kind, the spinner."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

from rich.console import Console

from sparkqueue.cli import render
from sparkqueue.errors import InvalidParameterValue, QueueDoesNotExist, TransactionConflict
from sparkqueue.model import QueueStats


def test_results_become_plain_json_values(capsys):
    stats = QueueStats(
        visible=1, in_flight=2, delayed=0, oldest_age_seconds=1.5, awaiting_dead_letter=0
    )
    render.show([stats, {"at": datetime(2026, 1, 2, tzinfo=UTC)}], as_json=True)
    assert json.loads(capsys.readouterr().out) == [
        {
            "visible": 1,
            "in_flight": 2,
            "delayed": 0,
            "oldest_age_seconds": 1.5,
            "awaiting_dead_letter": 0,
            "noisy_groups": 0,
            "quiet_visible": 0,
            "quiet_in_flight": 0,
            "quiet_delayed": 0,
            "quiet_oldest_age_seconds": 0.0,
        },
        {"at": "2026-01-02T00:00:00+00:00"},
    ]


def test_each_kind_of_error_has_its_own_exit_code(capsys):
    assert render.report_error(QueueDoesNotExist("no q"), as_json=True) == render.EXIT_NOT_FOUND
    assert json.loads(capsys.readouterr().out) == {
        "error": {"code": "QueueDoesNotExist", "message": "no q"}
    }
    assert render.report_error(InvalidParameterValue("bad"), as_json=False) == render.EXIT_BAD_INPUT
    assert render.report_error(TransactionConflict("busy"), as_json=False) == render.EXIT_CONFLICT
    assert len({render.EXIT_NOT_FOUND, render.EXIT_BAD_INPUT, render.EXIT_CONFLICT, 0, 1, 2}) == 6


def test_the_spinner_shows_on_a_terminal_only(monkeypatch):
    screen = io.StringIO()
    monkeypatch.setattr(render, "err", Console(file=screen, force_terminal=True, width=80))
    with render.working("sending 3 message(s)", as_json=False):
        pass
    assert "sending 3 message(s)" in screen.getvalue()
    screen.truncate(0)
    with render.working("quiet", as_json=True):
        pass
    assert "quiet" not in screen.getvalue()
