"""Every kind of fault a store's network makes, on every operation whose commit is Spark's
(`send_df`, `receive_df`, `delete_df`, the redrive pass's moves), on S3 (moto's server, S3A and
the conditional log store) and Azure (Azurite, ABFS on the Blob endpoint), through the
fault-injecting proxy: a Spark driver (tests/integration/spark_faults.py) whose session reaches
both stores through a proxy each arms a fault for each operation's commit. Each operation must
succeed and have happened once (nothing lost, nothing handed out twice, nothing dead-lettered
undelivered). The native operations' matrix is tests/unit/test_store_faults.py.

A Spark operation through the proxy takes 3-15 s, so the default run takes the one kind whose
outcome rests on sparkqueue's own code (`DEFAULT_KINDS`): an answer lost after the store acted,
which the conditional log store (S3) and a claim's search for its handles (Azure) settle. The
others (a reset, a 503, a 500, a stall past the client's timeout, slow answers) are S3A's and
ABFS's own retries: `pytest tests/integration/test_spark_store_faults.py --fault-kinds all` runs
every kind (about seven minutes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from sparkqueue.bench.faults import fault_proxy
from tests.fault_cases import fault_kinds

pytestmark = pytest.mark.usefixtures("quick_drivers")

REPO = Path(__file__).resolve().parents[2]
STALL_SECONDS = 30.0  # far past the clients' timeouts below: a stall the client outlasted shows
# ABFS's retries' backoff (ms): its default, 3 s a retry, would only make the test slow
BACKOFF = {
    "spark.hadoop.fs.azure.io.retry.min.backoff.interval": "100",
    "spark.hadoop.fs.azure.io.retry.backoff.interval": "100",
}
# For a stall: S3A's (the AWS SDK for Java's) request and socket timeouts, ABFS's read timeout
# (ms), each shorter than the stall
TIMEOUTS = {
    "spark.hadoop.fs.s3a.connection.request.timeout": "5s",
    "spark.hadoop.fs.s3a.connection.timeout": "5s",
    "spark.hadoop.fs.azure.http.read.timeout": "5000",
}
OPERATIONS = {"send_df", "receive_df", "delete_df", "redrive_move"}
DEFAULT_KINDS = ("lose",)


@pytest.fixture
def kinds(request) -> list[str]:
    return fault_kinds(request.config, DEFAULT_KINDS)


def test_spark_operations_succeed_once_under_each_fault(s3, azure, kinds):
    with (
        fault_proxy(s3.url, stall_seconds=STALL_SECONDS) as s3_proxy,
        fault_proxy(azure.url, stall_seconds=STALL_SECONDS) as azure_proxy,
    ):
        s3_options = {**s3.options, "AWS_ENDPOINT_URL": s3_proxy.url}
        azure_options = {**azure.options, "AZURITE_BLOB_STORAGE_URL": azure_proxy.url}
        stores = [
            {
                "name": "s3",
                "proxy": s3_proxy.url,
                "options": s3_options,
                "roots": {kind: f"{s3.new_bucket()}/queues" for kind in kinds},
            },
            {
                "name": "azure",
                "proxy": azure_proxy.url,
                "options": azure_options,
                "roots": {kind: f"{azure.new_container('abfs')}/queues" for kind in kinds},
            },
        ]
        plan = {
            "options": {**s3_options, **azure_options},
            "conf": {**BACKOFF, **(TIMEOUTS if "stall" in kinds else {})},
            "stores": stores,
            "kinds": kinds,
        }
        done = subprocess.run(
            [sys.executable, "-m", "tests.integration.spark_faults", json.dumps(plan)],
            capture_output=True,
            text=True,
            cwd=REPO,
            # delta-rs reads Azurite's address from the environment; a local session, whatever
            # server SPARK_REMOTE may name
            env={**{k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}, **azure_options},
            timeout=120 + 90 * len(kinds),
            check=False,
        )
        tallies = {"s3": s3_proxy.tally(), "azure": azure_proxy.tally()}
        puts = {"s3": s3_proxy.log_puts(), "azure": azure_proxy.log_puts()}
    assert done.returncode == 0, done.stderr[-6000:]
    print(done.stdout)  # the outcomes and seconds, for `-s`
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    outcomes = {(line["store"], line["kind"], line["operation"]): line for line in lines}
    assert len(outcomes) == 2 * len(kinds) * len(OPERATIONS), done.stdout
    failed = {key: line["outcome"] for key, line in outcomes.items() if line["outcome"] != "ok"}
    assert not failed, (failed, done.stderr[-6000:])
    assert all(line["met"] for line in lines), [
        key for key, line in outcomes.items() if not line["met"]
    ]
    engines = {key: line["engines"] for key, line in outcomes.items()}
    assert all(each == ["spark"] for each in engines.values()), engines  # Spark's commits alone
    stalled = {key: line["seconds"] for key, line in outcomes.items() if key[1] == "stall"}
    assert all(seconds < STALL_SECONDS for seconds in stalled.values()), stalled  # timed out
    for store, answered in puts.items():  # either engine's, set-ups included
        assert answered and all(put["conditional"] for put in answered), store
        written = Counter(put["key"] for put in answered if put["status"] < 300)
        assert max(written.values()) == 1, (store, written.most_common(3))  # none twice
    for store, tally in tallies.items():
        for kind in kinds:
            assert tally[kind] >= len(OPERATIONS), (store, tally)
    print(json.dumps({store: dict(Counter(tally)) for store, tally in tallies.items()}))
