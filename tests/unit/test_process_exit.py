"""Processes that end while sparkqueue's threads are at work (no JVM): on Ctrl-C, or at the end of
a program that never closed what it opened. Each ends as it should (never SIGSEGV: CPython before
3.14 ends a daemon thread still inside delta-rs with pthread_exit, which Rust frames cannot
unwind) and after the work under way, so that nothing it was told of is lost."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from deltalake import DeltaTable

from sparkqueue import Broker
from sparkqueue.limits import MAX_VISIBILITY_SECONDS
from sparkqueue.testing import FakeClock

REPO = Path(__file__).resolve().parents[2]


def run_script(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_ctrl_c_on_a_sending_process_ends_it_cleanly_and_loses_no_send(tmp_path):
    """A process sending in a loop on its main thread, interrupted at four moments: each ends
    on the interrupt (before the fix, 14 in 16 such processes died with SIGSEGV: a daemon thread
    inside delta-rs as the interpreter finalized). Every send it was told of is in the queue,
    and the interrupted one is there whole or not at all."""
    broker = Broker(None, str(tmp_path / "root"))
    broker.create_queue("sends")
    script = (
        "import json, os, signal, sys, threading\n"
        "from sparkqueue import Broker\n"
        "queue = Broker(None, sys.argv[1]).get_queue('sends')\n"
        # Python's own handler, though the parent ignored SIGINT (as a shell's background job does)
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "threading.Timer(float(sys.argv[2]), os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        "while True:\n"
        "    print(json.dumps(queue.send_batch(['x' * 1000] * 10)), flush=True)\n"
    )
    told: list[str] = []
    for after in ("0.6", "0.9", "1.2", "1.5"):
        done = run_script(script, broker.root, after)
        # Ended by the interrupt: Python's exit re-raises SIGINT, or exits with 1 when code ran
        # through PyRun after the interrupt (the round finishing in delta-rs may, through PyO3)
        last = done.stderr.strip().splitlines()[-1:]
        ended = done.returncode in (-signal.SIGINT, 1) and last == ["KeyboardInterrupt"]
        assert ended and "panicked" not in done.stderr, (done.returncode, done.stderr[-2000:])
        told += [each for line in done.stdout.splitlines() for each in json.loads(line)]
    location = broker.context.record("sends").location
    stored = DeltaTable(location).to_pyarrow_table(columns=["message_id"])["message_id"]
    stored = stored.to_pylist()
    assert set(told) <= set(stored) and len(stored) == len(set(stored))
    assert (len(stored) - len(told)) % 10 == 0 and len(stored) - len(told) <= 40


def test_a_buffered_client_never_closed_is_closed_at_exit(tmp_path):
    """A program that ends without closing its buffered client: its queued deletes were never
    made (the messages came back when their timeouts ended) and its threads were daemons."""
    broker = Broker(None, str(tmp_path / "root"))
    queue = broker.create_queue("buffered")
    queue.send_batch([f"m{i}" for i in range(6)])
    script = (
        "import sys\n"
        "from sparkqueue import Broker\n"
        "queue = Broker(None, sys.argv[1]).get_queue('buffered')\n"
        "client = queue.buffered(prefetch=5, flush_interval=3600)\n"
        "for message in client.receive(2):\n"
        "    client.delete(message.receipt_handle)\n"  # queued, for an hour
    )
    for _ in range(2):
        done = run_script(script, broker.root)
        assert done.returncode == 0, done.stderr[-2000:]
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (2, 0)  # 4 deleted, the prefetched rest released


@pytest.mark.parametrize("store", ["local", "s3"])
def test_serve_stopped_under_load_answers_what_it_took_in_and_ends_cleanly(
    store, tmp_path, request, monkeypatch
):
    """`sparkqueue serve` gets SIGTERM while eight clients send, receive and delete and a ninth
    long polls an empty queue: the requests under way are answered (the long poll at once, with
    nothing) before the process ends, with 0 (it died with SIGSEGV in 2 of 4 such runs: request
    threads are daemons, and one inside delta-rs was unwound). Every send answered is in the
    queue or was deleted by an answered delete, and no answered delete left its message. On a
    local root and on S3 (moto's server), where a request's commit is several HTTP requests."""
    if store == "s3":
        s3 = request.getfixturevalue("s3")
        for name, value in s3.options.items():
            monkeypatch.setenv(name, value)  # the server's and this process's brokers
        bucket = s3.new_bucket()
    for run in range(2):
        root = f"{bucket}/root{run}" if store == "s3" else str(tmp_path / f"root{run}")
        server = subprocess.Popen(
            [str(Path(sys.executable).with_name("sparkqueue")), "serve", "--root", root,
             "--port", "0", "--redrive-every", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("SPARKQUEUE_")},
                 "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        try:
            outcome = _load_then_stop(server, _url(server))
        finally:
            server.kill()
            server.wait()
        assert outcome["exit"] == 0, outcome
        assert outcome["long_poll"] == [], outcome  # answered, empty, before the process ended
        stored = set(_message_ids(root, "load"))
        assert set(outcome["sent"]) <= stored | set(outcome["deleted"])
        assert not stored & set(outcome["deleted"])


def _load_then_stop(server: subprocess.Popen, url: str) -> dict[str, object]:
    """Eight clients loop send, receive and delete, a ninth long polls; once 40 sends were
    answered the server gets SIGTERM. What the clients were answered, and the server's exit."""
    import boto3
    from botocore.config import Config

    def client():  # a session each: boto3's default one is not safe for threads
        config = Config(retries={"max_attempts": 0}, read_timeout=60)
        return boto3.session.Session().client(
            "sqs", endpoint_url=url, region_name="us-east-1", config=config,
            aws_access_key_id="local", aws_secret_access_key="local",
        )  # fmt: skip

    load = client().create_queue(QueueName="load")["QueueUrl"]
    empty = client().create_queue(QueueName="empty")["QueueUrl"]
    sent: list[str] = []
    deleted: list[str] = []
    polled: list[object] = []
    stopping = threading.Event()

    def loop() -> None:
        sqs = client()
        while not stopping.is_set():
            try:
                sent.append(sqs.send_message(QueueUrl=load, MessageBody="x")["MessageId"])
                got = sqs.receive_message(QueueUrl=load, MaxNumberOfMessages=2)
                for message in got.get("Messages", []):
                    sqs.delete_message(QueueUrl=load, ReceiptHandle=message["ReceiptHandle"])
                    deleted.append(message["MessageId"])
            except Exception:  # refused or cut off as the server stops: not told, not counted
                return

    poller, polling = client(), threading.Event()
    poller.meta.events.register("before-send.sqs.ReceiveMessage", lambda **_: polling.set())

    def long_poll() -> None:
        try:
            got = poller.receive_message(QueueUrl=empty, WaitTimeSeconds=20)
            polled.append(got.get("Messages", []))
        except Exception as error:
            polled.append(repr(error))

    threads = [threading.Thread(target=long_poll)]  # first: under way before the stop
    threads += [threading.Thread(target=loop) for _ in range(8)]
    threads[0].start()
    assert polling.wait(30)
    for thread in threads[1:]:
        thread.start()
    deadline = time.monotonic() + 60
    while len(sent) < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.send_signal(signal.SIGTERM)
    code = server.wait(timeout=60)
    stopping.set()
    for thread in threads:
        thread.join(timeout=60)
    return {"exit": code, "long_poll": polled[0] if polled else None, "sent": sent,
            "deleted": deleted}  # fmt: skip


def _url(server: subprocess.Popen) -> str:
    """The endpoint's URL, from the line that says it serves."""
    for line in server.stdout:  # type: ignore[union-attr]
        found = re.search(r"serving SQS on (http://[0-9.:]+)/", line)
        if found is not None:  # the rest is read away, so that the server never blocks on it
            threading.Thread(target=server.stdout.read, daemon=True).start()  # type: ignore[union-attr]
            return found.group(1)
    raise AssertionError(f"serve ended with {server.wait()} before it served")


def _message_ids(root: str, name: str) -> list[str]:
    """The ids of the queue's messages not deleted (those in flight too: its clock runs past
    their visibility timeouts)."""
    clock = FakeClock(datetime.now(UTC) + timedelta(seconds=MAX_VISIBILITY_SECONDS))
    queue = Broker(None, root, clock=clock).get_queue(name)
    found: list[str] = []
    while batch := queue.receive(10, visibility_timeout=MAX_VISIBILITY_SECONDS):
        found += [message.message_id for message in batch]
    return found
