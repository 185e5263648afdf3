"""Spark Connect: the library's source holds no JVM handle, and it works from a client-only process.

The checks run in a pytest process of their own (`connect_checks.py`: Spark refuses a Connect
session beside this run's classic one), which tests/conftest.py starts as soon as collection ends,
so its server's start-up and its checks overlap the in-process tests.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).parents[2]
CHECKS = Path(__file__).with_name("connect_checks.py")
CONNECT_TEST = "test_queue_behaviours_and_the_worker_loop_over_spark_connect"


class ConnectRun:
    """The Connect checks' pytest process, with its output in a temporary file."""

    def __init__(self) -> None:
        self.output = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed by stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "tests/integration/connect_checks.py"],
            stdout=self.output,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=REPO,
        )  # fmt: skip

    def result(self, timeout: float) -> tuple[int, str]:
        code = self.process.wait(timeout=timeout)
        self.output.seek(0)
        return code, self.output.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.output.close()


def test_the_library_needs_no_jvm_handle():
    """What Spark Connect has no room for: SparkContext, RDDs, py4j and other JVM handles. Only
    store/classic.py holds any, and only dml.py and spark_s3.py (on classic sessions) call it."""
    forbidden = re.compile(r"\b(sparkContext|SparkContext|_jvm|_jsc|_jdf|_jdt|_jc|py4j)\b|\.rdd\b")
    classic = REPO / "sparkqueue" / "store" / "classic.py"
    offenders = [
        f"{path.name}:{number}"
        for path in sorted((REPO / "sparkqueue").rglob("*.py"))
        if path != classic
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if forbidden.search(line)
    ]
    assert offenders == []
    assert forbidden.search(classic.read_text())  # the exemption is still needed
    importers = [
        path.name
        for path in sorted((REPO / "sparkqueue").rglob("*.py"))
        if re.search(r"from \.classic import|store\.classic import", path.read_text())
    ]
    assert importers == ["dml.py", "spark_s3.py"]


def test_queue_behaviours_and_the_worker_loop_over_spark_connect(connect_run: ConnectRun):
    code, output = connect_run.result(timeout=1500)
    assert code == 0, output[-13_000:]
    checks = re.findall(r"^def test_", CHECKS.read_text(), flags=re.MULTILINE)
    assert f"{len(checks)} passed" in output  # every check ran; none was skipped
