"""The native engine on object storage: queues under an s3:// root, served by delta-rs alone
against a real S3 API (moto's server, a process of its own; see tests/s3_server.py), with no JVM.

The native engine's tests imported below run here again on such a root: their `broker` is this
module's. Credentials reach delta-rs as they do in production, from the environment (which the
CLI, the endpoint and every child process inherit) or as a broker's `storage_options`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import pytest

from sparkqueue import Broker
from sparkqueue.bench.faults import fault_proxy
from sparkqueue.errors import InvalidParameterValue, QueueDoesNotExist
from sparkqueue.testing import FakeClock
from tests.processes import run_here, stop
from tests.unit.conftest import near_wall_clock
from tests.unit.test_history import (  # noqa: F401 (collected here, on object storage)
    orders,
    test_a_whole_life_through_the_dead_letter_queue_and_back,
)
from tests.unit.test_native_engine import (  # noqa: F401
    test_a_broker_without_spark_serves_every_per_message_operation,
    test_native_processes_share_a_queue_and_lose_nothing,
    test_native_threads_receive_each_message_once,
)
from tests.unit.test_native_fifo import (  # noqa: F401
    test_a_claim_that_read_a_group_before_another_took_it_fails_whole,
    test_a_fifo_queue_needs_no_spark_and_no_row_tracking,
    test_concurrent_producers_and_consumers_keep_each_groups_order,
)
from tests.unit.test_native_pool import (  # noqa: F401
    test_a_receive_lends_the_table_it_read_back,
)
from tests.unit.test_native_redrive import (  # noqa: F401
    test_a_pass_drops_fifo_duplicates_and_spent_tombstones,
    test_a_poison_head_reaches_the_fifo_dead_letter_queue_and_frees_its_group,
)
from tests.unit.test_native_rounds import (  # noqa: F401
    test_processes_exchanging_large_batches_take_every_message_once,
)
from tests.unit.test_small_files import compactions, often  # noqa: F401
from tests.unit.test_without_spark import (  # noqa: F401
    test_the_api_the_command_line_and_the_endpoint_need_no_pyspark,
)

REPO = Path(__file__).resolve().parents[2]
COMMAND = str(Path(sys.executable).with_name("sparkqueue"))


@pytest.fixture
def clock() -> FakeClock:
    """Near the wall clock: the history tests here read expiry against commit times."""
    return near_wall_clock()


@pytest.fixture
def credentials(s3, monkeypatch) -> dict[str, str]:
    """The S3 server's endpoint and keys in this process's environment (and its children's)."""
    for name, value in s3.options.items():
        monkeypatch.setenv(name, value)
    return s3.options


@pytest.fixture
def root(s3, credentials) -> str:
    return f"{s3.new_bucket()}/queues"


@pytest.fixture
def broker(root, clock) -> Broker:
    return Broker(None, root, clock=clock)


def test_a_root_on_object_storage_is_the_native_engines(broker, root):
    assert (broker.engine, broker.root) == ("native", root)
    assert broker.context.native is not None


def test_storage_options_carry_the_credentials_without_the_environment(s3, clock, monkeypatch):
    root = f"{s3.new_bucket()}/queues"
    for name in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(name)  # none of the machine's own either
    queue = Broker(None, root, storage_options=s3.options, clock=clock).create_queue("keyed")
    queue.send("a")
    [message] = queue.receive(1)
    assert message.body == "a"
    queue.delete(message.receipt_handle)
    assert queue.stats().visible == 0


def test_a_queue_on_object_storage_is_shared_by_brokers_of_other_processes(root):
    """One broker's queue, as the CLI in another process (with the credentials from its
    environment) sees and changes it, piped as scripts read it."""
    queue = Broker(None, root).create_queue("shared")  # on the wall clock, as the CLI is
    sent = queue.send_batch(["one", "two"])

    def cli(*args: str) -> str:
        return run_here([COMMAND, *args, "--root", root], timeout=120).stdout

    assert json.loads(cli("stats", "shared", "--json"))["visible"] == 2
    refused = subprocess.run(
        [COMMAND, "metrics", "--root", root], capture_output=True, text=True, timeout=120
    )  # needs Spark, which stays out of a command on object storage
    assert refused.returncode != 0 and "native engine alone" in refused.stdout + refused.stderr
    cli("send", "shared", "three")
    peeked = json.loads(cli("peek", "shared", "--json"))
    assert sorted(m["message_id"] for m in peeked if m["body"] != "three") == sorted(sent)
    assert queue.stats().visible == 3
    passed = json.loads(cli("redrive", "--json"))  # a pass through the native engine
    assert [row["queue"] for row in passed] == ["shared"]


def test_serve_on_object_storage_moves_dead_letters_and_back_without_spark(root, tmp_path):
    """`sparkqueue serve` on an s3:// root answers boto3 with no JVM, and its redrive passes and
    move tasks run through the native engine (Spark's commits would not take turns with its own
    there): a message received past maxReceiveCount reaches the dead-letter queue, and a move
    task brings it back."""
    command = [COMMAND, "serve", "--root", root, "--port", "0", "--redrive-every", "0.5"]
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    try:
        found = wait_for(lambda: re.search(r"serving SQS on (http://[0-9.:]+)/", log.read_text()))
        sqs = boto3.client(
            "sqs",
            endpoint_url=found.group(1),
            region_name="us-east-1",
            aws_access_key_id="any",
            aws_secret_access_key="any",
        )
        dlq = sqs.create_queue(QueueName="remote-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])
        dlq_arn = dlq_arn["Attributes"]["QueueArn"]
        policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})
        url = sqs.create_queue(QueueName="remote", Attributes={"RedrivePolicy": policy})
        url = url["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="poison")
        [message] = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"]
        assert message["Body"] == "poison"  # its one receive, over at once

        def dead() -> list:
            return sqs.receive_message(QueueUrl=dlq, VisibilityTimeout=0).get("Messages", [])

        assert [m["Body"] for m in wait_for(dead)] == ["poison"]
        sqs.start_message_move_task(SourceArn=dlq_arn)

        def moved() -> bool:
            tasks = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
            assert tasks[0]["Status"] in ("RUNNING", "COMPLETED"), tasks
            return tasks[0]["Status"] == "COMPLETED"

        wait_for(moved)
        [back] = sqs.receive_message(QueueUrl=url)["Messages"]
        assert back["Body"] == "poison"
        sqs.delete_message(QueueUrl=url, ReceiptHandle=back["ReceiptHandle"])
    finally:
        stop(server)
    printed = log.read_text()
    assert "pyspark" not in printed and "Traceback" not in printed, printed


def wait_for(check: Callable[[], Any], seconds: float = 60) -> Any:
    """`check()`'s first truthy answer, asked every 0.1 s (a server's background work, not a
    visibility timeout, is what the test waits for)."""
    deadline = time.monotonic() + seconds
    while not (answer := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return answer


@pytest.mark.usefixtures("often")
def test_a_broker_leaves_small_files_on_object_storage_to_the_jobs_upkeep(broker):
    """Compaction beside producers needs the local root's commit lock to keep claims out; here
    the redrive job's upkeep compacts."""
    queue = broker.create_queue("busy")
    for i in range(3 * 4):  # three times the appends between compactions (`often`)
        queue.send(f"m{i}")
    for thread in threading.enumerate():
        if thread.name.startswith("sparkqueue-compact-"):
            thread.join()
    assert compactions(broker, "busy") == 0
    assert len(queue.receive(10)) == 10


def test_a_kept_table_of_a_queue_deleted_elsewhere_is_never_written_again(s3, root, clock):
    """A broker keeps the table its operations used (store/native_pool.py); lent again only
    while its log entry is there, so a queue another process deleted is not written anew."""
    queue = Broker(None, root, clock=clock).create_queue("doomed")
    queue.send("a")
    queue.delete(queue.receive(1)[0].receipt_handle)  # the table is kept from here on
    Broker(None, root, clock=clock).delete_queue("doomed")
    with pytest.raises(QueueDoesNotExist):
        queue.send("b")
    bucket = root.removeprefix("s3://").split("/", 1)[0]
    listed = s3.client().list_objects_v2(Bucket=bucket, Prefix="queues/queues/doomed")
    assert listed.get("Contents", []) == []


def test_a_kept_table_of_a_queue_made_anew_at_its_path_is_never_the_kept_one(root, clock):
    """A `create_queue` that finishes a delete cut short (its table dropped, its name still
    registered) makes the table anew at its path: a broker that kept the old one must read the
    new one, though its log reaches the version the old one stood at."""
    first = Broker(None, root, clock=clock)
    queue = first.create_queue("reborn")
    queue.send_batch(["old-1", "old-2"])
    for message in queue.receive(2):
        queue.delete(message.receipt_handle)  # the table is kept from here on, at version 3
    second = Broker(None, root, clock=clock)
    location = second.context.record("reborn").location
    second.context.tables.drop_table(location)  # the delete, cut short before unregistering
    again = second.create_queue("reborn")  # finishes it: the table anew at the same path
    for i in range(5):
        again.send(f"new-{i}")  # past the version the kept table stood at
    assert second.context.record("reborn").location == location
    assert sorted(m.body for m in queue.receive(10)) == [f"new-{i}" for i in range(5)]


def test_a_warm_brokers_operations_read_no_log_entry_twice(s3, root, clock):
    """Its kept tables catch up with the entries written since they were kept, one request
    each, where opening a table reads its last checkpoint and every entry since (through the
    fault proxy, which counts requests by kind)."""
    with fault_proxy(s3.options["AWS_ENDPOINT_URL"]) as proxy:
        options = {**s3.options, "AWS_ENDPOINT_URL": proxy.url}
        queue = Broker(None, root, storage_options=options, clock=clock).create_queue("warm")
        queue.send_batch([f"m{i}" for i in range(10)])
        queue.delete(queue.receive(1)[0].receipt_handle)  # the table is kept from here on
        for _ in range(3):
            before = proxy.requests()
            [message] = queue.receive(1)
            queue.delete(message.receipt_handle)
            made = proxy.requests() - before
            assert made["GET log"] <= 4, made  # the two commits' entries (delta-rs's own)
        assert made["GET data"] > 0 and made["PUT log"] == 2, made


def test_the_s3_server_refuses_a_conditional_put_of_a_name_that_exists(s3):
    """What a native commit relies on (a put of the next log version if none exists), asked of
    the tests' S3 server directly."""
    bucket = s3.new_bucket().removeprefix("s3://")
    client = s3.client()
    client.put_object(Bucket=bucket, Key="v1.json", Body=b"first", IfNoneMatch="*")
    with pytest.raises(botocore.exceptions.ClientError, match="PreconditionFailed"):
        client.put_object(Bucket=bucket, Key="v1.json", Body=b"second", IfNoneMatch="*")
    assert client.get_object(Bucket=bucket, Key="v1.json")["Body"].read() == b"first"


def test_deleting_a_queue_leaves_nothing_of_it_in_the_bucket(s3, broker):
    """Not the files earlier commits removed (their bodies), nor the log (whose statistics
    hold values of the body column): the table's whole prefix goes, as a local folder does."""
    kept = broker.create_queue("kept")
    kept.send("stays")
    queue = broker.create_queue("gone")
    queue.send_batch(["secret"] * 3)
    for message in queue.receive(3):
        queue.delete(message.receipt_handle)  # files rewritten: the old ones stay until VACUUM
    location = broker.context.record("gone").location.removeprefix("s3://")
    bucket, prefix = location.split("/", 1)

    def objects() -> list[str]:
        listed = s3.client().list_objects_v2(Bucket=bucket, Prefix=prefix)
        return [item["Key"] for item in listed.get("Contents", [])]

    assert sum(key.endswith(".parquet") for key in objects()) > 1
    broker.delete_queue("gone")
    assert objects() == []
    assert broker.list_queues() == ["kept"] and kept.receive(1)[0].body == "stays"


def test_a_delete_cut_short_is_finished_by_the_next(s3, broker):
    """Object stores list keys in order, so a delete cut short after `_delta_log/` leaves data
    files and no table: deleting the queue again removes them."""
    queue = broker.create_queue("half")
    queue.send_batch(["secret"] * 3)
    location = broker.context.record("half").location.removeprefix("s3://")
    bucket, prefix = location.split("/", 1)
    client = s3.client()
    log = client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/_delta_log/")["Contents"]
    for item in log:  # what the cut-short delete got to
        client.delete_object(Bucket=bucket, Key=item["Key"])
    broker.delete_queue("half")
    assert client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []) == []


def test_what_cannot_serve_object_storage_natively_says_so():
    with pytest.raises(InvalidParameterValue, match="native engine writes roots"):
        Broker(None, "dbfs:/queues")
