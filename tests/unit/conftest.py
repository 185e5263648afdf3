"""Unit tests run first (see pyproject's testpaths) and must never start a JVM."""

from __future__ import annotations

import pytest
from pyspark import SparkContext

from sparkqueue import Broker
from sparkqueue.testing import FakeClock


@pytest.fixture(autouse=True)
def no_jvm():
    yield
    assert SparkContext._gateway is None, "a unit test started a JVM; it belongs in integration"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def broker(tmp_path, clock) -> Broker:
    """A broker of the native engine alone: no Spark session, no JVM."""
    return Broker(None, str(tmp_path / "root"), clock=clock)
