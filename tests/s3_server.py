"""An S3 API for tests: moto's server, run as a process of its own (tests/moto_s3.py). Nothing is
mocked in the test's process: delta-rs, Spark's S3A and boto3 speak HTTP to it as they would to
Amazon S3. It answers a conditional put (`If-None-Match: *`) of a name that exists with 412, as
S3 does, and runs mutating requests one at a time so that the check and the write are one step,
as on S3. It journals every put of a Delta log version, so a test can read which versions were
written, how often, and whether each put was conditional."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.processes import free_port, stop, wait_for_port


@dataclass(frozen=True)
class S3Server:
    url: str
    journal: Path

    def lose_answers(self, count: int, agent: str) -> None:
        """Has the server answer the next `count` stored log-version puts of clients whose
        User-Agent holds `agent` with 500, as a broken connection would (tests/moto_s3.py)."""
        Path(f"{self.journal}.lose").write_text(f"{count} {agent}")

    def log_puts(self, root: str | None = None) -> list[dict[str, Any]]:
        """Every answered put of a Delta log version so far (in `root`'s bucket, when given: the
        server, and so its journal, serves the whole session): key, status, conditional."""
        puts = [json.loads(line) for line in self.journal.read_text().splitlines() if line]
        if root is None:
            return puts
        bucket = root.removeprefix("s3://").split("/", 1)[0]
        return [put for put in puts if put["key"].startswith(f"/{bucket}/")]

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
    port = free_port()
    folder = tempfile.TemporaryDirectory(prefix="sparkqueue-s3-")
    journal = Path(folder.name) / "log-puts.jsonl"
    journal.touch()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.moto_s3", str(port), str(journal)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=Path(__file__).parent.parent,
    )
    try:
        wait_for_port(process, port, "moto's S3 server")
        yield S3Server(f"http://127.0.0.1:{port}", journal)
    finally:
        stop(process, timeout=10)
        folder.cleanup()
