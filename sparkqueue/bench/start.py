"""The start scenario (`--only start`): how long the command line and the SQS endpoint take to
answer on a local root, from the shell, Python's start included (no JVM).

    python -m sparkqueue.bench --only start --start-runs 5

Times `--start-runs` runs of `sparkqueue stats Q --root R --json`, and as many starts of
`sparkqueue serve --root R --port 0` until it prints that it serves: what a script or a service
manager waits for before its first answer."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .timing import first_line, timed

QUEUE = "timed"
SERVING = "serving SQS"  # what `serve` prints once it answers
SERVE_TIMEOUT_SECONDS = 120.0  # a start that says nothing for this long is reported as failed


def command() -> str:
    """The `sparkqueue` command installed beside this Python, as a user runs it."""
    return str(Path(sys.executable).with_name("sparkqueue"))


def start_times(root: str, runs: int) -> dict[str, Any]:
    """The seconds of each `stats` run and of each `serve` start until it serves."""
    sparkqueue = command()
    subprocess.run(
        [sparkqueue, "create", QUEUE, "--root", root, "--json"], check=True, capture_output=True
    )
    stats = [sparkqueue, "stats", QUEUE, "--root", root, "--json"]
    command_s = [
        timed(lambda: subprocess.run(stats, check=True, capture_output=True))[0]
        for _ in range(runs)
    ]
    return {"command_s": command_s, "serve_s": [_serve(sparkqueue, root) for _ in range(runs)]}


def _serve(sparkqueue: str, root: str) -> float:
    """One start of `serve` until it says it serves; then it is stopped."""
    serve = [sparkqueue, "serve", "--root", root, "--port", "0", "--redrive-every", "0"]
    started = time.perf_counter()
    server = subprocess.Popen(serve, stdout=subprocess.PIPE, text=True)
    try:
        line = str(first_line(server, SERVE_TIMEOUT_SECONDS))
        took = time.perf_counter() - started
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # never left running behind the benchmark
            server.kill()
            server.wait()
    if SERVING not in line:
        raise RuntimeError(f"`sparkqueue serve` did not start: {line!r}")
    return took
