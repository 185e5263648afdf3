"""The Databricks bundle deploys as shipped: every variable has a default and is used, every file it
names exists, and the jobs run what the docs say they run."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from sparkqueue.notebook import parameters

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "databricks.yml"
RESOURCES = sorted((REPO / "resources").glob("*.yml"))
VARIABLE = re.compile(r"\$\{var\.(\w+)\}")


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def jobs() -> dict[str, tuple[Path, dict[str, Any]]]:
    return {
        key: (path, job)
        for path in RESOURCES
        for key, job in load(path)["resources"]["jobs"].items()
    }


def test_every_variable_has_a_default_and_is_used():
    declared = load(BUNDLE)["variables"]
    assert all("default" in spec and spec.get("description") for spec in declared.values())
    used = {name for path in [BUNDLE, *RESOURCES] for name in VARIABLE.findall(path.read_text())}
    assert used == set(declared)


def test_the_bundle_includes_every_resource_and_has_no_placeholders():
    assert load(BUNDLE)["include"] == ["resources/*.yml"] and RESOURCES
    for path in [BUNDLE, *RESOURCES]:
        text = path.read_text()
        assert "your-org" not in text and "node_type_id" not in text, path


def test_every_file_a_job_names_exists_and_the_wheel_is_the_artifact_build():
    build = load(BUNDLE)["artifacts"]["sparkqueue"]["build"]
    for path, job in jobs().values():
        for task in job["tasks"]:
            script = (path.parent / task["spark_python_task"]["python_file"]).resolve()
            assert script.is_file(), script
        for environment in job["environments"]:
            [wheel] = environment["spec"]["dependencies"]
            assert (path.parent / wheel).resolve().parent == REPO / "dist"
            assert "--wheel-dir dist" in build
            assert all(t["environment_key"] == environment["environment_key"] for t in job["tasks"])


def test_the_redrive_job_runs_one_pass_at_a_time_with_the_shipped_settings():
    path, job = jobs()["sparkqueue_redrive"]
    assert job["max_concurrent_runs"] == 1  # passes never overlap on a schedule
    [task] = job["tasks"]
    assert (path.parent / task["spark_python_task"]["python_file"]).resolve() == (
        REPO / "jobs" / "redrive.py"
    )
    arguments = task["spark_python_task"]["parameters"]
    assert "--once" in arguments
    config = arguments[arguments.index("--config") + 1]
    assert config == "${workspace.file_path}/conf/redrive.toml"
    assert (REPO / "conf" / "redrive.toml").is_file()
    flags = {argument for argument in arguments if argument.startswith("--")}
    assert flags <= declared_flags(REPO / "jobs" / "redrive.py")
    assert {"--root", "--catalog"} <= flags  # either form reaches the job


def declared_flags(script: Path) -> set[str]:
    """The options a script's argparse parser declares."""
    return {
        node.args[0].value
        for node in ast.walk(ast.parse(script.read_text()))
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", "") == "add_argument"
        and isinstance(node.args[0], ast.Constant)
    }


def notebook_parameters(path: Path) -> set[str]:
    """The names a notebook asks `parameters(...)` for."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "parameters":
            return {keyword.arg for keyword in node.keywords if keyword.arg}
    raise AssertionError(f"{path} asks for no parameters")


def test_the_consumer_job_passes_exactly_the_notebooks_parameters(monkeypatch):
    path, job = jobs()["sparkqueue_consumer"]
    [task] = job["tasks"]
    notebook = (path.parent / task["spark_python_task"]["python_file"]).resolve()
    arguments = task["spark_python_task"]["parameters"]
    given = {name.removeprefix("--") for name in arguments[::2]}
    assert given == notebook_parameters(notebook)

    monkeypatch.setattr(sys, "argv", ["consumer.py", "--queue", "jobs", "--batch_size", "7"])
    assert parameters(None, queue="orders", batch_size="100", root="/r") == {
        "queue": "jobs",
        "batch_size": "7",
        "root": "/r",
    }


def test_the_stream_consumer_job_passes_exactly_the_notebooks_parameters():
    path, job = jobs()["sparkqueue_stream_consumer"]
    [task] = job["tasks"]
    notebook = (path.parent / task["spark_python_task"]["python_file"]).resolve()
    arguments = task["spark_python_task"]["parameters"]
    assert {name.removeprefix("--") for name in arguments[::2]} == notebook_parameters(notebook)
    assert job["max_concurrent_runs"] == 1  # one query on its checkpoint at a time
