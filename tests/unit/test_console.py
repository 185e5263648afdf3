"""The web console over HTTP, as a browser (or an attacker's page) speaks to it: a real endpoint
with `console=True` on a native broker, requests written by http.client with the headers each
case needs. Every security claim of console/app.py is tried here; tests/unit/test_console_browser.py
clicks through the pages in Chromium."""

from __future__ import annotations

import base64
import http.client
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import boto3
import pytest

from sparkqueue import Broker
from sparkqueue.endpoint import AccessKeys, SqsEndpoint
from tests.processes import REPO, stop
from tests.raw_http import ACCESS_KEY, REGION, SECRET_KEY

FORM = "application/x-www-form-urlencoded"
COMMAND = str(Path(sys.executable).with_name("sparkqueue"))
HOSTILE = "<script>alert('owned')</script>\n" + "y" * 5000
REPRS = (">True<", ">False<", ">None<", " True ", " False ", " None ")


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    text: str


class Browser:
    """Requests with a cookie jar of one cookie, as a browser keeps for the console."""

    def __init__(self, port: int, host: str | None = None) -> None:
        self.port = port
        self.host = host or f"127.0.0.1:{port}"
        self.cookie: str | None = None

    def request(
        self, method: str, path: str, form: dict | list | None = None, **headers: str
    ) -> Answer:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        body = urlencode(form, doseq=True).encode() if form is not None else None
        sent = {"Host": self.host, **{k.replace("_", "-"): v for k, v in headers.items()}}
        if body is not None:
            sent.setdefault("Content-Type", FORM)
        if self.cookie is not None:
            sent.setdefault("Cookie", self.cookie)
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        answer = Answer(
            response.status,
            {k.lower(): v for k, v in response.getheaders()},
            response.read().decode("utf-8", "replace"),
        )
        connection.close()
        if "set-cookie" in answer.headers:
            self.cookie = answer.headers["set-cookie"].split(";")[0]
        return answer

    def get(self, path: str, **headers: str) -> Answer:
        return self.request("GET", path, **headers)

    def csrf(self, path: str = "/console/") -> str:
        page = self.get(path)
        assert page.status == 200, page.text
        return re.search(r'name="csrf" value="([^"]+)"', page.text)[1]

    def post(self, path: str, form: dict, *, csrf: bool = True, **headers: str) -> Answer:
        fields = {**form, "csrf": self.csrf()} if csrf else form
        return self.request("POST", path, fields, **headers)


@pytest.fixture
def served(broker: Broker) -> Iterator[SqsEndpoint]:
    with SqsEndpoint(
        broker, port=0, access_keys=AccessKeys({}), redrive_every=0, console=True
    ) as endpoint:
        yield endpoint


@pytest.fixture
def signed(broker: Broker) -> Iterator[SqsEndpoint]:
    keys = AccessKeys({ACCESS_KEY: SECRET_KEY})
    with SqsEndpoint(broker, port=0, access_keys=keys, redrive_every=0, console=True) as endpoint:
        yield endpoint


def test_pages_show_queues_and_a_hostile_body_as_text(broker, served):
    broker.create_queue("dlq")
    queue = broker.create_queue("work", dead_letter_queue="dlq", max_receive_count=1)
    binary = base64.b64encode(b"\x00\xff<script>").decode()
    message_id = queue.send(
        HOSTILE,
        attributes={"note": "<img src=x onerror=alert(1)>", "blob": binary},
        attribute_types={"blob": "Binary"},
    )
    browser = Browser(served.port)

    overview = browser.get("/console/")
    page = browser.get("/console/queues/work")
    timeline = browser.get(f"/console/queues/work/messages/{message_id}")

    assert overview.status == page.status == timeline.status == 200
    assert "work" in overview.text and "dlq" in overview.text
    assert "<script>alert" not in page.text and "&lt;script&gt;alert" in page.text
    assert "<img src=x" not in page.text and "&lt;img src=x onerror=alert(1)&gt;" in page.text
    assert f"(Binary, 10 B) {binary}" in page.text
    shown = 300 - HOSTILE.index("y")  # a long body is cut to 300 characters in a table
    assert "y" * shown + "…" in page.text and "y" * (shown + 1) not in page.text
    assert "sent" in timeline.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert page.headers["x-frame-options"] == "DENY"
    cookie = overview.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/console" in cookie


