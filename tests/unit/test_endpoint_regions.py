"""Regions kept apart by the signature's scope, as SQS keeps them: boto3 clients of several
regions against one endpoint over a native broker (no JVM), each region's queues under a root of
their own, and the endpoint's redrive passes in every region it serves."""

from __future__ import annotations

import http.client
import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from sparkqueue import Broker
from sparkqueue.endpoint import SqsEndpoint
from sparkqueue.endpoint.faults import SqsFault
from tests.raw_http import ACCESS_KEY, SECRET_KEY, sqs_client
from tests.unit.endpoint_stub import KEYS


@pytest.fixture
def root(tmp_path) -> Path:
    return tmp_path / "root"


def serve(root: Path, clock, **options) -> SqsEndpoint:
    return SqsEndpoint(Broker(None, str(root), clock=clock), port=0, access_keys=KEYS, **options)


def names(client) -> list[str]:
    return sorted(url.rsplit("/", 1)[1] for url in client.list_queues().get("QueueUrls", []))


def test_each_region_has_queues_of_its_own(root, clock):
    with serve(root, clock, redrive_every=0) as endpoint:
        home = sqs_client(endpoint.url)  # us-east-1, the endpoint's home region
        west, north = (sqs_client(endpoint.url, region_name=r) for r in ("us-west-1", "eu-north-1"))
        for client, body in ((home, "east"), (west, "west")):
            url = client.create_queue(QueueName="orders")["QueueUrl"]
            client.send_message(QueueUrl=url, MessageBody=body)
        west.create_queue(QueueName="west-only")
        assert names(home) == ["orders"] and names(west) == ["orders", "west-only"]
        assert names(north) == []
        with pytest.raises(north.exceptions.QueueDoesNotExist):
            north.get_queue_url(QueueName="west-only")
        with pytest.raises(north.exceptions.QueueDoesNotExist):
            north.send_message(QueueUrl=f"{endpoint.url}/000000000000/orders", MessageBody="x")
        for client, body, region in ((home, "east", "us-east-1"), (west, "west", "us-west-1")):
            url = client.get_queue_url(QueueName="orders")["QueueUrl"]
            got = client.receive_message(QueueUrl=url)["Messages"]
            assert [m["Body"] for m in got] == [body]
            arn = client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
            assert arn["Attributes"]["QueueArn"] == f"arn:aws:sqs:{region}:000000000000:orders"
    # The home region is the broker's own root; another region's queues live under it.
    assert Broker(None, str(root)).list_queues() == ["orders"]
    assert Broker(None, str(root / "regions" / "us-west-1")).list_queues() == [
        "orders",
        "west-only",
    ]


def test_a_region_names_its_own_queues_only(root, clock):
    with serve(root, clock, redrive_every=0) as endpoint:
        west = sqs_client(endpoint.url, region_name="us-west-1")
        home = sqs_client(endpoint.url)
        home.create_queue(QueueName="dead")
        west.create_queue(QueueName="dead")
        for client, elsewhere in ((west, "us-east-1"), (home, "us-west-1")):
            arn = f"arn:aws:sqs:{elsewhere}:000000000000:dead"
            policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1})
            with pytest.raises(ClientError) as error:
                client.create_queue(QueueName="work", Attributes={"RedrivePolicy": policy})
            assert error.value.response["Error"]["Code"] == "InvalidParameterValue"
            assert names(client) == ["dead"]
            # a URL of another region's host names none of this region's queues either
            url = f"https://sqs.{elsewhere}.amazonaws.com/000000000000/dead"
            with pytest.raises(client.exceptions.QueueDoesNotExist):
                client.purge_queue(QueueUrl=url)


def signed_for(url: str, region: str) -> tuple[int, str]:
    """A CreateQueue signed with the test keys for `region` (any text botocore would refuse
    to send): the answer's status and body."""
    request = AWSRequest(
        "POST",
        f"{url}/",
        data=json.dumps({"QueueName": "orders"}).encode(),
        headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "AmazonSQS.CreateQueue",
        },
    )
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "sqs", region).add_auth(request)
    prepared = request.prepare()
    connection = http.client.HTTPConnection(urlsplit(url).netloc, timeout=30)
    try:
        connection.request("POST", "/", body=prepared.body, headers=dict(prepared.headers))
        answer = connection.getresponse()
        return answer.status, answer.read().decode()
    finally:
        connection.close()


