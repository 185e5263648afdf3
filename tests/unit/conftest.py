"""Unit tests run first (see pyproject's testpaths) and must never start a JVM."""

from __future__ import annotations

import pytest
from pyspark import SparkContext


@pytest.fixture(autouse=True)
def no_jvm():
    yield
    assert SparkContext._gateway is None, "a unit test started a JVM; it belongs in integration"