def assert_for_people(answer: Answer) -> None:
    """No Python repr on the page: every value went through the console's formats."""
    for shown in REPRS:
        assert shown not in answer.text, shown
    text = re.sub(r"<[^>]*>", " ", answer.text)  # tokens and handles in attributes are random
    assert re.search(r"\b(True|False|None)\b", text) is None, text


def test_every_page_writes_its_values_for_people(broker, served, clock):
    """Counts, durations, sizes, times and flags as a person reads them, and no page with a
    Python True, False or None: every page, and the fragments the pages refresh."""
    broker.create_queue("dlq", retention_seconds=1_209_600)
    work = broker.create_queue("work", dead_letter_queue="dlq", max_receive_count=1)
    broker.create_queue("orders.fifo", fifo=True, content_based_deduplication=True)
    poison = work.send("poison", attributes={"n": "1"}, attribute_types={"n": "Number"})
    [message] = work.receive(1, visibility_timeout=30)
    work.change_visibility(message.receipt_handle, 120)  # 90 s later: a "moved by" in its history
    clock.advance(121)
    assert broker.redrive().moved_to_dead_letter == 1  # its one receive was its last
    kept = work.send("kept")
    browser = Browser(served.port)

    received = browser.post("/console/queues/work/receive", {"visibility_timeout": "0"})
    pages = {
        path: browser.get(path)
        for path in (
            "/console/", "/console/fragments/queues", "/console/queues/work",
            "/console/queues/dlq", "/console/queues/orders.fifo",
            "/console/queues/dlq/dead-letters", "/console/queues/work/purge",
            f"/console/queues/work/messages/{poison}", f"/console/queues/work/messages/{kept}",
        )
    }  # fmt: skip
    moved = browser.post("/console/queues/dlq/move-back", {"all": "1"})
    deadline = time.monotonic() + 10
    while "Completed" not in (tasks := browser.get("/console/fragments/tasks/dlq")).text:
        assert time.monotonic() < deadline, tasks.text
        time.sleep(0.05)
    missing = browser.get("/console/queues/nowhere")

    assert all(answer.status == 200 for answer in pages.values())
    assert received.status == 200 and moved.status == 303 and missing.status == 404
    for answer in (*pages.values(), received, tasks, missing):
        assert_for_people(answer)
    queue_page = pages["/console/queues/work"].text
    assert "Standard queue · 8 shards" in queue_page
    assert ">4 days<" in queue_page and ">256 KiB<" in queue_page and ">30 s<" in queue_page
    assert ">14 days<" in pages["/console/queues/dlq"].text
    fifo_page = pages["/console/queues/orders.fifo"].text
    assert "FIFO queue" in fifo_page and "content-based deduplication: yes" in fifo_page
    history = pages[f"/console/queues/work/messages/{poison}"].text
    assert "moved by: 1 min 30 s" in history
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC<", history)
    assert "ran out of receives in work (max 1)" in pages["/console/queues/dlq/dead-letters"].text
    assert "Completed: 1 of 1 moved back to their sources" in tasks.text


