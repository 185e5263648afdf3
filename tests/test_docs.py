"""The README's examples, the demo job and the notebooks run as written."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

from sparkqueue.demo import run_demo

REPO = Path(__file__).resolve().parents[1]


def readme_examples() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_readme_examples_run_in_order(spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    examples = readme_examples()
    assert len(examples) >= 4
    namespace: dict[str, object] = {}
    for example in examples:
        exec(compile(example, "README.md", "exec"), namespace)


def test_demo_runs_every_step(spark, tmp_path):
    lines: list[str] = []
    run_demo(spark, str(tmp_path / "demo"), say=lines.append)
    assert any(line.startswith("back after their timeouts") for line in lines)
    assert "in_flight=1" in lines[-1]  # only the message extended to 120 s is still held


@pytest.mark.parametrize(
    "notebook", sorted((REPO / "notebooks").glob("*.py")), ids=lambda p: p.name
)
def test_notebooks_run_locally(spark, notebook):
    runpy.run_path(str(notebook), run_name="__main__")