@pytest.mark.parametrize("region", ["..", ".", "local", "elasticmq", "us-east"])
def test_a_signature_scoped_to_no_region_reaches_the_home_region(root, clock, region):
    """Local emulators' clients sign for names such as "local": their queues are the home
    region's, and no name a client signs for opens a root of its own beside AWS's regions."""
    with serve(root, clock, redrive_every=0) as endpoint:
        status, body = signed_for(endpoint.url, region)
        assert status == 200, body
        assert names(sqs_client(endpoint.url)) == ["orders"]
        assert signed_for(endpoint.url, "us-west-1")[0] == 200  # an AWS region: its own
    assert sorted(p.name for p in (root / "regions").iterdir()) == ["us-west-1"]


@pytest.mark.parametrize("region", ["zz-fake-9", "us-west-99", "us-gov-nowhere-1"])
def test_a_region_aws_does_not_serve_is_refused_and_opens_nothing(root, clock, region):
    with serve(root, clock, redrive_every=0) as endpoint:
        status, body = signed_for(endpoint.url, region)
        assert (status, json.loads(body)["__type"].rsplit("#", 1)[-1]) == (
            403,
            "SignatureDoesNotMatch",
        )
        assert names(sqs_client(endpoint.url)) == []
    assert not (root / "regions").exists()


def test_the_endpoint_runs_the_redrive_pass_in_every_region_after_a_restart(root, clock):
    with serve(root, clock, redrive_every=0) as endpoint:
        west = sqs_client(endpoint.url, region_name="us-west-2")
        dead = west.create_queue(QueueName="dead")["QueueUrl"]
        arn = west.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])
        policy = (
            f'{{"deadLetterTargetArn": "{arn["Attributes"]["QueueArn"]}", "maxReceiveCount": 1}}'
        )
        work = west.create_queue(QueueName="work", Attributes={"RedrivePolicy": policy})
        west.send_message(QueueUrl=work["QueueUrl"], MessageBody="poison")
        assert west.receive_message(QueueUrl=work["QueueUrl"], VisibilityTimeout=5)["Messages"]
    clock.advance(6)  # its receives used up: a pass, not a receive, must move it
    regional = Broker(None, str(root / "regions" / "us-west-2"), clock=clock)
    # A new endpoint on the root, which no client of us-west-2 calls: its passes find the region.
    with serve(root, clock, redrive_every=0.2):
        deadline = time.monotonic() + 30
        while regional.get_queue("dead").stats().visible == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert regional.get_queue("dead").stats().visible == 1


