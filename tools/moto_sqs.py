"""Runs moto's own SQS test suite in server mode against `sparkqueue serve`, and prints how many
of its tests pass: the check of the endpoint's wire behaviour and words against what moto's
authors recorded from SQS.

    .venv/bin/python tools/moto_sqs.py

It takes moto's `tests/test_sqs/test_sqs.py` (and the two small modules it imports) from the
source distribution of the moto installed here (PyPI, through pip), serves a fresh local root
on port 5000 (moto's server-mode tests build their expected URLs with that port), and runs the suite with moto's `TEST_SERVER_MODE`.
Between tests every queue is deleted, as moto's server resets itself. Needs the dev extra
(boto3, moto, freezegun) and PyPI; it is not part of the test run.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

FILES = ("tests/__init__.py", "tests/test_sqs/__init__.py", "tests/test_sqs/test_sqs.py")
PORT = 5000
ACCOUNT = "123456789012"  # moto's default account, which its tests expect
CONFTEST = f'''
import pathlib

import boto3
import pytest


@pytest.fixture
def account_id():
    """The endpoint's account (sparkqueue serve --account): it serves no STS."""
    return "{ACCOUNT}"


@pytest.fixture(autouse=True)
def fresh_endpoint():
    """moto's server resets itself between tests: here every queue of every region is deleted
    (another region than the home one keeps its queues under the root's regions/ folder)."""
    yield
    others = pathlib.Path("{{root}}", "regions")
    regions = ["us-east-1", *(p.name for p in others.iterdir())] if others.exists() else ["us-east-1"]
    for region in regions:
        client = boto3.client("sqs", region_name=region, endpoint_url="http://localhost:{PORT}")
        for url in client.list_queues(MaxResults=1000).get("QueueUrls", []):
            client.delete_queue(QueueUrl=url)
'''


def fetch(folder: Path) -> None:
    """moto's test files from its source distribution (its wheel has no tests)."""
    release = f"moto=={version('moto')}"
    download = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary"]
    subprocess.run([*download, ":all:", "-d", str(folder), release], check=True)
    [archive] = folder.glob("moto-*.tar.gz")
    with tarfile.open(archive) as sources:
        top = sources.getnames()[0].split("/")[0]
        for name in FILES:
            member = sources.extractfile(f"{top}/{name}")
            assert member is not None, name
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(member.read())
    (folder / "tests" / "conftest.py").write_text(CONFTEST.replace("{root}", str(folder / "root")))


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="moto-sqs-") as work:
        folder = Path(work)
        fetch(folder)
        command = Path(sys.executable).with_name("sparkqueue")  # the installed command line
        serve = [str(command), "serve", "--root", str(folder / "root")]
        serve += ["--port", str(PORT), "--account", ACCOUNT, "--redrive-every", "0"]
        log = folder / "serve.log"
        with log.open("wb") as output:
            server = subprocess.Popen(serve, stdout=output, stderr=subprocess.STDOUT)
        try:
            _wait_until_serving(server, log)
            env = {
                **os.environ,
                "TEST_SERVER_MODE": "true",
                "TEST_SERVER_MODE_ENDPOINT": f"http://localhost:{PORT}",
                "AWS_ACCESS_KEY_ID": "test",
                "AWS_SECRET_ACCESS_KEY": "test",
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(folder), os.environ.get("PYTHONPATH")])
                ),
            }
            pytest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c", os.devnull]
            pytest += ["-q", "-n", "0", "-rf", "--timeout", "120", "tests/test_sqs/test_sqs.py"]
            return subprocess.run(pytest, cwd=folder, env=env).returncode
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def _wait_until_serving(server: subprocess.Popen, log: Path, seconds: float = 60) -> None:
    """Until the endpoint takes connections on PORT; its output when it stopped instead (the
    port taken, say)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"sparkqueue serve stopped:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"sparkqueue serve did not listen on port {PORT} within {seconds} s")


if __name__ == "__main__":
    sys.exit(main())
