"""Processes the tests start (servers, jobs): how they are started on a free port and stopped."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def stop(process: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM, then SIGKILL if it has not ended within `timeout` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run_here(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """`command` in the repository with it on the path, its output captured; it must succeed."""
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def free_port() -> int:
    """A port free on the loopback interface now (for a server a test is about to start)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(process: subprocess.Popen, port: int, what: str, timeout: float = 60) -> None:
    """Waits until `process` listens on `port`; RuntimeError naming `what` if it dies or is late."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(0.1)
