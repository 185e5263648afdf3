"""Processes the tests start (servers, jobs): how they are stopped."""

from __future__ import annotations

import os
import subprocess
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
