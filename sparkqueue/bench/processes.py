"""Running a benchmark cell's OS processes together (the scaling and drivers scenarios): each
child opens its broker and says "ready"; once all have, a file tells them to start their window
at once; each then prints one JSON report.

The children start before the window on purpose: a Spark driver's JVM takes many seconds to
start, which must not count against its throughput, nor give one process the queue to itself."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .timing import first_line

START_TIMEOUT_SECONDS = 180.0


def together(
    command: Sequence[str],
    count: int,
    seconds: float,
    *,
    during: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Runs `count` processes of `command` (each given the go file's path as its last argument)
    through a window of `seconds`, and `during` here as it starts; their reports, or an error
    when one fails to start or fails."""
    with tempfile.TemporaryDirectory(prefix="sparkqueue-processes-") as folder:
        go = Path(folder, "go")
        children = [
            subprocess.Popen([*command, str(go)], stdout=subprocess.PIPE, env=os.environ.copy())
            for _ in range(count)
        ]
        try:
            for child in children:  # each says so once its broker is open
                if first_line(child, START_TIMEOUT_SECONDS).strip() != b"ready":
                    raise RuntimeError(f"a process of {command[2]} did not start")
            go.touch()
            if during is not None:
                during()
            reports = []
            for child in children:
                out, _ = child.communicate(timeout=seconds + START_TIMEOUT_SECONDS)
                if child.returncode != 0:
                    raise RuntimeError(f"a process of {command[2]} failed with {child.returncode}")
                reports.append(json.loads(out))
            return reports
        finally:
            for child in children:  # none left waiting for a window that will not come
                if child.poll() is None:
                    child.kill()
                    child.wait()


def wait_for_go(go: Path) -> None:
    """A child's side: say it is ready, then wait until every process of its cell is."""
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.005)