def test_forms_send_receive_set_attributes_and_purge(broker, served):
    queue = broker.create_queue("work")
    browser = Browser(served.port)

    sent = browser.post("/console/queues/work/send", {"body": "hello", "attributes": "k=v"})
    assert sent.status == 303 and sent.headers["location"] == "/console/queues/work"
    assert "sent " in browser.get("/console/queues/work").text
    received = browser.post(
        "/console/queues/work/receive", {"max_messages": "1", "visibility_timeout": "600"}
    )
    handle = re.search(r'name="receipt_handle" value="([^"]+)"', received.text)[1]
    assert queue.stats().in_flight == 1
    assert browser.post("/console/queues/work/delete", {"receipt_handle": handle}).status == 303
    assert queue.stats().in_flight == 0
    changed = browser.post("/console/queues/work/attributes", {"visibility_timeout": "45"})
    assert changed.status == 303 and queue.attributes["visibility_timeout"] == 45
    queue.send("x")
    confirm = browser.get("/console/queues/work/purge")  # a page, never the purge itself
    assert confirm.status == 200 and queue.stats().visible == 1
    refused = browser.post("/console/queues/work/purge", {"confirm": "other"})
    assert refused.status == 400 and queue.stats().visible == 1
    assert browser.post("/console/queues/work/purge", {"confirm": "work"}).status == 303
    assert queue.stats().visible == 0
    bad = browser.post("/console/queues/work/attributes", {"visibility_timeout": "soon"})
    assert bad.status == 400 and "whole number" in bad.text


def test_a_change_without_the_csrf_token_or_from_another_origin_changes_nothing(broker, served):
    queue = broker.create_queue("work")
    queue.send("keep me")
    browser = Browser(served.port)
    browser.get("/console/")

    no_token = browser.post("/console/queues/work/purge", {"confirm": "work"}, csrf=False)
    wrong = browser.request("POST", "/console/queues/work/purge", {"confirm": "work", "csrf": "x"})
    elsewhere = browser.post(
        "/console/queues/work/purge", {"confirm": "work"}, Origin="http://evil.example"
    )
    as_json = browser.request(
        "POST", "/console/queues/work/purge", {"confirm": "work", "csrf": browser.csrf()},
        Content_Type="text/plain",
    )  # fmt: skip
    malformed = browser.post(
        "/console/queues/work/purge", {"confirm": "work"}, Origin="http://[x"
    )  # no URL: refused, and the server goes on answering
    by_get = browser.get("/console/queues/work/purge?confirm=work")
    stranger = Browser(served.port).post(
        "/console/queues/work/purge", {"confirm": "work"}, csrf=False
    )

    assert [no_token.status, wrong.status, elsewhere.status, as_json.status] == [403, 403, 403, 415]
    assert stranger.status == malformed.status == 403 and by_get.status == 200
    assert queue.stats().visible == 1
    assert browser.request("PUT", "/console/queues/work/purge").status == 501  # not a method here


def test_without_keys_only_loopback_host_names_are_answered(served):
    """A DNS name rebound to 127.0.0.1 carries its own Host: the console does not answer it."""
    assert Browser(served.port, host=f"evil.example:{served.port}").get("/console/").status == 403
    assert Browser(served.port, host=f"localhost:{served.port}").get("/console/").status == 200


def test_with_keys_a_sign_in_is_needed_and_the_secret_checked(broker, signed):
    queue = broker.create_queue("work")
    queue.send("x")
    browser = Browser(signed.port)

    assert browser.get("/console/").headers["location"] == "/console/signin"
    assert browser.get("/console/queues/work").status == 303
    unsigned = browser.request("POST", "/console/queues/work/purge", {"confirm": "work"})
    assert unsigned.status == 403
    wrong = browser.request("POST", "/console/signin", {"key": ACCESS_KEY, "secret": "guess"})
    unknown = browser.request("POST", "/console/signin", {"key": "nobody", "secret": ""})
    assert wrong.status == unknown.status == 403 and browser.cookie is None

    signed_in = browser.request(
        "POST", "/console/signin", {"key": ACCESS_KEY, "secret": SECRET_KEY}
    )
    assert signed_in.status == 303 and "HttpOnly" in signed_in.headers["set-cookie"]
    page = browser.get("/console/")
    assert page.status == 200 and f"Sign out {ACCESS_KEY}" in page.text
    assert_for_people(browser.get("/console/signin"))
    forged = Browser(signed.port, host=browser.host)
    forged.cookie = "sparkqueue_console=made-up"
    assert forged.get("/console/").status == 303
    assert browser.post("/console/signout", {}).status == 303
    assert browser.get("/console/").status == 303  # the old cookie is void
    assert queue.stats().visible == 1


