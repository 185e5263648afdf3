"""Fair queues: a standard queue's `group_id` names a tenant, and while one tenant holds more than
its share of the in-flight messages a receive serves the quiet tenants first. The rule alone,
then the native engine on real tables (threads included) and boto3 through the endpoint; no JVM
(the Spark engine's receive is tested in tests/integration/test_claim.py)."""

from __future__ import annotations

import math
import threading
import time
from collections import Counter

import pytest

from sparkqueue import Broker, Queue
from sparkqueue.endpoint import SqsEndpoint
from sparkqueue.engine.messages import claim, tenants
from sparkqueue.limits import RECENT_SECONDS, TENANT_SOON_SECONDS
from sparkqueue.rules.fairness import TenantView, judge, suspect
from tests.raw_http import sqs_client
from tests.unit.endpoint_stub import KEYS


@pytest.fixture(autouse=True)
def count_at_every_receive(monkeypatch):
    """A broker counts its tenants at most once a second, beside its receives; here at every
    receive, by the receive itself, so that each test sees what its last step did."""
    monkeypatch.setattr(tenants, "TENANT_RECOUNT_SECONDS", 0.0)
    monkeypatch.setattr(tenants, "TENANT_SOON_SECONDS", 0.0)
    monkeypatch.setattr(tenants, "TENANT_STALE_SECONDS", 0.0)


def send(queue: Queue, group: str | None, count: int, prefix: str = "") -> None:
    queue.send_batch([{"body": f"{prefix or group}-{i}", "group_id": group} for i in range(count)])


def bodies(messages) -> list[str]:
    return sorted(message.body for message in messages)


@pytest.mark.parametrize(
    ("in_flight", "noisy"),
    [
        ({"a": 30}, ("a",)),  # alone, at the least count
        ({"a": 29}, ()),  # too few of its own, and no backlog to hold back
        ({"a": 30, "b": 300}, ("b",)),  # a holds less than a tenth
        ({"a": 30, None: 270}, ()),  # exactly a tenth is not more than a tenth
        ({"a": 60, "b": 30, "c": 31}, ("b", "c", "a")),  # fewest in flight first
        ({None: 500}, ()),  # messages without a group are tenants of their own
    ],
)
def test_a_tenant_is_noisy_above_a_tenth_of_the_in_flight_with_thirty_of_its_own(in_flight, noisy):
    assert judge(in_flight, {}, TenantView(), None)[0] == noisy


def test_a_tenant_with_a_backlog_is_noisy_by_its_recent_share_of_the_consumers_time():
    before = TenantView(shares=(("a", 0.3),))
    noisy, shares = judge({"a": 10, None: 20}, {"a": 3}, before, 1.0)  # a third, a second on
    assert noisy == ("a",)
    weight = 1 - math.exp(-1.0 / RECENT_SECONDS)
    assert shares["a"] == pytest.approx((1 - weight) * 0.3 + weight / 3)
    assert judge({"a": 10, None: 20}, {}, before, 1.0)[0] == ()  # nothing waiting: not held back
    assert judge({"a": 1, None: 99}, {"a": 3}, TenantView(), None)[0] == ()  # a small share
    assert judge({"a": 1}, {"a": 3}, TenantView(), None)[0] == ()  # one in flight in all: no share
    stale = TenantView(shares=(("a", 1.0),))  # counted an hour ago: nothing of it is recent
    assert judge({"a": 0, None: 40}, {"a": 3}, stale, 3600.0)[0] == ()


def test_a_noisy_tenant_stays_noisy_while_its_backlog_and_some_of_its_share_last():
    before = TenantView(noisy=("a",), shares=(("a", 0.08),))
    assert judge({"a": 3, "b": 40}, {"a": 3}, before, 1.0)[0] == ("a", "b")
    assert judge({"a": 3, "b": 40}, {"a": 0}, before, 1.0)[0] == ("b",)  # no backlog
    starved = TenantView(noisy=("a",), shares=(("a", 0.04),))  # under half a tenth
    assert judge({"a": 0, "b": 40}, {"a": 3}, starved, 1.0)[0] == ("b",)


def test_a_share_near_an_even_one_is_not_noisy_though_over_a_tenth():
    """Busy consumers: nine quiet tenants beside a noisy one held back each hold a ninth of the
    in-flight messages (over a tenth) and have a backlog; only the noisy one is noisy. With two
    tenants, one holding nine tenths is."""
    quiet = {f"q{i}": 4 for i in range(9)}
    before = TenantView(noisy=("loud",), shares=(("loud", 0.3), *((q, 0.11) for q in quiet)))
    waiting = {tenant: 3 for tenant in (*quiet, "loud")}
    assert judge({**quiet, "loud": 0}, waiting, before, 1.0)[0] == ("loud",)
    assert judge({"a": 9, "b": 1}, {"a": 3, "b": 1}, TenantView(), None)[0] == ("a",)
    assert judge({"a": 7, "b": 3}, {"a": 3, "b": 1}, TenantView(), None)[0] == ()  # near even


