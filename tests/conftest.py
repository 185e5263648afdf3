"""Marks every test under tests/integration as `spark` (it needs a JVM): `pytest -m "not spark"`
runs the JVM-free unit tests alone, in seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

INTEGRATION = Path(__file__).with_name("integration")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION in Path(item.path).parents:
            item.add_marker(pytest.mark.spark)
