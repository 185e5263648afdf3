"""Group commit: callers of one driver share commits, and each still gets exactly its own outcome."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

from sparkqueue import Broker
from sparkqueue.engine.rounds import standard
from sparkqueue.engine.rounds.requests import Ask
from sparkqueue.rules import handles

from .helpers import run_threads


def parsed(queue, messages):
    record = queue._ctx.record(queue.name)
    return [handles.parse(record.secret, m.receipt_handle) for m in messages]


def test_one_round_deletes_extends_and_claims_for_several_callers(broker, clock, statement):
    queue = broker.create_queue("shared", visibility_timeout=30)
    queue.send_batch([f"m{i}" for i in range(8)])
    deleting, extending, superseded = queue.receive(3, visibility_timeout=10)
    [stale] = queue.receive(1, visibility_timeout=0)
    assert broker.redrive().released == 1  # the stale handle is void now; its message visible

    ctx = queue._ctx.quick
    record = ctx.record(queue.name)
    [delete_ref, extend_ref, _] = parsed(queue, [deleting, extending, superseded])
    [stale_ref] = parsed(queue, [stale])
    asks = [
        Ask(retire=(delete_ref,)),
        Ask(changes=((extend_ref, 100),)),
        Ask(wanted=2, timeout=20),
        Ask(retire=(stale_ref,)),  # superseded: reported, and the rest still applies
        Ask(wanted=5, timeout=50),
    ]
    answers = standard.run(ctx, record, asks)

    assert answers[0].superseded == frozenset() and answers[3].superseded == {stale.message_id}
    assert answers[1].changed == {extend_ref.handle: None}
    short, long_ = answers[2].claimed, answers[4].claimed
    claimed = {m.message_id for m in short + long_}
    assert len(short) == 2 and len(claimed) == len(short) + len(long_)  # nobody shares a message
    assert deleting.message_id not in claimed and extending.message_id not in claimed
    # 8 sent, 3 held before the round; a message that a delete of the round names is not claimed
    assert len(claimed) == 4 and stale.message_id not in claimed
    assert queue.stats().visible == 1

    clock.advance(20)  # the 20 s claims come back, the 50 s ones and the extended one do not
    back = {m.message_id for m in queue.receive(10, visibility_timeout=600)}
    assert back == {m.message_id for m in short} | {superseded.message_id, stale.message_id}
    clock.advance(31)
    again = queue.receive(10, visibility_timeout=600)
    assert {m.message_id for m in again} == {m.message_id for m in long_}
    clock.advance(50)  # 101 s after the round: the extension ran out too
    assert [m.message_id for m in queue.receive(10)] == [extending.message_id]


def test_a_message_deleted_and_extended_in_one_round_is_deleted(broker, statement):
    """Two callers name one message (a MERGE cannot meet one row twice: the round takes the
    UPDATE): the delete applies, the extension reports the message gone."""
    queue = broker.create_queue("both", visibility_timeout=30)
    queue.send_batch(["a", "b"])
    [held] = queue.receive(1)
    [ref] = parsed(queue, [held])
    ctx = queue._ctx.quick
    deleted, extended, claimed = standard.run(
        ctx,
        ctx.record(queue.name),
        [Ask(retire=(ref,)), Ask(changes=((ref, 100),)), Ask(wanted=5, timeout=30)],
    )

    assert deleted.superseded == frozenset()
    error = extended.changed[ref.handle]
    assert error is not None and error.code == "ReceiptHandleIsInvalid"
    assert [m.body for m in claimed.claimed] == [{"a": "b", "b": "a"}[held.body]]
    assert queue.stats().visible == 0 and queue.stats().in_flight == 1


def test_eight_threads_mixing_operations_share_commits_and_lose_nothing(broker):
    """Receives, deletes, visibility changes and heartbeats from 8 threads through one committer:
    every message deleted exactly once, none held by two callers at once, fewer commits than
    operations."""
    queue = broker.create_queue("mixed", visibility_timeout=600)
    sent = set(queue.send_batch([f"job {i}" for i in range(48)]))
    holders: dict[str, str] = {}  # message id -> the thread holding it now
    lock = threading.Lock()
    deleted: list[str] = []
    operations = Counter()

    def worker(name: str) -> None:
        rng = random.Random(name)
        empty = 0
        while empty < 2:
            messages = queue.receive(rng.randint(1, 4), visibility_timeout=600)
            operations["receive"] += 1
            if not messages:
                empty += 1
                continue
            empty = 0
            with lock:
                for m in messages:
                    assert m.message_id not in holders, f"{m.message_id} held by two callers"
                    holders[m.message_id] = name
            kind = rng.choice(["delete", "visibility", "heartbeat", "release"])
            if kind == "visibility":
                outcome = queue.change_visibility_batch([(m.receipt_handle, 900) for m in messages])
                assert not outcome.failed, outcome.failed
                operations["change_visibility"] += 1
            elif kind == "heartbeat":
                with queue.heartbeat(messages, visibility_timeout=600, interval=0.2):
                    threading.Event().wait(0.5)  # long enough for an extension or two
                operations["heartbeat"] += 1
            elif kind == "release":  # gives one back at once; someone receives it again
                released, *messages = messages
                with lock:
                    del holders[released.message_id]
                queue.change_visibility(released.receipt_handle, 0)
                operations["change_visibility"] += 1
            if messages:
                with lock:
                    for m in messages:
                        del holders[m.message_id]
                result = queue.delete_batch([m.receipt_handle for m in messages])
                assert not result.failed, result.failed
                operations["delete"] += 1
                with lock:
                    deleted.extend(m.message_id for m in messages)

    run_threads([lambda n=f"t{i}": worker(n) for i in range(8)])

    assert sorted(deleted) == sorted(sent), "every message deleted exactly once"
    stats = queue.stats()
    assert stats.visible + stats.in_flight == 0
    record = queue._ctx.record(queue.name)
    committer = queue._ctx.commits.of(record.location, len)
    assert committer.carried >= sum(operations.values())  # heartbeats add their extensions
    assert committer.rounds < committer.carried  # commits were shared
    print(f"operations {dict(operations)}; rounds {committer.rounds} for {committer.carried}")


def test_a_heartbeat_keeps_a_three_second_timeout_on_a_real_clock(spark, tmp_path):
    """Real time on purpose (the heartbeat's schedule is what is tested): another consumer
    polls all the while, through the same committer, and never gets the message."""
    queue = Broker(spark, str(tmp_path / "real-clock")).create_queue(
        "beating", visibility_timeout=3
    )
    queue.send("warm-up")  # a queue's first claim is slower: it would eat much of 3 s
    queue.delete(queue.receive(1)[0].receipt_handle)
    queue.send("long work")
    [message] = queue.receive(1)  # the timeout runs from the claim's start: ~1 s is gone
    stolen: list[str] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            stolen.extend(m.message_id for m in queue.receive(1))

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        with queue.heartbeat([message], visibility_timeout=3, interval=2.5) as beat:
            time.sleep(12)  # four timeouts' worth of work
    finally:
        stop.set()
        poller.join()
    assert stolen == []
    assert beat.beats >= 4
    queue.delete(message.receipt_handle)  # still this receive's handle: never superseded


def test_a_stale_handle_beside_the_current_one_never_voids_the_delete(broker, clock):
    """One ask holding a superseded handle and the current one of a message: the message is
    deleted, as a round of its own does (the round used to keep one handle per message)."""
    queue = broker.create_queue("stale", visibility_timeout=30)
    queue.send("only")
    [stale] = queue.receive(1, visibility_timeout=0)
    [current] = queue.receive(1)
    ctx = queue._ctx.quick
    [stale_ref, current_ref] = parsed(queue, [stale, current])
    [answer] = standard.run(ctx, ctx.record(queue.name), [Ask(retire=(current_ref, stale_ref))])
    assert answer.superseded == frozenset()
    assert queue.stats().in_flight == 0 and queue.stats().visible == 0


def test_callers_naming_one_message_get_what_rounds_of_their_own_give(broker, clock):
    """A delete with a superseded handle and one with the current handle, and a heartbeat and a
    release of one handle, each pair queued behind a slow round so that they could share the
    next: each caller's outcome is the one it gets alone, in the order they asked."""
    queue = broker.create_queue("pairs", visibility_timeout=30)
    queue.send("deleted")
    [stale] = queue.receive(1, visibility_timeout=0)
    [current] = queue.receive(1)
    assert stale.message_id == current.message_id
    queue.send("released")
    [other] = queue.receive(1)
    record = queue._ctx.record(queue.name)
    committer = queue._ctx.commits.of(record.location, len)
    outcomes: dict[str, object] = {}

    def call(name: str, action) -> None:
        try:
            outcomes[name] = action()
        except Exception as error:
            outcomes[name] = error.code

    def in_line(*calls) -> None:
        """The calls, each on a thread, queued one after the other behind a slow receive."""
        before = committer.rounds
        leader = threading.Thread(target=lambda: queue.receive(10, wait_time_seconds=0))
        leader.start()
        while committer.rounds == before:  # the receive leads a round now
            time.sleep(0.001)
        threads = []
        for name, action in calls:
            threads.append(threading.Thread(target=call, args=(name, action)))
            threads[-1].start()
            time.sleep(0.05)
        for thread in [leader, *threads]:
            thread.join(60)

    in_line(
        ("current", lambda: queue.delete(current.receipt_handle)),
        ("stale", lambda: queue.delete(stale.receipt_handle)),
    )
    assert outcomes["current"] is None  # deleted; the stale handle then finds nothing to void
    in_line(
        ("heartbeat", lambda: queue.change_visibility(other.receipt_handle, 600)),
        ("release", lambda: queue.change_visibility(other.receipt_handle, 0)),
    )
    assert outcomes["heartbeat"] is None and outcomes["release"] is None
    assert [m.body for m in queue.receive(10)] == ["released"]  # the release came last
