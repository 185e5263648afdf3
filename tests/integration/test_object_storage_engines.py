"""Both engines on one queue on S3 (moto's server, tests/s3_server.py): native processes receive
and delete while a Spark job (a process with a session from `spark_session(storage_options=...)`)
sends DataFrames, claims them with `receive_df`, deletes them with `delete_df` and runs the
redrive pass, and both kinds are killed with SIGKILL at random moments. Afterwards every message
is accounted for, none was handed out twice within its visibility window, no Delta log version was
written twice, every commit of either engine was a conditional put, and both engines committed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from sparkqueue import Broker
from sparkqueue.bench.reckoning import DEAD_LETTERS, QUEUE
from sparkqueue.errors import InvalidParameterValue
from tests.integration.helpers import engines_through_kills

pytestmark = pytest.mark.usefixtures("quick_drivers")

REPO = Path(__file__).resolve().parents[2]


def test_both_engines_share_a_queue_on_s3_through_kills(s3, tmp_path):
    root = f"{s3.new_bucket()}/queues"
    engines_through_kills(root, tmp_path / "records", s3.options, seed=38)

    puts = s3.log_puts(root)
    assert puts and all(put["conditional"] for put in puts)  # both engines' commits
    written = Counter(put["key"] for put in puts if put["status"] == 200)
    assert max(written.values()) == 1  # no version written twice
    infos = _commit_infos(s3, root, [QUEUE, DEAD_LETTERS])
    engines = Counter(_engine(info) for info in infos)
    assert engines["spark"] > 0 and engines["delta-rs"] > 0, engines
    spark_transactions = Counter(info["txnId"] for info in infos if _engine(info) == "spark")
    assert max(spark_transactions.values()) == 1  # none committed twice


def test_a_spark_session_broker_on_s3_serves_messages_natively_and_dataframes_in_spark(s3):
    """Also when S3 stores a Spark commit but its answer is lost: the log store finds its own
    write there (by its write id) instead of taking the version for another's, so no
    transaction is committed twice. And when both engines append to the queue at once (a native
    thread and Spark's send_df; S3 refuses the loser of a version, several times a run here),
    every message lands once."""
    root = f"{s3.new_bucket()}/queues"
    s3.lose_answers(2, "aws-sdk-java")  # S3A's (the AWS SDK for Java's) puts, not delta-rs's
    script = textwrap.dedent(
        f"""
        import json, sys
        from sparkqueue import Broker, spark_session

        options = json.loads(sys.argv[1])
        spark = spark_session(storage_options=options)
        broker = Broker(spark, {root!r}, storage_options=options)
        assert broker.engine == "native", broker.engine
        queue = broker.create_queue("jobs", shards=2)  # upkeep compacts shard by shard
        queue.send("one by one")
        queue.send_df(spark.createDataFrame([("a",), ("b",)], "body string"))
        claimed = queue.receive_df(10)
        bodies = sorted(row.body for row in claimed.collect())
        assert bodies == ["a", "b", "one by one"], bodies
        deleted = queue.delete_df(claimed)
        assert not deleted.failed and len(deleted.successful) == 3, deleted
        assert queue.receive(10) == []

        # Both engines append to one table at once: S3 refuses whichever loses a version.
        import threading
        def natively():
            for i in range(40):
                queue.send_batch([f"n{{i}}-{{j}}" for j in range(5)])
        sender = threading.Thread(target=natively)
        sender.start()
        for i in range(3):
            queue.send_df(spark.createDataFrame([(f"s{{i}}-{{j}}",) for j in range(5)], "body string"))
        sender.join()
        assert queue.stats().visible == 40 * 5 + 3 * 5, queue.stats()

        # A claim's proof reads the log entries since its read on S3 too (each append touched
        # some shard; none touched a shard the queue does not have).
        from sparkqueue.store.spark_log import commits_touching
        location = broker.context.record("jobs").location
        latest = broker.storage.version(location)
        every = [str(shard) for shard in range(2)]
        assert commits_touching(broker.storage, location, latest - 3, latest, "shard", every) == 3
        assert commits_touching(broker.storage, location, latest - 3, latest, "shard", ["99"]) == 0

        # Spark's compaction on S3 (the redrive pass's upkeep, through the pass's own lease) waits
        # while another process holds the table's compaction lease (delta-rs would commit a
        # compaction read beside Spark's from one version too).
        from datetime import UTC, datetime
        from sparkqueue.services.redrive import Redrive
        from sparkqueue.services.settings import UpkeepSettings
        def compactions():
            history = broker.context.native.open(location).history()
            return sum(entry["operation"] == "OPTIMIZE" for entry in history)
        keep_up, record = Redrive(broker.context)._keep_up, broker.context.record("jobs")
        with broker.context.native.compacting(location, lambda: datetime.now(UTC)) as held:
            assert held is not None
            keep_up(record, UpkeepSettings(), datetime.now(UTC))
        assert compactions() == 0
        keep_up(record, UpkeepSettings(), datetime.now(UTC))
        assert compactions() > 0

        # The "sparkqueue" format on S3: its Python workers reach the queue natively, with the
        # store's settings as storage.<key> options.
        import tempfile
        def on_s3(builder):
            builder = builder.format("sparkqueue").option("root", {root!r}).option("queue", "jobs")
            for key, value in options.items():
                builder = builder.option(f"storage.{{key}}", value)
            return builder
        rows = spark.createDataFrame([("w1",), ("w2",)], "body string")
        on_s3(rows.write).mode("append").save()
        local = tempfile.mkdtemp()
        (on_s3(spark.readStream).option("maxMessagesPerTrigger", 150).load()
            .writeStream.format("delta").option("checkpointLocation", f"{{local}}/checkpoint")
            .trigger(availableNow=True).start(f"{{local}}/sink").awaitTermination())
        streamed = spark.read.format("delta").load(f"{{local}}/sink")
        assert streamed.select("message_id").distinct().count() == streamed.count() == 217
        assert queue.stats().visible == queue.stats().in_flight == 0, queue.stats()
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(s3.options)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    puts = s3.log_puts(root)
    assert sum(put["lost"] for put in puts) == 2
    assert all(put["conditional"] for put in puts)
    stored = Counter(put["key"] for put in puts if put["status"] == 200)
    assert max(stored.values()) == 1  # the refused (412) lost their version and retried
    spark_commits = [info for info in _commit_infos(s3, root) if _engine(info) == "spark"]
    transactions = Counter(info["txnId"] for info in spark_commits)
    assert spark_commits and max(transactions.values()) == 1, transactions


def test_a_session_with_deltas_own_s3_log_store_keeps_the_native_engine_out(spark, s3):
    """Delta's default S3 log store writes a version without a conditional put: a broker given
    such a session refuses the native engine beside it, and says how to fix it."""
    root = f"{s3.new_bucket()}/queues"
    with pytest.raises(InvalidParameterValue, match="spark_session\\(storage_options"):
        Broker(spark, root, storage_options=s3.options)
    with pytest.raises(InvalidParameterValue, match="conditional puts"):
        Broker(spark, root, engine="native")


def _commit_infos(s3, root: str, names: list[str] | None = None) -> list[dict]:
    """The commitInfo of every log version under the root (of the named queues' tables)."""
    bucket, prefix = root.removeprefix("s3://").split("/", 1)
    client = s3.client()
    infos = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            key = item["Key"]
            if not re.search(r"/_delta_log/\d{20}\.json$", key):
                continue
            if names is not None and not any(f"/queues/{name}-" in key for name in names):
                continue
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
            lines = (json.loads(line) for line in body.splitlines() if line)
            infos += [line["commitInfo"] for line in lines if "commitInfo" in line]
    return infos


def _engine(info: dict) -> str:
    return "spark" if "Spark" in (info.get("engineInfo") or "") else "delta-rs"
