"""The installed `sparkqueue` command, run as a subprocess against a local root.

One call runs on the embedded local session (a JVM of its own, ~20 s); the rest reach a Spark
Connect server started here through $SPARK_REMOTE, so each costs a Python start, not a JVM.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkqueue import Broker
from tests.integration.servers import connect_server

COMMAND = str(Path(sys.executable).with_name("sparkqueue"))
NOT_FOUND, BAD_INPUT = 3, 4


class Cli:
    """Runs `sparkqueue ... --root ROOT` (or another `where`) with a given environment."""

    def __init__(self, root: Path, env: dict[str, str], warehouse: Path) -> None:
        self.root, self.env, self.warehouse = str(root), env, warehouse
        self.where = ["--root", self.root]

    def args(self, *args: str) -> list[str]:
        return [COMMAND, *args, *self.where]

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.args(*args), input=stdin, capture_output=True, text=True, env=self.env, timeout=300
        )

    def json(self, *args: str, stdin: str | None = None) -> object:
        done = self.run(*args, "--json", stdin=stdin)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    def fails(self, code: int, *args: str, stdin: str | None = None) -> dict[str, str]:
        done = self.run(*args, "--json", stdin=stdin)
        assert done.returncode == code, (done.returncode, done.stdout, done.stderr[-3000:])
        return json.loads(done.stdout)["error"]


def quiet_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SPARKQUEUE_")}
    env.pop("SPARK_REMOTE", None)
    return {**env, **extra}


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> Iterator[Cli]:
    work = tmp_path_factory.mktemp("cli-connect")
    with connect_server(work) as url:
        root = tmp_path_factory.mktemp("cli-root")
        yield Cli(root, quiet_env(SPARK_REMOTE=url), work / "warehouse")


def without_java(env: dict[str, str]) -> dict[str, str]:
    """The environment with no Java to find: a command that started a JVM would fail."""
    path = os.pathsep.join(
        folder for folder in env["PATH"].split(os.pathsep) if not (Path(folder) / "java").exists()
    )
    return {**{k: v for k, v in env.items() if k != "JAVA_HOME"}, "PATH": path}


def test_commands_on_a_root_run_natively_without_java_in_about_a_second(spark, tmp_path):
    env = without_java(quiet_env(SPARKQUEUE_ROOT=str(tmp_path)))
    walls = []
    for args in (["create", "local-made"], ["send", "local-made", "hi"], ["stats", "local-made"]):
        started = time.monotonic()
        done = subprocess.run(
            [COMMAND, *args, "--json"], capture_output=True, text=True, env=env, timeout=300
        )
        walls.append(time.monotonic() - started)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stderr == ""  # stdout holds the JSON alone
    assert json.loads(done.stdout)["visible"] == 1
    assert Broker(spark, str(tmp_path), engine="spark").list_queues() == ["local-made"]
    print(f"native CLI commands, wall seconds: {[round(w, 2) for w in walls]}")
    assert max(walls) < 10  # the bar is 2 s on an idle machine; CI runs tests beside it


def test_spark_commands_run_on_the_embedded_session_quietly(tmp_path):
    env = quiet_env(SPARKQUEUE_ROOT=str(tmp_path))
    done = subprocess.run(
        [COMMAND, "redrive", "--json"], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == []  # stdout holds the JSON alone
    assert done.stderr == ""  # Ivy's report and Spark's warnings went to the JVM's log file


def test_piped_output_keeps_every_value_whole(cli):
    cli.json("create", "piped")
    body = "a long body that a terminal table would wrap " * 5
    cli.json("send", "piped", body)
    done = cli.run("peek", "piped")  # stdout is a pipe here, not a terminal
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = done.stdout.splitlines()
    record = json.loads(line)
    assert record["body"] == body and len(record["message_id"]) == 36
    assert body in done.stdout  # one line: grep finds it


def test_queues_are_created_filled_inspected_and_deleted(cli, tmp_path):
    assert cli.json("create", "work-dlq")["name"] == "work-dlq"
    made = cli.json(
        "create", "work", "--visibility-timeout", "60",
        "--dead-letter-queue", "work-dlq", "--max-receive-count", "1",
    )  # fmt: skip
    assert (made["visibility_timeout"], made["dead_letter_queue"]) == (60, "work-dlq")

    assert cli.json("send", "work", "one")["sent"] == 1
    lines = tmp_path / "lines.txt"
    lines.write_text("two\nthree\n")
    assert cli.json("send", "work", "--file", str(lines))["sent"] == 2
    assert cli.json("send", "work", stdin="four\nfive\n")["sent"] == 2
    objects = '{"body": "six", "attributes": {"kind": "test"}}\n{"body": "seven"}\n'
    assert cli.json("send", "work", "--json-lines", stdin=objects)["sent"] == 2

    [row] = [q for q in cli.json("queues") if q["name"] == "work"]
    assert (row["visible"], row["in_flight"]) == (7, 0)
    assert (
        cli.json(
            "attributes", "work", "--set", "delay_seconds=0", "--set", "visibility_timeout=90"
        )["visibility_timeout"]
        == 90
    )
    peeked = cli.json("peek", "work", "-n", "3")
    bodies = [m["body"] for m in peeked]  # oldest first (one send's messages in any order)
    assert bodies[0] == "one" and set(bodies[1:]) == {"two", "three"}

    taken = cli.json("receive", "work", "-n", "2", "--delete")
    assert len(taken) == 2 and all(m["receive_count"] == 1 for m in taken)
    assert cli.json("stats", "work")["visible"] == 5

    # received once with no timeout left, they are exhausted: the redrive pass dead-letters them
    assert len(cli.json("receive", "work", "-n", "10", "--visibility-timeout", "0")) == 5
    [moved] = [q for q in cli.json("redrive") if q["queue"] == "work"]
    assert moved["moved_to_dead_letter"] == 5
    assert len(cli.json("dead-letters", "work-dlq")) == 5
    assert cli.json("dead-letters", "work-dlq", "--move-back")["moved"] == 5
    assert cli.json("stats", "work")["visible"] == 5

    depth = tmp_path / "depth.png"
    assert cli.json("metrics", "--png", str(depth))[-1]["queue"] in {"work", "work-dlq"}
    assert depth.read_bytes().startswith(b"\x89PNG")

    assert cli.json("purge", "work")["purged"] == 5
    cli.json("delete", "work")
    assert "work" not in [q["name"] for q in cli.json("queues")]


def test_bad_input_is_one_clear_error_with_its_own_exit_code_and_writes_nothing(cli):
    cli.json("create", "strict")
    assert cli.fails(NOT_FOUND, "stats", "missing")["code"] == "QueueDoesNotExist"
    assert (
        "colour" in cli.fails(BAD_INPUT, "attributes", "strict", "--set", "colour=red")["message"]
    )
    error = cli.fails(BAD_INPUT, "send", "strict", "--json-lines", stdin='{"body": "ok"}\n{oops\n')
    assert error["code"] == "InvalidParameterValue" and "line 2" in error["message"]
    assert cli.fails(BAD_INPUT, "create", "no spaces")["code"] == "InvalidParameterValue"
    assert cli.json("stats", "strict")["visible"] == 0  # the good first line was not sent either
    plain = cli.run("stats", "missing")  # without --json: one line on stderr
    assert plain.returncode == NOT_FOUND and plain.stdout == ""
    assert "QueueDoesNotExist" in plain.stderr.strip().splitlines()[-1]


def test_watch_and_every_run_until_interrupted(cli):
    cli.json("create", "watched")
    outputs = []
    processes = [
        subprocess.Popen(
            cli.args(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli.env, text=True
        )
        for args in (("stats", "watched", "--watch", "0.5"), ("redrive", "--every", "1"))
    ]

    def passes() -> int:  # the metrics' rows so far (none yet: an error that says so)
        done = cli.run("metrics", "--queue", "watched", "--json")
        return len(json.loads(done.stdout)) if done.returncode == 0 else 0

    deadline = time.monotonic() + 180  # the start-up, then passes: as long as a busy run takes
    while passes() < 2 and time.monotonic() < deadline:
        time.sleep(1)  # --every's passes, on the wall clock (no visibility timeout here)
    for process in processes:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err[-3000:]
        outputs.append(out)
    assert "in_flight" in outputs[0]  # the refreshing table was drawn
    assert len(cli.json("metrics", "--queue", "watched")) >= 2  # --every ran passes


def test_a_catalog_schema_instead_of_a_root(cli):
    """The server's catalog finds a schema that another process made in its warehouse."""
    (cli.warehouse / "cli_queues.db").mkdir(parents=True)  # what CREATE SCHEMA cli_queues leaves
    in_catalog = Cli(Path(cli.root), cli.env, cli.warehouse)
    in_catalog.where = ["--catalog", "spark_catalog.cli_queues"]
    assert in_catalog.json("create", "tasks")["name"] == "tasks"
    assert in_catalog.json("send", "tasks", "hello")["sent"] == 1
    [row] = in_catalog.json("queues")
    assert (row["name"], row["visible"]) == ("tasks", 1)
    assert "tasks" not in {row["name"] for row in cli.json("queues")}  # not on the root

    both = Cli(Path(cli.root), cli.env, cli.warehouse)
    both.where = ["--root", cli.root, "--catalog", "spark_catalog.cli_queues"]
    assert "give one" in both.fails(BAD_INPUT, "queues")["message"]
    missing = Cli(Path(cli.root), cli.env, cli.warehouse)
    missing.where = ["--catalog", "spark_catalog.not_there"]
    assert missing.fails(NOT_FOUND, "queues")["code"] == "SchemaDoesNotExist"


def test_bench_passes_its_options_through(cli):
    done = cli.run("bench", "--help")
    assert done.returncode == 0 and "--smoke" in done.stdout


def test_the_cli_pages_bash_examples_run_as_written(cli, tmp_path):
    """docs/cli.md's ```bash blocks, line for line, in a fresh folder (```sh ones need a catalog)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", page, flags=re.DOTALL)
    assert blocks
    env = {**cli.env, "PATH": f"{Path(COMMAND).parent}{os.pathsep}{cli.env['PATH']}"}
    for block in blocks:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, (block, done.stderr[-3000:])
    made = Cli(tmp_path / "demo-root", cli.env, cli.warehouse)  # the root the examples exported
    [orders] = [row for row in made.json("queues") if row["name"] == "orders"]
    assert (orders["visible"], orders["in_flight"]) == (0, 0)  # 4 sent, 4 received and deleted