def test_a_second_noisy_tenant_stays_held_beside_a_longer_backlog():
    """Two tenants held back, one with ten times the other's backlog: both stay noisy while
    their backlogs are longer than the quiet tenants'."""
    quiet = {f"q{i}": 4 for i in range(8)}
    before = TenantView(noisy=("loud", "loud2"), shares=(("loud", 0.2), ("loud2", 0.08)))
    waiting = {**dict.fromkeys(quiet, 2), "loud": 5_000, "loud2": 500}
    noisy, _ = judge({**quiet, "loud": 2, "loud2": 2}, waiting, before, 1.0)
    assert set(noisy) == {"loud", "loud2"}


def test_a_tenant_judged_noisy_in_a_busy_moment_is_let_go_with_a_backlog_like_the_others():
    """q0 was judged noisy; now it holds its even share of the in-flight messages and a few
    waiting like every quiet tenant, beside the noisy one's long backlog: only that one stays."""
    quiet = {f"q{i}": 4 for i in range(9)}
    before = TenantView(noisy=("q0", "loud"), shares=(("loud", 0.3), *((q, 0.12) for q in quiet)))
    waiting = {**dict.fromkeys(quiet, 3), "loud": 1_000}
    assert judge({**quiet, "loud": 0}, waiting, before, 1.0)[0] == ("loud",)


def test_quiet_tenants_are_served_before_a_noisy_tenants_older_backlog(broker):
    queue = broker.create_queue("work", visibility_timeout=600)
    send(queue, "loud", 60)
    held = bodies(queue.receive(30))
    assert len(held) == 30  # loud: 30 in flight, all of them
    send(queue, "calm", 3)
    send(queue, None, 2, prefix="plain")  # without a group: a tenant of its own, never noisy
    assert bodies(queue.receive(5)) == ["calm-0", "calm-1", "calm-2", "plain-0", "plain-1"]

    stats = queue.stats()
    assert (stats.noisy_groups, stats.quiet_in_flight, stats.quiet_visible) == (1, 5, 0)
    assert (stats.visible, stats.in_flight) == (30, 35)

    # With no quiet message visible the noisy tenant is served as usual.
    more = bodies(queue.receive(3))
    assert len(more) == 3 and all(body.startswith("loud-") and body not in held for body in more)


def test_a_tenant_alone_is_noisy_and_still_gets_full_receives(broker):
    queue = broker.create_queue("work", visibility_timeout=600)
    send(queue, "a", 50)
    assert len(queue.receive(10)) == 10  # the first receive meets the tenant
    assert len(queue.receive(20)) == 20  # 30 in flight, all of them its own
    assert queue.stats().noisy_groups == 1
    assert len(queue.receive(20)) == 20  # alone in the backlog, it gets full receives
    assert queue.stats().visible == 0


def test_of_several_noisy_tenants_the_least_busy_comes_first(broker):
    """Within the shard a receive reads (all of them here: one shard), after the quiet ones."""
    queue = broker.create_queue("work", visibility_timeout=600, shards=1)
    send(queue, "big", 60)
    assert len(queue.receive(60)) == 60
    send(queue, "big", 10, prefix="big-more")  # older than small's: first by age alone
    send(queue, "small", 40)
    assert len(queue.receive(30)) == 30  # big is noisy: small's messages first
    assert queue.stats().noisy_groups == 2  # big: 60 in flight, small: 30
    assert all(body.startswith("small-") for body in bodies(queue.receive(4)))


def test_a_quiet_message_older_than_the_newest_files_is_still_found(broker, clock):
    """A receive reads quiet tenants' messages among the newest files and from the oldest one
    the count found: here one sent an hour before the flood, and visible again after it."""
    queue = broker.create_queue("work", visibility_timeout=600)
    send(queue, "early", 1)
    [early] = queue.receive(1, visibility_timeout=7200)
    clock.advance(3600)
    send(queue, "loud", 80)
    assert all(body.startswith("loud-") for body in bodies(queue.receive(40)))
    queue.change_visibility(early.receipt_handle, 0)
    assert bodies(queue.receive(1)) == ["early-0"]  # quiet, though far older than the flood