def test_a_secret_is_taken_over_https_or_on_loopback_only(signed):
    """A sign-in posts the secret itself (SigV4 never does): not in the clear across a network."""
    remote = Browser(signed.port, host=f"console.example:{signed.port}")
    answer = remote.request("POST", "/console/signin", {"key": ACCESS_KEY, "secret": SECRET_KEY})
    assert answer.status == 403 and "HTTPS" in answer.text and remote.cookie is None


def test_other_sites_pages_get_nothing_not_even_a_session(broker, served):
    """An <img> or fetch from another site's page, however it names the host: refused at once,
    so it can neither start work (a history read) nor push the real sessions out."""
    broker.create_queue("work")
    browser = Browser(served.port)
    for path in ("/console/", "/console/queues/work/messages/01a2b3c4-0000-7000-8000-000000000000"):
        answer = browser.get(path, Sec_Fetch_Site="cross-site")
        assert answer.status == 403 and "set-cookie" not in answer.headers
    assert browser.get("/console/", Sec_Fetch_Site="same-origin").status == 200


def test_an_emptied_field_clears_the_attribute(broker, served):
    broker.create_queue("dlq")
    queue = broker.create_queue("work", dead_letter_queue="dlq", max_receive_count=3)
    browser = Browser(served.port)
    cleared = {"dead_letter_queue": "", "max_receive_count": ""}
    assert browser.post("/console/queues/work/attributes", cleared).status == 303
    attributes = queue.attributes
    assert attributes["dead_letter_queue"] is None and attributes["max_receive_count"] is None


def test_with_keys_a_stranger_is_refused_before_the_body_is_read(signed):
    """Only the head is sent: the answer comes at once, and the connection closes unread."""
    with socket.create_connection(("127.0.0.1", signed.port), timeout=10) as connection:
        connection.sendall(
            b"POST /console/queues HTTP/1.1\r\nHost: x\r\nContent-Type: " + FORM.encode()
            + b"\r\nContent-Length: 200000\r\n\r\n"
        )  # fmt: skip
        answer = connection.makefile("rb").read()
    assert answer.startswith(b"HTTP/1.1 403") and b"Connection: close" in answer


def test_the_sqs_api_answers_beside_the_console(broker, served):
    broker.create_queue("work")
    sqs = boto3.client(
        "sqs", endpoint_url=served.url, region_name=REGION,
        aws_access_key_id="any", aws_secret_access_key="any",
    )  # fmt: skip
    url = sqs.get_queue_url(QueueName="work")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="over SQS")
    assert "over SQS" in Browser(served.port).get("/console/queues/work").text
    fragment = Browser(served.port).get("/console/fragments/queues")
    assert fragment.status == 200 and "<tr>" in fragment.text and "<html" not in fragment.text


def test_pages_answer_within_200_ms_on_the_native_engine(broker, served):
    """The issue's bar on a local root; a generous bound here (two shared cores), the measured
    figures are the benchmark's (`python -m sparkqueue.bench --only console`)."""
    broker.create_queue("dlq")
    queue = broker.create_queue("work", dead_letter_queue="dlq", max_receive_count=3)
    message_id = queue.send_batch([f"m{i}" for i in range(50)])[0]
    browser = Browser(served.port)
    browser.get("/console/")
    for path in ("/console/", "/console/queues/work", "/console/queues/dlq/dead-letters",
                 f"/console/queues/work/messages/{message_id}", "/console/queues/work/depth.svg"):  # fmt: skip
        started = time.perf_counter()
        assert browser.get(path).status == 200
        assert time.perf_counter() - started < 2.0, path


def test_sparkqueue_console_serves_the_console_alone(tmp_path):
    root = str(tmp_path / "root")
    Broker(None, root).create_queue("work")
    process = subprocess.Popen(
        [COMMAND, "console", "--root", root, "--port", "0"],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = process.stdout.readline()
        port = int(re.search(r"127\.0\.0\.1:(\d+)/console/", line)[1])
        assert "SQS on" not in line
        browser = Browser(port)
        assert "work" in browser.get("/console/").text
        assert browser.request("POST", "/", {"Action": "ListQueues"}).status == 404
    finally:
        stop(process)
