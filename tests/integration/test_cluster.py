"""A real standalone cluster: master, worker and executors in their own JVMs, driver in its own process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.servers import spark_env, standalone_cluster

pytestmark = pytest.mark.usefixtures("quick_drivers")

DRIVER = Path(__file__).with_name("cluster_driver.py")


def test_send_receive_delete_and_the_worker_loop_on_a_standalone_cluster(tmp_path):
    with standalone_cluster(tmp_path / "cluster") as master:
        run = subprocess.run(
            [sys.executable, str(DRIVER), master, str(tmp_path / "root")],
            capture_output=True,
            text=True,
            timeout=600,
            env=spark_env(tmp_path / "cluster"),
            cwd=Path(__file__).parents[2],
        )
    assert run.returncode == 0, run.stderr[-5000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])

    assert seen["master"] == master
    assert seen["executor_jvms"] >= 1
    assert (seen["sent"], seen["received"], seen["distinct_bodies"]) == (500, 200, 200)
    assert (seen["deleted"], seen["consumed"]) == (200, 300)
    assert seen["result_rows"] == seen["distinct_results"] == 300
    assert seen["streamed"] == seen["distinct_streamed"] == 500
    assert seen["left"] == seen["in_flight"] == 0
