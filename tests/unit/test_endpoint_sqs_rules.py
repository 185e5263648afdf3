"""The SQS endpoint's pure rules, without a JVM: attribute ranges and the SQS-only attributes,
queue URLs of any region and bare names, permissions as policy edits, the queue lookup memory,
the redrive schedule's interval, and the message rules the Python API shares (FIFO's zero
delay, the system attribute key)."""

from __future__ import annotations

import json
import threading

import pytest

from sparkqueue.attributes import QueueAttributes
from sparkqueue.endpoint import permissions, settings
from sparkqueue.endpoint.faults import SqsFault
from sparkqueue.endpoint.lookup import Lookups
from sparkqueue.endpoint.naming import Naming
from sparkqueue.endpoint.upkeep import RedrivePasses
from sparkqueue.errors import InvalidParameterValue
from sparkqueue.limits import DEFAULT_MESSAGE_BYTES, MAX_MESSAGE_BYTES
from sparkqueue.rules.validation import check_attribute_types, system_key


def fault(call, *args, **kwargs) -> str:
    with pytest.raises(SqsFault) as raised:
        call(*args, **kwargs)
    return raised.value.kind.name


def test_message_size_range_and_defaults():
    assert QueueAttributes().max_message_bytes == DEFAULT_MESSAGE_BYTES == 262_144
    assert QueueAttributes(max_message_bytes=MAX_MESSAGE_BYTES).max_message_bytes == 1_048_576
    with pytest.raises(InvalidParameterValue):
        QueueAttributes(max_message_bytes=MAX_MESSAGE_BYTES + 1)


# One past each end SQS allows (the endpoint's tests send the same to a real server).
OUT_OF_RANGE = [
    {"MaximumMessageSize": "1023"},
    {"MaximumMessageSize": "1048577"},
    {"MessageRetentionPeriod": "59"},
    {"VisibilityTimeout": "43201"},
    {"DelaySeconds": "901"},
    {"ReceiveMessageWaitTimeSeconds": "21"},
]


@pytest.mark.parametrize("attributes", OUT_OF_RANGE)
def test_out_of_range_numbers_are_invalid_attribute_values(attributes):
    assert fault(settings.to_keywords, attributes, Naming(), fifo=False) == "InvalidAttributeValue"


def test_sqs_only_attributes_are_checked_and_kept_in_sqs_spelling():
    naming = Naming()
    policy = json.dumps({"Version": "2012-10-17", "Statement": []})
    keywords = settings.to_keywords(
        {"Policy": policy, "KmsMasterKeyId": "alias/aws/sqs", "KmsDataKeyReusePeriodSeconds": "60",
         "SqsManagedSseEnabled": "false", "DeduplicationScope": "messageGroup",
         "FifoThroughputLimit": "perMessageGroupId"},
        naming,
        fifo=True,
    )  # fmt: skip
    assert keywords["sqs_metadata"]["KmsDataKeyReusePeriodSeconds"] == "60"
    assert json.loads(keywords["sqs_metadata"]["Policy"]) == json.loads(policy)
    for bad in (
        {"KmsDataKeyReusePeriodSeconds": "86401"},
        {"Policy": "[]"},
        {"Policy": json.dumps({"Statement": "x"})},
        {"KmsMasterKeyId": "has space"},
        {"DeduplicationScope": "group"},
        {"SqsManagedSseEnabled": "True"},
    ):
        assert fault(settings.to_keywords, bad, naming, fifo=True) == "InvalidAttributeValue", bad
    stored = settings.merged_metadata({"Policy": policy}, {"Policy": "", "KmsMasterKeyId": "k"})
    assert stored == {"KmsMasterKeyId": "k"}
    fifo = QueueAttributes(fifo=True).as_dict()
    assert settings.metadata_value(fifo, "DeduplicationScope") == "queue"
    assert settings.metadata_value(QueueAttributes().as_dict(), "DeduplicationScope") is None


def test_registries_written_before_sqs_metadata_still_load():
    old = json.loads(QueueAttributes().to_json())
    del old["sqs_metadata"]
    assert QueueAttributes.from_json(json.dumps(old)).sqs_metadata == {}


def test_queue_urls_bare_names_and_regions():
    free, pinned = Naming(), Naming(region="eu-west-1")
    for naming in (free, pinned):
        assert naming.name_of_url("orders") == "orders"
        assert naming.name_of_url("http://localhost:9324/000000000000/orders") == "orders"
        assert naming.name_of_url("https://sqs.eu-west-1.amazonaws.com/000000000000/q") == "q"
    assert free.name_of_url("https://sqs.us-east-1.amazonaws.com/000000000000/q") == "q"
    assert free.name_of_url("https://ap-south-1.queue.amazonaws.com/000000000000/q") == "q"
    assert free.arn("q") == "arn:aws:sqs:us-east-1:000000000000:q"
    assert pinned.arn("q") == "arn:aws:sqs:eu-west-1:000000000000:q"
    for url in (
        "https://sqs.us-east-1.amazonaws.com/000000000000/q",
        "https://us-west-2.queue.amazonaws.com/000000000000/q",
        "http://localhost/111111111111/q",
    ):
        assert fault(pinned.name_of_url, url) == "QueueDoesNotExist"
    assert free.name_of_arn("arn:aws:sqs:ap-south-1:000000000000:q") == "q"
    assert fault(pinned.name_of_arn, "arn:aws:sqs:us-east-1:000000000000:q") == (
        "InvalidParameterValue"
    )


