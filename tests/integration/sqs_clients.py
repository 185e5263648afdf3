"""Real SQS clients for the endpoint's tests: the endpoint as a subprocess (`sparkqueue serve`),
boto3 speaking the JSON protocol, and boto3 speaking the query protocol through botocore's own
query serializer and XML parser (a copy of the SQS model switched to `query`, with the query
names SQS's API reference gives its lists and maps)."""

from __future__ import annotations

import copy
import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import boto3
import botocore.loaders
import botocore.session
from botocore import UNSIGNED
from botocore.config import Config

from tests.integration.servers import daemon

COMMAND = str(Path(sys.executable).with_name("sparkqueue"))
ACCESS_KEY, SECRET_KEY = "test-key", "test-secret"
REGION = "us-east-1"
READY = r"serving SQS on (http://[0-9.:]+)/"

# From the SQS API reference's query examples: the element/parameter name of each list or map.
QUERY_LOCATION_NAMES = {
    "Attributes": "Attribute",
    "AttributeNames": "AttributeName",
    "MessageAttributes": "MessageAttribute",
    "MessageAttributeNames": "MessageAttributeName",
    "MessageSystemAttributeNames": "MessageSystemAttributeName",
    "Tags": "Tag",
    "tags": "Tag",
    "TagKeys": "TagKey",
    "QueueUrls": "QueueUrl",
    "queueUrls": "QueueUrl",
    "Messages": "Message",
    "Failed": "BatchResultErrorEntry",
    "Results": "ListMessageMoveTasksResultEntry",
}
QUERY_ENTRY_NAMES = {  # Entries and Successful, by operation
    "SendMessageBatchRequest": "SendMessageBatchRequestEntry",
    "SendMessageBatchResult": "SendMessageBatchResultEntry",
    "DeleteMessageBatchRequest": "DeleteMessageBatchRequestEntry",
    "DeleteMessageBatchResult": "DeleteMessageBatchResultEntry",
    "ChangeMessageVisibilityBatchRequest": "ChangeMessageVisibilityBatchRequestEntry",
    "ChangeMessageVisibilityBatchResult": "ChangeMessageVisibilityBatchResultEntry",
}


@contextmanager
def endpoint(
    root: Path,
    log: Path,
    keys: str | None = f"{ACCESS_KEY}:{SECRET_KEY}",
    extra: list[str] | None = None,
) -> Iterator[str]:
    """`sparkqueue serve --root ROOT --port 0 [EXTRA...]` until it prints its URL; yields that
    URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARKQUEUE_", "SPARK_REMOTE"))}
    if keys is not None:
        env["SPARKQUEUE_ACCESS_KEYS"] = keys
    args = [COMMAND, "serve", "--root", str(root), "--port", "0", *(extra or [])]
    with daemon(args, log, READY, env):
        found = re.search(READY, log.read_text())
        assert found is not None
        yield found.group(1)


def json_client(url: str, *, region: str = REGION, **keys: str):
    return boto3.client(
        "sqs",
        endpoint_url=url,
        region_name=region,
        aws_access_key_id=keys.get("key", ACCESS_KEY),
        aws_secret_access_key=keys.get("secret", SECRET_KEY),
        config=Config(retries={"max_attempts": 2}, read_timeout=60),
    )


def query_client(url: str, model_dir: Path, *, signed: bool = True):
    """boto3 on a copy of the SQS model that speaks the query protocol (unsigned, as botocore's
    UNSIGNED config sends it, when `signed` is False)."""
    session = botocore.session.Session()
    loader = session.get_component("data_loader")
    # Read the JSON model through a loader of its own: the session's loader caches what it loads,
    # and would hand the client the cached JSON model instead of the copy written below.
    model = copy.deepcopy(botocore.loaders.create_loader().load_service_model("sqs", "service-2"))
    model["metadata"].update(
        protocol="query",
        protocols=["query"],
        xmlNamespace="http://queue.amazonaws.com/doc/2012-11-05/",
    )
    model["metadata"].pop("jsonVersion", None)
    model["metadata"].pop("targetPrefix", None)
    model["metadata"].pop("awsQueryCompatible", None)
    shapes = model["shapes"]
    for name, operation in model["operations"].items():
        if "output" in operation:
            operation["output"]["resultWrapper"] = f"{name}Result"
    for shape_name, shape in shapes.items():
        for member_name, member in shape.get("members", {}).items():
            target = shapes[member["shape"]]
            location = (
                QUERY_ENTRY_NAMES.get(shape_name)
                if member_name in ("Entries", "Successful")
                else None
            )
            location = location or QUERY_LOCATION_NAMES.get(member_name)
            if location is None or target["type"] not in ("list", "map"):
                continue
            member["locationName"] = location
            if target["type"] == "list":
                target["member"]["locationName"] = location
            else:
                target["key"]["locationName"] = "Key" if member_name.lower() == "tags" else "Name"
                target["value"]["locationName"] = "Value"
    folder = model_dir / "sqs" / "2012-11-05"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "service-2.json").write_text(json.dumps(model))
    loader.search_paths.insert(0, str(model_dir))
    return boto3.Session(botocore_session=session).client(
        "sqs",
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=Config(
            retries={"max_attempts": 2}, **({} if signed else {"signature_version": UNSIGNED})
        ),
    )