def test_a_quiet_message_visible_again_since_the_count_is_received_before_the_next(
    broker, clock, monkeypatch
):
    """Counted while it was in flight, it is older than the ids the quiet read looks at; with no
    noisy message visible either, the receive still finds it rather than answer nothing."""
    queue = broker.create_queue("work")
    send(queue, "loud", 40)
    assert len(queue.receive(40, visibility_timeout=7200)) == 40
    send(queue, "calm", 1)
    assert bodies(queue.receive(1, visibility_timeout=5)) == ["calm-0"]
    clock.advance(4)
    assert queue.receive(1) == []  # counted: calm in flight, loud noisy
    monkeypatch.setattr(tenants, "TENANT_RECOUNT_SECONDS", 3600.0)  # no count until the end
    clock.advance(2)  # calm is visible again
    assert bodies(queue.receive(1)) == ["calm-0"]


def test_tenants_are_counted_only_on_a_queue_whose_messages_carry_groups(broker, monkeypatch):
    counted: list[str] = []
    counting = claim.count_tenants
    monkeypatch.setattr(
        claim, "count_tenants", lambda *a: counted.append(a[1].name) or counting(*a)
    )
    plain, tenanted = broker.create_queue("plain"), broker.create_queue("tenanted")
    send(plain, None, 20, prefix="p")
    send(tenanted, "t", 20)
    for _ in range(4):
        plain.receive(2)
        tenanted.receive(2)
    assert counted == ["tenanted"] * 3  # from the receive after the first that met a group


@pytest.fixture
def views(monkeypatch) -> tuple[tenants.TenantViews, list[float]]:
    """A queue's views as a broker keeps them (counted beside the receives once there is a
    recent count), on a clock of the test's (`now[0]`), the queue's messages carrying groups."""
    monkeypatch.setattr(tenants, "TENANT_RECOUNT_SECONDS", 1.0)
    monkeypatch.setattr(tenants, "TENANT_SOON_SECONDS", TENANT_SOON_SECONDS)
    monkeypatch.setattr(tenants, "TENANT_STALE_SECONDS", 5.0)
    now = [0.0]
    kept = tenants.TenantViews(clock=lambda: now[0])
    kept.saw_groups("t")
    return kept, now


def test_a_count_due_while_the_last_is_recent_runs_beside_the_receive(views):
    views, now = views
    first, second, third = (TenantView(noisy=(name,)) for name in "abc")
    assert views.of("t", lambda *last: first) is first  # the first count: the caller's own
    started, release = threading.Event(), threading.Event()

    def slow(before: TenantView, elapsed: float | None) -> TenantView:
        assert (before, elapsed) == (first, 2.0)
        started.set()
        release.wait(10)
        return second

    now[0] = 2.0  # due, and the last still recent
    assert views.of("t", slow) is first  # at once, with the last view
    assert started.wait(10)
    assert views.of("t", lambda *last: third) is first  # one count at a time
    release.set()
    deadline = time.monotonic() + 10
    while views.last("t")[0] is not second:
        assert time.monotonic() < deadline
        release.wait(0.01)
    now[0] = 20.0  # stale: the caller counts
    assert views.of("t", lambda *last: third) is third


def test_a_count_beside_the_receives_that_fails_leaves_the_last_view(views):
    views, now = views
    first, second = TenantView(noisy=("a",)), TenantView(noisy=("b",))
    assert views.of("t", lambda *last: first) is first
    failed = threading.Event()

    def failing(*last) -> TenantView:
        failed.set()
        raise OSError("the store did not answer")

    now[0] = 2.0
    assert views.of("t", failing) is first  # the receive goes on
    assert failed.wait(10)
    deadline = time.monotonic() + 10
    while views.of("t", lambda *last: second) is not second:  # counted again, beside
        assert time.monotonic() < deadline
        failed.wait(0.01)
    assert views.last("t")[0] is second


def test_a_count_that_suspects_a_flood_comes_again_sooner(views, monkeypatch):
    """A tenant that starts to flood is judged once it has a backlog at a count: after a view
    marked `soon`, the next count is due after TENANT_SOON_SECONDS, not a whole second (the
    counts here by the caller, in order)."""
    views, now = views
    monkeypatch.setattr(tenants, "TENANT_STALE_SECONDS", 0.0)
    soon, settled = TenantView(soon=True), TenantView()

    def count(view: TenantView) -> TenantView:
        views.saw_groups("t")  # a read met a group since: a count is wanted when due
        return views.of("t", lambda *last: view)

    assert count(soon) is soon
    now[0] = TENANT_SOON_SECONDS / 2
    assert count(settled) is soon  # not due yet
    now[0] = TENANT_SOON_SECONDS
    assert count(settled) is settled  # due sooner
    now[0] += TENANT_SOON_SECONDS
    assert count(soon) is settled  # a settled view waits its whole second
    now[0] = TENANT_SOON_SECONDS + 1.0
    assert count(soon) is soon


