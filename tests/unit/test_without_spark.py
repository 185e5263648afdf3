"""`pip install sparkqueue` without pyspark: the Python API, the command line and the SQS endpoint
work on a local root (and on object storage: test_object_storage.py), in a process where importing pyspark, py4j or delta-spark fails, and what
needs Spark says so (UnsupportedOperation) instead of failing on an import."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.processes import run_here

REPO = Path(__file__).resolve().parents[2]

NO_SPARK = """
import sys

class NoSpark:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "py4j", "delta"):
            raise ImportError(f"{name} is not installed here")

sys.meta_path.insert(0, NoSpark())
"""

SESSION = """
import contextlib, io, json, sys
import boto3
from sparkqueue import Broker
from sparkqueue.cli import main
from sparkqueue.endpoint import AccessKeys, SqsEndpoint

root = sys.argv[1]
queue = Broker(None, root).create_queue("plain")
queue.send_batch(["a", "b"])
with queue.buffered() as client:
    [message] = client.receive(1)
    client.delete(message.receipt_handle)
with queue.heartbeat(queue.receive(1), visibility_timeout=30, interval=10):
    pass
printed = io.StringIO()
with contextlib.redirect_stdout(printed), contextlib.suppress(SystemExit):
    sys.argv = ["sparkqueue", "stats", "plain", "--root", root, "--json"]
    main()
assert json.loads(printed.getvalue())["in_flight"] == 1, printed.getvalue()
keys = AccessKeys.parse("key:secret")
with SqsEndpoint(Broker(None, root), port=0, access_keys=keys, redrive_every=0) as endpoint:
    sqs = boto3.client("sqs", endpoint_url=endpoint.url, region_name="us-east-1",
                       aws_access_key_id="key", aws_secret_access_key="secret")
    url = sqs.get_queue_url(QueueName="plain")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="over SQS")
    bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]]
    fifo = sqs.create_queue(QueueName="ordered.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    for n in range(3):
        sqs.send_message(QueueUrl=fifo, MessageBody=f"f{n}", MessageGroupId="g",
                         MessageDeduplicationId=f"f{n}")
    got = sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10)["Messages"]
    bodies += [m["Body"] for m in got]
    assert sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10).get("Messages") is None
assert bodies == ["over SQS", "f0", "f1", "f2"], bodies
from sparkqueue.errors import UnsupportedOperation
spark_only = {
    "receive_df": lambda: queue.receive_df(1),
    "peek_df": lambda: queue.peek_df(),
    "consume": lambda: queue.consume(lambda batch: None, max_batches=1),
}
for name, call in spark_only.items():
    try:
        call()
    except UnsupportedOperation as error:
        assert "Spark" in error.message, error.message
    else:
        raise AssertionError(f"{name} did not say it needs Spark")
report = Broker(None, root).redrive()  # through the native engine
assert sorted(report.queues) == ["ordered.fifo", "plain"], report
loaded = sorted(name for name in sys.modules if name.split(".")[0] in ("pyspark", "py4j", "delta"))
assert loaded == [], loaded
print("ok")
"""


@pytest.fixture
def root(tmp_path) -> str:
    return str(tmp_path / "root")


def test_the_api_the_command_line_and_the_endpoint_need_no_pyspark(root):
    done = run_here([sys.executable, "-c", NO_SPARK + SESSION, root], timeout=300)
    assert done.stdout.strip().endswith("ok")
