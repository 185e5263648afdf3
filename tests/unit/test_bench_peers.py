"""The benchmark's peers scenario, tiny: moto's SQS server through the endpoint scenario's loop;
PGMQ, without a DSN, reported as not installed (the run goes on)."""

from __future__ import annotations

from sparkqueue.bench.peers import peers
from sparkqueue.bench.report import table


def test_moto_is_measured_and_pgmq_without_a_dsn_says_not_installed():
    figures = peers(None, endpoint_seconds=0.5, batches=[10], backlog=100, worker_seconds=0.5)
    moto = figures["moto"]
    assert set(moto) == {"http_1", "http_8"}
    assert all(run["messages_per_s"] > 0 and run["send_p50_ms"] > 0 for run in moto.values())
    assert figures["pgmq"] == {
        "missing": "not installed (give --pgmq-dsn or SPARKQUEUE_BENCH_PGMQ_DSN)"
    }
    rows = table({"peers": figures})
    assert rows[0] == (
        "PGMQ on PostgreSQL",
        "not installed (give --pgmq-dsn or SPARKQUEUE_BENCH_PGMQ_DSN)",
        "(peer)",
    )
    assert [what for what, _, _ in rows[1:]] == [
        "moto's SQS server (boto3), 1 client(s): send / receive / delete p50",
        "moto's SQS server (boto3), 8 client(s): send / receive / delete p50",
    ]