@pytest.mark.parametrize(
    ("in_flight", "backlog", "noisy", "suspected"),
    [
        ({"b": 10}, {"a": 80, "b": 10, "c": 10}, (), True),  # a: over a busy share (1.5 / 3)
        ({"b": 10}, {g: 50 for g in "abcdefghij"}, (), False),  # even backlogs, however long
        ({"b": 10}, {"a": 80, "b": 10, "c": 10}, ("a",), False),  # judged: the usual second
        ({"a": 5, "b": 5}, {}, (), False),  # no backlog: nothing to hold back
        ({"b": 10}, {"a": 9, "b": 1}, (), False),  # a few messages waiting
        ({"b": 9}, {"a": 80, "b": 10}, (), False),  # too few in flight for `judge` to act
        ({"a": 10}, {"a": 100}, (), False),  # a tenant alone
        ({"b": 10}, {"a": 10, None: 100}, (), False),  # a hundred without a group: tenants too
    ],
)
def test_a_tenant_holding_a_busy_share_of_the_backlog_is_suspect(
    in_flight, backlog, noisy, suspected
):
    assert suspect(in_flight, backlog, noisy) is suspected


def test_a_count_comes_soon_after_the_first_and_while_a_tenant_is_suspect(broker):
    queue = broker.create_queue("work", visibility_timeout=600, shards=1)  # oldest first
    send(queue, "a", 3)
    send(queue, "b", 3)
    ctx = queue._ctx
    record, now = ctx.record("work"), ctx.now()
    first = claim.count_tenants(ctx, record, now, TenantView(), None)
    assert (first.noisy, first.soon) == ((), True)  # a first count: the next soon
    send(queue, "b", 12)
    send(queue, "a", 12)
    assert len(queue.receive(10)) == 10  # in flight: a 3, b 7; waiting: a 12, b 8
    even = claim.count_tenants(ctx, record, now, first, TENANT_SOON_SECONDS)
    assert (even.noisy, even.soon) == ((), False)  # no busy share of the backlog: a second
    send(queue, "a", 60)  # waiting: a 72 of 80
    suspected = claim.count_tenants(ctx, record, now, even, TENANT_SOON_SECONDS)
    assert (suspected.noisy, suspected.soon) == ((), True)
    assert len(queue.receive(30)) + len(queue.receive(30)) == 60  # a: 55 of the 70 in flight
    loud = claim.count_tenants(ctx, record, now, suspected, TENANT_SOON_SECONDS)
    assert (loud.noisy, loud.soon) == (("a",), False)  # judged: the usual second


def test_threads_on_a_fair_queue_take_every_message_once(broker):
    """Two brokers' threads (each broker counts its own tenants and reads quiet messages from
    every shard, so they meet on the same ones), beside a producer of quiet tenants."""
    other = Broker(None, broker.root, clock=broker.context.clock)
    queue = broker.create_queue("work", visibility_timeout=600)
    send(queue, "loud", 120)
    sent = [f"loud-{i}" for i in range(120)]
    taken: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def consume(owner: Broker) -> None:
        mine = owner.get_queue("work")
        while not stop.is_set():
            got = mine.receive(10)
            with lock:
                taken.extend(m.body for m in got)
            if got:
                mine.delete_batch([m.receipt_handle for m in got])

    def produce() -> None:
        for round_ in range(10):
            group = f"calm{round_ % 4}"
            send(queue, group, 5, prefix=f"{group}-{round_}")
            with lock:
                sent.extend(f"{group}-{round_}-{i}" for i in range(5))

    consumers = [
        threading.Thread(target=consume, args=(b,)) for b in (broker, broker, other, other)
    ]
    producer = threading.Thread(target=produce)
    for thread in [*consumers, producer]:
        thread.start()
    producer.join()
    while queue.stats().visible or queue.stats().in_flight:
        stop.wait(0.05)
    stop.set()
    for thread in consumers:
        thread.join()
    counts = Counter(taken)
    assert sorted(counts) == sorted(sent)  # nothing lost
    assert max(counts.values()) == 1  # nothing twice


def test_message_group_ids_make_tenants_through_the_endpoint(tmp_path, clock):
    broker = Broker(None, str(tmp_path / "root"), clock=clock)
    with SqsEndpoint(broker, port=0, access_keys=KEYS, redrive_every=0) as endpoint:
        sqs = sqs_client(endpoint.url)
        url = sqs.create_queue(QueueName="tenants")["QueueUrl"]
        for batch in range(4):
            entries = [
                {"Id": str(i), "MessageBody": f"loud-{batch}-{i}", "MessageGroupId": "loud"}
                for i in range(10)
            ]
            sqs.send_message_batch(QueueUrl=url, Entries=entries)
        for _ in range(3):
            sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600)
        sqs.send_message(QueueUrl=url, MessageBody="calm", MessageGroupId="calm")
        [message] = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=1, MessageSystemAttributeNames=["MessageGroupId"]
        )["Messages"]
    assert message["Body"] == "calm"
    assert message["Attributes"]["MessageGroupId"] == "calm"