def test_permissions_edit_the_policy_by_label():
    arn = "arn:aws:sqs:us-east-1:000000000000:q"
    policy = permissions.added(None, "a", ["111122223333"], ["SendMessage"], arn)
    policy = permissions.added(policy, "b", ["444455556666"], ["*"], arn)
    document = json.loads(policy)
    assert document["Id"] == f"{arn}/SQSDefaultPolicy"  # as SQS writes a policy it starts
    assert [s["Sid"] for s in document["Statement"]] == ["a", "b"]
    first = document["Statement"][0]  # one principal, one action: plain strings, as SQS's
    assert first["Action"] == "SQS:SendMessage"
    assert first["Principal"] == {"AWS": "arn:aws:iam::111122223333:root"}
    two = json.loads(permissions.added(None, "c", ["111122223333", "444455556666"],
                                       ["SendMessage", "ReceiveMessage"], arn))  # fmt: skip
    assert two["Statement"][0]["Action"] == ["SQS:SendMessage", "SQS:ReceiveMessage"]
    assert len(two["Statement"][0]["Principal"]["AWS"]) == 2
    assert fault(permissions.added, None, "c", ["111122223333"], [], arn) == "MissingParameter"
    eight = ["SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
             "GetQueueAttributes", "GetQueueUrl", "PurgeQueue", "ListQueueTags"]  # fmt: skip
    assert fault(permissions.added, None, "c", ["111122223333"], eight, arn) == "OverLimit"
    assert json.loads(permissions.added(None, "c", ["111122223333"], eight[:7], arn))
    assert fault(permissions.added, policy, "a", ["111122223333"], ["SendMessage"], arn) == (
        "InvalidParameterValue"
    )
    for accounts, actions in ((["123"], ["SendMessage"]), (["111122223333"], ["Fly"])):
        assert fault(permissions.added, None, "c", accounts, actions, arn) == (
            "InvalidParameterValue"
        )
    left = permissions.removed(policy, "a")
    assert [s["Sid"] for s in json.loads(left)["Statement"]] == ["b"]
    assert permissions.removed(left, "b") is None
    assert fault(permissions.removed, left, "a") == "InvalidParameterValue"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lookups_remember_found_queues_for_their_lifetime_only():
    clock, fetched = Clock(), []
    exists = {"a": "queue a"}

    def fetch(name: str) -> str | None:
        fetched.append(name)
        return exists.get(name)

    lookups = Lookups(fetch, ttl=5.0, now=clock)
    assert lookups.get("a") == lookups.get("a") == "queue a" and fetched == ["a"]
    assert lookups.get("b") is None and lookups.get("b") is None and fetched == ["a", "b", "b"]
    del exists["a"]  # deleted by another process: served from memory until the entry runs out
    clock.now = 4.9
    assert lookups.get("a") == "queue a"
    clock.now = 5.1
    assert lookups.get("a") is None
    lookups.remember("c", "queue c")  # created here: known at once
    assert lookups.get("c") == "queue c" and "c" not in fetched
    lookups.forget("c")
    assert lookups.get("c") is None
    lookups.remember("d", "queue d")
    lookups.forget()
    assert lookups.get("d") is None


def test_a_lookup_under_way_when_its_queue_is_deleted_does_not_bring_it_back():
    """A fetch that began before a DeleteQueue forgot the name must not store its (stale) find
    after it: the cache would serve the deleted queue for its whole lifetime."""
    fetching, deleted = threading.Event(), threading.Event()

    def fetch(name: str) -> str | None:
        fetching.set()
        deleted.wait(5)  # the queue is deleted (and forgotten) while this fetch is out
        return "queue a, as found before the delete"

    lookups = Lookups(fetch, ttl=60.0)
    looking = threading.Thread(target=lookups.get, args=("a",))
    looking.start()
    assert fetching.wait(5)
    lookups.forget("a")
    deleted.set()
    looking.join(5)
    lookups._fetch = lambda name: None  # the registry now says: no such queue
    assert lookups.get("a") is None


def test_redrive_interval_zero_runs_nothing():
    passes = RedrivePasses(brokers=None, every_seconds=0)  # type: ignore[arg-type]
    passes.start()
    passes.stop()
    assert passes.passes == 0
    with pytest.raises(ValueError):
        RedrivePasses(brokers=None, every_seconds=-1)  # type: ignore[arg-type]


def test_the_trace_header_key_is_one_no_attribute_can_have():
    kept = check_attribute_types({system_key("AWSTraceHeader"): "Root=1-abc"}, {})
    assert kept == {"AWS.AWSTraceHeader": "Root=1-abc"}
    for types in ({system_key("SenderId"): "x"}, {system_key("AWSTraceHeader"): "\x00"}):
        with pytest.raises(InvalidParameterValue):
            check_attribute_types(types, {})
