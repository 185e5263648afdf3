"""The README's examples, the demo job and the notebooks run as written."""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from sparkqueue import Broker

REPO = Path(__file__).resolve().parents[2]


def examples(document: str) -> list[str]:
    """A document's ```python blocks (```py marks the few that need a remote server)."""
    text = (REPO / document).read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


@pytest.mark.parametrize(
    ("document", "blocks"),
    [
        ("README.md", 8),
        ("docs/operations.md", 2),
        ("docs/how-it-works.md", 1),
        ("docs/catalog.md", 1),
        ("docs/endpoint.md", 1),
    ],
)
def test_a_documents_examples_run_in_order(spark, tmp_path, monkeypatch, document, blocks):
    monkeypatch.chdir(tmp_path)  # anything written to a relative path lands in a temporary folder
    found = examples(document)
    assert len(found) == blocks
    namespace: dict[str, object] = {}
    for example in found:
        exec(compile(example, document, "exec"), namespace)


DEMO_LINES = (  # what each of the demo's own lines starts with, in order
    "queues under ", "per-message operations run on the native engine", "sent 4 messages", "received [", "deleted ", "extended ", "shortened ",
    "released ", "back after their timeouts: ", "deleted 2 in one batch",
)  # fmt: skip


def test_the_demo_job_prints_its_own_lines_and_nothing_else(spark, tmp_path):
    """The README's first command, as a new user runs it (`spark` first: the jars are cached)."""
    done = subprocess.run(
        [sys.executable, str(REPO / "jobs" / "demo.py"), "--root", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""  # Spark's and Ivy's console went to the JVM's log file
    lines = done.stdout.splitlines()
    assert len(lines) == len(DEMO_LINES)
    for line, start in zip(lines, DEMO_LINES, strict=True):
        assert line.startswith(start), (line, start)
    assert "in_flight=1" in lines[-1]  # only the message extended to 120 s is still held


def run_notebook(name: str) -> dict[str, object]:
    return runpy.run_path(str(REPO / "notebooks" / name), run_name="__main__")


def test_quickstart_notebook_runs_locally(spark):
    run_notebook("quickstart.py")


def test_producer_consumer_and_operations_notebooks_run_end_to_end(spark, tmp_path, monkeypatch):
    """In catalog mode (the quickstart covers a root): queues and results as catalog tables."""
    chart = tmp_path / "depth.png"
    spark.sql(f"CREATE SCHEMA notebook_queues LOCATION '{tmp_path / 'notebook_queues.db'}'")
    for name, value in {
        "CATALOG": "spark_catalog.notebook_queues",
        "ORDERS": "100",
        "VISIBILITY_TIMEOUT": "0",  # rejected orders come straight back, no waiting
        "MOVE_BACK": "yes",
        "CHART": str(chart),
    }.items():
        monkeypatch.setenv(f"SPARKQUEUE_{name}", value)

    try:
        run_notebook("producer.py")
        consumer = run_notebook("consumer.py")
        operations = run_notebook("operations.py")
        results = spark.read.table(consumer["results_table"]).count()
        left = operations["broker"].get_queue("orders").stats().visible
    finally:
        spark.sql("DROP SCHEMA notebook_queues CASCADE")

    assert consumer["report"].deleted == 98  # orders 7 and 57 have negative amounts
    assert consumer["results_table"] == "spark_catalog.notebook_queues.orders_results"
    assert results == 98
    assert operations["report"].moved_to_dead_letter == 2
    assert left == 2  # moved back
    assert chart.stat().st_size > 0


def test_the_stream_consumer_notebook_drains_a_queue_into_delta(spark, tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    Broker(spark, root).create_queue("orders").send_batch([f"order {n}" for n in range(12)])
    monkeypatch.setenv("SPARKQUEUE_ROOT", root)
    monkeypatch.setenv("SPARKQUEUE_MAX_MESSAGES_PER_TRIGGER", "5")
    notebook = run_notebook("stream_consumer.py")
    drained = spark.read.format("delta").load(notebook["results"])
    assert sorted(row.body for row in drained.collect()) == sorted(f"order {n}" for n in range(12))
    assert Broker(None, root).get_queue("orders").stats().in_flight == 0
