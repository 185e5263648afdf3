"""Spark Connect: the library's source holds no JVM handle, and it works from a client-only process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parents[2]


def test_the_library_needs_no_jvm_handle():
    """What Spark Connect has no room for: SparkContext, RDDs, py4j."""
    forbidden = re.compile(r"\b(sparkContext|SparkContext|_jvm|_jsc|_jdf|py4j)\b|\.rdd\b")
    offenders = [
        f"{path.name}:{number}"
        for path in sorted((REPO / "sparkqueue").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if forbidden.search(line)
    ]
    assert offenders == []


def test_queue_behaviours_and_the_worker_loop_over_spark_connect():
    """Runs tests/integration/connect_checks.py (a Connect server and client-side checks) in its own process."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/integration/connect_checks.py",
        ],
        capture_output=True,
        text=True,
        timeout=1500,
        cwd=REPO,
    )
    assert run.returncode == 0, run.stdout[-10_000:] + run.stderr[-3_000:]
    assert "4 passed" in run.stdout