def test_a_region_the_storage_did_not_answer_for_is_looked_for_again(root, clock, monkeypatch):
    """The search for an earlier run's regions outlives a failing look (a store that did not
    answer), and a pass's failure to list its brokers ends no passes."""
    with serve(root, clock, redrive_every=0) as endpoint:
        west = sqs_client(endpoint.url, region_name="us-west-2")
        west.create_queue(QueueName="kept")
    looks: list[str] = []
    holds = Broker.holds_queues

    def flaky(self, where: str) -> bool:
        looks.append(where)
        if where.endswith("us-west-2") and looks.count(where) == 1:
            raise OSError("the store did not answer")
        return holds(self, where)

    monkeypatch.setattr(Broker, "holds_queues", flaky)
    monkeypatch.setattr("sparkqueue.endpoint.regions.PROBE_RETRY_SECONDS", 0.2)
    with serve(root, clock, redrive_every=0.1) as endpoint:
        lists = endpoint.regions.pass_brokers

        def fails_once() -> list:
            endpoint.redrive._brokers = lists
            raise OSError("listing the brokers failed")

        endpoint.redrive._brokers = fails_once
        deadline = time.monotonic() + 30
        while len(lists()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(lists()) == 2  # the home region and us-west-2, found on a second look
        passes = endpoint.redrive.passes
        while endpoint.redrive.passes == passes and time.monotonic() < deadline:
            time.sleep(0.05)
        assert endpoint.redrive.passes > passes  # the passes went on after the failed listing
    assert sum(where.endswith("us-west-2") for where in looks) == 2


def test_a_region_opened_as_the_endpoint_closes_is_closed_as_it_opens(root, clock):
    """A request taken in before the close may open a region after it: that region's long polls
    answer at once and its move tasks do not start, as the other regions' (see draining.py)."""
    endpoint = serve(root, clock, redrive_every=0).start()
    endpoint.close()
    west = endpoint.regions.service("us-west-2")
    started = time.monotonic()
    assert west.polls.receive("orders", lambda: [], wait_seconds=20) == []
    assert time.monotonic() - started < 5
    dead_letters = SimpleNamespace(name="dlq", stats=lambda: SimpleNamespace(visible=1))
    with pytest.raises(SqsFault) as fault:
        west.tasks.start(dead_letters, None, None)  # type: ignore[arg-type]
    assert fault.value.kind.name == "ServiceUnavailable"


def test_threads_opening_one_region_at_once_share_it(root, clock):
    """Eight clients' first requests of one region, at once: one root, every queue in it."""
    with serve(root, clock, redrive_every=0) as endpoint:
        start = threading.Barrier(8)
        made: list[str] = []

        def create(i: int) -> None:
            client = sqs_client(endpoint.url, region_name="ap-south-1")
            start.wait()
            made.append(client.create_queue(QueueName=f"q{i}")["QueueUrl"])

        threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(made) == 8
        assert names(sqs_client(endpoint.url, region_name="ap-south-1")) == [
            f"q{i}" for i in range(8)
        ]
        assert len(endpoint.regions.pass_brokers()) == 2  # the home region and ap-south-1
    assert sorted(p.name for p in (root / "regions").iterdir()) == ["ap-south-1"]


def test_the_query_protocol_with_lower_case_headers_picks_its_region(root, clock):
    """A form-encoded request (the query protocol), its header names lower-cased, signed for
    us-west-1: its queue is that region's."""
    with serve(root, clock, redrive_every=0) as endpoint:
        request = AWSRequest(
            "POST",
            f"{endpoint.url}/",
            data=b"Action=CreateQueue&QueueName=queried&Version=2012-11-05",
            headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
        )
        SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "sqs", "us-west-1").add_auth(request)
        prepared = request.prepare()
        connection = http.client.HTTPConnection(urlsplit(endpoint.url).netloc, timeout=30)
        try:
            lowered = {k.lower(): v for k, v in prepared.headers.items()}
            connection.request("POST", "/", body=prepared.body, headers=lowered)
            answer = connection.getresponse()
            assert answer.status == 200 and b"<QueueUrl>" in answer.read()
        finally:
            connection.close()
        assert names(sqs_client(endpoint.url, region_name="us-west-1")) == ["queried"]
        assert names(sqs_client(endpoint.url)) == []


def test_regions_on_object_storage_are_kept_apart_and_found_after_a_restart(s3, clock):
    root = f"{s3.new_bucket()}/queues"

    def served(every: float) -> SqsEndpoint:
        broker = Broker(None, root, storage_options=s3.options, clock=clock)
        return SqsEndpoint(broker, port=0, access_keys=KEYS, redrive_every=every)

    with served(0) as endpoint:
        west = sqs_client(endpoint.url, region_name="us-west-2")
        west.create_queue(QueueName="kept")
        sqs_client(endpoint.url).create_queue(QueueName="home")
        assert names(west) == ["kept"]
    regional = Broker(None, f"{root}/regions/us-west-2", storage_options=s3.options)
    assert regional.list_queues() == ["kept"]
    with served(0.2) as endpoint:  # no client of us-west-2: its queues are found all the same
        deadline = time.monotonic() + 60
        while len(endpoint.regions.pass_brokers()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(endpoint.regions.pass_brokers()) == 2
