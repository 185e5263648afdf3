"""An S3 API for tests: moto's server, run as a process of its own. Nothing is mocked in the
test's process: delta-rs and boto3 speak HTTP to it as they would to Amazon S3. It answers a
conditional put (`If-None-Match: *`) of a name that exists with 412, as S3 does (a test checks
that), but its threaded server checks and writes in two steps: two puts racing within one
request's time could both land, so its tests show the engine's behaviour against an S3 API, not
the store's exclusion, which is Amazon S3's (and MinIO's) to give."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.processes import stop


@dataclass(frozen=True)
class S3Server:
    url: str

    @property
    def options(self) -> dict[str, str]:
        """Credentials and endpoint as delta-rs takes them: storage options, or the same names
        as environment variables (for child processes)."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )

    def new_bucket(self) -> str:
        """A fresh, empty bucket; its s3:// URI."""
        name = f"sparkqueue-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return f"s3://{name}"


@contextmanager
def s3_server() -> Iterator[S3Server]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto's S3 server did not start") from None
                time.sleep(0.1)
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        stop(process, timeout=10)
