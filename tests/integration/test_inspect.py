"""stats() and purge()."""

from __future__ import annotations

from sparkqueue import QueueStats
from tests.integration.conftest import both_engines


@both_engines
def test_stats_counts_each_state(broker, clock):
    broker.create_queue("dlq")
    queue = broker.create_queue("counted", dead_letter_queue="dlq", max_receive_count=1)
    assert queue.stats() == QueueStats(0, 0, 0, 0.0, 0)
    queue.send_batch(["a", "b", "c"])
    queue.send("later", delay_seconds=100)
    clock.advance(10)
    [held] = queue.receive(1, visibility_timeout=20)
    stats = queue.stats()
    assert (stats.visible, stats.in_flight, stats.delayed) == (2, 1, 1)
    assert stats.oldest_age_seconds == 10.0
    clock.advance(20)  # `held` used its one receive: it now waits for the dead-letter move
    stats = queue.stats()
    assert (stats.visible, stats.in_flight, stats.awaiting_dead_letter) == (2, 0, 1)
    assert held.receive_count == 1


@both_engines
def test_purge_deletes_everything_and_counts(queue):
    queue.send_batch(["a", "b", "c"])
    queue.receive(1)
    assert queue.purge() == 3
    assert queue.stats() == QueueStats(0, 0, 0, 0.0, 0)
    assert queue.purge() == 0


@both_engines
def test_peek_shows_the_oldest_or_the_newest_first(queue, clock):
    for body in ("first", "second", "third"):
        queue.send(body)
        clock.advance(1)
    assert [m["body"] for m in queue.peek(2)] == ["first", "second"]
    assert [m["body"] for m in queue.peek(2, newest=True)] == ["third", "second"]
